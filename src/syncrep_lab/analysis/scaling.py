"""Scaling: TPS and latency against clients for each synchronous_commit level, the
knee where TPS stops growing, and the price of each level as a ratio to
``local`` at the same client count (with a confidence interval: over the rounds both
ran in when the run interleaved them, stats/pairing.py).

Pure functions over the store. Cells are grouped into series by every axis
except ``clients`` and ``synchronous_commit``, so a spec that also varies, say,
``pg`` gets one scaling table per version.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path
from typing import Any, TypedDict

from syncrep_lab.stats.pairing import beside_each_other, ratio_of
from syncrep_lab.store import Store, StoredCell

KNEE_GAIN = 0.10  # less than 10 % more TPS for the next client count: the curve has flattened


class Knee(TypedDict):
    clients: int  # the count after which more clients add less than KNEE_GAIN
    tps: float
    gain_after: float


class LevelPoint(TypedDict):
    """A client count of a level: the cell's mean TPS and latencies."""

    clients: int
    tps: float | None
    p99_ms: float | None
    mean_ms: float | None


class Level(TypedDict):
    """One synchronous_commit level of a series: TPS and latency by clients."""

    points: list[LevelPoint]
    knee: Knee | None


class LocalRatio(TypedDict):
    """A client count's TPS against local's (stats/pairing.ratio_of)."""

    clients: int
    ratio: float
    low: float | None
    high: float | None
    rounds: int | None  # the rounds paired; None: the ratio of the means
    paired: bool


class Series(TypedDict):
    """:func:`scaling`'s series: what ``scaling`` prints and the report plots."""

    series: str  # the other axes' values, or "all cells"
    levels: dict[str, Level]
    # level -> each client count's ratio to local
    ratios_to_local: dict[str, list[LocalRatio]]


class CorePoint(TypedDict):
    """A core count of a group: its cell's mean TPS and 95 % interval."""

    cores: int
    tps: float
    low: float | None
    high: float | None


class CoreKnee(TypedDict):
    cores: int  # the count after which more cores add less than KNEE_GAIN
    tps: float
    gain_after: float


class CoreBest(TypedDict):
    cores: int
    tps: float


class CoreSweep(TypedDict):
    """:func:`core_sweep`'s group of cells that differ only in ``cores``."""

    series: str
    points: list[CorePoint]
    knee: CoreKnee | None
    best: CoreBest
    more_is_worse: bool


def knee(points: list[tuple[int, float]]) -> Knee | None:
    """The first client count after which more clients add less than KNEE_GAIN.

    >>> knee([(1, 100.0), (2, 190.0), (4, 300.0), (8, 310.0), (16, 305.0)])
    {'clients': 4, 'tps': 300.0, 'gain_after': 0.033}
    >>> knee([(1, 100.0), (2, 200.0)]) is None
    True
    """
    points = sorted(points)
    for (c1, t1), (_c2, t2) in itertools.pairwise(points):
        if t1 > 0 and (t2 - t1) / t1 < KNEE_GAIN:
            return {"clients": c1, "tps": t1, "gain_after": round((t2 - t1) / t1, 3)}
    return None


def _series_key(axes: dict[str, Any]) -> str:
    rest = {k: v for k, v in axes.items() if k not in ("clients", "synchronous_commit")}
    return ", ".join(f"{k}={v}" for k, v in sorted(rest.items())) or "all cells"


def scaling(folder: Path) -> list[Series]:
    store = Store(folder, create=False)
    try:
        run = store.run()
        series: dict[str, dict[str, dict[int, dict[str, Any]]]] = defaultdict(
            lambda: defaultdict(dict))
        for cell in store.cells(run.id):
            if cell.status != "done":
                continue
            params = cell.params
            tps = [(r.round, float(r.tps), r.pair) for r in store.repeats(cell.id)
                   if not r.probed]
            series[_series_key(cell.axes)][
                params["synchronous_commit"]][int(params["clients"])] = {
                "tps": cell.tps_mean, "tps_repeats": tps, "p99_ms": cell.lat_p99_ms,
                "mean_ms": cell.lat_mean_ms}
    finally:
        store.close()
    out: list[Series] = []
    for key, levels in series.items():
        entry: Series = {"series": key, "levels": {}, "ratios_to_local": {}}
        for level, by_clients in levels.items():
            points = [(c, float(v["tps"])) for c, v in sorted(by_clients.items())]
            entry["levels"][level] = {
                "points": [{"clients": c, "tps": by_clients[c]["tps"],
                            "p99_ms": by_clients[c]["p99_ms"],
                            "mean_ms": by_clients[c]["mean_ms"]} for c, _ in points],
                "knee": knee(points),
            }
        local = levels.get("local", {})
        for level, by_clients in levels.items():
            if level == "local":
                continue
            ratios: list[LocalRatio] = []
            for clients, v in sorted(by_clients.items()):
                base = local.get(clients)
                if base is None or not base["tps_repeats"] or not v["tps_repeats"]:
                    continue
                mine, theirs = beside_each_other(v["tps_repeats"], base["tps_repeats"],
                                                 lambda x: x[2])
                r = ratio_of([(n, t) for n, t, _ in mine], [(n, t) for n, t, _ in theirs])
                assert r is not None
                ratios.append({"clients": clients, "ratio": r["ratio"], "low": r["low"],
                               "high": r["high"], "rounds": r["rounds"],
                               "paired": r["paired"]})
            if ratios:
                entry["ratios_to_local"][level] = ratios
        out.append(entry)
    return out


def core_sweep(folder: Path) -> list[CoreSweep]:
    """Along the ``cores`` axis: TPS per core count in each group of otherwise equal
    cells, the knee (the first count after which one more step adds less than
    KNEE_GAIN) and the best count, flagged when more cores were measurably worse
    (the next count's CI lies wholly below the best's), as the seed found by hand."""
    store = Store(folder, create=False)
    try:
        run = store.run()
        groups: dict[str, dict[int, StoredCell]] = defaultdict(dict)
        for cell in store.cells(run.id):
            axes = cell.axes
            if cell.status != "done" or "cores" not in axes:
                continue
            rest = {k: v for k, v in axes.items() if k != "cores"}
            key = ", ".join(f"{k}={v}" for k, v in sorted(rest.items())) or "all cells"
            groups[key][int(axes["cores"])] = cell
    finally:
        store.close()
    out: list[CoreSweep] = []
    for key, by_cores in sorted(groups.items()):
        if len(by_cores) < 2:
            continue  # one core count in this group: nothing to sweep
        points = sorted((c, float(cell.tps_mean)) for c, cell in by_cores.items()
                        if cell.tps_mean is not None)
        best_cores, best_tps = max(points, key=lambda p: p[1])
        best = by_cores[best_cores]
        worse_after = [c for c, _ in points if c > best_cores
                       and (high := by_cores[c].tps_ci_high) is not None
                       and best.tps_ci_low is not None and float(high) < float(best.tps_ci_low)]
        found = knee(points)
        out.append({"series": key,
                    "points": [{"cores": c, "tps": t, "low": by_cores[c].tps_ci_low,
                                "high": by_cores[c].tps_ci_high} for c, t in points],
                    "knee": {"cores": found["clients"], "tps": found["tps"],
                             "gain_after": found["gain_after"]} if found else None,
                    "best": {"cores": best_cores, "tps": best_tps},
                    "more_is_worse": bool(worse_after)})
    return out
