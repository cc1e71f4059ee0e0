"""A/B comparison of two runs: which cells correspond, how their TPS and latency
differ (ratio with a confidence interval, Welch's t-test), which per-commit
costs changed most, and where a commit's time moved (each part of the commit anatomy,
B/A over the anatomy repeats; also used within a run against a cell's baseline). Pure
functions over the two stores: nothing here runs anything. What is returned is typed
(:class:`Comparison`, each :class:`Pair`, each :class:`FigureComparison`), and each
owns its JSON form (``to_json()``): what ``compare --json`` prints and the page reads.

Cells are matched by their axes. The *compared dimensions* are the parameters
that are constant within each run and differ between them (the server version,
a settings set, a client count); every other axis of either run must agree for
two cells to be a pair. So the same spec run once on 9.6 and once on 18 pairs
up cell by cell, and the pairs differ only in what the comparison is about.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from syncrep_lab import format as fmt
from syncrep_lab.analysis.anatomy import (
    PART_NAMES,
    STANDBY,
    STANDBY_NAMES,
    STANDBY_PARTS,
    AnatomyValues,
    anatomy_values,
    why_no_anatomy,
)
from syncrep_lab.analysis.costs import RoleValues, cluster_version, role_values
from syncrep_lab.errors import UserError
from syncrep_lab.json_form import JSON
from syncrep_lab.stats.intervals import (
    detectable_effect,
    mean_ci,
    ratio_ci,
    t_ppf,
    t_sf,
    welch_t,
)
from syncrep_lab.store import Store, StoredRun

ALPHA = 0.05
TOP = 10
ADVICE = ("Two runs are two stretches of time: their figures also differ by the machine's "
          "drift between them, so the intervals here include each run's own drift; a "
          "shift that lasts a whole run (another tenant, a busy neighbour) is not in it. "
          "Where the difference can be an axis of one run, that is the stronger design: "
          "the cells run interleaved, round by round (the clusters of pg, standbys or "
          "settings held up at once where the machine allows), and each cell's "
          "ratio_to_baseline (syncrep-lab results --json) is paired within rounds.")

# (figure, column in repeats, unit, whether more is better)
RUN_FIGURES = (("TPS", "tps", "tps", True),
               ("mean latency", "lat_mean_ms", "ms", False),
               ("p99 latency", "lat_p99_ms", "ms", False))

# Changes are ranked by |ln((b + floor) / (a + floor))|. The floor keeps a figure
# that drops to 0 (or appears from 0) finite and ranked by how much was there,
# and keeps rare calls (2 in 10,000 commits vs 1) from ranking as a doubling:
# below one call or switch per hundred commits, or a microsecond of CPU, a
# change costs a commit next to nothing.
FLOOR = {"cpu_us": 1.0, "context_switches": 0.01, "syscall": 0.01}


@dataclass(frozen=True)
class FigureSide:
    """One side's values of a figure: how many, their mean and its 95 % interval."""

    n: int
    mean: float | None
    low: float | None
    high: float | None
    values: tuple[float, ...]

    def to_json(self) -> dict[str, JSON]:
        return {"n": self.n, "mean": self.mean, "low": self.low, "high": self.high,
                "values": list(self.values)}


@dataclass(frozen=True)
class FigureTest:
    """Welch's test of B against A (``t`` None where the answer is exact); with each
    run's drift in it (``between_runs``) or on the log scale (``log_scale``)."""

    t: float | None
    df: float
    p_value: float
    significant: bool
    between_runs: bool = False
    log_scale: bool = False

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {"t": self.t, "df": self.df, "p_value": self.p_value,
                                "significant": self.significant}
        if self.between_runs:
            out["between_runs"] = True
        if self.log_scale:
            out["log_scale"] = True
        return out


@dataclass(frozen=True)
class FigureComparison:
    """One figure of a pair (:func:`compare_figure`): each side's values, B/A, the test."""

    figure: str
    unit: str
    a: FigureSide
    b: FigureSide
    ratio: float | None
    ratio_low: float | None
    ratio_high: float | None
    # the smallest change of B/A, in percent, the test detects with 80 % power
    detectable_pct: float | None
    test: FigureTest | None
    verdict: str

    @property
    def significant(self) -> bool | None:
        return None if self.test is None else self.test.significant

    def to_json(self) -> dict[str, JSON]:
        return {"figure": self.figure, "unit": self.unit, "a": self.a.to_json(),
                "b": self.b.to_json(), "ratio": self.ratio, "ratio_low": self.ratio_low,
                "ratio_high": self.ratio_high, "detectable_pct": self.detectable_pct,
                "test": self.test.to_json() if self.test is not None else None,
                "significant": self.significant, "verdict": self.verdict}


