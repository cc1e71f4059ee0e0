"""Bad input and faults: a message naming cause and fix, a non-zero exit, nothing left."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from syncrep_lab.cluster.manifest import registered

from .helpers import cli, cli_here, postmasters_in


def _assert_refused(res: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert res.returncode != 0
    assert "Traceback" not in res.stderr, res.stderr
    assert "error:" in res.stderr
    assert "fix:" in res.stderr, res.stderr
    for needle in needles:
        assert needle in res.stderr, res.stderr


def _nothing_left(cluster_dir: Path) -> None:
    assert not cluster_dir.exists()
    assert postmasters_in(cluster_dir.parent) == []
    assert cluster_dir not in registered()


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--pg", "11"], ["PostgreSQL 11 is not installed", "syncrep-lab pg fetch 11"]),
        (["--pg", "8.4"], ["outside what syncrep-lab supports"]),
        (["--pg", "eighteen"], ["neither a version"]),
        (["--pg", "/nonexistent/pg"], ["no such directory"]),
        (["--pg", "/usr/bin"], ["not a PostgreSQL bin dir"]),
        (["--sync", "ANY 1 ("], ["does not parse", "expected NAME or NUM"]),
        (["--sync", "1(x, y)"], ["names no standby of this cluster"]),
        (["--sync", "2 (b)"], ["needs 2 synchronous standbys"]),
        (["--standbys", "0", "--sync", "b"], ["names no standby"]),
        (["--pg", "9.6", "--sync", "ANY 1 (b, c)"], ["needs PostgreSQL 10"]),
        (["--set", "shared_buffer=1GB"], ["no such setting", "shared_buffers"]),
        (["--set", "nonsense"], ["not name=value"]),
        (["--standbys", "30"], ["must be 0 to 24"]),
        (["--names", "b,B"], ["repeat"]),
        (["--names", "b"], ["1 names for 2 standbys"]),
        (["--timeout", "0"], ["must be positive"]),
        # click's own usage errors come through the same funnel: error and fix
        (["--standbys", "abc"], ["Invalid value for '--standbys'",
                                 "fix: see syncrep-lab cluster up --help"]),
        (["--bogus"], ["No such option '--bogus'"]),
    ],
)
def test_refused_before_anything_starts(
    args: list[str], needles: list[str], cluster_dir: Path, request: pytest.FixtureRequest
) -> None:
    if "9.6" in args:
        request.getfixturevalue("pg96")
    res = cli_here("cluster", "up", "--dir", str(cluster_dir), *args)
    _assert_refused(res, *needles)
    _nothing_left(cluster_dir)


def test_foreign_dir_untouched(workdir: Path) -> None:
    foreign = workdir / "mine"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep me")
    res = cli_here("cluster", "up", "--dir", str(foreign))
    _assert_refused(res, "not empty and was not made by syncrep-lab")
    res = cli_here("cluster", "down", "--dir", str(foreign))
    _assert_refused(res, "holds no syncrep-lab cluster")
    assert (foreign / "precious.txt").read_text() == "keep me"
    assert sorted(p.name for p in foreign.iterdir()) == ["precious.txt"]


def test_dir_path_too_long_for_socket(workdir: Path) -> None:
    deep = workdir / ("d" * 90)
    res = cli_here("cluster", "up", "--dir", str(deep))
    _assert_refused(res, "too long for a unix socket path")
    _nothing_left(deep)


def test_port_clash(cluster_dir: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        res = cli_here("cluster", "up", "--dir", str(cluster_dir), "--tcp", "--port", str(port))
    _assert_refused(res, f"port {port} is already in use")
    _nothing_left(cluster_dir)


def test_fetch_refuses_bad_versions() -> None:
    _assert_refused(cli_here("pg", "fetch", "18"), "9.6 to 17")
    _assert_refused(cli_here("pg", "fetch", "nine"), "not a PostgreSQL version")


def test_standby_that_never_syncs_is_a_bounded_wait(cluster_dir: Path) -> None:
    # The standbys ask for a replication slot the primary does not have: they start,
    # but can never stream.
    started = time.monotonic()
    res = cli("cluster", "up", "--dir", str(cluster_dir), "--set", "primary_slot_name=nowhere",
              "--timeout", "6")
    elapsed = time.monotonic() - started
    assert res.returncode == 3, res.stderr
    assert "did not reach the expected replication state" in res.stderr
    assert "standby b: expected streaming/sync, the primary sees" in res.stderr
    assert "standby c: expected streaming/potential" in res.stderr
    assert elapsed < 40
    _nothing_left(cluster_dir)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_interrupted_up_leaves_nothing(cluster_dir: Path, signum: int) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "syncrep_lab", "cluster", "up", "--dir", str(cluster_dir)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stderr is not None
    # Interrupt once the primary runs and the standbys are being started.
    for line in proc.stderr:
        if "starting" in line and "standbys" in line:
            break
    assert postmasters_in(cluster_dir), "the primary should be running by now"
    os.kill(proc.pid, signum)
    _, rest = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, rest
    assert "interrupted" in rest
    assert "Traceback" not in rest
    _nothing_left(cluster_dir)


def test_installation_missing_a_program(workdir: Path, pg18: object) -> None:
    from syncrep_lab.pg.installations import Installation

    assert isinstance(pg18, Installation)
    partial = workdir / "bin"
    partial.mkdir()
    (partial / "postgres").symlink_to(pg18.program("postgres"))
    (partial / "pg_ctl").symlink_to(pg18.program("pg_ctl"))
    res = cli_here("cluster", "up", "--dir", str(workdir / "c"), "--pg", str(partial))
    _assert_refused(res, "has no initdb")
    _nothing_left(workdir / "c")
