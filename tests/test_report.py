"""The report: built from stored real runs (no re-run), and written by a fresh real
run at its end; every page opened in headless Chromium, where each chart must
render and nothing may go to the console or the network.

Screenshots of every page checked go to ``test-artifacts/`` at the top of the
checkout."""

from __future__ import annotations

import json
import math
import sqlite3
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from syncrep_lab.analysis.diagnosis import diagnose_run, leading_verdict
from syncrep_lab.probes import flamegraph
from syncrep_lab.report.data import report_data
from syncrep_lab.store import DB_NAME
from tests.browser import ARTIFACTS, PAGE_STATE, check_report_page, open_page
from tests.data.runs.refresh import load

from .helpers import cli, cli_here

FIXTURES = ("pg18-local-on", "pg96-on", "pg18-proc-only")

@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("stored-runs")
    return {name: load(name, folder) for name in FIXTURES}


def _db(folder: Path) -> sqlite3.Connection:
    db = sqlite3.connect(folder / DB_NAME)
    db.row_factory = sqlite3.Row
    return db


def test_report_data_agree_with_the_store(stored: dict[str, Path]) -> None:
    folder = stored["pg18-local-on"]
    data: Mapping[str, Any] = report_data(folder)  # read by key, as the page does
    db = _db(folder)
    try:
        cells = db.execute("select * from cells order by idx").fetchall()
        # The verdict's best cell is the fastest one whose commits waited for a standby:
        # here the only such cell is synchronous_commit = on.
        sync = [c for c in cells if json.loads(c["params_json"])["synchronous_commit"] == "on"]
        best = max(sync, key=lambda c: c["tps_mean"])
        assert data["verdict"]["best"]["idx"] == best["idx"]
        assert data["verdict"]["best"]["tps"] == pytest.approx(best["tps_mean"])
        lead = leading_verdict(next(c for c in diagnose_run(folder)
                                    if c.idx == best["idx"]).verdicts)
        assert lead is not None
        assert data["verdict"]["limit"] == lead.to_json()
        # The timeline is every repeat of that cell, second by second, as stored.
        repeats = db.execute("select r.id, r.probed from repeats r where cell_id = ? order by n",
                             (best["id"],)).fetchall()
        assert len(data["timeline"]["repeats"]) == len(repeats)
        for shown, stored_repeat in zip(data["timeline"]["repeats"], repeats, strict=True):
            tps = [r[0] for r in db.execute("select tps from samples where repeat_id = ? "
                                            "order by t_s", (stored_repeat["id"],))]
            assert shown["tps"] == tps
            assert shown["probed"] == bool(stored_repeat["probed"])
        standbys = {r[0] for r in db.execute("select distinct standby from replication_samples")}
        assert set(data["timeline"]["lags"]) == standbys == {"b", "c"}
        # The probes' cost as measured in this run: a probed repeat's TPS over the
        # cell's measured mean.
        ratios = []
        for cell in cells:
            measured = [r[0] for r in db.execute(
                "select tps from repeats where cell_id = ? and probed = 0", (cell["id"],))]
            probed = [r[0] for r in db.execute(
                "select tps from repeats where cell_id = ? and probed = 1", (cell["id"],))]
            ratios.append(statistics.fmean(probed) / statistics.fmean(measured))
        assert data["method"]["probe_tps_ratio_median"] == pytest.approx(
            statistics.median(ratios))
    finally:
        db.close()
    topo = data["topology"][0]
    assert topo["states"] == {"b": "sync", "c": "potential"}
    assert topo["settings"]["synchronous_standby_names"]["primary"] == "FIRST 1 (b, c)"
    # Sections without data say why.
    assert "[reference]" in data["seed"]["missing"]
    assert "varied no axis" in data["placement"]["missing"]


