"""Which cell each cell is compared with: its *baseline*, read from the cells' parameters
and ``[compare] baseline``'s rules, without a measurement (what plan/duet.py pairs, the
runner's rounds and the analysis compare).

A comparison is a cell against its baseline: the cell with the same parameters except
those a baseline rule names. Rules are tried in order; the first that a cell satisfies
itself makes it a baseline (no ratio), the first whose target cell exists gives its
baseline. With the seed's rules ``[{synchronous_commit = "local"}, {synchronous_commit =
"off"}, {batch = 1}]``: each level is compared with ``local``, 10 rows per commit with 1
(when there is no ``local`` at 10), and ``on`` without standbys with ``off`` (there is
no ``local`` without standbys). The ratios themselves are stats/pairing.py's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

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
