"""The commit anatomy probe: every synchronous commit of the primary timed from inside
the server, by bpftrace, with only aggregates brought out of the kernel.

A committing backend flushes its WAL (``XLogFlush``: its own write and fsync, or the
wait for another backend's that covers it: group commit), then sleeps in
``SyncRepWaitForLSN`` until a walsender, having heard from its standby, runs
``SyncRepReleaseWaiters``: that frees every waiter whose commit the standbys now hold
and sets each one's latch, a ``kill`` (SIGUSR1 up to PostgreSQL 13, SIGURG from 14)
when the waiter sleeps. Uprobes on those three functions of the server binary, and the
``kill`` system call's tracepoint, split each commit wait into:

- ``standby_wait``: from the wait's start to the start of the release that freed it
  (the standby's round trip as the backend sees it, and the walsender's way to it);
- ``wakeup_queue``: from that release's start to the ``kill`` for this backend (its
  place in the walsender's loop over the waiters it frees);
- ``run_queue``: from the ``kill`` to the wait's return (the wake-up, then waiting for a
  core, then the few instructions to the return);
- ``unsignalled``: a whole wait that ended with no ``kill`` for it: the walsender freed
  it while it was not asleep yet (PostgreSQL 14+'s SetLatch sends no signal then, nor
  any version's when the latch is already set), or the LSN was already confirmed.

These four partition ``commit_wait`` (each wait is in exactly one of the last or the
first three), so their totals add up to its total. A release that began before the
backend's wait did (the standby confirmed the WAL before the backend got to wait for
it) counts from the wait's start: ``standby_wait`` is then 0, never negative. Per
walsender, ``release`` is one SyncRepReleaseWaiters call (its lock wait included),
``release_gap`` the time from the end of one to the start of the next (the walsender's
loop: the standby's replies as it sees them), ``waiters_freed`` the waiters it signalled
(a count, not nanoseconds). ``local_flush`` runs from the commit's ``XLogFlush`` to
its ``SyncRepWaitForLSN``: the flush, then the commit's mark in the CLOG (its
microseconds, a lock wait under contention) on the way to the wait. It is timed from
the last XLogFlush a backend entered before the wait, not from XLogFlush's own return:
a return probe is a second trap in every flush, the buffer writes' too, and the
cheaper probe counts only the commits' flushes (see the cost below).

Only the cluster's own processes count: a uprobe traps in every process running the
binary, other clusters' servers of the same installation too, so each probe is
filtered in the kernel on the parent (a backend's and a walsender's is the primary's
postmaster) before anything else. The processes the postmaster already had when the
probe started (checkpointer, background writer, walwriter, io workers, the tool's own
sessions) are left out of the backends' figures: their XLogFlush calls write out
buffers, they are not commits; the workload's backends are born after the probe starts.
(On a cluster the tool did not start, whose backends may be older than the probe, the
caller says which to leave out: observe/anatomy.py.)

Each duration goes, in the kernel, into per-CPU maps: an exact sum and a log-linear
histogram in :class:`LatencyHistogram`'s bucket scheme (values under 128 a bucket each,
then 64 per power of two), so that the histogram rebuilt here is exactly the one Python
would have made from the values, in nanoseconds, but for its extremes: those are the
bounds of its first and last bucket (within 1/64), not kept exactly, as two more map
updates per value cost more than they tell. Nothing is written per event; bpftrace
prints its maps as JSON once, when it is stopped. Where a window is cut into slices
(``observe --anatomy``), the program also takes snapshots: a ``kill(self, 0)`` of this
process (a system call that delivers nothing) passes the ``kill`` tracepoint, whose
probe numbers the snapshot (``@zz_snapshot``) and asks bpftrace to print the aggregates,
that number last; bpftrace prints them as soon as it reads the request, and a slice's
aggregates are the difference of two prints (:func:`between`). Only the aggregates are
printed: a print of every map (bpftrace's SIGUSR1) reads the per-process scratch maps
too, whose keys the probes delete as it reads them, and bpftrace abandons such a print
("failed to look up elem").

A commit whose session does not ask for a standby (``synchronous_commit`` local or
off) still calls SyncRepWaitForLSN, which returns at once: the probe reads the session's
level at the call (the variable, from the process's memory) and counts no wait.

What the probe costs is its traps and its programs. A uprobe is a breakpoint, a
uretprobe a second one on the return, so each commit pays three (XLogFlush's entry,
SyncRepWaitForLSN's entry and return) and each walsender reply two (both walsenders: the
one that is not synchronous enters the function too, and frees nothing). A breakpoint
costs 1 to 1.5 µs on this VM where the kernel emulates the instruction under it, about
10 µs where it must step it out of line (a VM exit). The probes therefore sit on each
function's first instruction the kernel emulates, entry and return alike
(probes/uprobe_points.py: read from the binary's bytes, and checked against where the
kernel says they are once attached): Debian's builds and any with frame pointers begin
with ``push %rbp``, already emulated; the embedded PostgreSQL 18 (no frame pointers)
begins each function with loads and tests, and its probes go to the first conditional
jump or push a few bytes in. What remains is the emulated traps, the BPF programs (their
map updates) and the ``kill`` tracepoint; docs/benchmarks.md has what that costs per
commit and in TPS (bench/anatomy_cost.py). The figures hold part of that cost.

bpftrace runs in a process group of its own with PR_SET_PDEATHSIG (SIGKILL), started
from the main thread as pgbench and perf are: it never outlives the tool, even one
killed with SIGKILL. Its uprobes are perf events (the kernel's uprobe PMU, not entries
in tracefs's ``uprobe_events``), which go with the process: a killed bpftrace leaves
nothing attached. Its pid and its owner's are recorded in the state dir while it runs,
and ``syncrep-lab clean`` ends one whose owner is gone, a second line behind the death
signal; it also removes the folder of files (:func:`work_dir`) of an owner gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from syncrep_lab import paths, procs, shutdown
from syncrep_lab.errors import UserError
from syncrep_lab.hosts.ssh import HostSpec
from syncrep_lab.probes import standby_anatomy
from syncrep_lab.probes.bpftrace_json import printed
from syncrep_lab.probes.recorder import Ending
from syncrep_lab.probes.uprobe_points import (
    alias_elf,
    alias_name,
    attached_uprobes,
    elf_symbols,
    file_offsets,
    probe_offsets,
)
from syncrep_lab.stats.histogram import MAX_VALUE, LatencyHistogram, bucket_range
from syncrep_lab.store import AnatomyRow, ProbeRow, ProbeRows

PROBE = "anatomy"
SYMBOLS = ("SyncRepWaitForLSN", "SyncRepReleaseWaiters", "XLogFlush")
RETURNED = ("SyncRepWaitForLSN", "SyncRepReleaseWaiters")  # with a return probe too
LEVEL = "synchronous_commit"  # the session's level: read to skip commits not waiting
LATCH_SIGNALS = (10, 23)  # SIGUSR1 (latches up to PostgreSQL 13), SIGURG (14 and later)
BACKEND_COMPONENTS = ("local_flush", "commit_wait", "standby_wait", "wakeup_queue",
                      "run_queue", "unsignalled")
WALSENDER_COMPONENTS = ("release", "release_gap", "waiters_freed")
COMPONENTS = BACKEND_COMPONENTS + WALSENDER_COMPONENTS
TRACEFS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
UPROBE_PMU = Path("/sys/bus/event_source/devices/uprobe/type")
BTF = Path("/sys/kernel/btf/vmlinux")
LOCKDOWN = Path("/sys/kernel/security/lockdown")
# bpftrace prints this (on stderr in 0.17, on stdout later) once every probe is attached:
# the marker its own runtime tests wait for. "Attaching N probes..." comes before the
# attaching, and BEGIN runs before the other probes are attached, so neither says ready.
ATTACHED = "__BPFTRACE_NOTIFY_PROBES_ATTACHED"
BUCKETS = 2496  # LatencyHistogram's buckets: the most keys one histogram can have
ATTACH_SECONDS = 60.0  # compiling the program and attaching: about a second here
# The map whose value numbers a snapshot: printed last, it ends each print (and its name
# sorts last, so it ends the print at exit too).
SNAPSHOT = "zz_snapshot"
SNAPSHOT_SECONDS = 2.0  # the longest wait for a print asked for (the sampling waits)
COUNTS = 100  # @sum[COUNTS + component, who]: the events, where snapshots are taken
# What bpftrace does after SIGINT (print its maps, detach its uprobes) takes about a
# second here. On a loaded 2-core VM with other bpftrace sessions attaching to the same
# binary (bpftrace seen in uninterruptible sleep meanwhile: removing a uprobe rewrites
# every process that maps the binary, under each one's memory-map lock), a stop took
# over 30 s and the repeat's anatomy was lost. The workload has ended by then, so a
# longer bound costs only the wait; it stays a bound.
STOP_SECONDS = 120.0
# bpftrace (0.17 to 0.21 at least) leaves its event loop only when the stop signal
# interrupts its epoll_wait (100 ms timeouts): its handler just sets a flag, which the
# loop reads only on EINTR. A signal that comes while it is out of epoll_wait (its
# timeout just expired and it waits for a CPU, on a busy machine) sets the flag and is
# never seen: bpftrace goes on until killed, and the repeat's anatomy was lost (about one
# stop in 30 in the suite). So the stop is sent again every second until bpftrace has
# ended, as SIGTERM: the same handler, which bpftrace keeps after the loop, where SIGINT
# goes back to its default (a second SIGINT would kill it while it prints its maps).
NUDGE_SIGNAL = signal.SIGTERM
NUDGE_SECONDS = 1.0
_CAP_SYS_ADMIN, _CAP_PERFMON, _CAP_BPF = 21, 38, 39


# -- can it run here ------------------------------------------------------------------


def _capabilities() -> int:
    """This process's effective capabilities, as the kernel's bit mask."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


