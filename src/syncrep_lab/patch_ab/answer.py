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
- the commit anatomy's components per side where that probe ran (analysis/anatomy.py);
- differential flame graphs per role (patch_ab/flamediff.py);
- the model's bound of the sync walsender from each build's measured CPU per commit,
  and what binds at ``[reference] cores`` (analysis/model.py): the model's shape, not a
  forecast.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from syncrep_lab.analysis.anatomy import cell_anatomy, releasing
from syncrep_lab.analysis.compare import FigureSide, FigureTest, compare_figure, cost_changes
from syncrep_lab.analysis.costs import cell_costs, cluster_version, role_values, untraced_cpu
from syncrep_lab.analysis.model import CellModel, run_model
from syncrep_lab.analysis.ratios import ratios_to_baseline
from syncrep_lab.analysis.sync_walsender import choose, stored_clues
from syncrep_lab.json_form import finite
from syncrep_lab.patch_ab.flamediff import cell_diffs, mark_moved
from syncrep_lab.patch_ab.spec import CONTROL_LEVELS, REFERENCE_CORES
from syncrep_lab.plan.load import load_spec
from syncrep_lab.stats.pairing import ratio_of
from syncrep_lab.store import Store, StoredCell, queries

SYSCALL_FLOOR = 0.05  # calls per commit: below this on both sides, a call is not shown
MOVED = 8  # costs that moved, kept per cell
GPROF_FUNCTIONS = 8  # per role, the most called on either side
ROLE_ORDER = ("backend", "walsender", "walwriter", "walreceiver", "startup", "pgbench")


def _side(side: FigureSide) -> dict[str, Any]:
    return {"n": side.n, "mean": side.mean, "low": side.low, "high": side.high}


def _moved(test: FigureTest | None, alpha_each: float) -> bool:
    """Whether Welch's test says a figure moved at the per-figure level of the cell's
    family (:func:`_costs`)."""
    return test is not None and test.p_value < alpha_each


def _figure(name: str, a: list[float], b: list[float], alpha_each: float
            ) -> dict[str, Any]:
    """Stock (a) against patched (b): each side's mean and interval, B/A with its;
    ``significant`` at ``alpha_each`` (the cell's family-wise level shared out)."""
    fig = compare_figure(name, "per commit", a, b, None)
    return {"stock": _side(fig.a), "patched": _side(fig.b), "ratio": fig.ratio,
            "low": fig.ratio_low, "high": fig.ratio_high,
            "significant": _moved(fig.test, alpha_each)}


