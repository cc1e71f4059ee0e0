"""``syncrep-lab observe`` on clusters built by the tool, with a pgbench the test starts
itself beside it (observe starts no load): the figures it reads from the servers against
pgbench's own, the SyncRep share under on and local, the walsender's CPU per commit
against a run's ``costs`` of the same cell, and what a production DBA needs to trust it
with: a role without pg_monitor refused, a primary that stops mid-window, nothing changed
on the server."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from syncrep_lab.cluster.manifest import load
from syncrep_lab.pg.installations import Installation

from .helpers import cli, cli_here, shared_tmp

WORKLOAD = "insert into obs_rows(v) values (1);\n"


def _up(where: Path, standbys: int) -> str:
    res = cli("cluster", "up", "--pg", "18", "--standbys", str(standbys), "--dir", str(where))
    assert res.returncode == 0, res.stdout + res.stderr
    manifest = load(where)
    assert manifest is not None
    conninfo = manifest.conninfo(manifest.primary)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("create table if not exists obs_rows(id bigserial, v int)")
    return conninfo


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Path, str]]:
    root = shared_tmp("srl-obs-")
    where = root / "c"
    conninfo = _up(where, 2)
    yield where, conninfo
    cli("cluster", "down", "--dir", str(where))
    shutil.rmtree(root, ignore_errors=True)


def _pgbench(pg18: Installation, conninfo: str, seconds: int, script: Path,
             level: str = "on", clients: int = 4) -> subprocess.Popen[str]:
    script.write_text(WORKLOAD)
    return subprocess.Popen(
        [str(pg18.program("pgbench")), "-n", "-c", str(clients), "-j", "2", "-T", str(seconds),
         "-P", "1", "--progress-timestamp", "-f", str(script), conninfo],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PGOPTIONS": f"-c synchronous_commit={level}"})


def _ended(bench: subprocess.Popen[str]) -> str:
    """pgbench's output so far, ended now: its -T only has to outlast the window, and the
    seconds after it are nobody's (its progress lines are written as they come)."""
    bench.terminate()
    return bench.communicate(timeout=60)[0]


def _progress(text: str, start: float, end: float) -> float:
    """pgbench's mean TPS over the seconds that ended within [start, end] (epoch)."""
    rates = [float(line.split()[3]) for line in text.splitlines()
             if line.startswith("progress:") and start + 1 <= float(line.split()[1]) <= end]
    assert rates, text
    return sum(rates) / len(rates)


def _observe(*args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess[str],
                                                       float, float]:
    began = time.time()
    res = cli("observe", *args, timeout=timeout)
    return res, began, time.time()


