"""The scheduler's view of a commit: asleep until woken, woken but waiting for a
core, on a core; and who woke whom.

Under synchronous replication a committing backend sleeps in SyncRepWaitForLSN
until the walsender, having heard from the standby, sets its latch (a
``kill``, which the kernel turns into a wake-up). On a machine with few cores
the woken backend may then wait in the run queue before it runs again. The
wait events show the first wait (``IPC:SyncRep``) but not the second; this
probe separates them, from ``sched_switch`` and ``sched_waking`` on every CPU.
Per thread:

- switched out in a sleeping state (S, D, I ...): asleep until a wake-up names
  it; that wake-up is counted from the task running on the CPU that issued it
  (the waker) to the woken one;
- woken, or switched out while still runnable (``R``: preempted): waiting for a
  core until a ``sched_switch`` puts it on one; from then on CPU until
  switched out.

The wake-up is ``sched_waking``, not ``sched_wakeup``: ``sched_waking`` fires in
the waker's context, at the moment it wakes the thread. ``sched_wakeup`` fires
when the woken thread is put on a run queue, which for a thread woken onto an
idle CPU happens later, on that CPU, from its idle task: the walsender's
wake-ups would then be counted to ``idle/irq``, and the delay until then as sleep.
A trace holding only ``sched_wakeup`` is still read, with those errors.

A wake-up from an interrupt handler is counted to whatever the interrupt
interrupted (``idle/irq`` when that CPU was idle): the trace does not tell
interrupt context apart. Intervals that began before the trace did are not
counted; those still open when it ends are counted up to its last event.
"""

from __future__ import annotations

import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from syncrep_lab.pg.roles import CLIENT_PROGRAMS
from syncrep_lab.probes.perfrun import (
    PerfProcess,
    PerfRecording,
    excerpt,
    perf_reason,
    require_output,
)

EVENTS = (Path("/sys/kernel/tracing/events/sched"),
          Path("/sys/kernel/debug/tracing/events/sched"))
TRACEPOINTS = "sched:sched_switch,sched:sched_waking"
SCRIPT_FIELDS = "comm,pid,tid,cpu,time,event,trace"
SCRIPT_ARGS = ["-F", SCRIPT_FIELDS]

Roles = Callable[[int], tuple[str, str] | None]


def unavailable_reason() -> str | None:
    """None when this probe can run here, else why not and how to fix it."""
    reason = perf_reason(-1, "scheduler tracepoints on every CPU")
    if reason is not None:
        return reason
    if not any((p / "sched_switch").is_dir() and (p / "sched_waking").is_dir()
               for p in EVENTS):
        return ("the kernel exposes no sched/sched_switch and sched/sched_waking tracepoints "
                "(no tracefs under /sys/kernel/tracing or /sys/kernel/debug/tracing: "
                "mount -t tracefs nodev /sys/kernel/tracing)")
    return None


class SchedRecorder(PerfRecording):
    """``perf record`` of the scheduler tracepoints on every CPU, bounded to ``seconds``
    (~80,000 events a second, ~9 MB/s, on a busy 2-core machine)."""

    def __init__(self, out: Path, seconds: float) -> None:
        self.out = out
        self.seconds = seconds
        self.perf = PerfProcess(["perf", "record", "-a", "-e", TRACEPOINTS, "-o", str(out),
                                 "--", "sleep", f"{seconds:g}"], "perf record")

    def launch(self) -> None:
        # perf would rename an existing file to .old and keep it.
        self.out.unlink(missing_ok=True)
        self.perf.launch()

    def stop(self, timeout: float = 30) -> None:
        require_output(self.out, "perf record (scheduler)", self.perf.stop(timeout))


@dataclass
class RoleSched:
    threads: int = 0
    cpu_s: float = 0.0
    sleep_s: float = 0.0
    runq_s: float = 0.0
    switches: int = 0
    voluntary: int = 0  # switched out asleep (not preempted)
    wakeups_received: int = 0


@dataclass
class SchedResult:
    duration_s: float = 0.0
    events: int = 0
    roles: dict[tuple[str, str], RoleSched] = field(default_factory=dict)
    # (waker node, waker role, wakee node, wakee role) -> wake-ups
    wakeups: dict[tuple[str, str, str, str], int] = field(default_factory=dict)


def outsider(pid: int, comm: str) -> tuple[str, str]:
    """Who a thread that is not PostgreSQL's is, for the tables."""
    if pid == 0:
        return ("-", "idle/irq")
    if comm in CLIENT_PROGRAMS:
        return ("client", comm)
    if "/" in comm:
        return ("-", "kernel")
    return ("-", "other")


# What a thread's current interval is (it began at its record's _SINCE); _GONE: it
# exited (switched out as X or Z), nothing more is counted for it.
_UNKNOWN, _ASLEEP, _RUNNABLE, _ON_CPU, _GONE = range(5)
# Per-thread record: [state, since, cpu_s, sleep_s, runq_s, switches, voluntary, woken]
_ST, _SINCE, _CPU, _SLEEP, _RUNQ, _SWITCHES, _VOLUNTARY, _WOKEN = range(8)

_MARK = ": sched:sched_"  # then the event's kind: switch, waking, wakeup


