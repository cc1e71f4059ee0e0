"""A cell's ratio to its baseline (which cell that is: plan/baselines.py) from repeats
taken side by side.

Throughput is compared in rows per second (TPS × batch), so a batch against one
insert per commit says how many more rows the same commits carry. The ratio of a
pair is taken within one round (both measured minutes apart at most, in an order
shuffled per round) and the ratios are averaged over rounds on the log scale
(:func:`syncrep_lab.stats.intervals.paired_ratio`).

In a duet (``[run] order = "duet"``) the two sides swap CPU sets every round
(run/duet.py ``Sides``), so a round's ratio carries the difference between the sets one
way and the next round's the other way. Rounds 2k-1 and 2k make a 2x2 crossover unit
(each side once on each set): the unit's log ratio is the mean of its two rounds' log
ratios, which cancels a steady difference between the sets, and the interval is the t
interval over units (units - 1 degrees of freedom). It is the same paired ratio, taken
over the units' geometric means (``crossover=True``); a round whose unit is not whole
for both sides (an odd last round, a partner's failed round) is left out and counted
(:func:`unpaired_rounds`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

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


R = TypeVar("R")


def beside_each_other(mine: Sequence[R], theirs: Sequence[R],
                      pair: Callable[[R], int | None]) -> tuple[list[R], list[R]]:
    """A cell's repeats and its baseline's that were measured beside each other: in a
    duet, those of the pairs the two were in together (``pair`` gives a repeat's pair
    number). A baseline shared by several cells ran beside each of them in a round, and
    a cell that is also a baseline ran in its own pair and in its cells' (the seed's
    on: beside local, then as the baseline of batch 10 and of the link): its round has
    several repeats, and only those of the shared pair are side by side. Without a
    shared pair (interleaved rounds, or two cells a duet never paired) all of each.

    >>> beside_each_other([(1, 0), (1, 2)], [(1, 0), (1, 1)], lambda r: r[1])
    ([(1, 0)], [(1, 0)])
    >>> beside_each_other([(1, None)], [(1, None)], lambda r: r[1])
    ([(1, None)], [(1, None)])
    """
    shared = ({p for r in mine if (p := pair(r)) is not None}
              & {p for r in theirs if (p := pair(r)) is not None})
    if not shared:
        return list(mine), list(theirs)
    return ([r for r in mine if pair(r) in shared], [r for r in theirs if pair(r) in shared])


CROSSOVER_NOTE = "crossover of two rounds"  # the order's note where units are paired


def crossover_unit(round_no: int) -> int:
    """The crossover unit of a duet's round: rounds 2k-1 and 2k are unit k. A unit's
    base (run/runner.ROUND_SPAN) is even, so its first round is odd and each unit has
    one round of each parity: each side on each CPU set once (run/duet.py ``Sides``).

    >>> [crossover_unit(r) for r in (1, 2, 3, 4, 10001, 10002)]
    [1, 1, 2, 2, 5001, 5001]
    """
    return (round_no + 1) // 2


def _whole_units(cell: Mapping[int, float], base: Mapping[int, float]
                 ) -> list[tuple[int, int]]:
    """The units both sides ran both rounds of, as (first round, second round)."""
    both: dict[int, list[int]] = {}
    for r in sorted(set(cell) & set(base)):
        both.setdefault(crossover_unit(r), []).append(r)
    return [(rs[0], rs[1]) for _, rs in sorted(both.items()) if len(rs) == 2]


def unpaired_rounds(cell: Mapping[int, float], base: Mapping[int, float]) -> int:
    """Rounds both sides ran that are in no whole crossover unit (left out of it)."""
    return len(set(cell) & set(base)) - 2 * len(_whole_units(cell, base))


def crossover_units(cell: Mapping[int, float], base: Mapping[int, float]
                    ) -> tuple[list[float], list[float]]:
    """Each whole unit's geometric mean, the cell's and the baseline's: the log of
    their ratio is the mean of the unit's two rounds' log ratios."""
    units = _whole_units(cell, base)
    return ([math.sqrt(cell[a] * cell[b]) for a, b in units],
            [math.sqrt(base[a] * base[b]) for a, b in units])


def paired(cell: Mapping[int, float], base: Mapping[int, float], confidence: float,
           *, crossover: bool = False) -> PairedRatio | None:
    """The cell's ratio to its baseline over the rounds both were measured in; with
    ``crossover``, over the whole crossover units (``rounds`` then counts units)."""
    if crossover:
        a, b = crossover_units(cell, base)
        return paired_ratio(a, b, confidence) if a else None
    rounds = sorted(set(cell) & set(base))
    if not rounds:
        return None
    return paired_ratio([cell[r] for r in rounds], [base[r] for r in rounds], confidence)


def ratio_of(a: Sequence[tuple[int | None, float]], b: Sequence[tuple[int | None, float]],
             confidence: float = 0.95, *, crossover: bool = False
             ) -> dict[str, Any] | None:
    """``a`` against ``b``, each a list of (round, value) of measured repeats: paired
    over the rounds both ran in when there are two or more, else the ratio of the means
    (``paired`` false: the drift between when each was measured is not in its
    interval). None when either has no value. ``crossover``: paired over crossover
    units when there are two or more (``units``, and ``rounds`` the rounds in them)."""
    if not a or not b:
        return None
    pa = {r: v for r, v in a if r is not None}
    pb = {r: v for r, v in b if r is not None}
    if crossover:
        unit = paired(pa, pb, confidence, crossover=True)
        if unit is not None and unit.rounds >= 2:
            return {"ratio": unit.mean, "low": unit.low, "high": unit.high,
                    "rounds": 2 * unit.rounds, "units": unit.rounds, "paired": True}
    pair = paired(pa, pb, confidence)
    if pair is not None and pair.rounds >= 2:
        return {"ratio": pair.mean, "low": pair.low, "high": pair.high,
                "rounds": pair.rounds, "paired": True}
    r = ratio_ci([v for _, v in a], [v for _, v in b], confidence)
    return {"ratio": r.ratio, "low": r.low, "high": r.high, "rounds": None, "paired": False}