@dataclass(frozen=True)
class CostChange(FigureComparison):
    """A per-commit cost of one node's role, A against B, ranked by ``score``."""

    node: str
    role: str
    kind: str  # cpu_us | context_switches | syscall
    difference: float
    score: float

    def to_json(self) -> dict[str, JSON]:
        return {**super().to_json(), "node": self.node, "role": self.role,
                "kind": self.kind, "difference": self.difference, "score": self.score}


@dataclass(frozen=True)
class CostChanges:
    compared: int
    top: tuple[CostChange, ...]
    roles_only_in_a: tuple[str, ...]
    roles_only_in_b: tuple[str, ...]
    notes: tuple[str, ...]

    def to_json(self) -> dict[str, JSON]:
        return {"compared": self.compared, "top": [c.to_json() for c in self.top],
                "roles_only_in_a": list(self.roles_only_in_a),
                "roles_only_in_b": list(self.roles_only_in_b), "notes": list(self.notes)}


@dataclass(frozen=True)
class AnatomyFigure(FigureComparison):
    """One figure of the commit anatomy, A against B (:func:`anatomy_comparison`)."""

    who: str  # backend | walsender:NAME | standby:NAME
    # a backend component, per_waiter_us | waiters_per_release, or a part of the
    # standby's half
    key: str

    def to_json(self) -> dict[str, JSON]:
        return {**super().to_json(), "who": self.who, "key": self.key}


@dataclass(frozen=True)
class AnatomyComparison:
    """Where a commit's time moved between two cells: each component of the anatomy
    and each walsender's releases, B/A, over the anatomy repeats of each side."""

    repeats_a: int  # anatomy repeats of a side (0: it has none)
    repeats_b: int
    missing: str | None  # the side without an anatomy and why; nothing compared then
    interval: str  # how the intervals were made, or why there are none
    figures: tuple[AnatomyFigure, ...]
    only_in_a: tuple[str, ...]  # components measured on one side only
    only_in_b: tuple[str, ...]
    changed: tuple[str, ...]  # "wake-up queue -35 % [-41, -28]", each significant figure
    summary: str

    def to_json(self) -> dict[str, JSON]:
        return {"repeats": {"a": self.repeats_a, "b": self.repeats_b},
                "missing": self.missing, "interval": self.interval,
                "figures": [f.to_json() for f in self.figures],
                "only_in_a": list(self.only_in_a), "only_in_b": list(self.only_in_b),
                "changed": list(self.changed), "summary": self.summary}


@dataclass(frozen=True)
class PairCell:
    idx: int
    label: str
    version: str

    def to_json(self) -> dict[str, JSON]:
        return {"idx": self.idx, "label": self.label, "version": self.version}


@dataclass(frozen=True)
class Pair:
    """A cell of A and its match in B."""

    key: dict[str, JSON]  # the matched axes' values
    a: PairCell
    b: PairCell
    disturbed: dict[str, tuple[int, int]]  # side -> (repeats something hit, repeats)
    figures: tuple[FigureComparison, ...]  # RUN_FIGURES, in order
    summary: str
    costs: CostChanges
    anatomy: AnatomyComparison | None  # None: neither cell has one

    def to_json(self) -> dict[str, JSON]:
        return {"key": dict(self.key), "a": self.a.to_json(), "b": self.b.to_json(),
                "disturbed": {k: {"repeats": n, "of": total}
                              for k, (n, total) in self.disturbed.items()},
                "figures": [f.to_json() for f in self.figures], "summary": self.summary,
                "costs": self.costs.to_json(),
                "anatomy": self.anatomy.to_json() if self.anatomy is not None else None}


@dataclass(frozen=True)
class RunSide:
    """One run of a comparison: what it is, its versions, machine and drift."""

    folder: str
    run: str
    started_at: str | None
    finished_at: str | None
    status: str | None
    spec: str | None  # the spec's name
    tool_version: str | None
    versions: tuple[str, ...]
    machine: dict[str, JSON]
    drift: Drift | None

    def to_json(self) -> dict[str, JSON]:
        d = self.drift
        return {"folder": self.folder, "run": self.run, "started_at": self.started_at,
                "finished_at": self.finished_at, "status": self.status, "spec": self.spec,
                "tool_version": self.tool_version, "versions": list(self.versions),
                "machine": self.machine,
                "drift": None if d is None else {"sd": d.sd, "df": d.df, "source": d.source}}


