"""Experiments end to end on real clusters: stored figures agree with pgbench's own,
a killed run resumes, a failing cell is recorded and the run goes on."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from syncrep_lab.cluster.manifest import Manifest
from syncrep_lab.pg import sync_names
from syncrep_lab.plan.load import load_spec
from syncrep_lab.run.runner import start_run
from syncrep_lab.stats.histogram import LatencyHistogram

from .helpers import (
    cli,
    cli_here,
    descendants,
    machine_wide,
    mentioning,
    postmasters_in,
    run_cluster_dir,
    run_postmasters,
    still_alive,
)

SMALL = """\
name = "small"

[topology]
standbys = 1
sync = "b"

[workload]
clients = 2
duration = 2
warmup = 0

[matrix]
synchronous_commit = ["local", "on"]

[run]
repeats_min = 2
repeats_max = 2
"""


def _db(out: Path) -> sqlite3.Connection:
    db = sqlite3.connect(out / "syncrep-lab.sqlite")
    db.row_factory = sqlite3.Row
    return db


# No probe output is read below, only that the probed repeats are apart: the probes
# that take seconds to fold (stacks, scheduler) are left out, and the commit anatomy,
# which takes a repeat of its own (test_killed_run_resumes keeps it).
QUIET = SMALL + "\n[probes]\nflamegraphs = false\nsched = false\nanatomy = false\n"


def test_small_run_agrees_with_pgbench(workdir: Path) -> None:
    out = workdir / "run"
    spec = load_spec(QUIET)
    start_run(spec, QUIET, workdir, out)
    db = _db(out)
    cells = db.execute("select * from cells order by idx").fetchall()
    assert [c["status"] for c in cells] == ["done", "done"]
    assert [c["repeats"] for c in cells] == [2, 2]
    probed = db.execute("select cell_id, count(*) from repeats where probed = 1 "
                        "group by cell_id").fetchall()
    assert [p[1] for p in probed] == [1, 1]  # probes in repeats of their own
    assert {c["stop_reason"] for c in cells} <= {"ci", "max"}
    for rep in db.execute("select * from repeats").fetchall():
        stdout = (out / rep["stdout_path"]).read_text()
        # pgbench's own summary, read from its raw output
        count = int(re.search(r"actually processed: (\d+)", stdout).group(1))  # type: ignore[union-attr]
        tps = float(re.search(r"tps = ([\d.]+)", stdout).group(1))  # type: ignore[union-attr]
        avg = float(re.search(r"latency average = ([\d.]+) ms", stdout).group(1))  # type: ignore[union-attr]
        assert rep["transactions"] == count > 0
        assert rep["pgbench_transactions"] == count
        assert abs(rep["tps"] - tps) <= 1e-6 * tps
        # mean latency from the per-transaction logs vs pgbench's printed average
        assert abs(rep["lat_mean_ms"] - avg) <= 0.02 * avg + 0.002
        hist = LatencyHistogram.from_bytes(rep["histogram"])
        assert hist.count == count
        samples = db.execute("select count(*) from samples where repeat_id = ?",
                             (rep["id"],)).fetchone()[0]
        assert samples >= 1
        assert (out / rep["stderr_path"]).read_text().count("progress:") == samples
    machine = json.loads(db.execute("select machine_json from runs").fetchone()[0])
    assert machine["cpu_count"] == os.cpu_count()
    clusters = db.execute("select * from clusters").fetchall()
    assert len(clusters) == 1
    settings = json.loads(clusters[0]["settings_json"])
    assert settings["primary"]["synchronous_standby_names"]["setting"] == "FIRST 1 (b)"
    # the terminal's --json is the store
    res = cli_here("results", str(out), "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    for row, cell in zip(rows, cells, strict=True):
        assert row["tps_mean"] == cell["tps_mean"]
        assert row["lat_p99_ms"] == cell["lat_p99_ms"]
    res = cli_here("results", str(out), "--csv")
    assert res.stdout.splitlines()[0].startswith("synchronous_commit,idx,label")
    assert run_postmasters(workdir / "run") == []  # its clusters live in the state dir


@machine_wide
def test_killed_run_resumes(workdir: Path) -> None:
    """kill -9 during a probed repeat (perf stat, perf record on every CPU with its
    sleep, pgbench): pgbench and perf die with the tool, clean removes its servers,
    --resume completes the run without losing or repeating a stored repeat."""
    spec_file = workdir / "spec.toml"
    # the scheduler probe's perf record (on every CPU, with its sleep) is the one
    # killed; the stack probe's costs seconds of folding per probed repeat on top.
    # 2 s repeats: with 1 s, a suite beside a busy loop once saw no moment with perf,
    # its sleep and the probed repeat's pgbench all running, and the run ended unkilled
    spec_file.write_text(SMALL + "\n[probes]\nflamegraphs = false\n")
    out = workdir / "run"
    proc = subprocess.Popen([sys.executable, "-m", "syncrep_lab", "run", str(spec_file),
                             "--out", str(out)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while True:  # the first cell's probed repeat: perf and pgbench both running
        assert time.monotonic() < deadline, "no probed repeat started in time"
        assert proc.poll() is None, "the run ended before it could be killed"
        running = descendants(proc.pid)
        if (any(c.startswith("perf record") for c in running.values())
                and any(c.startswith("sleep") for c in running.values())
                and any("pgbench" in c and "repeat-03" in c for c in running.values())):
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    started_by_tool = {pid: cmd for pid, cmd in running.items()
                       if "postgres" not in cmd}  # pgbench, perf, perf's sleep
    assert any(c.startswith("sleep") for c in started_by_tool.values())
    deadline = time.monotonic() + 15
    while still_alive(started_by_tool) or mentioning(str(out)):
        assert time.monotonic() < deadline, (still_alive(started_by_tool),
                                             mentioning(str(out)))
        time.sleep(0.1)
    cluster = run_cluster_dir(out)
    assert postmasters_in(cluster)  # servers are left to clean, by design
    res = cli("clean")
    assert res.returncode == 0 and f"removed {cluster}" in res.stdout, res.stdout
    assert postmasters_in(cluster) == [] and not cluster.exists()
    assert still_alive(running) == []
    assert "nothing to clean" in cli("clean", "--list").stdout
    before = {(r["cell_id"], r["n"]): r["id"] for r in
              _db(out).execute("select * from repeats").fetchall()}
    assert len(before) >= 2
    res = cli("run", "--resume", "--out", str(out), timeout=300)
    assert res.returncode == 0, res.stderr
    db = _db(out)
    cells = db.execute("select * from cells order by idx").fetchall()
    assert [c["status"] for c in cells] == ["done"] * 2
    after = {(r["cell_id"], r["n"]): r["id"] for r in db.execute("select * from repeats")}
    # 2 measured + 1 probed + 1 commit anatomy per cell: nothing lost, none twice
    assert len(after) == 8
    assert db.execute("select count(*) from repeats where probed = 0").fetchone()[0] == 4
    assert db.execute("select count(*) from repeats where probed = 2").fetchone()[0] == 2
    assert all(after[k] == v for k, v in before.items())
    assert db.execute("select status from runs").fetchone()[0] == "done"
    assert run_postmasters(workdir / "run") == []  # its clusters live in the state dir


def test_failed_cell_is_recorded_and_the_run_goes_on(workdir: Path) -> None:
    text = QUIET.replace('synchronous_commit = ["local", "on"]', 'settings = ["huge", "default"]'
                         ).replace("duration = 2", "duration = 1")
    text += '\n[settings_sets.huge]\nshared_buffers = "900TB"\n'
    out = workdir / "run"
    start_run(load_spec(text), text, workdir, out)
    cells = _db(out).execute("select * from cells order by idx").fetchall()
    assert cells[0]["status"] == "failed"
    assert "exited during start-up" in cells[0]["error"]
    assert cells[1]["status"] == "done"
    assert cells[1]["tps_mean"] > 0
    res = cli_here("results", str(out))
    assert "failed" in res.stdout


ONE = """\
name = "one"

