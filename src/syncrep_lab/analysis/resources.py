"""What a cell's repeats asked of the machine beside the CPU, as the results, the costs
and the report show it: each disk and network interface a second of the measured
repeats (run/io_watch.py), and each CPU quota a placement set (placement/quota.py)."""

from __future__ import annotations

from dataclasses import dataclass

from syncrep_lab.json_form import JSON
from syncrep_lab.store import Store, queries


def quota_json(q: queries.QuotaMeans) -> dict[str, JSON]:
    """A role's CPU quota as ``results --json`` and the report show it."""
    return {"instance": q.instance, "node": q.node, "role": q.role, "share": q.share,
            "quota_us": q.quota_us, "period_us": q.period_us, "repeats": q.repeats,
            "periods": q.periods, "throttled": q.throttled,
            "throttled_share": q.throttled_share, "throttled_ms_per_s": q.throttled_ms_per_s}


def _per_s(value: float, seconds: float) -> float | None:
    return value / seconds if seconds > 0 else None


@dataclass(frozen=True)
class DiskRates:
    """A block device over the cell's measured repeats, a second of them ("host" "" is
    this machine); None where the counters ran over no time."""

    host: str
    device: str
    repeats: int
    read_mb_s: float | None
    write_mb_s: float | None
    ios_s: float | None
    busy_share: float | None

    @classmethod
    def of(cls, d: queries.DiskMeans) -> DiskRates:
        return cls(d.host, d.device, d.repeats, _per_s(d.read_bytes / 1e6, d.seconds),
                   _per_s(d.write_bytes / 1e6, d.seconds),
                   _per_s(d.reads + d.writes, d.seconds), d.busy_share)

    def to_json(self) -> dict[str, JSON]:
        return {"host": self.host, "device": self.device, "repeats": self.repeats,
                "read_mb_s": self.read_mb_s, "write_mb_s": self.write_mb_s,
                "ios_s": self.ios_s, "busy_share": self.busy_share}


@dataclass(frozen=True)
class NetRates:
    """A network interface over the cell's measured repeats, a second of them (node ""
    is the host's own namespace; a node's to-PEER its emulated link to PEER)."""

    host: str
    instance: int
    node: str
    interface: str
    repeats: int
    rx_mb_s: float | None
    tx_mb_s: float | None
    rx_packets_s: float | None
    tx_packets_s: float | None

    @classmethod
    def of(cls, n: queries.NetMeans) -> NetRates:
        return cls(n.host, n.instance, n.node, n.interface, n.repeats,
                   _per_s(n.rx_bytes / 1e6, n.seconds), _per_s(n.tx_bytes / 1e6, n.seconds),
                   _per_s(n.rx_packets, n.seconds), _per_s(n.tx_packets, n.seconds))

    def to_json(self) -> dict[str, JSON]:
        return {"host": self.host, "instance": self.instance, "node": self.node,
                "interface": self.interface, "repeats": self.repeats,
                "rx_mb_s": self.rx_mb_s, "tx_mb_s": self.tx_mb_s,
                "rx_packets_s": self.rx_packets_s, "tx_packets_s": self.tx_packets_s}


@dataclass(frozen=True)
class Resources:
    """The disks, the network and the CPU quotas of one cell."""

    disks: list[DiskRates]
    network: list[NetRates]
    quotas: list[queries.QuotaMeans]

    def to_json(self) -> dict[str, JSON]:
        return {"disks": [d.to_json() for d in self.disks],
                "network": [n.to_json() for n in self.network],
                "quotas": [quota_json(q) for q in self.quotas]}


def cell_resources(store: Store, cell_id: int) -> Resources:
    """The disks, the network and the quotas of one cell."""
    return Resources([DiskRates.of(d) for d in queries.disk_means(store, cell_id)],
                     [NetRates.of(n) for n in queries.net_means(store, cell_id)],
                     queries.quota_means(store, cell_id))