@dataclass(frozen=True)
class Unmatched:
    """A done cell of one run that no cell of the other matches."""

    idx: int
    label: str
    key: dict[str, JSON]  # its values of the axes matched on

    def to_json(self) -> dict[str, JSON]:
        return {"idx": self.idx, "label": self.label, "key": dict(self.key)}


@dataclass(frozen=True)
class NotDone:
    """A cell of one run that did not finish: not compared."""

    idx: int
    label: str
    status: str

    def to_json(self) -> dict[str, JSON]:
        return {"idx": self.idx, "label": self.label, "status": self.status}


@dataclass(frozen=True)
class Comparison:
    """:func:`compare_runs`: what ``compare`` prints, as JSON too (:meth:`to_json`),
    and its page shows (from the JSON form)."""

    a: RunSide
    b: RunSide
    dimensions: tuple[dict[str, JSON], ...]  # name, label, a, b
    matched_on: tuple[str, ...]
    between_runs: bool
    advice: str
    machine_differences: tuple[str, ...]
    alpha: float
    pairs: tuple[Pair, ...]
    # side ("a", "b") -> its cells without a match, and those not done
    unmatched: dict[str, tuple[Unmatched, ...]]
    not_done: dict[str, tuple[NotDone, ...]]

    def to_json(self) -> dict[str, JSON]:
        return {"a": self.a.to_json(), "b": self.b.to_json(),
                "dimensions": [dict(d) for d in self.dimensions],
                "matched_on": list(self.matched_on), "between_runs": self.between_runs,
                "advice": self.advice, "machine_differences": list(self.machine_differences),
                "alpha": self.alpha, "pairs": [p.to_json() for p in self.pairs],
                "unmatched": {k: [c.to_json() for c in v] for k, v in self.unmatched.items()},
                "not_done": {k: [c.to_json() for c in v] for k, v in self.not_done.items()}}


def comparable(a: Mapping[str, JSON], b: Mapping[str, JSON]) -> list[str]:
    """How two machines (run/machine.machine_metadata) differ in what matters for
    comparing figures."""
    keys = ("kernel", "cpu_model", "cpu_count", "cpus_usable", "memory_bytes", "arch")
    return [f"{k}: {a.get(k)} vs {b.get(k)}" for k in keys if a.get(k) != b.get(k)]


def _side_of(store: Store, run: StoredRun, cells: list[ComparedCell],
             drift: Drift | None) -> RunSide:
    # the run's name is the spec's anyway; this only double-checks it
    spec_name = run.spec.table.get("name")
    return RunSide(str(store.folder), run.name, run.started_at, run.finished_at, run.status,
                   spec_name, run.tool_version,
                   tuple(sorted({c["version"] for c in cells if c["version"]})),
                   run.machine, drift)


class ComparedCell(TypedDict):
    """A done cell of a compared run (:func:`_cells`)."""

    id: int
    idx: int
    label: str
    status: str
    axes: dict[str, JSON]
    params: dict[str, JSON]  # a copy, ``pg`` the server version that ran the cell
    version: str  # '' when not recorded


def _cells(store: Store, run_id: int) -> tuple[list[ComparedCell], list[NotDone]]:
    """Done cells with their parameters (``pg`` resolved to the server version that
    ran them), and the cells that are not done."""
    done: list[ComparedCell] = []
    other: list[NotDone] = []
    for cell in store.cells(run_id):
        if cell.status != "done":
            other.append(NotDone(cell.idx, cell.label, cell.status))
            continue
        # pg None (the default installation) and pg "18" are the same server when
        # they resolve to the same version: compare what actually ran.
        version = cluster_version(store, cell)
        params: dict[str, JSON] = dict(cell.params)
        params["pg"] = version or params.get("pg")
        done.append({"id": cell.id, "idx": cell.idx, "label": cell.label,
                     "status": cell.status, "axes": cell.axes, "params": params,
                     "version": version})
    return done, other


def _constant(cells: list[ComparedCell], name: str) -> tuple[bool, JSON]:
    values = {json.dumps(c["params"].get(name), sort_keys=True) for c in cells}
    if len(values) != 1:
        return False, None
    return True, cells[0]["params"].get(name)