[topology]
standbys = 2

[workload]
clients = 2
duration = 1
warmup = 0

[run]
repeats_min = 1
repeats_max = 1

[probes]
# no test of this spec reads what the probes record
probed_repeats = 0
"""


def test_versions_and_sync_axes(workdir: Path, pg96: object) -> None:
    text = ONE + '\n[matrix]\npg = ["9.6", "18"]\nsync = ["1(b,c)", "FIRST 1 (c)"]\n'
    out = workdir / "run"
    start_run(load_spec(text), text, workdir, out)
    db = _db(out)
    cells = db.execute("select * from cells order by idx").fetchall()
    assert [c["status"] for c in cells] == ["done"] * 4, [c["error"] for c in cells]
    assert [json.loads(c["axes_json"])["pg"] for c in cells] == ["9.6", "9.6", "18", "18"]
    # both servers held up at once, their cells interleaved in shared rounds: each
    # cluster built once, in the order the first round's shuffle reached them
    clusters = {json.loads(r["cluster_key"])[0]: r for r in db.execute(
        "select cluster_key, version, settings_json from clusters")}
    assert set(clusters) == {"9.6", "18"}
    assert clusters["9.6"]["version"] == "9.6.24" and clusters["18"]["version"].startswith("18.")
    assert "2 clusters held up at once" in db.execute("select order_note from runs").fetchone()[0]
    assert {r[0] for r in db.execute("select round from repeats where probed = 0")} == {1}
    first = json.loads(clusters["9.6"]["settings_json"])
    # read back from the 9.6 server as it was built: for the cell that came first in
    # the first round (the rounds are shuffled), in 9.6's syntax
    opened = db.execute("select c.params_json from repeats r join cells c on c.id = r.cell_id "
                        "where json_extract(c.params_json, '$.pg') = '9.6' "
                        "order by r.started_at limit 1").fetchone()[0]
    built_with = sync_names.parse(json.loads(opened)["sync"])
    assert built_with is not None
    assert first["primary"]["synchronous_standby_names"]["setting"] == \
        built_with.render_for(90624)
    assert built_with.render_for(90624) in ("1 (b, c)", "1 (c)")
    assert all(c["tps_mean"] > 0 for c in cells)
    assert run_postmasters(workdir / "run") == []  # its clusters live in the state dir


def test_lookup_and_script_workloads(workdir: Path) -> None:
    text = ONE.replace("clients = 2", 'kind = "pk-lookup"\nrows = 5000\nclients = 2')
    out = workdir / "lookup"
    start_run(load_spec(text), text, workdir, out)
    cell = _db(out).execute("select * from cells").fetchone()
    assert cell["status"] == "done", cell["error"]
    assert cell["tps_mean"] > 0
    script_line = (out / "artifacts" / "cell-000" / "workload.sql").read_text()
    assert "random(1, 5000)" in script_line
    (workdir / "mine.sql").write_text("select count(*) from pg_class;\n")
    text = ONE.replace("clients = 2", 'kind = "script"\nscript = "mine.sql"\nclients = 2')
    out = workdir / "script"
    start_run(load_spec(text), text, workdir, out)
    cell = _db(out).execute("select * from cells").fetchone()
    assert cell["status"] == "done", cell["error"]


def test_attach_leaves_the_cluster_as_it_was(workdir: Path,
                                             make_cluster: Callable[..., Manifest]) -> None:
    from syncrep_lab.cluster.status import cluster_status

    manifest = make_cluster(dir=workdir / "theirs")
    primary = manifest.conninfo(manifest.primary)
    text = ONE + (f'\n[topology.attach]\nprimary = "{primary}"\nallow_alter = true\n'
                  '\n[matrix]\nsync = ["FIRST 1 (c)"]\n')
    text = text.replace("[topology]\nstandbys = 2\n", "[topology]\n")
    out = workdir / "run"
    start_run(load_spec(text), text, workdir, out)
    cell = _db(out).execute("select * from cells").fetchone()
    assert cell["status"] == "done", cell["error"]
    status = cluster_status(manifest)
    assert all(n["state"] == "running" for n in status["nodes"])
    states = {n["name"]: n.get("sync_state") for n in status["nodes"]}
    assert states == {"primary": None, "b": "sync", "c": "potential"}  # put back
    import psycopg

    with psycopg.connect(manifest.admin_conninfo(manifest.primary)) as conn:
        left = conn.execute("select to_regclass('test')").fetchone()
    assert left is not None and left[0] is None  # its own table, dropped


def test_preflight_refuses_what_is_not_here(workdir: Path, pg96: object) -> None:
    from syncrep_lab.errors import UserError

    text = ONE + '\n[matrix]\npg = ["11"]\n'
    with pytest.raises(UserError, match="PostgreSQL 11 is not installed"):
        start_run(load_spec(text), text, workdir, workdir / "r1")
    text = ONE + '\n[matrix]\npg = ["9.6"]\nsync = ["ANY 1 (b, c)"]\n'
    with pytest.raises(UserError, match="needs PostgreSQL 10"):
        start_run(load_spec(text), text, workdir, workdir / "r2")
    assert not (workdir / "r1").exists() and not (workdir / "r2").exists()


def test_a_run_checks_the_machine_once(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`run` checks the machine before its display starts and start_run does not check
    it again: on a spec with SSH hosts or an attached cluster every check reaches them.
    Counted through a step of check_machine that every built cluster's check takes.
    The same run is given its spec and its folder relative to the current directory,
    as `./run demo` does (the tool resolves both against its working directory, here
    the test's, in this process as in a child of it)."""
    from syncrep_lab.run import preflight as checks

    calls = []
    placement = checks._check_placement

    def counted(spec: Any) -> None:
        calls.append(spec.name)
        placement(spec)

    monkeypatch.setattr(checks, "_check_placement", counted)
    monkeypatch.chdir(workdir)
    (workdir / "one.toml").write_text(ONE.replace("standbys = 2", "standbys = 1"))
    res = cli_here("run", "one.toml", "--out", "runs/rel")
    assert res.returncode == 0, res.stderr
    assert calls == ["one"]
    cell = _db(workdir / "runs" / "rel").execute("select * from cells").fetchone()
    assert cell["status"] == "done", cell["error"]
    # its clusters live in the state dir
    assert run_postmasters(workdir / "runs" / "rel") == []
    res = cli_here("results")
    assert res.returncode == 2 and "no run found" in res.stderr  # only ./syncrep-runs is looked in
