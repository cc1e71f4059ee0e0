"""The delay an emulated link really gave a window (a repeat): the difference of two of
its delay line's ``stats`` (network/delayer.py counts since it started).

A link asked for 2 ms each way is 2 ms only while its delay line gets a CPU when a
packet comes due. On a machine whose other tenants take the CPUs, or whose own vCPUs
are stolen, the line releases late, and every figure measured through the link (the
wait for the standby, its transits) carries the lateness as if it were the wire's. So a
repeat keeps what the link delivered beside what was asked: the packets' mean lateness
(each by its own: after a stall one release frees many packets, each as late as it
was) and the bin of their histogram the 99th percentile falls in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from syncrep_lab.json_form import JSON


@dataclass(frozen=True)
class Delivery:
    """One end of a link over a window: what its delay line released and how late."""

    asked_ms: float  # the delay asked for, one way
    releases: int
    packets: int
    late_mean_ms: float | None  # a packet's; None: nothing was released in the window
    late_p99_ms: float | None  # the upper edge of the bin the 99th percentile is in
    late_p99_beyond: bool  # the 99th percentile is past the last edge (late_p99_ms)

    @property
    def delivered_ms(self) -> float | None:
        """The delay the window's packets had on average: the asked one and the lateness."""
        return None if self.late_mean_ms is None else self.asked_ms + self.late_mean_ms

    def to_json(self) -> dict[str, JSON]:
        return {"asked_ms": self.asked_ms, "delivered_ms": self.delivered_ms,
                "releases": self.releases, "packets": self.packets,
                "late_mean_ms": self.late_mean_ms, "late_p99_ms": self.late_p99_ms,
                "late_p99_beyond": self.late_p99_beyond}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Delivery:
        return cls(float(data["asked_ms"]), int(data["releases"]), int(data["packets"]),
                   data.get("late_mean_ms"), data.get("late_p99_ms"),
                   bool(data.get("late_p99_beyond")))


def delivered(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> Delivery | None:
    """The window between two ``stats`` of one delay line (``before`` None: since it
    started); None where the line's counters do not say (a delay line of an older
    version, or one restarted in between: its counters went back).

    >>> a = {"releases": 10, "accepted": 30, "packet_late_sum_ms": 1.0, "delay_ms": 2,
    ...      "late_bins": [30, 0, 0], "late_edges_ms": [0.1, 0.25]}
    >>> b = {"releases": 110, "accepted": 330, "packet_late_sum_ms": 16.0, "delay_ms": 2,
    ...      "late_bins": [295, 32, 3], "late_edges_ms": [0.1, 0.25]}
    >>> d = delivered(a, b)
    >>> d.releases, d.packets, d.late_mean_ms, d.delivered_ms, d.late_p99_ms
    (100, 300, 0.05, 2.05, 0.25)
    >>> b["late_bins"] = [280, 10, 40]  # 9 % beyond the last edge
    >>> d = delivered(a, b)
    >>> d.late_p99_ms, d.late_p99_beyond
    (0.25, True)
    >>> delivered(b, a) is None
    True
    """
    if "packet_late_sum_ms" not in after or (before is not None
                                             and "packet_late_sum_ms" not in before):
        return None
    zero: dict[str, Any] = {"releases": 0, "accepted": 0, "packet_late_sum_ms": 0.0,
                            "late_bins": [0] * len(after["late_bins"])}
    start: Mapping[str, Any] = before if before is not None else zero
    releases = int(after["releases"]) - int(start["releases"])
    packets = int(after["accepted"]) - int(start["accepted"])
    bins = [int(x) - int(y) for x, y in zip(after["late_bins"], start["late_bins"],
                                            strict=True)]
    if releases < 0 or packets < 0 or min(bins) < 0:
        return None
    edges = [float(e) for e in after["late_edges_ms"]]
    p99: float | None = None
    beyond = False
    counted = sum(bins)
    if counted:
        seen = 0
        for i, n in enumerate(bins):
            seen += n
            if seen >= 0.99 * counted:
                beyond = i >= len(edges)
                p99 = edges[min(i, len(edges) - 1)]
                break
    late = (float(after["packet_late_sum_ms"]) - float(start["packet_late_sum_ms"])) \
        / counted if counted else None
    return Delivery(float(after["delay_ms"]), releases, packets,
                    None if late is None else round(late, 4), p99, beyond)