def compared_dimensions(a: list[ComparedCell], b: list[ComparedCell]
                        ) -> list[dict[str, JSON]]:
    """The parameters constant within each run and different between the runs."""
    if not a or not b:
        return []
    names = sorted({k for c in a + b for k in c["params"]})
    dims: list[dict[str, JSON]] = []
    for name in names:
        const_a, value_a = _constant(a, name)
        const_b, value_b = _constant(b, name)
        if const_a and const_b and value_a != value_b:
            dims.append({"name": name, "label": "server version" if name == "pg" else name,
                         "a": value_a, "b": value_b})
    return dims


def _match_key(cell: ComparedCell, axes: list[str]) -> str:
    return json.dumps({k: cell["params"].get(k) for k in axes}, sort_keys=True)


def _measured(store: Store, cell_id: int) -> dict[str, list[float]]:
    rows = [r for r in store.repeats(cell_id) if not r.probed]
    return {column: [float(v) for r in rows if (v := getattr(r, column)) is not None]
            for _, column, _, _ in RUN_FIGURES}


def _side(values: Sequence[float]) -> FigureSide:
    if not values:
        return FigureSide(0, None, None, None, ())
    ci = mean_ci(values)
    return FigureSide(ci.n, ci.mean, ci.low, ci.high, tuple(values))


def _test(a: Sequence[float], b: Sequence[float]) -> FigureTest | None:
    """Welch's t-test of b against a, or None with fewer than 2 values a side."""
    if len(a) < 2 or len(b) < 2:
        return None
    w = welch_t(b, a, alpha=ALPHA)
    # An exact answer (neither side varies) has t = ±inf, which JSON cannot hold.
    return FigureTest(w.t if math.isfinite(w.t) else None, w.df, w.p_value, w.significant)


def _verdict(test: FigureTest | None, mean_a: float | None, mean_b: float | None,
             higher_is_better: bool | None, n_a: int, n_b: int) -> str:
    if test is None:
        return f"too few repeats ({n_a} vs {n_b})"
    if not test.significant or mean_a is None or mean_b is None:
        return "no significant difference"
    if higher_is_better is None:
        return "B higher, significant" if mean_b > mean_a else "B lower, significant"
    better = (mean_b > mean_a) == higher_is_better
    return "B faster, significant" if better else "B slower, significant"


def compare_figure(name: str, unit: str, a: Sequence[float], b: Sequence[float],
                   higher_is_better: bool | None,
                   between: tuple[Drift, Drift] | None = None) -> FigureComparison:
    """One figure of a pair: both sides' means, B/A with its 95 % CI, the test.
    ``between``: each run's drift, which two runs taken at different times also differ
    by (:func:`run_drift`); the interval and the test then hold it too."""
    side_a, side_b = _side(a), _side(b)
    ratio = low = high = None
    se_rel: tuple[float, float] | None = None  # (se / ratio, df)
    if a and b and side_a.mean:
        r = ratio_ci(b, a)
        ratio, low, high = r.ratio, r.low, r.high
        if r.se is not None and r.df is not None and r.ratio > 0:
            se_rel = (r.se / r.ratio, r.df)
    test = _test(a, b)
    if between is not None and test is not None and ratio is not None:
        widened = _across_runs(a, b, between)
        if widened is not None:
            low, high, test, se_rel = widened
    detectable = (None if se_rel is None else
                  100 * detectable_effect(se_rel[0], se_rel[1], 1 - ALPHA))
    return FigureComparison(name, unit, side_a, side_b, ratio, low, high, detectable, test,
                            _verdict(test, side_a.mean, side_b.mean, higher_is_better,
                                     side_a.n, side_b.n))


@dataclass(frozen=True)
class Drift:
    """How far a run's level moves over its own time, as a relative sd, and from what."""

    sd: float
    df: int
    source: str


def run_drift(store: Store, run_id: int) -> Drift | None:
    """A run's own drift. Interleaved: the round effects (each round's mean deviation of
    log TPS from its cells' means): what the machine itself did between rounds, which two
    runs at different times differ by as well. One cell after another: the spread of each
    cell's repeats (its drift is in there), pooled."""
    residuals: dict[int | None, list[float]] = defaultdict(list)
    pooled, df = 0.0, 0
    for cell in store.cells(run_id):
        reps = [r for r in store.repeats(cell.id) if not r.probed and r.tps > 0]
        if len(reps) < 2:
            continue
        logs = [math.log(float(r.tps)) for r in reps]
        mean = sum(logs) / len(logs)
        for r, v in zip(reps, logs, strict=True):
            residuals[r.round].append(v - mean)
        pooled += sum((v - mean) ** 2 for v in logs)
        df += len(logs) - 1
    effects = [sum(v) / len(v) for k, v in residuals.items() if k is not None and v]
    if len(effects) >= 3:
        m = sum(effects) / len(effects)
        sd = math.sqrt(sum((e - m) ** 2 for e in effects) / (len(effects) - 1))
        return Drift(sd, len(effects) - 1, f"the round-to-round drift of its {len(effects)} "
                     "rounds")
    if df == 0:
        return None
    return Drift(math.sqrt(pooled / df), df, "the spread of its cells' repeats")


