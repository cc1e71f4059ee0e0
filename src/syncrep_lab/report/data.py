"""Everything a report shows, gathered from a run's store into plain data.

The HTML page (``report.html``) and ``syncrep-lab report --json`` are both
made from what :func:`report_data` returns, and nothing here runs anything:
a report can be rebuilt at any time from the store alone. Each section says
why it is empty when it is (``missing``), so the page can say it too.
"""

from __future__ import annotations

import base64
import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypedDict

from syncrep_lab.analysis import model as bound_model
from syncrep_lab.analysis.cells import CellRow, RowSummary, TopCost, cell_rows
from syncrep_lab.analysis.costs import CellCosts, RunCellCosts, run_costs
from syncrep_lab.analysis.diagnosis import (
    confidence_text,
    diagnose_run,
    leading_title,
    leading_verdict,
    tied_with_lead,
    verdict_title,
)
from syncrep_lab.analysis.faults import run_faults
from syncrep_lab.analysis.noise import budget_sentences
from syncrep_lab.analysis.ratios import target_text
from syncrep_lab.analysis.resources import link_deliveries, quota_json
from syncrep_lab.analysis.scaling import CoreSweep, Series, core_sweep, scaling
from syncrep_lab.analysis.verdict import CellDiagnosis
from syncrep_lab.errors import UserError
from syncrep_lab.json_form import JSON
from syncrep_lab.pg.conninfo import mask_text
from syncrep_lab.pg.replication import WAITING_LEVELS
from syncrep_lab.pg.sync_names import SyncNamesError, expected_states, parse
from syncrep_lab.stats.pairing import beside_each_other, ratio_of
from syncrep_lab.store import CLUSTER_PARAMS, PROBED, Store, StoredCell, queries, with_defaults

# Axes about where and how a cell ran, beside the sync level and the client count.
SHAPE_AXES = ("clients", "synchronous_commit")
# Flame graphs larger than this are linked, not embedded, to keep the page light.
EMBED_SVG_MAX_BYTES = 3 * 1024 * 1024


class Flamegraphs(TypedDict):
    """The chosen cell's flame graphs (``idx``: the cell, None when none finished)."""

    idx: int | None
    graphs: list[dict[str, JSON]]


class ReportData(TypedDict):
    """What :func:`report_data` returns, section by section: the analyses' results in
    their JSON form (as their own commands print them with --json) and the report's
    own sections, JSON-shaped (the page's template and ``report --json`` read them)."""

    folder: str
    run: dict[str, JSON]
    machine: dict[str, JSON]
    hosts: list[dict[str, JSON]]
    guests: list[dict[str, JSON]]
    host_numa: list[dict[str, JSON]]
    spec_toml: str
    topology: list[dict[str, JSON]]
    cells: list[dict[str, JSON]]  # as results --json prints them
    verdict: dict[str, JSON]
    scaling: list[Series]
    bounds: list[dict[str, JSON]]  # as model --json prints them
    timeline: dict[str, JSON]
    costs: list[Mapping[str, object]]  # as costs --json prints them
    flamegraphs: Flamegraphs
    placement: dict[str, JSON]
    cores: list[CoreSweep]
    placed: dict[str, JSON]
    seed: dict[str, JSON]
    method: dict[str, JSON]
    faults: list[dict[str, JSON]]  # as faults --json prints them
    ab_summary: str | None
    seed_machine: dict[str, JSON] | None


def _is_sync_cell(params: dict[str, Any]) -> bool:
    """A cell whose commits waited for a standby: a sync level, standbys, a sync spec."""
    return (params.get("synchronous_commit") in WAITING_LEVELS
            and int(params.get("standbys") or 0) > 0 and bool(params.get("sync")))


def _measured_tps(store: Store, cell_id: int) -> list[tuple[int | None, float, int | None]]:
    """(round, TPS, duet pair) of a cell's measured repeats (round None: not
    interleaved; pair None: not a duet's)."""
    return [(r.round, float(r.tps), r.pair) for r in store.repeats(cell_id) if not r.probed]


def _top_cost(cost: CellCosts | None) -> TopCost | None:
    """The role whose CPU per commit is the largest: where a commit's CPU goes first."""
    if not cost:
        return None
    best: TopCost | None = None
    for role in cost.roles:
        mean = role["cpu_us_per_commit"]["mean"]
        if mean is not None and (best is None or mean > best.cpu_us):
            best = TopCost(role["node"], role["role"], mean, role["cpu_source"])
    return best


