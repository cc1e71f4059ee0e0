"""Probes on real clusters: roles from process titles (9.6 and 18), per-commit costs
from perf, wait events from pg_stat_activity."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from syncrep_lab.analysis.costs import run_costs
from syncrep_lab.cluster import server
from syncrep_lab.cluster.manifest import Manifest
from syncrep_lab.cluster.ready import replication_rows
from syncrep_lab.pg.roles import node_processes, role_of_title
from syncrep_lab.plan.load import load_spec
from syncrep_lab.plan.spec import Probes
from syncrep_lab.probes import flamegraph, perfstat, sched
from syncrep_lab.probes.session import RepeatProbes, walsenders
from syncrep_lab.run.runner import start_run

from .helpers import cli_here, shared_tmp, wait_traced, wait_until


@pytest.mark.parametrize(
    ("title", "role"),
    [
        ("postgres: walsender postgres [local] streaming 0/3000148", "walsender"),
        ("postgres: wal sender process postgres [local] streaming 0/3000060", "walsender"),
        ("postgres: walwriter", "walwriter"),
        ("postgres: wal writer process", "walwriter"),
        ("postgres: checkpointer", "checkpointer"),
        ("postgres: checkpointer process", "checkpointer"),
        ("postgres: background writer", "bgwriter"),
        ("postgres: writer process", "bgwriter"),
        ("postgres: startup recovering 000000010000000000000003", "startup"),
        ("postgres: startup process   recovering 000000010000000000000003", "startup"),
        ("postgres: walreceiver streaming 0/3000148", "walreceiver"),
        ("postgres: wal receiver process   streaming 0/3000060", "walreceiver"),
        ("postgres: autovacuum launcher", "autovacuum"),
        ("postgres: logical replication launcher", "other"),
        ("postgres: stats collector process", "other"),
        ("postgres: logger", "other"),
        ("postgres: logger process   ", "other"),
        ("postgres: logger postgres [local] idle", "backend"),
        ("postgres: postgres postgres [local] idle", "backend"),
        ("postgres: postgres postgres [local] INSERT waiting for 0/3000148", "backend"),
        ("postgres: main: walwriter", "walwriter"),
        ("/usr/bin/python3 something", "other"),
    ],
)
def test_role_of_title(title: str, role: str) -> None:
    assert role_of_title(title) == role


@pytest.mark.parametrize("version", ["18", "9.6"])
def test_roles_of_a_live_cluster(version: str, cluster_dir: Path,
                                 make_cluster: Callable[..., Manifest],
                                 request: pytest.FixtureRequest) -> None:
    if version == "9.6":
        request.getfixturevalue("pg96")
    manifest = make_cluster(pg=version)
    primary = manifest.primary
    pid = server.postmaster_pid(primary.data_dir(cluster_dir))
    assert pid is not None
    senders = walsenders(manifest.admin_conninfo(primary))
    assert set(senders.values()) == {"b", "c"}
    roles = {p.label for p in node_processes("primary", pid, senders)}
    assert {"postmaster", "walsender:b", "walsender:c", "walwriter", "checkpointer",
            "bgwriter"} <= roles
    spid = server.postmaster_pid(manifest.node("b").data_dir(cluster_dir))
    assert spid is not None
    standby_roles = {p.role for p in node_processes("b", spid)}
    assert {"startup", "walreceiver"} <= standby_roles
    assert set(replication_rows(manifest.admin_conninfo(primary))) == {"b", "c"}


def test_parse_perf_stat() -> None:
    text = ("# started on Sun Nov 22 05:31:35 2026\n\n"
            "postgres-101,12.5,msec,task-clock,12500000,100.00,,\n"
            "postgres-101,7,,context-switches,12500000,100.00,,\n"
            "postgres-101,42,,syscalls:sys_enter_kill,12500000,100.00,,\n"
            "postgres-102,<not counted>,,syscalls:sys_enter_kill,0,100.00,,\n"
            "post-gres-103,3,,syscalls:sys_enter_epoll_ctl,1,100.00,,\n")
    counts = perfstat.parse_perf_stat(text)
    assert counts[101].task_clock_ms == 12.5
    assert counts[101].context_switches == 7
    assert counts[101].syscalls == {"kill": 42}
    assert 102 not in counts
    assert counts[103].syscalls == {"epoll_ctl": 3}


SPEC = """\
name = "probes"