def _server_state(conninfo: str) -> tuple[object, ...]:
    """Settings, catalogs and sessions: what observe must leave as it found them."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        settings = conn.execute("select name, setting from pg_settings order by 1").fetchall()
        catalog = conn.execute(
            "select count(*), sum(hashtext(relname || relnamespace::text)) from pg_class"
        ).fetchone()
        roles = conn.execute("select rolname from pg_roles order by 1").fetchall()
        theirs = conn.execute("select count(*) from pg_stat_activity where application_name "
                              "= 'syncrep-lab observe'").fetchone()
    return settings, catalog, roles, theirs


def test_observe_reads_the_load_it_did_not_start(
        cluster: tuple[Path, str], pg18: Installation, tmp_path: Path) -> None:
    where, conninfo = cluster
    before = _server_state(conninfo)
    out = tmp_path / "obs"
    bench = _pgbench(pg18, conninfo, 12, tmp_path / "w.sql")
    time.sleep(2)
    res, began, ended = _observe("--dir", str(where), "--seconds", "6", "--slice", "3",
                                 "--out", str(out), "--label", "on", "--json")
    text = _ended(bench)
    assert res.returncode == 0, res.stdout + res.stderr
    window = json.loads(res.stdout)["windows"][0]
    pgbench_tps = _progress(text, began, ended)
    # the commit rate it read from the server is pgbench's, within 10 %
    assert abs(window["writes_per_s"] / pgbench_tps - 1) < 0.10, (window["writes_per_s"],
                                                                  pgbench_tps)
    assert window["sync_wait_share"] > 0.05, window["backend_waits"]
    assert window["slices"] == 2
    sync = [w for w in window["walsenders"] if w["standby"] == "b"]
    assert sync and sync[0]["cpu_us_per_commit"]["mean"] > 0
    assert sync[0]["max_tps"] > window["writes_per_s"]
    assert window["own"]["cpu_share_of_core"] is not None
    assert 0 < window["own"]["cpu_share_of_core"] < 0.2
    assert {r["standby"] for r in window["replication"]} == {"b", "c"}
    assert any(v["mechanism"] == "headroom" for v in window["verdicts"])
    # nothing changed on the server, and the observer's session is gone
    assert _server_state(conninfo) == before

    # another window: synchronous_commit = local in pgbench's sessions
    bench = _pgbench(pg18, conninfo, 8, tmp_path / "w.sql", level="local")
    time.sleep(2)
    res, _, _ = _observe("--dir", str(where), "--seconds", "3", "--slice", "3",
                         "--out", str(tmp_path / "local"), "--label", "local", "--json")
    _ended(bench)
    assert res.returncode == 0, res.stdout + res.stderr
    local = json.loads(res.stdout)["windows"][0]
    assert local["sync_wait_share"] < 0.02, local["backend_waits"]
    assert any(v["mechanism"] == "not synchronous replication" for v in local["verdicts"])
    compared = cli_here("compare", str(out), str(tmp_path / "local"), "--json")
    assert compared.returncode == 0, compared.stderr
    pairs = json.loads(compared.stdout)["pairs"]
    assert len(pairs) == 1 and pairs[0]["figures"][0]["figure"] == "TPS"
    assert pairs[0]["figures"][0]["ratio"] is not None

    # an observe folder given again gets the next window; stored like a run, every
    # reader reads it
    res, _, _ = _observe("--dir", str(where), "--seconds", "2", "--slice", "1",
                         "--out", str(out), "--label", "idle", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    idle = json.loads(res.stdout)["windows"][0]
    assert idle["idx"] == 2 and idle["label"] == "idle"
    assert any(v["mechanism"] in ("no writes", "light load") for v in idle["verdicts"])
    diag = cli_here("diagnose", str(out), "--json")
    assert diag.returncode == 0, diag.stderr
    assert [c["idx"] for c in json.loads(diag.stdout)] == [1, 2]
    results = cli_here("results", str(out), "--json")
    assert results.returncode == 0 and len(json.loads(results.stdout)) == 2
    report = cli_here("report", str(out))
    assert report.returncode == 0, report.stderr
    page = (out / "report.html").read_text()
    assert "Observed, not loaded" in page and "default_transaction_read_only" not in page


def test_walsender_cost_within_a_runs_costs(
        cluster: tuple[Path, str], pg18: Installation, tmp_path: Path) -> None:
    """The same cell measured by a run (its own cluster, built alike) and watched by
    observe: the sync walsender's CPU per commit agrees."""
    spec = tmp_path / "spec.toml"
    spec.write_text('name = "obs-cost"\n[topology]\npg = "18"\nstandbys = 2\n'
                    'sync = "1(b,c)"\n[workload]\nkind = "insert"\nclients = 4\nthreads = 2\n'
                    'duration = 3\nwarmup = 1\n[run]\nrepeats_min = 3\nrepeats_max = 3\n'
                    '[probes]\nprobed_repeats = 0\n')
    run = cli("run", str(spec), "--out", str(tmp_path / "run"), timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    costs = json.loads(cli_here("costs", str(tmp_path / "run"), "--json").stdout)[0]
    ran = next(r for r in costs["roles"]
               if r["node"] == "primary" and r["role"] == "walsender:b")
    where, conninfo = cluster
    bench = _pgbench(pg18, conninfo, 10, tmp_path / "w.sql")
    time.sleep(2)
    res, _, _ = _observe("--dir", str(where), "--seconds", "6", "--slice", "2",
                         "--out", str(tmp_path / "obs"), "--json")
    _ended(bench)
    assert res.returncode == 0, res.stdout + res.stderr
    seen = next(w for w in json.loads(res.stdout)["windows"][0]["walsenders"]
                if w["standby"] == "b")["cpu_us_per_commit"]
    low, high = ran["cpu_us_per_commit"]["low"], ran["cpu_us_per_commit"]["high"]
    # The two agree: their intervals overlap, or their means are within a quarter of each
    # other. Each interval holds its own window's noise only, not the state of the machine
    # the two windows met a minute apart (seen apart by 0.3 µs on 27 and 35 µs, with the
    # rest of the suite on both cores: the between-session part docs/decisions.md names).
    overlap = seen["low"] <= high and low <= seen["high"]
    close = abs(seen["mean"] / ran["cpu_us_per_commit"]["mean"] - 1) < 0.25
    assert overlap or close, (seen, ran["cpu_us_per_commit"])


def test_a_role_without_pg_monitor_is_refused(cluster: tuple[Path, str],
                                              tmp_path: Path) -> None:
    _, conninfo = cluster
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("drop role if exists obs_nobody")
        conn.execute("create role obs_nobody login")
    res, _, _ = _observe(conninfo.replace("user=postgres", "user=obs_nobody"),
                         "--seconds", "5", "--out", str(tmp_path / "o"))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "neither a superuser nor a member of pg_monitor" in res.stderr
    assert "grant pg_monitor to obs_nobody;" in res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "o").exists()


