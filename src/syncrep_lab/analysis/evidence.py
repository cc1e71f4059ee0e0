"""How sure a verdict's figures are: each figure with its interval, and the levels of
confidence a rule's thresholds give over that interval.

A rule of analysis/diagnosis.py compares figures with plain thresholds ("a third of
the backends' samples in SyncRep": high). On a point estimate a figure near a threshold
flips the verdict from one sitting to the next: the same stock 18 against a patch that
changed nothing gave 29 % in one cell and 37 % in the other, and two different leading
verdicts. Here each figure carries its interval, and a rule is graded at both ends: the
verdict fires where the interval's favourable end reaches the rule's threshold, and its
confidence is a range ("medium–high") where the interval spans one. Verdicts rank on
the highest level their evidence reaches, so two cells whose evidence overlaps rank
alike, and a tie is said rather than settled by noise.

Where the intervals come from:

- a share of wait samples (probed repeats): Wilson's interval over the sampler's ticks
  (stats/intervals.share_interval), widened to the spread of the per-repeat shares where
  more than one repeat was sampled;
- a per-commit figure (CPU, system calls): its t interval over the repeats (costs);
- the CPUs a cell keeps busy: the spread of the measured repeats' busy CPUs (/proc, no
  probe attached), carried to the fraction of the machine as a relative width.

A figure measured once has no interval: it is its own point, and the rule grades it as
before.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from syncrep_lab.stats.intervals import mean_ci, share_interval
from syncrep_lab.store import Store, queries


@dataclass(frozen=True)
class Figure:
    """A figure a rule reads: its point estimate and the interval around it (equal to
    the point where there is none)."""

    point: float
    low: float
    high: float

    @classmethod
    def exact(cls, value: float) -> Figure:
        return cls(value, value, value)

    @property
    def known(self) -> bool:
        """Whether it has an interval (a figure measured once has not)."""
        return self.low != self.high

    def scaled(self, factor: float) -> Figure:
        return Figure(self.point * factor, self.low * factor, self.high * factor)

    def pct(self) -> str:
        """'33 %', or '33 % (25–41 %)' with its interval."""
        text = f"{100 * self.point:.0f} %"
        return text + (f" ({100 * self.low:.0f}–{100 * self.high:.0f} %)" if self.known
                       else "")


@dataclass(frozen=True)
class Reach:
    """The levels a rule gives at the interval's unfavourable end, at the point and at
    the favourable end (``worst`` is "low" where that end does not fire the rule)."""

    worst: str
    point: str
    best: str


def graded(grade: Callable[..., str | None], *figures: Figure) -> Reach | None:
    """``grade`` (a rule's thresholds: a level, or None where the rule does not fire;
    never lower for larger figures) at both ends of the figures' intervals and at their
    points; None where even the favourable end does not fire."""
    best = grade(*(f.high for f in figures))
    if best is None:
        return None
    return Reach(grade(*(f.low for f in figures)) or "low",
                 grade(*(f.point for f in figures)) or "low", best)


@dataclass
class RepeatWaits:
    """One sampled repeat's wait samples of one node's role."""

    events: dict[str, int] = field(default_factory=dict)  # "IPC:SyncRep" -> samples
    ticks: int = 0

    @property
    def samples(self) -> int:
        return sum(self.events.values())


def wait_samples(store: Store, repeat_ids: Collection[int]
                 ) -> dict[tuple[str, str], list[RepeatWaits]]:
    """Per node and role, each sampled repeat's wait samples and ticks."""
    per: dict[tuple[str, str], dict[int, RepeatWaits]] = defaultdict(dict)
    for repeat_id, w in queries.waits_of(store, repeat_ids):
        seen = per[(w.node, w.role)].setdefault(repeat_id, RepeatWaits())
        key = f"{w.wait_type}:{w.wait_event}"
        seen.events[key] = seen.events.get(key, 0) + w.samples
        seen.ticks = max(seen.ticks, w.ticks)
    return {k: list(v.values()) for k, v in per.items()}


def share_figure(repeats: list[RepeatWaits], events: Collection[str]) -> Figure | None:
    """The share of a role's samples in ``events``, over every sampled repeat, with its
    interval (None where the role was never sampled)."""
    total = sum(r.samples for r in repeats)
    if total <= 0:
        return None
    hits = [sum(n for e, n in r.events.items() if e in events) for r in repeats]
    share = sum(hits) / total
    low, high = share_interval(share, sum(r.ticks for r in repeats))
    each = [h / r.samples for h, r in zip(hits, repeats, strict=True) if r.samples]
    if len(each) >= 2:
        spread = mean_ci(each)
        assert spread.low is not None and spread.high is not None
        low, high = max(0.0, min(low, spread.low)), min(1.0, max(high, spread.high))
    return Figure(share, low, high)


def busy_spread(store: Store, measured: dict[int, tuple[int, float]]) -> float | None:
    """The relative half width of the CPUs the measured repeats kept busy (every process
    /proc saw, over each repeat's seconds); ``measured``: repeat id -> (commits, TPS).
    None with fewer than two such repeats."""
    cpu_ms: dict[int, float] = defaultdict(float)
    for repeat_id, proc in queries.proc_costs_of(store, measured):
        cpu_ms[repeat_id] += proc.user_ms + proc.system_ms
    busy = []
    for repeat_id, ms in cpu_ms.items():
        commits, tps = measured[repeat_id]
        if commits > 0 and tps > 0:
            busy.append(ms / 1000.0 / (commits / tps))
    if len(busy) < 2:
        return None
    return mean_ci(busy).half_width_rel
