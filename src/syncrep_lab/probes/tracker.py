"""Every process of every local node during a repeat: its role, CPU time, context
switches and what the scheduler did to it from /proc, and where its memory sits (NUMA).

A thread polls each postmaster's children (``/proc/PM/task/PM/children``) a few
times a second, so processes born during the repeat (pgbench's backends) get a
role from their title while they live; the on-CPU and scheduler probes, which
are analysed after those processes are gone, ask the tracker who a pid was.

CPU time comes from ``/proc/PID/stat`` (user and system, in clock ticks), the time
spent runnable waiting for a core (run delay) from ``/proc/PID/schedstat``, CPU
migrations and context switches from ``/proc/PID/sched`` (a file only kernels with
CONFIG_SCHED_DEBUG have; elsewhere context switches come from ``/proc/PID/status`` and
migrations are None), the bytes its reads and writes sent to the block layer from
``/proc/PID/io``. A process is read in four small files, two more than CPU and switches
alone took (docs/benchmarks.md: the tracker's cost). Processes that exist at
the start count from a first snapshot; those born during the repeat count from zero.
A process seen last a poll before it exited loses that poll's interval, so
for the backends born during the repeat the CPU time is taken instead from
the postmaster's ``cutime``/``cstime``: the exact CPU of children it has
reaped, once they are all gone. Their context switches, run delay and migrations keep
the last poll's figure (an undercount of at most one poll period per process, stated in
docs/decisions.md). This probe needs no privileges beyond reading /proc of
the server account's processes, so it is the CPU figure of last resort when
perf cannot run.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from syncrep_lab import procs
from syncrep_lab.pg.roles import NodeProcess, role_of_title, title
from syncrep_lab.store import NumaPagesRow, ProcCostRow

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


# Which of the scheduler's files this kernel has: schedstat with CONFIG_SCHED_INFO (its
# run delay is counted without kernel.sched_schedstats), sched with CONFIG_SCHED_DEBUG.
# Where the kernel has a file, a process whose file cannot be read has gone.
HAVE_SCHEDSTAT = Path("/proc/self/schedstat").exists()
HAVE_SCHED = Path("/proc/self/sched").exists()


@dataclass
class ProcSample:
    utime: int = 0  # clock ticks
    stime: int = 0
    voluntary: int = 0
    involuntary: int = 0
    cutime: int = 0  # reaped children's CPU, read for postmasters only
    cstime: int = 0
    run_delay_ns: int | None = 0  # runnable, waiting for a core; None: not on this kernel
    migrations: int | None = 0  # moves to another CPU; None: not on this kernel
    read_bytes: int | None = 0  # the block layer's (/proc/PID/io); None: not readable
    write_bytes: int | None = 0


def _sched_value(text: str, key: str) -> int | None:
    """The number after ``key``'s colon in /proc/PID/sched ("se.nr_migrations   :   3")."""
    at = text.find(f"\n{key} ")
    if at < 0:
        return None
    end = text.find("\n", at + 1)
    value = text[text.find(":", at) + 1:end if end >= 0 else None].strip()
    return int(value) if value.isdigit() else None


def read_sample(pid: int) -> ProcSample | None:
    """The process's counters now (None: it has gone)."""
    fields = procs.stat_fields(pid)
    if fields is None:
        return None
    sample = ProcSample(int(fields[procs.UTIME]), int(fields[procs.STIME]),
                        cutime=int(fields[procs.CUTIME]), cstime=int(fields[procs.CSTIME]),
                        run_delay_ns=None, migrations=None)
    try:
        if HAVE_SCHEDSTAT:  # "cpu_ns run_delay_ns timeslices"
            sample.run_delay_ns = int(procs.read(f"/proc/{pid}/schedstat").split()[1])
        sched = procs.read(f"/proc/{pid}/sched") if HAVE_SCHED else ""
        voluntary = _sched_value(sched, "nr_voluntary_switches")
        involuntary = _sched_value(sched, "nr_involuntary_switches")
        if voluntary is not None and involuntary is not None:
            # the same counters as status's (the task's nvcsw and nivcsw): one file less
            sample.voluntary, sample.involuntary = voluntary, involuntary
        else:
            status = procs.read(f"/proc/{pid}/status")
            # The last two lines of status: "voluntary_ctxt_switches:\tN", "nonvoluntary...".
            at = status.rfind("\nvoluntary_ctxt_switches:")
            if at >= 0:
                words = status[at:].split()
                sample.voluntary, sample.involuntary = int(words[1]), int(words[3])
    except (OSError, IndexError, ValueError):
        return None
    sample.migrations = _sched_value(sched, "se.nr_migrations") if sched else None
    sample.read_bytes, sample.write_bytes = io_bytes(pid)
    return sample


