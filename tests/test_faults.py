"""Faults as experiments, on real clusters: the sync standby killed, paused, replaced
by a reload, every standby lost; what the primary saw, what throughput did, and
whether every acknowledged commit was found on every node afterwards."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from syncrep_lab import procs
from syncrep_lab.analysis.faults import CellFaults, run_faults
from syncrep_lab.cluster.manifest import Manifest
from syncrep_lab.plan.load import load_spec
from syncrep_lab.plan.spec import SpecError
from syncrep_lab.report.data import report_data
from syncrep_lab.store import DB_NAME
from tests.browser import check_report_page

from .helpers import cli, cli_here, postmasters_in, run_postmasters

SPEC = """\
name = "faults"

[topology]
standbys = 2

[workload]
# the last event ends 3 s in (a standby back after 1.5 s); a second after it is enough
# for the repeat to see the recovery
clients = 4
duration = 4
warmup = 0

[matrix]
faults = ["kill-sync", "pause-sync", "switch", "lose-all", "none"]

[run]
repeats_min = 1
repeats_max = 1

[probes]
probed_repeats = 0

[faults.kill-sync]
events = [{ at = 1.5, action = "kill", target = "sync", for = 1.5 }]

[faults.pause-sync]
slow_commit_ms = 500
events = [{ at = 1.5, action = "pause", target = "sync", for = 1.5 }]

[faults.switch]
events = [{ at = 1.5, action = "set", name = "synchronous_standby_names", value = "c" }]

