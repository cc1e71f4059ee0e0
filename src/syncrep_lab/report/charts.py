"""The report's charts as plotly figure specifications (plain dicts, drawn in the
page by plotly.js): one function per chart, each from the report's data.

Conventions kept by every chart: a title, units on every axis, and one colour
per ``synchronous_commit`` level throughout the page (``LEVEL_COLOURS``). In the bound
charts, one colour per resource in every chart (:func:`resource_colour`), and the
measured throughput in one no resource has (``MEASURED_COLOUR``).
A function returns None when its data are absent; the page then says why.
"""

from __future__ import annotations

import math
import zlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias, TypedDict

from syncrep_lab.analysis.anatomy import (
    DISTRIBUTION_BINS,
    STANDBY,
    STANDBY_NAMES,
    STANDBY_PARTS,
)
from syncrep_lab.analysis.costs import KEY_SYSCALLS
from syncrep_lab.analysis.scaling import LocalRatio, Series
from syncrep_lab.json_form import JSON
from syncrep_lab.pg.replication import level_rank
from syncrep_lab.report.data import SHAPE_AXES, ReportData

LEVEL_COLOURS = {"off": "#7f7f7f", "local": "#1f77b4", "remote_write": "#ff7f0e",
                 "on": "#d62728", "remote_apply": "#9467bd"}
PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6",
           "#9d755d", "#bab0ac", "#eeca3b")
LATENCY_PERCENTILES = (("lat_p50_ms", "p50"), ("lat_p90_ms", "p90"), ("lat_p99_ms", "p99"),
                       ("lat_p999_ms", "p99.9"))


class Figure(TypedDict):
    """A plotly figure as plotly.js takes it: its traces and its layout."""

    data: list[dict[str, JSON]]
    layout: dict[str, JSON]


class Chart(TypedDict):
    """A chart of the page: the element it is drawn in, and its figure."""

    id: str
    figure: Figure


# What the charts read: the report's sections in their JSON form (report --json), as
# the page's template reads them. A chart reads them by key, unchecked (as the template
# does): the signatures say which section goes in, mypy checks that at the callers.
Rows: TypeAlias = list[dict[str, JSON]]  # the cells' rows, or a section's entries
Costs: TypeAlias = Sequence[Mapping[str, object]]  # costs --json's cells
Pair: TypeAlias = tuple[dict[str, JSON], dict[str, JSON]]  # a cell's row and its model


def _colour(level: str | None, i: int = 0) -> str:
    return LEVEL_COLOURS.get(level or "", PALETTE[i % len(PALETTE)])


