"""Each cell's ratio to its baseline, read from the store.

In an interleaved run the ratio comes from the pairs of each round (the cell and its
baseline measured side by side), averaged on the log scale with a t interval
(stats/pairing.py): ``paired`` is true. Where the two were not measured in the same
rounds (cells of clusters run one after another, or a run made cell by cell) the ratio
is that of their means with a delta-method interval, ``paired`` false: such an
interval does not hold the drift between the two stretches of time, and says so.
Throughput is compared in rows per second (TPS × batch). ``detectable_pct`` is the
smallest change of the ratio, in percent, that a two-sided test at the run's confidence
would see 4 times in 5 with this interval's standard error and degrees of freedom
(:func:`syncrep_lab.stats.intervals.detectable_effect`): an interval that holds 1 says
nothing about changes smaller than that.

A paired ratio also says what its target would take: ``rounds_for_target``, the rounds
the spread of its per-round ratios (``spread_pct``, the sd of their logs) asks for to
reach the run's ``ci_target`` (``target_pct``)
(:func:`syncrep_lab.stats.intervals.rounds_for`; None past any reasonable count), and
``round_s``, the seconds one round took for this cell (the mean gap between its
successive repeats' starts: its own repeat, its round's other cells, the resets), so
"±3 % needs about 46 rounds, 25 minutes at this pace" can be said where a run stopped
short of its target.

In a duet run (``order_mode`` "duet") the paired ratio is the crossover's
(stats/pairing.py: over units of two consecutive rounds, each side once on each CPU
set; ``crossover_units``, ``rounds`` the rounds in them, ``unpaired_rounds`` those left
out), and the per-round ratio of the same rounds is kept beside it (``per_round``) so
that a reader sees what the crossover removed. Its target figures count units as
rounds (two each).

Where a cell and its baseline both have a commit anatomy, :func:`anatomy_to_baseline`
sets each of its figures against the baseline's (analysis/compare.py's
:func:`~syncrep_lab.analysis.compare.anatomy_comparison`, the cell as B): the anatomy
repeats come after a cell's rounds, one cell after another, so they are never paired
within rounds, and the run's drift is added to each side's spread.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from syncrep_lab.analysis.compare import AnatomyComparison, cell_anatomy_comparison, run_drift
from syncrep_lab.analysis.noise import RESUMED_GAP_S
from syncrep_lab.json_form import JSON
from syncrep_lab.plan.baselines import baselines
from syncrep_lab.plan.spec import Scalar
from syncrep_lab.stats.intervals import PairedRatio, detectable_effect, ratio_ci, rounds_for
from syncrep_lab.stats.pairing import (
    beside_each_other,
    by_round,
    paired,
    rows_per_second,
    unpaired_rounds,
)
from syncrep_lab.store import Store, StoredRepeat, StoredRun, cluster_key_text, with_defaults


def stored_rules(run: StoredRun) -> tuple[list[dict[str, Scalar]], float, float | None]:
    """The baseline rules, the confidence and the interval target of a run's stored spec
    (none, 0.95 and None when it no longer loads: the run still has its figures). The
    rules are the spec's ``[compare]`` over its matrix, as the plan's parser read it."""
    spec = run.spec.loaded
    if spec is None:
        return [], 0.95, None
    return spec.compare.rules(spec.matrix), spec.run.confidence, spec.run.ci_target


def round_seconds(repeats: list[StoredRepeat]) -> float | None:
    """The mean gap between a cell's successive measured repeats' starts: one round of
    the run, as this cell saw it (gaps of a resume left out). The mean, not the median:
    the rounds are shuffled, so a cell last in one round and first in the next has a
    short gap and the reverse a long one; their mean is the round. None below 2."""
    starts = sorted(datetime.fromisoformat(str(r.started_at)) for r in repeats)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(starts)]
    gaps = [g for g in gaps if 0 < g <= RESUMED_GAP_S]
    return statistics.fmean(gaps) if gaps else None


def _side_by_side(a: dict[str, Any], b: dict[str, Any], mine: list[StoredRepeat],
                  theirs: list[StoredRepeat]) -> bool:
    """Whether two cells' rounds ran side by side: cells of one cluster always did;
    cells of two clusters did when the run held both up at once (their repeats then
    span the same stretch of time; clusters run one after another do not, and before
    rounds were numbered apart per unit their round numbers coincided)."""
    if cluster_key_text(a) == cluster_key_text(b):
        return True
    if not mine or not theirs:
        return False
    span = [str(r.started_at) for r in mine]
    other = [str(r.started_at) for r in theirs]
    return max(min(span), min(other)) < min(max(span), max(other))


@dataclass(frozen=True)
class BaselineRatio:
    """A cell's ratio to its baseline (a results row's ``ratio_to_baseline``), in rows
    per second: paired within rounds or not, with what a paired one's target would
    take."""

    baseline: str  # its label
    baseline_idx: int
    mean: float
    low: float | None
    high: float | None
    rounds: int | None  # the rounds paired (None: not paired)
    paired: bool
    detectable_pct: float | None
    # a paired ratio's only
    spread_pct: float | None = None
    target_pct: float | None = None
    rounds_for_target: int | None = None
    round_s: float | None = None
    # a duet's crossover (None: paired by round): the units, the rounds left out of
    # them, and the per-round ratio of the same run beside it
    crossover_units: int | None = None
    unpaired_rounds: int = 0
    per_round: BaselineRatio | None = None

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {
            "baseline": self.baseline, "baseline_idx": self.baseline_idx,
            "mean": self.mean, "low": self.low, "high": self.high, "rounds": self.rounds,
            "paired": self.paired, "detectable_pct": self.detectable_pct}
        if self.paired:
            out.update(spread_pct=self.spread_pct, target_pct=self.target_pct,
                       rounds_for_target=self.rounds_for_target, round_s=self.round_s)
        if self.crossover_units is not None:
            out.update(crossover_units=self.crossover_units,
                       unpaired_rounds=self.unpaired_rounds,
                       per_round=self.per_round.to_json() if self.per_round else None)
        return out


def _pair(repeat: StoredRepeat) -> int | None:
    return repeat.pair


def ratios_to_baseline(store: Store, run: StoredRun) -> dict[int, BaselineRatio | None]:
    """cell idx -> its :class:`BaselineRatio`, or None (a baseline, a cell without one,
    or one that has no figures)."""
    cells = store.cells(run.id)
    params = {c.idx: c.params for c in cells}
    by_idx = {c.idx: c for c in cells}
    rules, confidence, target = stored_rules(run)
    base_of = baselines(sorted((i, with_defaults(p)) for i, p in params.items()), rules)
    out: dict[int, BaselineRatio | None] = {}
    for idx, base in base_of.items():
        out[idx] = None
        if base is None or by_idx[idx].status != "done" or by_idx[base].status != "done":
            continue
        mine, theirs = beside_each_other(
            [r for r in store.repeats(by_idx[idx].id) if not r.probed],
            [r for r in store.repeats(by_idx[base].id) if not r.probed], _pair)
        a, b = by_round(mine, params[idx]), by_round(theirs, params[base])
        side_by_side = _side_by_side(params[idx], params[base], mine, theirs)
        pair = paired(a, b, confidence) if side_by_side else None
        label = by_idx[base].label
        unit = (paired(a, b, confidence, crossover=True)
                if run.order_mode == "duet" and side_by_side else None)
        if pair is not None and pair.rounds >= 2:
            per_round = _paired(label, base, pair, 1, confidence, target, mine)
            out[idx] = per_round
            if unit is not None and unit.rounds >= 2:
                out[idx] = dataclasses.replace(
                    _paired(label, base, unit, 2, confidence, target, mine),
                    crossover_units=unit.rounds, unpaired_rounds=unpaired_rounds(a, b),
                    per_round=per_round)
        elif mine and theirs:
            r = ratio_ci([rows_per_second(float(x.tps), params[idx]) for x in mine],
                         [rows_per_second(float(x.tps), params[base]) for x in theirs],
                         confidence)
            out[idx] = BaselineRatio(
                label, base, r.ratio, r.low, r.high, None, False,
                detectable_pct=None if r.se is None or r.df is None or r.ratio <= 0
                else 100 * detectable_effect(r.se / r.ratio, r.df, confidence))
    return out


def _paired(label: str, base: int, pair: PairedRatio, per: int, confidence: float,
            target: float | None, mine: list[StoredRepeat]) -> BaselineRatio:
    """A paired ratio over ``pair.rounds`` steps of ``per`` rounds each (a crossover
    unit is two): its detectable change and what its target would take, in rounds."""
    se = pair.log_se  # of the log ratio: relative already
    needed = (None if pair.log_sd is None or target is None
              else rounds_for(pair.log_sd, math.log1p(target), confidence))
    return BaselineRatio(
        label, base, pair.mean, pair.low, pair.high, per * pair.rounds, True,
        detectable_pct=None if se is None else
        100 * detectable_effect(se, pair.rounds - 1, confidence),
        spread_pct=None if pair.log_sd is None else 100 * pair.log_sd,
        target_pct=None if target is None else 100 * target,
        rounds_for_target=None if needed is None else per * needed,
        round_s=round_seconds(mine))


def target_text(ratio: BaselineRatio | None) -> str:
    """'±8.1 % after 10 rounds, short of ±3 %: the rounds' ratios spread by 12.3 %, so
    ±3 % needs about 64 rounds (32 min at this run's 30 s a round)', for a paired ratio
    whose interval is wider than its target and whose spread asks for more rounds than
    it had: why the budget was not enough, from the run's own figures. '' otherwise."""
    if (ratio is None or not ratio.paired or ratio.low is None or ratio.high is None
            or ratio.rounds is None or ratio.target_pct is None
            or ratio.spread_pct is None):
        return ""
    half = 100 * (ratio.high - ratio.low) / (2 * ratio.mean)
    target, needed = ratio.target_pct, ratio.rounds_for_target
    rounds = ratio.rounds
    if half <= target or (needed is not None and needed <= rounds):
        return ""
    steps = "the rounds'" if ratio.crossover_units is None else "the crossover units'"
    text = (f"±{half:.1f} % after {rounds} rounds, short of ±{target:g} %: {steps} "
            f"ratios spread by {ratio.spread_pct:.1f} %, so ±{target:g} % ")
    if needed is None:
        return text + "is out of reach of more rounds"
    text += f"needs about {needed} rounds"
    if ratio.round_s:
        text += (f" ({needed * ratio.round_s / 60:.0f} min at this run's "
                 f"{ratio.round_s:.0f} s a round)")
    return text



@dataclass(frozen=True)
class BaselineAnatomy:
    """A cell's commit anatomy against its baseline's (a results row's
    ``anatomy_to_baseline``): the baseline is A, the cell B."""

    baseline: str  # its label
    baseline_idx: int
    comparison: AnatomyComparison

    def to_json(self) -> dict[str, JSON]:
        return {"baseline": self.baseline, "baseline_idx": self.baseline_idx,
                **self.comparison.to_json()}


def anatomy_to_baseline(store: Store, run: StoredRun) -> dict[int, BaselineAnatomy | None]:
    """cell idx -> its :class:`BaselineAnatomy`, or None (a baseline, a cell without
    one, neither with an anatomy)."""
    cells = store.cells(run.id)
    by_idx = {c.idx: c for c in cells}
    rules, _, _ = stored_rules(run)
    base_of = baselines(sorted((c.idx, with_defaults(c.params)) for c in cells), rules)
    drift = run_drift(store, run.id)
    out: dict[int, BaselineAnatomy | None] = {}
    for idx, base in base_of.items():
        out[idx] = None
        if base is None or by_idx[idx].status != "done" or by_idx[base].status != "done":
            continue
        found: AnatomyComparison | None = cell_anatomy_comparison(
            store, by_idx[base].id, store, by_idx[idx].id,
            None if drift is None else (drift, drift), names=("the baseline", "the cell"))
        if found is not None:
            out[idx] = BaselineAnatomy(by_idx[base].label, base, found)
    return out