def _batch(c: CellRow) -> int:
    """Rows per transaction: the batch axis (1 without one)."""
    batch: Any = c.cell.params.get("batch")
    return int(batch or 1)


def cell_summaries(folder: Path, costs: dict[int, RunCellCosts] | None = None,
                   diagnosed: Sequence[CellDiagnosis] | None = None) -> list[CellRow]:
    """One row per cell: the results, its verdicts and its largest cost per commit.

    This is what ``results --json`` prints and what the report's tables show: the
    verdicts in their JSON form, made here. ``costs`` (``run_costs`` by cell index) and
    ``diagnosed`` (``diagnose_run``) are computed here unless given.
    """
    by_idx = {c.idx: c for c in (diagnose_run(folder) if diagnosed is None else diagnosed)}
    if costs is None:
        costs = {c.idx: c for c in run_costs(folder)}
    rows = []
    for row in cell_rows(folder):
        cell = by_idx.get(row.cell.idx)
        rows.append(row.summed(RowSummary(
            verdicts=cell.verdicts if cell else (), ceiling=cell.ceiling if cell else None,
            limit=leading_title(cell.verdicts) if cell else "",
            top_cost=_top_cost(c.costs if (c := costs.get(row.cell.idx)) else None))))
    return rows


def _verdict(cells: list[CellRow], diagnosed: Sequence[CellDiagnosis],
             series: list[Series]) -> dict[str, Any]:
    """The first thing a reader sees: the ceiling, the best configuration, the limit,
    what to try next."""
    done = [c for c in cells if c.cell.status == "done" and c.cell.tps_mean is not None]
    if not done:
        return {"missing": "no cell finished, so there is nothing to conclude yet"}
    sync = [c for c in done if _is_sync_cell(c.cell.params)]
    pool = sync or done
    # Rows, not transactions: a transaction of 10 inserts carries 10 rows, and the
    # batch axis is one of the seed's remedies.
    best = max(pool, key=lambda c: (c.cell.tps_mean or 0.0) * _batch(c))
    verdicts = next((d.verdicts for d in diagnosed if d.idx == best.cell.idx), ())
    lead = leading_verdict(verdicts)
    out: dict[str, Any] = {
        "sync_cells": len(sync),
        "best": {"idx": best.cell.idx, "label": best.cell.label, "tps": best.cell.tps_mean,
                 "batch": _batch(best),
                 "ci_low": best.cell.tps_ci_low, "ci_high": best.cell.tps_ci_high,
                 "p99_ms": best.cell.lat_p99_ms, "synchronous": bool(sync)},
        "limit": lead.to_json() if lead else None,
        "limit_confidence": confidence_text(lead) if lead else "",
        # verdicts whose evidence reaches the same level: the noise cannot tell them apart
        "tied": [verdict_title(t) for t in tied_with_lead(verdicts)],
        "ceiling": best.summary.ceiling if best.summary else None,
        "next_steps": list(lead.next_steps) if lead else [],
    }
    knees = []
    for entry in series:
        for level, lv in entry["levels"].items():
            if level in WAITING_LEVELS and lv["knee"]:
                knees.append({"series": entry["series"], "level": level, **lv["knee"]})
    out["knees"] = knees
    ratios: list[dict[str, Any]] = [{"series": e["series"], "level": level, **r}
              for e in series for level, rs in e["ratios_to_local"].items()
              if level in WAITING_LEVELS for r in rs]
    out["price"] = max(ratios, key=lambda r: r["clients"]) if ratios else None
    return out