# The bound charts' colours. A resource (analysis/model.py's names: a role of the
# primary or the client, "NODE ROLE" of a standby, "walsender:STANDBY", or a whole) has
# its role's colour in every chart, a standby's a shade of it; the measured throughput
# is black, which no resource is.
MEASURED_COLOUR = "#000000"
RESOURCE_COLOURS = {
    "backends": "#4c78a8", "pgbench": "#e45756", "sysbench": "#ff9da6",
    "walsender": "#f58518", "walwriter": "#54a24b", "walreceiver": "#72b7b2",
    "startup": "#b279a2", "bgwriter": "#9d755d", "checkpointer": "#eeca3b",
    "clients": "#bcbd22", "machine": "#8c8c8c", "servers' cores": "#17becf",
    # the wait bounds (kind "wait", analysis/model.py), drawn dotted
    "flush and wait": "#c51b7d", "serial release": "#7570b3",
}
# an unknown resource's, picked by its name
OTHER_RESOURCE_COLOURS = ("#637939", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354")
# a standby's process: its role's colour darkened or lightened (by the standby's name)
_SHADES = (("dark", 0.3), ("light", 0.35), ("light", 0.6))


def _shade(colour: str, how: str, amount: float) -> str:
    rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    to = 0 if how == "dark" else 255
    return "#" + "".join(f"{round(c + (to - c) * amount):02x}" for c in rgb)


def _pick(name: str, count: int) -> int:
    """A stable place among ``count`` for a name: b, c, d ... (the default standby
    names) in turn, any other name by its checksum."""
    if len(name) == 1 and name.islower():
        return (ord(name) - ord("b")) % count
    return zlib.crc32(name.encode()) % count


def resource_colour(resource: str) -> str:
    """The colour of a bound's resource, the same in every chart of the report."""
    role, standby = resource, None
    if ":" in resource:  # walsender:b, the primary's walsender serving b
        role, standby = resource.split(":", 1)
    elif " " in resource and resource not in RESOURCE_COLOURS:  # "b walreceiver"
        standby, role = resource.split(" ", 1)
    base = RESOURCE_COLOURS.get(role)
    if base is None:
        return OTHER_RESOURCE_COLOURS[_pick(resource, len(OTHER_RESOURCE_COLOURS))]
    if standby is None:
        return base
    return _shade(base, *_SHADES[_pick(standby, len(_SHADES))])


def _layout(title: str, x: str, y: str, **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "title": {"text": title}, "xaxis": {"title": {"text": x}, "automargin": True},
        "yaxis": {"title": {"text": y}, "automargin": True, "rangemode": "tozero"},
        "margin": {"t": 50, "r": 20}, "height": 380,
    }
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(layout.get(key), dict):
            layout[key] = {**layout[key], **value}
        else:
            layout[key] = value
    return layout


def _chart(chart_id: str, data: list[dict[str, Any]], layout: dict[str, Any]) -> Chart:
    return {"id": chart_id, "figure": {"data": data, "layout": layout}}


def _above(c: dict[str, Any]) -> float | None:
    """How far the TPS interval reaches above the mean (on the log scale, further than
    below it: :func:`_below`)."""
    if c.get("tps_ci_high") is None:
        return None
    return float(c["tps_ci_high"]) - float(c["tps_mean"])


def _below(c: dict[str, Any]) -> float | None:
    if c.get("tps_ci_low") is None:
        return None
    return float(c["tps_mean"]) - float(c["tps_ci_low"])


def _series_of(cell: dict[str, Any]) -> str:
    rest = {k: v for k, v in cell["axes"].items() if k not in SHAPE_AXES}
    return ", ".join(f"{k}={v}" for k, v in sorted(rest.items()))


def throughput(rows: Rows) -> Chart | None:
    """TPS against clients per sync level with the 95 % interval as a band; when the
    run has one client count, TPS per cell as bars with error bars."""
    cells: list[dict[str, Any]] = rows
    done = [c for c in cells if c["status"] == "done" and c["tps_mean"] is not None]
    if not done:
        return None
    clients = {c["params"].get("clients") for c in done}
    data: list[dict[str, Any]] = []
    if len(clients) == 1:
        for level in sorted({c["params"].get("synchronous_commit") for c in done},
                            key=lambda v: level_rank(str(v))):
            mine = [c for c in done if c["params"].get("synchronous_commit") == level]
            data.append({"type": "bar", "name": str(level), "x": [c["label"] for c in mine],
                         "y": [c["tps_mean"] for c in mine],
                         "marker": {"color": _colour(level)},
                         "error_y": {"type": "data", "symmetric": False,
                                     "array": [_above(c) for c in mine],
                                     "arrayminus": [_below(c) for c in mine],
                                     "visible": True}})
        title = f"Throughput per cell at {clients.pop()} clients (95 % CI)"
        return _chart("throughput", data, _layout(title, "cell", "transactions per second"))
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for c in done:
        groups[(_series_of(c), str(c["params"].get("synchronous_commit")))].append(c)
    dashes = ("solid", "dash", "dot", "dashdot")
    series_names = sorted({k[0] for k in groups})
    for (series, level), mine in sorted(groups.items(),
                                        key=lambda kv: (kv[0][0], level_rank(kv[0][1]))):
        mine.sort(key=lambda c: int(c["params"]["clients"]))
        x = [int(c["params"]["clients"]) for c in mine]
        name = f"{level}" + (f" ({series})" if series else "")
        colour = _colour(level)
        lows = [c["tps_ci_low"] if c["tps_ci_low"] is not None else c["tps_mean"] for c in mine]
        highs = [c["tps_ci_high"] if c["tps_ci_high"] is not None else c["tps_mean"]
                 for c in mine]
        data.append({"type": "scatter", "mode": "lines", "x": x, "y": highs,
                     "line": {"width": 0}, "showlegend": False, "hoverinfo": "skip",
                     "legendgroup": name})
        data.append({"type": "scatter", "mode": "lines", "x": x, "y": lows, "fill": "tonexty",
                     "fillcolor": colour + "33", "line": {"width": 0}, "showlegend": False,
                     "hoverinfo": "skip", "legendgroup": name})
        data.append({"type": "scatter", "mode": "lines+markers", "name": name, "x": x,
                     "y": [c["tps_mean"] for c in mine], "legendgroup": name,
                     "line": {"color": colour,
                              "dash": dashes[series_names.index(series) % len(dashes)]}})
    return _chart("throughput", data, _layout(
        "Throughput against clients per synchronous_commit (band: 95 % CI)", "clients",
        "transactions per second", xaxis={"type": "log", "tickvals": sorted(clients)}))


def latency(rows: Rows) -> Chart | None:
    cells: list[dict[str, Any]] = rows
    done = [c for c in cells if c["status"] == "done" and c["lat_p50_ms"] is not None]
    if not done:
        return None
    data = [{"type": "bar", "name": name, "x": [c["label"] for c in done],
             "y": [c[key] for c in done], "marker": {"color": PALETTE[i]}}
            for i, (key, name) in enumerate(LATENCY_PERCENTILES)]
    return _chart("latency", data, _layout(
        "Transaction latency percentiles per cell (every transaction of the measured repeats)",
        "cell", "latency (ms, log scale)", yaxis={"type": "log", "rangemode": "normal"}))


def _error_y(ratios: Sequence[LocalRatio]) -> dict[str, Any]:
    return {"type": "data", "visible": True, "symmetric": False,
            "array": [(r["high"] - r["ratio"]) if r["high"] is not None else 0
                      for r in ratios],
            "arrayminus": [(r["ratio"] - r["low"]) if r["low"] is not None else 0
                           for r in ratios]}


def ratio_to_local(series: list[Series]) -> Chart | None:
    levels = [(entry, level, ratios) for entry in series
              for level, ratios in sorted(entry["ratios_to_local"].items(),
                                          key=lambda kv: level_rank(kv[0]))]
    if levels and all(len(ratios) == 1 for _, _, ratios in levels):
        # one client count: a line would be one lone point; a bar per level instead
        names = [level + ("" if e["series"] == "all cells" else f" ({e['series']})")
                 for e, level, _ in levels]
        points = [ratios[0] for _, _, ratios in levels]
        return _chart("ratio", [{
            "type": "bar", "name": "ratio to local", "x": names,
            "y": [r["ratio"] for r in points],
            "marker": {"color": [_colour(level) for _, level, _ in levels]},
            "error_y": _error_y(points)}], _layout(
            f"Price of each level: TPS as a fraction of local's at {points[0]['clients']} "
            "clients (95 % CI)", "synchronous_commit", "TPS ratio to local",
            shapes=[{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                     "line": {"dash": "dot", "color": "#999"}}]))
    data = []
    for entry in series:
        for level, ratios in sorted(entry["ratios_to_local"].items(),
                                    key=lambda kv: level_rank(kv[0])):
            name = level + ("" if entry["series"] == "all cells" else f" ({entry['series']})")
            data.append({
                "type": "scatter", "mode": "lines+markers", "name": name,
                "x": [r["clients"] for r in ratios], "y": [r["ratio"] for r in ratios],
                "line": {"color": _colour(level)}, "error_y": _error_y(ratios)})
    if not data:
        return None
    return _chart("ratio", data, _layout(
        "Price of each level: TPS as a fraction of local's at the same clients (95 % CI)",
        "clients", "TPS ratio to local", yaxis={"range": [0, 1.6]},
        shapes=[{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                 "line": {"dash": "dot", "color": "#999"}}]))


def _per_second(timeline: dict[str, Any], key: str, chart_id: str, title: str,
                y_title: str) -> Chart | None:
    """One line per repeat of the chosen cell (the probed one dotted)."""
    reps = [r for r in timeline.get("repeats", []) if any(v is not None for v in r[key])]
    if not reps:
        return None
    data = [{"type": "scatter", "mode": "lines+markers",
             "name": f"repeat {r['repeat']}" + (" (probed)" if r["probed"] else ""),
             "x": r["t"], "y": r[key], "line": {"dash": "dot" if r["probed"] else "solid",
                                                "color": PALETTE[i % len(PALETTE)]}}
            for i, r in enumerate(reps)]
    return _chart(chart_id, data, _layout(title, "time in repeat (s)", y_title))


def timeline_tps(timeline: dict[str, JSON]) -> Chart | None:
    return _per_second(timeline, "tps", "timeline-tps",
                       f"Cell {timeline.get('idx')} ({timeline.get('label')}): TPS each second",
                       "transactions per second")


def fault_timeline(faults: dict[str, JSON], n: int) -> Chart | None:
    """A faulted cell's TPS each second, with its events marked where they fired."""
    cell: dict[str, Any] = faults
    reps = [r for r in cell["repeats"] if r.get("samples")]
    if not reps:
        return None
    data = [{"type": "scatter", "mode": "lines+markers", "name": f"repeat {r['n']}",
             "x": [s[0] for s in r["samples"]], "y": [s[1] for s in r["samples"]],
             "line": {"color": PALETTE[i % len(PALETTE)]}} for i, r in enumerate(reps)]
    marks = []
    for r in reps[:1]:
        for rec in r["records"]:
            if rec["kind"] in ("fault", "stall"):
                marks.append({"type": "line", "x0": rec["t_s"], "x1": rec["t_s"], "yref": "paper",
                              "y0": 0, "y1": 1, "line": {"color": "#d62728", "dash": "dash"}})
    notes = [{"x": rec["t_s"], "y": 1, "yref": "paper", "text": f"{rec['node']} {rec['detail']}",
              "showarrow": False, "textangle": -90, "xanchor": "right", "yanchor": "top",
              "font": {"size": 10, "color": "#d62728"}}
             for r in reps[:1] for rec in r["records"] if rec["kind"] in ("fault", "stall")]
    return _chart(f"faults-{n}", data, _layout(
        f"Cell {cell['idx']} ({cell['label']}): TPS each second around its faults "
        "(dashed: events of the first repeat)", "time since pgbench started (s)",
        "transactions per second", shapes=marks, annotations=notes))


def timeline_latency(timeline: dict[str, JSON]) -> Chart | None:
    return _per_second(timeline, "latency_ms", "timeline-latency",
                       f"Cell {timeline.get('idx')}: mean latency each second (pgbench -P)",
                       "latency (ms)")


def timeline_lags(section: dict[str, JSON]) -> Chart | None:
    timeline: dict[str, Any] = section
    lags = timeline.get("lags") or {}
    data = []
    for i, (standby, lag) in enumerate(sorted(lags.items())):
        for kind, dash in (("flush_ms", "solid"), ("replay_ms", "dot")):
            if any(v is not None for v in lag[kind]):
                data.append({"type": "scatter", "mode": "lines", "x": lag["t"], "y": lag[kind],
                             "name": f"{standby} {kind.removesuffix('_ms')} lag",
                             "line": {"dash": dash, "color": PALETTE[i % len(PALETTE)]}})
    if not data:
        # 9.6 reports no lag times: the bytes behind are what it has.
        for i, (standby, lag) in enumerate(sorted(lags.items())):
            if any(v is not None for v in lag["flush_bytes"]):
                data.append({"type": "scatter", "mode": "lines", "x": lag["t"],
                             "y": lag["flush_bytes"], "name": f"{standby} flush lag",
                             "line": {"color": PALETTE[i % len(PALETTE)]}})
        if not data:
            return None
        return _chart("timeline-lags", data, _layout(
            f"Cell {timeline['idx']}: WAL not yet flushed by each standby (probed repeat)",
            "time since the probes started (s)", "bytes behind"))
    events = [{"type": "line", "x0": e["t"], "x1": e["t"], "yref": "paper", "y0": 0, "y1": 1,
               "line": {"color": "#d62728", "dash": "dash"}} for e in timeline.get("events", [])]
    return _chart("timeline-lags", data, _layout(
        f"Cell {timeline['idx']}: replication lag of each standby (probed repeat)",
        "time since the probes started (s)", "lag (ms)", shapes=events))


def timeline_waits(section: dict[str, JSON]) -> Chart | None:
    timeline: dict[str, Any] = section
    waits = timeline.get("backend_waits") or {}
    if not waits.get("t"):
        return None
    colours = {"IPC": "#d62728", "CPU": "#54a24b", "Client": "#bab0ac", "IO": "#f58518",
               "LWLock": "#4c78a8", "Lock": "#b279a2"}
    data = [{"type": "scatter", "mode": "lines", "stackgroup": "waits", "name": kind,
             "x": waits["t"], "y": values,
             "line": {"color": colours.get(kind, PALETTE[i % len(PALETTE)])}}
            for i, (kind, values) in enumerate(waits["kinds"].items())]
    return _chart("timeline-waits", data, _layout(
        f"Cell {timeline['idx']}: the primary's backends by wait kind, each second "
        "(probed repeat)", "time since the probes started (s)",
        "backends in that state (mean of samples)"))


def _role_name(entry: dict[str, Any]) -> str:
    return f"{entry['node']} {entry['role']}"


# The roles a commit passes through; idle helpers (bgwriter, checkpointer, autovacuum,
# ...) sit in their main loops and would only crowd the wait-event chart.
COMMIT_PATH_ROLES = ("backend", "walwriter", "walreceiver", "startup")


def _on_commit_path(role: str) -> bool:
    return role in COMMIT_PATH_ROLES or role.startswith("walsender")


def _significant(values: dict[str, float], share: float = 0.02) -> set[str]:
    """Names whose value is at least ``share`` of the largest: the rest is noise
    at the scale of the chart."""
    top = max(values.values(), default=0.0)
    return {k for k, v in values.items() if top > 0 and v >= share * top}


def waits(chosen: Mapping[str, object] | None) -> Chart | None:
    """Where each role's sampled time went, by wait kind, as stacked shares."""
    cost: Mapping[str, Any] | None = chosen
    if not cost or not cost.get("waits"):
        return None
    roles = [w for w in cost["waits"] if w["samples"] > 0 and _on_commit_path(w["role"])]
    if not roles:
        return None
    kinds: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(roles))
    for i, w in enumerate(roles):
        for event, share in w["share"].items():
            kinds[event][i] += 100.0 * share
    top = sorted(kinds, key=lambda k: -sum(kinds[k]))
    data = [{"type": "bar", "orientation": "h", "name": k, "y": [_role_name(w) for w in roles],
             "x": kinds[k], "marker": {"color": PALETTE[i % len(PALETTE)]}}
            for i, k in enumerate(top[:10])]
    if len(top) > 10:
        rest = [sum(kinds[k][i] for k in top[10:]) for i in range(len(roles))]
        data.append({"type": "bar", "orientation": "h", "name": "other", "y": data[0]["y"],
                     "x": rest, "marker": {"color": "#cccccc"}})
    return _chart("waits", data, _layout(
        f"Cell {cost['idx']}: wait events of each role (share of samples)",
        "share of samples (%)", "node and role", barmode="stack",
        height=max(300, 40 * len(roles) + 150), yaxis={"rangemode": "normal"}))