def _kernel_config(option: str) -> bool | None:
    """Whether the running kernel was built with ``option`` (None: no config to read)."""
    import gzip

    release = os.uname().release
    for path in (Path("/proc/config.gz"), Path(f"/boot/config-{release}")):
        try:
            text = (gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz"
                    else path.read_text())
        except OSError:
            continue
        return f"{option}=y" in text.splitlines()
    return None


def _tracefs() -> Path | None:
    return next((p for p in TRACEFS if (p / "uprobe_events").exists()), None)


def unavailable_reason(binary: Path) -> str | None:
    """None when the probe can run here on the server ``binary``, else why not, with the
    fix. Checked, not guessed: the program on PATH, this process's privileges, the
    kernel's uprobe support and type information, the binary's symbols."""
    if shutil.which("bpftrace") is None:
        return ("bpftrace is not installed (fix: apt-get install bpftrace, which "
                "./run setup does)")
    if os.geteuid() != 0:
        caps = _capabilities()
        if not (caps >> _CAP_BPF & 1 and caps >> _CAP_PERFMON & 1):
            return ("loading BPF programs and attaching uprobes needs root (or CAP_BPF and "
                    "CAP_PERFMON), and this process has neither (fix: run syncrep-lab as "
                    "root)")
        return ("bpftrace refuses any user but root, even one with CAP_BPF and CAP_PERFMON "
                "(fix: run syncrep-lab as root)")
    caps = _capabilities()
    if not ((caps >> _CAP_BPF & 1 or caps >> _CAP_SYS_ADMIN & 1)
            and (caps >> _CAP_PERFMON & 1 or caps >> _CAP_SYS_ADMIN & 1)):
        return ("root here lacks CAP_BPF and CAP_PERFMON (and CAP_SYS_ADMIN), as in a "
                "container that drops them: BPF programs cannot be loaded (fix: give the "
                "container CAP_BPF and CAP_PERFMON, or run it privileged)")
    tracefs = _tracefs()
    if tracefs is None:
        if _kernel_config("CONFIG_UPROBE_EVENTS") is False:
            return ("this kernel was built without uprobes (CONFIG_UPROBE_EVENTS is not "
                    "set): the probe needs a kernel with them")
        return ("no uprobe_events under /sys/kernel/tracing or /sys/kernel/debug/tracing: "
                "tracefs is not mounted or the kernel has no uprobes (fix: as root, mount "
                "-t tracefs nodev /sys/kernel/tracing, which ./run setup does)")
    if not UPROBE_PMU.exists():
        return ("the kernel has no uprobe perf events (/sys/bus/event_source/devices/"
                "uprobe: Linux 4.17 or later): bpftrace would fall back to tracefs "
                "uprobe_events, which a killed bpftrace leaves behind")
    if not (tracefs / "events" / "syscalls" / "sys_enter_kill").is_dir():
        return ("the kernel has no syscall tracepoints (no events/syscalls/sys_enter_kill "
                f"under {tracefs}: CONFIG_FTRACE_SYSCALLS): the probe needs them to see "
                "the walsender's kill")
    if not BTF.exists():
        return ("the kernel has no BTF type information (/sys/kernel/btf/vmlinux, "
                "CONFIG_DEBUG_INFO_BTF): bpftrace needs it to read a process's parent")
    with contextlib.suppress(OSError):
        if "[confidentiality]" in LOCKDOWN.read_text():
            return ("the kernel is locked down (confidentiality): BPF programs may not read "
                    "kernel memory (fix: boot without lockdown=confidentiality)")
    try:
        found = elf_symbols(binary, SYMBOLS)
    except (OSError, ValueError) as exc:
        return f"cannot read the server binary's symbols: {exc}"
    missing = [s for s in SYMBOLS if found.get(s, (0, 0))[1] != 2]
    if missing:
        return (f"the server binary {binary} has no symbol {', '.join(missing)} (a "
                "stripped or unusual build; fix: a build from `syncrep-lab pg build` has "
                "them, as do the embedded, fetched and Debian packages)")
    return None


# -- the program ----------------------------------------------------------------------


