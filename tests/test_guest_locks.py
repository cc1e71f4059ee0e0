"""The lock probe in a guest of Debian 12's kernel: PostgreSQL 9.6 against 18 at the same
load, the primary in the guest (its kernel has kprobes and the lock tracepoints), its
standby b here. What the kernel's source says: 9.6 makes an epoll set for each wait and
closes it after, and each close takes a mutex of epoll's (fs/eventpoll.c), before
Linux 6.4's rework the global epmutex; 18 keeps one set per process, so its commits
take none. Under TCG the emulated vCPU seldom lets two
backends meet on a lock, so the test asserts the takes, not the waits."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from syncrep_lab.analysis.locks import EPOLL_CALLERS
from syncrep_lab.pg.installations import Installation

from .helpers import cli, machine_wide, needs_guests, shared_tmp

pytestmark = [needs_guests, machine_wide]

SPEC = """\
name = "guest-locks"

[topology]
standbys = 1
sync = "b"
clone = "basebackup"
guests = { count = 1, vcpus = 1, memory_mb = 1024, numa_nodes = 2 }
hosts = { primary = "guest1" }

[workload]
clients = 4
# 6 s, not 3: what 18 closes is its connections' (a few a backend), so per commit it
# shrinks as a repeat's commits grow, and on a loaded machine the probed repeat's were few
duration = 6
warmup = 1

[matrix]
pg = ["9.6", "18"]
# the same cells with the primary here, on this machine's kernel
kernel = ["host", "debian-6.1"]
# the primary's memory interleaved over the guest's two virtual NUMA nodes (and here, over
# this machine's one)
placement = ["il"]

[placements.il]
numa = { primary = "interleave=all" }

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


# 18's closes of epoll sets are its connections': a new backend's close of the
# postmaster's set and its own at exit (2 to 4 a connection in runs here). The probed
# repeat's connections: the 4 clients and the tool's own sessions (a few)
CLOSES_A_CONNECTION = 5
CONNECTIONS = 4 + 8


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
    text = SPEC.replace("memory_mb = 1024,", f'memory_mb = 1024, kernel = "{OLD_KERNEL}",')
    (work / "spec.toml").write_text(text.replace('"debian-6.1"]', f'"{OLD_KERNEL}"]') if old
                                    else SPEC)
    env = {"SYNCREP_LAB_HOME": str(home)}
    # 4 min 32 s on a quiet machine, 9 min in a suite on a fresh one; a guest's bpftrace
    # may take up to 4 min to attach (probes/host_anatomy.GUEST_ATTACH_SECONDS)
    res = cli("run", str(work / "spec.toml"), "--out", str(work / "run"), timeout=1500,
              env=env)
    yield work / "run", res, old
    cli("clean", timeout=300, env=env)
    shutil.rmtree(work, ignore_errors=True)


def _key(label: str) -> tuple[str, str]:
    """(PostgreSQL, kernel) of a cell's label."""
    axes = dict(part.split("=", 1) for part in label.split())
    return axes["pg"], axes["kernel"]


def _by_role(locks: dict[str, Any]) -> dict[str, float]:
    """Epoll's mutex takes per commit by role, from a cell's ``locks``."""
    out: dict[str, float] = {}
    for s in locks["sites"]:
        if s["caller"].startswith(EPOLL_CALLERS):
            taken = (s["acquisitions_per_commit"] or {}).get("mean") or 0.0
            out[s["role"]] = round(out.get(s["role"], 0.0) + taken, 3)
    return out