def latency_breakdown(chosen: Mapping[str, object] | None) -> Chart | None:
    cost: Mapping[str, Any] | None = chosen
    lb = (cost or {}).get("latency_breakdown")
    if not lb:
        return None
    parts = (("sync_wait_ms", "waiting for the standby"), ("wal_ms", "WAL write/flush"),
             ("cpu_ms", "on CPU"), ("client_ms", "waiting for the client"),
             ("other_ms", "other waits"))
    assert cost is not None
    data = [{"type": "bar", "orientation": "h", "name": name, "y": [f"cell {cost['idx']}"],
             "x": [lb[key]], "marker": {"color": PALETTE[i]}}
            for i, (key, name) in enumerate(parts)]
    return _chart("breakdown", data, _layout(
        f"Cell {cost['idx']}: a commit's {lb['latency_ms']:.2f} ms split by what the "
        "primary's backends were doing", "ms per transaction", "", barmode="stack", height=300,
        yaxis={"rangemode": "normal"}))


ANATOMY_PARTS = (("local_flush", "local WAL flush"), ("standby_wait", "waiting for the standby"),
                 ("wakeup_queue", "wake-up queue"), ("run_queue", "run queue"),
                 ("unsignalled", "released before it slept"))


def commit_anatomy(of_cells: Costs) -> Chart | None:
    """Where a commit's time goes, per cell with a commit anatomy: the local flush and
    the commit wait's parts, µs per commit, stacked."""
    costs: Sequence[Mapping[str, Any]] = of_cells
    cells = [c for c in costs if c.get("anatomy")]
    if not cells:
        return None
    labels = [f"{c['idx']}: {c['label']}" for c in cells]
    data = []
    for i, (key, name) in enumerate(ANATOMY_PARTS):
        values = []
        for c in cells:
            found = {p["component"]: p for p in c["anatomy"]["components"]}
            values.append((found[key]["us_per_commit"]["mean"] or 0.0) if key in found else 0.0)
        if any(values):
            data.append({"type": "bar", "orientation": "h", "name": name, "y": labels,
                         "x": values, "marker": {"color": PALETTE[i % len(PALETTE)]}})
    if not data:
        return None
    return _chart("anatomy", data, _layout(
        "Where a commit's time goes (commit anatomy of the probed repeats, µs per commit)",
        "µs per commit", "cell", barmode="stack", height=max(300, 40 * len(cells) + 150),
        yaxis={"rangemode": "normal", "autorange": "reversed"}))