[topology]
standbys = 2

[workload]
clients = 4
duration = 2
warmup = 0

[matrix]
# 18 under local and on (the costs' sync story), and 9.6 under on (the diagnosis's
# epoll story against 18's): one run serves both tests.
pg = ["9.6", "18"]
synchronous_commit = ["local", "on"]
exclude = [{ pg = "9.6", synchronous_commit = "local" }]

[run]
repeats_min = 1
repeats_max = 1

[probes]
# A 2 s repeat gives the walsender only a few dozen stack samples at the default
# 99 Hz; ten times that makes the stack assertions below hold every time.
flame_hz = 997
"""


@pytest.fixture(scope="module")
def probed_run(pg96: object) -> Iterator[Path]:
    """The run of SPEC, made once for the tests that read it."""
    root = shared_tmp("srl-probes-")
    out = root / "run"
    start_run(load_spec(SPEC), SPEC, root, out)
    yield out
    shutil.rmtree(root, ignore_errors=True)


def _by_cell(cells: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Cells by "PG LEVEL", whatever order the label gives the axes in."""
    def key(label: str) -> str:
        parts = dict(p.split("=", 1) for p in label.split())
        return f"{parts['pg']} {parts['sc']}"

    return {key(c["label"]): c for c in cells}


def test_costs_per_commit_tell_the_sync_story(probed_run: Path) -> None:
    out = probed_run
    cells = _by_cell([c.to_json() for c in run_costs(out)])
    local, on = cells["18 local"], cells["18 on"]
    # gprof needs a profiling build (tests/test_pg_build.py runs one): on the
    # installed servers it is skipped, saying how to get one, and nothing is restarted.
    assert on["gprof"] == []
    assert any("not a profiling build" in s and "--flavor profiling" in s
               for s in on["probes"]["gprof"])
    reason = perfstat.unavailable_reason()
    if reason is not None:
        # This machine cannot count: the reason is stored and shown, nothing is invented.
        assert local["roles"] == []
        assert any(reason in s for s in local["probes"]["perf"])
    else:
        roles = {(r["node"], r["role"]): r for r in on["roles"]}
        backend = roles[("primary", "backend")]
        assert backend["cpu_us_per_commit"]["mean"] > 0
        # The sync standby's walsender wakes committing backends (SetLatch -> kill);
        # the potential one's does not, and neither does anything under 'local'.
        kill_b = roles[("primary", "walsender:b")]["syscalls_per_commit"]["kill"]["mean"]
        kill_c = roles[("primary", "walsender:c")]["syscalls_per_commit"].get(
            "kill", {"mean": 0.0})["mean"]
        assert kill_b > 0.3
        assert kill_b > 5 * kill_c
        local_b = {(r["node"], r["role"]): r for r in local["roles"]}[("primary", "walsender:b")]
        assert local_b["syscalls_per_commit"].get("kill", {"mean": 0.0})["mean"] < 0.1
        # a backend asleep on a lock: on a System V semaphore on 9.6 (its default, as the
        # seed ran it; glibc's semop() enters the kernel as semtimedop), never on 18
        # (POSIX semaphores: futex)
        old = {(r["node"], r["role"]): r for r in cells["9.6 on"]["roles"]}
        calls_96 = old[("primary", "backend")]["syscalls_per_commit"]
        calls_18 = backend["syscalls_per_commit"]

        def sem(calls: Mapping[str, Any]) -> float:
            return sum(float(calls.get(n, {"mean": 0.0})["mean"] or 0.0)
                       for n in ("semop", "semtimedop"))

        # How often a backend sleeps on a lock follows the contention, which other load on
        # the machine lowers (0.08 a commit seen beside a second test worker): a floor
        # well off zero, against 18's exact zero.
        assert sem(calls_96) > 0.02, sorted((k, v["mean"]) for k, v in calls_96.items())
        assert sem(calls_18) == 0, sorted((k, v["mean"]) for k, v in calls_18.items())
        # /proc's CPU time of the backends against perf's task-clock, same repeat.
        proc = backend["proc"]
        proc_us = proc["user_us_per_commit"]["mean"] + proc["system_us_per_commit"]["mean"]
        perf_us = backend["perf_cpu_us_per_commit"]["mean"]
        assert 0.7 < proc_us / perf_us < 1.3, (proc, backend)
        # the CPU shown is the measured repeat's, nothing traced: below the traced one
        assert backend["cpu_source"] == "untraced"
        assert backend["cpu_us_per_commit"]["mean"] < 1.1 * proc_us, backend
    _check_stacks_and_scheduler(local, on)
    backend_waits = next(w for w in on["waits"] if w["node"] == "primary"
                         and w["role"] == "backend")
    assert backend_waits["share"].get("IPC:SyncRep", 0) > 0.05
    local_waits = next(w for w in local["waits"] if w["node"] == "primary"
                       and w["role"] == "backend")
    assert local_waits["share"].get("IPC:SyncRep", 0) == 0
    # A commit's time on the primary's backends, split by what they were seen doing.
    lb = on["latency_breakdown"]
    parts = sum(lb[k] for k in ("sync_wait_ms", "wal_ms", "cpu_ms", "client_ms", "other_ms"))
    assert abs(parts - lb["latency_ms"]) < 1e-6 * lb["latency_ms"] + 1e-9
    assert lb["sync_wait_ms"] > 0
    assert local["latency_breakdown"]["sync_wait_ms"] == 0
    replication = {r["standby"]: r for r in on["replication"]}
    assert replication["b"]["states"] == "sync"
    assert replication["c"]["states"] == "potential"
    assert replication["b"]["flush_ms"] is not None and replication["b"]["flush_ms"] >= 0
    res = cli_here("costs", str(out))
    assert res.returncode == 0, res.stderr
    assert "walsender:b" in res.stdout or "no per-process costs" in res.stdout
    assert "waiting for the standby" in res.stdout


