"""Placement on real kernel objects: cpusets, affinity, NUMA policies, read back from /proc.

Nothing is simulated: groups are made in the machine's cpuset hierarchy under a
run key unique to each test, processes are real, pinning acts on a real
PostgreSQL cluster. Every group and process made here is removed by fixture
finalizers, also when a test fails.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from syncrep_lab.cluster import server
from syncrep_lab.cluster.build import UpOptions, up
from syncrep_lab.cluster.manifest import Manifest
from syncrep_lab.cluster.teardown import remove_cluster
from syncrep_lab.errors import UserError
from syncrep_lab.pg.roles import node_processes
from syncrep_lab.placement.cgroups import (
    TOP,
    CpusetGroup,
    CpusetSupport,
    cgroup_mounts,
    cpuset_support,
    leftover_runs,
    placement_of,
    probe_v2,
    remove_run,
)
from syncrep_lab.placement.cpus import (
    check_cpus,
    format_cpus,
    machine_cpus,
    numa_nodes,
    parse_cpus,
)
from syncrep_lab.placement.layout import leftovers
from syncrep_lab.placement.numa import check_policy, numa_policy_of, numactl_prefix, numastat
from syncrep_lab.placement.pinning import PinRule, RolePinner
from syncrep_lab.placement.quota import (
    QuotaGroup,
    leftover_quota_runs,
    quota_support,
    remove_quotas,
)
from syncrep_lab.runas import popen_kwargs, server_account

from .helpers import clean_list, machine_wide

BOUND_TO_V1 = "cpuset controller not available in this cgroup2 hierarchy (bound to v1)"


def wait_for(check: Callable[[], bool], timeout: float = 1.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return check()


def cpus_of(pid: int) -> str:
    return str(placement_of(pid)["cpus"])


# --- CPU lists ------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "cpus"), [
    ("0-3,5,7-8", [0, 1, 2, 3, 5, 7, 8]),
    ("5,1,1,0-2", [0, 1, 2, 5]),
    (" 3 ", [3]),
    ("0-0", [0]),
])
def test_parse_cpus(text: str, cpus: list[int]) -> None:
    assert parse_cpus(text) == cpus


@pytest.mark.parametrize(("text", "words"), [
    ("", "empty"),
    ("   ", "empty"),
    ("3-1", "backwards"),
    ("a", "not a CPU"),
    ("1,,2", "not a CPU"),
    ("-1", "not a CPU"),
    ("0-7:2", "not a CPU"),
    ("0-999999", "beyond"),
])
def test_parse_cpus_refuses(text: str, words: str) -> None:
    with pytest.raises(UserError) as info:
        parse_cpus(text)
    assert words in info.value.cause
    assert info.value.fix


@pytest.mark.parametrize(("cpus", "text"), [
    ([0, 1, 2, 3, 5], "0-3,5"), ([7, 8, 5, 0, 1, 2, 3], "0-3,5,7-8"), ([4], "4"), ([], ""),
    ([1, 3, 5], "1,3,5"),
])
def test_format_cpus(cpus: list[int], text: str) -> None:
    assert format_cpus(cpus) == text
    if cpus:
        assert parse_cpus(text) == sorted(set(cpus))


def test_check_cpus_names_the_machines_cpus() -> None:
    have = machine_cpus()
    assert have == sorted(os.sched_getaffinity(0))
    assert check_cpus(format_cpus(have), "pin.walwriter") == have
    beyond = max(have) + 6  # CPU 7 on this 2-CPU machine
    with pytest.raises(UserError) as info:
        check_cpus(f"0,{beyond}", "placements.x.cpus.b")
    cause = info.value.cause
    assert cause.startswith("placements.x.cpus.b: ")
    assert f"CPU {beyond} not on this machine" in cause
    assert f"(it has CPUs {format_cpus(have)})" in cause
    with pytest.raises(UserError, match="backwards"):
        check_cpus("1-0", "here")


def test_numa_nodes_from_sysfs() -> None:
    expected = sorted(int(p.name[4:]) for p in Path("/sys/devices/system/node").glob("node*")
                      if p.name[4:].isdigit())
    assert numa_nodes() == expected


# --- cgroup v1 cpusets ----------------------------------------------------------------


@pytest.fixture(scope="module")
def support() -> CpusetSupport:
    found = cpuset_support()
    if not found.usable:
        pytest.skip(f"cpusets not usable here: {found.reason}")
    return found


@pytest.fixture
def run_key(support: CpusetSupport) -> Iterator[str]:
    # The tool's own key form (DIGEST-PIDiK): clean, run by a test on another worker,
    # sees this process alive and leaves the groups alone instead of removing them.
    key = f"t{uuid.uuid4().hex[:8]}-{os.getpid()}i0"
    yield key
    remove_run(support, key)
    assert support.root is not None
    assert not (support.root / TOP / key).exists()


@pytest.fixture
def procs() -> Iterator[list[int]]:
    """Pids to kill at the end (children are also reaped)."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def test_support_is_detected_from_mountinfo(support: CpusetSupport) -> None:
    mounts = cgroup_mounts()
    v1 = [m for m in mounts if m.fstype == "cgroup" and "cpuset" in m.super_options]
    if v1:
        assert support.version == 1
        assert support.root == v1[0].mount_point
    else:
        assert support.version == 2
    assert support.reason is None


