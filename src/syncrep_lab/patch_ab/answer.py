"""The answer of ``ab``, read from its run's store: per cell, patched against stock.

Nothing is computed here that the analysis does not already compute; this module
pairs each patched cell with its stock cell and gathers:

- the paired ratio patched / stock with its interval and the smallest change the run
  could have detected (analysis/ratios.py: ``ratio_to_baseline``, ``detectable_pct``);
- the control's verdict: a level whose commits never reach the commit wait (``local``)
  whose ratio moved beyond its interval says something other than the commit-wait path
  changed (the build, the machine);
- per role, CPU µs and system calls per commit, stock against patched, each side with
  its interval over repeats and B/A with its own (analysis/costs.py ``role_values``,
  analysis/compare.py ``compare_figure``, ``cost_changes``);
- the commit anatomy's components per side where that probe ran (analysis/anatomy.py),
  and the wait for each standby in its parts where ``[probes] standby_anatomy`` split it
  (per side, and each part patched / stock over the anatomy repeats, as ``compare``
  takes the anatomy's ratios: analysis/compare.py ``log_ratio_figure``);
- differential flame graphs per role (patch_ab/flamediff.py);
- the model's bound of the sync walsender from each build's measured CPU per commit,
  and what binds at ``[reference] cores`` (analysis/model.py): the model's shape, not a
  forecast.

The answer is a :class:`PatchVerdict` per base, which owns its JSON form (``ab.json``'s
``answer``); terminal/ab.py presents it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from syncrep_lab.analysis.anatomy import (
    STANDBY_PARTS,
    PerCommit,
    Releases,
    StandbyParts,
    anatomy_values,
    cell_anatomy,
    releasing,
)
from syncrep_lab.analysis.compare import (
    Drift,
    FigureComparison,
    FigureSide,
    FigureTest,
    compare_figure,
    cost_changes,
    log_ratio_figure,
    run_drift,
)
from syncrep_lab.analysis.costs import cell_costs, cluster_version, role_values, untraced_cpu
from syncrep_lab.analysis.model import CellModel, run_model
from syncrep_lab.analysis.ratios import BaselineRatio, ratios_to_baseline
from syncrep_lab.analysis.sync_walsender import choose, stored_clues
from syncrep_lab.json_form import JSON, finite
from syncrep_lab.patch_ab.flamediff import DiffGraph, cell_diffs, critical_z, mark_moved
from syncrep_lab.patch_ab.spec import CONTROL_LEVELS, REFERENCE_CORES
from syncrep_lab.stats.pairing import ratio_of
from syncrep_lab.store import Store, StoredCell, queries

SYSCALL_FLOOR = 0.05  # calls per commit: below this on both sides, a call is not shown
MOVED = 8  # costs that moved, kept per cell
GPROF_FUNCTIONS = 8  # per role, the most called on either side
ROLE_ORDER = ("backend", "walsender", "walwriter", "walreceiver", "startup", "pgbench")


@dataclass(frozen=True)
class SideFigure:
    """One build's figure over its repeats: how many, the mean and its interval."""

    n: int
    mean: float | None
    low: float | None
    high: float | None

    def to_json(self) -> dict[str, JSON]:
        return {"n": self.n, "mean": self.mean, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class Figure:
    """A cost per commit, stock against patched: each side's, B/A with its interval, and
    whether it moved at the cell's per-figure level (:func:`_costs`)."""

    stock: SideFigure
    patched: SideFigure
    ratio: float | None
    low: float | None
    high: float | None
    significant: bool

    def to_json(self) -> dict[str, JSON]:
        return {"stock": self.stock.to_json(), "patched": self.patched.to_json(),
                "ratio": self.ratio, "low": self.low, "high": self.high,
                "significant": self.significant}


@dataclass(frozen=True)
class CpuFigure(Figure):
    """CPU µs per commit: B/A paired by round where every repeat of both has some
    (``paired_rounds``), else Welch's over the repeats (None); in a duet paired over
    crossover units (``crossover_units``, ``paired_rounds`` the rounds in them)."""

    paired_rounds: int | None = None
    crossover_units: int | None = None

    def to_json(self) -> dict[str, JSON]:
        out = {**super().to_json(), "paired_rounds": self.paired_rounds}
        if self.crossover_units is not None:  # a duet's (an interleaved one's as it was)
            out["crossover_units"] = self.crossover_units
        return out


@dataclass(frozen=True)
class RoleCosts:
    """A role both sides have: its CPU per commit (None: not comparable) and the system
    calls per commit above SYSCALL_FLOOR."""

    node: str
    role: str
    cpu_source: str
    cpu_us: CpuFigure | None
    syscalls: Mapping[str, Figure]

    def to_json(self) -> dict[str, JSON]:
        return {"node": self.node, "role": self.role, "cpu_source": self.cpu_source,
                "cpu_us": self.cpu_us.to_json() if self.cpu_us else None,
                "syscalls": {k: f.to_json() for k, f in self.syscalls.items()}}


@dataclass(frozen=True)
class MovedCost:
    """A cost that moved (compare's ranking), stock's and patched's means, B/A."""

    node: str
    role: str
    figure: str
    kind: str
    stock: float | None
    patched: float | None
    ratio: float | None
    low: float | None
    high: float | None

    def to_json(self) -> dict[str, JSON]:
        return {"node": self.node, "role": self.role, "figure": self.figure,
                "kind": self.kind, "stock": self.stock, "patched": self.patched,
                "ratio": self.ratio, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class Part:
    """A component of a backend's commit: µs per commit (its interval), per event."""

    us_per_commit: PerCommit
    mean_us: float | None
    p99_us: float | None

    def to_json(self) -> dict[str, JSON]:
        return {"us_per_commit": self.us_per_commit.to_json(), "mean_us": self.mean_us,
                "p99_us": self.p99_us}


@dataclass(frozen=True)
class StandbyHalf:
    """One build's wait for a standby in its parts (probes/standby_anatomy.py): each
    part in µs per commit joined, with its interval over the anatomy repeats (none with
    one); ``whole_us`` the anatomy's wait for the standby of those commits and
    ``sum_ratio`` the parts' sum over it (measured apart: the check that they add up).
    A part not measured (the flush under remote_write or with fsync off) is absent."""

    standby: str  # standby:NAME
    commits: int  # commits joined
    parts: Mapping[str, PerCommit]
    whole_us: float | None
    sum_ratio: float | None

    @classmethod
    def of(cls, found: StandbyParts) -> StandbyHalf:
        return cls(found.standby, found.commits,
                   {p.component: p.us_per_commit for p in found.parts},
                   found.whole_us, found.sum_ratio)

    def to_json(self) -> dict[str, JSON]:
        return {"standby": self.standby, "commits": self.commits,
                "parts": {k: v.to_json() for k, v in self.parts.items()},
                "whole_us": self.whole_us, "sum_ratio": self.sum_ratio}


@dataclass(frozen=True)
class AnatomySide:
    """One build's commit anatomy (its probed repeats): the components by name, the
    walsender that freed the waiters, the two ceilings the waiting sets, and the wait
    for each standby in its parts where ``standby_anatomy`` split it (else none)."""

    commits: int
    components: Mapping[str, Part]
    releases: Releases | None
    little_bound_tps: float | None
    release_bound_tps: float | None
    standby: tuple[StandbyHalf, ...] = ()

    def to_json(self) -> dict[str, JSON]:
        r = self.releases
        return {"commits": self.commits,
                "components": {k: c.to_json() for k, c in self.components.items()},
                "releases": None if r is None else r.to_json(),
                "little_bound_tps": self.little_bound_tps,
                "release_bound_tps": self.release_bound_tps,
                "standby": [s.to_json() for s in self.standby]}


@dataclass(frozen=True)
class StandbyPartFigure:
    """A part of the wait for a standby, stock against patched: each side's µs per
    commit joined over its anatomy repeats, B/A (the ratio of the geometric means, its
    interval with two repeats a side or more, as ``compare`` takes the anatomy's) and
    whether it moved at the cell's per-figure level (:func:`_standby_half`)."""

    standby: str  # standby:NAME
    part: str  # one of analysis/anatomy.py's STANDBY_PARTS
    figure: Figure

    def to_json(self) -> dict[str, JSON]:
        return {"standby": self.standby, "part": self.part, **self.figure.to_json()}


@dataclass(frozen=True)
class GprofCalls:
    """A function's calls per commit on each side (None: not called there, or not
    compiled with -pg)."""

    function: str
    stock: float | None
    patched: float | None

    def to_json(self) -> dict[str, JSON]:
        return {"function": self.function, "stock": self.stock, "patched": self.patched}


@dataclass(frozen=True)
class GprofRole:
    """gprof's calls per commit of a role, the functions called most on either side."""

    node: str
    role: str
    functions: tuple[GprofCalls, ...]

    def to_json(self) -> dict[str, JSON]:
        return {"node": self.node, "role": self.role,
                "functions": [f.to_json() for f in self.functions]}


@dataclass(frozen=True)
class WalsenderBound:
    """A walsender's bound in one build's model, and what binds at the reference's cores."""

    role: str
    demand_us: float | None
    demand_low: float | None
    demand_high: float | None
    bound_tps: float
    bound_low: float
    bound_high: float
    source: str
    release_share: float | None
    binding_here: str | None
    binding_at_cores: str | None
    max_tps_at_cores: float | None

    def to_json(self) -> dict[str, JSON]:
        return {"role": self.role, "demand_us": self.demand_us,
                "demand_low": self.demand_low, "demand_high": self.demand_high,
                "bound_tps": self.bound_tps, "bound_low": self.bound_low,
                "bound_high": self.bound_high, "source": self.source,
                "release_share": self.release_share, "binding_here": self.binding_here,
                "binding_at_cores": self.binding_at_cores,
                "max_tps_at_cores": self.max_tps_at_cores}


@dataclass(frozen=True)
class CostRatio:
    """The sync walsender's CPU per commit, patched / stock, and whether it moved."""

    ratio: float | None
    low: float | None
    high: float | None
    significant: bool

    def to_json(self) -> dict[str, JSON]:
        return {"ratio": self.ratio, "low": self.low, "high": self.high,
                "significant": self.significant}


@dataclass(frozen=True)
class BoundRatio:
    """The walsender's bound, patched / stock: the inverse of its cost's ratio."""

    ratio: float | None
    low: float | None
    high: float | None

    def to_json(self) -> dict[str, JSON]:
        return {"ratio": self.ratio, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class WalsenderModel:
    """The sync walsender's bound on each side and how it moves (:func:`_model`)."""

    cores: float
    walsender: str
    stock: WalsenderBound
    patched: WalsenderBound
    cost_ratio: CostRatio | None
    bound_ratio: BoundRatio

    def to_json(self) -> dict[str, JSON]:
        return {"cores": self.cores, "walsender": self.walsender,
                "stock": self.stock.to_json(), "patched": self.patched.to_json(),
                "cost_ratio": self.cost_ratio.to_json() if self.cost_ratio else None,
                "bound_ratio": self.bound_ratio.to_json()}


@dataclass(frozen=True)
class Compared:
    """What a cell whose two sides finished compares beyond TPS: costs per role, those
    that moved, the commit anatomy, gprof, the differential flame graphs and the model."""

    roles: tuple[RoleCosts, ...]
    moved: tuple[MovedCost, ...]
    cost_notes: tuple[str, ...]
    figures_tested: int
    anatomy_stock: AnatomySide | None
    anatomy_patched: AnatomySide | None
    gprof: tuple[GprofRole, ...] | None
    flame: tuple[DiffGraph, ...]
    model: WalsenderModel | None
    # the wait for each standby in its parts, patched / stock (empty: not split)
    standby_half: tuple[StandbyPartFigure, ...] = ()

    def to_json(self) -> dict[str, JSON]:
        a, b = self.anatomy_stock, self.anatomy_patched
        return {"roles": [r.to_json() for r in self.roles],
                "moved": [m.to_json() for m in self.moved],
                "cost_notes": list(self.cost_notes), "figures_tested": self.figures_tested,
                "anatomy": {"stock": a.to_json() if a else None,
                            "patched": b.to_json() if b else None},
                "gprof": None if self.gprof is None else [g.to_json() for g in self.gprof],
                "flame": [g.to_json() for g in self.flame],
                "model": self.model.to_json() if self.model else None,
                "standby_half": [f.to_json() for f in self.standby_half]}


@dataclass(frozen=True)
class Moved:
    """A measure whose interval excludes 1 (TPS, a role's CPU or a system call per
    commit), B/A with its interval, and how its two sides were set against each other
    (``how``: the duet's crossover units, rounds, or the probed repeats, not paired)."""

    measure: str
    ratio: float
    low: float
    high: float
    how: str

    @property
    def half_width_rel(self) -> float:
        return max(self.high / self.ratio - 1, 1 - self.low / self.ratio)

    def to_json(self) -> dict[str, JSON]:
        return {"measure": self.measure, "ratio": self.ratio, "low": self.low,
                "high": self.high, "how": self.how,
                "half_width_pct": 100 * self.half_width_rel}


@dataclass(frozen=True)
class PatchedCell:
    """A patched cell and its stock twin: their status and TPS, the paired ratio and its
    verdict, and, where both finished, what else they compare (``compared``)."""

    level: str
    clients: int
    control: bool  # a level whose commits never wait for a standby
    label: str
    stock_idx: int
    patched_idx: int
    stock_status: str
    patched_status: str
    stock_tps: float | None
    patched_tps: float | None
    ratio: BaselineRatio | None  # TPS, patched / stock
    verdict: str  # faster | slower | no change | no interval | not measured
    compared: Compared | None = None
    # the measure that moved with the narrowest interval (:func:`tightest`), if any
    tightest: Moved | None = None

    @property
    def statuses(self) -> dict[str, str]:
        return {"stock": self.stock_status, "patched": self.patched_status}

    @property
    def model(self) -> WalsenderModel | None:
        return self.compared.model if self.compared else None

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {
            "level": self.level, "clients": self.clients, "control": self.control,
            "label": self.label, "stock_idx": self.stock_idx,
            "patched_idx": self.patched_idx,
            "status": {"stock": self.stock_status, "patched": self.patched_status},
            "tps": {"stock": self.stock_tps, "patched": self.patched_tps},
            "ratio": self.ratio.to_json() if self.ratio else None,
            "verdict": self.verdict}
        if self.tightest is not None:  # a duet's (an interleaved answer is as it was)
            out["tightest_moved"] = self.tightest.to_json()
        if self.compared is not None:
            out.update(self.compared.to_json())
        return out


@dataclass(frozen=True)
class Control:
    """Whether the control cells held 1 (None: none, or none measured), the cells that
    moved, and the sentence that says it."""

    held: bool | None
    moved: tuple[int, ...]
    sentence: str

    def to_json(self) -> dict[str, JSON]:
        return {"held": self.held, "moved": list(self.moved), "sentence": self.sentence}


@dataclass(frozen=True)
class PatchVerdict:
    """``ab``'s answer for one base: the run, how it went, and each cell patched against
    stock, the control's word last (``ab.json``'s ``answer`` is ``to_json()``)."""

    run: str
    report: str
    status: str
    started_at: str | None
    finished_at: str | None
    seconds: float | None
    rounds: int
    duration_s: int
    budget: str | None
    ci_target: float
    confidence: float
    stop_reasons: tuple[str, ...]
    machine: Mapping[str, JSON]
    versions: Mapping[str, str]
    reference_cores: float
    flame_z: float | None  # the |z| a frame had to pass to have moved
    flame_hz: int
    sync_walsender: str | None
    cells: tuple[PatchedCell, ...]
    control: Control
    # how the two sides were measured: interleaved (one after the other in shuffled
    # rounds, the ratio paired by round) or duet (at the same moment, each on CPUs of its
    # own, the ratio paired over crossovers of two rounds of simultaneous pairs); the
    # run's note on it (a duet the machine could not run says why it was interleaved)
    order: str = "interleaved"
    order_note: str | None = None
    # what the work per commit could and could not be measured with here (a duet's
    # system calls from the probed repeats alone, no PMU for instructions)
    work_notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, JSON]:
        """The JSON form, unbounded figures null (JSON has no infinity)."""
        return finite({
            "run": self.run, "report": self.report, "status": self.status,
            "started_at": self.started_at, "finished_at": self.finished_at,
            "seconds": self.seconds, "rounds": self.rounds, "duration_s": self.duration_s,
            "budget": self.budget, "ci_target": self.ci_target,
            "confidence": self.confidence, "stop_reasons": list(self.stop_reasons),
            "machine": dict(self.machine), "versions": dict(self.versions),
            "reference_cores": self.reference_cores, "flame_z": self.flame_z,
            "flame_hz": self.flame_hz, "sync_walsender": self.sync_walsender,
            "cells": [c.to_json() for c in self.cells], "control": self.control.to_json(),
            "order": self.order, "order_note": self.order_note,
            **({"work_notes": list(self.work_notes)} if self.order == "duet" else {})})


def _side(side: FigureSide) -> SideFigure:
    return SideFigure(side.n, side.mean, side.low, side.high)


def _moved(test: FigureTest | None, alpha_each: float) -> bool:
    """Whether Welch's test says a figure moved at the per-figure level of the cell's
    family (:func:`_costs`)."""
    return test is not None and test.p_value < alpha_each


def _figure(name: str, a: list[float], b: list[float], alpha_each: float) -> Figure:
    """Stock (a) against patched (b): each side's mean and interval, B/A with its;
    ``significant`` at ``alpha_each`` (the cell's family-wise level shared out)."""
    fig = compare_figure(name, "per commit", a, b, None)
    return Figure(_side(fig.a), _side(fig.b), fig.ratio, fig.ratio_low, fig.ratio_high,
                  _moved(fig.test, alpha_each))


def _paired_cpu(store: Store, stock: StoredCell, patched: StoredCell,
                *confidences: float, crossover: bool = False
                ) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Per role, patched / stock CPU per commit paired by round (as the TPS ratio is:
    the machine's drift between rounds cancels; ``crossover``: over a duet's crossover
    units, as its TPS ratio is), where every repeat of both has some: the ratio at each
    of ``confidences``, the store read once."""
    rounds = {r.id: r.round for c in (stock, patched) for r in store.repeats(c.id)}
    a, b = untraced_cpu(store, stock.id), untraced_cpu(store, patched.id)
    out = {}
    for key in a.keys() & b.keys():
        va = [(rounds[i], v) for i, v in a[key].items()]
        vb = [(rounds[i], v) for i, v in b[key].items()]
        if min(v for _, v in va + vb) <= 0:
            continue  # a repeat without a clock tick of it: no log ratio
        found = [ratio_of(vb, va, c, crossover=crossover) for c in confidences]
        if all(f is not None and f["paired"] for f in found):
            out[key] = [f for f in found if f is not None]
    return out


def _role_rank(role: RoleCosts) -> tuple[int, int, str]:
    base = role.role.split(":", 1)[0]
    rank = ROLE_ORDER.index(base) if base in ROLE_ORDER else len(ROLE_ORDER)
    return (0 if role.node == "primary" else 1, rank, f"{role.node} {role.role}")


def _costs(store: Store, stock: StoredCell, patched: StoredCell, confidence: float,
           also: int = 0, crossover: bool = False
           ) -> tuple[list[RoleCosts], list[MovedCost], list[str], int]:
    """Per role both sides have: CPU µs per commit (B/A paired by round where it can
    be, else Welch's over the repeats) and system calls per commit; then the costs that
    moved most (compare's ranking, those whose test says they moved), notes, and how
    many figures were tested.

    A figure is marked as moved (``significant``) at 1 - ``confidence`` over all the
    figures the cell compares (Bonferroni: each at that level divided by their number,
    every role's CPU, context switches and system calls), as the flame graphs' frames
    are: marked at that level each, some 24 rows a side would show one move in most
    cells that did not move at all. The intervals shown stay at ``confidence`` each.
    ``also``: the cell's other figures tested (the parts of the wait for a standby),
    counted in the family. ``crossover``: a duet's, CPU paired over crossover units."""
    va, vb = role_values(store, stock.id), role_values(store, patched.id)
    changes = cost_changes(va, vb, top=MOVED * 4)
    tested = max(1, changes.compared + also)
    alpha_each = (1 - confidence) / tested
    # the interval shown, and the one the mark is read from
    paired = _paired_cpu(store, stock, patched, confidence, 1 - alpha_each,
                         crossover=crossover)
    by_b = {(r["node"], r["role"]): r for r in vb}
    roles = []
    for ra in va:
        rb = by_b.get((ra["node"], ra["role"]))
        if rb is None:
            continue
        cpu: CpuFigure | None = None
        if ra["cpu_source"] == rb["cpu_source"] and ra["cpu_us_per_commit"] \
                and rb["cpu_us_per_commit"] \
                and max(*ra["cpu_us_per_commit"], *rb["cpu_us_per_commit"]) > 0:
            fig = _figure("CPU µs", ra["cpu_us_per_commit"], rb["cpu_us_per_commit"],
                          alpha_each)
            pair, each = paired.get((ra["node"], ra["role"]), (None, None)) \
                if ra["cpu_source"] == "untraced" else (None, None)
            cpu = CpuFigure(fig.stock, fig.patched, fig.ratio, fig.low, fig.high,
                            fig.significant)
            if pair is not None and pair["low"] is not None and pair["high"] is not None \
                    and each is not None and each["low"] is not None \
                    and each["high"] is not None:
                cpu = dataclasses.replace(cpu, ratio=pair["ratio"], low=pair["low"],
                                          high=pair["high"],
                                          significant=not each["low"] <= 1 <= each["high"],
                                          paired_rounds=pair["rounds"],
                                          crossover_units=pair.get("units"))
        syscalls = {}
        calls = ra["syscalls_per_commit"].keys() & rb["syscalls_per_commit"].keys()
        for name in sorted(calls):
            a, b = ra["syscalls_per_commit"][name], rb["syscalls_per_commit"][name]
            if a and b and max(sum(a) / len(a), sum(b) / len(b)) >= SYSCALL_FLOOR:
                syscalls[name] = _figure(name, a, b, alpha_each)
        if cpu is not None or syscalls:
            roles.append(RoleCosts(ra["node"], ra["role"], ra["cpu_source"], cpu, syscalls))
    roles.sort(key=_role_rank)
    moved = [MovedCost(node=c.node, role=c.role, figure=c.figure, kind=c.kind,
                       stock=c.a.mean, patched=c.b.mean, ratio=c.ratio,
                       low=c.ratio_low, high=c.ratio_high)
             for c in changes.top if _moved(c.test, alpha_each)][:MOVED]
    return roles, moved, list(changes.notes), tested


def _cpu_means(roles: list[RoleCosts]
               ) -> dict[tuple[str, str], tuple[float | None, float | None]]:
    return {(r.node, r.role): (r.cpu_us.stock.mean, r.cpu_us.patched.mean)
            for r in roles if r.cpu_us is not None}


def _anatomy(store: Store, cell: StoredCell) -> AnatomySide | None:
    commits = {r.id: int(r.transactions) for r in store.repeats(cell.id) if r.probed}
    found = cell_anatomy(store, commits, cell.typed_params.clients or 0)
    if found is None:
        return None
    return AnatomySide(
        commits=found.commits,
        components={c.component: Part(c.us_per_commit, c.mean_us, c.p99_us)
                    for c in found.components},
        releases=releasing(found.releases),
        little_bound_tps=found.little_bound_tps,
        release_bound_tps=found.release_bound_tps,
        standby=tuple(StandbyHalf.of(s) for s in found.standby))


def _standby_half(store: Store, stock: StoredCell, patched: StoredCell,
                  between: tuple[Drift, Drift] | None
                  ) -> list[tuple[str, str, FigureComparison]]:
    """Each part of the wait for a standby both sides split, patched / stock over the
    anatomy repeats, as ``results --json`` takes a cell's anatomy against its
    baseline's (the ratio of the geometric means, Welch's test on the logs, the run's
    drift twice: a cell's anatomy repeats come after the rounds, one cell after another,
    never paired; one repeat on a side: a ratio alone), not yet marked:
    :func:`_compared` marks them at the cell's per-figure level, the costs' family."""
    a, b = anatomy_values(store, stock.id), anatomy_values(store, patched.id)
    if a is None or b is None:
        return []
    out = []
    for who in sorted(a.standby.keys() & b.standby.keys()):
        for part in STANDBY_PARTS:
            va, vb = a.standby[who].get(part), b.standby[who].get(part)
            if va and vb and (any(va) or any(vb)):
                out.append((who, part, log_ratio_figure(part, "µs per commit", va, vb,
                                                        between)))
    return out


def _gprof(store: Store, stock: StoredCell, patched: StoredCell) -> list[GprofRole] | None:
    """Per role both sides profiled (a profiling build): the functions called most per
    commit on either side, stock against patched (gprof's exact counts); None where
    neither side ran gprof."""
    probed = [r.id for c in (stock, patched) for r in store.repeats(c.id) if r.probed]
    if not probed or not queries.gprof_of(store, probed)[0]:
        return None
    ga = {(g["node"], g["role"]): g for g in cell_costs(store, stock.id).gprof}
    gb = {(g["node"], g["role"]): g for g in cell_costs(store, patched.id).gprof}
    out = []
    for key in sorted(ga.keys() & gb.keys()):
        calls_a = {f["function"]: f["calls_per_commit"] for f in ga[key]["functions"]}
        calls_b = {f["function"]: f["calls_per_commit"] for f in gb[key]["functions"]}
        names = sorted(calls_a.keys() | calls_b.keys(),
                       key=lambda fn: -max(calls_a.get(fn) or 0.0, calls_b.get(fn) or 0.0))
        out.append(GprofRole(key[0], key[1], tuple(
            GprofCalls(fn, calls_a.get(fn), calls_b.get(fn)) for fn in names[:GPROF_FUNCTIONS])))
    return out


def _sync_walsender(store: Store, cell: StoredCell, model: CellModel | None,
                    anatomy: AnatomySide | None) -> str | None:
    """The walsender that releases the waiters, by the one rule
    (analysis/sync_walsender.py), among those the model bounds: the server's word, the
    names, then the commit anatomy's, the flame graph's (the model's serial share), the
    CPU per commit's."""
    if model is None:
        return None
    senders = {b.resource: b for b in model.bounds if b.kind == "process"
               and b.resource.startswith("walsender:")}
    if not senders:
        return None
    freed = anatomy.releases if anatomy else None
    clues = dataclasses.replace(
        stored_clues(store, cell, senders),
        releases=[freed] if freed else [],
        release_share={s.role: s.share for s in model.serial if s.share},
        cpu_us={r: b.demand_us.mean if b.demand_us else 0.0 for r, b in senders.items()})
    chosen = choose(clues)
    return chosen.role if chosen is not None else None


def _walsender(model: CellModel | None, role: str) -> WalsenderBound | None:
    """A walsender's bound in a cell's model, and what binds at the reference's cores."""
    if model is None:
        return None
    bound = next((b for b in model.bounds if b.resource == role), None)
    if bound is None:
        return None
    serial = next((s for s in model.serial if s.role == role), None)
    what_if = model.what_if
    d = bound.demand_us
    return WalsenderBound(
        role=role, demand_us=d.mean if d else None, demand_low=d.low if d else None,
        demand_high=d.high if d else None, bound_tps=bound.max_tps.mean,
        bound_low=bound.max_tps.low, bound_high=bound.max_tps.high, source=bound.source,
        release_share=serial.share if serial else None, binding_here=model.binding,
        binding_at_cores=what_if.binding if what_if else None,
        max_tps_at_cores=what_if.max_tps.mean if what_if and what_if.max_tps else None)


def _model(stock: CellModel | None, patched: CellModel | None,
           roles: list[RoleCosts], cores: float, role_name: str | None
           ) -> WalsenderModel | None:
    """The sync walsender's bound on each side and how it moves: 1 / its CPU per commit,
    so the bound's ratio is the inverse of the cost's (with the cost's interval)."""
    if stock is None or patched is None or role_name is None:
        return None
    ws_a, ws_b = _walsender(stock, role_name), _walsender(patched, role_name)
    if ws_a is None or ws_b is None:
        return None
    role = next((r for r in roles if r.node == "primary" and r.role == role_name), None)
    cost = role.cpu_us if role is not None else None
    ratio = low = high = None
    if cost is not None and cost.ratio:
        ratio = 1 / cost.ratio
        low = 1 / cost.high if cost.high else None
        high = 1 / cost.low if cost.low else None
    return WalsenderModel(
        cores=cores, walsender=role_name, stock=ws_a, patched=ws_b,
        cost_ratio=None if cost is None else CostRatio(cost.ratio, cost.low, cost.high,
                                                       cost.significant),
        bound_ratio=BoundRatio(ratio, low, high))


def _verdict(ratio: BaselineRatio | None) -> str:
    if ratio is None:
        return "not measured"
    if ratio.low is None or ratio.high is None:
        return "no interval"
    if ratio.low > 1:
        return "faster"
    if ratio.high < 1:
        return "slower"
    return "no change"


def _pair_key(params: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in params.items() if k != "pg"}, sort_keys=True,
                      default=str)


def _seconds(a: str | None, b: str | None) -> float | None:
    if not a or not b:
        return None
    return (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()


def _compared(store: Store, stock: StoredCell, cell: StoredCell, models: dict[int, CellModel],
              cores: float, confidence: float, flame_hz: int, diffs: Path,
              between: tuple[Drift, Drift] | None, crossover: bool = False) -> Compared:
    """What a cell and its stock twin, both finished, compare beyond TPS; its flame
    graphs' frames are tested, not yet marked (:func:`read_answer` marks them over the
    whole answer)."""
    level = str(cell.typed_params.synchronous_commit)
    clients = cell.typed_params.clients or 0
    halves = _standby_half(store, stock, cell, between)
    roles, moved, notes, tested = _costs(store, stock, cell, confidence, also=sum(
        1 for _, _, f in halves if f.test is not None), crossover=crossover)
    alpha_each = (1 - confidence) / tested
    standby_half = tuple(
        StandbyPartFigure(who, part, Figure(_side(f.a), _side(f.b), f.ratio, f.ratio_low,
                                            f.ratio_high, _moved(f.test, alpha_each)))
        for who, part, f in halves)
    anatomy_stock, anatomy_patched = _anatomy(store, stock), _anatomy(store, cell)
    gprof = _gprof(store, stock, cell)
    return Compared(
        roles=tuple(roles), moved=tuple(moved), cost_notes=tuple(notes),
        figures_tested=tested, anatomy_stock=anatomy_stock,
        anatomy_patched=anatomy_patched, gprof=None if gprof is None else tuple(gprof),
        flame=tuple(cell_diffs(store, stock.id, cell.id, flame_hz,
                               diffs / f"{level}-{clients}", f"{level}, {clients} clients",
                               _cpu_means(roles))),
        model=_model(models.get(stock.idx), models.get(cell.idx), roles, cores,
                     _sync_walsender(store, stock, models.get(stock.idx), anatomy_stock)),
        standby_half=standby_half)


def tightest(ratio: BaselineRatio | None, compared: Compared | None) -> Moved | None:
    """Of the measures that moved (TPS's interval excludes 1; a role's CPU or a system
    call per commit marked moved at the cell's per-figure level), the one whose interval
    is narrowest relative to its ratio: the sharpest evidence the run has of the patch.
    CPU per commit does not depend on how much CPU a side got, so on a loaded machine it
    can move where TPS cannot tell."""
    found: list[Moved] = []
    if ratio is not None and ratio.low is not None and ratio.high is not None \
            and not ratio.low <= 1 <= ratio.high:
        how = ("crossover units" if ratio.crossover_units is not None
               else "rounds" if ratio.paired else "not paired")
        found.append(Moved("TPS", ratio.mean, ratio.low, ratio.high, how))
    for role in compared.roles if compared else ():
        cpu = role.cpu_us
        if cpu is not None and cpu.significant and cpu.ratio and cpu.low and cpu.high:
            how = ("crossover units" if cpu.crossover_units is not None
                   else "rounds" if cpu.paired_rounds is not None else "not paired")
            found.append(Moved(f"{role.node} {role.role} CPU µs per commit", cpu.ratio,
                               cpu.low, cpu.high, how))
        for call, fig in role.syscalls.items():
            if fig.significant and fig.ratio and fig.low and fig.high:
                found.append(Moved(f"{role.node} {role.role} {call} per commit",
                                   fig.ratio, fig.low, fig.high,
                                   "probed repeats, not paired"))
    return min(found, key=lambda m: m.half_width_rel, default=None)


PMU_EVENTS = Path("/sys/bus/event_source/devices")


def has_pmu(events: Path = PMU_EVENTS) -> bool:
    """Whether the kernel offers a hardware PMU (``cpu``, or a hybrid's ``cpu_core``):
    without one ``perf stat -e instructions`` says <not supported>, as on this
    project's 2-CPU VM, whose event sources are breakpoint, msr, software, tracepoint
    and uprobe alone."""
    return any((events / name / "events" / "instructions").exists()
               for name in ("cpu", "cpu_core", "cpu_atom"))


def work_notes() -> tuple[str, ...]:
    """What a duet's work per commit is measured with, where a reader would wonder."""
    notes = ["CPU µs per commit is each measured repeat's /proc figure, paired over "
             "the duet's crossover units as TPS is; system calls per commit are counted "
             "by perf in the probed repeats only, which run alone after the rounds: "
             "compared over those repeats, not paired"]
    if not has_pmu():
        notes.append("instructions per commit: not measured, this machine has no "
                     "hardware PMU (perf stat -e instructions: not supported)")
    return tuple(notes)


def _marked(cell: PatchedCell, z_crit: float | None) -> PatchedCell:
    if cell.compared is None:
        return cell
    flame = tuple(mark_moved(g, z_crit) for g in cell.compared.flame)
    return dataclasses.replace(cell, compared=dataclasses.replace(cell.compared, flame=flame))


def read_answer(folder: Path, stock_name: str, patched_name: str, diffs: Path
                ) -> PatchVerdict:
    """The answer for the run in ``folder`` whose ``pg`` axis is the two builds;
    differential flame graphs are written under ``diffs``."""
    store = Store(folder, create=False)
    try:
        run = store.run()
        spec = run.spec.load()
        cores = float(spec.reference.get("cores") or REFERENCE_CORES)
        cells = store.cells(run.id)
        ratios = ratios_to_baseline(store, run)
        stock_cells = {_pair_key(c.params): c for c in cells
                       if c.typed_params.pg == stock_name}
        models = {m.idx: m for m in run_model(folder, cores=cores, fits=False)}
        drift = run_drift(store, run.id)
        duet = run.order_mode == "duet"
        out_cells = []
        versions: dict[str, str] = {}
        for cell in cells:
            if cell.typed_params.pg != patched_name:
                continue
            stock = stock_cells.get(_pair_key(cell.params))
            if stock is None:
                continue
            level = str(cell.typed_params.synchronous_commit)
            ratio = ratios.get(cell.idx)
            compared = None
            if stock.status == "done" and cell.status == "done":
                versions.setdefault("stock", cluster_version(store, stock))
                versions.setdefault("patched", cluster_version(store, cell))
                compared = _compared(store, stock, cell, models, cores, spec.run.confidence,
                                     spec.probes.flame_hz, diffs,
                                     None if drift is None else (drift, drift),
                                     crossover=duet)
            out_cells.append(PatchedCell(
                level=level, clients=cell.typed_params.clients or 0,
                control=level in CONTROL_LEVELS, label=cell.label, stock_idx=stock.idx,
                patched_idx=cell.idx, stock_status=stock.status, patched_status=cell.status,
                stock_tps=stock.tps_mean, patched_tps=cell.tps_mean, ratio=ratio,
                verdict=_verdict(ratio), compared=compared,
                tightest=tightest(ratio, compared) if duet else None))
        out_cells.sort(key=lambda c: (c.control, _level_rank(c.level), c.clients))
        z_crit = critical_z([g for c in out_cells if c.compared for g in c.compared.flame])
        marked = [_marked(c, z_crit) for c in out_cells]
        # the walsender that releases the waiters, as the cells that wait found it (a
        # control cell's commits never wait: nothing there tells the two apart)
        named = [c.model.walsender for c in marked if not c.control and c.model]
        repeats = [r for c in cells for r in store.repeats(c.id)]
        rounds = max((int(r.round) for r in repeats if r.round is not None), default=0)
        return PatchVerdict(
            run=str(folder), report=str(folder / "report.html"), status=run.status,
            started_at=run.started_at, finished_at=run.finished_at,
            seconds=_seconds(run.started_at, run.finished_at), rounds=rounds,
            duration_s=spec.workload.duration, budget=spec.run.budget,
            ci_target=spec.run.ci_target, confidence=spec.run.confidence,
            stop_reasons=tuple(sorted({str(c.stop_reason) for c in cells if c.stop_reason})),
            machine=run.machine, versions=versions, reference_cores=cores, flame_z=z_crit,
            flame_hz=spec.probes.flame_hz,
            sync_walsender=max(sorted(set(named)), key=named.count) if named else None,
            cells=tuple(marked), control=control(marked),
            order=str(run.order_mode or "blocked"), order_note=run.order_note,
            work_notes=work_notes() if duet else ())
    finally:
        store.close()


def _level_rank(level: str) -> int:
    order = ("on", "remote_apply", "remote_write", "local", "off")
    return order.index(level) if level in order else len(order)


def control(cells: list[PatchedCell]) -> Control:
    """Whether the control cells held 1: if one moved, the change is not the commit
    wait's alone."""
    ctl = [c for c in cells if c.control]
    measured = [c for c in ctl if c.verdict in ("faster", "slower", "no change")]
    moved = [c for c in measured if c.verdict != "no change"]
    if not ctl:
        return Control(None, (), "no control cell in this matrix "
                       "(a level whose commits never wait for a standby, such as local)")
    if not measured:
        return Control(None, (), "the control was not measured")
    if moved:
        where = ", ".join(f"{c.level} at {c.clients} clients" for c in moved)
        return Control(False, tuple(c.patched_idx for c in moved),
                       f"the control moved ({where}): something other than the "
                       "commit-wait path changed (the build, the machine)")
    return Control(True, (), "the control held: its interval holds 1 in every control cell")
