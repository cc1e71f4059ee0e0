"""The lock probe in a guest of Debian 12's kernel: PostgreSQL 9.6 against 18 at the same
load, the primary in the guest (its kernel has kprobes and the lock tracepoints), its
standby b here. What the kernel's source says: 9.6 makes an epoll set for each wait and
closes it after, and each close takes a mutex of epoll's (fs/eventpoll.c), before
Linux 6.4's rework the global epmutex; 18 keeps one set per process, so its commits
take none. Under TCG the emulated vCPU seldom lets two
backends meet on a lock, so the test asserts the takes, not the waits."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncrep_lab.pg.installations import Installation

from .helpers import cli, needs_guests, shared_tmp

pytestmark = needs_guests

SPEC = """\
name = "guest-locks"

[topology]
standbys = 1
sync = "b"
clone = "basebackup"
guests = { count = 1, vcpus = 1, memory_mb = 1024 }
hosts = { primary = "guest1" }

[workload]
clients = 4
duration = 3
warmup = 1

[matrix]
pg = ["9.6", "18"]

[run]
repeats_min = 1
repeats_max = 1
reset = "none"  # nothing here depends on the table's size; a checkpoint in TCG is slow

[probes]
locks = true
perf = false
flamegraphs = false
anatomy = false
sched = false
"""


# Debian 12's kernel before it took in Linux 6.4's rework of fs/eventpoll.c (6.1.0-57
# has it: a close takes the set's own mutex): there every close of an epoll set takes
# the one global epmutex, the seed's lock. Where the archive no longer serves it, the
# default kernel is run and the set's own mutex asserted instead.
OLD_KERNEL = "linux-image-6.1.0-47-cloud-amd64"


def _old_kernel() -> bool:
    return subprocess.run(["apt-cache", "show", OLD_KERNEL], capture_output=True,
                          check=False).returncode == 0


@pytest.fixture(scope="module")
def locks_run(pg96: Installation
              ) -> Iterator[tuple[Path, subprocess.CompletedProcess[str], bool]]:
    """One run of SPEC (on OLD_KERNEL where there is one: the third item says), with a
    tool home a guest sees: the session's is on /dev/shm, which a guest mounts its own
    of, so 9.6 is copied beside it under /tmp."""
    work = shared_tmp("srl-locks-")
    home = work / "home"
    bundle = pg96.bin_dir.parent
    shutil.copytree(bundle, home / "cache" / "pg" / bundle.name, symlinks=True)
    for path in [home, *home.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
    old = _old_kernel()
    (work / "spec.toml").write_text(SPEC.replace(
        "memory_mb = 1024", f'memory_mb = 1024, kernel = "{OLD_KERNEL}"' if old else
        "memory_mb = 1024"))
    env = {"SYNCREP_LAB_HOME": str(home)}
    res = cli("run", str(work / "spec.toml"), "--out", str(work / "run"), timeout=900,
              env=env)
    yield work / "run", res, old
    cli("clean", timeout=300, env=env)
    shutil.rmtree(work, ignore_errors=True)


def test_96_s_waits_take_epoll_s_mutex_and_18_s_do_not(
        locks_run: tuple[Path, subprocess.CompletedProcess[str], bool]) -> None:
    out, res, old_kernel = locks_run
    assert res.returncode == 0, res.stdout + res.stderr
    cells = {c["label"]: c for c in json.loads(
        cli("costs", str(out), "--json").stdout)}
    assert set(cells) == {"pg=9.6", "pg=18"}, sorted(cells)
    for label, cell in cells.items():
        locks = cell["locks"]
        assert locks is not None, (label, cell["probes"])
        # the guest's kernel: kprobes, so every mutex take was counted
        assert any("every take of a mutex" in n for n in locks["notes"]), locks["notes"]
        assert locks["epoll_takes_per_commit"] is not None, locks
    old = cells["pg=9.6"]["locks"]
    new = cells["pg=18"]["locks"]
    said = {label: (c["locks"]["epoll_close_takes_per_commit"],
                    [(s["role"], s["lock"], s["caller"], s["user_stack"],
                      (s["acquisitions_per_commit"] or {}).get("mean"))
                     for s in c["locks"]["sites"][:8]]) for label, c in cells.items()}
    # 9.6: a wait set made and closed for each wait of a backend's (SyncRepWaitForLSN's
    # WaitLatch among them, where the standby had not confirmed the commit yet), each
    # close taking a mutex of epoll's: 0.81 a commit in a run here, from close() (the
    # user frame above the system call, where it could be named)
    assert old["epoll_close_takes_per_commit"] >= 0.3, said
    closing = [s for s in old["sites"] if s["role"] == "backend"
               and s["caller"] in ("ep_free", "ep_clear_and_put", "ep_eventpoll_release")]
    assert closing and all("close" in s["user_stack"].split(" < ")[0] for s in closing
                           if s["user_stack"]), said
    # 18: one wait set for a process's life, so a commit closes none (0.019 a commit in
    # that run: the backends' own at their exit, over all the repeat's commits); its
    # epoll_wait takes its set's mutex as 9.6's does
    assert new["epoll_close_takes_per_commit"] < 0.1 * old["epoll_close_takes_per_commit"], \
        said
    assert new["epoll_takes_per_commit"] > 0, said
    if old_kernel:
        # the seed's lock: each of 9.6's closes takes the global epmutex (0.87 a commit
        # in a run of this spec on OLD_KERNEL), 18's commits none
        assert old["epmutex_takes_per_commit"] >= 0.3, said
        assert any(s["lock"] == "epmutex" and s["caller"] == "ep_free"
                   for s in old["sites"] if s["role"] == "backend"), said
        assert new["epmutex_takes_per_commit"] < 0.1 * old["epmutex_takes_per_commit"], \
            said
    else:
        # on a kernel with the rework the closes take the set's own mutex, never epmutex
        assert old["epmutex_takes_per_commit"] == 0, said
    text = cli("costs", str(out)).stdout
    assert "epoll's mutexes:" in text, text
    page = " ".join((out / "report.html").read_text().split())
    assert 'id="locks-' in page and "Epoll's mutexes:" in page