def _across_runs(a: Sequence[float], b: Sequence[float], between: tuple[Drift, Drift]
                 ) -> tuple[float, float, FigureTest, tuple[float, float]] | None:
    """B/A's interval and test with both runs' drift added to the repeats' own spread:
    relative variance var(a)/(n·a²) + var(b)/(n·b²) + sd_a² + sd_b², degrees of freedom
    by Welch–Satterthwaite over the four parts; and (relative se, df)."""
    na, nb = len(a), len(b)
    ma, mb = sum(a) / na, sum(b) / nb
    if na < 2 or nb < 2 or ma <= 0 or mb <= 0:
        return None
    va = sum((x - ma) ** 2 for x in a) / (na - 1) / (na * ma * ma)
    vb = sum((x - mb) ** 2 for x in b) / (nb - 1) / (nb * mb * mb)
    parts = [(va, na - 1), (vb, nb - 1), *((d.sd ** 2, d.df) for d in between)]
    total = sum(v for v, _ in parts)
    ratio = mb / ma
    if total == 0:
        same = ratio == 1
        return ratio, ratio, FigureTest(None, float(na + nb - 2), 1.0 if same else 0.0,
                                        not same, between_runs=True), \
            (0.0, float(na + nb - 2))
    df = total ** 2 / sum(v * v / d for v, d in parts if d > 0)
    se = ratio * math.sqrt(total)
    t = (ratio - 1) / se
    half = t_ppf(1 - ALPHA / 2, df) * se
    p = 2 * t_sf(abs(t), df)
    return ratio - half, ratio + half, FigureTest(t, df, p, p < ALPHA, between_runs=True), \
        (math.sqrt(total), df)


def _score(kind: str, mean_a: float, mean_b: float) -> float:
    floor = FLOOR[kind]
    return abs(math.log((max(mean_b, 0.0) + floor) / (max(mean_a, 0.0) + floor)))


def cost_changes(a: list[RoleValues], b: list[RoleValues], top: int = TOP
                 ) -> CostChanges:
    """The per-commit costs that changed most between two cells' :func:`role_values`,
    over the (node, role) pairs both sides have."""
    by_a = {(r["node"], r["role"]): r for r in a}
    by_b = {(r["node"], r["role"]): r for r in b}
    changes: list[CostChange] = []
    notes: list[str] = []
    for node, role in sorted(by_a.keys() & by_b.keys()):
        ra, rb = by_a[(node, role)], by_b[(node, role)]
        figures: list[tuple[str, str, list[float], list[float]]] = []
        if ra["cpu_source"] == rb["cpu_source"]:
            figures += [("cpu_us", "CPU µs", ra["cpu_us_per_commit"], rb["cpu_us_per_commit"]),
                        ("context_switches", "context switches",
                         ra["context_switches_per_commit"], rb["context_switches_per_commit"])]
        elif "none" not in (ra["cpu_source"], rb["cpu_source"]):
            # perf's tracing roughly doubles a backend's CPU per commit (docs/decisions.md):
            # a perf figure against a /proc one would show the probe, not the change.
            notes.append(f"{node} {role}: CPU and context switches not compared (from "
                         f"{ra['cpu_source']} in A, {rb['cpu_source']} in B)")
        # Only calls traced on both sides: a call missing from one side's trace is
        # unknown there, not zero.
        calls = ra["syscalls_per_commit"].keys() & rb["syscalls_per_commit"].keys()
        figures += [("syscall", name, ra["syscalls_per_commit"][name],
                     rb["syscalls_per_commit"][name]) for name in sorted(calls)]
        for kind, name, va, vb in figures:
            if not va or not vb:
                continue
            entry = compare_figure(name, "per commit", va, vb, None)
            mean_a, mean_b = entry.a.mean, entry.b.mean
            if mean_a is None or mean_b is None or (mean_a == 0 and mean_b == 0):
                continue  # never called on either side
            changes.append(CostChange(**_fields(entry), node=node, role=role, kind=kind,
                                      difference=mean_b - mean_a,
                                      score=_score(kind, mean_a, mean_b)))
    changes.sort(key=lambda c: (-c.score, c.node, c.role, c.figure))
    moved = [c for c in changes if c.score > 0]
    only_a = sorted(f"{n} {r}" for n, r in by_a.keys() - by_b.keys())
    only_b = sorted(f"{n} {r}" for n, r in by_b.keys() - by_a.keys())
    return CostChanges(len(changes), tuple(moved[:top]), tuple(only_a), tuple(only_b),
                       tuple(notes))