def aggregate(component: str, value: str, counted: bool = False) -> str:
    """bpftrace statements adding ``value`` to ``component``'s aggregates: the backends'
    together (keyed 0), a walsender's by its pid. The bucket is LatencyHistogram's: the
    value's bit length L by halving (no loops: the verifier prefers straight code), then
    the shift s = max(L - 7, 0) and the index 64 s + (value >> s). ``counted``: the
    events are also counted in ``@sum`` (component + :data:`COUNTS`), beside their sum, for
    snapshots (:class:`Part`)."""
    walsender = component in WALSENDER_COMPONENTS
    who = "pid" if walsender else "(uint64)0"  # one key type in @sum
    index = f"{'pid, ' if walsender else ''}$s * 64 + ($v >> $s)"
    return f"""
    $v = {value};
    if ($v > {MAX_VALUE}) {{ $v = {MAX_VALUE}; }}
    $t = $v; $l = (uint64)0;
    if ($t >= 4294967296) {{ $l = $l + 32; $t = $t >> 32; }}
    if ($t >= 65536) {{ $l = $l + 16; $t = $t >> 16; }}
    if ($t >= 256) {{ $l = $l + 8; $t = $t >> 8; }}
    if ($t >= 16) {{ $l = $l + 4; $t = $t >> 4; }}
    if ($t >= 4) {{ $l = $l + 2; $t = $t >> 2; }}
    if ($t >= 2) {{ $l = $l + 1; $t = $t >> 1; }}
    $l = $l + $t;
    $s = $l > 7 ? $l - 7 : (uint64)0;
    @h_{component}[{index}] = count();
    @sum[{COMPONENTS.index(component)}, {who}] = sum($v);""" + (f"""
    @sum[{COUNTS + COMPONENTS.index(component)}, {who}] = sum((uint64)1);""" if counted else "")


def level_read(symbols: Mapping[str, tuple[int, int]], offset: int = 0) -> str | None:
    """The bpftrace expression, at SyncRepWaitForLSN's probe, of the backend's
    ``synchronous_commit`` (the enum is the same from 9.6 to 18: off 0, local 1, then
    the levels that ask for a standby, as PostgreSQL's SyncRepRequested() reads it).
    Under ``local`` PostgreSQL still calls the function, which returns at once: not a
    commit wait; under ``off`` it calls it without a flush before it. The variable is
    read from the process's memory: where the binary is loaded (a
    position-independent one anywhere) is the probed address less the linked one (the
    function's plus ``offset``, where the probe sits in it). None (every call counted)
    when the binary does not export the variable or the machine's register for the
    probed address is not known here."""
    register = {"x86_64": "ip", "aarch64": "pc"}.get(platform.machine())
    entry, variable = symbols.get("SyncRepWaitForLSN"), symbols.get("synchronous_commit")
    if register is None or entry is None or variable is None or variable[1] != 1:
        return None
    return (f'*uptr((int32 *)(reg("{register}") - {entry[0] + offset} + '
            f'{variable[0]}))')


def program(binary: str, postmasters: Sequence[int], exclude: Sequence[int] = (),
            level: str | None = None, snapshots_by: int | None = None,
            offsets: Mapping[str, int] | None = None,
            standby: standby_anatomy.Standby | None = None) -> str:
    """The bpftrace program for the primaries whose postmasters are ``postmasters``,
    running ``binary`` (a path bpftrace can open: the primary's /proc/PID/exe); the
    processes ``exclude`` (the postmasters' children when it starts) are no backends;
    ``level`` (:func:`level_read`) reads the session's synchronous_commit (None: every
    call is taken as a commit that flushed and waits for a standby);
    ``snapshots_by``: the process whose ``kill(itself, 0)`` takes a snapshot;
    ``offsets``: where in each function its probes go (uprobe_points.probe_offsets; a
    function not in it, or at 0, on its first instruction), named by the symbols
    :func:`alias_symbols` defines; ``standby``: the sync standby whose half of each
    commit is split too (probes/standby_anatomy.py: each commit that slept to its
    release printed with its LSN, the walsender's releases, the two processes' system
    calls).

    >>> text = program("/proc/42/exe", [42], [43])
    >>> 'uprobe:"/proc/42/exe":SyncRepWaitForLSN' in text
    True
    >>> "curtask->real_parent->tgid == 42 && pid != 43" in text
    True
    >>> "@zz_snapshot" in text, "args->sig == 0" in program("/x", [42], [], None, 7)
    (False, True)
    >>> text = program("/proc/42/exe", [42], offsets={"SyncRepWaitForLSN": 8})
    >>> 'uretprobe:"/proc/42/exe":SyncRepWaitForLSN__at_8 ' in text
    True
    >>> "uretprobe:" + '"/proc/42/exe":XLogFlush' in text
    False
    """
    if not postmasters or any(c in binary for c in '"\n'):
        raise ValueError(f"no postmaster, or a binary path bpftrace cannot take: {binary!r}")
    ours = " || ".join(f"curtask->real_parent->tgid == {int(p)}" for p in postmasters)
    ours = f"({ours})" if len(postmasters) > 1 else ours
    backend = ours + "".join(f" && pid != {int(p)}" for p in exclude)
    b = f'"{binary}"'

    def agg(component: str, value: str) -> str:
        return aggregate(component, value, counted=snapshots_by is not None)

    signals = " || ".join(f"args->sig == {s}" for s in LATCH_SIGNALS)
    by = int(snapshots_by or 0)
    prints = " ".join(f"print(@{m});" for m in (*(f"h_{c}" for c in COMPONENTS), "sum",
                                                 SNAPSHOT))
    # a snapshot's moment, to cut the standby's half at the slices
    moment = "" if standby is None else \
        f'\n    printf("M %d %llu\\n", @{SNAPSHOT}, nsecs);'
    numbered = "" if snapshots_by is None else f"""
// Snapshots: kill(itself, 0) by the observer (pid {by}) numbers one and asks bpftrace to
// print the aggregates, the number last (the module's text says why not SIGUSR1).
BEGIN {{ @{SNAPSHOT} = 0; }}

tracepoint:syscalls:sys_enter_kill /pid == {by} && args->pid == {by} && args->sig == 0/ {{
    @{SNAPSHOT} = @{SNAPSHOT} + 1;{moment}
    {prints}
}}
"""
    at = {f: (offsets or {}).get(f, 0) for f in SYMBOLS}
    flush, wait, release = (alias_name(f, at[f]) if at[f] else f
                            for f in ("XLogFlush", "SyncRepWaitForLSN",
                                      "SyncRepReleaseWaiters"))
    where = ", ".join(f"{f}+{at[f]}" for f in SYMBOLS)
    # the standby's half: the wait's LSN (its first argument: the instructions before an
    # offset probe leave the argument registers alone) and level kept to the return
    keep = "" if standby is None else f"@lsn[pid] = arg0; @lvl[pid] = {level or '3'};"
    said = "" if standby is None else \
        'printf("C %llu %llu %llu %d\\n", $entry, @lsn[pid], @kill_rel[pid], @lvl[pid]);'
    released = "" if standby is None else \
        f'if (pid == {int(standby.walsender)}) {{ printf("L %llu\\n", $now); }}'
    forget = "" if standby is None else "delete(@lsn[pid]); delete(@lvl[pid]);"
    cleared = "" if standby is None else \
        "clear(@lsn); clear(@lvl); clear(@rfd);" + (" clear(@wfd);" if standby.host is None
                                                    else "")  # the walreceiver's here
    return f"""// The commit anatomy probe of syncrep-lab (probes/anatomy.py): durations in ns.
// Temporary, per process: @flush (its last XLogFlush's entry), @wait (the wait's
// entry), @kill_at and @kill_rel (the kill for a waiting backend and the start of the
// release that sent it), @done (when its last wait returned), @rel, @rel_end and @freed
// (a walsender's release under way, its last end, its waiters signalled). Each
// function's entry and return probes sit at: {where} (bytes from its start: the first
// instruction the kernel emulates, probes/uprobe_points.py).

uprobe:{b}:{flush} /{backend}/ {{ @flush[pid] = nsecs; }}

uprobe:{b}:{wait} /{backend}/ {{
    $now = nsecs; $level = {level or "2"}; $flush = @flush[pid];
    // the commit flushed unless its level is off (a flush seen then was a buffer's)
    if ($flush && $level > 0) {{
        {agg("local_flush", "$now - $flush")}
    }}
    delete(@flush[pid]);
    // a wait left by an error (a cancel) never returned: its kill is not this one's
    delete(@kill_at[pid]); delete(@kill_rel[pid]);
    if ($level > 1) {{ @wait[pid] = $now; {keep} }} else {{ delete(@wait[pid]); }}
}}

uretprobe:{b}:{wait} /@wait[pid]/ {{
    $now = nsecs; $entry = @wait[pid]; $kill = @kill_at[pid];
    {agg("commit_wait", "$now - $entry")}
    if ($kill) {{
        $rel = @kill_rel[pid];
        if ($rel < $entry) {{ $rel = $entry; }}
        {agg("standby_wait", "$rel - $entry")}
        {agg("wakeup_queue", "$kill - $rel")}
        {agg("run_queue", "$now - $kill")}
        {said}
    }} else {{
        {agg("unsignalled", "$now - $entry")}
    }}
    delete(@wait[pid]); delete(@kill_at[pid]); delete(@kill_rel[pid]); {forget}
    @done[pid] = $now;
}}

uprobe:{b}:{release} /{ours}/ {{
    $now = nsecs; $end = @rel_end[pid];
    @rel[pid] = $now; @freed[pid] = 0; {released}
    if ($end) {{
        {agg("release_gap", "$now - $end")}
    }}
}}

uretprobe:{b}:{release} /@rel[pid]/ {{
    $now = nsecs;
    {agg("release", "$now - @rel[pid]")}
    {agg("waiters_freed", "@freed[pid]")}
    @rel_end[pid] = $now; delete(@rel[pid]); delete(@freed[pid]);
}}

tracepoint:syscalls:sys_enter_kill /@rel[pid]/ {{
    $target = (uint64)args->pid;
    // A release that began before the target's last wait returned freed that wait: its
    // kill, late (the walsender preempted between setting the latch and the system
    // call), must not be taken for the wake-up of the wait the backend is in now.
    if (({signals}) && @wait[$target] && @rel[pid] > @done[$target]) {{
        if (@kill_at[$target] == 0) {{
            @kill_at[$target] = nsecs; @kill_rel[$target] = @rel[pid];
        }}
        @freed[pid] = @freed[pid] + 1;
    }}
}}

END {{
    clear(@flush); clear(@wait); clear(@kill_at); clear(@kill_rel); clear(@done);
    clear(@rel); clear(@rel_end); clear(@freed); {cleared}
}}
{numbered}{"" if standby is None else standby_anatomy.probes(standby)}"""