def test_96_s_waits_take_epoll_s_mutex_and_18_s_do_not(
        locks_run: tuple[Path, subprocess.CompletedProcess[str], bool]) -> None:
    out, res, old_kernel = locks_run
    assert res.returncode == 0, res.stdout + res.stderr
    kernel = OLD_KERNEL if old_kernel else "debian-6.1"
    every = {_key(c["label"]): c for c in json.loads(cli("costs", str(out), "--json").stdout)}
    assert set(every) == {(v, k) for v in ("9.6", "18") for k in ("host", kernel)}, \
        sorted(every)
    # kernel = "host": the primary ran here, and the probe with it, on this machine's
    # kernel (no kprobes here: the waits alone), not the guest's
    for version in ("9.6", "18"):
        [said] = every[(version, "host")]["probes"]["locks"]
        assert said.startswith(f"ran: kernel {os.uname().release}:"), said
    # each cluster says where its primary ran: here under "host", in guest1 otherwise
    db = sqlite3.connect(out / "syncrep-lab.sqlite")
    placed = sorted((json.loads(key)[-1], next(n.get("host") for n in json.loads(nodes)
                                               if n["role"] == "primary"))
                    for key, nodes in db.execute("select cluster_key, nodes_json "
                                                 "from clusters"))
    db.close()
    assert placed == sorted([("host", None)] * 2 + [(kernel, "guest1")] * 2), placed
    cells = {f"pg={v}": c for (v, k), c in every.items() if k == kernel}
    for label, cell in cells.items():
        locks = cell["locks"]
        assert locks is not None, (label, cell["probes"].get("locks"), cell["probes"])
        # the guest's kernel: kprobes, so every mutex take was counted
        assert any("every take of a mutex" in n for n in locks["notes"]), locks["notes"]
        assert locks["epoll_takes_per_commit"] is not None, locks
    old = cells["pg=9.6"]["locks"]
    new = cells["pg=18"]["locks"]
    # each cell's three figures first (a failure's message is cut at its end), then its
    # backends' epoll sites
    said = {label: ([round(c["locks"][f"{k}_takes_per_commit"] or 0.0, 3)
                     for k in ("epoll", "epoll_close", "epmutex")],
                    [(s["lock"], s["caller"], s["user_stack"],
                      round((s["acquisitions_per_commit"] or {}).get("mean") or 0.0, 3))
                     for s in c["locks"]["sites"] if s["role"] == "backend"][:6])
            for label, c in cells.items()}
    # 9.6: a wait set made and closed for each wait of a backend's (SyncRepWaitForLSN's
    # WaitLatch among them, where the standby had not confirmed the commit yet), each
    # close taking a mutex of epoll's: 0.81 a commit in a run here, from close() (the
    # user frame above the system call, where it could be named)
    assert old["epoll_close_takes_per_commit"] >= 0.3, said
    closing = [s for s in old["sites"] if s["role"] == "backend"
               and s["caller"] in ("ep_free", "ep_clear_and_put", "ep_eventpoll_release")]
    assert closing and all("close" in s["user_stack"].split(" < ")[0] for s in closing
                           if s["user_stack"]), said
    # 18: one wait set for a process's life, so a commit closes none. What it closes is
    # its connections': a new backend's close of the postmaster's set, and its own at
    # its exit, a few a connection however many commits it made. Per commit that grows
    # as the emulated guest slows: 0.019 a commit in a run on a quiet machine, 0.134
    # (13 % of 9.6's) beside a second guest and the rest of the suite
    # In a suite beside heavy tests the guest once ran a few commits a cell: 9.6's closes
    # were 1.89 a commit, 18's 1.22, nearly all its connections' then. Those are bounded
    # by the connections whatever the commits, 9.6's grow with the commits: where the
    # per-commit bound fails, 18's closes in all are held to a few a connection
    db = sqlite3.connect(out / "syncrep-lab.sqlite")
    [(commits,)] = db.execute(
        "select sum(r.transactions) from repeats r join cells c on c.id = r.cell_id "
        "where c.label = ? and r.probed = 1", (cells["pg=18"]["label"],)).fetchall()
    db.close()
    closes = new["epoll_close_takes_per_commit"] * (commits or 0)
    assert (new["epoll_close_takes_per_commit"] < 0.3 * old["epoll_close_takes_per_commit"]
            or closes <= CLOSES_A_CONNECTION * CONNECTIONS), (closes, commits, said)
    # (failed twice in CI, 18's backends with no takes while its probe said kprobes ran;
    # likeliest cause: its backends, connecting at once in a slow guest, seen before
    # PostgreSQL wrote their titles and named "other" (now named by a later look or the
    # program's title: probes/remote.seen_again, kernel_locks.named_roles). Each role's
    # epoll takes first in the message, then the probes' rows)
    assert new["epoll_takes_per_commit"] > 0, (_by_role(new), cells["pg=18"]["probes"],
                                               said)
    if old_kernel:
        # the seed's lock: each of 9.6's closes takes the global epmutex (0.87 and 0.81 a
        # commit in runs of this spec on OLD_KERNEL), 18's commits none: its takes are its
        # connections' closes again (0.041 a commit on a quiet machine, 5 % of 9.6's; 0.158,
        # 17 %, in CI at 3 s repeats), held to the closes' bound
        assert old["epmutex_takes_per_commit"] >= 0.3, said
        assert any(s["lock"] == "epmutex" and s["caller"] == "ep_free"
                   for s in old["sites"] if s["role"] == "backend"), said
        assert (new["epmutex_takes_per_commit"] < 0.3 * old["epmutex_takes_per_commit"]
                or new["epmutex_takes_per_commit"] * (commits or 0)
                <= CLOSES_A_CONNECTION * CONNECTIONS), (commits, said)
    else:
        # on a kernel with the rework the closes take the set's own mutex, never epmutex
        assert old["epmutex_takes_per_commit"] == 0, said
    text = cli("costs", str(out)).stdout
    assert "epoll's mutexes:" in text, text
    page = " ".join((out / "report.html").read_text().split())
    assert 'id="locks-' in page and "Epoll's mutexes:" in page


