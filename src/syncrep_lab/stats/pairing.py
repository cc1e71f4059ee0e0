"""A cell's ratio to its baseline (which cell that is: plan/baselines.py) from repeats
taken side by side.

Throughput is compared in rows per second (TPS × batch), so a batch against one
insert per commit says how many more rows the same commits carry. The ratio of a
pair is taken within one round (both measured minutes apart at most, in an order
shuffled per round) and the ratios are averaged over rounds on the log scale
(:func:`syncrep_lab.stats.intervals.paired_ratio`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from syncrep_lab.stats.intervals import PairedRatio, paired_ratio, ratio_ci

if TYPE_CHECKING:  # the store's type only: measure does not depend on the store
    from syncrep_lab.store import StoredRepeat

def rows_per_second(tps: float, params: Mapping[str, Any]) -> float:
    return tps * int(params.get("batch") or 1)


def by_round(repeats: Sequence[StoredRepeat], params: Mapping[str, Any]
             ) -> dict[int, float]:
    """round -> rows/s of a cell's measured repeats that belong to a round."""
    return {int(r.round): rows_per_second(float(r.tps), params) for r in repeats
            if r.round is not None and not r.probed}


def paired(cell: Mapping[int, float], base: Mapping[int, float], confidence: float
           ) -> PairedRatio | None:
    """The cell's ratio to its baseline over the rounds both were measured in."""
    rounds = sorted(set(cell) & set(base))
    if not rounds:
        return None
    return paired_ratio([cell[r] for r in rounds], [base[r] for r in rounds], confidence)


def ratio_of(a: Sequence[tuple[int | None, float]], b: Sequence[tuple[int | None, float]],
             confidence: float = 0.95) -> dict[str, Any] | None:
    """``a`` against ``b``, each a list of (round, value) of measured repeats: paired
    over the rounds both ran in when there are two or more, else the ratio of the means
    (``paired`` false: the drift between when each was measured is not in its
    interval). None when either has no value."""
    if not a or not b:
        return None
    pa = {r: v for r, v in a if r is not None}
    pb = {r: v for r, v in b if r is not None}
    pair = paired(pa, pb, confidence)
    if pair is not None and pair.rounds >= 2:
        return {"ratio": pair.mean, "low": pair.low, "high": pair.high,
                "rounds": pair.rounds, "paired": True}
    r = ratio_ci([v for _, v in a], [v for _, v in b], confidence)
    return {"ratio": r.ratio, "low": r.low, "high": r.high, "rounds": None, "paired": False}
