"""Interleaved rounds on real servers: the stored repeats of `local` and `on` alternate in
time in the stored shuffled order, every cell's ratio to its baseline comes from pairs
of the same round, measured repeats carry each role's CPU and what the scheduler did to
it, and a checkpoint forced during a repeat flags that repeat."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from syncrep_lab.cluster.manifest import Manifest
from syncrep_lab.errors import UserError
from syncrep_lab.plan.load import load_spec
from syncrep_lab.plan.spec import ResetMode
from syncrep_lab.run.rounds import round_order
from syncrep_lab.run.runner import start_run
from syncrep_lab.store import cluster_key_text

from .helpers import cli, cli_here, descendants

SPEC = """\
name = "interleaved"

[topology]
standbys = 1
sync = "b"

[workload]
clients = 2
duration = 1
warmup = 0

[matrix]
synchronous_commit = ["local", "on"]

[run]
repeats_min = 3
repeats_max = 3
seed = 42

[probes]
probed_repeats = 0
"""


def _db(out: Path) -> sqlite3.Connection:
    db = sqlite3.connect(out / "syncrep-lab.sqlite")
    db.row_factory = sqlite3.Row
    return db


def test_local_and_on_alternate_in_the_stored_order(workdir: Path) -> None:
    out = workdir / "run"
    # 4 rounds: the fewest a correlation over a cell's repeats is worked out from
    text = SPEC.replace("repeats_min = 3\nrepeats_max = 3", "repeats_min = 4\nrepeats_max = 4")
    start_run(load_spec(text), text, workdir, out)
    db = _db(out)
    run = db.execute("select * from runs").fetchone()
    assert run["seed"] == 42 and run["order_mode"] == "interleaved"
    cells = db.execute("select * from cells order by idx").fetchall()
    assert [c["status"] for c in cells] == ["done", "done"], [c["error"] for c in cells]
    reps = db.execute("select r.*, c.idx from repeats r join cells c on c.id = r.cell_id "
                      "order by r.started_at").fetchall()
    assert [r["round"] for r in reps] == [1, 1, 2, 2, 3, 3, 4, 4]  # one of each per round
    group = cluster_key_text(json.loads(cells[0]["params_json"]))
    for k in (1, 2, 3, 4):
        in_round = [r for r in reps if r["round"] == k]
        assert [r["idx"] for r in in_round] == round_order(42, group, k, [0, 1])
        assert [r["position"] for r in in_round] == [0, 1]
    res = cli_here("results", str(out), "--json")
    assert res.returncode == 0, res.stderr
    rows = {r["label"]: r for r in json.loads(res.stdout)}
    assert rows["sc=local"]["ratio_to_baseline"] is None  # the baseline itself
    ratio = rows["sc=on"]["ratio_to_baseline"]
    assert ratio["baseline"] == "sc=local" and ratio["rounds"] == 4
    assert ratio["low"] <= ratio["mean"] <= ratio["high"]
    # measured repeats carry CPU per role from /proc, nothing traced, pgbench's included
    untraced = db.execute("select pc.node, pc.role, pc.user_ms + pc.system_ms as ms "
                          "from proc_costs pc join repeats r on r.id = pc.repeat_id "
                          "where r.probed = 0").fetchall()
    roles = {(u["node"], u["role"]) for u in untraced}
    assert {("primary", "walsender:b"), ("primary", "backend"), ("b", "walreceiver"),
            ("client", "pgbench")} <= roles, roles
    assert sum(u["ms"] for u in untraced if u["role"] == "pgbench") > 0
    # and what the scheduler did to each server process: time runnable waiting for a
    # core (within the repeat's seconds) and moves between CPUs, where the kernel tells
    sched = db.execute("select pc.node, pc.role, pc.run_delay_ms, pc.migrations, "
                       "r.duration_s from proc_costs pc join repeats r on r.id = "
                       "pc.repeat_id where r.probed = 0 and pc.node <> 'client'").fetchall()
    senders = [s for s in sched if s["role"] == "walsender:b"]
    assert len(senders) == 8, [tuple(s) for s in sched]
    for s in senders:
        assert 0 <= s["run_delay_ms"] < 1000 * s["duration_s"], tuple(s)
        if Path("/proc/self/sched").exists():
            assert s["migrations"] is not None and s["migrations"] >= 0, tuple(s)
        else:
            assert s["migrations"] is None
    assert all(s["run_delay_ms"] is not None and s["run_delay_ms"] >= 0 for s in sched)
    assert sum(s["run_delay_ms"] for s in sched if s["role"] == "backend") > 0
    assert all(u["run_delay_ms"] is None for u in db.execute(
        "select run_delay_ms from proc_costs where node = 'client'"))
    # the sync walsender ('b', the topology's sync names) over each cell's 4 repeats; the
    # local cell's commits wait for no standby
    assert rows["sc=local"]["noise"]["walsender"] is None
    ws = rows["sc=on"]["noise"]["walsender"]
    assert (ws["role"], ws["chosen_by"], ws["repeats"]) == (
        "walsender:b", "synchronous_standby_names", 4)
    assert all(0 <= x < 1 for x in ws["run_delay_share"]["per_repeat"])
    assert ws["r"] is None or (-1 <= ws["r"] <= 1 and abs(ws["r2"] - ws["r"] ** 2) < 1e-12
                               and 0 <= ws["p"] <= 1)
    model = cli_here("model", str(out), "--json")
    assert model.returncode == 0, model.stderr
    on = next(c for c in json.loads(model.stdout) if c["label"] == "sc=on")
    assert set(on["sources"]) == {"untraced"}
    assert any(b["resource"] == "walsender:b" for b in on["bounds"])
    assert any(b["resource"] == "pgbench" for b in on["bounds"])
    tps = {k: [r["tps"] for r in reps if r["idx"] == i] for i, k in ((0, "l"), (1, "o"))}
    by_hand = [o / loc for o, loc in zip(tps["o"], tps["l"], strict=True)]
    assert min(by_hand) <= ratio["mean"] <= max(by_hand)


def test_a_checkpoint_during_a_repeat_flags_it(workdir: Path) -> None:
    from syncrep_lab.cluster.build import UpOptions, up
    from syncrep_lab.cluster.teardown import remove_cluster

    manifest = up(UpOptions(dir=workdir / "theirs", standbys=1, sync="b"))
    admin = manifest.admin_conninfo(manifest.primary)
    forced: list[float] = []
    stop = threading.Event()

    def force_one() -> None:
        """One CHECKPOINT, a moment after the first repeat's pgbench started."""
        with psycopg.connect(admin, autocommit=True) as conn:
            while not stop.is_set():
                row = conn.execute("select count(*) from pg_stat_activity where "
                                   "application_name like 'syncrep-lab % pgbench' "
                                   "and state <> 'idle'").fetchone()
                if row is not None and int(row[0]) > 0:
                    time.sleep(0.5)
                    conn.execute("checkpoint")
                    forced.append(time.monotonic())
                    return
                time.sleep(0.02)

    text = (SPEC.replace("[topology]\nstandbys = 1\nsync = \"b\"\n", "[topology]\n")
            .replace("duration = 1", "duration = 3")
            .replace('["local", "on"]', '["on"]')
            + f'\n[topology.attach]\nprimary = "{manifest.conninfo(manifest.primary)}"\n')
    thread = threading.Thread(target=force_one, daemon=True)
    try:
        thread.start()
        start_run(load_spec(text), text, workdir, workdir / "run")
    finally:
        stop.set()
        thread.join(timeout=10)
        remove_cluster(manifest.dir)
    assert forced, "no checkpoint was forced"
    db = _db(workdir / "run")
    reps = db.execute("select * from repeats order by n").fetchall()
    flagged = [r["n"] for r in reps if r["disturbed"]]
    assert len(flagged) == 1 and reps[flagged[0] - 1]["checkpoints"] >= 1, [
        (r["n"], r["checkpoints"], r["disturbed"]) for r in reps]
    assert all(r["checkpoints"] == 0 for r in reps if r["n"] not in flagged)
    notes = json.loads(db.execute("select notes_json from cells").fetchone()[0])
    assert any("disturbed" in n and "checkpoint" in n for n in notes), notes


