"""What a cell's repeats asked of the machine beside the CPU, as the results, the costs
and the report show it: each disk and network interface a second of the measured
repeats (run/io_watch.py), each CPU quota a placement set (placement/quota.py), and the
delay each emulated link really gave (network/delivery.py)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from syncrep_lab.json_form import JSON
from syncrep_lab.network.delivery import Delivery
from syncrep_lab.store import Store, queries
from syncrep_lab.store.records import ANATOMY, MEASURED, PROBED

KIND_NAMES = {MEASURED: "measured", PROBED: "probed", ANATOMY: "anatomy"}


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


# a delay line late by more than this share of its delay (and LATE_FLOOR_MS) is said to
# have run late: the figures measured through it carry the machine's load
LATE_SHARE = 0.1
LATE_FLOOR_MS = 0.2


@dataclass(frozen=True)
class LinkDelivered:
    """The packets arriving at ``into`` over its emulated link from ``source``, over the
    cell's repeats: the delay asked and what the delay line gave (network/delivery.py),
    the packets' lateness over all of them, by the kind of repeat as well."""

    instance: int
    into: str
    source: str
    asked_ms: float
    repeats: int
    releases: int
    late_mean_ms: float
    late_p99_ms: float | None  # the worst repeat's 99th-percentile bin (upper edge)
    late_p99_beyond: bool  # that bin is past the histogram's last edge
    late_by_kind: dict[str, float]  # "measured", "probed", "anatomy" -> mean lateness

    @property
    def delivered_ms(self) -> float:
        return self.asked_ms + self.late_mean_ms

    @property
    def ran_late(self) -> bool:
        """Late enough that what was measured through the link is not the wire's alone."""
        return self.late_mean_ms > max(LATE_FLOOR_MS, LATE_SHARE * self.asked_ms)

    def line(self) -> str:
        """The end in words, for the costs and the verdicts."""
        p99 = ("" if self.late_p99_ms is None else
               f", 99 % of packets {'over' if self.late_p99_beyond else 'within'} "
               f"{self.late_p99_ms:g} ms late")
        return (f"{self.into} from {self.source}: asked {self.asked_ms:g} ms, delivered "
                f"{self.delivered_ms:.2f} ms ({self.late_mean_ms:+.2f} ms late on average"
                f"{p99})")

    def to_json(self) -> dict[str, JSON]:
        return {"instance": self.instance, "into": self.into, "from": self.source,
                "asked_ms": self.asked_ms, "delivered_ms": self.delivered_ms,
                "repeats": self.repeats, "releases": self.releases,
                "late_mean_ms": self.late_mean_ms, "late_p99_ms": self.late_p99_ms,
                "late_p99_beyond": self.late_p99_beyond, "ran_late": self.ran_late,
                "late_by_kind": dict(self.late_by_kind)}


def link_deliveries(store: Store, cell_id: int) -> list[LinkDelivered]:
    """Each delayed end of the cell's emulated links over its repeats (every kind: the
    anatomy's and the probes' figures were measured through the same lines)."""
    got: dict[tuple[int, str, str], list[tuple[int, Delivery]]] = defaultdict(list)
    for repeat in store.repeats(cell_id):
        for row in queries.links_of(store, repeat.id):
            try:
                ends = json.loads(row.applied_json or "[]")
            except ValueError:
                continue
            for end in ends if isinstance(ends, list) else []:
                window = end.get("repeat") if isinstance(end, dict) else None
                if isinstance(window, dict) and window.get("releases"):
                    got[(row.instance, str(end["endpoint"]), str(end["peer"]))].append(
                        (repeat.probed, Delivery.from_json(window)))
    out = []
    for (instance, into, source), seen in sorted(got.items()):
        kinds: dict[int, list[Delivery]] = defaultdict(list)
        for kind, d in seen:
            kinds[kind].append(d)
        worst = max((d for _, d in seen if d.late_p99_ms is not None),
                    key=lambda d: (d.late_p99_beyond, d.late_p99_ms or 0.0), default=None)
        out.append(LinkDelivered(
            instance, into, source, seen[-1][1].asked_ms, len(seen),
            sum(d.releases for _, d in seen), _late(d for _, d in seen),
            worst.late_p99_ms if worst is not None else None,
            worst.late_p99_beyond if worst is not None else False,
            {KIND_NAMES.get(k, str(k)): _late(ds) for k, ds in sorted(kinds.items())}))
    return out


def _late(windows: Iterable[Delivery]) -> float:
    """The windows' mean lateness of a packet."""
    total = packets = 0.0
    for d in windows:
        total += (d.late_mean_ms or 0.0) * d.packets
        packets += d.packets
    return total / packets if packets else 0.0


@dataclass(frozen=True)
class Resources:
    """The disks, the network, the CPU quotas and the links' delays of one cell."""

    disks: list[DiskRates]
    network: list[NetRates]
    quotas: list[queries.QuotaMeans]
    links: list[LinkDelivered]

    def to_json(self) -> dict[str, JSON]:
        return {"disks": [d.to_json() for d in self.disks],
                "network": [n.to_json() for n in self.network],
                "quotas": [quota_json(q) for q in self.quotas],
                "link_delays": [x.to_json() for x in self.links]}


def cell_resources(store: Store, cell_id: int) -> Resources:
    """The disks, the network, the quotas and the links' delays of one cell."""
    return Resources([DiskRates.of(d) for d in queries.disk_means(store, cell_id)],
                     [NetRates.of(n) for n in queries.net_means(store, cell_id)],
                     queries.quota_means(store, cell_id), link_deliveries(store, cell_id))