def _check_stacks_and_scheduler(local: Mapping[str, Any], on: Mapping[str, Any]) -> None:
    reason = flamegraph.unavailable_reason()
    if reason is not None:
        assert on["flamegraphs"] == []
        assert any(reason in s for s in on["probes"]["flamegraphs"])
    else:
        graphs = {(g["node"], g["role"]): g for g in on["flamegraphs"]}
        assert {("primary", "backend"), ("primary", "walsender:b"), ("*", "all")} <= set(graphs)
        svg = Path(graphs[("primary", "walsender:b")]["svg"]).read_text()
        assert svg.startswith("<?xml") and "<svg" in svg
        assert "DWARF-unwound stacks" in svg  # the installed 18 keeps no frame pointers
        # DWARF unwinding reaches PostgreSQL's own frames: the sync walsender
        # releases the committing backends; the potential one's stacks do not.
        frames = {f["frame"] for f in graphs[("primary", "walsender:b")]["frames"]}
        folded = Path(graphs[("primary", "walsender:b")]["folded"]).read_text()
        assert "WalSndLoop" in frames
        assert "SyncRepReleaseWaiters" in folded
    reason = sched.unavailable_reason()
    if reason is not None:
        assert on["wakeups"] == []
        assert any(reason in s for s in on["probes"]["sched"])
        return

    def woken(cell: Mapping[str, Any], waker: str) -> float:
        return sum(float(w["per_commit"]["mean"]) for w in cell["wakeups"]
                   if (w["waker_node"], w["waker_role"], w["wakee_role"])
                   == ("primary", waker, "backend"))

    # The kernel sees the same story as the system call counts: under 'on' the
    # sync standby's walsender wakes about one backend per commit.
    assert woken(on, "walsender:b") > 0.3, (on["probes"]["sched"], sorted(
        (w["waker_node"], w["waker_role"], w["wakee_role"]) for w in on["wakeups"]))
    assert woken(on, "walsender:b") > 5 * woken(on, "walsender:c")
    assert woken(local, "walsender:b") < 0.1
    backend = next(r for r in on["roles"] if (r["node"], r["role"]) == ("primary", "backend"))
    assert backend["sched"]["sleep_us_per_commit"]["mean"] > 0
    assert backend["sched"]["runq_us_per_commit"]["mean"] >= 0
    numa = [n for n in on["numa"] if n["node"] == "primary" and n["role"] == "walwriter"]
    assert {n["phase"] for n in numa} == {"before", "after"}
    assert all(n["numa_node"].startswith("N") and n["pages"] > 0 for n in numa)