def test_results_json_agrees_with_the_store(stored: dict[str, Path]) -> None:
    for name in ("pg18-local-on", "pg18-proc-only"):
        folder = stored[name]
        res = cli_here("results", str(folder), "--json")
        assert res.returncode == 0, res.stderr
        rows = {r["idx"]: r for r in json.loads(res.stdout)}
        db = _db(folder)
        try:
            for cell in db.execute("select * from cells"):
                row = rows[cell["idx"]]
                for key in ("tps_mean", "tps_ci_low", "tps_ci_high", "lat_p50_ms", "lat_p99_ms",
                            "repeats", "status", "label"):
                    assert row[key] == cell[key], key
                # The top cost per commit, recomputed from the raw rows: CPU of each
                # (node, role) over the transactions of the same repeat, averaged.
                table, cpu = (("costs", "cpu_ms") if name == "pg18-local-on"
                              else ("proc_costs", "user_ms + system_ms"))
                per_role: dict[tuple[str, str], list[float]] = {}
                for r in db.execute(
                        f"select k.node, k.role, 1000.0 * ({cpu}) / r.transactions "
                        f"from {table} k join repeats r on r.id = k.repeat_id "
                        "where r.cell_id = ?", (cell["id"],)):
                    per_role.setdefault((r[0], r[1]), []).append(r[2])
                (node, role), values = max(per_role.items(),
                                           key=lambda kv: statistics.fmean(kv[1]))
                top = row["top_cost"]
                assert (top["node"], top["role"]) == (node, role)
                assert top["cpu_us"] == pytest.approx(statistics.fmean(values))
                assert top["source"] == ("perf" if table == "costs" else "proc")
        finally:
            db.close()
        table_text = cli_here("results", str(folder)).stdout
        assert "top CPU per commit" in table_text
        first = rows[min(rows)]["top_cost"]
        assert f"{first['node']} {first['role']} {first['cpu_us']:,.0f} µs" in table_text


@pytest.mark.parametrize("name", FIXTURES)
def test_stored_run_report_renders_in_chromium(stored: dict[str, Path], name: str) -> None:
    folder = stored[name]
    res = cli_here("report", str(folder))
    assert res.returncode == 0, res.stderr
    page_path = folder / "report.html"
    assert str(page_path) in res.stdout.replace("\n", "")
    state = check_report_page(page_path, name)
    # The sync story's charts are there whenever their data are.
    assert {"throughput", "latency", "timeline_tps"} <= set(state["drawn"])
    if name == "pg18-proc-only":
        # perf did not run: no system calls chart, and the page says why.
        assert "syscalls" not in state["slots"]
        assert "perf did not count system calls" in state["text"]
        assert "cpu" in state["drawn"]  # CPU from /proc instead
    else:
        assert {"cpu", "syscalls", "waits"} <= set(state["drawn"])
    if name == "pg18-local-on":
        assert "ratio" in state["drawn"]
        assert "commit-wait wake-up bound" in state["text"]


def test_report_refuses_what_it_cannot_show(stored: dict[str, Path], workdir: Path) -> None:
    res = cli_here("report", str(stored["pg96-on"]), "--cell", "7")
    assert res.returncode == 2
    assert "cell 7 is not a finished cell" in res.stderr and "fix: pick one of: 0" in res.stderr
    res = cli_here("report", str(workdir / "nothing here"))
    assert res.returncode == 2 and "not a syncrep-lab run folder" in res.stderr
    assert "Traceback" not in res.stderr
    blocked = workdir / "file"
    blocked.write_text("")
    res = cli_here("report", str(stored["pg96-on"]), "--out", str(blocked / "report.html"))
    assert res.returncode == 2 and "cannot write the report" in res.stderr
    assert "Traceback" not in res.stderr


RUN_SPEC = """\
name = "report-e2e"

[topology]
standbys = 2

[workload]
clients = 4
duration = 1
warmup = 0

[matrix]
synchronous_commit = ["local", "on"]
batch = [1, 4]
only = [{ batch = 1 }, { batch = 4, synchronous_commit = "on" }]

[run]
repeats_min = 2
repeats_max = 2

[probes]
sched = false
# the report's commit anatomy is tests/test_commit_anatomy_run.py's (a repeat of its own)
anatomy = false

[reference]
source = "figures made up for this test"
figures = [
    { synchronous_commit = "local", batch = 1, tps = 200 },
    { synchronous_commit = "on", batch = 1, tps = 50 },
    { synchronous_commit = "on", batch = 4, tps = 30 },
]
"""


