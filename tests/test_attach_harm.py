"""Attach without harm, on clusters built by hand (tests/handbuilt.py), PostgreSQL 15.

A cluster whose commits could never be acknowledged is refused before anything
starts. On a correctly built one whose synchronous standbys go away mid-cell, the
run ends within its bound whether the stall is noticed, SIGTERM arrives, or the tool
is killed and ``clean`` follows; afterwards the primary holds no session of the tool,
no backend waiting for a standby and none of the tool's tables, and the user's own
session is still there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from syncrep_lab.pg.installations import Installation

from .handbuilt import HandBuilt
from .helpers import cli, cli_here, machine_wide, shared_tmp

SYNC = {"b": "sync", "c": "potential"}


def spec_text(primary: str, *, levels: str = '["on"]', stall: float = 3,
              duration: int = 30) -> str:
    return f"""\
name = "attach-harm"

[topology.attach]
primary = "{primary}"

[workload]
clients = 4
duration = {duration}
warmup = 0

[matrix]
synchronous_commit = {levels}

[run]
repeats_min = 1
repeats_max = 1
stall_seconds = {stall}

[probes]
probed_repeats = 0
"""


def tool_sessions(hb: HandBuilt) -> list[tuple[int, str, str]]:
    """(pid, application_name, wait_event) of every session the tool may have left, and
    of every backend waiting for a synchronous standby."""
    with psycopg.connect(hb.conninfo(), autocommit=True, application_name="checker") as conn:
        return [(int(r[0]), str(r[1]), str(r[2])) for r in conn.execute(
            "select pid, application_name, coalesce(wait_event, '') from pg_stat_activity "
            "where pid <> pg_backend_pid() and (application_name like 'syncrep-lab%%' "
            "or application_name = 'pgbench' or wait_event = 'SyncRep')")]


def tables(hb: HandBuilt) -> list[str]:
    with psycopg.connect(hb.conninfo(), autocommit=True, application_name="checker") as conn:
        return [str(r[0]) for r in conn.execute(
            "select relname from pg_class where relname like 'syncrep_lab%%'")]


def wait_for(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def start_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "syncrep_lab", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "200"})


def stuck_in_syncrep(hb: HandBuilt) -> bool:
    return sum(1 for _, name, wait in tool_sessions(hb)
               if name.endswith(" pgbench") and wait == "SyncRep") == 4


def start_stuck_run(hb: HandBuilt, workdir: Path) -> subprocess.Popen[str]:
    """A run whose pgbench sessions all wait for standbys that were stopped under them
    (a stall the tool would notice only after 600 s)."""
    spec = workdir / "spec.toml"
    spec.write_text(spec_text(hb.conninfo(), stall=600, duration=120))
    proc = start_cli("run", str(spec), "--out", str(workdir / "run"))
    try:
        wait_for(lambda: sum(1 for s in tool_sessions(hb) if s[1].endswith(" pgbench")) == 4,
                 60, "pgbench's sessions")
        hb.stop("b")
        hb.stop("c")
        wait_for(lambda: stuck_in_syncrep(hb), 30, "pgbench's sessions in SyncRep")
    except BaseException:
        proc.kill()
        raise
    return proc


def sigterm_and_wait(proc: subprocess.Popen[str]) -> tuple[str, str, float]:
    """SIGTERM the run; its output and how long it took to end with 128 + SIGTERM."""
    try:
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, out + err
    return out, err, took


def records(lab_home: Path) -> list[Path]:
    folder = lab_home / "state" / "attached"
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


@pytest.fixture(scope="module")
def good(pg15: Installation) -> Iterator[HandBuilt]:
    hb = HandBuilt(shared_tmp("srl-hb-") / "cl", pg15, 5432, named=True).build()
    hb.wait_sync(SYNC)
    yield hb
    hb.remove()
    hb.root.parent.rmdir()


@pytest.fixture
def user_session(good: HandBuilt) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """The user's own idle session, which the tool must not touch."""
    good.wait_sync(SYNC)
    with psycopg.connect(good.conninfo(), autocommit=True, application_name="mine") as conn:
        yield conn


def assert_left_clean(hb: HandBuilt, mine: psycopg.Connection[tuple[object, ...]],
                      lab_home: Path) -> None:
    wait_for(lambda: not tool_sessions(hb), 10, "the tool's sessions to be gone")
    assert tables(hb) == []
    mine_row = mine.execute("select pg_backend_pid(), current_setting('application_name')"
                            ).fetchone()
    assert mine_row is not None and mine_row[1] == "mine"  # alive, and the same session
    assert records(lab_home) == []