def _topology(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Each cluster the run built: version, nodes, and each standby's sync state
    (as sampled during the run, or as the sync spec implies when not sampled)."""
    out = []
    for c in queries.clusters_of(store, run_id):
        key = json.loads(c.cluster_key)
        nodes = json.loads(c.nodes_json or "[]")
        settings = json.loads(c.settings_json or "{}")
        primary = settings.get("primary", {})
        sync_text = str(primary.get("synchronous_standby_names", {}).get("setting", ""))
        standbys = [n["name"] for n in nodes if n.get("role") == "standby"]
        try:
            version_num = int(str(c.version).split(".")[0]) * 10000 if c.version else 180000
            states = expected_states(parse(sync_text, version_num=max(version_num, 90600)),
                                     standbys)
        except (SyncNamesError, ValueError):
            states = {}
        in_force: dict[str, dict[str, str]] = {}
        for node, values in settings.items():
            for name, v in values.items():
                in_force.setdefault(name, {})[node] = (
                    f"{v['setting']}{v['unit'] or ''}" if v.get("unit") not in (None, "")
                    else str(v["setting"]))
        out.append({"pg": key[0], "standbys": key[1], "settings_set": key[2],
                    "version": c.version, "bin_dir": c.bin_dir, "nodes": nodes,
                    "build": json.loads(c.build_json) if c.build_json else None,
                    "synchronous_standby_names": sync_text, "states": states,
                    "settings": dict(sorted(in_force.items()))})
    return out


def _measured_ids(store: Store, run_id: int) -> list[int]:
    return [r.id for c in store.cells(run_id) for r in store.repeats(c.id) if not r.probed]


def _hosts(store: Store, run_id: int, machine: dict[str, Any]) -> list[dict[str, Any]]:
    """Each SSH host the run used: what it is (read when the run began) and, over the
    run's measured repeats, the CPUs it kept busy, its steal and its clock against this
    machine's."""
    facts = machine.get("hosts") or {}
    if not facts:
        return []
    repeats = _measured_ids(store, run_id)
    seen: dict[str, list[Any]] = {}
    for _, row in queries.host_repeats_of(store, repeats):
        seen.setdefault(row.host, []).append(row)
    out = []
    for name, fact in sorted(facts.items()):
        rows = seen.get(name, [])
        busy = [r.busy_cpus for r in rows if r.busy_cpus is not None]
        offsets = [r.clock_offset_ms for r in rows]
        steal = [r.steal_cpus for r in rows if r.steal_cpus is not None]
        out.append({"name": name, **fact,
                    "steal_cpus": sum(steal) / len(steal) if steal else None,
                    "busy_cpus": sum(busy) / len(busy) if busy else None,
                    "busy_max": max(busy) if busy else None,
                    "offset_ms": sum(offsets) / len(offsets) if offsets else None,
                    "uncertainty_ms": max((r.clock_uncertainty_ms for r in rows),
                                          default=None)})
    return out


def _guests(store: Store, run_id: int, machine: dict[str, Any],
            hosts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each guest the run booted: how it ran (KVM or TCG, and why), its kernel and boot,
    and over the run's measured repeats what it cost this machine (its vCPU threads'
    CPU and their wait for one, QEMU's CPU) beside the steal it saw itself (its row of
    ``hosts``, :func:`_hosts`)."""
    facts = machine.get("guests") or {}
    if not facts:
        return []
    seen: dict[str, list[Any]] = {}
    for _, row in queries.guest_repeats_of(store, _measured_ids(store, run_id)):
        seen.setdefault(row.guest, []).append(row)
    steal = {h["name"]: h["steal_cpus"] for h in hosts}

    def mean(values: list[float]) -> float | None:
        return sum(values) / len(values) if values else None

    out = []
    for name, fact in sorted(facts.items()):
        rows = seen.get(name, [])
        out.append({"name": name, **fact, "repeats": len(rows),
                    "vcpu_cpus": mean([r.vcpu_cpus for r in rows]),
                    "vcpu_delay_cpus": mean([r.vcpu_delay_cpus for r in rows]),
                    "qemu_cpus": mean([r.qemu_cpus for r in rows]),
                    "steal_cpus": steal.get(name),
                    # what the guest's own steal can say: under TCG it has no steal
                    # clock, so a vCPU's wait here is seen only from here
                    "steal_clock": fact.get("accel") == "kvm"})
    return out


def _host_numa(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Per cell, host and NUMA node (hosts with several: a guest's virtual ones), the
    node's allocation counters over the cell's measured repeats, in pages a second on
    average: where the placements' NUMA policies put the memory."""
    out = []
    for cell in store.cells(run_id):
        repeats = [r.id for r in store.repeats(cell.id) if not r.probed]
        by_node: dict[tuple[str, int], list[Any]] = {}
        for _, row in queries.host_numa_of(store, repeats):
            by_node.setdefault((row.host, row.numa_node), []).append(row)
        for (host, node), rows in sorted(by_node.items()):
            seconds = sum(r.seconds for r in rows) or 1.0
            out.append({"cell": cell.label, "idx": cell.idx, "host": host, "node": node,
                        "repeats": len(rows),
                        **{k: sum(getattr(r, k) for r in rows) / seconds
                           for k in ("numa_hit", "numa_miss", "numa_foreign",
                                     "interleave_hit", "local_node", "other_node")}})
    return out


def _timeline(store: Store, cell: StoredCell) -> dict[str, Any]:
    """Per-second TPS and latency of every repeat, and the standbys' lags and sync
    states as sampled in the probed repeat."""
    repeats = store.repeats(cell.id)
    series = []
    for r in repeats:
        samples = queries.samples_of(store, r.id)
        series.append({"repeat": r.n, "probed": bool(r.probed),
                       "t": [s.t_s for s in samples], "tps": [s.tps for s in samples],
                       "latency_ms": [s.latency_ms for s in samples]})
    lags: dict[str, dict[str, list[Any]]] = {}
    events = []
    # the repeats whose samplers ran: the probed ones, or an observe window's slices
    probed = [r.id for r in repeats if r.probed == PROBED] or [
        r.id for r in repeats if queries.has_replication_samples(store, r.id)]
    if probed:
        last_state: dict[str, str | None] = {}
        for s in queries.replication_samples_of(store, probed[-1]):
            lag = lags.setdefault(s.standby, {"t": [], "write_ms": [], "flush_ms": [],
                                              "replay_ms": [], "flush_bytes": []})
            lag["t"].append(s.t_s)
            lag["write_ms"].append(s.write_lag_ms)
            lag["flush_ms"].append(s.flush_lag_ms)
            lag["replay_ms"].append(s.replay_lag_ms)
            lag["flush_bytes"].append(s.flush_lag_bytes)
            before = last_state.get(s.standby, s.sync_state)
            if before != s.sync_state:
                events.append({"t": s.t_s, "what": f"standby {s.standby}: sync_state "
                               f"{before} -> {s.sync_state}"})
            last_state[s.standby] = s.sync_state
    missing = None if probed else "this cell ran no probed repeat, so no lags were sampled"
    return {"idx": cell.idx, "label": cell.label, "repeats": series, "lags": lags,
            "events": events, "lags_missing": missing,
            "backend_waits": _backend_waits(store, probed[-1]) if probed else {}}


def _backend_waits(store: Store, repeat_id: int) -> dict[str, Any]:
    """The primary's backends second by second, by wait kind: how many of them were,
    on average, in each state (active-session counts, as a DBA reads them)."""
    by_kind: dict[str, dict[int, float]] = {}
    seconds: set[int] = set()
    for r in queries.wait_timeline_of(store, repeat_id, "primary", "backend"):
        if r.ticks > 0:
            by_kind.setdefault(r.wait_type, {})[int(r.t_s)] = r.samples / r.ticks
            seconds.add(int(r.t_s))
    t = sorted(seconds)
    return {"t": t, "kinds": {k: [v.get(s, 0.0) for s in t] for k, v in sorted(by_kind.items())}}


def _flamegraph_images(folder: Path, cost: CellCosts | None,
                       sync_standbys: set[str]) -> list[dict[str, Any]]:
    """The chosen cell's flame graphs: embedded when their SVG is there and not huge.
    Those of the commit path's two ends (the primary's backends, the walsender of a
    synchronous standby) and of the whole machine are shown open, the rest folded."""
    out = []
    for g in cost.flamegraphs if cost else []:
        svg = Path(g["svg"])
        opened = (g["role"] in ("backend", "all")
                  or (g["node"] == "primary"
                      and g["role"].removeprefix("walsender:") in sync_standbys))
        entry = {"node": g["node"], "role": g["role"], "cpu_us": g["cpu_us"], "open": opened,
                 "href": str(svg.relative_to(folder)) if svg.is_relative_to(folder) else str(svg),
                 "top_frames": g["frames"][:5], "data_uri": None, "missing": None}
        try:
            size = svg.stat().st_size
        except OSError:
            entry["missing"] = "the SVG is not in the run folder (moved or never written)"
        else:
            if size <= EMBED_SVG_MAX_BYTES:
                entry["data_uri"] = ("data:image/svg+xml;base64,"
                                     + base64.b64encode(svg.read_bytes()).decode("ascii"))
            else:
                entry["missing"] = f"{size / 2**20:.1f} MiB: linked, not embedded"
        out.append(entry)
    return out


def _baseline(axis: str, values: set[Any]) -> Any:
    """The value other values of an axis are compared with in the seed's tables."""
    preferred = {"synchronous_commit": ("local", "off"), "batch": (1,), "standbys": (0,),
                 "link": ("socket", "none"), "isolation": ("processes",)}
    for v in preferred.get(axis, ()):
        if v in values:
            return v
    return None


def seed_side_by_side(spec: Mapping[str, object], cells: Sequence[CellRow],
                      measured: Callable[[int], list[tuple[int | None, float, int | None]]]
                      ) -> dict[str, JSON]:
    """The spec's reference figures next to this run's, and their ratios.

    Absolute figures from another machine mean little; the ratios between
    cells (sync / local, 10 rows per commit / 1, standbys / none) carry the
    shape, which is what should match. Rows per second are compared for
    ``batch`` (a transaction of 10 inserts is 10 rows). ``measured`` gives the
    (round, TPS, duet pair) of a cell's measured repeats, by the cell's id: ratios are
    paired over rounds where the run interleaved the two cells, and in a duet over the
    repeats the two ran beside each other (stats/pairing.beside_each_other)."""
    reference = spec.get("reference")
    ref: Mapping[str, Any] = reference if isinstance(reference, Mapping) else {}
    figures = ref.get("figures") or []
    if not figures:
        return {"missing": "the spec has no [reference] figures (the seed preset has the "
                           "seed's published ones)"}
    rows = []
    for fig in figures:
        keys = {k: v for k, v in fig.items() if k != "tps"}
        match = next((c for c in cells if c.cell.status == "done"
                      # a parameter at its default is not stored: said, it matches
                      and all(with_defaults(c.cell.params).get(k) == v
                              for k, v in keys.items())), None)
        rows.append({"where": keys, "seed_tps": fig.get("tps"),
                     "idx": match.cell.idx if match else None,
                     "tps": match.cell.tps_mean if match else None,
                     "repeats_tps": measured(match.cell.id) if match else []})
    ratios = []
    for a in rows:
        for b in rows:
            diff = [k for k in a["where"] if a["where"].get(k) != b["where"].get(k)]
            if len(diff) != 1 or set(a["where"]) != set(b["where"]):
                continue
            axis = diff[0]
            # The baseline among the figures like ``a`` but for this axis: with no
            # standby the seed ran only off and on, so on is compared with off there.
            base = _baseline(axis, {r["where"].get(axis) for r in rows
                                    if all(r["where"].get(k) == v for k, v in a["where"].items()
                                           if k != axis)})
            if base is None or b["where"][axis] != base or a["where"][axis] == base:
                continue
            scale_a = float(a["where"].get("batch", 1)) if axis == "batch" else 1.0
            scale_b = float(b["where"].get("batch", 1)) if axis == "batch" else 1.0
            entry: dict[str, Any] = {
                "axis": axis, "what": f"{axis} {a['where'][axis]} / {base}",
                "given": {k: v for k, v in a["where"].items() if k != axis},
                "unit": "rows/s" if axis == "batch" else "tps",
                "seed": (scale_a * a["seed_tps"]) / (scale_b * b["seed_tps"])
                if a["seed_tps"] and b["seed_tps"] else None,
                "here": None, "low": None, "high": None}
            mine, theirs = beside_each_other(a["repeats_tps"], b["repeats_tps"],
                                             lambda x: x[2])
            ci = ratio_of([(r, scale_a * t) for r, t, _ in mine],
                          [(r, scale_b * t) for r, t, _ in theirs])
            if ci is not None:
                entry.update(here=ci["ratio"], low=ci["low"], high=ci["high"],
                             paired=ci["paired"])
            ratios.append(entry)
    for r in rows:
        del r["repeats_tps"]
    return {"source": ref.get("source", ""), "figures": rows, "ratios": ratios}


def _placement_axes(cells: list[CellRow]) -> dict[str, Any]:
    """For each axis other than clients and the sync level that the run varied: TPS by
    its value, per sync level (the small multiples of the page)."""
    axes = sorted({k for c in cells for k in c.cell.axes if k not in SHAPE_AXES})
    out = []
    for axis in axes:
        points = []
        for c in cells:
            if c.cell.status != "done" or axis not in c.cell.axes:
                continue
            rest = " ".join(f"{k}={v}" for k, v in sorted(c.cell.axes.items())
                            if k != axis and k not in SHAPE_AXES)
            points.append({"value": str(c.cell.axes[axis]), "rest": rest,
                           "level": c.cell.params.get("synchronous_commit"),
                           "clients": c.cell.params.get("clients"), "tps": c.cell.tps_mean,
                           "low": c.cell.tps_ci_low, "high": c.cell.tps_ci_high,
                           "idx": c.cell.idx})
        out.append({"axis": axis, "points": points})
    if not out:
        return {"axes": [], "missing": "this run varied no axis besides the sync level and "
                                       "the client count"}
    return {"axes": out}


def _placement_readback(store: Store, cells: list[CellRow],
                        machine: dict[str, Any]) -> dict[str, Any]:
    """Per placed cell: what the kernel gave each role (the last measured repeat's
    reading), its links as applied, and each instance's own figures."""
    out: list[dict[str, Any]] = []
    for c in cells:
        last = queries.last_measured_repeat(store, c.cell.id)
        if last is None:
            continue
        roles: list[dict[str, Any]] = [r._asdict() for r in queries.placement_of(store, last)]
        links: list[dict[str, Any]] = [r._asdict() for r in queries.links_of(store, last)]
        for link in links:
            applied = json.loads(link.pop("applied_json") or "[]")
            if link["profile"] == "no delay":
                link["how"] = ["nothing to emulate"]
                continue
            link["how"] = sorted({"tc netem" if e.get("backend") == "netem" else
                                  "NFQUEUE delayer (no netem in this kernel)"
                                  if e.get("backend") == "delayer" else str(e.get("backend"))
                                  for e in applied if isinstance(e, dict)
                                  and e.get("backend")})
        # each direction as its delay line gave it, over the cell's repeats
        given = link_deliveries(store, c.cell.id)
        for link in links:
            ends = [x for x in given if x.instance == link["instance"]
                    and {x.into, x.source} == {link["a"], link["b"]}]
            link["delivered"] = [x.line() for x in ends]
            link["late"] = any(x.ran_late for x in ends)
        instances = [asdict(i) for i in queries.instance_means(store, c.cell.id)]
        quotas = [quota_json(q) for q in queries.quota_means(store, c.cell.id)]
        if roles or links or instances or quotas:
            for r in roles:
                r["cgroup"] = r["cgroup"].rsplit("/syncrep-lab/", 1)[-1] if r["cgroup"] else ""
            out.append({"idx": c.cell.idx, "label": c.cell.label, "roles": roles,
                        "links": links, "instances": instances, "quotas": quotas})
    nodes = machine.get("numa_nodes")
    note = None
    if any(r["numa_policy"] not in ("", "default") for p in out for r in p["roles"]) and (
            nodes is None or int(nodes) <= 1):
        note = ("this machine has one NUMA node: the policies were applied (numa_maps shows "
                "them) but cannot place memory on another node, so they cannot change "
                "the figures here")
        guests = machine.get("guests") or {}
        if any(int(g.get("numa_nodes") or 1) > 1 for g in guests.values()):
            note += ("; a guest's NUMA nodes are virtual (topology.guests.numa_nodes): "
                     "there a policy does put memory on the nodes it names (NUMA nodes of "
                     "the hosts), but every node is this machine's one memory, so it "
                     "cannot change the figures either")
    return {"cells": out, "numa_note": note}


def _method(store: Store, run_id: int, spec: dict[str, Any],
            cells: list[CellRow]) -> dict[str, Any]:
    """How the figures were obtained: repeats, confidence target, probes and their cost."""
    probes = [asdict(p) for p in queries.probe_counts(store, run_id)]
    overhead: list[dict[str, Any]] = []
    for c in cells:
        if c.cell.status != "done":
            continue
        reps = store.repeats(c.cell.id)
        measured = [float(r.tps) for r in reps if not r.probed]
        probed = [float(r.tps) for r in reps if r.probed]
        if measured and probed:
            overhead.append({"idx": c.cell.idx, "label": c.cell.label,
                             "ratio": statistics.fmean(probed) / statistics.fmean(measured)})
    run_ctl = spec.get("run", {})
    run = store.run(run_id)
    notes = [{"idx": c.cell.idx, "label": c.cell.label, "note": n}
             for c in cells for n in c.cell.notes]
    clusters = len({json.dumps([c.cell.params.get(k) for k in CLUSTER_PARAMS]) for c in cells})
    observed = []
    if run.kind == "observe":
        from syncrep_lab.analysis.observe import observation

        observed = [{"idx": o.idx, "label": o.label, "seconds": o.seconds,
                     "slices": o.slices, "own": o.own.to_json()}
                    for o in (observation(store, c, run.machine) for c in store.cells(run_id)
                              if c.status == "done")]
    return {
        "kind": run.kind or "experiment", "observe": spec.get("observe", {}),
        "observed": observed,
        "order": run.order_mode or "blocked", "seed": run.seed,
        "order_note": run.order_note,
        "clusters": clusters, "budget": run_ctl.get("budget"),
        "comparisons": [{"idx": c.cell.idx, "label": c.cell.label, **ratio.to_json()}
                        for c in cells if (ratio := c.ratio_to_baseline)],
        "notes": notes,
        "repeats_min": run_ctl.get("repeats_min", 3), "repeats_max": run_ctl.get("repeats_max", 10),
        "ci_target": run_ctl.get("ci_target", 0.03), "confidence": run_ctl.get("confidence", 0.95),
        "warmup_s": spec.get("workload", {}).get("warmup"),
        "reset": run_ctl.get("reset", "full"),
        "duration_s": spec.get("workload", {}).get("duration"),
        "cells": [{"idx": c.cell.idx, "label": c.cell.label, "repeats": c.cell.repeats,
                   "stop_reason": c.cell.stop_reason, "ci_rel": c.cell.tps_ci_rel} for c in cells],
        # where each cell's noise sits (analysis/noise.py) and what it means for the budget
        "noise": [{"idx": c.cell.idx, "label": c.cell.label, **noise.to_json()}
                  for c in cells if c.cell.status == "done" and (noise := c.noise)],
        "noise_budget": budget_sentences(cells),
        # a ratio short of its target: the rounds its spread asks for, at this run's pace
        "short_of_target": [f"Cell {c.cell.idx} {c.cell.label} ÷ {ratio.baseline}: {text}."
                            for c in cells if (ratio := c.ratio_to_baseline)
                            and (text := target_text(ratio))],
        "probes": probes, "probe_tps_ratio": overhead,
        "probe_tps_ratio_median": (statistics.median(o["ratio"] for o in overhead)
                                   if overhead else None),
    }


def _choose_cell(cells: list[CellRow], verdict: dict[str, Any],
                 wanted: int | None) -> CellRow | None:
    done = [c for c in cells if c.cell.status == "done"]
    if wanted is not None:
        return next((c for c in done if c.cell.idx == wanted), None)
    best = verdict.get("best")
    if best:
        return next((c for c in done if c.cell.idx == best["idx"]), None)
    return done[0] if done else None


# ``syncrep-lab ab`` leaves its answer in each base's run folder under this name, and the
# report of that run shows it (plain text, as it was printed).
AB_SUMMARY_FILE = "ab-summary.txt"


def _ab_summary(folder: Path) -> str | None:
    try:
        return (folder / AB_SUMMARY_FILE).read_text()
    except OSError:
        return None


def report_data(folder: Path, cell: int | None = None) -> ReportData:
    """Every section of the report, from the store of the run in ``folder``.

    ``cell`` picks the cell whose timeline and flame graphs are shown (default:
    the fastest cell whose commits waited for a standby)."""
    costs = {c.idx: c for c in run_costs(folder)}
    diagnosed = diagnose_run(folder)
    cells = cell_summaries(folder, costs, diagnosed)
    series = scaling(folder)
    store = Store(folder, create=False)
    try:
        run = store.run()
        run_id = run.id
        spec = run.spec.table
        verdict = _verdict(cells, diagnosed, series)
        chosen = _choose_cell(cells, verdict, cell)
        if cell is not None and chosen is None:
            raise UserError(f"cell {cell} is not a finished cell of {folder}",
                            "pick one of: " + ", ".join(str(c.cell.idx) for c in cells
                                                        if c.cell.status == "done"))
        timeline: dict[str, Any] = (_timeline(store, store.cell(chosen.cell.id))
                    if chosen else {"missing": "no cell finished"})
        topology = _topology(store, run_id)
        hosts = _hosts(store, run_id, run.machine)
        guests = _guests(store, run_id, run.machine, hosts)
        host_numa = _host_numa(store, run_id)
        # the page reads the model's JSON form, as model --json prints it
        bounds = [m.to_json() for m in bound_model.run_model(folder)]
        flamegraphs: Flamegraphs = {"idx": chosen.cell.idx if chosen else None,
                       "graphs": _flamegraph_images(
                           folder, c.costs if chosen and (c := costs.get(chosen.cell.idx))
                           else None,
                           {name for t in topology for name, state in t["states"].items()
                            if state in ("sync", "quorum")})}
        placement = _placement_axes(cells)
        cores = core_sweep(folder)
        placed = _placement_readback(store, cells, run.machine)
        seed = seed_side_by_side(spec, cells, lambda cell_id: _measured_tps(store, cell_id))
        method = _method(store, run_id, spec, cells)
        # the page reads the faults' JSON form, as faults --json prints it
        faults = [c.to_json() for c in run_faults(folder)]
        ab_summary = _ab_summary(folder)
    finally:
        store.close()
    seed_machine = _seed_machine(folder, spec, seed)
    # the sections in the order report --json prints them
    return {
        "folder": str(folder),
        "run": {"name": run.name, "started_at": run.started_at,
                "finished_at": run.finished_at, "status": run.status,
                "tool_version": run.tool_version,
                "description": spec.get("description", "")},
        "machine": run.machine,
        "hosts": hosts,
        "guests": guests,
        "host_numa": host_numa,
        "spec_toml": mask_text(run.spec_toml),  # stores before masking had them
        "topology": topology,
        # the page reads the rows' JSON form, as results --json prints it
        "cells": [c.to_json() for c in cells],
        "verdict": verdict,
        "scaling": series,
        "bounds": bounds,
        "timeline": timeline,
        # the page reads the costs' JSON form, as costs --json prints it
        "costs": [costs[c.cell.idx].to_json() for c in cells if c.cell.idx in costs],
        "flamegraphs": flamegraphs,
        "placement": placement,
        "cores": cores,
        "placed": placed,
        "seed": seed,
        "method": method,
        "faults": faults,
        "ab_summary": ab_summary,
        "seed_machine": seed_machine,
    }


def _seed_machine(folder: Path, spec: dict[str, Any], seed: Mapping[str, Any]
                  ) -> dict[str, Any] | None:
    """What this machine's CPU per commit would allow on the reference's cores
    (``[reference] cores``), next to the reference's figures: the shape, not the
    number (another machine, other demands)."""
    ref = spec.get("reference") or {}
    cores = ref.get("cores")
    if not cores or "figures" not in seed:
        return None
    wanted = {int(f["idx"]) for f in seed["figures"] if f["idx"] is not None
              and f["where"].get("synchronous_commit") in WAITING_LEVELS}
    if not wanted:
        return None
    # one reading of the store for every figure's cell; no USL fits (not shown here)
    models = {m.idx: m for m in bound_model.run_model(folder, cores=float(cores),
                                                         fits=False)}
    rows = []
    for fig in seed["figures"]:
        if fig["idx"] not in wanted or int(fig["idx"]) not in models:
            continue
        m = models[int(fig["idx"])]
        if not m.bounds or m.what_if is None or m.what_if.max_tps is None:
            continue
        w = m.what_if.to_json()
        rows.append({"where": fig["where"], "seed_tps": fig["seed_tps"], "idx": fig["idx"],
                     "here_tps": m.measured_tps, "binding_here": m.binding,
                     "binding": w["binding"], "binding_kind": w["binding_kind"],
                     "max_tps": w["max_tps"],
                     # the commit anatomy's ceilings there (analysis/model.py: the release's
                     # cost per waiter as here, the time in the server as at this cell's
                     # clients)
                     "wait": w["wait_bounds"]})
    return {"cores": cores, "rows": rows} if rows else None