def test_diagnosis_names_the_mechanism(probed_run: Path) -> None:
    from syncrep_lab.analysis.diagnosis import diagnose_run

    out = probed_run
    cells = {k: {v["mechanism"]: v for v in c["verdicts"]}
             for k, c in _by_cell([d.to_json() for d in diagnose_run(out)]).items()}
    old, new = cells["9.6 on"], cells["18 on"]
    if perfstat.unavailable_reason() is not None:
        assert new["commit-wait wake-up bound"]["confidence"] == "unknown"
        return
    # 9.6 builds an epoll set for every wait; 18 does not.
    assert old["per-wait epoll set-up"]["evidence"]["epoll_create1_per_commit"] > 0.5
    assert "per-wait epoll set-up" not in new
    wake = new["commit-wait wake-up bound"]
    assert wake["evidence"]["kill_per_commit"] > 0.5
    # one signal a commit; whether the wake-up binds is the commit anatomy's word: the
    # share of a commit it timed in the wake-up queue
    queue = wake["evidence"].get("wakeup_queue_share_of_commit")
    if queue is not None and queue < 0.05:
        assert wake["confidence"] == "low", wake
        assert "not where a commit's time goes" in wake["summary"], wake
    else:
        assert wake["confidence"] in ("high", "medium"), wake
    # 9.6 has no SyncRep wait event: the verdict says so rather than reading 0 %.
    assert "no wait event" in old["commit-wait wake-up bound"]["summary"]
    res = cli_here("diagnose", str(out))
    assert res.returncode == 0, res.stderr
    assert "commit-wait wake-up bound" in res.stdout


def test_the_commit_anatomy_of_9_6_and_18_side_by_side(probed_run: Path) -> None:
    """The seed's contrast at the same load: on 9.6 (SIGUSR1) and 18 (SIGURG) alike, a
    release wakes its waiters one latch at a time, so each commit that slept is woken by
    a kill of its own, and the walsender's release costs time per waiter freed; under
    `local` the commits ask for no standby and no wait is counted."""
    cells = _by_cell([c.to_json() for c in run_costs(probed_run)])  # as costs --json
    for key in ("9.6 on", "18 on"):
        a = cells[key]["anatomy"]
        assert a is not None, cells[key]["probes"].get("anatomy")
        parts = {c["component"]: c for c in a["components"]}
        assert {"local_flush", "commit_wait", "standby_wait", "wakeup_queue",
                "run_queue"} <= set(parts), (key, set(parts))
        sync = next(r for r in a["releases"] if r["walsender"] == "walsender:b")
        # waiters_per_release is a mean: times the releases it is a count again, up to
        # the float's last bit
        freed = round(sync["waiters_per_release"] * sync["releases"])
        woken = parts["run_queue"]["events"]  # waits ended by a kill from a release
        assert woken > 0.3 * parts["commit_wait"]["events"], (key, parts)
        # one kill per waiter: every woken wait was one freed waiter's signal (a waiter
        # freed while it was not asleep yet is freed without one)
        assert woken <= freed <= 1.05 * parts["commit_wait"]["events"], (key, woken, freed)
        assert sync["per_waiter_us"] > 0
    assert "commit_wait" not in {c["component"] for c in
                                 (cells["18 local"]["anatomy"] or {"components": []})[
                                     "components"]}
    text = cli_here("costs", str(probed_run)).stdout
    assert text.count("where a commit's time goes") >= 2


def _strace_counts(text: str) -> dict[str, int]:
    """``strace -c`` summary: calls per system call."""
    counts = {}
    for line in text.splitlines():
        parts = line.split()
        # "% time  seconds  usecs/call  calls  [errors]  syscall"
        if len(parts) >= 5 and parts[0].replace(".", "").isdigit() and parts[3].isdigit():
            counts[parts[-1]] = int(parts[3])
    return counts