def test_misconfigured_cluster_is_refused_before_anything_starts(
        pg15: Installation, workdir: Path, lab_home: Path) -> None:
    hb = HandBuilt(workdir / "cl", pg15, 5432, named=False).build()
    try:
        wait_for(lambda: sorted(hb.sync_states()) == ["walreceiver"], 30,
                 "both standbys streaming")
        assert hb.sync_states() == {"walreceiver": "async"}
        spec = workdir / "spec.toml"
        spec.write_text(spec_text(hb.conninfo(), levels='["local", "on"]'))
        for extra in (["--check"], ["--out", str(workdir / "run")]):
            started = time.monotonic()
            res = cli_here("run", str(spec), *extra)
            assert res.returncode == 2, res.stdout + res.stderr
            assert time.monotonic() - started < 15
            text = " ".join(res.stderr.split())
            assert "cannot serve cell" in text and "synchronous_commit = on" in text, text
            assert "'walreceiver'" in text and "postgresql.auto.conf" in text, text
            assert "walreceiver streaming async" in text, text  # what the primary sees
            assert "application_name=" in text  # the fix
            assert "Traceback" not in res.stderr
        assert not (workdir / "run").exists()
        assert tables(hb) == [] and tool_sessions(hb) == []
        assert records(lab_home) == []
    finally:
        hb.remove()


def test_stalled_cell_fails_fast_and_leaves_nothing(
        good: HandBuilt, user_session: psycopg.Connection[tuple[object, ...]],
        workdir: Path, lab_home: Path) -> None:
    spec = workdir / "spec.toml"
    spec.write_text(spec_text(good.conninfo(), stall=3))
    proc = start_cli("run", str(spec), "--out", str(workdir / "run"))
    try:
        wait_for(lambda: sum(1 for s in tool_sessions(good) if s[1].endswith(" pgbench")) == 4,
                 60, "pgbench's sessions")
        assert records(lab_home), "the visit is recorded while the run goes"
        good.stop("b")
        good.stop("c")
        stopped = time.monotonic()
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - stopped
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 4, out + err  # the cell failed; the run finished
    assert took < 3 + 20, took  # stall_seconds, then the cleanup's bound
    text = " ".join((out + err).split())
    assert "ended 4 sessions of this run on primary" in text, text
    assert "durable on the primary but were never confirmed" in text, text
    import sqlite3

    db = sqlite3.connect(workdir / "run" / "syncrep-lab.sqlite")
    status, error = db.execute("select status, error from cells").fetchone()
    assert status == "failed"
    assert "waiting for a synchronous standby" in error and "no standby is connected" in error
    assert_left_clean(good, user_session, lab_home)


def test_sigterm_mid_stall_ends_within_its_bound(
        good: HandBuilt, user_session: psycopg.Connection[tuple[object, ...]],
        workdir: Path, lab_home: Path) -> None:
    out, err, took = sigterm_and_wait(start_stuck_run(good, workdir))
    assert took < 30, took
    assert "ended 4 sessions of this run on primary" in " ".join((out + err).split()), out + err
    assert "error ignored" not in err and "Traceback" not in err, err
    assert_left_clean(good, user_session, lab_home)


@machine_wide
def test_killed_run_is_cleaned_by_clean(
        good: HandBuilt, user_session: psycopg.Connection[tuple[object, ...]],
        workdir: Path, lab_home: Path) -> None:
    proc = start_stuck_run(good, workdir)
    try:
        live = cli("clean", timeout=60)  # a live run's visit is left alone
        assert live.returncode == 0 and "still going" in live.stdout, live.stdout + live.stderr
        assert stuck_in_syncrep(good)
        proc.kill()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    # what a killed run leaves: its backends in the wait (pgbench died with it), its table
    assert stuck_in_syncrep(good)
    assert set(tables(good)) == {"syncrep_lab_insert", "syncrep_lab_insert_id_seq",
                                 "syncrep_lab_insert_pkey"}
    assert len(records(lab_home)) == 1
    res = cli("clean", timeout=90)
    assert res.returncode == 0, res.stdout + res.stderr
    text = " ".join(res.stdout.split())
    assert "ended 4 sessions of this run on primary" in text, text
    assert "dropped table syncrep_lab_insert" in text, text
    assert_left_clean(good, user_session, lab_home)


@machine_wide
def test_sigterm_with_a_frozen_primary_is_bounded_and_clean_finishes(
        good: HandBuilt, user_session: psycopg.Connection[tuple[object, ...]],
        workdir: Path, lab_home: Path) -> None:
    """The primary's postmaster stops answering (SIGSTOP): SIGTERM still ends the run
    within its bound, says what is left, and clean finishes once the server is back."""
    proc = start_stuck_run(good, workdir)
    postmaster = int((good.root / "primary" / "postmaster.pid").read_text().split()[0])
    os.kill(postmaster, signal.SIGSTOP)
    try:
        out, err, took = sigterm_and_wait(proc)
    finally:
        os.kill(postmaster, signal.SIGCONT)
    assert took < 30, took
    text = " ".join((out + err).split())
    assert "could not finish on the attached primary" in text, text
    assert "syncrep-lab clean finishes it" in text, text
    assert "Traceback" not in err
    assert stuck_in_syncrep(good) and len(records(lab_home)) == 1
    res = cli("clean", timeout=90)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ended 4 sessions of this run on primary" in " ".join(res.stdout.split())
    assert_left_clean(good, user_session, lab_home)
