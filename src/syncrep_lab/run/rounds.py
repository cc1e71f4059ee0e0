"""The round scheduler: which cells of one cluster run in round k, in which order, and
when the comparisons are measured well enough to stop.

Cells that share a running cluster are measured in rounds: round k runs one repeat of
every cell still needed, in an order shuffled per round. The shuffle is seeded by the
run's seed, the cluster and k, so it is reproducible and a resumed run continues the
same sequence. Slow drift of the machine (other tenants, frequency) then falls on every
cell of a round alike, and a cell's ratio to its baseline within one round is free of
it (Abedi and Brecht, ICPE 2017).

The stop rule is Stein's two-stage procedure on each comparison's log ratios
(:func:`~syncrep_lab.stats.intervals.stein_rounds`): after the pilot (``repeats_min``
rounds, at least 2) the spread of those pilot ratios alone fixes how many rounds the
comparison needs for a ±``ci_target`` interval. A comparison whose pilot agreed by
luck cannot stop the run early, and the later rounds cannot talk it into stopping:
the interval's coverage holds however often it is looked at. A cell compared with
nothing (and the baseline of nothing) is held to the same target on its own TPS. A
baseline runs while any cell compared with it still needs rounds. ``repeats_max``
and the time budget end it sooner, and the cell says so (``stop_reason``).

In a duet (``crossover``) the series is the crossover units' log ratios
(stats/pairing.py: rounds 2k-1 and 2k, each side once on each CPU set), and the rule
counts units: the pilot is ``repeats_min`` units, ``repeats_max`` units at most, and
the rounds run in whole units (a unit's second round always follows its first), so a
duet stops after an even number of rounds.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field

from syncrep_lab.stats.intervals import mean_ci, stein_rounds
from syncrep_lab.stats.pairing import crossover_units


@dataclass
class Member:
    """One cell in the rounds of its cluster."""

    index: int  # the cell's index in the plan
    label: str
    baseline: int | None  # the index of the cell it is compared with, in this group
    values: dict[int, float] = field(default_factory=dict)  # round -> rows/s
    failed: bool = False
    # a duet's: round -> the baseline's rows/s measured beside this cell (a baseline
    # shared by several cells runs beside each); empty: the baseline's own values
    partner: dict[int, float] = field(default_factory=dict)


def round_order(seed: int, group: str, round_no: int, indices: list[int]) -> list[int]:
    """The cells of ``group`` in round ``round_no``, shuffled (reproducibly)."""
    digest = hashlib.sha256(f"{seed}/{group}/{round_no}".encode()).hexdigest()
    order = sorted(indices)
    random.Random(int(digest[:16], 16)).shuffle(order)
    return order


class Rounds:
    """The state of one cluster's rounds, rebuilt from what is stored (resume)."""

    def __init__(self, members: list[Member], *, seed: int, group: str, repeats_min: int,
                 repeats_max: int, ci_target: float, confidence: float, base: int = 0,
                 crossover: bool = False) -> None:
        self.members = {m.index: m for m in members}
        self.seed, self.group = seed, group
        # rounds are numbered base + 1, base + 2, ...: units of one run apart
        # (runner.ROUND_SPAN); counts (done_rounds, max_rounds) are from base
        self.base = base
        self.crossover = crossover
        # rounds a step of the series takes: a duet's crossover unit is two
        self.per_step = 2 if crossover else 1
        self.repeats_max = repeats_max
        self.max_rounds = self.per_step * repeats_max
        self.pilot = min(max(2, repeats_min), repeats_max)  # in steps of the series
        self.ci_target = ci_target
        self.half_width = math.log1p(ci_target)  # ±3 % as a log ratio
        self.confidence = confidence

    # the series each member is judged on ---------------------------------------------

    def _compared_with(self, m: Member) -> Member | None:
        base = self.members.get(m.baseline) if m.baseline is not None else None
        return base if base is not None and not base.failed else None

    def series(self, m: Member) -> list[float]:
        """Log ratios to its baseline over the rounds both ran, else its own log TPS."""
        base = self._compared_with(m)
        if base is None:
            return [math.log(m.values[r]) for r in sorted(m.values)]
        beside = m.partner or base.values
        if self.crossover:
            mine, theirs = crossover_units(m.values, beside)
            return [math.log(a / b) for a, b in zip(mine, theirs, strict=True)]
        rounds = sorted(set(m.values) & set(beside))
        return [math.log(m.values[r] / beside[r]) for r in rounds]

    def is_baseline(self, m: Member) -> bool:
        return any(o.baseline == m.index and not o.failed for o in self.members.values()
                   if o is not m)

    def needed(self, m: Member) -> int | None:
        """Rounds this member's series needs (Stein), once its pilot is in."""
        s = self.series(m)
        if len(s) < self.pilot or self.pilot < 2:  # one round (repeats_max = 1) says nothing
            return None
        return stein_rounds(s[: self.pilot], self.half_width, self.confidence)

    def satisfied(self, m: Member) -> bool:
        if self.is_baseline(m) and self._compared_with(m) is None:
            # a pure baseline: only as long as needed
            return len(m.values) >= self.per_step * self.pilot
        need = self.needed(m)
        return need is not None and len(self.series(m)) >= need

    # what runs next --------------------------------------------------------------------

    @property
    def done_rounds(self) -> int:
        """How many rounds have begun (the last one may have been cut short)."""
        return max((max(m.values) for m in self.members.values() if m.values),
                   default=self.base) - self.base

    def wanted(self) -> set[int]:
        """Members that still need rounds (baselines of those included)."""
        want = {i for i, m in self.members.items() if not m.failed and not self.satisfied(m)}
        for i in list(want):
            base = self._compared_with(self.members[i])
            if base is not None:
                want.add(base.index)
        return want

    def next_round(self) -> tuple[int, list[int]] | None:
        """(round, cells in order) to run next, or None when the group is done. A round
        that was cut short (an interrupt) is finished first: pairs stay whole."""
        begun = self.done_rounds
        last = self.base + begun
        if begun > 0:
            due = (self._ran(last - 1) if self.crossover and begun % 2 == 0
                   else self._as_of(last).wanted())
            missing = [i for i in due if last not in self.members[i].values
                       and not self.members[i].failed]
            if missing:
                return last, [i for i in round_order(self.seed, self.group, last,
                                                     list(self.members)) if i in missing]
        if begun >= self.max_rounds:
            return None
        if self.crossover and begun % 2 == 1 and (ran := self._ran(last)):
            # a unit's second round, for the cells of its first: the units whole
            return last + 1, [i for i in round_order(self.seed, self.group, last + 1,
                                                      list(self.members)) if i in ran]
        want = self.wanted()
        if not want:
            return None
        return last + 1, [i for i in round_order(self.seed, self.group, last + 1,
                                                  list(self.members)) if i in want]

    def _ran(self, round_no: int) -> set[int]:
        """The members that ran round ``round_no`` and have not failed since."""
        return {i for i, m in self.members.items() if round_no in m.values and not m.failed}

    def _as_of(self, round_no: int) -> Rounds:
        """The rounds as they stood before ``round_no`` began."""
        members = [Member(m.index, m.label, m.baseline,
                          {r: v for r, v in m.values.items() if r < round_no}, m.failed,
                          {r: v for r, v in m.partner.items() if r < round_no})
                   for m in self.members.values()]
        return Rounds(members, seed=self.seed, group=self.group, repeats_min=self.pilot,
                      repeats_max=self.repeats_max, ci_target=math.expm1(self.half_width),
                      confidence=self.confidence, base=self.base, crossover=self.crossover)

    def stop_reason(self, m: Member, *, budget_spent: bool) -> str:
        """``ci``: its comparison (a baseline: every comparison with it) met the target;
        else ``budget`` or ``max``, whichever ended the rounds."""
        if self.is_baseline(m) and self._compared_with(m) is None:
            ok = all(self.satisfied(o) for o in self.members.values()
                     if o.baseline == m.index and not o.failed)
        else:
            ok = self.satisfied(m)
        if ok:
            return "ci"
        return "budget" if budget_spent and self.done_rounds < self.max_rounds else "max"

    def relative_half_width(self, series: list[float]) -> float:
        """A series' interval half width, relative (exp of the log half width, - 1)."""
        ci = mean_ci(series, self.confidence)
        assert ci.high is not None
        return math.expm1(ci.high - ci.mean)

    def not_narrowing(self, m: Member) -> str | None:
        """A line when this member's interval is no narrower after its later rounds
        than after the pilot: the spread grows with the rounds (drift, a change in the
        machine), and more rounds will not buy the target."""
        s = self.series(m)
        if m.failed or len(s) < self.pilot + 2 or self.pilot < 2 or (
                self.is_baseline(m) and self._compared_with(m) is None):
            return None
        first, now = self.relative_half_width(s[: self.pilot]), self.relative_half_width(s)
        if now < first:
            return None
        base = self._compared_with(m)
        what = "its TPS" if base is None else f"its ratio to {base.label}"
        steps = "crossover units" if self.crossover and base is not None else "rounds"
        return (f"the interval of {what} did not narrow: ±{100 * first:.1f} % after the "
                f"{self.pilot} pilot {steps}, ±{100 * now:.1f} % after {len(s)}")

    def progress_line(self, round_no: int, per_round: float) -> str | None:
        """What the run says after round ``round_no`` (counted from the unit's first):
        during the pilot that it runs (an interval from its first rounds alone is
        meaningless: from two, t's 12.7 makes it hundreds of per cent wide), then the
        widest interval and how many more rounds the comparisons need (``per_round``
        seconds each)."""
        wanted = self.wanted()
        going = "1 cell goes on" if len(wanted) == 1 else f"{len(wanted)} cells go on"
        pilot = self.per_step * self.pilot
        if wanted and round_no < pilot:
            return (f"round {round_no}: pilot round {round_no} of {pilot}, no interval "
                    f"before the pilot is complete; {going}")
        widest = self.widest()
        if widest is None:
            return None
        label, rel = widest
        needs = [self.needed(self.members[i]) for i in wanted]
        if not wanted or round_no >= self.max_rounds:
            more = "done"
        elif any(n is None for n in needs):
            more = f"{going} (the pilot is not complete)"
        else:
            need = max(n for n in needs if n is not None)
            left = self.per_step * min(need, self.repeats_max) - round_no
            capped = " (capped by repeats_max)" if need > self.repeats_max else ""
            more = (f"{going}, {left} more round{'s' if left != 1 else ''}"
                    f"{capped}, ETA {left * per_round / 60:.1f} min")
        return (f"round {round_no}: widest interval ±{100 * rel:.1f} % "
                f"({label}; target ±{100 * self.ci_target:g} %); {more}")

    def widest(self) -> tuple[str, float] | None:
        """The comparison (or lone cell) whose interval is widest now: its label and
        the interval's half width, relative (from the spread of all its rounds)."""
        worst: tuple[str, float] | None = None
        for m in self.members.values():
            s = self.series(m)
            if m.failed or len(s) < 2 or (self.is_baseline(m) and
                                          self._compared_with(m) is None):
                continue
            rel = self.relative_half_width(s)
            base = self._compared_with(m)
            label = m.label if base is None else f"{m.label} / {base.label}"
            if worst is None or rel > worst[1]:
                worst = (label, rel)
        return worst
