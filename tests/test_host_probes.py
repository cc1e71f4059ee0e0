"""perf on an SSH host: a standby there whose account may run perf through ``sudo -n``
gets its system calls counted, its stacks drawn and its scheduling traced per role, as
a local node's are; without the grant the probes are skipped with the reason, and the
run goes on."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncrep_lab.probes import perfstat
from syncrep_lab.store import DB_NAME

from .helpers import cli
from .sshd import SshdHost, perf_through_sudo, running_sshd

BIN_15 = "/usr/lib/postgresql/15/bin"


@pytest.fixture(scope="module")
def probed() -> Iterator[SshdHost]:
    with running_sshd() as host, perf_through_sudo():
        yield host


def _run(workdir: Path, host: SshdHost, sudo: bool, duration: int = 3) -> sqlite3.Connection:
    table = host.hosts_table("far", BIN_15) + f"sudo = {'true' if sudo else 'false'}\n"
    (workdir / "spec.toml").write_text(f"""\
name = "host-probes"

[topology]
pg = "15"
standbys = 2
sync = "c"
clone = "basebackup"
hosts = {{ c = "far" }}

{table}
[workload]
clients = 4
duration = {duration}
warmup = 0

[run]
repeats_min = 1
repeats_max = 1

[probes]
flame_hz = 997
sched_seconds = 2
# the commit anatomy (a repeat of its own) is tests/test_commit_anatomy_run.py's
anatomy = false
""")
    res = cli("run", str(workdir / "spec.toml"), "--out", str(workdir / "run"), timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr + host.sshd_log()
    db = sqlite3.connect(workdir / "run" / DB_NAME)
    db.row_factory = sqlite3.Row
    return db


def test_perf_counts_a_remote_standby_s_system_calls(workdir: Path, probed: SshdHost
                                                     ) -> None:
    assert perfstat.unavailable_reason() is None  # the same machine: perf runs here
    db = _run(workdir, probed, sudo=True)
    status = {r["probe"]: (r["status"], r["reason"]) for r in db.execute(
        "select probe, status, reason from probes")}
    assert status["perf on c"] == ("ran", None), status
    costs = {r["role"]: r for r in db.execute(
        "select role, cpu_ms, syscalls_json from costs where node = 'c'")}
    # the sync standby's walreceiver reads WAL and writes it, and wakes the startup
    # process that replays it
    receiver = json.loads(costs["walreceiver"]["syscalls_json"])
    assert costs["walreceiver"]["cpu_ms"] > 0
    assert receiver.get("write", 0) + receiver.get("pwrite64", 0) > 0, receiver
    assert "startup" in costs
    # its on-CPU stacks, recorded on the host and drawn here, per role
    graphs = {(r["node"], r["role"]): r for r in db.execute(
        "select node, role, cpu_us, svg_path from flamegraphs")}
    assert status["flamegraphs on far"] == ("ran", None), status
    assert ("c", "walreceiver") in graphs and graphs[("c", "walreceiver")]["cpu_us"] > 0
    assert ("*far", "all") in graphs and ("*", "all") in graphs  # the host's and this one's
    svg = workdir / "run" / graphs[("c", "walreceiver")]["svg_path"]
    assert svg.read_text().startswith("<?xml")
    frames = {r["frame"] for r in db.execute(
        "select frame from stack_frames where node = 'c' and role = 'walreceiver'")}
    assert "WalReceiverMain" in frames, frames
    # the scheduler trace of the host: the walreceiver on a core, and waking the
    # startup process to replay what it wrote; the host's other threads as its own
    assert status["sched on far"] == ("ran", None), status
    sched = {(r["node"], r["role"]): r["cpu_ms"] for r in db.execute(
        "select node, role, cpu_ms from sched_roles")}
    assert sched.get(("c", "walreceiver"), 0) > 0, sched
    assert ("*far", "other") in sched and ("-", "other") in sched, sched  # and here
    wakes = {(r["waker_node"], r["waker_role"], r["wakee_node"], r["wakee_role"])
             for r in db.execute("select * from wakeups")}
    assert ("c", "walreceiver", "c", "startup") in wakes, wakes
    # its pages per NUMA node, read from numa_maps there before and after
    pages = {(r["role"], r["phase"]): r["pages"] for r in db.execute(
        "select role, phase, pages from numa_pages where node = 'c' and numa_node = 'N0'")}
    assert pages.get(("startup", "before"), 0) > 0 and pages.get(("startup", "after"), 0) > 0
    assert list(Path(probed.data_root).iterdir()) == []  # its files went with the node
    assert probed.running("perf") == []


def test_a_host_that_may_not_run_perf_is_skipped_with_the_reason(workdir: Path,
                                                                 probed: SshdHost) -> None:
    db = _run(workdir, probed, sudo=False, duration=1)  # what is skipped, not what ran
    status = {r["probe"]: (r["status"], r["reason"]) for r in db.execute(
        "select probe, status, reason from probes")}
    assert status["perf on c"][0] == "skipped"
    assert "no sudo = true" in status["perf on c"][1]
    assert status["flamegraphs on far"][0] == "skipped"
    assert status["sched on far"][0] == "skipped"
    assert db.execute("select count(*) from costs where node = 'c'").fetchone()[0] == 0
    assert db.execute("select status from cells").fetchone()[0] == "done"