def io_bytes(pid: int) -> tuple[int | None, int | None]:
    """read_bytes and write_bytes of /proc/PID/io (None: not readable, another user's
    process without root, or a kernel without task I/O accounting)."""
    try:
        words = procs.read(f"/proc/{pid}/io").split()
    except OSError:
        return None, None
    # "rchar: N wchar: N syscr: N syscw: N read_bytes: N write_bytes: N ...", in that
    # order since the file exists; checked, not assumed
    if words[8:12:2] == ["read_bytes:", "write_bytes:"] and words[9].isdigit() \
            and words[11].isdigit():
        return int(words[9]), int(words[11])
    return None, None


def numa_pages(pid: int) -> Counter[str]:
    """Pages of a process per NUMA node (``N0``, ``N1`` ...), from numa_maps."""
    pages: Counter[str] = Counter()
    try:
        text = Path(f"/proc/{pid}/numa_maps").read_text()
    except OSError:
        return pages
    for line in text.splitlines():
        for word in line.split()[2:]:
            if word[:1] == "N" and "=" in word:
                key, _, value = word.partition("=")
                if key[1:].isdigit() and value.isdigit():
                    pages[key] += int(value)
    return pages


def _delta(first: int | None, last: int | None) -> int | None:
    return None if first is None or last is None else last - first


@dataclass
class Tracked:
    proc: NodeProcess
    born_during: bool
    first: ProcSample
    last: ProcSample


@dataclass
class RoleSum:
    """One node's role summed over its processes; CPU and run delay in ms. Run delay and
    migrations are None where a process of the role could not tell them."""

    node: str
    role: str
    processes: int = 0
    user_ms: float = 0.0
    system_ms: float = 0.0
    voluntary_cs: int = 0
    involuntary_cs: int = 0
    run_delay_ms: float | None = 0.0
    migrations: int | None = 0
    read_bytes: int | None = 0
    write_bytes: int | None = 0

    def add(self, t: Tracked) -> None:
        first, last = t.first, t.last
        self.processes += 1
        self.user_ms += (last.utime - first.utime) * TICK_S * 1e3
        self.system_ms += (last.stime - first.stime) * TICK_S * 1e3
        self.voluntary_cs += last.voluntary - first.voluntary
        self.involuntary_cs += last.involuntary - first.involuntary
        delay = _delta(first.run_delay_ns, last.run_delay_ns)
        self.run_delay_ms = (None if delay is None or self.run_delay_ms is None
                             else self.run_delay_ms + delay / 1e6)
        moved = _delta(first.migrations, last.migrations)
        self.migrations = None if moved is None or self.migrations is None \
            else self.migrations + moved
        if t.proc.role == "postmaster":
            # its /proc/PID/io holds the I/O of the children it reaped (the kernel adds
            # it on wait()): the backends', counted in their own rows already (up to
            # their last poll). Its own are not read: None
            self.read_bytes = self.write_bytes = None
            return
        read = _delta(first.read_bytes, last.read_bytes)
        self.read_bytes = None if read is None or self.read_bytes is None \
            else self.read_bytes + read
        written = _delta(first.write_bytes, last.write_bytes)
        self.write_bytes = None if written is None or self.write_bytes is None \
            else self.write_bytes + written


@dataclass
class TrackerResult:
    rows: list[RoleSum] = field(default_factory=list)  # by node and role label
    numa: list[NumaPagesRow] = field(default_factory=list)
    exact_backend_cpu: dict[str, bool] = field(default_factory=dict)  # per node

    def cost_rows(self) -> list[ProcCostRow]:
        """``rows`` as the store's proc_costs rows."""
        return [ProcCostRow(r.node, r.role, r.processes, r.user_ms, r.system_ms,
                            r.voluntary_cs, r.involuntary_cs, r.run_delay_ms, r.migrations,
                            r.read_bytes, r.write_bytes)
                for r in self.rows]