def test_syscall_counts_match_an_independent_tracer(
        cluster_dir: Path, make_cluster: Callable[..., Manifest]) -> None:
    """perf's per-process syscall counts against strace's of the same process and interval."""
    import signal
    import subprocess

    from syncrep_lab.pg.installations import resolve
    from syncrep_lab.plan.spec import Workload
    from syncrep_lab.run.workload import prepare_tables, run_pgbench, script_text

    assert shutil.which("strace"), "strace is installed by ./run setup"
    assert perfstat.unavailable_reason() is None, perfstat.unavailable_reason()
    manifest = make_cluster()
    primary = manifest.primary
    pid = server.postmaster_pid(primary.data_dir(cluster_dir))
    assert pid is not None
    senders = walsenders(manifest.admin_conninfo(primary))
    sender = next(p for p in node_processes("primary", pid, senders)
                  if p.label == "walsender:b")
    workload = Workload(clients=4, duration=2)
    script = cluster_dir / "insert.sql"
    script.write_text(script_text(workload, 1, cluster_dir))
    prepare_tables(manifest.admin_conninfo(primary), workload)
    for attempt in (1, 2):
        perf = perfstat.PerfStat([sender], cluster_dir / "perf.csv")
        strace_err = (cluster_dir / "strace.err").open("wb")
        strace = subprocess.Popen(
            ["strace", "-c", "-e", "trace=kill,epoll_wait,sendto,recvfrom,read,write",
             "-o", str(cluster_dir / "strace.txt"), "-p", str(sender.pid)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=strace_err)
        strace_err.close()  # strace has its own copy
        perf.start()

        # both attached before the first commit: strace's attach seen by the kernel,
        # perf's given the same moment
        wait_traced(sender.pid, strace)
        time.sleep(0.3)
        run = run_pgbench(resolve(manifest.bin_dir).program("pgbench"),
                          manifest.conninfo(primary), script, clients=4, threads=2,
                          duration=2, synchronous_commit="on",
                          log_prefix=cluster_dir / "log")
        assert run.summary.transactions and run.summary.transactions > 50
        time.sleep(0.3)  # and both still attached after the last
        strace.send_signal(signal.SIGINT)
        strace.wait(timeout=20)
        counts = perf.stop()[sender.pid].syscalls
        # strace ends by raising the SIGINT it was stopped with (-2), its summary
        # written; it died of SIGSEGV instead (-11, after "detached", no summary) in
        # suites beside a busy loop: the check then has no second tracer to compare
        # with, and is made again once
        if strace.returncode in (0, -signal.SIGINT) or attempt == 2:
            break
    summary = (cluster_dir / "strace.txt").read_text()
    traced = _strace_counts(summary)
    # strace -c prints nothing when it counted no call: what it said, and whether the
    # walsender it traced still serves b (a standby that reconnected has a new one)
    assert traced.get("kill", 0) > 50, (
        summary, (cluster_dir / "strace.err").read_text(errors="replace"), strace.returncode,
        [p for p in node_processes("primary", pid, walsenders(manifest.admin_conninfo(primary)))
         if p.label.startswith("walsender")], sender.pid)
    for name in ("kill", "epoll_wait"):
        # The two tracers start and stop at different instants; between
        # commits the walsender makes at most a few such calls.
        assert abs(counts.get(name, 0) - traced.get(name, 0)) <= 3 + 0.01 * traced[name], (
            name, counts, traced)


@pytest.mark.parametrize(("asked", "frame_pointers", "used"), [
    ("auto", False, "dwarf"), ("auto", True, "fp"), ("dwarf", True, "dwarf"),
    ("fp", False, "fp")])
def test_stacks_are_unwound_by_frame_pointers_on_a_build_that_keeps_them(
        asked: str, frame_pointers: bool, used: str) -> None:
    probes = RepeatProbes(Probes.model_validate({"call_graph": asked}), [], 180000,
                          Path("/nonexistent"), 1.0, frame_pointers=frame_pointers)
    assert probes.call_graph() == used


@pytest.fixture
def zombie() -> Iterator[int]:
    """A child that has exited and is not reaped (yet): a zombie, pid in /proc still."""
    import subprocess

    from syncrep_lab import procs

    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while (fields := procs.stat_fields(child.pid)) is None or fields[procs.STATE] != "Z":
        assert time.monotonic() < deadline, fields
        time.sleep(0.01)
    yield child.pid
    child.wait()


def test_a_zombie_counts_as_gone_and_a_live_process_as_alive(zombie: int) -> None:
    """Every probe decides a pid is alive by procs.alive: a zombie has ended (its /proc
    entry stays until its parent reaps it, for ever under an init that never does)."""
    import os

    from syncrep_lab.pg.roles import NodeProcess
    from syncrep_lab.placement import numa
    from syncrep_lab.probes import gprof

    assert Path(f"/proc/{zombie}").exists()
    live = os.getpid()
    start = time.monotonic()
    gprof._wait_gone([zombie], timeout=5)
    assert time.monotonic() - start < 1
    with pytest.raises(RuntimeError, match=f"walsenders \\[{live}\\] did not exit"):
        gprof._wait_gone([zombie, live], timeout=0.1)
    assert perfstat.attachable([NodeProcess("primary", zombie, "walwriter"),
                                NodeProcess("primary", live, "checkpointer"),
                                NodeProcess("primary", live, "backend")]) == [live]
    with pytest.raises(numa.ProcessGone):
        numa.numa_policy_of(zombie)
    assert numa.numa_policy_of(live) != ""


def _kernel_thread() -> int:
    """A live process with no memory of its own (a kernel thread: PF_KTHREAD in its
    flags), as an exiting process is once its memory is released."""
    from syncrep_lab import procs

    for entry in Path("/proc").iterdir():
        fields = procs.stat_fields(int(entry.name)) if entry.name.isdigit() else None
        if fields and int(fields[procs.STATE + 6]) & 0x00200000:
            return int(entry.name)
    raise AssertionError("no kernel thread in /proc: this test needs the host's pid namespace")


def test_a_process_without_mappings_has_no_policy_to_read_back() -> None:
    """An exiting process's numa_maps is empty before it is a zombie; read as "default" it
    made an interleaved backend look unplaced. Here and on an SSH host's script alike it is
    left out (a kernel thread has no mappings either, and is alive: the same case)."""
    import os
    import subprocess

    from syncrep_lab.hosts.placement import _PLACEMENT_SH
    from syncrep_lab.placement import numa

    kthread, live = _kernel_thread(), os.getpid()
    assert Path(f"/proc/{kthread}/numa_maps").read_text() == ""
    with pytest.raises(numa.ProcessGone):
        numa.numa_policy_of(kthread)
    out = subprocess.run(["sh", "-c", _PLACEMENT_SH, "sh", str(kthread), str(live)],
                         capture_output=True, text=True, check=True).stdout
    assert [line.split("\t")[0] for line in out.splitlines()] == [str(live)], out
    assert out.split("\t")[3] == numa.numa_policy_of(live), out


def test_a_recording_with_no_samples_fails_with_what_perf_script_said(tmp_path: Path
                                                                     ) -> None:
    """An on-CPU recording perf script prints nothing of (a tracepoint no one hits
    stands in for one cut short) is a failure with perf's words, never a probe that
    "ran" and drew nothing."""
    import subprocess

    data = tmp_path / "quiet.perf.data"
    subprocess.run(["perf", "record", "-a", "-e", "syscalls:sys_enter_acct", "-o", str(data),
                    "--", "sleep", "0.2"], capture_output=True, check=True, timeout=60)
    with pytest.raises(RuntimeError, match=r"perf script printed no samples of quiet\.perf\.data"):
        flamegraph.collapse(data)


def test_a_process_s_children_and_title_are_read_without_interning_its_pid(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The tracker reads the children of each postmaster every second and the title of
    each new child: pathlib interned every pid and thread id in those paths, and, freed at
    once, each used up a slot of the interpreter's interned-string table until it was
    remade twice as large (0.9 MiB more RSS after minutes of observe --serve)."""
    import os
    import subprocess
    import sys

    from syncrep_lab import procs
    from syncrep_lab.pg.roles import title

    interned: list[str] = []
    real = sys.intern

    def spy(text: str) -> str:
        interned.append(text)
        return real(text)

    child = subprocess.Popen(["sleep", "30"])
    try:
        monkeypatch.setattr(sys, "intern", spy)
        assert child.pid in procs.children(os.getpid())
        # Popen returns once the child's exec has begun (vfork): its command line is
        # empty until the new program's arguments are in place (seen in a loaded suite)
        deadline = time.monotonic() + 10
        while not title(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert title(child.pid) == "sleep 30"
        monkeypatch.undo()
        assert interned == []
    finally:
        child.kill()
        child.wait()


SPIN = """
import time
end = time.monotonic() + 1.0
while time.monotonic() < end:
    pass
time.sleep(60)
"""


def test_the_tracker_counts_the_wait_for_a_core_and_the_moves() -> None:
    """Two processes spinning for 1 s on one CPU: each is always either running or
    runnable, so its CPU time plus its run delay is its 1 s and a little of its start
    (never more than it lived), and while one runs the other waits, so their run delays
    add up to about the second (more if anything else wants that CPU); born pinned to
    it, they never move (the count allows a move each at birth)."""
    import os
    import subprocess
    import sys

    from syncrep_lab.probes.tracker import HAVE_SCHED, HAVE_SCHEDSTAT, ProcessTracker

    assert HAVE_SCHEDSTAT, "this kernel has no /proc/PID/schedstat"
    cpu = min(os.sched_getaffinity(0))
    # the spinners' parent waits for a line before it starts them: born during the window
    # pinned from birth (the sh is, and they inherit it): a process that starts on any
    # CPU and pins itself later can be moved a few times first, more on a busy machine
    parent = subprocess.Popen(
        ["sh", "-c", f'read go; "{sys.executable}" -c "$0" & "{sys.executable}" -c "$0" & '
                     'wait', SPIN],
        stdin=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    tracker = ProcessTracker({"t": parent.pid}, {}, hz=10.0, numa=False)
    try:
        tracker.begin()
        assert parent.stdin is not None
        start = time.monotonic()
        parent.stdin.write("go\n")
        parent.stdin.flush()
        time.sleep(1.6)  # the spin, their start, and a poll after it
        rows = {r.role: r for r in tracker.finish(reap_timeout=0.0).rows}
        lived_ms = 1000 * (time.monotonic() - start)
    finally:
        tracker.stopping.set()
        os.killpg(parent.pid, 9)
        parent.wait()
    spinners = rows["other"]
    assert spinners.processes == 2, rows
    assert spinners.run_delay_ms is not None
    busy = spinners.user_ms + spinners.system_ms + spinners.run_delay_ms
    # 2 × (1 s + a start), within clock ticks; never more than their lives
    assert 1900 <= busy <= 2 * lived_ms + 20, (spinners, lived_ms)
    assert spinners.run_delay_ms >= 800, spinners
    if HAVE_SCHED:
        assert spinners.migrations is not None and 0 <= spinners.migrations <= 2, spinners
    else:
        assert spinners.migrations is None
    assert rows["postmaster"].run_delay_ms is not None  # the sh, there from the start


def test_the_kernel_share_follows_the_stacks_to_postgresql(probed_run: Path) -> None:
    """The seed's perf report -g reading, from the flame graphs' folded stacks: each
    role's samples that ended in the kernel, and the PostgreSQL function that called
    into it (the C library's wrappers passed over)."""
    on = _by_cell([c.to_json() for c in run_costs(probed_run)])["18 on"]
    kernel = {(k["node"], k["role"]): k for k in on["kernel"]}
    sender = kernel[("primary", "walsender:b")]
    assert 0 < sender["kernel_share"] <= 1 and sender["samples"] > 0, sender
    # the top functions are a part of the kernel's share, each named once with its caller
    assert sender["top"] and sum(f["share"] for f in sender["top"]) <= \
        sender["kernel_share"] + 1e-9, sender
    assert len({(f["function"], f["caller"]) for f in sender["top"]}) == len(sender["top"])
    callers = {f["caller"] for f in sender["top"]}
    assert not any(c.startswith("_") or c in ("kill", "epoll_wait", "read") for c in callers)
    # the backends enter the kernel from PostgreSQL's own functions too
    assert kernel[("primary", "backend")]["top"], kernel[("primary", "backend")]
    res = cli_here("costs", str(probed_run))
    assert res.returncode == 0 and "kernel: primary walsender:b" in res.stdout, res.stdout


def test_the_kernel_share_of_known_stacks() -> None:
    from syncrep_lab.analysis.kernel import role_kernel

    folded = "\n".join([
        "walsender:b;main;WalSndLoop;SyncRepWakeQueue;__GI___kill;entry_SYSCALL_64_[k];"
        "_raw_spin_unlock_irqrestore_[k] 30",
        "walsender:b;main;WalSndLoop;WalSndWait;WaitEventSetWait;epoll_wait;"
        "entry_SYSCALL_64_[k];schedule_[k] 50",
        "walsender:b;main;WalSndLoop;XLogSendPhysical 20",
        # no user frame but the C library's: no caller, never the role's own label
        "walsender:b;[unknown];__GI___kill;entry_SYSCALL_64_[k];do_syscall_64_[k] 10",
        # perf marks the vDSO's frames as the kernel's; they run in user mode
        "walsender:b;main;SyncRepWakeQueue;clock_gettime@@GLIBC_2.17;__vdso_clock_gettime_[k] 40",
        "not a stack line"])
    got = role_kernel("primary", "walsender:b", folded)
    assert got is not None and got.samples == 150
    assert got.kernel_share == pytest.approx(90 / 150)
    assert [(f.function, f.caller, round(f.share * 150)) for f in got.top] == [
        ("schedule", "WaitEventSetWait", 50),
        ("_raw_spin_unlock_irqrestore", "SyncRepWakeQueue", 30),
        ("do_syscall_64", "", 10)]
    assert role_kernel("primary", "walsender:b", "") is None


WRITER = """
import os, sys, time
with open(sys.argv[1], "wb") as f:
    f.write(b"x" * (16 << 20))
    f.flush()
    os.fsync(f.fileno())
time.sleep(60)
"""


def test_the_tracker_counts_the_bytes_a_role_writes() -> None:
    """A process born during the window writes 16 MiB to a file on disk: its role's
    write_bytes (/proc/PID/io) holds them, within 10 % (the file's metadata, the
    journal's share); its reads are a sliver of that."""
    import os
    import subprocess
    import sys

    from syncrep_lab.probes.tracker import ProcessTracker

    target = Path(tempfile.mkdtemp(dir="/var/tmp")) / "written.bin"  # a disk, not tmpfs
    parent = subprocess.Popen(
        ["sh", "-c", f'read go; "{sys.executable}" -c "$0" "$1" & wait', WRITER, str(target)],
        stdin=subprocess.PIPE, text=True, start_new_session=True)
    tracker = ProcessTracker({"t": parent.pid}, {}, hz=10.0, numa=False)
    try:
        tracker.begin()
        assert parent.stdin is not None
        parent.stdin.write("go\n")
        parent.stdin.flush()
        wait_until(lambda: target.exists() and target.stat().st_size == 16 << 20, 30,
                   "the writer's 16 MiB")
        time.sleep(0.5)  # a poll after the write
        result = tracker.finish(reap_timeout=0.0)
        rows = {r.role: r for r in result.rows}
    finally:
        tracker.stopping.set()
        os.killpg(parent.pid, 9)
        parent.wait()
        shutil.rmtree(target.parent, ignore_errors=True)
    writer = rows["other"]
    assert writer.write_bytes is not None and writer.read_bytes is not None, writer
    assert abs(writer.write_bytes - (16 << 20)) <= 0.1 * (16 << 20), writer
    assert writer.read_bytes < 0.1 * (16 << 20), writer
    row = next(r for r in result.cost_rows() if r.role == "other")
    assert (row.read_bytes, row.write_bytes) == (writer.read_bytes, writer.write_bytes)