def standby_anatomy(of_cells: Costs) -> Chart | None:
    """The wait for the standby in its parts (probes/standby_anatomy.py), per cell that
    has them: the commit's parts on the primary in one bar and, beside it, the sync
    standby's half of the wait in another, µs per commit (the standby's per commit it
    joined), stacked."""
    costs: Sequence[Mapping[str, Any]] = of_cells
    cells = [c for c in costs if (c.get("anatomy") or {}).get("standby")]
    if not cells:
        return None
    rows: list[tuple[str, dict[str, float]]] = []
    for c in cells:
        found = _anatomy_parts(c)
        rows.append((f"{c['idx']}: {c['label']}, the commit",
                     {key: found[key]["us_per_commit"]["mean"] or 0.0
                      for key, _ in ANATOMY_PARTS if key in found}))
        for half in c["anatomy"]["standby"]:
            name = str(half["standby"]).removeprefix(STANDBY)
            rows.append((f"{c['idx']}: {c['label']}, the wait for {name}",
                         {p["component"]: p["us_per_commit"]["mean"] or 0.0
                          for p in half["parts"]}))
    labels = [label for label, _ in rows]
    parts = [*ANATOMY_PARTS, *((k, STANDBY_NAMES[k]) for k in STANDBY_PARTS)]
    data = []
    for i, (key, name) in enumerate(parts):
        values = [found.get(key, 0.0) for _, found in rows]
        if any(values):
            data.append({"type": "bar", "orientation": "h", "name": name, "y": labels,
                         "x": values, "marker": {"color": PALETTE[i % len(PALETTE)]}})
    return _chart("anatomy-standby", data, _layout(
        "The wait for the standby in its parts, beside the commit's (µs per commit)",
        "µs per commit", "cell", barmode="stack", height=max(300, 40 * len(rows) + 150),
        yaxis={"rangemode": "normal", "autorange": "reversed"}))


