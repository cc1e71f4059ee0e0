"""What a cell's repeats asked of the machine beside the CPU, as the results, the costs
and the report show it: each disk and network interface a second of the measured
repeats (run/io_watch.py), and each CPU quota a placement set (placement/quota.py)."""

from __future__ import annotations

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


def disk_json(d: queries.DiskMeans) -> dict[str, JSON]:
    """A block device over the cell's measured repeats, a second of them ("host" "" is
    this machine)."""
    return {"host": d.host, "device": d.device, "repeats": d.repeats,
            "read_mb_s": _per_s(d.read_bytes / 1e6, d.seconds),
            "write_mb_s": _per_s(d.write_bytes / 1e6, d.seconds),
            "ios_s": _per_s(d.reads + d.writes, d.seconds), "busy_share": d.busy_share}


def net_json(n: queries.NetMeans) -> dict[str, JSON]:
    """A network interface over the cell's measured repeats, a second of them (node ""
    is the host's own namespace; a node's to-PEER its emulated link to PEER)."""
    return {"host": n.host, "instance": n.instance, "node": n.node,
            "interface": n.interface, "repeats": n.repeats,
            "rx_mb_s": _per_s(n.rx_bytes / 1e6, n.seconds),
            "tx_mb_s": _per_s(n.tx_bytes / 1e6, n.seconds),
            "rx_packets_s": _per_s(n.rx_packets, n.seconds),
            "tx_packets_s": _per_s(n.tx_packets, n.seconds)}


def cell_resources(store: Store, cell_id: int) -> dict[str, list[dict[str, JSON]]]:
    """The disks, the network and the quotas of one cell, as JSON."""
    return {"disks": [disk_json(d) for d in queries.disk_means(store, cell_id)],
            "network": [net_json(n) for n in queries.net_means(store, cell_id)],
            "quotas": [quota_json(q) for q in queries.quota_means(store, cell_id)]}