def test_a_run_ends_with_its_report(workdir: Path) -> None:
    spec = workdir / "report-e2e.toml"
    spec.write_text(RUN_SPEC)
    out = workdir / "run"
    res = cli("run", str(spec), "--out", str(out), timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    page_path = out / "report.html"
    assert f"report: {page_path}" in res.stdout.replace("\n", "")
    data: Mapping[str, Any] = report_data(out)
    db = _db(out)
    try:
        def measured(sc: str, batch: int) -> dict[int, float]:
            """round -> TPS of the cell's measured repeats (the run interleaved them)."""
            return {int(r[0]): float(r[1]) for r in db.execute(
                "select r.round, r.tps from repeats r join cells c on c.id = r.cell_id where "
                "r.probed = 0 and json_extract(c.params_json, '$.synchronous_commit') = ? "
                "and json_extract(c.params_json, '$.batch') = ?", (sc, batch))}

        def paired(a: dict[int, float], b: dict[int, float]) -> float:
            """The geometric mean of the ratios of the same round, by hand."""
            return math.exp(statistics.fmean(math.log(a[k] / b[k]) for k in a))

        ratios = {r["what"]: r for r in data["seed"]["ratios"]}
        on_local = ratios["synchronous_commit on / local"]
        assert on_local["seed"] == pytest.approx(50 / 200)
        assert on_local["paired"] is True
        assert on_local["here"] == pytest.approx(paired(measured("on", 1),
                                                        measured("local", 1)))
        batch = ratios["batch 4 / 1"]  # rows per second: 4 rows per transaction
        assert batch["unit"] == "rows/s"
        assert batch["seed"] == pytest.approx(4 * 30 / 50)
        assert batch["here"] == pytest.approx(
            4 * paired(measured("on", 4), measured("on", 1)))
    finally:
        db.close()
    assert [a["axis"] for a in data["placement"]["axes"]] == ["batch"]
    state = check_report_page(page_path, "e2e")
    assert {"seed", "axis-batch", "timeline_lags", "timeline_waits"} <= set(state["drawn"])
    # The backends' wait kinds second by second add up to the backends sampled.
    waits = data["timeline"]["backend_waits"]
    assert waits["t"] and "IPC" in waits["kinds"]
    reason = flamegraph.unavailable_reason()
    if reason is None:
        # Flame graphs are embedded in the page and decode as images.
        assert state["flames"] and all(w > 0 for w in state["flames"])
    else:
        assert not state["flames"]
        assert "No flame graphs" in state["text"] or "not embedded" in state["text"]


def test_compare_page_renders_in_chromium(stored: dict[str, Path], workdir: Path) -> None:
    page_path = workdir / "compare.html"
    res = cli_here("compare", str(stored["pg96-on"]), str(stored["pg18-local-on"]), "--html",
              str(page_path))
    assert res.returncode == 0, res.stderr
    page = open_page(page_path, ARTIFACTS / "compare-pg96-pg18.png", evaluate=PAGE_STATE,
                     wait_for="document.querySelectorAll('div.chart.js-plotly-plot').length > 0",
                     timeout=90)
    assert page.problems == [], page.problems
    state = page.value
    assert sorted(state["drawn"]) == sorted(state["slots"]) == sorted(state["specified"])
    assert {"compare-ratios", "compare-costs-0"} <= set(state["drawn"])
    # The page names what differs and the figure that changed most in the store.
    assert "server version 9.6.24 → 18.6" in state["text"]
    assert "epoll_create1" in state["text"]
    assert "Unmatched in B: cell 0 sc=local" in state["text"]


def test_the_seed_presets_reference_gives_the_seeds_ratios() -> None:
    """The seed's own tables, as ratios: sync levels against local (~0.32), ten rows
    per commit against one in rows per second (~3.1), with no standby on against off
    (~0.73), and the sync standby beside the primary against apart (1.0). No cell is
    matched here: only the seed's side is formed."""
    import tomllib

    from syncrep_lab.plan.spec import preset_text
    from syncrep_lab.report.data import seed_side_by_side

    spec = tomllib.loads(preset_text("seed"))
    seed: Mapping[str, Any] = seed_side_by_side(spec, [], lambda _cell_id: [])
    ratios = {(r["what"], tuple(sorted(r["given"].items()))): r for r in seed["ratios"]}
    socket = ("link", "socket")
    on_local = ratios[("synchronous_commit on / local", (("batch", 1), socket,
                                                         ("standbys", 2)))]
    assert on_local["seed"] == pytest.approx(70_000 / 220_000)
    assert on_local["here"] is None and on_local["low"] is None
    rows = ratios[("batch 10 / 1", (socket, ("standbys", 2), ("synchronous_commit", "on")))]
    assert rows["unit"] == "rows/s" and rows["seed"] == pytest.approx(220_000 / 70_000)
    no_standby = ratios[("synchronous_commit on / off", (("batch", 1), socket,
                                                         ("standbys", 0)))]
    assert no_standby["seed"] == pytest.approx(220_000 / 300_000)
    # group 4 (the sync standby beside the primary) against group 1's on: the same ~70k
    beside = ratios[("link seed-lan / socket", (("batch", 1), ("standbys", 2),
                                                ("synchronous_commit", "on")))]
    assert beside["seed"] == pytest.approx(1.0)
    assert len(seed["figures"]) == 8 and all(f["tps"] is None for f in seed["figures"])


def test_the_cell_table_says_what_stopped_each_cell(workdir: Path) -> None:
    """A cell that did not meet its target says what stopped it, as the Method section
    and `results` do: the budget is not repeats_max, and a met target (or an observed
    window's end) says nothing."""
    import re

    from syncrep_lab.report.html import render

    folder = load("pg18-local-on", workdir)
    for reasons, shown in ((("budget", "ci"), (" (budget)", "")),
                           (("max", "window"), (" (max)", ""))):
        db = _db(folder)
        try:
            for idx, reason in enumerate(reasons):
                db.execute("update cells set stop_reason = ? where idx = ?", (reason, idx))
            db.commit()
            repeats = [int(r[0]) for r in db.execute("select repeats from cells order by idx")]
        finally:
            db.close()
        page = render(report_data(folder))
        table = page[page.index('id="results-table"'):]
        table = table[:table.index("</table>")]
        rows = re.findall(r"<tr><td class=\"num\">(\d+)</td>(.*?)</tr>", table, re.S)
        # the fifth cell after the index: label, status, TPS, CI, repeats
        got = [re.sub(r"<[^>]+>", "", re.findall(r"<td[^>]*>(.*?)</td>", rest, re.S)[4])
               for _, rest in rows]
        assert got == [f"{n}{note}" for n, note in zip(repeats, shown, strict=True)]
        said = {"budget": "the budget", "max": "repeats_max"}[reasons[0]]
        assert f'title="stopped by {said} before its interval met the target"' in table
        assert f"{said} (wider than asked)" in page  # the Method section's words
        res = cli_here("results", str(folder))
        assert f"{repeats[0]}{shown[0]}" in res.stdout


def _bound_colours(chart: Mapping[str, Any]) -> dict[str, str]:
    """trace name -> its colour, in a bound chart."""
    return {t["name"]: (t.get("marker") or t.get("line") or {})["color"]
            for t in chart["figure"]["data"]}


def test_a_resource_has_one_colour_in_every_bound_chart(stored: dict[str, Path]) -> None:
    """pgbench or the backends are the same colour in each level's bound chart whatever
    their place in it, and the measured throughput has a colour no resource has (it
    was the level's: remote_write's orange was also the backends')."""
    from syncrep_lab.report.charts import MEASURED_COLOUR, bound_levels, bounds

    def pair(idx: int, level: str, clients: int, resources: list[str]
             ) -> tuple[dict[str, Any], dict[str, Any]]:
        cell = {"idx": idx, "label": f"cell {idx}", "axes": {},
                "params": {"synchronous_commit": level, "clients": clients}}
        found = [{"resource": r, "max_tps": 1000.0 * (k + 1), "low": 900.0 * (k + 1),
                  "high": 1100.0 * (k + 1)} for k, r in enumerate(resources)]
        return cell, {"idx": idx, "bounds": found, "measured_tps": 800.0}

    charts = [
        bounds("remote_write", [pair(0, "remote_write", 4, ["backends", "pgbench", "machine",
                                                             "walsender:b"])]),
        bounds("on", [pair(1, "on", 1, ["pgbench", "walsender:c", "walsender:b", "backends",
                                        "b walreceiver", "walwriter"]),
                      pair(2, "on", 8, ["machine", "pgbench", "walsender:b", "walsender:c",
                                        "backends", "c walreceiver"])]),
        bounds("local", [pair(3, "local", 2, ["clients", "walwriter", "pgbench"])]),
    ]
    data = report_data(stored["pg18-local-on"])
    charts += [bounds(level, pairs) for level, pairs in
               bound_levels(data["bounds"], data["cells"]).items()]
    seen: dict[str, str] = {}
    for chart in charts:
        colours = _bound_colours(chart)
        assert colours.pop("measured") == MEASURED_COLOUR
        assert MEASURED_COLOUR not in colours.values()
        for name, colour in colours.items():
            assert seen.setdefault(name, colour) == colour, name
        assert len(set(colours.values())) == len(colours), colours  # told apart in one
    assert {"pgbench", "backends", "walsender:b", "walsender:c", "machine",
            "b walreceiver", "c walreceiver"} <= set(seen)