def map_keys(walsenders: int) -> int:
    """The keys every map may hold (bpftrace's BPFTRACE_MAP_KEYS_MAX): a walsender
    component's histogram holds up to BUCKETS per walsender, and a map that is full
    drops what does not fit without a word."""
    return BUCKETS * (max(walsenders, 1) + 1)


# -- what it printed ------------------------------------------------------------------


Maps = dict[str, dict[str, int]]  # a print's maps: name -> key -> value


def _map_lines(text: str) -> Iterator[tuple[str, Any]]:
    """(map name, its data) of every map bpftrace printed, in order."""
    for data in printed(text, "map"):
        if isinstance(data, dict):
            yield from data.items()


@dataclass
class _Aggregate:
    """One component's aggregates as a print gave them: bucket index -> count, the exact
    sum, the extremes (None where the print had none: the program keeps none now; the
    outputs of versions that kept ``@min`` and ``@max`` are still read)."""

    buckets: dict[int, int] = field(default_factory=dict)
    total: int = 0
    low: int | None = None
    high: int | None = None
    count: int | None = None  # the events as @sum counts them (snapshots only)


def _aggregates(maps: Maps) -> dict[tuple[str, int], _Aggregate]:
    """(component, walsender pid; 0 for the backends) -> its aggregates."""
    found: dict[tuple[str, int], _Aggregate] = {}
    for component in COMPONENTS:
        for key, n in maps.get(f"@h_{component}", {}).items():
            parts = [int(p) for p in key.split(",")]
            who, index = (parts[0], parts[1]) if len(parts) == 2 else (0, parts[0])
            into = found.setdefault((component, who), _Aggregate()).buckets
            into[index] = into.get(index, 0) + n
    for (component, who), agg in found.items():
        key = f"{COMPONENTS.index(component)},{who}"
        agg.total = maps.get("@sum", {}).get(key, 0)
        agg.low, agg.high = maps.get("@min", {}).get(key), maps.get("@max", {}).get(key)
        agg.count = maps.get("@sum", {}).get(f"{COUNTS + COMPONENTS.index(component)},{who}")
    return found


def parse_output(text: str) -> dict[tuple[str, int], LatencyHistogram]:
    """(component, walsender pid; 0 for the backends) -> its histogram, from what
    bpftrace printed with ``-f json`` (the last print of each map). Its extremes are the
    bounds of its first and last bucket where the print has none.

    >>> text = '''{"type": "attached_probes", "data": {"probes": 7}}
    ...
    ... {"type": "map", "data": {"@h_commit_wait": {"5": 2, "129": 1}}}
    ... {"type": "map", "data": {"@h_waiters_freed": {"77,1": 3}}}
    ... {"type": "map", "data": {"@sum": {"1,0": 140, "8,77": 3}}}'''
    >>> found = parse_output(text)
    >>> sorted(found)
    [('commit_wait', 0), ('waiters_freed', 77)]
    >>> h = found[("commit_wait", 0)]
    >>> h.count, h.total, h.min, h.max
    (3, 140, 5, 131)
    """
    maps: Maps = {}
    for name, values in _map_lines(text):
        if isinstance(values, dict):
            maps[name] = {str(k): int(v) for k, v in values.items()}
    found = {}
    for key, agg in sorted(_aggregates(maps).items()):
        filled = [i for i, n in agg.buckets.items() if n > 0]
        low = agg.low if agg.low is not None or not filled else bucket_range(min(filled))[0]
        high = (agg.high if agg.high is not None or not filled
                else bucket_range(max(filled))[1])
        found[key] = LatencyHistogram.from_buckets(agg.buckets, total=agg.total, low=low,
                                                   high=high)
    return found


