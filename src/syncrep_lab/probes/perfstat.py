"""CPU time, context switches and system calls of every PostgreSQL process, by kind.

One ``perf stat --per-thread`` counts, for each process of each node, the
``task-clock`` (CPU time), ``context-switches`` and the entry tracepoints of
the system calls that tell the commit-wait story (epoll sets created and
changed per wait, ``kill`` for every latch set, ``fdatasync`` for WAL ...).

Processes that start during the measurement (pgbench's backends) are counted
through inheritance: perf attaches to the postmaster with inherited counters,
so whatever its children born later do is folded into the postmaster's row
when they exit. That row is therefore reported as the role ``backend`` (the
postmaster itself does next to nothing while pgbench runs). Processes that
existed when the repeat started are counted one by one, with their roles.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from syncrep_lab import procs
from syncrep_lab.pg.roles import NodeProcess
from syncrep_lab.probes.perfrun import SETTLE_SECONDS, PerfProcess, perf_reason, require_output
from syncrep_lab.store import CostRow

# futex is where a process sleeps on a lock built on POSIX semaphores (PostgreSQL 10 and
# later on Linux), semop and semtimedop where it sleeps on System V ones (9.6's default,
# as the seed ran it; glibc's semop() enters the kernel as semtimedop on x86-64).
SYSCALLS = ("epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "kill", "read", "write",
            "pread64", "pwrite64", "close", "futex", "semop", "semtimedop", "sendto",
            "recvfrom", "fdatasync", "fsync", "poll")
TRACEFS = (Path("/sys/kernel/tracing/events/syscalls"),
           Path("/sys/kernel/debug/tracing/events/syscalls"))


def unavailable_reason() -> str | None:
    """None when this probe can run here, else why not (recorded with the run)."""
    reason = perf_reason(-1, "system call tracepoints")
    if reason is not None:
        return reason
    if not any(p.is_dir() for p in TRACEFS):
        return ("the kernel exposes no syscall tracepoints (no tracefs events/syscalls; "
                "fix: as root, mount -t tracefs nodev /sys/kernel/tracing, which ./run setup "
                "does)")
    return None


def available_syscalls() -> list[str]:
    base = next((p for p in TRACEFS if p.is_dir()), None)
    if base is None:
        return []
    return [s for s in SYSCALLS if (base / f"sys_enter_{s}").is_dir()]


@dataclass
class Counts:
    pid: int
    task_clock_ms: float = 0.0
    context_switches: int = 0
    syscalls: dict[str, int] = field(default_factory=dict)


class PerfStat:
    def __init__(self, processes: list[NodeProcess], out: Path) -> None:
        self.processes = processes
        self.out = out
        self.perf: PerfProcess | None = None
        self.syscalls = available_syscalls()

    def start(self, attempts: int = 3) -> None:
        # Backends that exist now are connections that come and go (the tool's
        # own); the workload's are born later and counted through the postmaster.
        # perf refuses a pid that is gone by the time it attaches, so the list is
        # taken afresh for each attempt.
        for attempt in range(attempts):
            self.launch()
            time.sleep(SETTLE_SECONDS)
            try:
                self.confirm(retries=0)
                return
            except RuntimeError:
                if attempt == attempts - 1:
                    raise

    def launch(self) -> None:
        events = ["task-clock", "context-switches",
                  *(f"syscalls:sys_enter_{s}" for s in self.syscalls)]
        pids = ",".join(str(pid) for pid in attachable(self.processes))
        self.perf = PerfProcess(
            ["perf", "stat", "--per-thread", "-x", ",", "-o", str(self.out),
             "-e", ",".join(events), "-p", pids], "perf stat")
        self.perf.launch()

    def confirm(self, retries: int = 2) -> None:
        """Raise if perf stat failed at once; a pid gone before it attached: launched
        again with the pids there are then, ``retries`` times."""
        if self.perf is None:
            raise RuntimeError("perf stat was not started")
        try:
            self.perf.confirm()
        except RuntimeError:
            if retries <= 0:
                raise
            self.start(attempts=retries)

    def stop(self, timeout: float = 20) -> dict[int, Counts]:
        if self.perf is None:
            raise RuntimeError("perf stat was not started")
        require_output(self.out, "perf stat", self.perf.stop(timeout))
        return parse_perf_stat(self.out.read_text(errors="replace"))


def attachable(processes: list[NodeProcess]) -> list[int]:
    """The pids perf stat attaches to: every process of the nodes but the backends there
    are now, and those still running (perf refuses one that is gone, a zombie too)."""
    return [p.pid for p in processes if p.role != "backend" and procs.alive(p.pid)]


def parse_perf_stat(text: str) -> dict[int, Counts]:
    """``perf stat --per-thread -x ,`` output: one line per thread and event."""
    counts: dict[int, Counts] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        parts = line.split(",")
        if len(parts) < 4:
            continue
        thread, value, event = parts[0], parts[1], parts[3]
        comm, _, pid_text = thread.rpartition("-")
        if not comm or not pid_text.isdigit():
            continue
        try:
            number = float(value)
        except ValueError:
            continue  # "<not counted>" / "<not supported>"
        entry = counts.setdefault(int(pid_text), Counts(int(pid_text)))
        if event.startswith("task-clock"):
            entry.task_clock_ms += number
        elif event.startswith("context-switches") or event == "cs":
            entry.context_switches += int(number)
        elif event.startswith("syscalls:sys_enter_"):
            name = event.removeprefix("syscalls:sys_enter_")
            entry.syscalls[name] = entry.syscalls.get(name, 0) + int(number)
    return counts


def cost_rows(processes: list[NodeProcess], counts: dict[int, Counts]) -> list[CostRow]:
    """``costs`` rows per node and role from perf's counts of ``processes`` (a node here,
    or on a host): the postmaster's row, which holds every child born during the
    repeat, is the role ``backend``."""
    rows: dict[tuple[str, str], list[int | float]] = {}
    syscalls: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for proc in processes:
        c = counts.get(proc.pid)
        if c is None:
            continue
        key = (proc.node, "backend" if proc.role == "postmaster" else proc.label)
        row = rows.setdefault(key, [0, 0.0, 0])
        row[0] += 1
        row[1] += c.task_clock_ms
        row[2] += c.context_switches
        for name, n in c.syscalls.items():
            syscalls[key][name] = syscalls[key].get(name, 0) + n
    return [CostRow(node, role, int(v[0]), float(v[1]), int(v[2]),
                    json.dumps(syscalls[(node, role)], sort_keys=True))
            for (node, role), v in sorted(rows.items())]