def test_a_guest_s_two_numa_nodes_take_the_interleaved_primary(
        locks_run: tuple[Path, subprocess.CompletedProcess[str], bool]) -> None:
    """topology.guests.numa_nodes = 2 on a machine of one node: the guest's kernel sees
    two, numactl interleaves the primary's memory over them (read back from its
    numa_maps there), and each node's counters show interleaved pages; the report says
    the nodes are virtual."""
    out, res, old_kernel = locks_run
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(cli("report", str(out), "--json").stdout)
    assert report["guests"][0]["numa_nodes"] == 2, report["guests"]
    assert report["hosts"][0]["numa_nodes"] == 2, report["hosts"]  # what the guest said
    numa = [n for n in report["host_numa"] if n["host"] == "guest1"]
    # both nodes, in each of the guest's cells, and nothing of the cells run here
    assert sorted({(_key(n["cell"])[0], n["node"]) for n in numa}) == [
        ("18", 0), ("18", 1), ("9.6", 0), ("9.6", 1)], numa
    assert all(_key(n["cell"])[1] != "host" for n in report["host_numa"])
    assert all(n["interleave_hit"] > 0 for n in numa), numa
    # the policy each of the primary's processes was given, read back where it ran
    placed = {_key(c["label"]): c["roles"] for c in report["placed"]["cells"]}
    kernel = OLD_KERNEL if old_kernel else "debian-6.1"
    assert set(placed) == {(v, k) for v in ("9.6", "18") for k in ("host", kernel)}, placed
    for key in placed:
        primary = [r for r in placed[key] if r["node"] == "primary"]
        # (a process that exits during the read-back is left out, never read as
        # "default": placement/numa.numa_policy_of)
        assert primary and all("interleave" in r["numa_policy"] for r in primary), (
            key, [(r["role"], r["processes"], r["numa_policy"]) for r in primary])
    assert "virtual" in report["placed"]["numa_note"], report["placed"]
    page = " ".join((out / "report.html").read_text().split())
    assert 'id="host-numa"' in page and "A guest's nodes are virtual" in page