def snapshots(text: str) -> dict[int, Maps]:
    """The numbered prints in what bpftrace printed (see the module's text): number ->
    its maps. A print cut short (bpftrace killed while printing) has no number yet and is
    left out; the print at exit repeats the last number and is left out too.

    >>> text = '''{"type": "map", "data": {"@h_commit_wait": {"5": 2}}}
    ... {"type": "map", "data": {"@zz_snapshot": 1}}
    ... {"type": "map", "data": {"@h_commit_wait": {"5": 3}}}
    ... {"type": "map", "data": {"@zz_snapshot": 2}}
    ... {"type": "map", "data": {"@h_commit_wait": {"5": 4}}}
    ... {"type": "map", "data": {"@zz_snapshot": 2}}
    ... {"type": "map", "data": {"@h_commit_wait": {"5": 9}}}'''
    >>> {n: m["@h_commit_wait"]["5"] for n, m in snapshots(text).items()}
    {1: 2, 2: 3}
    """
    found: dict[int, Maps] = {}
    current: Maps = {}
    for name, values in _map_lines(text):
        if name == f"@{SNAPSHOT}":
            found.setdefault(int(values), current)
            current = {}
        elif isinstance(values, dict):
            current[name] = {str(k): int(v) for k, v in values.items()}
    return found


@dataclass
class Part:
    """A component's aggregates between two prints. A print reads one map after another
    while the probes go on, in the order the snapshot's probe asks: the histograms first
    (most of the print), ``@sum`` last but one, just before the snapshot's number. So
    ``count`` and ``total`` come from ``@sum`` (counts beside sums, one map read), the
    closest to the snapshot's moment, and the histogram, read earlier, gives the shape
    (percentiles): its count may differ from ``count`` by the events of those
    milliseconds."""

    histogram: LatencyHistogram
    count: int
    total: int


def between(before: Maps | None, after: Maps) -> dict[tuple[str, int], Part]:
    """What was aggregated between two prints (``before`` None: since the start): the
    differences of buckets, sums and counts (:class:`Part`). A part's extremes are the
    bounds of its first and last bucket (within 1/64; exact where an older print kept
    the extremes since the start and they fell in the part); the histogram's total is
    kept within what its count and extremes allow.

    >>> one = {"@h_commit_wait": {"5": 2}, "@sum": {"1,0": 10, "101,0": 2}}
    >>> two = {"@h_commit_wait": {"5": 2, "228": 3}, "@sum": {"1,0": 1213, "101,0": 5}}
    >>> part = between(one, two)[("commit_wait", 0)]
    >>> h = part.histogram
    >>> part.count, part.total, h.count, h.total, h.min, h.max
    (3, 1203, 3, 1203, 400, 403)
    """
    old = _aggregates(before or {})
    found: dict[tuple[str, int], Part] = {}
    for key, agg in sorted(_aggregates(after).items()):
        prior = old.get(key) or _Aggregate(count=0)
        delta = {i: n - prior.buckets.get(i, 0) for i, n in agg.buckets.items()
                 if n > prior.buckets.get(i, 0)}
        if not delta:
            continue
        n = sum(delta.values())
        first, last = bucket_range(min(delta)), bucket_range(max(delta))
        low = (agg.low if agg.low is not None
               and (prior.low is None or agg.low < prior.low) else first[0])
        high = (agg.high if agg.high is not None
                and (prior.high is None or agg.high > prior.high) else last[1])
        low, high = min(max(low, first[0]), first[1]), min(max(high, last[0]), last[1])
        total = agg.total - prior.total
        counted = (agg.count - prior.count if agg.count is not None
                   and prior.count is not None else n)
        histogram = LatencyHistogram.from_buckets(
            delta, total=min(max(total, low * n), high * n), low=low, high=high)
        found[key] = Part(histogram, max(counted, 0), max(total, 0))
    return found


def _who(who: int, names: Mapping[int, str]) -> str:
    return ("backend" if who == 0
            else f"walsender:{names[who]}" if who in names else f"walsender:pid {who}")


def slice_rows(parts: Mapping[tuple[str, int], Part],
               names: Mapping[int, str]) -> list[AnatomyRow]:
    """The ``anatomy`` rows of a slice (:func:`between`), as :func:`anatomy_rows` orders
    and names them; ``count`` and ``total`` are the part's own (see :class:`Part`)."""
    rows = []
    for (component, who), part in sorted(parts.items(),
                                         key=lambda kv: (kv[0][1] != 0, kv[0][1],
                                                         COMPONENTS.index(kv[0][0]))):
        h = part.histogram
        if part.count == 0 or h.count == 0:
            continue
        assert h.min is not None and h.max is not None
        rows.append(AnatomyRow(_who(who, names), component, part.count, float(part.total),
                               float(h.min), float(h.max), h.to_bytes()))
    return rows


def anatomy_rows(found: Mapping[tuple[str, int], LatencyHistogram],
                 names: Mapping[int, str]) -> list[AnatomyRow]:
    """The ``anatomy`` rows: the backends', then each walsender's, named by the standby it
    serves (``names``: pid -> standby; one not found is ``walsender:pid N``)."""
    rows = []
    for (component, who), h in sorted(found.items(),
                                       key=lambda kv: (kv[0][1] != 0, kv[0][1],
                                                       COMPONENTS.index(kv[0][0]))):
        if h.count == 0:
            continue
        assert h.min is not None and h.max is not None
        rows.append(AnatomyRow(_who(who, names), component, h.count, float(h.total), float(h.min),
                               float(h.max), h.to_bytes()))
    return rows


# -- leftovers ------------------------------------------------------------------------


def tracers_dir() -> Path:
    """Where a running bpftrace of ours is recorded: its pid and start time, its owner's."""
    return paths.state_dir() / "tracers"