def _fields(fig: FigureComparison) -> dict[str, Any]:
    """A figure's fields, for the kinds that add to it (CostChange, AnatomyFigure)."""
    return {f.name: getattr(fig, f.name) for f in dataclasses.fields(FigureComparison)}


ONE_REPEAT = "one repeat: no interval"
RELEASE_FIGURES = (("per_waiter_us", "µs per freed waiter", "µs per waiter"),
                   ("waiters_per_release", "waiters per release", "waiters"))


def anatomy_comparison(a: AnatomyValues | None, b: AnatomyValues | None,
                       between: tuple[Drift, Drift] | None, *, missing_a: str = "",
                       missing_b: str = "", names: tuple[str, str] = ("A", "B")
                       ) -> AnatomyComparison | None:
    """Each anatomy figure of B against A: the backends' components in µs per commit,
    each walsender's µs per freed waiter and waiters per release. Over the anatomy
    repeats, on the log scale (:func:`log_ratio_figure`; ``between``: the drift of the
    stretches of time the two sides come from, as for TPS); with one repeat on a side
    the ratio stands alone: the events inside a repeat are no sample of what the next
    repeat gives (docs/decisions.md, "Ratios of the commit anatomy"). None when neither
    side has an anatomy; ``missing_a``/``missing_b``: why a side has none; ``names``: how
    the sides are called in what is said."""
    if a is None and b is None:
        return None
    repeats = {"a": 0 if a is None else a.repeats, "b": 0 if b is None else b.repeats}
    if a is None or b is None:
        side, why = (names[0], missing_a) if a is None else (names[1], missing_b)
        text = f"{side} has no commit anatomy" + (f" ({why})" if why else "")
        return AnatomyComparison(repeats["a"], repeats["b"], text, "", (), (), (), (),
                                 f"{text}: nothing to compare")
    figures: list[AnatomyFigure] = []
    pairs: list[tuple[str, str, str, str, list[float], list[float]]] = [
        ("backend", name, PART_NAMES[name], "µs per commit", a.backend[name], b.backend[name])
        for name in a.backend.keys() & b.backend.keys()]
    for who in sorted(a.walsenders.keys() & b.walsenders.keys()):
        pairs += [(who, key, f"{who} {label}", unit, a.walsenders[who][key],
                   b.walsenders[who][key]) for key, label, unit in RELEASE_FIGURES]
    for who in sorted(a.standby.keys() & b.standby.keys()):  # the standby's half
        pairs += [(who, part, f"{STANDBY_NAMES[part]} ({who.removeprefix(STANDBY)})",
                   "µs per commit",
                   a.standby[who][part], b.standby[who][part])
                  for part in STANDBY_PARTS if part in a.standby[who].keys()
                  & b.standby[who].keys()]
    order = {name: i for i, name in enumerate(PART_NAMES)}
    pairs.sort(key=lambda p: (p[0] != "backend", order.get(p[1], 0), p[0], p[1]))
    for who, key, name, unit, va, vb in pairs:
        if not va or not vb or (not any(va) and not any(vb)):
            continue  # never happened on either side (the potential standby's releases)
        figures.append(AnatomyFigure(**_fields(log_ratio_figure(name, unit, va, vb, between)),
                                     who=who, key=key))
    changed = [f"{f.figure} {fmt.change(f.ratio)} [{fmt.change(f.ratio_low, '')}, "
               f"{fmt.change(f.ratio_high, '')}]" for f in figures
               if f.significant and f.ratio is not None
               and f.ratio_low is not None and f.ratio_high is not None]
    only_a = sorted(PART_NAMES[n] for n in a.backend.keys() - b.backend.keys())
    only_b = sorted(PART_NAMES[n] for n in b.backend.keys() - a.backend.keys())
    if min(repeats.values()) < 2:
        interval = (f"{repeats['a']} vs {repeats['b']} anatomy repeats: the ratios have no "
                    "interval (a repeat's events are no sample of the next repeat; "
                    "[probes] anatomy_repeats = 3 or more gives one)")
        summary = f"commit anatomy: {ONE_REPEAT} ({repeats['a']} vs {repeats['b']} repeats)"
    else:
        interval = (f"{repeats['a']} vs {repeats['b']} anatomy repeats: B/A is the ratio "
                    "of the geometric means over the repeats, its 95 % interval and "
                    "Welch's test on the log scale"
                    + (", the drift of the stretches of time they come from added"
                       if between is not None else ""))
        tested = sum(1 for f in figures if f.test is not None)
        summary = ("commit anatomy: " + "; ".join(changed) + (
            "; the rest not significant" if len(changed) < tested else "")
            if changed else f"commit anatomy: no figure changed beyond its interval "
                            f"({tested} compared)")
    return AnatomyComparison(repeats["a"], repeats["b"], None, interval, tuple(figures),
                             tuple(only_a), tuple(only_b), tuple(changed), summary)


