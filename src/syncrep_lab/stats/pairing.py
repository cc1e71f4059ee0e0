"""Which cell each cell is compared with, and their ratio from repeats taken side by side.

A comparison is a cell against its *baseline*: the cell with the same parameters
except those a baseline rule names (``[compare] baseline``). Rules are tried in
order; the first that a cell satisfies itself makes it a baseline (no ratio), the
first whose target cell exists gives its baseline. With the seed's rules
``[{synchronous_commit = "local"}, {synchronous_commit = "off"}, {batch = 1}]``:
each level is compared with ``local``, 10 rows per commit with 1 (when there is no
``local`` at 10), and ``on`` without standbys with ``off`` (there is no ``local``
without standbys).

Throughput is compared in rows per second (TPS × batch), so a batch against one
insert per commit says how many more rows the same commits carry. The ratio of a
pair is taken within one round (both measured minutes apart at most, in an order
shuffled per round) and the ratios are averaged over rounds on the log scale
(:func:`syncrep_lab.stats.intervals.paired_ratio`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from syncrep_lab.stats.intervals import PairedRatio, paired_ratio, ratio_ci

if TYPE_CHECKING:  # the store's type only: measure does not depend on the store
    from syncrep_lab.store import StoredRepeat

Rule = Mapping[str, Any]


def _same(a: Any, b: Any) -> bool:
    return a == b or (a is not None and b is not None and str(a) == str(b))


def _key(params: Mapping[str, Any], ignore: frozenset[str] = frozenset()) -> str:
    return json.dumps({k: None if v is None else str(v) for k, v in params.items()
                       if k not in ignore}, sort_keys=True)


def _derived(rule: Rule) -> frozenset[str]:
    """Parameters that follow from those the rule names: a cluster's default
    ``sync`` names its standbys, so a rule on ``standbys`` leaves it free."""
    return frozenset({"sync"}) if "standbys" in rule and "sync" not in rule else frozenset()


def baselines(cells: Sequence[tuple[int, Mapping[str, Any]]], rules: Sequence[Rule]
              ) -> dict[int, int | None]:
    """Each cell's baseline (by index), None for a baseline itself or a cell no rule
    pairs with another."""
    lookups: dict[frozenset[str], dict[str, int]] = {}
    out: dict[int, int | None] = {}
    for idx, params in cells:
        out[idx] = None
        for rule in rules:
            if all(_same(params.get(k), v) for k, v in rule.items()):
                break  # a baseline under this rule
            ignore = _derived(rule)
            if ignore not in lookups:
                lookups[ignore] = {_key(p, ignore): i for i, p in cells}
            target = lookups[ignore].get(_key({**params, **rule}, ignore))
            if target is not None and target != idx:
                out[idx] = target
                break
    return out


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
