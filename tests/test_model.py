"""The bottleneck model: bounds and the knee against hand-computed examples, the USL fit
on synthetic data with noise, and `model` on the stored real runs (tests/data/runs)."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from syncrep_lab.analysis.anatomy import Anatomy, Component, PerCommit
from syncrep_lab.analysis.model import (
    Bound,
    CellModel,
    Interval,
    LittleBound,
    ReleaseBound,
    Traced,
    bounds,
    fit_usl,
    headline,
    run_model,
    usl,
    wait_bounds,
)
from syncrep_lab.json_form import JSON
from syncrep_lab.store import DB_NAME
from tests.data.runs.refresh import load

from .helpers import cli_here


def _point(v: float) -> Interval:
    return Interval(v, v, v)


def test_bounds_against_hand_computed_values() -> None:
    demands = {("primary", "walsender:b"): (_point(10.0), "untraced", 1.0),
               ("primary", "backend"): (_point(100.0), "untraced", 64.0),
               ("primary", "walwriter"): (_point(5.0), "untraced", 1.0)}
    found = {b.resource: b for b in bounds(demands, cpus=2, clients=64, threads=1,
                                           r1_ms=_point(1.0), r1_source="1-client cell")}
    assert found["walsender:b"].max_tps.mean == pytest.approx(100_000)  # 1 / 10 µs
    assert found["backends"].max_tps.mean == pytest.approx(20_000)  # min(64, 2) / 100 µs
    assert found["machine"].max_tps.mean == pytest.approx(2e6 / 115)  # 2 CPUs / 115 µs
    assert found["clients"].max_tps.mean == pytest.approx(64_000)  # 64 / 1 ms
    ordered = bounds(demands, cpus=2, clients=64, threads=1, r1_ms=_point(1.0),
                     r1_source="x")
    assert ordered[0].resource == "machine"  # 17,391 tps binds
    # on 64 cores the machine (64 / 115 µs) and the pool (64 / 100 µs) move, the
    # walsender does not: with clients fast enough (64 / 0.5 ms = 128k) it binds
    wide = bounds(demands, cpus=64, clients=64, threads=1, r1_ms=_point(0.5), r1_source="x")
    assert [b.resource for b in wide][:2] == ["walsender:b", "clients"]
    assert wide[0].max_tps.mean == pytest.approx(100_000)
    assert {b.resource: b.max_tps.mean for b in wide}["machine"] == pytest.approx(64e6 / 115)


def test_a_demand_s_interval_bounds_the_ceiling_the_other_way_round() -> None:
    demands = {("primary", "walsender:b"): (Interval(10.0, 8.0, 12.5), "untraced", 1.0)}
    b = next(x for x in bounds(demands, cpus=1, clients=1, threads=1, r1_ms=None,
                               r1_source="") if x.resource == "walsender:b")
    assert (b.max_tps.low, b.max_tps.mean, b.max_tps.high) == pytest.approx(
        (80_000, 100_000, 125_000))


def test_usl_fit_recovers_known_parameters_from_noisy_data() -> None:
    lam, sigma, kappa = 1000.0, 0.05, 0.0008
    rng = random.Random(11)
    samples = {float(n): [usl(n, lam, sigma, kappa) * (1 + rng.gauss(0, 0.03))
                          for _ in range(5)] for n in (1, 2, 4, 8, 16, 32, 64)}
    fit = fit_usl(samples, rounds=100)
    assert fit.to_json()["fit"] == "usl"
    for name, got, true, tolerance in (("lambda", fit.lam, lam, 0.05),
                                       ("sigma", fit.sigma, sigma, 0.4),
                                       ("kappa", fit.kappa, kappa, 0.25)):
        assert got is not None
        assert got.value == pytest.approx(true, rel=tolerance), (name, got)
        assert got.low <= got.value <= got.high and got.low < got.high
    true_peak = math.sqrt((1 - sigma) / kappa)  # 34.5 clients
    assert fit.peak_n is not None and fit.peak_n.value == pytest.approx(true_peak, rel=0.2)


def test_usl_needs_three_client_counts() -> None:
    fit = fit_usl({8.0: [100.0, 101.0], 16.0: [150.0, 149.0]})
    assert not fit.fitted and fit.reason is not None and "needs 3" in fit.reason
    assert fit.to_json() == {"fit": None, "reason": fit.reason}


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return load("pg18-local-on", tmp_path_factory.mktemp("model-runs"))


def _by_hand(folder: Path, idx: int) -> dict[tuple[str, str], float]:
    """µs per commit of each role of cell ``idx``, from the stored rows (perf's)."""
    db = sqlite3.connect(folder / DB_NAME)
    rows = db.execute(
        "select c.node, c.role, c.cpu_ms, r.transactions from costs c "
        "join repeats r on r.id = c.repeat_id join cells x on x.id = r.cell_id "
        "where x.idx = ?", (idx,)).fetchall()
    db.close()
    return {(node, role): 1000.0 * cpu_ms / n for node, role, cpu_ms, n in rows}


def test_model_on_a_stored_run_names_the_walsender_and_the_machine(stored: Path) -> None:
    cells = {c.idx: c for c in run_model(stored)}
    on = cells[1]
    assert on.label == "sc=on"
    by_hand = _by_hand(stored, 1)
    d = by_hand[("primary", "walsender:b")]
    walsender, machine = on.bound("walsender:b"), on.bound("machine")
    assert walsender is not None and walsender.demand_us is not None
    assert walsender.demand_us.mean == pytest.approx(d)
    assert walsender.max_tps.mean == pytest.approx(1e6 / d)
    # the machine: its 2 CPUs over the sum of every role's demand (perf where perf
    # counted the role, /proc for those it did not)
    assert machine is not None and machine.demand_us is not None
    assert machine.capacity == 2
    assert machine.demand_us.mean >= sum(by_hand.values()) - 1e-6
    assert machine.max_tps.mean == pytest.approx(2e6 / machine.demand_us.mean)
    assert on.binding == "machine"  # a 2-core machine: the CPUs bind first
    assert on.measured_tps is not None and on.measured_tps < machine.max_tps.high
    assert on.errors == ()
    assert on.serial and on.serial[0].role == "walsender:b"
    assert 0 < on.serial[0].serial_us_per_commit < d


def _copy(stored: Path, tmp_path: Path) -> Path:
    """A copy of the stored run a test may change."""
    folder = tmp_path / "run"
    shutil.copytree(stored, folder)
    return folder


def test_cpu_per_commit_comes_from_an_untraced_repeat_when_there_is_one(
        stored: Path, tmp_path: Path) -> None:
    folder = _copy(stored, tmp_path)
    db = sqlite3.connect(folder / DB_NAME)
    cell_id, = db.execute("select id from cells where idx = 1").fetchone()
    measured = db.execute("select id, transactions from repeats where cell_id = ? and "
                          "probed = 0", (cell_id,)).fetchall()
    # /proc figures of the measured repeats: 20 ms user + 10 ms system for walsender:b
    for repeat_id, _ in measured:
        db.execute("insert into proc_costs(repeat_id, node, role, processes, user_ms, "
                   "system_ms, voluntary_cs, involuntary_cs) values "
                   "(?, 'primary', 'walsender:b', 1, 20.0, 10.0, 0, 0)", (repeat_id,))
    db.commit()
    db.close()
    on = next(c for c in run_model(folder) if c.idx == 1)
    found = {b.resource: b for b in on.bounds}
    expected = [30_000.0 / n for _, n in measured]  # µs per commit, one per repeat
    walsender = found["walsender:b"]
    assert walsender.source == "untraced" and walsender.demand_us is not None
    assert walsender.demand_us.mean == pytest.approx(sum(expected) / len(expected))
    assert "untraced" in on.sources
    # every demand from the same measured repeats: a role the probed repeats alone
    # show (here every other, as this store's measured repeats had none) is left out
    assert {b.source for b in on.bounds if b.kind != "clients"} == {"untraced"}
    assert "backends" not in found


def test_model_command(stored: Path) -> None:
    res = cli_here("model", str(stored), "--json", "--cores", "64")
    assert res.returncode == 0, res.stderr
    cells = json.loads(res.stdout)
    on = next(c for c in cells if c["label"] == "sc=on")
    assert {"resource", "demand_us_per_commit", "max_tps", "low", "high"} <= set(
        on["bounds"][0])
    assert on["what_if"]["cores"] == 64 and on["what_if"]["binding"] != "machine"
    assert on["usl"]["fit"] is None and on["usl"]["reason"]
    text = cli_here("model", str(stored), "--cell", "1")
    assert text.returncode == 0 and "binds" in text.stdout and "walsender:b" in text.stdout
    bad = cli_here("model", str(stored), "--cell", "9")
    assert bad.returncode == 2 and "no finished cell 9" in bad.stderr and "fix:" in bad.stderr
    zero = cli_here("model", str(stored), "--cores", "0")
    assert zero.returncode == 2 and "--cores" in zero.stderr


def test_servers_confined_to_cores_have_a_bound_of_their_own() -> None:
    demands = {("primary", "backend"): (_point(100.0), "untraced", 8.0),
               ("client", "pgbench"): (_point(50.0), "untraced", 1.0)}
    whole = {b.resource: b for b in bounds(demands, cpus=2, clients=8, threads=1,
                                           r1_ms=None, r1_source="")}
    confined = {b.resource: b for b in bounds(demands, cpus=2, clients=8, threads=1,
                                              r1_ms=None, r1_source="", server_cores=1)}
    assert "servers' cores" not in whole
    assert whole["machine"].max_tps.mean == pytest.approx(2e6 / 150)  # pgbench shares
    assert confined["machine"].max_tps.mean == pytest.approx(2e6 / 150)
    assert confined["servers' cores"].max_tps.mean == pytest.approx(1e6 / 100)
    assert confined["backends"].max_tps.mean == pytest.approx(1e6 / 100)  # 1 core for 8
    assert confined["pgbench"].max_tps.mean == pytest.approx(1e6 / 50)  # unconfined


def test_one_quota_on_every_walsender_holds_them_together() -> None:
    """quota = {"walsender" = 0.05}: the primary's walsenders share one group: each is
    held to 0.05 CPU, and together they pass no more than 0.05 over their summed CPU per
    commit; at a level that waits for no standby, neither binds."""
    demands = {("primary", "walsender:b"): (_point(8.0), "untraced", 1.0),
               ("primary", "walsender:c"): (_point(2.0), "untraced", 1.0),
               ("primary", "backend"): (_point(100.0), "untraced", 64.0)}
    held = {("primary", "walsender"): 0.05}
    found = {b.resource: b for b in bounds(demands, cpus=2, clients=64, threads=1,
                                           r1_ms=None, r1_source="", quotas=held)}
    assert found["walsender:b"].max_tps.mean == pytest.approx(0.05e6 / 8.0)
    assert found["walsenders (one quota)"].max_tps.mean == pytest.approx(0.05e6 / 10.0)
    assert found["walsenders (one quota)"].capacity == pytest.approx(0.05)
    local = {b.resource for b in bounds(demands, cpus=2, clients=64, threads=1, r1_ms=None,
                                        r1_source="", quotas=held, waits_for_standbys=False)}
    assert not {"walsender:b", "walsenders (one quota)"} & local


def test_the_report_shows_what_the_reference_machine_s_cores_would_allow(
        stored: Path, tmp_path: Path) -> None:
    from syncrep_lab.report.data import report_data

    folder = _copy(stored, tmp_path)
    db = sqlite3.connect(folder / DB_NAME)
    spec, = db.execute("select spec_toml from runs").fetchone()
    db.execute("update runs set spec_toml = ?", (spec + '\n[reference]\nsource = "x"\n'
               'cores = 64\nfigures = [{ synchronous_commit = "on", tps = 70000 }]\n',))
    db.commit()
    db.close()
    seen: Any = report_data(folder)["seed_machine"]
    assert seen["cores"] == 64 and len(seen["rows"]) == 1
    row = seen["rows"][0]
    assert row["binding_here"] == "machine"  # 2 CPUs here
    assert row["binding"] != "machine"  # 64 cores: a process binds
    on = next(c for c in run_model(folder, cores=64) if c.idx == 1)
    assert on.what_if is not None and on.what_if.max_tps is not None
    assert row["max_tps"]["mean"] == pytest.approx(on.what_if.max_tps.mean)


def _part(name: str, us: float) -> Component:
    return Component(name, PerCommit(us, None, None), None, 0, None, None, None, ())


def _traced(*more: Component) -> Traced:
    """10 clients traced at 500 tps, 3 ms of local flush and 5 ms of commit wait per
    commit; walsender:b 125 µs per waiter freed, 0.8 waiters a commit (a fifth of the
    commits found their WAL confirmed and never queued): 100 µs a commit."""
    anatomy = Anatomy(1000, (_part("local_flush", 3000.0), _part("commit_wait", 5000.0),
                             _part("standby_wait", 4000.0), _part("wakeup_queue", 1000.0),
                             *more), (), None, None)
    return Traced(anatomy, 1, 500.0, 10, _point(8000.0),
                  _point(8000.0 * 500.0 / 10 / 1e6), "walsender:b", 2.0, 125.0, 100.0,
                  100.0 * 500.0 / 1e6)


def test_wait_bounds_carry_the_traced_shares_to_the_measured_pace() -> None:
    # traced: a client spends 8 ms of its 20 ms (10 clients / 500 tps) in the flush and
    # the wait, s = 0.4; the walsender releases 400 waiters/s at 125 µs: u = 0.05
    measured = Interval(1000.0, 900.0, 1100.0)
    found = {b.law: b for b in wait_bounds(_traced(), measured)}
    little, release = found["little"], found["release"]
    assert isinstance(little, LittleBound) and isinstance(release, ReleaseBound)
    assert little.kind == release.kind == "wait"
    assert (little.max_tps.low, little.max_tps.mean, little.max_tps.high) == pytest.approx(
        (900 / 0.4, 1000 / 0.4, 1100 / 0.4))  # X / s
    assert little.demand_us is not None
    assert little.demand_us.mean == pytest.approx(0.4 * 10 / 1000 * 1e6)  # R = s·N / X
    assert little.as_traced_tps == pytest.approx(10 / 8000e-6)  # costs' figure
    assert little.parts_us["local_flush"] == pytest.approx(3000 * 500 / 1000)
    assert (release.max_tps.low, release.max_tps.mean, release.max_tps.high) == pytest.approx(
        (900 / 0.05, 1000 / 0.05, 1100 / 0.05))  # X / u
    assert release.as_traced_tps == pytest.approx(1e6 / 100)
    # another machine's 64 clients: R as at 10 (4 ms), the release as here
    there = {b.law: b for b in wait_bounds(_traced(), measured, at_clients=64)}
    assert there["little"].max_tps.mean == pytest.approx(64 / 4000e-6)
    assert there["release"].max_tps.mean == pytest.approx(release.max_tps.mean)
    assert wait_bounds(_traced(), _point(0.0)) == []


def test_another_machine_leaves_this_ones_wait_for_a_core_here() -> None:
    """A bigger machine has the cores this one lacked: the 2 ms of the 8 a woken backend
    waited for one here (the run queue) are not carried there; the rest is."""
    traced = _traced(_part("run_queue", 2000.0))
    measured = Interval(1000.0, 900.0, 1100.0)
    here = {b.law: b for b in wait_bounds(traced, measured, at_clients=64)}["little"]
    there = {b.law: b for b in wait_bounds(traced, measured, at_clients=64,
                                           elsewhere=True)}["little"]
    # R as at 10 clients: 4 ms with it, 3 ms without (a quarter of the 8 traced dropped)
    assert here.max_tps.mean == pytest.approx(64 / 4000e-6)
    assert there.max_tps.mean == pytest.approx(64 / 3000e-6)
    assert there.dropped == ("run_queue",)
    assert "run_queue" not in there.carried
    assert "local_flush" in there.carried
    assert here.dropped == ()
    # the walsender's release: 50 µs a commit at the measured 1,000 tps; of it, 20 µs it
    # waited for a core (dropped there), never below its 10 µs of CPU in the release
    release = {b.law: b for b in wait_bounds(traced, measured, elsewhere=True,
                                             release_wait=(20.0, 10.0))}["release"]
    assert release.max_tps.mean == pytest.approx(1e6 / 30)
    assert release.dropped == ("walsender run delay",)
    floored = {b.law: b for b in wait_bounds(traced, measured, elsewhere=True,
                                             release_wait=(45.0, 10.0))}["release"]
    assert floored.max_tps.mean == pytest.approx(1e6 / 10)
    kept = {b.law: b for b in wait_bounds(traced, measured, release_wait=(20.0, 10.0))}
    assert kept["release"].max_tps.mean == pytest.approx(1e6 / 50)  # here: all of it


def test_the_headline_says_when_a_wait_bound_binds() -> None:
    measured = Interval(1000.0, 900.0, 1100.0)
    waits = tuple(wait_bounds(_traced(), measured))
    machine = Bound("machine", "machine", _point(500.0), 2.0, _point(4000.0), "untraced")
    model = CellModel(
        idx=0, label="", measured_tps=1000.0, cpus=2.0, clients=10, sources={},
        bounds=(machine,), wait_bounds=waits, wait_missing=None, binding="flush and wait",
        binding_kind="wait", next=None, beyond_cores="serial release", knee_clients=None,
        knee_from=None, serial=(), errors=(), what_if=None, missing=None)
    said = headline(model)
    assert said is not None and said.startswith(
        "here the commit's local flush and wait (Little's law: 10 clients, 4.00 ms each in "
        "the server) binds at ~2,500 tps, below every CPU bound (the lowest: machine at "
        "~4,000)")
    assert ("walsender:b's serial release (50.0 µs a commit under SyncRepLock) would bind "
            "at ~20k") in said
    said = headline(dataclasses.replace(model, binding="machine",
                                        beyond_cores="flush and wait"))
    assert said is not None and said.startswith("here the 2 CPUs bind at ~4,000 tps")


def test_a_run_without_an_anatomy_has_no_wait_bound(stored: Path) -> None:
    on = next(c for c in run_model(stored, cores=64) if c.idx == 1)
    assert on.wait_bounds == () and on.what_if is not None and on.what_if.wait_bounds == ()
    assert on.wait_missing is not None and "no commit anatomy" in on.wait_missing
    assert on.binding_kind == "machine"
    res = cli_here("model", str(stored), "--cores", "64")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert "no wait bounds: no commit anatomy" in res.stdout
    assert "flush and wait" not in res.stdout and "serial release" not in res.stdout
    cells = json.loads(cli_here("model", str(stored), "--json").stdout)
    assert all(c["wait_bounds"] == [] for c in cells)


def test_the_report_shows_the_wait_bounds_of_a_cell_that_has_them(stored: Path) -> None:
    """The wait-bound table, the dotted lines and the reference machine's column, from
    the stored run's data with a commit anatomy's bounds set in: one cell with both, one
    (a level that waits for no standby) with Little's law alone."""
    from syncrep_lab.report.charts import all_charts
    from syncrep_lab.report.data import report_data
    from syncrep_lab.report.html import render

    data = report_data(stored)
    found = wait_bounds(_traced(), Interval(1000.0, 900.0, 1100.0))
    waits: list[JSON] = [b.to_json() for b in found]
    local: JSON = {**found[0].to_json(), "parts_us": {"local_flush": 1500.0}}
    for m in data["bounds"]:
        m["wait_bounds"] = waits if m["label"] == "sc=on" else [local]
    page = render(data)
    assert page.count('id="wait-bounds"') == 1
    table = page[page.index('id="wait-bounds"'):]
    table = table[:table.index("</table>")]
    assert "2,500 (2,250 – 2,750)" in table and "20,000 (18,000 – 22,000)" in table
    assert table.count("<tr>") == 1 + len(data["bounds"])
    drawn: list[dict[str, Any]] = [
        t for c in all_charts(data).values() if c["id"].startswith("bounds-")
        for t in c["figure"]["data"] if t["name"] == "flush and wait (wait)"]
    assert drawn and all(t.get("line", {}).get("dash", "dot") == "dot" for t in drawn)


def test_a_held_cell_is_predicted_from_the_same_cell_without_its_quota(
        tmp_path: Path) -> None:
    """A placement's CPU quota q on the sync walsender: the held cell is predicted from
    the cell without the placement, q over the walsender's CPU per commit there."""
    from syncrep_lab.store import ProbeRows, ProcCostRow, QuotaRow, Store

    store = Store(tmp_path / "run", create=True)
    try:
        run_id = store.create_run("r", "", {"cpu_count": 2}, "1")
        cells = {}
        for idx, place, tps, level in ((0, "none", 10_000.0, "on"),
                                       (1, "held", 5_500.0, "on"),
                                       (2, "held", 9_000.0, "local"),
                                       (3, "group", 5_600.0, "on")):
            params = {"synchronous_commit": level, "clients": 64, "placement": place}
            cell = store.ensure_cell(run_id, idx, f"{place}-{level}", f"place={place}",
                                     {"placement": place}, params)
            for n in (1, 2, 3):
                done = int(tps * 5)
                rows = ProbeRows(proc_costs=[
                    # 8 µs of CPU a commit: 6 in user space, 2 in the kernel
                    ProcCostRow("primary", "walsender:b", 1, 6e-3 * done, 2e-3 * done, 0, 0)])
                if place != "none":  # "group": quota = {"walsender" = 0.05}
                    held_role = "walsender:b" if place == "held" else "walsender"
                    rows.quotas = [QuotaRow(1, "primary", held_role, 0.05, 1000, 20_000,
                                            1, 250, 245, 3000.0, 5.0)]
                store.add_repeat(cell.id, {"n": n, "started_at": "t", "duration_s": 5.0,
                                           "transactions": done, "failed": 0, "tps": tps,
                                           "histogram": b""}, [], rows)
            store.update_cell(cell.id, status="done", tps_mean=tps, repeats=3)
            cells[f"{place}-{level}"] = idx
    finally:
        store.close()
    models = {m.idx: m for m in run_model(tmp_path / "run", fits=False)}
    held = models[cells["held-on"]].held_from
    assert held is not None and held.cell == cells["none-on"], held
    assert held.unheld_us_per_commit == pytest.approx(8.0)
    assert held.predicted_tps == pytest.approx(0.05 * 1e6 / 8.0)  # 6,250
    assert held.ratio == pytest.approx(5_500 / 6_250)
    assert models[cells["none-on"]].held_from is None
    # one quota on every walsender: the same prediction, from their summed CPU
    group = models[cells["group-on"]].held_from
    assert group is not None and group.role == "walsender"
    assert group.predicted_tps == pytest.approx(0.05 * 1e6 / 8.0)
    assert models[cells["group-on"]].binding == "walsender:b"
    # and here the held walsender binds, at its quota's CPUs over its own demand
    assert models[cells["held-on"]].binding == "walsender:b"
    # at local no commit waits for it: it paces nothing, and nothing is predicted
    local = models[cells["held-local"]]
    assert local.held_from is None
    assert local.bound("walsender:b") is None, local.bounds