def log_ratio_figure(name: str, unit: str, a: Sequence[float], b: Sequence[float],
                     between: tuple[Drift, Drift] | None) -> FigureComparison:
    """B/A of a figure whose repeats spread by tens of percent (a part of the commit
    anatomy): the ratio of the geometric means, Welch's t on the logs, its interval
    exp(d ± t·se) (never below 0, as wide on each side as the spread is relative);
    ``between``: each side's drift, added to the variance of the log ratio as
    :func:`_across_runs` adds it. With one repeat on a side, or a repeat in which the
    figure was 0 (no log), the ratio stands alone."""
    side_a, side_b = _side(a), _side(b)
    positive = all(v > 0 for v in (*a, *b))
    ratio = (math.exp(statistics.fmean(math.log(v) for v in b)
                      - statistics.fmean(math.log(v) for v in a)) if positive and a and b
             else side_b.mean / side_a.mean if side_a.mean and side_b.mean is not None
             else None)
    low = high = detectable = None
    test: FigureTest | None = None
    if positive and len(a) >= 2 and len(b) >= 2 and ratio is not None:
        parts = [(statistics.variance([math.log(v) for v in values]) / len(values),
                  len(values) - 1) for values in (a, b)]
        parts += [(d.sd ** 2, d.df) for d in between or ()]
        total = sum(v for v, _ in parts)
        log = math.log(ratio)
        if total == 0:  # no spread anywhere: the answer is exact
            low = high = ratio
            test = FigureTest(None, float(len(a) + len(b) - 2), 1.0 if log == 0 else 0.0,
                              log != 0, log_scale=True)
        else:
            df = total ** 2 / sum(v * v / k for v, k in parts if k > 0)
            se = math.sqrt(total)
            half = t_ppf(1 - ALPHA / 2, df) * se
            p = 2 * t_sf(abs(log) / se, df)
            low, high = math.exp(log - half), math.exp(log + half)
            detectable = 100 * detectable_effect(se, df, 1 - ALPHA)
            test = FigureTest(log / se, df, p, p < ALPHA, log_scale=True)
    verdict = (_verdict(test, 1.0, ratio, None, len(a), len(b)) if test is not None
               else ONE_REPEAT if min(len(a), len(b)) == 1
               else "no interval (a repeat without it)")
    return FigureComparison(name, unit, side_a, side_b, ratio, low, high, detectable, test,
                            verdict)


def cell_anatomy_comparison(store_a: Store, cell_a: int, store_b: Store, cell_b: int,
                            between: tuple[Drift, Drift] | None,
                            names: tuple[str, str] = ("A", "B")
                            ) -> AnatomyComparison | None:
    """:func:`anatomy_comparison` of two stored cells (one store twice within a run)."""
    a, b = anatomy_values(store_a, cell_a), anatomy_values(store_b, cell_b)
    return anatomy_comparison(
        a, b, between, missing_a=why_no_anatomy(store_a, cell_a) if a is None else "",
        missing_b=why_no_anatomy(store_b, cell_b) if b is None else "", names=names)


def _one_liner(fig: FigureComparison) -> str:
    """hyperfine's way of putting it: 'B is 1.52 ± 0.10 times A's TPS'."""
    if fig.ratio is None:
        return f"no ratio for {fig.figure} (a side has no value)"
    if fig.ratio_low is None or fig.ratio_high is None:
        return (f"B is {fig.ratio:.2f} times A's {fig.figure} (too few repeats for "
                "an interval)")
    half = (fig.ratio_high - fig.ratio_low) / 2
    return f"B is {fig.ratio:.2f} ± {half:.2f} times A's {fig.figure}"