def _anatomy_parts(cost: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["component"]: p for p in cost["anatomy"]["components"]}


def anatomy_against_clients(rows: Rows, of_cells: Costs) -> dict[str, Chart]:
    """Per sync level with the anatomy at two client counts or more: each part of a
    commit (µs per commit, its 95 % interval over the anatomy's repeats where there are
    two) against clients, a line per part (and per series where the run has several);
    the part that grows is the one that sets the ceiling."""
    cells: list[dict[str, Any]] = rows
    costs: Sequence[Mapping[str, Any]] = of_cells
    by_idx = {c["idx"]: c for c in cells}
    groups: dict[str, dict[str, list[tuple[int, dict[str, dict[str, Any]]]]]] = \
        defaultdict(lambda: defaultdict(list))
    for cost in costs:
        cell = by_idx.get(cost["idx"])
        if not cost.get("anatomy") or cell is None or "clients" not in cell["params"]:
            continue
        level = str(cell["params"].get("synchronous_commit"))
        groups[level][_series_of(cell)].append((int(cell["params"]["clients"]),
                                                _anatomy_parts(cost)))
    charts: dict[str, Chart] = {}
    for level in sorted(groups, key=level_rank):
        series = groups[level]
        if not any(len({n for n, _ in points}) > 1 for points in series.values()):
            continue
        data = []
        for s_i, (name, points) in enumerate(sorted(series.items())):
            points.sort(key=lambda p: p[0])
            for i, (key, label) in enumerate(ANATOMY_PARTS):
                found = [(n, parts[key]["us_per_commit"]) for n, parts in points
                         if key in parts]
                if not any(v["mean"] for _, v in found):
                    continue
                data.append({
                    "type": "scatter", "mode": "lines+markers",
                    "name": label + (f" ({name})" if name else ""),
                    "x": [n for n, _ in found], "y": [v["mean"] for _, v in found],
                    "line": {"color": PALETTE[i % len(PALETTE)],
                             "dash": ("solid", "dash", "dot", "dashdot")[s_i % 4]},
                    "error_y": {"type": "data", "symmetric": False, "visible": True,
                                "array": [v["high"] - v["mean"] if v["high"] is not None
                                          and v["mean"] is not None else None
                                          for _, v in found],
                                "arrayminus": [v["mean"] - v["low"] if v["low"] is not None
                                               and v["mean"] is not None else None
                                               for _, v in found]}})
        if data:
            charts[f"anatomy-clients-{level}"] = _chart(
                f"anatomy-clients-{level}", data, _layout(
                    f"synchronous_commit = {level}: each part of a commit against clients "
                    "(commit anatomy, µs per commit)", "clients", "µs per commit"))
    return charts