def test_group_holds_a_child_and_a_later_grandchild(support: CpusetSupport, run_key: str,
                                                    procs: list[int]) -> None:
    group = CpusetGroup.create(support, run_key, "g1", [1])
    assert support.root is not None
    assert group.path == support.root / TOP / run_key / "g1"
    assert group.effective_cpus() == [1]
    with group.join_fn() as join:
        child = subprocess.Popen(["sleep", "30"], preexec_fn=join)
        procs.append(child.pid)
        # The shell joins the group before exec; the sleep it forks afterwards
        # inherits the group from it.
        shell = subprocess.Popen(["sh", "-c", "sleep 0.2; sleep 30 & echo $!; wait"],
                                 preexec_fn=join, stdout=subprocess.PIPE, text=True)
        procs.append(shell.pid)
    assert shell.stdout is not None
    grandchild = int(shell.stdout.readline())
    procs.append(grandchild)
    cgroup = f"/{TOP}/{run_key}/g1"
    for pid in (child.pid, shell.pid, grandchild):
        placed = placement_of(pid)
        assert placed["cpus"] == "1", (pid, placed)
        assert placed["cgroup"] == cgroup
        assert placed["numa_policy"] == "default"
    assert {child.pid, shell.pid, grandchild} <= set(group.pids())
    # An outside process is not there until it is added.
    outsider = subprocess.Popen(["sleep", "30"])
    procs.append(outsider.pid)
    assert outsider.pid not in group.pids()
    assert placement_of(outsider.pid)["cgroup"] == "/"
    group.add_pid(outsider.pid)
    assert outsider.pid in group.pids()
    assert cpus_of(outsider.pid) == "1"
    # Removing the run moves the living processes back to the root group.
    remove_run(support, run_key)
    assert not group.path.parent.exists()
    for pid in (child.pid, grandchild, outsider.pid):
        assert placement_of(pid)["cgroup"] == "/"
        assert cpus_of(pid) == format_cpus(machine_cpus())
    remove_run(support, run_key)  # idempotent


def test_join_fn_works_for_a_server_account(support: CpusetSupport, run_key: str,
                                            procs: list[int]) -> None:
    """Servers run as an unprivileged account, and subprocess runs preexec_fn after
    switching to it: the join must still work (the file was opened as root)."""
    account = server_account()
    group = CpusetGroup.create(support, run_key, "server", [0])
    with group.join_fn() as join:
        child = subprocess.Popen(["sleep", "30"], preexec_fn=join, **popen_kwargs(account))
    procs.append(child.pid)
    assert os.stat(f"/proc/{child.pid}").st_uid == account.uid
    assert placement_of(child.pid)["cgroup"] == f"/{TOP}/{run_key}/server"
    assert cpus_of(child.pid) == "0"