def _paired_cpu(store: Store, stock: StoredCell, patched: StoredCell,
                *confidences: float) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Per role, patched / stock CPU per commit paired by round (as the TPS ratio is:
    the machine's drift between rounds cancels), where every repeat of both has some:
    the ratio at each of ``confidences``, the store read once."""
    rounds = {r.id: r.round for c in (stock, patched) for r in store.repeats(c.id)}
    a, b = untraced_cpu(store, stock.id), untraced_cpu(store, patched.id)
    out = {}
    for key in a.keys() & b.keys():
        va = [(rounds[i], v) for i, v in a[key].items()]
        vb = [(rounds[i], v) for i, v in b[key].items()]
        if min(v for _, v in va + vb) <= 0:
            continue  # a repeat without a clock tick of it: no log ratio
        found = [ratio_of(vb, va, c) for c in confidences]
        if all(f is not None and f["paired"] for f in found):
            out[key] = [f for f in found if f is not None]
    return out


def _role_rank(role: dict[str, Any]) -> tuple[int, int, str]:
    base = role["role"].split(":", 1)[0]
    rank = ROLE_ORDER.index(base) if base in ROLE_ORDER else len(ROLE_ORDER)
    return (0 if role["node"] == "primary" else 1, rank, f"{role['node']} {role['role']}")


def _costs(store: Store, stock: StoredCell, patched: StoredCell, confidence: float
           ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str], int]:
    """Per role both sides have: CPU µs per commit (B/A paired by round where it can
    be, else Welch's over the repeats) and system calls per commit; then the costs that
    moved most (compare's ranking, those whose test says they moved), notes, and how
    many figures were tested.

    A figure is marked as moved (``significant``) at 1 - ``confidence`` over all the
    figures the cell compares (Bonferroni: each at that level divided by their number,
    every role's CPU, context switches and system calls), as the flame graphs' frames
    are: marked at that level each, some 24 rows a side would show one move in most
    cells that did not move at all. The intervals shown stay at ``confidence`` each."""
    va, vb = role_values(store, stock.id), role_values(store, patched.id)
    changes = cost_changes(va, vb, top=MOVED * 4)
    tested = max(1, changes.compared)
    alpha_each = (1 - confidence) / tested
    # the interval shown, and the one the mark is read from
    paired = _paired_cpu(store, stock, patched, confidence, 1 - alpha_each)
    by_b = {(r["node"], r["role"]): r for r in vb}
    roles = []
    for ra in va:
        rb = by_b.get((ra["node"], ra["role"]))
        if rb is None:
            continue
        entry: dict[str, Any] = {"node": ra["node"], "role": ra["role"],
                                 "cpu_source": ra["cpu_source"], "cpu_us": None,
                                 "syscalls": {}}
        if ra["cpu_source"] == rb["cpu_source"] and ra["cpu_us_per_commit"] \
                and rb["cpu_us_per_commit"] \
                and max(*ra["cpu_us_per_commit"], *rb["cpu_us_per_commit"]) > 0:
            fig = _figure("CPU µs", ra["cpu_us_per_commit"], rb["cpu_us_per_commit"],
                          alpha_each)
            pair, each = paired.get((ra["node"], ra["role"]), (None, None)) \
                if ra["cpu_source"] == "untraced" else (None, None)
            fig["paired_rounds"] = None
            if pair is not None and pair["low"] is not None and pair["high"] is not None \
                    and each is not None and each["low"] is not None \
                    and each["high"] is not None:
                fig.update(ratio=pair["ratio"], low=pair["low"], high=pair["high"],
                           significant=not each["low"] <= 1 <= each["high"],
                           paired_rounds=pair["rounds"])
            entry["cpu_us"] = fig
        calls = ra["syscalls_per_commit"].keys() & rb["syscalls_per_commit"].keys()
        for name in sorted(calls):
            a, b = ra["syscalls_per_commit"][name], rb["syscalls_per_commit"][name]
            if a and b and max(sum(a) / len(a), sum(b) / len(b)) >= SYSCALL_FLOOR:
                entry["syscalls"][name] = _figure(name, a, b, alpha_each)
        if entry["cpu_us"] is not None or entry["syscalls"]:
            roles.append(entry)
    roles.sort(key=_role_rank)
    moved = [{"node": c.node, "role": c.role, "figure": c.figure,
              "kind": c.kind, "stock": c.a.mean, "patched": c.b.mean,
              "ratio": c.ratio, "low": c.ratio_low, "high": c.ratio_high}
             for c in changes.top if _moved(c.test, alpha_each)][:MOVED]
    return roles, moved, list(changes.notes), tested


def _cpu_means(roles: list[dict[str, Any]]
               ) -> dict[tuple[str, str], tuple[float | None, float | None]]:
    return {(r["node"], r["role"]): (r["cpu_us"]["stock"]["mean"],
                                     r["cpu_us"]["patched"]["mean"])
            for r in roles if r["cpu_us"] is not None}


def _anatomy(store: Store, cell: StoredCell) -> dict[str, Any] | None:
    commits = {r.id: int(r.transactions) for r in store.repeats(cell.id) if r.probed}
    found = cell_anatomy(store, commits, cell.typed_params.clients or 0)
    if found is None:
        return None
    freed = releasing(found.releases)
    return {"commits": found.commits,
            "components": {c.component: {"us_per_commit": c.us_per_commit.to_json(),
                                         "mean_us": c.mean_us, "p99_us": c.p99_us}
                           for c in found.components},
            "releases": freed.to_json() if freed is not None else None,
            "little_bound_tps": found.little_bound_tps,
            "release_bound_tps": found.release_bound_tps}


def _gprof(store: Store, stock: StoredCell, patched: StoredCell
           ) -> list[dict[str, Any]] | None:
    """Per role both sides profiled (a profiling build): the functions called most per
    commit on either side, stock against patched (gprof's exact counts); None where
    neither side ran gprof."""
    probed = [r.id for c in (stock, patched) for r in store.repeats(c.id) if r.probed]
    if not probed or not queries.gprof_of(store, probed)[0]:
        return None
    ga = {(g["node"], g["role"]): g for g in cell_costs(store, stock.id)["gprof"]}
    gb = {(g["node"], g["role"]): g for g in cell_costs(store, patched.id)["gprof"]}
    out = []
    for key in sorted(ga.keys() & gb.keys()):
        calls_a = {f["function"]: f["calls_per_commit"] for f in ga[key]["functions"]}
        calls_b = {f["function"]: f["calls_per_commit"] for f in gb[key]["functions"]}
        names = sorted(calls_a.keys() | calls_b.keys(),
                       key=lambda fn: -max(calls_a.get(fn) or 0.0, calls_b.get(fn) or 0.0))
        out.append({"node": key[0], "role": key[1],
                    "functions": [{"function": fn, "stock": calls_a.get(fn),
                                   "patched": calls_b.get(fn)}
                                  for fn in names[:GPROF_FUNCTIONS]]})
    return out


def _sync_walsender(store: Store, cell: StoredCell, model: CellModel | None,
                    anatomy: dict[str, Any] | None) -> str | None:
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
    freed = (anatomy or {}).get("releases")
    clues = dataclasses.replace(
        stored_clues(store, cell, senders),
        releases=[freed] if freed else [],
        release_share={s.role: s.share for s in model.serial if s.share},
        cpu_us={r: b.demand_us.mean if b.demand_us else 0.0 for r, b in senders.items()})
    chosen = choose(clues)
    return chosen.role if chosen is not None else None


def _walsender(model: CellModel | None, role: str) -> dict[str, Any] | None:
    """A walsender's bound in a cell's model, and what binds at the reference's cores."""
    if model is None:
        return None
    bound = next((b for b in model.bounds if b.resource == role), None)
    if bound is None:
        return None
    serial = next((s for s in model.serial if s.role == role), None)
    what_if = model.what_if
    d = bound.demand_us
    return {"role": role, "demand_us": d.mean if d else None,
            "demand_low": d.low if d else None, "demand_high": d.high if d else None,
            "bound_tps": bound.max_tps.mean, "bound_low": bound.max_tps.low,
            "bound_high": bound.max_tps.high, "source": bound.source,
            "release_share": serial.share if serial else None,
            "binding_here": model.binding,
            "binding_at_cores": what_if.binding if what_if else None,
            "max_tps_at_cores": (what_if.max_tps.mean
                                 if what_if and what_if.max_tps else None)}


def _model(stock: CellModel | None, patched: CellModel | None,
           roles: list[dict[str, Any]], cores: float, role_name: str | None
           ) -> dict[str, Any] | None:
    """The sync walsender's bound on each side and how it moves: 1 / its CPU per commit,
    so the bound's ratio is the inverse of the cost's (with the cost's interval)."""
    if stock is None or patched is None or role_name is None:
        return None
    ws_a, ws_b = _walsender(stock, role_name), _walsender(patched, role_name)
    if ws_a is None or ws_b is None:
        return None
    role = next((r for r in roles if r["node"] == "primary" and r["role"] == role_name),
                None)
    cost = role["cpu_us"] if role is not None else None
    ratio = low = high = None
    if cost is not None and cost["ratio"]:
        ratio = 1 / cost["ratio"]
        low = 1 / cost["high"] if cost["high"] else None
        high = 1 / cost["low"] if cost["low"] else None
    return {"cores": cores, "walsender": role_name, "stock": ws_a, "patched": ws_b,
            "cost_ratio": None if cost is None else
            {k: cost[k] for k in ("ratio", "low", "high", "significant")},
            "bound_ratio": {"ratio": ratio, "low": low, "high": high}}


def _verdict(ratio: dict[str, Any] | None) -> str:
    if ratio is None or ratio.get("mean") is None:
        return "not measured"
    if ratio.get("low") is None or ratio.get("high") is None:
        return "no interval"
    if ratio["low"] > 1:
        return "faster"
    if ratio["high"] < 1:
        return "slower"
    return "no change"


def _pair_key(params: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in params.items() if k != "pg"}, sort_keys=True,
                      default=str)


def _seconds(a: str | None, b: str | None) -> float | None:
    if not a or not b:
        return None
    return (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()


def read_answer(folder: Path, stock_name: str, patched_name: str, diffs: Path
                ) -> dict[str, Any]:
    """The answer for the run in ``folder`` whose ``pg`` axis is the two builds;
    differential flame graphs are written under ``diffs``."""
    store = Store(folder, create=False)
    try:
        run = store.run()
        spec = load_spec(run.spec_toml, f"{folder}/spec.toml")
        cores = float(spec.reference.get("cores") or REFERENCE_CORES)
        cells = store.cells(run.id)
        ratios = ratios_to_baseline(store, run)
        stock_cells = {_pair_key(c.params): c for c in cells
                       if c.typed_params.pg == stock_name}
        models = {m.idx: m for m in run_model(folder, cores=cores, fits=False)}
        out_cells = []
        versions: dict[str, str] = {}
        for cell in cells:
            if cell.typed_params.pg != patched_name:
                continue
            stock = stock_cells.get(_pair_key(cell.params))
            if stock is None:
                continue
            level = str(cell.typed_params.synchronous_commit)
            clients = cell.typed_params.clients or 0
            entry: dict[str, Any] = {
                "level": level, "clients": clients, "control": level in CONTROL_LEVELS,
                "label": cell.label, "stock_idx": stock.idx, "patched_idx": cell.idx,
                "status": {"stock": stock.status, "patched": cell.status},
                "tps": {"stock": stock.tps_mean, "patched": cell.tps_mean},
                "ratio": ratio.to_json() if (ratio := ratios.get(cell.idx)) is not None
                else None}
            entry["verdict"] = _verdict(entry["ratio"])
            if stock.status == "done" and cell.status == "done":
                versions.setdefault("stock", cluster_version(store, stock))
                versions.setdefault("patched", cluster_version(store, cell))
                roles, moved, notes, tested = _costs(store, stock, cell,
                                                     spec.run.confidence)
                anatomy = {"stock": _anatomy(store, stock), "patched": _anatomy(store, cell)}
                entry.update(roles=roles, moved=moved, cost_notes=notes,
                             figures_tested=tested, anatomy=anatomy,
                             gprof=_gprof(store, stock, cell),
                             flame=cell_diffs(store, stock.id, cell.id,
                                              spec.probes.flame_hz,
                                              diffs / f"{level}-{clients}",
                                              f"{level}, {clients} clients",
                                              _cpu_means(roles)),
                             model=_model(models.get(stock.idx), models.get(cell.idx),
                                          roles, cores,
                                          _sync_walsender(store, stock,
                                                          models.get(stock.idx),
                                                          anatomy["stock"])))
            out_cells.append(entry)
        out_cells.sort(key=lambda c: (c["control"], _level_rank(c["level"]), c["clients"]))
        z_crit = mark_moved([g for c in out_cells for g in c.get("flame") or []])
        # the walsender that releases the waiters, as the cells that wait found it (a
        # control cell's commits never wait: nothing there tells the two apart)
        named = [c["model"]["walsender"] for c in out_cells
                 if not c["control"] and c.get("model")]
        repeats = [r for c in cells for r in store.repeats(c.id)]
        rounds = max((int(r.round) for r in repeats if r.round is not None), default=0)
        raw: dict[str, Any] = {
            "run": str(folder), "report": str(folder / "report.html"),
            "status": run.status, "started_at": run.started_at,
            "finished_at": run.finished_at,
            "seconds": _seconds(run.started_at, run.finished_at),
            "rounds": rounds, "duration_s": spec.workload.duration,
            "budget": spec.run.budget, "ci_target": spec.run.ci_target,
            "confidence": spec.run.confidence,
            "stop_reasons": sorted({str(c.stop_reason) for c in cells if c.stop_reason}),
            "machine": run.machine, "versions": versions, "reference_cores": cores,
            "flame_z": z_crit, "flame_hz": spec.probes.flame_hz,
            "sync_walsender": max(sorted(set(named)), key=named.count) if named else None,
            "cells": out_cells, "control": control(out_cells)}
        found: dict[str, Any] = finite(raw)
        return found
    finally:
        store.close()


def _level_rank(level: str) -> int:
    order = ("on", "remote_apply", "remote_write", "local", "off")
    return order.index(level) if level in order else len(order)


def control(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether the control cells held 1: if one moved, the change is not the commit
    wait's alone."""
    ctl = [c for c in cells if c["control"]]
    measured = [c for c in ctl if c["verdict"] in ("faster", "slower", "no change")]
    moved = [c for c in measured if c["verdict"] != "no change"]
    if not ctl:
        return {"held": None, "moved": [], "sentence": "no control cell in this matrix "
                "(a level whose commits never wait for a standby, such as local)"}
    if not measured:
        return {"held": None, "moved": [], "sentence": "the control was not measured"}
    if moved:
        where = ", ".join(f"{c['level']} at {c['clients']} clients" for c in moved)
        return {"held": False, "moved": [c["patched_idx"] for c in moved],
                "sentence": f"the control moved ({where}): something other than the "
                            "commit-wait path changed (the build, the machine)"}
    return {"held": True, "moved": [],
            "sentence": "the control held: its interval holds 1 in every control cell"}