def test_other_load_on_the_machine_flags_the_repeat(workdir: Path) -> None:
    """A process that is not the tool's, a server's or pgbench's burns a CPU during the
    first repeat: that repeat says how much of the machine others took."""
    import subprocess
    import sys

    burned: list[float] = []
    stop = threading.Event()

    def pgbench_running() -> bool:
        # this run's pgbench only (the run is in this process): another test worker's
        # would start the burner before this repeat and leave little of it inside
        return any(os.path.basename(cmd.split(" ", 1)[0]) == "pgbench"
                   for cmd in descendants(os.getpid()).values())

    def burn_once() -> None:
        while not stop.is_set():
            if pgbench_running():
                # setsid -f: the burners are nobody's children here (a child of this
                # process would count as the tool's own, as pgbench does); one per CPU,
                # so that what they get stays over the flag beside other load
                for _ in range(os.cpu_count() or 1):
                    subprocess.run(["setsid", "-f", sys.executable, "-c",
                                    "import time\nend = time.time() + 2\n"
                                    "while time.time() < end: pass"], check=True)
                burned.append(time.monotonic())
                time.sleep(2)
                return
            time.sleep(0.02)

    text = SPEC.replace("duration = 1", "duration = 3").replace('["local", "on"]', '["on"]')
    text = text.replace("repeats_min = 3\nrepeats_max = 3", "repeats_min = 2\nrepeats_max = 2")
    thread = threading.Thread(target=burn_once, daemon=True)
    thread.start()
    try:
        start_run(load_spec(text), text, workdir, workdir / "run")
    finally:
        stop.set()
        thread.join(timeout=10)
    assert burned, "nothing was burned"
    first = _db(workdir / "run").execute("select * from repeats order by n").fetchone()
    assert first["other_cpu"] is not None and first["other_cpu"] >= 0.25, dict(first)
    assert "other processes took" in first["disturbed"]