class ProcessTracker(threading.Thread):
    def __init__(self, postmasters: dict[str, int], walsenders: dict[int, str], *,
                 hz: float = 4.0, numa: bool = True) -> None:
        super().__init__(daemon=True)
        self.postmasters = postmasters
        self.walsenders = walsenders
        self.period = 1.0 / hz
        self.numa = numa
        self.tracked: dict[int, Tracked] = {}
        self.ignored: set[int] = set()
        self.pm_first: dict[str, ProcSample] = {}
        self.numa_before: dict[int, Counter[str]] = {}
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def begin(self) -> list[NodeProcess]:
        """First snapshot (before the workload starts); returns the processes now."""
        for node, pm in self.postmasters.items():
            first = read_sample(pm)
            if first is None:
                continue
            self.pm_first[node] = first
            self.tracked[pm] = Tracked(NodeProcess(node, pm, "postmaster"), False, first, first)
            self._poll_node(node, pm, born_during=False)
        if self.numa:
            self.numa_before = {pid: numa_pages(pid) for pid in self.tracked}
        self.start()
        return [t.proc for t in self.tracked.values()]

    def ignore(self, pids: set[int]) -> None:
        """Pids that are the probes' own (sampler connections), not the workload."""
        with self.lock:
            self.ignored |= pids

    def role_of(self, pid: int) -> tuple[str, str] | None:
        t = self.tracked.get(pid)
        if t is None or pid in self.ignored:
            return None
        return (t.proc.node, t.proc.label)

    def _poll_node(self, node: str, pm: int, *, born_during: bool) -> None:
        for pid in procs.children(pm):
            known = self.tracked.get(pid)
            if known is not None and not known.born_during:
                continue  # read again at the end: processes of the node's own live on
            sample = read_sample(pid)
            if sample is None:
                continue
            if known is not None:
                known.last = sample
                continue
            role = role_of_title(title(pid))
            proc = NodeProcess(node, pid, role,
                               self.walsenders.get(pid, "") if role == "walsender" else "")
            self.tracked[pid] = Tracked(proc, born_during,
                                        ProcSample() if born_during else sample, sample)

    def run(self) -> None:
        while not self.stopping.wait(self.period):
            with self.lock:
                for node, pm in self.postmasters.items():
                    self._poll_node(node, pm, born_during=True)

    def finish(self, reap_timeout: float = 3.0) -> TrackerResult:
        """Stop polling, let the workload's backends be reaped, and sum per role."""
        self.stopping.set()
        self.join(timeout=5)
        with self.lock:
            for node, pm in self.postmasters.items():
                self._poll_node(node, pm, born_during=True)
            workload = {pid for pid, t in self.tracked.items()
                        if t.born_during and pid not in self.ignored}
        deadline = time.monotonic() + reap_timeout
        alive = workload
        while alive and time.monotonic() < deadline:
            pm_children = {c for pm in self.postmasters.values() for c in procs.children(pm)}
            alive = workload & pm_children
            if alive:
                time.sleep(0.05)
        result = TrackerResult()
        self._sum(result, alive)
        if self.numa:
            self._numa(result)
        return result

    def _sum(self, result: TrackerResult, alive: set[int]) -> None:
        rows: dict[tuple[str, str], RoleSum] = {}
        born_backends: set[str] = set()  # nodes with backends born during the repeat
        for pid, t in self.tracked.items():
            if pid in self.ignored:
                continue
            if pid in alive or not t.born_during:  # the others are gone: last poll's
                t.last = read_sample(pid) or t.last
            key = (t.proc.node, t.proc.label)
            rows.setdefault(key, RoleSum(*key)).add(t)
            if t.born_during and t.proc.role == "backend":
                born_backends.add(t.proc.node)
        for node, pm in self.postmasters.items():
            first = self.pm_first.get(node)
            last = self.tracked[pm].last if pm in self.tracked else None
            backends = rows.get((node, "backend"))
            exact = bool(first and last and backends and node in born_backends
                         and not any(self.tracked[p].proc.node == node for p in alive))
            result.exact_backend_cpu[node] = exact
            if exact and first is not None and last is not None and backends is not None:
                # Backends that existed at the start keep their own deltas; those
                # born and reaped during the repeat are the postmaster's cutime/cstime.
                # (Their run delay and migrations have no such total: the last poll's.)
                old = [t for t in self.tracked.values() if t.proc.node == node
                       and t.proc.role == "backend" and not t.born_during
                       and t.proc.pid not in self.ignored]
                backends.user_ms = ((last.cutime - first.cutime) * TICK_S * 1e3
                                    + sum((t.last.utime - t.first.utime) for t in old)
                                    * TICK_S * 1e3)
                backends.system_ms = ((last.cstime - first.cstime) * TICK_S * 1e3
                                      + sum((t.last.stime - t.first.stime) for t in old)
                                      * TICK_S * 1e3)
        result.rows = sorted(rows.values(), key=lambda r: (r.node, r.role))

    def _numa(self, result: TrackerResult) -> None:
        before: dict[tuple[str, str], Counter[str]] = {}
        after: dict[tuple[str, str], Counter[str]] = {}
        for pid, t in self.tracked.items():
            if pid in self.ignored:
                continue
            key = (t.proc.node, t.proc.label)
            if pid in self.numa_before:
                before.setdefault(key, Counter()).update(self.numa_before[pid])
            if not t.born_during:
                after.setdefault(key, Counter()).update(numa_pages(pid))
        for phase, table in (("before", before), ("after", after)):
            for (node, role), pages in sorted(table.items()):
                for numa_node, n in sorted(pages.items()):
                    result.numa.append(NumaPagesRow(node, role, phase, numa_node, n))
