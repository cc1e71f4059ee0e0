"""An SSH host that vanishes in the middle of a run (its sshd and everything it ran
killed at once): the run ends with an error that names the host, the repeats finished
before are kept, and what is left is said and can be cleaned."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncrep_lab.cluster.manifest import MANIFEST
from syncrep_lab.store import DB_NAME

from .helpers import cli, machine_wide
from .sshd import SshdHost, running_sshd

BIN_15 = "/usr/lib/postgresql/15/bin"


@pytest.fixture(scope="module")
def gone() -> Iterator[SshdHost]:
    with running_sshd() as host:
        yield host


def _spec(host: SshdHost) -> str:
    return f"""\
name = "vanishing"

[topology]
pg = "15"
standbys = 2
hosts = {{ client = "gone" }}

{host.hosts_table("gone", BIN_15)}
[workload]
clients = 2
duration = 4
warmup = 0

[run]
repeats_min = 4
repeats_max = 4

[probes]
probed_repeats = 0
"""


def _repeats(db_path: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=1) as db:
            return int(db.execute("select count(*) from repeats").fetchone()[0])
    except sqlite3.Error:
        return 0


@machine_wide
def test_a_host_that_vanishes_mid_run(gone: SshdHost, workdir: Path) -> None:
    root = workdir  # removed after the test (it was left in /tmp on every suite)
    (root / "spec.toml").write_text(_spec(gone))
    run = root / "run"
    tool = subprocess.Popen([sys.executable, "-m", "syncrep_lab", "run", "spec.toml",
                             "--out", "run"], cwd=root, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 180
        while _repeats(run / DB_NAME) < 1 and time.monotonic() < deadline:
            assert tool.poll() is None, tool.stdout.read() if tool.stdout else ""
            time.sleep(0.2)
        assert _repeats(run / DB_NAME) >= 1
        time.sleep(1.0)  # into the next repeat's pgbench
        pids = subprocess.run(["ip", "netns", "pids", gone.namespace], capture_output=True,
                              text=True, check=True).stdout.split()
        subprocess.run(["kill", "-9", *pids], check=False)
        output, _ = tool.communicate(timeout=240)
    finally:
        if tool.poll() is None:
            tool.kill()
            tool.wait()
    assert tool.returncode != 0, output
    assert "gone" in output and "Traceback" not in output, output
    db = sqlite3.connect(run / DB_NAME)
    cell = db.execute("select status, error from cells").fetchone()
    assert cell[0] == "failed" and "gone" in cell[1], cell
    kept = db.execute("select count(*) from repeats").fetchone()[0]
    assert 1 <= kept < 4  # the repeats finished before the host went are kept
    # the cluster here is gone; its manifest stays, naming the host, until the host
    # answers again or the user says it is gone for good
    left = cli("clean", timeout=120)
    assert left.returncode == 2 and "bring the host back" in left.stderr, left.stderr
    manifests = [line.split(MANIFEST)[0].split()[-1] for line in left.stderr.split("delete ")[1:]]
    assert manifests, left.stderr
    for where in manifests:
        for leftover in Path(where).iterdir():
            assert leftover.name == MANIFEST  # nothing but the manifest here
        (Path(where) / MANIFEST).unlink()
    assert cli("clean", timeout=60).returncode == 0