def analyse(lines: Iterable[str], roles: Roles) -> SchedResult:
    """Per-role time asleep, in the run queue and on CPU, and who woke whom, from the
    lines of ``perf script -F comm,pid,tid,cpu,time,event,trace``::

        postgres 15939/15939 [000] 12147.566163: sched:sched_waking: comm=postgres pid=...

    ``roles(tid)`` names PostgreSQL's threads as (node, role); the others are
    named from their command (``outsider``).
    """
    # Splits rather than a regex: 2 to 3 times faster, and a trace holds ~80,000 lines
    # a second. Each line is split from its right-hand end, so a command holding
    # spaces or brackets is still read.
    threads: dict[int, list[float]] = {}
    comms: dict[int, str] = {}
    pairs: dict[tuple[int, int], int] = {}
    events = 0
    first = last = 0.0
    waking_seen = False
    new = [_UNKNOWN, 0.0, 0.0, 0.0, 0.0, 0, 0, 0]
    for line in lines:
        # "  comm PID/TID [CPU] SECONDS: sched:sched_KIND: FIELDS"
        head, sep, rest = line.partition(_MARK)
        if not sep:
            continue
        kind = rest[:6]
        try:
            if kind == "switch":
                now = float(head[head.rfind(" ") + 1:])
                # prev_comm=A prev_pid=1 prev_prio=120 prev_state=S ==> next_comm=B
                # next_pid=2 next_prio=120
                left, _, right = rest[8:].partition(" ==> ")
                p = left.rsplit(" ", 3)
                n = right.rsplit(" ", 2)
                prev = int(p[1][9:])
                state = p[3][11]
                nxt = int(n[1][9:])
            elif kind == "waking" or (kind == "wakeup" and not waking_seen):
                h = head.rsplit(None, 3)
                now = float(h[3])
                # comm=A pid=1 prio=120 target_cpu=000
                w = rest[8:].rsplit(" ", 3)
                wakee = int(w[1][4:])
                # The waker runs on the CPU that wakes; perf writes tid -1 for a
                # thread it lost track of, and then the pid names the process.
                h_pid, _, h_tid = h[1].partition("/")
                waker = int(h_tid)
                if waker < 0:
                    waker = int(h_pid)
            else:
                now = float(head[head.rfind(" ") + 1:])
        except (ValueError, IndexError):
            continue
        if not events:
            first = now
        events += 1
        last = now
        if kind == "switch":
            if prev:
                t = threads.get(prev)
                if t is None:
                    t = threads[prev] = new.copy()
                    comms.setdefault(prev, p[0][10:])
                if t[_ST] == _ON_CPU:
                    t[_CPU] += now - t[_SINCE]
                t[_SWITCHES] += 1
                if state == "R":
                    t[_ST] = _RUNNABLE
                else:
                    t[_VOLUNTARY] += 1
                    t[_ST] = _GONE if state in "XZ" else _ASLEEP
                t[_SINCE] = now
            if nxt:
                t = threads.get(nxt)
                if t is None:
                    t = threads[nxt] = new.copy()
                    comms.setdefault(nxt, n[0][10:])
                elif t[_ST] == _RUNNABLE:
                    t[_RUNQ] += now - t[_SINCE]
                t[_ST] = _ON_CPU
                t[_SINCE] = now
        elif kind == "waking" or (kind == "wakeup" and not waking_seen):
            if kind == "waking":
                # Both recorded: each wake-up is read once, from sched_waking.
                waking_seen = True
            if waker not in comms:
                comms[waker] = h[0].strip()
            t = threads.get(wakee)
            if t is None:
                t = threads[wakee] = new.copy()
                comms.setdefault(wakee, w[0][5:])
            st = t[_ST]
            if st == _ASLEEP:
                t[_SLEEP] += now - t[_SINCE]
            if st in (_ASLEEP, _UNKNOWN):
                t[_ST] = _RUNNABLE
                t[_SINCE] = now
            t[_WOKEN] += 1
            pair = (waker, wakee)
            pairs[pair] = pairs.get(pair, 0) + 1

    who: dict[int, tuple[str, str]] = {}

    def identity(tid: int) -> tuple[str, str]:
        found = who.get(tid)
        if found is None:
            found = (roles(tid) if tid else None) or outsider(tid, comms.get(tid, ""))
            who[tid] = found
        return found

    result = SchedResult(duration_s=last - first, events=events)
    for tid, t in threads.items():
        st, since = t[_ST], t[_SINCE]
        if st == _ON_CPU:
            t[_CPU] += last - since
        elif st == _ASLEEP:
            t[_SLEEP] += last - since
        elif st == _RUNNABLE:
            t[_RUNQ] += last - since
        total = result.roles.get(identity(tid))
        if total is None:
            total = result.roles[identity(tid)] = RoleSched()
        total.threads += 1
        total.cpu_s += t[_CPU]
        total.sleep_s += t[_SLEEP]
        total.runq_s += t[_RUNQ]
        total.switches += int(t[_SWITCHES])
        total.voluntary += int(t[_VOLUNTARY])
        total.wakeups_received += int(t[_WOKEN])
    for (waker, wakee), count in pairs.items():
        names = (*identity(waker), *identity(wakee))
        result.wakeups[names] = result.wakeups.get(names, 0) + count
    return result


def parse(perf_data: Path, roles: Roles, timeout: float = 120) -> SchedResult:
    """Read a recording through ``perf script``, streamed line by line, and analyse it."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            ["perf", "script", *SCRIPT_ARGS, "-i", str(perf_data)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
            text=True, errors="replace", bufsize=1 << 20)
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            proc.kill()

        timer = threading.Timer(timeout, expire)
        timer.daemon = True
        timer.start()
        try:
            assert proc.stdout is not None
            result = analyse(proc.stdout, roles)
            proc.stdout.close()
            proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if expired.is_set():
            raise RuntimeError(f"perf script did not finish within {timeout:g} s")
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"perf script failed (exit {proc.returncode}): "
                               f"{excerpt(err.read())}")
    return result