def test_refusals_leave_nothing_behind(support: CpusetSupport, run_key: str) -> None:
    assert support.root is not None
    run_dir = support.root / TOP / run_key
    beyond = max(machine_cpus()) + 6
    with pytest.raises(UserError) as info:
        CpusetGroup.create(support, run_key, "far", [0, beyond])
    assert f"CPU {beyond} outside the parent cgroup's CPUs {format_cpus(machine_cpus())}" \
        in info.value.cause
    assert not run_dir.exists()
    with pytest.raises(UserError, match="NUMA node 3 outside"):
        CpusetGroup.create(support, run_key, "far", [0], mems=[3])
    for bad in ("../x", "", "a/b", ".hidden", "x" * 65):
        with pytest.raises(UserError, match="cannot name a cgroup directory"):
            CpusetGroup.create(support, bad, "g", [0])
        with pytest.raises(UserError, match="cannot name a cgroup directory"):
            CpusetGroup.create(support, run_key, bad, [0])
    with pytest.raises(UserError, match="at least one CPU"):
        CpusetGroup.create(support, run_key, "none", [])
    assert not run_dir.exists()
    with pytest.raises(UserError, match="does not exist"):
        CpusetGroup.create(support, run_key, "g", [0]).add_pid(2 ** 22 + 1)
    # A gone process is a UserError, and an OSError for read-back loops.
    for read_back in (placement_of, numa_policy_of):
        with pytest.raises(ProcessLookupError, match="does not exist"):
            read_back(2 ** 22 + 1)
    with pytest.raises(UserError, match="no cpuset"):
        CpusetGroup.open(support, run_key, "missing")


def test_leftover_runs_finds_a_crashed_run(support: CpusetSupport, procs: list[int]) -> None:
    # leftover_runs lists every key, live or not; the owner in the key is this process,
    # so a clean on another worker meanwhile does not take the group away
    key = f"crashed{uuid.uuid4().hex[:6]}-{os.getpid()}i0"
    try:
        group = CpusetGroup.create(support, key, "primary", [0, 1])
        sleeper = subprocess.Popen(["sleep", "30"], preexec_fn=group.join_fn())
        procs.append(sleeper.pid)
        del group  # the run "crashes": nothing refers to its groups any more
        assert key in leftover_runs(support)
        assert CpusetGroup.open(support, key, "primary").pids() == [sleeper.pid]
    finally:
        remove_run(support, key)
    assert key not in leftover_runs(support)
    assert placement_of(sleeper.pid)["cgroup"] == "/"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_cgroup(pid: int) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return path
    return ""


@machine_wide
def test_a_cpu_quota_holds_a_busy_process_and_clean_removes_it(procs: list[int]) -> None:
    support = quota_support()
    assert support.usable, support.reason  # cgroup v1's cpu controller, as root
    gone = subprocess.Popen(["true"])
    gone.wait()
    key = f"crashed{os.getpid()}-{gone.pid}i1"  # its owner (the pid after the -) is gone
    group = QuotaGroup.create(support, key, "primary-walsender-b", 0.05)
    try:
        # 5 % of a CPU: the kernel's smallest quota, 1 ms, in periods of 20 ms
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        procs.append(busy.pid)
        group.add_pid(busy.pid)
        assert group.pids() == [busy.pid]
        before, used = group.figures(), _cpu_seconds(busy.pid)
        time.sleep(1.0)
        after, used = group.figures(), _cpu_seconds(busy.pid) - used
        assert before is not None and after is not None
        grown = after.since(before)
        assert (grown.quota_us, grown.period_us) == (1000, 20_000)
        # ~50 periods in the second, nearly each one used up; it waited most of the time
        assert 25 <= grown.periods <= 60 and grown.throttled >= 0.8 * grown.periods, grown
        assert grown.throttled_ns > 0.5e9, grown
        assert used < 0.15, used  # 0.05 s of CPU, in ticks of 10 ms
        assert _cpu_cgroup(busy.pid).endswith(f"/{key}/primary-walsender-b")
        # the run was killed: `clean --list` names its quota group and leaves it
        assert key in leftover_quota_runs(support)
        assert f"CPU quota group {key} (no cluster recorded it)" in clean_list()
        assert key in leftover_quota_runs(support)
        # and clean removes it, putting the process back
        assert f"CPU quota group {key}" in leftovers()
        assert key not in leftover_quota_runs(support)
        assert not group.path.exists() and _cpu_cgroup(busy.pid) == "/"
    finally:
        remove_quotas(key, support)


