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

Where a cell and its baseline both have a commit anatomy, :func:`anatomy_to_baseline`
sets each of its figures against the baseline's (analysis/compare.py's
:func:`~syncrep_lab.analysis.compare.anatomy_comparison`, the cell as B): the anatomy
repeats come after a cell's rounds, one cell after another, so they are never paired
within rounds, and the run's drift is added to each side's spread.
"""

from __future__ import annotations

import itertools
import math
import statistics
from datetime import datetime
from typing import Any

from syncrep_lab.analysis.compare import AnatomyComparison, cell_anatomy_comparison, run_drift
from syncrep_lab.analysis.noise import RESUMED_GAP_S
from syncrep_lab.stats.intervals import detectable_effect, ratio_ci, rounds_for
from syncrep_lab.stats.pairing import baselines, by_round, paired, rows_per_second
from syncrep_lab.store import Store, StoredRepeat, StoredRun, cluster_key_text, with_defaults


def stored_rules(run: StoredRun) -> tuple[list[dict[str, Any]], float, float | None]:
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


def ratios_to_baseline(store: Store, run: StoredRun) -> dict[int, dict[str, Any] | None]:
    """cell idx -> ``{baseline, baseline_idx, mean, low, high, rounds, paired,
    detectable_pct}`` (paired: also ``spread_pct``, ``target_pct``, ``rounds_for_target``
    and ``round_s``), or None (a baseline, a cell without one, or one that has no
    figures)."""
    cells = store.cells(run.id)
    params = {c.idx: c.params for c in cells}
    by_idx = {c.idx: c for c in cells}
    rules, confidence, target = stored_rules(run)
    base_of = baselines(sorted((i, with_defaults(p)) for i, p in params.items()), rules)
    out: dict[int, dict[str, Any] | None] = {}
    for idx, base in base_of.items():
        out[idx] = None
        if base is None or by_idx[idx].status != "done" or by_idx[base].status != "done":
            continue
        mine = [r for r in store.repeats(by_idx[idx].id) if not r.probed]
        theirs = [r for r in store.repeats(by_idx[base].id) if not r.probed]
        pair = (paired(by_round(mine, params[idx]), by_round(theirs, params[base]),
                       confidence) if _side_by_side(params[idx], params[base], mine, theirs)
                else None)
        entry: dict[str, Any] = {"baseline": by_idx[base].label, "baseline_idx": base}
        if pair is not None and pair.rounds >= 2:
            se = pair.log_se  # of the log ratio: relative already
            entry.update(mean=pair.mean, low=pair.low, high=pair.high, rounds=pair.rounds,
                         paired=True,
                         detectable_pct=None if se is None else
                         100 * detectable_effect(se, pair.rounds - 1, confidence),
                         spread_pct=None if pair.log_sd is None else 100 * pair.log_sd,
                         target_pct=None if target is None else 100 * target,
                         rounds_for_target=None if pair.log_sd is None or target is None
                         else rounds_for(pair.log_sd, math.log1p(target), confidence),
                         round_s=round_seconds(mine))
        elif mine and theirs:
            r = ratio_ci([rows_per_second(float(x.tps), params[idx]) for x in mine],
                         [rows_per_second(float(x.tps), params[base]) for x in theirs],
                         confidence)
            entry.update(mean=r.ratio, low=r.low, high=r.high, rounds=None, paired=False,
                         detectable_pct=None if r.se is None or r.df is None or r.ratio <= 0
                         else 100 * detectable_effect(r.se / r.ratio, r.df, confidence))
        else:
            continue
        out[idx] = entry
    return out



def anatomy_to_baseline(store: Store, run: StoredRun) -> dict[int, dict[str, Any] | None]:
    """cell idx -> ``{baseline, baseline_idx}`` and the cell's commit anatomy against
    its baseline's (:class:`~syncrep_lab.analysis.compare.AnatomyComparison`: the
    baseline is A, the cell B), or None (a baseline, a cell without one, neither with an
    anatomy)."""
    cells = store.cells(run.id)
    by_idx = {c.idx: c for c in cells}
    rules, _, _ = stored_rules(run)
    base_of = baselines(sorted((c.idx, with_defaults(c.params)) for c in cells), rules)
    drift = run_drift(store, run.id)
    out: dict[int, dict[str, Any] | None] = {}
    for idx, base in base_of.items():
        out[idx] = None
        if base is None or by_idx[idx].status != "done" or by_idx[base].status != "done":
            continue
        found: AnatomyComparison | None = cell_anatomy_comparison(
            store, by_idx[base].id, store, by_idx[idx].id,
            None if drift is None else (drift, drift), names=("the baseline", "the cell"))
        if found is not None:
            out[idx] = {"baseline": by_idx[base].label, "baseline_idx": base, **found}
    return out