[faults.lose-all]
stall_seconds = 2
events = [{ at = 1, action = "stop", target = "b" }, { at = 1, action = "stop", target = "c" }]
"""


def _stopped_processes(under: Path) -> list[int]:
    """Servers of the cluster in ``under`` left in the stopped state (a paused standby
    never continued). Only that cluster's: another suite on the machine may pause its
    own standbys meanwhile."""
    return [pid for pid in postmasters_in(under)
            if (fields := procs.stat_fields(pid)) is not None and fields[procs.STATE] == "T"]


@pytest.fixture(scope="module")
def fault_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("faults")
    folder.chmod(0o755)
    spec = folder / "faults.toml"
    spec.write_text(SPEC)
    started = time.monotonic()
    res = cli("run", str(spec), "--out", str(folder / "run"), timeout=600)
    return {"res": res, "out": folder / "run", "seconds": time.monotonic() - started}


def _cell(cells: list[CellFaults], name: str) -> CellFaults:
    return next(c for c in cells if c.label == f"faults={name}")


def test_a_run_with_faults_ends_and_leaves_nothing(fault_run: dict[str, Any]) -> None:
    res = fault_run["res"]
    # One cell fails by design (no standby left): the run says so and exits 4.
    assert res.returncode == 4, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert fault_run["seconds"] < 300
    # no server of the run's clusters is left, stopped (a paused standby) or running
    assert run_postmasters(fault_run["out"]) == []
    cells = run_faults(fault_run["out"])
    assert [c.label for c in cells] == [f"faults={n}" for n in
                                           ("kill-sync", "pause-sync", "switch", "lose-all")]
    db = sqlite3.connect(fault_run["out"] / DB_NAME)
    try:
        status = dict(db.execute("select label, status from cells").fetchall())
    finally:
        db.close()
    # The cell after the failed one ran on a rebuilt cluster.
    assert status["faults=none"] == "done"


def test_killing_the_sync_standby_hands_over_to_the_potential_one(
        fault_run: dict[str, Any]) -> None:
    cell = _cell(run_faults(fault_run["out"]), "kill-sync")
    assert cell.status == "done"
    (repeat,) = cell.repeats
    (kill,) = repeat.events
    assert kill.record.node == "b" and kill.record.detail.startswith("kill")
    states = [(r.node, r.detail) for r in repeat.records if r.kind == "state"]
    # With '1(b,c)' the potential standby becomes sync once b's walsender is gone ...
    assert ("c", "potential -> sync") in states
    assert kill.effects.detect_s is not None and kill.effects.detect_s < 3.0
    # ... and b is started again: 1.5 s later within the repeat, or, on a machine too
    # slow for that, right after it; the cell only ends done once b streams as sync.
    started = [r for r in repeat.records if r.node in ("b", "-")
               and (r.detail == "start" or r.detail == "started b")]
    assert started, repeat.records
    assert kill.effects.tps_before and kill.effects.tps_before > 0
    # Every acknowledged row is on every node: pgbench's committed transactions are
    # the rows (batch 1), counted independently of the tool's own check.
    db = sqlite3.connect(fault_run["out"] / DB_NAME)
    try:
        acknowledged = db.execute(
            "select r.transactions from repeats r join cells c on c.id = r.cell_id "
            "where c.label = 'faults=kill-sync'").fetchone()[0]
    finally:
        db.close()
    by_node = {d.node: d for d in repeat.durability}
    assert set(by_node) == {"primary", "b", "c"}
    assert by_node["primary"].expected == acknowledged > 0
    assert all(d.ok and d.rows >= acknowledged for d in by_node.values())
    assert not cell.acknowledged_lost


def test_a_paused_sync_standby_stalls_commits(fault_run: dict[str, Any]) -> None:
    cell = _cell(run_faults(fault_run["out"]), "pause-sync")
    (repeat,) = cell.repeats
    (pause,) = (e.effects for e in repeat.events)
    # A stopped walreceiver still holds its connection: b stays 'sync', every commit
    # waits for it, and throughput all but stops until it is continued.
    assert pause.tps_before and pause.tps_during is not None
    assert pause.tps_during < 0.5 * pause.tps_before
    assert repeat.slow_commits > 0
    assert all(d.ok for d in repeat.durability)


def test_a_reload_moves_the_sync_role(fault_run: dict[str, Any]) -> None:
    cell = _cell(run_faults(fault_run["out"]), "switch")
    (repeat,) = cell.repeats
    states = [(r.node, r.detail) for r in repeat.records if r.kind == "state"]
    assert ("b", "sync -> async") in states and ("c", "potential -> sync") in states
    (event,) = repeat.events
    assert event.effects.detect_s is not None and event.effects.detect_s < 2.0


def test_no_standby_left_ends_the_cell_with_that_diagnosis(fault_run: dict[str, Any]) -> None:
    cell = _cell(run_faults(fault_run["out"]), "lose-all")
    assert cell.status == "failed"
    assert cell.error is not None
    assert cell.error.startswith("commits could not be acknowledged: no synchronous "
                                 "standby for 2 s")
    res = cli_here("results", str(fault_run["out"]))
    assert "commits could not be" in res.stdout


def test_faults_command_and_report(fault_run: dict[str, Any]) -> None:
    res = cli_here("faults", str(fault_run["out"]), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == [c.to_json() for c in run_faults(fault_run["out"])]
    text = cli_here("faults", str(fault_run["out"])).stdout
    assert "b: sync -> gone" in text and "rows found/expected" in text

    state = check_report_page(fault_run["out"] / "report.html", "faults")
    assert {"faults-0", "faults-1", "faults-2"} <= set(state["drawn"])
    assert "Every acknowledged commit was found" in state["text"]
    assert "commits could not be acknowledged" in state["text"]


def test_a_lost_commit_is_reported_loudly(fault_run: dict[str, Any], workdir: Path) -> None:
    """The presentation of a loss, on a copy of the real run with one node's count
    lowered (a real loss needs a failure this machine cannot produce on purpose)."""
    import shutil

    copy = workdir / "run"
    shutil.copytree(fault_run["out"], copy)
    db = sqlite3.connect(copy / DB_NAME)
    try:
        db.execute("update durability set rows = rows - 3, ok = 0, "
                   "detail = '3 rows the primary has are missing' where node = 'c' and "
                   "repeat_id = (select min(repeat_id) from durability)")
        db.commit()
    finally:
        db.close()
    res = cli_here("results", str(copy))
    assert "acknowledged commits were lost" in res.stdout
    res = cli_here("faults", str(copy))
    assert "ACKNOWLEDGED COMMITS LOST on c: 3 rows the primary has are missing" in res.stdout
    data = report_data(copy)
    assert any(c["acknowledged_lost"] for c in data["faults"])
    assert cli_here("report", str(copy)).returncode == 0
    assert "Acknowledged commits were lost" in (copy / "report.html").read_text()


@pytest.mark.parametrize(("toml", "message"), [
    ('[matrix]\nfaults = ["nope"]', "no fault scenario 'nope' (define [faults.nope])"),
    ('[matrix]\nfaults = ["k"]\n[faults.k]\nevents = [{ at = 1, action = "kill", target = "z" }]',
     "target 'z' is not a standby (standbys: b, c; or sync or potential)"),
    ('[faults.k]\nevents = [{ at = 1, action = "kill" }]', "kill needs a target"),
    ('[faults.k]\nevents = [{ at = 1, action = "set", name = "work_mem" }]',
     "set needs name and value"),
    ('[faults.k]\nevents = [{ at = 1, action = "start", target = "b", for = 2 }]',
     "'for' applies to stop, kill and pause, not start"),
    ('[faults.k]\nevents = [{ at = 1, action = "reboot", target = "b" }]', "action"),
    ('[faults.k]\nevents = []', "events"),
])
def test_bad_fault_scenarios_are_refused_with_their_line(toml: str, message: str) -> None:
    with pytest.raises(SpecError) as err:
        load_spec(f'name = "x"\n{toml}\n', "s.toml")
    assert message in err.value.cause
    assert "s.toml:" in err.value.cause


def test_a_standby_killed_twice_starts_again(cluster_dir: Path) -> None:
    """The second kill hits a postmaster this process spawned itself: it must be
    reaped, or the next postmaster takes the zombie for a live server and refuses
    to start (seen in a soak run before the fix)."""
    from syncrep_lab.cluster.build import UpOptions, up
    from syncrep_lab.cluster.ready import replication_rows
    from syncrep_lab.cluster.teardown import remove_cluster
    from syncrep_lab.run.faults import FaultContext, Standbys

    manifest = up(UpOptions(dir=cluster_dir, standbys=2))
    try:
        admin = manifest.admin_conninfo(manifest.primary)
        standbys = Standbys(FaultContext(manifest, admin, "on", "1(b,c)", 180000))
        for _ in range(3):
            standbys.kill("b")
            standbys.start("b", time.monotonic() + 60)
        deadline = time.monotonic() + 30
        while replication_rows(admin).get("b", {}).get("sync_state") != "sync":
            assert time.monotonic() < deadline, replication_rows(admin)
            time.sleep(0.1)
        standbys.pause("c")
        standbys.kill("c")  # continued first: its children must notice their parent died
        standbys.start("c", time.monotonic() + 60)
        assert not standbys.down and not standbys.paused
        assert _stopped_processes(cluster_dir) == []
    finally:
        remove_cluster(cluster_dir)
    assert postmasters_in(cluster_dir) == []


def test_the_fault_driver_gives_up_on_a_primary_that_stops_answering(
        make_cluster: Callable[..., Manifest]) -> None:
    """The driver's session on the primary lives as long as the repeat: each of its
    statements is bounded, so a primary that stops answering (here its backend frozen)
    ends the driver with that error instead of hanging it."""
    import os
    import signal

    import psycopg

    from syncrep_lab.plan.spec import FaultEvent, FaultScenario
    from syncrep_lab.run.faults import (
        QUERY_SECONDS,
        FaultContext,
        FaultDriver,
        Standbys,
    )

    manifest = make_cluster(standbys=0)
    admin = manifest.admin_conninfo(manifest.primary)
    ctx = FaultContext(manifest, admin, "on", "", 180000)
    scenario = FaultScenario(events=[FaultEvent(at=3600, action="pause", target="b")])
    driver = FaultDriver(scenario, ctx, Standbys(ctx))
    driver.start()
    frozen = None
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            deadline = time.monotonic() + 10
            while frozen is None:
                assert time.monotonic() < deadline, "the driver's session did not show"
                row = conn.execute("select pid from pg_stat_activity where pid <> "
                                   "pg_backend_pid() and query like '%pg_stat_replication%'"
                                   ).fetchone()
                frozen = int(row[0]) if row else None
                time.sleep(0.05)
        os.kill(frozen, signal.SIGSTOP)
        driver.join(timeout=QUERY_SECONDS + 10)
        assert not driver.is_alive()
        assert [(r.kind, r.node) for r in driver.records] == [("error", "primary")]
        assert "did not answer within" in driver.records[0].detail
    finally:
        if frozen is not None:
            os.kill(frozen, signal.SIGCONT)
        driver.stop()