def anatomy_histograms(chosen: Mapping[str, object] | None) -> Chart | None:
    """The chosen cell's distribution of each part of a commit, per event: the share of
    events in each quarter-octave bin, on a log axis (a part's mean can hide two modes:
    most waits released at once and a tail that waited a round trip)."""
    cost: Mapping[str, Any] | None = chosen
    if not cost or not cost.get("anatomy"):
        return None
    parts = _anatomy_parts(cost)
    data = []
    for i, (key, label) in enumerate(ANATOMY_PARTS):
        bins = parts.get(key, {}).get("distribution") or []
        events = sum(n for _, _, n in bins)
        if not events:
            continue
        # under a microsecond (a wait whose release had begun: 0) is one figure in the
        # legend, not decades of empty axis; the empty bins between are drawn as 0
        under = sum(n for _, high, n in bins if high <= 1.0)
        per = DISTRIBUTION_BINS
        counts = {round(math.log2(low) * per): n for low, high, n in bins if high > 1.0}
        if not counts:
            continue
        keys = range(min(counts), max(counts) + 1)
        name = f"{label} ({events:,} events" + (
            f", {under:,} under 1 µs)" if under else ")")
        data.append({"type": "scatter", "mode": "lines",
                     "line": {"shape": "hvh", "color": PALETTE[i]}, "name": name,
                     "x": [2.0 ** ((k + 0.5) / per) for k in keys],
                     "y": [100.0 * counts.get(k, 0) / events for k in keys]})
    if not data:
        return None
    return _chart("anatomy-histograms", data, _layout(
        f"Cell {cost['idx']}: how long each part of a commit took, per event (commit "
        "anatomy; share of the part's events per quarter octave)", "µs per event (log)",
        "share of events (%)", xaxis={"type": "log"}))


def _per_role(costs: Sequence[Mapping[str, Any]], figure: str, chart_id: str, title: str,
              y_title: str) -> Chart | None:
    """A per-commit figure of every node and role that matters at the chart's scale,
    one bar per cell, with its 95 % interval over the probed repeats."""
    with_roles = [c for c in costs if c["roles"]]
    peak: dict[str, float] = defaultdict(float)
    for c in with_roles:
        for r in c["roles"]:
            peak[_role_name(r)] = max(peak[_role_name(r)], r[figure]["mean"] or 0.0)
    order = sorted(_significant(peak))
    if not order:
        return None
    data = []
    for i, c in enumerate(with_roles):
        by = {_role_name(r): r[figure] for r in c["roles"]}
        err = [((by[n]["high"] - by[n]["low"]) / 2 if n in by and by[n]["high"] is not None
                and by[n]["low"] is not None else None) for n in order]
        data.append({"type": "bar", "name": f"cell {c['idx']} {c['label']}", "x": order,
                     "y": [by.get(n, {}).get("mean") for n in order],
                     "error_y": {"type": "data", "array": err, "visible": True},
                     "marker": {"color": PALETTE[i % len(PALETTE)]}})
    return _chart(chart_id, data, _layout(title, "node and role", y_title))


def cpu_per_commit(costs: Costs) -> Chart | None:
    return _per_role(costs, "cpu_us_per_commit", "cpu",
                     "CPU per commit of each node and process role (95 % CI over probed "
                     "repeats)", "CPU µs per commit")


def context_switches(costs: Costs) -> Chart | None:
    return _per_role(costs, "context_switches_per_commit", "switches",
                     "Context switches per commit of each node and role",
                     "context switches per commit")


def syscalls(chosen: Mapping[str, object] | None) -> Chart | None:
    """The chosen cell's system calls per commit by kind, stacked per role."""
    cost: Mapping[str, Any] | None = chosen
    roles = [r for r in (cost or {}).get("roles", []) if r["syscalls_per_commit"]]
    totals = {_role_name(r): sum((v.get("mean") or 0.0) for v in r["syscalls_per_commit"].values())
              for r in roles}
    keep = _significant(totals, 0.05)
    roles = [r for r in roles if _role_name(r) in keep]
    if not roles:
        return None
    assert cost is not None
    names = sorted({n for r in roles for n in r["syscalls_per_commit"]},
                   key=lambda n: (n not in KEY_SYSCALLS, n))
    data = []
    for i, name in enumerate(names):
        y = [(r["syscalls_per_commit"].get(name) or {}).get("mean") for r in roles]
        if not any(v for v in y):
            continue
        data.append({"type": "bar", "name": name, "x": [_role_name(r) for r in roles], "y": y,
                     "marker": {"color": PALETTE[i % len(PALETTE)]}})
    if not data:
        return None
    return _chart("syscalls", data, _layout(
        f"Cell {cost['idx']}: system calls per commit by kind (perf)", "node and role",
        "system calls per commit", barmode="stack"))


