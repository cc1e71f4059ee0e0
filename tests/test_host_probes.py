"""perf on an SSH host: a standby there whose account may run perf through ``sudo -n``
gets its system calls counted, its stacks drawn and its scheduling traced per role, as
a local node's are; without the grant the probes are skipped with the reason, and the
run goes on; so is the commit anatomy of a primary there, which bpftrace would trace
(tests/test_remote_standby.py traces one)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncrep_lab.probes import perfstat
from syncrep_lab.store import DB_NAME

from .helpers import cli
from .sshd import SshdHost, bpftrace_through_sudo, perf_through_sudo, running_sshd

BIN_15 = "/usr/lib/postgresql/15/bin"


@pytest.fixture(scope="module")
def probed() -> Iterator[SshdHost]:
    with running_sshd() as host, perf_through_sudo():
        yield host


def _run(workdir: Path, host: SshdHost, sudo: bool, duration: int = 3,
         placed: str = 'hosts = { c = "far" }', anatomy: bool = False) -> sqlite3.Connection:
    table = host.hosts_table("far", BIN_15) + f"sudo = {'true' if sudo else 'false'}\n"
    (workdir / "spec.toml").write_text(f"""\
name = "host-probes"

[topology]
pg = "15"
standbys = 2
sync = "c"
clone = "basebackup"
{placed}

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
anatomy = {'true' if anatomy else 'false'}
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
    # and /proc/PID/io there saw the bytes it wrote (the WAL: a hundred bytes a commit and
    # more)
    written = db.execute("select p.write_bytes, r.transactions from proc_costs p join "
                         "repeats r on r.id = p.repeat_id where p.node = 'c' and "
                         "p.role = 'walreceiver' and r.probed = 1").fetchone()
    assert written is not None and written[0] is not None, written
    assert written[0] > 100 * written[1] > 0, written
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
    """The primary there too, and the commit anatomy asked for: skipped, said in the
    probed repeat, and no repeat spent on it."""
    db = _run(workdir, probed, sudo=False, duration=1,  # what is skipped, not what ran
              placed='hosts = { primary = "far", c = "far" }', anatomy=True)
    status = {r["probe"]: (r["status"], r["reason"]) for r in db.execute(
        "select probe, status, reason from probes")}
    assert status["perf on c"][0] == "skipped"
    assert "no sudo = true" in status["perf on c"][1]
    assert status["flamegraphs on far"][0] == "skipped"
    assert status["sched on far"][0] == "skipped"
    assert status["anatomy"] == ("skipped", (
        f"the account {probed.user} on far is not root and [hosts.far] has no sudo = true: "
        "bpftrace needs root there (fix: sudo = true with the grant "
        f"`{probed.user} ALL=(root) NOPASSWD:SETENV: /usr/bin/bpftrace` on far, or log in "
        "as root)")), status
    assert [r[0] for r in db.execute("select probed from repeats order by n")] == [0, 1]
    assert db.execute("select count(*) from costs where node = 'c'").fetchone()[0] == 0
    assert db.execute("select status from cells").fetchone()[0] == "done"


def test_sudo_without_the_grant_the_anatomy_needs_says_which(probed: SshdHost) -> None:
    """The check on a host whose sudo -n may run perf, not bpftrace; then bpftrace
    without SETENV: each says the grant it needs."""
    from syncrep_lab.hosts.ssh import SshHost
    from syncrep_lab.probes import host_anatomy

    with SshHost(probed.spec(name="far", sudo=True)) as host:
        # pid 1: the trial fails before the binary's symbols are read
        refused = host_anatomy._check(host, 1).reason
        with bpftrace_through_sudo(setenv=False):
            settings = host_anatomy._check(host, 1).reason
    assert refused is not None and settings is not None
    grant = f"`{probed.user} ALL=(root) NOPASSWD:SETENV: /usr/bin/bpftrace`"
    assert refused == (f"the account {probed.user} may not run bpftrace with sudo -n on far "
                       f"(fix: the grant {grant} there)")
    assert settings.startswith("sudo -n on far runs bpftrace but will not pass it its "
                               "settings"), settings
    assert "SETENV" in settings and grant in settings


def test_a_host_recording_with_no_samples_says_what_perf_said(probed: SshdHost) -> None:
    """A host's recording that perf script prints nothing of (here: a tracepoint no one
    hits) fails with perf's own words, where it once left its host without a graph and
    its probe said "ran"; its files are removed."""
    from syncrep_lab.hosts.perf import RemoteRecording, perf_access
    from syncrep_lab.hosts.ssh import SshHost

    with SshHost(probed.spec(name="far", sudo=True)) as host:
        access = perf_access(host)
        assert not isinstance(access, str), access
        base = f"{probed.data_root}/quiet"
        recording = RemoteRecording(host, access, base, "oncpu",
                                    ["-e", "syscalls:sys_enter_acct"], 30, [])
        recording.start()
        with pytest.raises(RuntimeError, match="perf oncpu on far gave no samples") as err:
            recording.stop()
        assert "perf record said" in str(err.value), err.value
        left = host.run(["ls", "--", probed.data_root], timeout=30).stdout.split()
        assert not [f for f in left if f.startswith("quiet.")], left


def test_the_server_binary_s_symbols_are_read_on_the_host_as_here(probed: SshdHost) -> None:
    """By the host's python3, and from a copy where it has none: what elf_symbols reads
    here in the same file."""
    from syncrep_lab.hosts.ssh import SshHost
    from syncrep_lab.probes.anatomy import LEVEL, SYMBOLS
    from syncrep_lab.probes.host_anatomy import host_symbols
    from syncrep_lab.probes.uprobe_points import elf_symbols

    binary = f"{BIN_15}/postgres"
    here = elf_symbols(Path(binary), (*SYMBOLS, LEVEL))
    assert {s: here[s][1] for s in SYMBOLS} == dict.fromkeys(SYMBOLS, 2)
    with SshHost(probed.spec()) as host:
        assert host_symbols(host, binary) == here
        assert host_symbols(host, binary, python=False) == here
        missing = f"{probed.data_root}/none"
        with pytest.raises(ValueError, match="No such file"):
            host_symbols(host, missing)


def test_a_host_with_pids_of_its_own_is_refused_with_the_reason() -> None:
    """A host in a PID namespace of its own: the kernel's pids, which the program filters
    on, are not the postmaster's pid there; the check says so instead of a probe that
    would count nothing."""
    from syncrep_lab.hosts.ssh import SshHost
    from syncrep_lab.probes import host_anatomy

    with running_sshd(own_pids=True) as boxed, bpftrace_through_sudo(), \
            SshHost(boxed.spec(name="box", sudo=True)) as host:
        reason = host_anatomy._check(host, 1).reason
    assert reason is not None and reason.startswith(
        "box runs in a PID namespace of its own (a container)"), reason
