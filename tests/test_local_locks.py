"""The lock probe of a primary on this machine (probes/kernel_locks.LocalLocks): the
program, watchdog and files of a host's, run here. A run killed with SIGKILL while the
probe runs leaves no bpftrace and none of its files (the watchdog reads the end of its
stdin, as it does when an SSH channel closes); resumed, the run counts this kernel's
lock waits per commit and says what this kernel let it count."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from .helpers import cli, descendants, machine_wide, still_alive, wait_until
from .test_tool_faults import Run

# It kills the tool and runs `clean`, which removes machine-wide what no cluster of its
# home records: beside the guests' kill test on the other worker it can remove that
# test's dead guest's network namespace first (seen once: that test's clean found none)
pytestmark = machine_wide

SPEC = """\
name = "local-locks"

[topology]
standbys = 1
sync = "b"

[workload]
clients = 4
duration = 3
warmup = 0

[run]
repeats_min = 1
repeats_max = 1

[probes]
locks = true
perf = false
flamegraphs = false
anatomy = false
sched = false
"""


def _tracers(root: int) -> dict[int, str]:
    """The lock probe's watchdog and bpftrace among the processes below ``root``."""
    return {pid: cmd for pid, cmd in descendants(root).items() if ".locks" in cmd}


def test_a_killed_run_leaves_no_lock_probe_and_a_resumed_one_counts_here(
        workdir: Path) -> None:
    out = workdir / "run"
    run = Run(workdir, out, SPEC)
    wait_until(lambda: any("bpftrace" in c for c in _tracers(run.proc.pid).values()), 120,
               "the lock probe's bpftrace to start")
    seen = _tracers(run.proc.pid)
    files = sorted({word for cmd in seen.values() for word in cmd.split()
                    if ".locks" in word})
    run.signal(signal.SIGKILL)
    run.wait(30)
    # the watchdog saw its stdin end: bpftrace stopped, its program and output removed
    wait_until(lambda: not still_alive(seen), 30, "the lock probe to end with the tool")
    base = files[-1].rsplit(".locks", 1)[0] + ".locks"
    assert not [f for f in Path(base).parent.glob("*.locks*")], base  # the frames too
    cleaned = cli("clean")
    assert cleaned.returncode == 0, cleaned.stderr
    started = time.monotonic()
    resumed = cli("run", "--resume", "--out", str(out), timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert time.monotonic() - started < 300
    assert not still_alive(seen)
    [cell] = json.loads(cli("costs", str(out), "--json").stdout)
    [said] = cell["probes"]["locks"]
    assert said.startswith("ran: kernel "), said
    kprobes = Path("/sys/bus/event_source/devices/kprobe/type").exists()
    # what this kernel let it count: without kprobes the waits alone, no take counted
    assert ("every take of a mutex" if kprobes else "no take (the kernel has no kprobes)") \
        in said, said
    for site in (cell["locks"] or {}).get("sites", []):
        assert site["node"] == "primary" and site["contentions_per_commit"]["mean"] >= 0, site
        if not kprobes:
            assert site["acquisitions_per_commit"] is None, site