def placement(section: dict[str, JSON]) -> list[Chart]:
    """One small chart per varied axis: TPS by the axis's value, per sync level."""
    placement_data: dict[str, Any] = section
    charts = []
    for axis in placement_data.get("axes", []):
        by_level: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for p in axis["points"]:
            by_level[str(p["level"])].append(p)
        data = []
        combined = False
        for level, points in sorted(by_level.items(), key=lambda kv: level_rank(kv[0])):
            labels = [f"{p['value']} ({p['clients']} cl.)" for p in points]
            if len(set(labels)) < len(labels):
                combined = True
                # other axes vary too: one bar per combination, named, never stacked
                labels = [f"{label}<br>{p.get('rest', '')}" for label, p in
                          zip(labels, points, strict=True)]
            data.append({
                "type": "bar", "name": level, "marker": {"color": _colour(level)},
                "x": labels,
                "y": [p["tps"] for p in points],
                "error_y": {"type": "data", "visible": True,
                            "array": [(p["high"] - p["low"]) / 2 if p["high"] is not None
                                      and p["low"] is not None else None for p in points]}})
        charts.append(_chart(f"axis-{axis['axis']}", data, _layout(
            f"Throughput by {axis['axis']} (95 % CI)", axis["axis"], "transactions per second",
            height=520 if combined else 320)))
    return charts


def seed_ratios(section: dict[str, JSON]) -> Chart | None:
    seed: dict[str, Any] = section
    ratios = seed.get("ratios") or []
    if not ratios:
        return None
    x = [f"{r['what']} ({', '.join(f'{k}={v}' for k, v in r['given'].items())})"
         for r in ratios]
    data = [
        {"type": "bar", "name": "seed (published)", "x": x, "y": [r["seed"] for r in ratios],
         "marker": {"color": "#bab0ac"}},
        {"type": "bar", "name": "this machine", "x": x, "y": [r["here"] for r in ratios],
         "marker": {"color": "#4c78a8"},
         "error_y": {"type": "data", "visible": True, "symmetric": False,
                     "array": [(r["high"] - r["here"]) if r["high"] is not None else None
                               for r in ratios],
                     "arrayminus": [(r["here"] - r["low"]) if r["low"] is not None else None
                                    for r in ratios]}},
    ]
    return _chart("seed", data, _layout(
        "The seed's ratios and this machine's (95 % CI): the shape should match",
        "ratio (rows/s for batch)", "ratio", height=420))


BOUNDS_SHOWN = 5  # the lowest bounds of a level drawn; the others are far above


def bound_levels(models: Rows, cells: Rows) -> dict[str, list[Pair]]:
    """(cell, model) pairs of each synchronous_commit level that has bounds."""
    by_idx = {c["idx"]: c for c in cells}
    out: dict[str, list[Pair]] = defaultdict(list)
    for m in models:
        cell = by_idx.get(m["idx"])
        if (cell is not None and (m["bounds"] or m.get("wait_bounds"))
                and m["measured_tps"] is not None):
            params = cell["params"]
            level = params.get("synchronous_commit") if isinstance(params, dict) else None
            out[str(level)].append((cell, m))
    return dict(sorted(out.items(), key=lambda kv: level_rank(kv[0])))


def _every_bound(m: dict[str, Any]) -> list[dict[str, Any]]:
    """A model's CPU bounds and wait bounds together."""
    return [*m["bounds"], *(m.get("wait_bounds") or [])]


def bounds(level: str, of_level: list[Pair]) -> Chart:
    """The classic bound chart of one level: measured TPS against clients with each
    of the lowest bounds as a line (the wait bounds dotted); at one client count, bars
    per cell."""
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = of_level
    resources: list[str] = []
    for _, m in pairs:  # the lowest few, and the walsenders' wherever they are
        for b in m["bounds"]:
            if b["resource"] not in resources and (
                    len(resources) < BOUNDS_SHOWN or b["resource"].startswith("walsender")):
                resources.append(b["resource"])
    waits = sorted({b["resource"] for _, m in pairs for b in m.get("wait_bounds") or []})
    resources += waits
    clients = sorted({int(c["params"].get("clients") or 1) for c, _ in pairs})
    data: list[dict[str, Any]] = []
    title = f"{level}: measured throughput and the bounds (95 % CI)"
    if len(clients) > 1 and len({_series_of(c) for c, _ in pairs}) == 1:
        pairs = sorted(pairs, key=lambda p: int(p[0]["params"].get("clients") or 1))
        x = [int(c["params"].get("clients") or 1) for c, _ in pairs]
        data.append({"type": "scatter", "mode": "lines+markers", "name": "measured", "x": x,
                     "y": [m["measured_tps"] for _, m in pairs],
                     "line": {"color": MEASURED_COLOUR, "width": 3}})
        for name in resources:
            ys = [next((b["max_tps"] for b in _every_bound(m) if b["resource"] == name), None)
                  for _, m in pairs]
            data.append({"type": "scatter", "mode": "lines", "x": x, "y": ys,
                         "name": name + (" (wait)" if name in waits else ""),
                         "line": {"dash": "dot" if name in waits else "dash",
                                  "color": resource_colour(name)}})
        return _chart(f"bounds-{level}", data, _layout(
            title, "clients", "transactions per second",
            xaxis={"type": "log", "tickvals": clients}, yaxis={"type": "log"}))
    labels = [c["label"] for c, _ in pairs]
    data.append({"type": "bar", "name": "measured", "x": labels,
                 "y": [m["measured_tps"] for _, m in pairs],
                 "marker": {"color": MEASURED_COLOUR}})
    for name in resources:
        found = [next((b for b in _every_bound(m) if b["resource"] == name), None)
                 for _, m in pairs]
        data.append({"type": "bar", "name": name + (" (wait)" if name in waits else ""),
                     "x": labels,
                     "y": [b["max_tps"] if b else None for b in found],
                     "marker": {"color": resource_colour(name)},
                     "error_y": {"type": "data", "symmetric": False, "visible": True,
                                 "array": [(b["high"] - b["max_tps"]) if b and b["high"]
                                           is not None and b["max_tps"] is not None else None
                                           for b in found],
                                 "arrayminus": [(b["max_tps"] - b["low"]) if b and b["low"]
                                                is not None and b["max_tps"] is not None
                                                else None for b in found]}})
    return _chart(f"bounds-{level}", data, _layout(title, "cell", "transactions per second",
                                                   barmode="group"))