def test_exclusive_v1(support: CpusetSupport, run_key: str) -> None:
    if support.version != 1:
        pytest.skip("v1 exclusivity")
    assert support.root is not None
    others = [k for k in leftover_runs(support) if k != run_key]
    if others:
        pytest.skip(f"other runs' cpusets exist ({', '.join(others)}); an exclusive cpuset "
                    "would collide with them")
    top = support.root / TOP
    group = CpusetGroup.create(support, run_key, "walwriter", [1], exclusive=True)
    assert group.exclusive()
    for path in (top, top / run_key, group.path):
        assert (path / "cpuset.cpu_exclusive").read_text().strip() == "1", path
    # A sibling overlapping an exclusive cpuset is refused before it is made.
    with pytest.raises(UserError) as info:
        CpusetGroup.create(support, run_key, "rest", [0, 1])
    assert "would share CPU 1" in info.value.cause
    assert f"the exclusive cpuset /{TOP}/{run_key}/walwriter" in info.value.cause
    assert not (top / run_key / "rest").exists()
    beside = CpusetGroup.create(support, run_key, "rest", [0])
    assert beside.effective_cpus() == [0] and not beside.exclusive()
    remove_run(support, run_key)
    # The shared directory is gone, or no longer exclusive for other cpusets.
    assert not top.exists() or (top / "cpuset.cpu_exclusive").read_text().strip() == "0"


# --- cgroup v2 ------------------------------------------------------------------------