def _disturbed(store: Store, cell_id: int) -> tuple[int, int]:
    """(measured repeats something hit, measured repeats) of a cell."""
    rows = [r for r in store.repeats(cell_id) if not r.probed]
    return sum(1 for r in rows if r.disturbed), len(rows)


def _pair(store_a: Store, store_b: Store, ca: ComparedCell, cb: ComparedCell,
          axes: list[str], top: int, between: tuple[Drift, Drift] | None) -> Pair:
    ma, mb = _measured(store_a, ca["id"]), _measured(store_b, cb["id"])
    figures = [compare_figure(name, unit, ma[column], mb[column], more_is_better, between)
               for name, column, unit, more_is_better in RUN_FIGURES]
    hit = {"a": _disturbed(store_a, ca["id"]), "b": _disturbed(store_b, cb["id"])}
    summary = _one_liner(figures[0])
    caveats = [f"{side.upper()}: {n} of {total} repeats disturbed" for side, (n, total)
               in hit.items() if n]
    if caveats and any(f.significant for f in figures):
        # the tool saw something else on the machine in these repeats: a difference
        # may be that, not the change (run/reset.py says what it counts)
        summary += (f" ({'; '.join(caveats)}: the difference may be what hit them; "
                    "syncrep-lab results lists what)")
    return Pair({k: ca["params"].get(k) for k in axes},
                PairCell(ca["idx"], ca["label"], ca["version"]),
                PairCell(cb["idx"], cb["label"], cb["version"]), hit, tuple(figures),
                summary, cost_changes(role_values(store_a, ca["id"]),
                                      role_values(store_b, cb["id"]), top),
                cell_anatomy_comparison(store_a, ca["id"], store_b, cb["id"], between))


def compare_runs(folder_a: Path, folder_b: Path, *, force: bool = False, top: int = TOP
                 ) -> Comparison:
    """Compare run B against run A, cell by cell.

    Raises UserError when the two runs were made on machines that differ in what
    matters for the figures, unless ``force``; the differences are then returned
    as ``machine_differences``.
    """
    if top < 1:
        raise UserError(f"--top must be at least 1, got {top}", "pass --top 1 or more")
    store_a = Store(folder_a, create=False)
    try:
        store_b = Store(folder_b, create=False)
        try:
            return _compare(store_a, store_b, force=force, top=top)
        finally:
            store_b.close()
    finally:
        store_a.close()


def _compare(store_a: Store, store_b: Store, *, force: bool, top: int) -> Comparison:
    run_a, run_b = store_a.run(), store_b.run()
    differences = comparable(run_a.machine, run_b.machine)
    if differences and not force:
        raise UserError(
            f"{store_a.folder} and {store_b.folder} ran on different machines: "
            + "; ".join(differences),
            "compare runs made on one machine, or pass --force to compare them anyway "
            "(the differences are then shown as a warning)")
    cells_a, not_done_a = _cells(store_a, run_a.id)
    cells_b, not_done_b = _cells(store_b, run_b.id)
    dims = compared_dimensions(cells_a, cells_b)
    dim_names = {d["name"] for d in dims}
    axes = sorted({k for c in cells_a + cells_b for k in c["axes"]} - dim_names)
    by_key: dict[str, list[ComparedCell]] = defaultdict(list)
    for cb in cells_b:
        by_key[_match_key(cb, axes)].append(cb)
    drift_a, drift_b = run_drift(store_a, run_a.id), run_drift(store_b, run_b.id)
    between = (drift_a, drift_b) if drift_a is not None and drift_b is not None else None
    pairs, unmatched_a = [], []
    for ca in cells_a:
        candidates = by_key.get(_match_key(ca, axes))
        if candidates:
            pairs.append(_pair(store_a, store_b, ca, candidates.pop(0), axes, top, between))
        else:
            unmatched_a.append(ca)
    unmatched_b = [cb for left in by_key.values() for cb in left]
    unmatched_b.sort(key=lambda c: c["idx"])

    def brief(cells: list[ComparedCell]) -> tuple[Unmatched, ...]:
        return tuple(Unmatched(c["idx"], c["label"], {k: c["params"].get(k) for k in axes})
                     for c in cells)

    return Comparison(_side_of(store_a, run_a, cells_a, drift_a),
                      _side_of(store_b, run_b, cells_b, drift_b), tuple(dims), tuple(axes),
                      between is not None, ADVICE, tuple(differences), ALPHA, tuple(pairs),
                      {"a": brief(unmatched_a), "b": brief(unmatched_b)},
                      {"a": tuple(not_done_a), "b": tuple(not_done_b)})