def all_charts(data: ReportData) -> dict[str, Chart]:
    """Every chart the page can show, by section slot; absent ones are left out."""
    idx = data["timeline"].get("idx")
    chosen = next((c for c in data["costs"] if c["idx"] == idx), None)
    charts: dict[str, Chart | None] = {
        "throughput": throughput(data["cells"]),
        "latency": latency(data["cells"]),
        "ratio": ratio_to_local(data["scaling"]),
        "timeline_tps": timeline_tps(data["timeline"]),
        "timeline_latency": timeline_latency(data["timeline"]),
        "timeline_lags": timeline_lags(data["timeline"]),
        "timeline_waits": timeline_waits(data["timeline"]),
        "waits": waits(chosen),
        "breakdown": latency_breakdown(chosen),
        "anatomy": commit_anatomy(data["costs"]),
        "anatomy-standby": standby_anatomy(data["costs"]),
        "anatomy-histograms": anatomy_histograms(chosen),
        "cpu": cpu_per_commit(data["costs"]),
        "switches": context_switches(data["costs"]),
        "syscalls": syscalls(chosen),
        "seed": seed_ratios(data["seed"]),
    }
    for level, pairs in bound_levels(data["bounds"], data["cells"]).items():
        charts[f"bounds-{level}"] = bounds(level, pairs)
    charts.update(anatomy_against_clients(data["cells"], data["costs"]))
    for chart in placement(data["placement"]):
        charts[chart["id"]] = chart
    for n, cell in enumerate(data.get("faults", [])):
        charts[f"faults-{n}"] = fault_timeline(cell, n)
    return {k: v for k, v in charts.items() if v is not None}


def compare_ratios(comparison: Mapping[str, JSON]) -> Chart | None:
    """B/A of each matched cell's TPS, mean and p99 latency, with 95 % intervals."""
    data: Mapping[str, Any] = comparison
    traces = []
    for i, figure in enumerate(("TPS", "mean latency", "p99 latency")):
        x, y, up, down = [], [], [], []
        for pair in data["pairs"]:
            f = next((f for f in pair["figures"] if f["figure"] == figure), None)
            if f is None or f["ratio"] is None:
                continue
            x.append(", ".join(f"{k}={v}" for k, v in pair["key"].items()) or "the run")
            y.append(f["ratio"])
            up.append(f["ratio_high"] - f["ratio"] if f["ratio_high"] is not None else None)
            down.append(f["ratio"] - f["ratio_low"] if f["ratio_low"] is not None else None)
        if x:
            traces.append({"type": "bar", "name": figure, "x": x, "y": y,
                           "marker": {"color": PALETTE[i]},
                           "error_y": {"type": "data", "visible": True, "symmetric": False,
                                       "array": up, "arrayminus": down}})
    if not traces:
        return None
    return _chart("compare-ratios", traces, _layout(
        "B / A for each matched cell (95 % CI; 1 = no change)", "matched cell", "ratio B / A",
        shapes=[{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                 "line": {"dash": "dot", "color": "#999"}}]))


def compare_costs(matched: Mapping[str, JSON], n: int) -> Chart | None:
    """The per-commit costs of one matched cell that changed most, A beside B."""
    pair: Mapping[str, Any] = matched
    top = pair.get("costs", {}).get("top", [])
    if not top:
        return None
    names = [f"{c['node']} {c['role']}: {c['figure']}" for c in top][::-1]
    data = [{"type": "bar", "orientation": "h", "name": side, "y": names,
             "x": [c[key]["mean"] for c in top][::-1], "marker": {"color": colour}}
            for side, key, colour in (("A", "a", "#bab0ac"), ("B", "b", "#4c78a8"))]
    return _chart(f"compare-costs-{n}", data, _layout(
        "Per-commit costs that changed most (per commit; CPU in µs)", "per commit", "",
        barmode="group", height=max(320, 34 * len(names) + 140),
        yaxis={"rangemode": "normal"}, xaxis={"type": "log"}))


def compare_charts(comparison: Mapping[str, JSON]) -> dict[str, Chart]:
    data: Mapping[str, Any] = comparison
    charts: dict[str, Chart | None] = {"compare-ratios": compare_ratios(data)}
    for n, pair in enumerate(data["pairs"]):
        charts[f"compare-costs-{n}"] = compare_costs(pair, n)
    return {k: v for k, v in charts.items() if v is not None}