@pytest.fixture
def private_cgroup2() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="srl-cg2-", dir="/tmp"))
    mounted = subprocess.run(["mount", "-t", "cgroup2", "none", str(path)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        path.rmdir()
        pytest.skip(f"cannot mount cgroup2: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False)
        path.rmdir()


def test_v2_detection_says_why_cpuset_is_missing(private_cgroup2: Path) -> None:
    assert any(m.fstype == "cgroup2" and m.mount_point == private_cgroup2
               for m in cgroup_mounts())
    controllers = (private_cgroup2 / "cgroup.controllers").read_text().split()
    found = probe_v2(private_cgroup2)
    assert found.version == 2 and found.root == private_cgroup2
    if "cpuset" in controllers:
        assert found.usable
        return
    assert not found.usable
    assert found.reason is not None and found.fix is not None
    if cgroup_mounts() and any(m.fstype == "cgroup" and "cpuset" in m.super_options
                               for m in cgroup_mounts()):
        assert BOUND_TO_V1 in found.reason
        assert "cgroup_no_v1" in found.reason
        # The automatic choice restricted to v2 says the same about the machine's mount.
        machine_v2 = cpuset_support(version=2)
        assert machine_v2.version == 2 and machine_v2.reason is not None
        assert BOUND_TO_V1 in machine_v2.reason
    # Making a group there is refused with that reason, and nothing is written.
    with pytest.raises(UserError) as info:
        CpusetGroup.create(found, "k", "g", [0])
    assert found.reason == f"{info.value.cause.removeprefix('cpusets cannot be made here: ')}; " \
        f"{info.value.fix}"
    assert not (private_cgroup2 / TOP).exists()
    remove_run(found, "k")  # a no-op, not an error
    assert leftover_runs(found) == []
    assert not probe_v2(Path("/tmp")).usable  # not a cgroup2 mount at all


# --- pinning on a real PostgreSQL -----------------------------------------------------


@pytest.fixture(scope="module")
def cluster(lab_home: Path) -> Iterator[Manifest]:
    path = Path(tempfile.mkdtemp(prefix="srl-pl-", dir="/tmp"))
    path.chmod(0o755)
    # A quick reconnect, so that a terminated walsender comes back within the test.
    manifest = up(UpOptions(dir=path / "c", standbys=1,
                            settings={"wal_retrieve_retry_interval": "100ms"}))
    try:
        yield manifest
    finally:
        remove_cluster(path / "c")
        shutil.rmtree(path, ignore_errors=True)


def _postmaster(manifest: Manifest, node: str) -> int:
    pid = server.postmaster_pid(manifest.node(node).data_dir(manifest.dir))
    assert pid is not None
    return pid


class Walsenders:
    """walsender_of from pg_stat_replication, on one connection shared under a lock.

    A walsender is listed there only after START_REPLICATION, a few milliseconds
    after its title says "walsender"; a poll usually falls after that. To make
    the pinner's retry deterministic, each pid is reported unknown on its first
    ``unknown_first`` asks, as it would be when a poll falls in that window.
    """

    def __init__(self, conninfo: str, unknown_first: int = 0) -> None:
        self.conn = psycopg.connect(conninfo, autocommit=True)
        self.lock = threading.Lock()
        self.unknown_first = unknown_first
        self.asks: dict[int, int] = {}

    def rows(self) -> dict[int, str]:
        with self.lock:
            return {int(r[0]): str(r[1]) for r in self.conn.execute(
                "select pid, application_name from pg_stat_replication")}

    def __call__(self, pid: int) -> str | None:
        self.asks[pid] = self.asks.get(pid, 0) + 1
        if self.asks[pid] <= self.unknown_first:
            return None
        return self.rows().get(pid)

    def close(self) -> None:
        self.conn.close()


def _role_pid(postmaster: int, label: str, senders: dict[int, str] | None = None) -> int:
    found = [p.pid for p in node_processes("n", postmaster, senders) if p.label == label]
    assert len(found) == 1, (label, found)
    return found[0]


def test_role_pinner_pins_roles_and_later_processes(cluster: Manifest) -> None:
    primary = cluster.primary
    admin = cluster.admin_conninfo(primary)
    pm = _postmaster(cluster, "primary")
    senders = Walsenders(admin, unknown_first=3)
    rules = [PinRule("walsender:b", [1]), PinRule("walwriter", [1]), PinRule("backend", [0])]
    pinner = RolePinner(pm, rules, senders)
    try:
        pinner.start()
        walwriter = _role_pid(pm, "walwriter")
        sender = _role_pid(pm, "walsender:b", senders.rows())
        checkpointer = _role_pid(pm, "checkpointer")
        with psycopg.connect(admin, autocommit=True) as conn:
            row = conn.execute("select pg_backend_pid()").fetchone()
            assert row is not None
            backend = int(row[0])
            assert wait_for(lambda: cpus_of(backend) == "0"), placement_of(backend)
            assert wait_for(lambda: cpus_of(walwriter) == "1")
            assert wait_for(lambda: cpus_of(sender) == "1")
            assert cpus_of(checkpointer) == format_cpus(machine_cpus())  # no rule: untouched
            # The thread records a pin just after the kernel shows it: a pass of
            # our own waits for the pass in flight before the record is read.
            pinner.poll()
            applied = pinner.applied
            assert applied[backend] == ("backend", [0])
            assert applied[walwriter] == ("walwriter", [1])
            assert applied[sender] == ("walsender:b", [1])
            # A walsender that starts later (b reconnects) is named once
            # pg_stat_replication lists it, then pinned.
            conn.execute("select pg_terminate_backend(%s)", (sender,))
            assert wait_for(lambda: any(p != sender for p in senders.rows()), timeout=10)
            new_sender = next(p for p in senders.rows() if p != sender)
            assert wait_for(lambda: cpus_of(new_sender) == "1", timeout=2)
            pinner.poll()
            assert pinner.applied[new_sender] == ("walsender:b", [1])
            assert senders.asks[new_sender] == 4  # unknown three times, then named
            assert sender not in pinner.applied  # gone processes are dropped
        assert pinner.errors == []
    finally:
        pinner.stop()
        senders.close()


def test_role_pinner_moves_a_process_out_of_a_narrow_cpuset(
        cluster: Manifest, support: CpusetSupport, run_key: str) -> None:
    """CPUs outside a process's cpuset cannot be set with sched_setaffinity (EINVAL):
    the pinner moves the process to the group move_to gives, then pins it."""
    pm = _postmaster(cluster, "primary")
    bgwriter = _role_pid(pm, "bgwriter")
    narrow = CpusetGroup.create(support, run_key, "narrow", [0])
    wide = CpusetGroup.create(support, run_key, "wide", [1])
    narrow.add_pid(bgwriter)
    assert cpus_of(bgwriter) == "0"
    asked: list[str] = []

    def move_to(rule: PinRule) -> CpusetGroup | None:
        asked.append(rule.role)
        return wide

    pinner = RolePinner(pm, [PinRule("bgwriter", [1])], lambda pid: None, move_to=move_to)
    pinner.poll()
    assert asked == ["bgwriter"]
    assert placement_of(bgwriter)["cgroup"] == f"/{TOP}/{run_key}/wide"
    assert cpus_of(bgwriter) == "1"
    assert pinner.applied[bgwriter] == ("bgwriter", [1])
    # Without move_to the failure is reported, not raised.
    narrow.add_pid(bgwriter)
    stuck = RolePinner(pm, [PinRule("bgwriter", [1])], lambda pid: None)
    stuck.poll()
    assert bgwriter not in stuck.applied
    assert any("could not pin to CPUs 1" in e and "allows CPUs 0" in e for e in stuck.errors)


def test_role_pinner_refuses_bad_rules(cluster: Manifest) -> None:
    pm = _postmaster(cluster, "primary")
    for rule, words in ((PinRule("walwritr", [0]), "not a process role"),
                        (PinRule("walwriter:b", [0]), "not a process role"),
                        (PinRule("walsender:", [0]), "not a process role"),
                        (PinRule("walwriter", []), "no CPUs"),
                        (PinRule("walwriter", [max(machine_cpus()) + 6]), "not on this machine")):
        with pytest.raises(UserError, match=words):
            RolePinner(pm, [rule], lambda pid: None)
    with pytest.raises(UserError, match="interval"):
        RolePinner(pm, [], lambda pid: None, interval=0)
    with pytest.raises(UserError, match="not running"):
        RolePinner(2 ** 22 + 1, [], lambda pid: None)


# --- NUMA -----------------------------------------------------------------------------


def _exec_done(pid: int, comm: str) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == comm
    except OSError:
        return False


@pytest.mark.parametrize(("policy", "shown"), [
    ("interleave=all", "interleave:"),
    ("localalloc", "local"),
    ("bind=0", "bind:0"),
    ("preferred=0", "prefer:0"),
    ("default", "default"),
])
def test_numactl_policy_is_read_back(policy: str, shown: str, procs: list[int]) -> None:
    prefix = numactl_prefix(policy)
    assert (prefix == []) == (policy == "default")
    child = subprocess.Popen([*prefix, "sleep", "5"])
    procs.append(child.pid)
    assert wait_for(lambda: _exec_done(child.pid, "sleep"))
    got = numa_policy_of(child.pid)
    assert got.startswith(shown), got
    assert placement_of(child.pid)["numa_policy"] == got


def test_numa_policies_name_the_machines_nodes() -> None:
    nodes = format_cpus(numa_nodes())
    absent = max(numa_nodes()) + 3  # node 3 on a one-node machine
    for policy in (f"bind={absent}", f"preferred={absent}", f"interleave=0,{absent}"):
        with pytest.raises(UserError) as info:
            numactl_prefix(policy)
        assert f"node {absent} not on this machine" in info.value.cause
        assert f"(it has node{'s' if len(numa_nodes()) > 1 else ''} {nodes})" in info.value.cause
        problem = check_policy(policy)
        assert problem is not None and f"node {absent}" in problem
        assert check_policy(policy, machine=False) is None
    for bad in ("interleave", "bind=", "membind=0", "preferred=0,1", "interleave=x", "local"):
        assert check_policy(bad) is not None, bad
        with pytest.raises(UserError):
            numactl_prefix(bad)
    assert check_policy("interleave=all") is None
    assert check_policy("default") is None
    assert numactl_prefix("bind=0")[1:] == ["--cpunodebind=0", "--membind=0"]


def test_numastat_per_node_figures(procs: list[int]) -> None:
    child = subprocess.Popen(["sleep", "5"])
    procs.append(child.pid)
    assert wait_for(lambda: _exec_done(child.pid, "sleep"))
    gone = 2 ** 22 + 1
    stats = numastat([child.pid, gone])
    assert stats["available"] and stats["reason"] is None
    first = str(numa_nodes()[0])
    per_node = stats["processes"][child.pid]
    assert set(per_node) == {str(n) for n in numa_nodes()}
    assert per_node[first] > 0
    detail = stats["detail"][child.pid]
    assert detail["command"] == "sleep"
    assert detail["nodes"][first]["Total"] == per_node[first]
    assert detail["nodes"][first]["Private"] > 0
    assert detail["total"]["Total"] == pytest.approx(sum(per_node.values()), abs=0.02)
    assert stats["total"] == per_node
    assert gone not in stats["processes"] and "gone" in stats["errors"][gone]
    system = stats["system"][first]
    assert system["MemFree"] > 0 and system["MemUsed"] > 0
    assert system["MemTotal"] == pytest.approx(system["MemFree"] + system["MemUsed"], abs=1)
