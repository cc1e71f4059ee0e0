"""The command lines that shape a link end, built here and run elsewhere: ``tc`` qdiscs
(``netem`` for delay, jitter and loss, ``tbf`` for the rate) and the ``iptables`` NFQUEUE
rule that hands a link end's arriving packets to its delay line.
"""

from __future__ import annotations

from syncrep_lab.network.commands import exec_prefix
from syncrep_lab.network.links import LinkProfile
from syncrep_lab.network.plan import End

TBF_LATENCY_MS = 50  # the longest a packet may wait in the rate limiter's queue
NETEM_LIMIT = 100_000  # packets netem may hold: enough for 100 ms at 10 Gbit/s
KERNEL_HZ = 250


def tbf(bits: int) -> list[str]:
    """tbf with a burst of 1/HZ of the rate (at least a few packets, at most 32 KiB for slow
    links so that the burst does not swamp the rate) and a 50 ms queue."""
    rate_bytes = bits / 8
    burst = max(int(rate_bytes / KERNEL_HZ), min(32768, max(3200, int(rate_bytes / 50))))
    return ["tbf", "rate", f"{bits}bit", "burst", str(burst), "latency", f"{TBF_LATENCY_MS}ms"]


def netem(p: LinkProfile) -> list[str]:
    args = ["netem", "limit", str(NETEM_LIMIT)]
    if p.delay_ms or p.jitter_ms:
        args += ["delay", f"{round(p.delay_ms * 1000)}us"]
        if p.jitter_ms:
            args.append(f"{round(p.jitter_ms * 1000)}us")
    if p.loss_pct:
        args += ["loss", f"{p.loss_pct:g}%"]
    return args


def qdisc(end: End, *args: str) -> list[str]:
    return ["tc", "-n", end.namespace, "qdisc", *args]


def _rule(end: End) -> list[str]:
    return ["PREROUTING", "-i", end.interface, "-j", "NFQUEUE",
            "--queue-num", str(end.index), "--queue-bypass"]


def iptables(end: End, op: str) -> list[str]:
    return [*exec_prefix(end.namespace), "iptables", "-w", "5", "-t", "mangle", op, *_rule(end)]