def test_a_primary_that_stops_ends_the_window_with_what_was_gathered(
        pg18: Installation, workdir: Path, tmp_path: Path) -> None:
    where = workdir / "c"
    conninfo = _up(where, 0)
    out = tmp_path / "obs"
    try:
        bench = _pgbench(pg18, conninfo, 30, tmp_path / "w.sql")
        proc = subprocess.Popen(
            [sys.executable, "-m", "syncrep_lab", "observe", conninfo, "--seconds", "60",
             "--slice", "2", "--out", str(out), "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(6)
        stopped = time.monotonic()
        down = cli("cluster", "down", "--dir", str(where), "--keep-data")
        assert down.returncode == 0, down.stderr
        stdout, stderr = proc.communicate(timeout=30)
        assert time.monotonic() - stopped < 20
        bench.kill()
        bench.communicate()
    finally:
        cli("cluster", "down", "--dir", str(where))
    assert proc.returncode == 3, stdout + stderr
    done = json.loads(stdout)
    assert done["ended"].startswith("the primary stopped answering")
    window = done["windows"][0]
    assert window["slices"] >= 2 and window["writes_per_s"] > 0
    assert any("ended early" in n for n in window["notes"])


@pytest.mark.parametrize(("args", "said"), [
    (["--seconds", "0"], "--seconds 0 is out of range"),
    (["--hz", "500"], "--hz 500 is out of range"),
    (["--standby", "nonsense"], "is not NAME=CONNINFO"),
    (["--host", "db1"], "--host db1 needs the file that describes it"),
    (["--standby", "primary=host=x"], "that name is taken"),
])
def test_bad_input_is_refused_before_connecting(args: list[str], said: str,
                                                tmp_path: Path) -> None:
    res = cli_here("observe", "host=/nonexistent port=1 dbname=postgres", *args,
                   "--out", str(tmp_path / "o"))
    assert res.returncode == 2, res.stdout + res.stderr
    assert said in res.stderr and "fix:" in res.stderr
    assert not (tmp_path / "o").exists()


def test_neither_conninfo_nor_dir(tmp_path: Path) -> None:
    res = cli_here("observe")
    assert res.returncode == 2 and "give the primary's CONNINFO" in res.stderr
    res = cli_here("observe", "host=/x", "--dir", str(tmp_path))
    assert res.returncode == 2 and "give the primary's CONNINFO" in res.stderr


def test_interrupt_keeps_the_window(cluster: tuple[Path, str], tmp_path: Path) -> None:
    _, conninfo = cluster
    out = tmp_path / "obs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "syncrep_lab", "observe", conninfo, "--seconds", "60",
         "--slice", "1", "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    time.sleep(5)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGINT, stderr
    assert (out / "syncrep-lab.sqlite").is_file()
    # A window cut short can hold one slice: a walsender's CPU per write without an
    # interval, or without a bound. It is printed without them (it was a traceback).
    from rich.console import Console

    from syncrep_lab.analysis.observe import run_observations
    from syncrep_lab.terminal.analysis import print_observation

    (window,) = run_observations(out)
    window["walsenders"] = [{"standby": "b", "cpu_us_per_commit": {
        "mean": 31.5, "low": None, "high": None}, "cores_busy": 0.12, "max_tps": None,
        "headroom": None}]
    console = Console(record=True, width=200, force_terminal=False)
    print_observation([window], console)
    assert "  walsender for b: 31.5 µs CPU per write, 0.12 of a core busy\n" in \
        console.export_text()


def test_cpu_per_role_over_ssh(pg18: Installation, tmp_path: Path) -> None:
    """A primary that runs on an SSH host (sshd in a network namespace of the test's own,
    the server started there as the SSH account): observe --host reads its /proc there."""
    from syncrep_lab.hosts import remote
    from syncrep_lab.hosts.ssh import SshHost
    from tests.sshd import running_sshd

    bin_15 = "/usr/lib/postgresql/15/bin"
    with running_sshd() as far, SshHost(far.spec()) as host:
        data = f"{far.data_root}/p"
        host.run([f"{bin_15}/initdb", "-D", data, "-U", "postgres", "--auth=trust",
                  "--no-sync", "--no-locale", "-E", "UTF8"], timeout=120)
        host.sh('printf "%s\\n" "$2" >> "$1/postgresql.conf"; '
                'printf "host all all %s/32 trust\\n" "$3" >> "$1/pg_hba.conf"',
                data, f"listen_addresses = '{far.address}'\nport = 5499\n"
                f"unix_socket_directories = '{data}'", far.gateway, what="configuring")
        remote.start_postgres(host, bin_15, data, f"{far.data_root}/p.log")
        try:
            conninfo = f"host={far.address} port=5499 user=postgres dbname=postgres"
            with psycopg.connect(conninfo, autocommit=True) as conn:
                conn.execute("create table obs_rows(id bigserial, v int)")
            hosts = tmp_path / "hosts.toml"
            hosts.write_text(f'[hosts.far]\naddress = "{far.address}"\nport = {far.port}\n'
                             f'user = "{far.user}"\nkey = "{far.key}"\n'
                             f'known_hosts = "{far.known_hosts}"\n')
            bench = _pgbench(pg18, conninfo, 10, tmp_path / "w.sql", clients=2)
            time.sleep(2)
            res, _, _ = _observe(conninfo, "--host", "far", "--hosts", str(hosts),
                                 "--seconds", "5", "--slice", "5", "--out",
                                 str(tmp_path / "obs"), "--json")
            _ended(bench)
            assert res.returncode == 0, res.stdout + res.stderr + far.sshd_log()
            window = json.loads(res.stdout)["windows"][0]
            assert window["cpu_note"] is None
            assert window["own"]["cpu_share_of_core"] is not None
            costs = json.loads(cli_here("costs", str(tmp_path / "obs"), "--json").stdout)[0]
            backend = next(r for r in costs["roles"]
                           if (r["node"], r["role"]) == ("primary", "backend"))
            assert backend["cpu_source"] == "untraced"
            assert backend["cpu_us_per_commit"]["mean"] > 0
            machine = json.loads(sqlite3.connect(tmp_path / "obs" / "syncrep-lab.sqlite")
                                 .execute("select machine_json from runs").fetchone()[0])
            assert machine["reached"] == "ssh" and machine["cpus_usable"] >= 1
        finally:
            remote.stop_postgres(host, bin_15, data)


def test_on_9_6_what_is_missing_is_said(pg96: Installation, pg18: Installation,
                                        workdir: Path, tmp_path: Path) -> None:
    """9.6 has no SyncRep wait event: the share is not guessed, the verdict says what
    it rests on instead."""
    where = workdir / "c"
    res = cli("cluster", "up", "--pg", "9.6", "--standbys", "1", "--dir", str(where))
    assert res.returncode == 0, res.stdout + res.stderr
    try:
        manifest = load(where)
        assert manifest is not None
        conninfo = manifest.conninfo(manifest.primary)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("create table obs_rows(id bigserial, v int)")
        bench = _pgbench(pg18, conninfo, 8, tmp_path / "w.sql", clients=2)
        time.sleep(2)
        res, _, _ = _observe("--dir", str(where), "--seconds", "4", "--slice", "2",
                             "--out", str(tmp_path / "obs"), "--json")
        _ended(bench)
    finally:
        cli("cluster", "down", "--dir", str(where))
    assert res.returncode == 0, res.stdout + res.stderr
    window = json.loads(res.stdout)["windows"][0]
    assert window["version"].startswith("9.6")
    assert window["sync_wait_share"] is None and window["writes_per_s"] > 0
    missing = next(v for v in window["verdicts"] if v["mechanism"] == "commit wait share")
    assert missing["confidence"] == "unknown" and "rests on" in missing["summary"]
    assert any("9.6 shows no wait event" in n for n in window["notes"])
    walsender = next(w for w in window["walsenders"] if w["standby"] == "b")
    assert walsender["cpu_us_per_commit"]["mean"] > 0
