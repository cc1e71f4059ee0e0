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

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from syncrep_lab.probes.roles import NodeProcess

SYSCALLS = ("epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "kill", "read", "write",
            "pread64", "pwrite64", "close", "futex", "sendto", "recvfrom", "fdatasync",
            "fsync", "poll")
TRACEFS = (Path("/sys/kernel/tracing/events/syscalls"),
           Path("/sys/kernel/debug/tracing/events/syscalls"))


def unavailable_reason() -> str | None:
    """None when this probe can run here, else why not (recorded with the run)."""
    if shutil.which("perf") is None:
        return "perf is not installed (apt-get install linux-perf)"
    if os.geteuid() != 0:
        try:
            paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
        except (OSError, ValueError):
            paranoid = 3
        if paranoid > -1:
            return ("system call tracepoints need root or kernel.perf_event_paranoid = -1 "
                    f"(it is {paranoid})")
    if not any(p.is_dir() for p in TRACEFS):
        return "the kernel exposes no syscall tracepoints (no tracefs events/syscalls)"
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
        self.proc: subprocess.Popen[bytes] | None = None
        self.syscalls = available_syscalls()

    def start(self) -> None:
        events = ["task-clock", "context-switches",
                  *(f"syscalls:sys_enter_{s}" for s in self.syscalls)]
        pids = ",".join(str(p.pid) for p in self.processes)
        self.proc = subprocess.Popen(
            ["perf", "stat", "--per-thread", "-x", ",", "-o", str(self.out),
             "-e", ",".join(events), "-p", pids],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        # perf needs a moment to open its counters; what it misses is not commits.
        time.sleep(0.15)
        if self.proc.poll() is not None:
            err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
            raise RuntimeError(f"perf stat exited at once: {err.strip()[:300]}")

    def stop(self, timeout: float = 20) -> dict[int, Counts]:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("perf stat did not stop") from None
        return parse_perf_stat(self.out.read_text(errors="replace"))


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