def test_a_budget_the_floor_cannot_fit_is_refused_before_anything_starts(
        workdir: Path) -> None:
    """A budget of one second: the rounds never stop below two, so the run could not
    keep it. Refused with the time the run needs and what shortens it, nothing made
    (it once ran the floor anyway and overran a 2 min budget by 2 min 20 s)."""
    text = SPEC.replace("seed = 42\n", 'seed = 42\nbudget = "1s"\n')
    out = workdir / "refused"
    with pytest.raises(UserError) as refused:
        start_run(load_spec(text), text, workdir, out)
    said = str(refused.value)
    assert "cannot hold this run" in said and "4 measured repeats (2 rounds)" in said, said
    assert "give --budget 10s or more" in said, said
    assert not out.exists()


def test_the_budget_ends_both_orders_after_two_rounds(workdir: Path) -> None:
    """A budget spent before the rounds begin (as a build can spend it: the command's
    start moved back by the whole budget): no new round (or repeat) once spent, but
    never fewer than 2, the fewest that give an interval; the cells say the budget
    stopped them."""
    for order in ("interleaved", "blocked"):
        text = SPEC.replace("repeats_max = 3\nseed = 42\n",
                            f'repeats_max = 6\nseed = 42\norder = "{order}"\nbudget = "60s"\n')
        assert f'order = "{order}"' in text
        out = workdir / order
        start_run(load_spec(text), text, workdir, out, started=time.monotonic() - 60)
        cells = _db(out).execute("select * from cells order by idx").fetchall()
        assert [(c["status"], c["repeats"], c["stop_reason"]) for c in cells] == [
            ("done", 2, "budget"), ("done", 2, "budget")], (order, [dict(c) for c in cells])


def test_the_budget_bounds_the_whole_command(workdir: Path) -> None:
    """A budget of 30 s for a run that would go on (a target it cannot meet) and has
    probed repeats to run after its rounds: the rounds stop early enough for the
    cluster's start, the probed repeats and the report to fit, and the command ends
    within the budget and 5 s (17.2 s here; 37.6 s when the budget bounded the rounds
    alone)."""
    text = SPEC.replace("repeats_min = 3\nrepeats_max = 3\nseed = 42\n",
                        'repeats_min = 2\nrepeats_max = 50\nci_target = 0.0001\nseed = 42\n'
                        'budget = "30s"\n').replace(
        "probed_repeats = 0\n",
        "probed_repeats = 1\nflamegraphs = false\nsched = false\nanatomy = false\n")
    assert 'budget = "30s"' in text and "probed_repeats = 1" in text
    spec = workdir / "spec.toml"
    spec.write_text(text)
    out = workdir / "run"
    started = time.monotonic()
    res = cli("run", str(spec), "--out", str(out), timeout=300)
    took = time.monotonic() - started
    assert res.returncode == 0, res.stdout + res.stderr
    cells = _db(out).execute("select * from cells order by idx").fetchall()
    assert [(c["status"], c["stop_reason"]) for c in cells] == [("done", "budget")] * 2
    assert all(c["repeats"] >= 3 for c in cells), [dict(c) for c in cells]  # not the floor
    probed = _db(out).execute("select count(*) from repeats where probed > 0").fetchone()[0]
    assert probed == 2  # 1 a cell
    assert took <= 30 + 5, f"{took:.0f} s for a 30 s budget"


def test_the_reset_modes_do_what_they_say(make_cluster: Callable[..., Manifest]) -> None:
    """run.reset: "none" keeps the table as the repeat left it, "no-checkpoint" empties it
    without a checkpoint, "full" empties it and checkpoints the primary and the standby
    (a restartpoint there); every mode waits for the standby."""
    from syncrep_lab.run import reset

    manifest = make_cluster(standbys=1, sync="b")
    admin = manifest.admin_conninfo(manifest.primary)
    standby = manifest.admin_conninfo(manifest.node("b"))

    def requested(conninfo: str, column: str) -> int:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            row = conn.execute(f"select {column} from pg_stat_checkpointer").fetchone()
            assert row is not None
            return int(row[0])

    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("create table t (id bigint generated always as identity, v int)")

        def left_after(mode: ResetMode) -> tuple[int, int, int]:
            """Rows left and checkpoints requested on the primary and the standby."""
            conn.execute("insert into t (v) select g from generate_series(1, 100) g")
            before = requested(admin, "num_requested"), requested(standby, "restartpoints_req")
            done = reset.reset(admin, [standby], "t", conn.info.server_version, mode)
            assert done.behind is False and done.notes == []
            row = conn.execute("select count(*) from t").fetchone()
            assert row is not None
            return (int(row[0]), requested(admin, "num_requested") - before[0],
                    requested(standby, "restartpoints_req") - before[1])

        assert left_after("none") == (100, 0, 0)
        assert left_after("no-checkpoint") == (0, 0, 0)
        assert left_after("full") == (0, 1, 1)
        # the identity starts again where the table was emptied
        row = conn.execute("insert into t (v) values (1) returning id").fetchone()
        assert row is not None and row[0] == 1