def _record_tracer(pid: int) -> Path | None:
    record = {"pid": pid, "start": procs.start_time(pid),
              "owner": {"pid": os.getpid(), "start": procs.start_time(os.getpid())}}
    path = tracers_dir() / f"{pid}.json"
    # written whole, then named: `clean` (or a test) that lists the records never reads
    # one half-written (an empty record once failed to parse there)
    partial = path.with_name(f".{pid}.json.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(json.dumps(record))
        os.replace(partial, path)
    except OSError:  # no state dir to write to: PR_SET_PDEATHSIG still ends it
        return None
    return path


def leftover_tracers() -> list[Path]:
    folder = tracers_dir()
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def _comm(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def clean_tracers(wait: float = 5.0) -> list[str]:
    """End every bpftrace of ours whose owner no longer runs (a tool killed before it
    could stop it); a live run's is left alone. Returns what was ended."""
    ended = []
    for path in leftover_tracers():
        try:
            data = json.loads(path.read_text())
            pid, start = int(data["pid"]), data["start"]
            owner = data["owner"]
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)  # not a record this version can act on
            continue
        if procs.is_running(int(owner["pid"]), owner.get("start")):
            continue
        if procs.is_running(pid, start) and _comm(pid) == "bpftrace":
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + wait
            while procs.is_running(pid, start) and time.monotonic() < deadline:
                time.sleep(0.01)
            ended.append(f"bpftrace (pid {pid}) of the commit anatomy probe")
        path.unlink(missing_ok=True)
    return ended


WORK_PREFIX = "anatomy-"  # a probe's own folder among the records: tracers/anatomy-XXXX
OWNER = "owner.json"


def work_dir() -> Path:
    """A folder for the probe's files where no run folder holds them (``observe``: the
    program, what bpftrace prints), among the records with its owner's pid, so that
    ``clean`` removes one whose owner was killed; a temporary folder where the state
    dir cannot be written."""
    try:
        base = tracers_dir()
        base.mkdir(parents=True, exist_ok=True)
        path = Path(tempfile.mkdtemp(prefix=WORK_PREFIX, dir=base))
        (path / OWNER).write_text(json.dumps({"pid": os.getpid(),
                                              "start": procs.start_time(os.getpid())}))
    except OSError:
        return Path(tempfile.mkdtemp(prefix="syncrep-lab-anatomy-"))
    return path


def leftover_work_dirs() -> list[Path]:
    folder = tracers_dir()
    return sorted(p for p in folder.glob(f"{WORK_PREFIX}*") if p.is_dir()) \
        if folder.is_dir() else []


def clean_work_dirs() -> list[Path]:
    """Remove the probe's folders whose owner no longer runs; those removed."""
    removed = []
    for path in leftover_work_dirs():
        try:
            owner = json.loads((path / OWNER).read_text())
            running = procs.is_running(int(owner["pid"]), owner.get("start"))
        except (OSError, ValueError, KeyError, TypeError):
            running = False  # no owner to wait for
        if not running:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


# -- the recorder ---------------------------------------------------------------------


def _excerpt(text: str, limit: int = 400) -> str:
    """What bpftrace said, without the noise: 0.17 raises RLIMIT_MEMLOCK and, where it
    may not (root without CAP_SYS_RESOURCE, as in many containers), says so as an ERROR
    and goes on (since Linux 5.11 BPF memory is charged to the cgroup, not that limit);
    and the marker of attachment."""
    kept = [line.strip() for line in text.splitlines()
            if line.strip() and "RLIMIT_MEMLOCK" not in line and ATTACHED not in line]
    return " / ".join(kept)[:limit]


class _NotWhereAsked(Exception):
    """bpftrace attached fewer uprobes than asked, all where asked."""


class _Misplaced(RuntimeError):
    """bpftrace attached a uprobe where none was asked for."""


@dataclass
class _Running:
    proc: subprocess.Popen[bytes]
    out: IO[bytes]
    err: IO[bytes]
    record: Path | None


class RemoteHalf(Protocol):
    """The walreceiver's probes run on the standby's SSH host (host_anatomy.HostHalf)."""

    def start(self) -> tuple[str, str | None]: ...

    def finish(self) -> tuple[str, str]: ...

    def abort(self) -> None: ...


class CommitAnatomy:
    """The commit anatomy probe of one repeat; a recorder (probes/recorder.py).

    ``binary``: the server binary to put the uprobes on, as bpftrace opens it (the
    primary's ``/proc/PID/exe``); ``postmasters``: the primaries' postmaster pids;
    ``out_dir``: where the program and what bpftrace printed are kept;
    ``admins``: the primaries' connections, to name each walsender by its standby;
    ``at_entry``: every probe on its function's first instruction, as before the probes
    moved to the first emulated one (bench/anatomy_cost.py measures both).
    It never fails the repeat: what it could not do is its ``probes`` row (skipped, with
    the reason and fix, or failed, with what bpftrace said).

    Where the caller knows better than the defaults (``observe --anatomy``): ``exclude``
    gives, when the probe starts, the processes that are no backends (default: every
    child the postmasters have then); ``names`` the walsenders' standbys (default: read
    through ``admins``); ``snapshots`` numbers the prints :meth:`mark` asks for."""

    def __init__(self, binary: Path, postmasters: Sequence[int], out_dir: Path,
                 admins: Sequence[str] = (), *,
                 exclude: Callable[[], Iterable[int]] | None = None,
                 names: Callable[[], Mapping[int, str]] | None = None,
                 snapshots: bool = False, at_entry: bool = False,
                 standbys: Mapping[str, str] | None = None,
                 primary_admin: str | None = None,
                 hosts: Mapping[str, tuple[HostSpec, str]] | None = None,
                 duration: float = 0.0,
                 remote_half: Callable[[standby_anatomy.Standby, float], RemoteHalf] | None
                 = None) -> None:
        self.binary = binary
        self.postmasters = list(postmasters)
        self.out_dir = out_dir
        self.admins = list(admins)
        self.exclude, self.names_of, self.snapshots = exclude, names, snapshots
        self.at_entry = at_entry
        # the standbys' connections by name: the sync one's half of each commit is split
        # too (probes/standby_anatomy.py); None: not asked for
        self.standbys = standbys
        self.primary_admin = primary_admin or (self.admins[0] if self.admins else None)
        self.standby: standby_anatomy.Standby | None = None
        # the standbys on SSH hosts (host, data dir there), and the repeat's duration
        # (the deadline of bpftrace there): a sync one's walreceiver is traced there
        self.hosts, self.duration = hosts, duration
        # what traces a walreceiver there (probes/host_anatomy.HostHalf, given by the
        # caller: that module builds on this one)
        self.remote_half = remote_half
        self.half: RemoteHalf | None = None  # running there
        self.standby_status: tuple[str, str | None] = ("skipped", "not asked for")
        self.status: tuple[str, str | None] = ("skipped", "not started")
        self.running: _Running | None = None
        self.names: dict[int, str] = {}
        self.excluded: list[int] = []  # the processes left out of the backends' figures
        self.marks = 0  # snapshots asked for
        self.nudges = 0  # stop signals sent again (see NUDGE_SIGNAL)
        self._scanned, self._tail = 0, b""  # how far the output was searched for a print
        self.ready_cpu_s: float | None = None  # bpftrace's CPU once attached
        self.attached_ns = 0  # when it was (time.monotonic_ns(), the clock of nsecs)
        # where each function's probes went, bytes from its start (once started), and
        # why they are on the first instructions when the decoder chose others
        self.offsets: dict[str, int] = {}
        self.fallback: str | None = None

    @property
    def program_path(self) -> Path:
        return self.out_dir / "anatomy.bt"

    @property
    def output_path(self) -> Path:
        return self.out_dir / "anatomy.json"

    @property
    def stderr_path(self) -> Path:
        return self.out_dir / "anatomy.err"

    @property
    def symfs_path(self) -> Path:
        """BCC_SYMFS for bpftrace: the symbols naming the probes' places."""
        return self.out_dir / "anatomy-symfs"

    @property
    def pid(self) -> int | None:
        return self.running.proc.pid if self.running is not None else None

    def _walsenders(self) -> dict[int, str]:
        from syncrep_lab.probes.session import walsenders

        if self.names_of is not None:
            return dict(self.names_of())
        names: dict[int, str] = {}
        for admin in self.admins:
            names.update(walsenders(admin))
        return names

    def start(self) -> None:
        reason = unavailable_reason(self.binary)
        if reason is None and not all(procs.alive(p) for p in self.postmasters):
            reason = "the primary's postmaster is not running on this machine"
        if reason is not None:
            self.status = ("skipped", reason)
            return
        try:
            self._spawn()
            self.status = ("ran", None)
        except (OSError, RuntimeError, ValueError) as exc:
            self._abort_half()
            self.status = ("failed", str(exc))

    def _spawn(self) -> None:
        self.names = self._walsenders()
        if self.standbys is not None and self.primary_admin is not None:
            found = standby_anatomy.find(self.primary_admin, self.standbys, self.binary,
                                         self.hosts)
            self.standby = found if isinstance(found, standby_anatomy.Standby) else None
            self.standby_status = (("ran", None) if self.standby is not None
                                   else ("skipped", str(found)))
            if self.standby is not None and self.standby.host is not None:
                self._start_half(self.standby)
        exclude = sorted(set(self.exclude()) if self.exclude is not None else
                         {c for p in self.postmasters for c in procs.children(p)})
        self.excluded = exclude
        self.out_dir.mkdir(parents=True, exist_ok=True)
        symbols = elf_symbols(self.binary, (*SYMBOLS, LEVEL))
        offsets = {} if self.at_entry else {
            f: k for f, k in probe_offsets(self.binary, SYMBOLS).items() if k}
        if offsets:
            try:
                self._launch(exclude, symbols, offsets)
                return
            except _Misplaced:
                raise
            except (_NotWhereAsked, RuntimeError) as exc:
                # a bcc that does not read the aliases; or bpftrace could not resolve one
                # (seen once in some 50 starts, under heavy load): as before, on the
                # first instructions
                self.fallback = str(exc)
        self._launch(exclude, symbols, {})

    def _start_half(self, standby: standby_anatomy.Standby) -> None:
        """The walreceiver's probes on its SSH host, attached before the program here
        (``remote_half``); not there, the standby's half is not split."""
        if self.remote_half is None:
            self.standby_status = ("skipped", f"the standby {standby.name} is on an SSH "
                                   "host and nothing was given to trace it there")
            self.standby = None
            return
        half = self.remote_half(standby, self.duration)
        self.standby_status = half.start()
        if self.standby_status[0] == "ran":
            self.half = half
        else:
            self.standby = None

    def _launch(self, exclude: Sequence[int], symbols: Mapping[str, tuple[int, int]],
                offsets: Mapping[str, int]) -> None:
        """Start bpftrace with the probes ``offsets`` bytes into their functions (the
        others on their first instruction) and wait until they are attached."""
        env = {**os.environ, ATTACHED: "1",
               "BPFTRACE_MAP_KEYS_MAX": str(map_keys(len(self.names) or 2))}
        if self.standby is not None:  # a line per event: room for their bursts
            env["BPFTRACE_PERF_RB_PAGES"] = str(standby_anatomy.PERF_PAGES)
        if offsets:
            # bcc reads a binary's symbols from $BCC_SYMFS/<its path> first, where its
            # build ID matches: there, and only for this bpftrace, the aliases
            debug = self.symfs_path / str(self.binary).lstrip("/")
            debug.parent.mkdir(parents=True, exist_ok=True)
            debug.write_bytes(alias_elf(self.binary, offsets))
            env["BCC_SYMFS"] = str(self.symfs_path)
        level = level_read(symbols, offsets.get("SyncRepWaitForLSN", 0))
        self.program_path.write_text(program(
            str(self.binary), self.postmasters, exclude, level,
            snapshots_by=os.getpid() if self.snapshots else None, offsets=offsets,
            standby=self.standby))
        # Files, not pipes: nobody reads them while it runs, and a bpftrace whose reader
        # is gone must not die of SIGPIPE (it is killed by PR_SET_PDEATHSIG instead).
        out = self.output_path.open("w+b")
        err = self.stderr_path.open("w+b")
        try:
            proc = subprocess.Popen(
                ["bpftrace", "-f", "json", str(self.program_path)], stdin=subprocess.DEVNULL,
                stdout=out, stderr=err, env=env, process_group=0,
                preexec_fn=shutdown.die_with_parent(signal.SIGKILL))
        except OSError:
            out.close()
            err.close()
            raise
        shutdown.track(proc)
        self.running = _Running(proc, out, err, _record_tracer(proc.pid))
        deadline = time.monotonic() + ATTACH_SECONDS
        while True:
            said = self._said()
            if ATTACHED in said:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                gone = proc.poll() is not None
                self._kill()  # the half on a host stays: tried again
                raise RuntimeError(
                    ("bpftrace exited before attaching: " if gone else
                     f"bpftrace did not attach within {ATTACH_SECONDS:g} s: ")
                    + (_excerpt(said) or "it said nothing"))
            time.sleep(0.02)
        if offsets:
            self._check_places(proc.pid, offsets)
        self.offsets = {f: offsets.get(f, 0) for f in SYMBOLS}
        self.ready_cpu_s = self.cpu_seconds()
        # every probe attached from here on: CLOCK_MONOTONIC, bpftrace's nsecs too
        self.attached_ns = time.monotonic_ns()

    def said_excerpt(self) -> str:
        """What bpftrace said on stderr, without the noise (see :func:`_excerpt`)."""
        try:
            return _excerpt(self.stderr_path.read_text(errors="replace"))
        except OSError:
            return ""

    def _check_places(self, pid: int, offsets: Mapping[str, int]) -> None:
        """The kernel's word on where bpftrace put the uprobes, against where they were
        asked for: every function's entry probe, and the return probe of those that have
        one (:data:`RETURNED`), at its offset. Fewer than
        asked (a bcc that does not read the aliases leaves a probe on an unknown symbol
        out without a word): killed, to start again on the first instructions; one
        anywhere else: killed, and the probe fails."""
        places = file_offsets(self.binary, {f: offsets.get(f, 0) for f in SYMBOLS})
        wanted = sorted([(False, at) for at in places.values()]
                        + [(True, places[f]) for f in RETURNED])
        found = attached_uprobes(pid)
        if found == wanted:
            return
        self._kill()  # the half on a host stays: tried again
        if found is None or set(found) < set(wanted):
            raise _NotWhereAsked(f"uprobes at {found}, asked {wanted}")
        raise _Misplaced(f"bpftrace put uprobes at file offsets {found}, not at "
                         f"{wanted} as asked: stopped")

    def _said(self) -> str:
        """Everything bpftrace has printed so far, stdout and stderr."""
        if self.running is None:
            return ""
        return (self.stderr_path.read_text(errors="replace")
                + self.output_path.read_text(errors="replace"))

    def cpu_seconds(self) -> float | None:
        """bpftrace's own CPU so far (user + system; the BPF programs run in the traced
        processes and count there, not here)."""
        if self.running is None:
            return None
        fields = procs.stat_fields(self.running.proc.pid)
        if fields is None:
            return None
        return (int(fields[procs.UTIME]) + int(fields[procs.STIME])) / os.sysconf("SC_CLK_TCK")

    def mark(self) -> int | None:
        """Ask for a numbered print of the aggregates (``kill(self, 0)``: see the module's
        text); its number, or None when bpftrace does not run."""
        running = self.running
        if running is None or running.proc.poll() is not None:
            return None
        os.kill(os.getpid(), 0)
        self.marks += 1
        return self.marks

    def snapshot(self, timeout: float = SNAPSHOT_SECONDS) -> int | None:
        """A numbered print of the aggregates as they are now: asked for and waited for,
        so that what the caller reads next is read at the same moment (bpftrace prints
        when it reads the request, and until then the aggregates go on growing: the
        print, not the request, is the snapshot's moment). Its number; None when
        bpftrace does not run or did not print within ``timeout``."""
        number = self.mark()
        running = self.running
        if number is None or running is None:
            return None
        ends = f'"@{SNAPSHOT}": {number}}}'.encode()
        deadline = time.monotonic() + timeout
        while not self._printed_since(ends):
            if running.proc.poll() is not None or time.monotonic() > deadline:
                return None
            time.sleep(0.002)
        return number

    def _printed_since(self, marker: bytes) -> bool:
        """Whether ``marker`` is in what bpftrace printed since the last look (only the
        new bytes are read: the prints of a long window add up to megabytes)."""
        try:
            with self.output_path.open("rb") as f:
                f.seek(self._scanned)
                new = f.read()
        except OSError:
            return False
        seen = self._tail + new
        self._scanned += len(new)
        self._tail = seen[-len(marker):]
        return marker in seen

    def printed(self) -> str:
        """Everything bpftrace printed on stdout so far."""
        try:
            return self.output_path.read_text(errors="replace")
        except OSError:
            return ""

    def end(self, last: int | None, wait: float = 10.0) -> str:
        """Once print ``last`` is out (waiting up to ``wait`` s for it; None, or a stop
        asked for by a signal: at once), kill bpftrace, and return everything it printed.
        Nothing more is needed of it, and its uprobes are perf events that go with it
        (SIGINT would make it print its maps once more and exit a second later)."""
        running = self.running
        try:
            ends = f'"@{SNAPSHOT}": {last}}}'  # how print ``last`` ends (-f json)
            deadline = time.monotonic() + wait
            while (running is not None and last is not None and shutdown.requested() is None
                   and running.proc.poll() is None and time.monotonic() < deadline
                   and ends not in self.printed()):
                time.sleep(0.02)
        finally:
            self.abort()
        return self.printed()

    def stop(self, ending: Ending | None = None) -> ProbeRows:
        """SIGINT (and :data:`NUDGE_SIGNAL` each second it is not heeded), bpftrace
        prints its maps and exits; the ``anatomy`` rows and the ``probes`` row.
        Interrupted (shutdown requested): killed, nothing kept."""
        rows = ProbeRows()
        running = self.running
        if running is not None:
            if shutdown.requested() is not None:
                self.abort()
                self.status = ("failed", "interrupted")
            else:
                try:
                    rows.anatomy = self._finish(running)
                except (OSError, RuntimeError, ValueError) as exc:
                    self.abort()
                    self.status = ("failed", str(exc))
        self._abort_half()
        rows.probes.append(ProbeRow(PROBE, *self.status))
        if self.standbys is not None:
            rows.probes.append(ProbeRow(standby_anatomy.PROBE, *(
                self.standby_status if self.status[0] == "ran" else self.status)))
        return rows

    def _finish(self, running: _Running) -> list[AnatomyRow]:
        proc = running.proc
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + STOP_SECONDS
        while True:
            try:
                proc.wait(timeout=max(0.0, min(NUDGE_SECONDS, deadline - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    raise RuntimeError(f"bpftrace did not stop within {STOP_SECONDS:g} s "
                                       "of SIGINT") from None
                self.nudges += 1  # see NUDGE_SIGNAL
                proc.send_signal(NUDGE_SIGNAL)
        self._forget()
        text = self.output_path.read_text(errors="replace")
        if proc.returncode != 0:
            raise RuntimeError(f"bpftrace failed (exit status {proc.returncode}): "
                               + (_excerpt(self.stderr_path.read_text(errors="replace"))
                                  or "it said nothing"))
        names = {**self.names, **self._walsenders()}
        found = anatomy_rows(parse_output(text), names)
        if self.standby is not None:
            found += self._standby_rows(self.standby, text)
        return found

    def _standby_rows(self, standby: standby_anatomy.Standby, text: str) -> list[AnatomyRow]:
        """The standby's half's rows; its status said. Where the walreceiver was traced
        on its SSH host, what bpftrace printed there is kept beside this one's
        (``standby.json``), and the offset of that host's clock (``standby-clock.json``,
        and the probe's row)."""
        said = self.stderr_path.read_text(errors="replace") + text
        host_text = None
        if self.half is not None:
            try:
                host_text, host_err = self.half.finish()
            except (UserError, RuntimeError, OSError, ValueError) as exc:
                self.standby_status = ("failed", exc.cause if isinstance(exc, UserError)
                                       else str(exc))
                return []
            finally:
                self.half = None
            (self.out_dir / "standby.json").write_text(host_text)
            said += host_err + host_text
        rows, why, clock, off = standby_anatomy.standby_rows(text, standby.name,
                                                             self.attached_ns, host_text)
        if clock is not None:
            # with the moment this program was attached: what the events are cut at
            (self.out_dir / "standby-clock.json").write_text(json.dumps(
                {**clock.as_dict(), "attached_ns": self.attached_ns}))
        if off is not None:
            # the sum check failed, or chains led to another release than their own:
            # what the join is to be replayed from, kept with the events (anatomy.json,
            # standby.json): the moment the events are cut at
            (self.out_dir / "standby-check.json").write_text(json.dumps(
                {"attached_ns": self.attached_ns, "said": off}))
        lost = standby_anatomy.lost(said)
        ran = "; ".join(s for s in (clock.said(standby.host.name) if clock and standby.host
                                    else None, off) if s) or None
        self.standby_status = (
            ("failed", f"bpftrace lost {lost} events") if lost else
            ("skipped", why) if why is not None else ("ran", ran))
        return rows if not lost else []

    def _abort_half(self) -> None:
        """The walreceiver's probes on its host ended, if they still run."""
        if self.half is not None:
            self.half.abort()
            self.half = None

    def abort(self) -> None:
        """Kill bpftrace at once (its probes go with it), and the walreceiver's on its
        host; keep nothing."""
        self._abort_half()
        self._kill()

    def _kill(self) -> None:
        """Kill bpftrace here at once."""
        running = self.running
        if running is None:
            return
        if running.proc.returncode is None:  # not reaped: the group is still its own
            with contextlib.suppress(OSError):
                os.killpg(running.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            running.proc.wait(timeout=5)
        self._forget()

    def _forget(self) -> None:
        running = self.running
        if running is None:
            return
        shutdown.untrack(running.proc)
        running.out.close()
        running.err.close()
        if running.record is not None and running.proc.returncode is not None:
            running.record.unlink(missing_ok=True)
        self.running = None
