"""The lock probe: which kernel locks the primary's processes take and wait for, per
commit and per process role, with the kernel function that took each and the user
frames above the system call.

Why: the seed's ``perf top`` put 73 % of the time in the kernel (``__mutex_lock_slowpath``,
``mutex_spin_on_owner``, ``reverse_path_check_proc``, ``ep_free``). Before Linux 6.4,
``fs/eventpoll.c`` has one global mutex, ``epmutex``, taken by every close of an epoll set
(``ep_free``) and by every ``EPOLL_CTL_ADD`` of a file that is already in another epoll
set (``do_epoll_ctl``'s full check, which walks the reverse paths). PostgreSQL 9.6 to 13
make a wait set for each ``WaitLatch``/``WaitLatchOrSocket`` call and add to it the
postmaster-death pipe, which every backend inherited, so every such wait takes
``epmutex`` twice, whoever else waits; 14 keeps one set per process (``LatchWaitSet``).

One bpftrace program on the primary's host, filtered to the postmaster and its children:

- ``lock:contention_begin``/``contention_end`` (Linux 5.19 and later): every wait for a
  kernel lock, its kind (the tracepoint's flags), its time, the kernel frames above it
  and the user frames above the system call;
- where the kernel has kprobes: ``mutex_lock``, ``mutex_lock_killable`` and
  ``mutex_lock_interruptible``, so that every mutex take is counted, by the function
  that took it, whether or not anyone waited (on one emulated CPU nobody may);
- the locks of :data:`COUNTED` are named where the kernel has their symbol (in
  ``/proc/kallsyms``): a take or wait of ``epmutex`` is told from one of a set's own.

Which epoll mutex a close takes depends on the kernel, not on its major version:
Debian's 6.1.0-57 carries the 6.4 rework (``ep_clear_and_put``, the set's own
``ep->mtx``), so there 9.6's closes take a mutex no other process takes, and the global
``epmutex`` is left to nested sets. The probe counts what the kernel it runs on does.

Its counts stay in their maps, printed once when it stops (a print and clear each second
lost what came while bpftrace printed, which under TCG was most of it). The user frames
are sampled apart, by a second bpftrace (:func:`frames_program`): bpftrace names a
process's user frames from its memory map when it prints (a process gone by then reads
``[unknown]``), so they are printed and cleared every second, and each count takes the
frames sampled most often for its process and caller. Apart, because naming them closes
bpftrace's own file descriptors now and then: bcc (0.26, Debian 12's; fixed in 0.33)
makes a symbol table for each user frame bpftrace prints, and each one closes a
descriptor number read from uninitialised memory (the entry for /tmp/perf-PID.map). Traced
here (strace on the probe's bpftrace, a 3 s repeat): close(1191888), close(808464432),
and the perf event of a probe, which then fired no more; in CI a takes map was closed so,
and bpftrace printed it at its end as empty, with exit status 0. The counting bpftrace
names no user frame. User frames are walked by frame pointers: on a
build without them (most), the frames past the system call's wrapper and its caller
are not to be trusted, so the walk stops at the first frame it cannot name.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from syncrep_lab import shutdown
from syncrep_lab.errors import UserError
from syncrep_lab.hosts import postmaster
from syncrep_lab.hosts.ssh import HostSpec, SshHost
from syncrep_lab.pg.roles import NodeProcess, role_of_title, titled
from syncrep_lab.probes import bpftrace_json
from syncrep_lab.probes.host_anatomy import HostTracer, grant
from syncrep_lab.probes.recorder import Ending
from syncrep_lab.probes.session import walsenders
from syncrep_lab.store import KernelLockRow, ProbeRow, ProbeRows

PROBE = "locks"
# The locks counted by name where the kernel has the symbol: Linux 6.4 took epmutex off
# the close path (and then removed it), so a newer kernel counts none.
COUNTED = ("epmutex",)
KSTACK_FRAMES = 8  # enough to climb out of the lock's own functions to its caller
TAKE_FRAMES = 3  # at mutex_lock's entry: itself, its caller, the caller's caller
USTACK_FRAMES = 4  # the system call's wrapper and what called it
USER_FRAMES_KEPT = 3
TITLE_BYTES = 64  # of a process title: "postgres: walsender postgres 10.0.0.1(5432) ..."
MAP_KEYS = 4096  # keys a map holds within one second's print: a few dozen are seen
# The kernel's locking functions, passed over to find who took the lock.
_LOCKING = ("mutex_", "__mutex_", "_raw_", "__raw_", "queued_", "__pv_queued_",
            "native_queued_", "do_raw_", "rwsem_", "__rwsem_", "down_", "__down_", "up_",
            "osq_", "rt_mutex", "__rt_mutex", "percpu_down", "__percpu_down",
            "percpu_rwsem", "lock_acquire", "trace_contention", "__traceiter_",
            "perf_trace_", "preempt_schedule", "schedule")
# lock:contention_begin's flags (include/trace/events/lock.h)
_FLAGS = ((1 << 5, "mutex"), (1 << 0, "spin"), (1 << 1, "read"), (1 << 2, "write"))
# every mutex take, where the kernel has kprobes: both programs' probe on it
TAKES = "kprobe:mutex_lock, kprobe:mutex_lock_killable, kprobe:mutex_lock_interruptible"


def _ours(postmaster: int) -> str:
    """The filter to the postmaster and its children."""
    pm = int(postmaster)
    return f"(pid == {pm} || curtask->real_parent->tgid == {pm})"


def program(postmaster: int, counted: Sequence[str], kprobes: bool) -> str:
    """The counting bpftrace program for the primary whose postmaster is ``postmaster``
    (its pid on that host); ``counted``: the lock symbols of :data:`COUNTED` that kernel
    has, named where they are met; where it has ``kprobes``, every mutex its processes
    take is counted too. It names no user frame (see the module's text).

    >>> text = program(42, ["epmutex"], True)
    >>> "kprobe:mutex_lock_killable" in text and 'kaddr("epmutex")' in text
    True
    >>> "kprobe:" in program(42, [], False) or "kaddr" in program(42, [], True)
    False
    >>> "END" in text or "ustack" in text or "interval" in text  # see the comments
    False
    """
    ours = _ours(postmaster)
    # each process's title (PostgreSQL writes it over its argv, which /proc/PID/cmdline
    # reads): its role, where no snapshot saw it (a backend that connected after the
    # last one). Read again until it is PostgreSQL's: a backend just forked still shows
    # the postmaster's command line
    name = ("  if (@named[pid] == 0) { "
            f"@title[pid] = str(uptr(curtask->mm->arg_start), {TITLE_BYTES}); "
            '@named[pid] = strncmp(@title[pid], "postgres: ", 10) == 0; }')
    which = " + ".join(f"(@a[tid] == kaddr(\"{s}\")) * {i}"
                       for i, s in enumerate(counted, 1)) or "0"
    text = [
        f"tracepoint:lock:contention_begin /{ours}/ {{",
        "  @t[tid] = nsecs; @a[tid] = (uint64)args->lock_addr; @f[tid] = args->flags;",
        "}",
        "tracepoint:lock:contention_end /@t[tid]/ {",
        name,
        f"  $which = {which};",
        f"  @c[pid, @f[tid], $which, kstack({KSTACK_FRAMES})] = count();",
        f"  @w[pid, @f[tid], $which, kstack({KSTACK_FRAMES})] = sum(nsecs - @t[tid]);",
        "  delete(@t[tid]); delete(@a[tid]); delete(@f[tid]);",
        "}",
    ]
    if kprobes:
        which_arg = " + ".join(f"(arg0 == kaddr(\"{s}\")) * {i}"
                               for i, s in enumerate(counted, 1)) or "0"
        text += [
            f"{TAKES} /{ours}/ {{",
            name,
            f"  @k[pid, {which_arg}, kstack({TAKE_FRAMES})] = count();",
            "}",
        ]
    # the counts stay in their maps, printed when bpftrace stops (kernel frames are
    # named whenever). No END block: bpftrace (0.17) loads an END program into the
    # kernel only once its event loop has ended, and that load failed once in the suite
    # on a loaded machine ("Error loading program: END", exit 255), which lost the
    # repeat's counts. Without it, the helper maps (@t, @a, @f, @named) are printed at
    # exit too: a few entries, which parse and titles pass over
    return "\n".join(text) + "\n"


def frames_program(postmaster: int, kprobes: bool) -> str:
    """The sampling bpftrace program: the user frames above each wait (and, with
    ``kprobes``, each take) of the postmaster's processes, by process and kernel frames,
    printed and cleared each second while the processes live to be named.

    >>> text = frames_program(42, True)
    >>> "ustack(perf, 4)" in text and "kprobe:mutex_lock_killable" in text
    True
    >>> "@uk" in frames_program(42, False) or "@c[" in text
    False
    """
    ours = _ours(postmaster)
    user = f"ustack(perf, {USTACK_FRAMES})"
    # at the wait's beginning: its kernel frames are those at its end (the caller is
    # what counts), and the counting program's helper maps are not to be shared
    text = [f"tracepoint:lock:contention_begin /{ours}/ {{",
            f"  @uc[pid, kstack({KSTACK_FRAMES}), {user}] = count();",
            "}"]
    samples = ["@uc"]
    if kprobes:
        text += [f"{TAKES} /{ours}/ {{",
                 f"  @uk[pid, kstack({TAKE_FRAMES}), {user}] = count();",
                 "}"]
        samples.append("@uk")
    text += ["interval:s:1 {",
             "  " + " ".join(f"print({m});" for m in samples),
             "  " + " ".join(f"clear({m});" for m in samples),
             "}"]
    return "\n".join(text) + "\n"


@dataclass
class Tally:
    """One (process, lock, kind, caller, user frames)'s events over the prints."""

    acquisitions: int = 0
    contentions: int = 0
    wait_ns: int = 0


TallyKey = tuple[int, str, str, str, str]  # pid, lock, kind, caller, user_stack


def kind_of(flags: int) -> str:
    """The lock's kind from lock:contention_begin's flags.

    >>> kind_of(0x20), kind_of(0x1), kind_of(0x2), kind_of(0)
    ('mutex', 'spin', 'read', 'other')
    """
    return next((name for bit, name in _FLAGS if flags & bit), "other")


def caller_of(frames: Sequence[str]) -> str:
    """The first kernel function above the locking functions: who took the lock.

    >>> caller_of(["__mutex_lock.constprop.0+1092", "__mutex_lock_slowpath+19",
    ...            "mutex_lock+53", "ep_free+28", "ep_eventpoll_release+22"])
    'ep_free'
    >>> caller_of([])
    ''
    """
    for frame in frames:
        name = frame.strip().split("+", 1)[0]
        if name and not name.startswith(_LOCKING):
            return name
    return ""


_USER_FRAME = re.compile(r"^\s*[0-9a-f]+\s+(\S+?)(?:\+\d+)?\s+\((.*)\)\s*$")


def user_stack_of(frames: Sequence[str]) -> str:
    """The user frames above the system call, named, up to the first that is not
    (without frame pointers the walk past it is not to be trusted), " < " between.

    >>> user_stack_of(["\\t7f0a close+23 (/lib/libc.so.6)",
    ...                "\\t55aa FreeWaitEventSet+45 (/pg/bin/postgres)",
    ...                "\\t55ab 0x55ab ([unknown])", "\\t55ac main+3 (/pg/bin/postgres)"])
    'close < FreeWaitEventSet'
    """
    names = []
    for frame in frames:
        m = _USER_FRAME.match(frame)
        if m is None or m.group(2) == "[unknown]" or m.group(1).startswith("0x"):
            break
        names.append(m.group(1))
        if len(names) == USER_FRAMES_KEPT:
            break
    return " < ".join(names)


def _split_key(key: str, scalars: int) -> tuple[list[str], list[str], list[str]]:
    """A map key of ``scalars`` numbers, then a kstack and a ustack, as bpftrace's JSON
    prints it: "1,32,0,\\n    frame\\n    frame\\n,\\n\\tframe\\n"."""
    head, _, rest = key.partition("\n")
    fields = [f for f in head.split(",")][:scalars]
    kernel: list[str] = []
    user: list[str] = []
    into = kernel
    for line in rest.split("\n"):
        if line.strip() == ",":
            into = user
        elif line.strip():
            into.append(line)
    return fields, kernel, user


def parse(text: str, counted: Sequence[str]) -> dict[TallyKey, Tally]:
    """Every (pid, lock, kind, caller, user frames)'s takes, waits and wait time, from
    what bpftrace printed with ``-f json``: the counts' maps as printed at its end, each
    with the user frames sampled most often for its process and caller (none named: "").

    >>> text = ('{"type": "map", "data": {"@uk": {"7,\\\\n    mutex_lock+1\\\\n'
    ...         '    ep_free+28\\\\n,\\\\n\\\\t7f close+23 (/libc.so)\\\\n": 3}}}\\n'
    ...         '{"type": "map", "data": {"@c": {"7,32,1,\\\\n    mutex_lock+5\\\\n'
    ...         '    ep_free+28\\\\n": 2}}}\\n'
    ...         '{"type": "map", "data": {"@w": {"7,32,1,\\\\n    mutex_lock+5\\\\n'
    ...         '    ep_free+28\\\\n": 900}}}\\n'
    ...         '{"type": "map", "data": {"@k": {"7,1,\\\\n    mutex_lock+1\\\\n'
    ...         '    ep_free+28\\\\n": 5, "8,0,\\\\n    mutex_lock+1\\\\n'
    ...         '    pipe_read+9\\\\n": 1}}}\\n')
    >>> for key, tally in sorted(parse(text, ["epmutex"]).items()): print(key, tally)
    (7, 'epmutex', 'mutex', 'ep_free', 'close') Tally(acquisitions=5, contentions=2, wait_ns=900)
    (8, '', 'mutex', 'pipe_read', '') Tally(acquisitions=1, contentions=0, wait_ns=0)
    """
    counts: dict[str, dict[str, int]] = {}
    frames: dict[tuple[int, str], Counter[str]] = defaultdict(Counter)
    for data in bpftrace_json.printed(text, "map"):
        if not isinstance(data, dict):
            continue
        for name, values in data.items():
            if not isinstance(values, dict):
                continue
            if name in ("@c", "@w", "@k"):
                counts[name] = values  # printed once, at the end
            elif name in ("@uc", "@uk"):
                for key, value in values.items():
                    fields, kernel, user = _split_key(str(key), 1)
                    named = user_stack_of(user)
                    if named and fields and fields[0].isdigit():
                        frames[(int(fields[0]), caller_of(kernel))][named] += int(value)
    out: dict[TallyKey, Tally] = defaultdict(Tally)
    for name, values in counts.items():
        for key, value in values.items():
            fields, kernel, _ = _split_key(str(key), 2 if name == "@k" else 3)
            try:
                pid = int(fields[0])
                flags = 0x20 if name == "@k" else int(fields[1])
                which = int(fields[-1])
                n = int(value)
            except (ValueError, IndexError):
                continue
            lock = counted[which - 1] if 0 < which <= len(counted) else ""
            caller = caller_of(kernel)
            seen = frames.get((pid, caller))
            tally = out[(pid, lock, kind_of(flags), caller,
                         seen.most_common(1)[0][0] if seen else "")]
            if name == "@k":
                tally.acquisitions += n
            elif name == "@c":
                tally.contentions += n
            else:
                tally.wait_ns += n
    return dict(out)


def maps_printed(text: str) -> dict[str, int]:
    """Each map bpftrace printed and how many times (``-f json``).

    >>> maps_printed('{"type": "map", "data": {"@uk": {}}}\\n'
    ...              '{"type": "map", "data": {"@uk": {}}}\\n{"type": "map", "data": {"@k": {}}}')
    {'@uk': 2, '@k': 1}
    """
    seen: Counter[str] = Counter()
    for data in bpftrace_json.printed(text, "map"):
        if isinstance(data, dict):
            seen.update(data.keys())
    return dict(seen)


def unaccounted(text: str, tallies: Mapping[TallyKey, Tally], rows: Sequence[KernelLockRow],
                kprobes: bool) -> str | None:
    """Why what bpftrace printed cannot be the repeat's counts, where it cannot: with
    kprobes every process takes mutexes, so no takes map at its end means the end's
    print was lost; takes counted and none of them the primary's processes' means they
    were not named. None where the counts stand (a kernel without kprobes may see no
    wait at all).

    >>> unaccounted('{"type": "map", "data": {"@uk": {}}}', {}, [], True)
    'bpftrace printed no counts when it stopped (of 36 bytes: @uk 1 time)'
    >>> unaccounted("", {}, [], False) is None
    True
    """
    printed = maps_printed(text) if kprobes else {}
    if kprobes and "@k" not in printed:
        seen = ", ".join(f"{m} {n} time{'s' if n > 1 else ''}"
                         for m, n in printed.items()) or "no map"
        return (f"bpftrace printed no counts when it stopped (of {len(text):,} bytes: "
                f"{seen})")
    if tallies and not rows:
        pids = sorted({key[0] for key in tallies})
        return (f"none of the {len(pids)} processes counted was named one of the "
                f"primary's ({', '.join(map(str, pids[:8]))}{' ...' if len(pids) > 8 else ''})")
    return None


def titles(text: str) -> dict[int, str]:
    """Each process's title as the program read it (the last print of @title).

    >>> titles('{"type": "map", "data": {"@title": {"7": "postgres: u db [local] idle"}}}')
    {7: 'postgres: u db [local] idle'}
    """
    out: dict[int, str] = {}
    for data in bpftrace_json.printed(text, "map"):
        values = data.get("@title") if isinstance(data, dict) else None
        if isinstance(values, dict):
            for pid, title in values.items():
                if str(pid).isdigit():
                    out[int(pid)] = str(title)
    return out


def named_roles(node: str, seen: Mapping[int, tuple[str, str]], read: Mapping[int, str],
                walsenders: Mapping[int, str]) -> dict[int, tuple[str, str]]:
    """pid -> (node, role label): what a snapshot saw, else the title the program read;
    and that title where a snapshot saw the process before PostgreSQL wrote its title
    (role "other": a backend just forked shows the postmaster's command line until it
    starts its authentication, and in an emulated guest under load that outlasts the
    look 2 s into the repeat: all of a cell's backends, connecting at once, can be seen
    so, and their takes would go under "other").

    >>> named_roles("primary", {6: ("primary", "other")},
    ...             {6: "postgres: u db 10.0.0.2(41) authentication"}, {})[6]
    ('primary', 'backend')
    >>> named_roles("primary", {5: ("primary", "checkpointer")},
    ...             {5: "postgres: checkpointer", 9: "postgres: u db [local] COMMIT",
    ...              11: "postgres: walsender u 10.0.0.2(40) streaming 0/1"}, {11: "b"})
    {5: ('primary', 'checkpointer'), 9: ('primary', 'backend'), 11: ('primary', 'walsender:b')}
    """
    out = dict(seen)
    for pid, title in read.items():
        if pid not in out or (out[pid][1] == "other" and titled(title)):
            role = role_of_title(title)
            named = NodeProcess(node, pid, role,
                                walsenders.get(pid, "") if role == "walsender" else "")
            out[pid] = (node, named.label)
    return out


def lock_rows(tallies: Mapping[TallyKey, Tally], roles: Mapping[int, tuple[str, str]],
              takes: bool) -> list[KernelLockRow]:
    """The store's rows: the tallies summed per (node, role) of each process (``roles``:
    pid -> (node, role label); a process not named there is left out). Where the takes
    were counted (``takes``: kprobes), a mutex's acquisitions are a count (0 where only
    waits were seen); else, and for any other kind, None."""
    summed: dict[tuple[str, str, str, str, str, str], Tally] = defaultdict(Tally)
    for (pid, lock, kind, caller, user), t in tallies.items():
        who = roles.get(pid)
        if who is None:
            continue
        s = summed[(*who, lock, kind, caller, user)]
        s.acquisitions += t.acquisitions
        s.contentions += t.contentions
        s.wait_ns += t.wait_ns
    return [KernelLockRow(node, role, lock, kind, caller, user,
                          t.acquisitions if takes and kind == "mutex" else None,
                          t.contentions,
                          float(t.wait_ns))
            for (node, role, lock, kind, caller, user), t in sorted(summed.items())]


# -- on the primary's SSH host (a guest, say) --------------------------------------------

# $1: "sudo" when the account may use sudo -n. One line each: "no WHAT" (and the end),
# "kernel RELEASE", "kprobes", "symbol NAME" per counted lock it has, "tracepoints".
_CHECK_SH = r"""
if [ "$(id -u)" = 0 ]; then via=
elif [ "$1" = sudo ]; then via="sudo -n"
else echo "no account"; exit 0; fi
command -v bpftrace >/dev/null 2>&1 || { echo "no bpftrace"; exit 0; }
[ -e /sys/kernel/btf/vmlinux ] || { echo "no btf"; exit 0; }
echo "kernel $(uname -r)"
[ -e /sys/bus/event_source/devices/kprobe/type ] && echo kprobes
shift
for s in "$@"; do grep -qw -- "$s" /proc/kallsyms && echo "symbol $s"; done
$via bpftrace -l 'tracepoint:lock:contention_begin' 2>/dev/null \
  | grep -q contention_begin && echo tracepoints
exit 0
"""


@dataclass(frozen=True)
class LockCheck:
    """What a host's kernel gives the probe: why it cannot run (None: it can), its
    release, and the counted locks whose takes it can count (kprobes and the symbol)."""

    reason: str | None
    via: str = ""
    release: str = ""
    counted: tuple[str, ...] = ()
    kprobes: bool = False

    def note(self) -> str:
        """What the probe's row says it counted, where it ran."""
        takes = ("and every take of a mutex" if self.kprobes else
                 "but no take (the kernel has no kprobes)")
        named = (f"{', '.join(self.counted)} named" if self.counted else
                 f"no {', '.join(COUNTED)} in this kernel")
        return f"kernel {self.release}: every wait for a lock, {takes}; {named}"


def check(host: SshHost) -> LockCheck:
    """Whether the probe can run on the host, and what its kernel lets it count."""
    spec = host.spec
    out = host.sh(_CHECK_SH, "sudo" if spec.sudo else "", *COUNTED,
                  what="checking the kernel's lock tracepoints", timeout=120).stdout
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    name = spec.name
    missing = next((ln.split(None, 1)[1] for ln in lines if ln.startswith("no ")), None)
    if missing is not None:
        return LockCheck({
            "account": f"the account {spec.user} on {name} is not root and [hosts.{name}] "
                       f"has no sudo = true: bpftrace needs root there (fix: sudo = true "
                       f"with the grant `{grant(spec)}` on {name}, or log in as root)",
            "bpftrace": f"bpftrace is not installed on {name} (fix: apt-get install "
                        "bpftrace there)",
            "btf": f"the kernel of {name} has no BTF type information (/sys/kernel/btf/"
                   "vmlinux): bpftrace needs it to find the postmaster's children",
        }.get(missing, f"{name}: the lock probe's check failed ({missing})"))
    release = next((ln.split(None, 1)[1] for ln in lines if ln.startswith("kernel ")), "?")
    via = "sudo" if spec.sudo and host.spec.user != "root" else ""
    if "tracepoints" not in lines:
        return LockCheck(f"the kernel of {name} ({release}) has no lock:contention_begin "
                         "tracepoint (Linux 5.19 or later), or bpftrace may not list it "
                         f"there (fix: sudo = true with the grant `{grant(spec)}`)",
                         via, release)
    counted = tuple(s for s in COUNTED if f"symbol {s}" in lines)
    return LockCheck(None, via, release, counted, "kprobes" in lines)


class HostLocks:
    """The lock probe of one probed repeat on the primary on an SSH host (or here, through
    hosts/local.LocalHost: :class:`LocalLocks`), run there by
    bpftrace under the commit anatomy's watchdog (probes/host_anatomy.HostTracer: the
    same sudo, guard and cleanup on every way out). ``stop`` takes the roles of the
    processes seen (pid -> (node, role label)). It never fails the repeat: what it could
    not do is its ``probes`` row."""

    def __init__(self, spec: HostSpec, data_dir: str, out_dir: Path, duration: float,
                 host: SshHost | None = None) -> None:
        """``host``: the host to run on, this machine's (hosts/local.LocalHost) among
        them; None: a connection to ``spec``."""
        self.spec, self.data_dir, self.out_dir, self.duration = spec, data_dir, out_dir, duration
        self.host = host
        self.base = posixpath.normpath(data_dir) + ".locks"  # beside the data dir there
        self.status: tuple[str, str | None] = ("skipped", "not started")
        self.tracer: HostTracer | None = None
        self.sampler: HostTracer | None = None  # the user frames' bpftrace
        self.unsampled: str | None = None  # why the user frames were not sampled
        self.found = LockCheck("not started")

    def start(self) -> None:
        host = self.host if self.host is not None else SshHost(self.spec)
        try:
            pid = postmaster.postmaster_pid(host, self.data_dir)
            self.found = (check(host) if pid is not None else
                          LockCheck(f"the primary's postmaster is not running on "
                                    f"{self.spec.name}"))
            if self.found.reason is not None:
                self.status = ("skipped", self.found.reason)
                host.close()
                return
            assert pid is not None
            text = program(pid, self.found.counted, self.found.kprobes)
            frames = frames_program(pid, self.found.kprobes)
            self.out_dir.mkdir(parents=True, exist_ok=True)
            (self.out_dir / "locks.bt").write_text(text)
            (self.out_dir / "frames.bt").write_text(frames)
            self.tracer = HostTracer(host, self.base, self.found.via)
            self.tracer.start(text, keys=MAP_KEYS, postmaster=pid, duration=self.duration)
            self.status = ("ran", self.found.note())
        except (UserError, RuntimeError, OSError) as exc:
            self.abort()
            host.close()
            self.status = ("failed", f"{self.spec.name}: {exc}")
            return
        # the user frames, by a bpftrace of their own (the module's text says why); the
        # counts stand without them
        sampler_host = self.host if self.host is not None else SshHost(self.spec)
        try:
            self.sampler = HostTracer(sampler_host, self.base + "-frames", self.found.via)
            self.sampler.start(frames, keys=MAP_KEYS, postmaster=pid,
                               duration=self.duration)
        except (UserError, RuntimeError, OSError) as exc:
            if self.sampler is not None:
                self.sampler.abort()
            self.sampler = None
            sampler_host.close()
            self.unsampled = str(exc)

    def stop(self, roles: Mapping[int, tuple[str, str]], walsenders: Mapping[int, str]
             ) -> ProbeRows:
        """bpftrace stopped there; the ``kernel_locks`` rows and the ``probes`` row.
        ``roles``: the processes the snapshots saw; the others are named by the titles
        the program read (``walsenders``: pid -> the standby each serves)."""
        rows = ProbeRows()
        tracer, self.tracer = self.tracer, None
        if tracer is not None and tracer.proc is not None:
            if shutdown.requested() is not None:
                tracer.abort()
                self.status = ("failed", "interrupted")
            else:
                try:
                    data, err = tracer.finish()
                    (self.out_dir / "locks.json").write_bytes(data)
                    if err.strip():
                        (self.out_dir / "locks.err").write_text(err)
                    text = data.decode(errors="replace")
                    sampled = self._stop_sampler(abort=False)
                    tallies = parse(text + "\n" + sampled, self.found.counted)
                    rows.kernel_locks = lock_rows(
                        tallies, named_roles("primary", roles, titles(text), walsenders),
                        self.found.kprobes)
                    # counts that cannot be the repeat's are no figures (not 0 a commit)
                    wrong = unaccounted(text, tallies, rows.kernel_locks, self.found.kprobes)
                    if wrong is not None:
                        rows.kernel_locks = []
                        self.status = ("failed", f"{self.spec.name}: {wrong}")
                    elif self.unsampled is not None:
                        self.status = ("ran", f"{self.found.note()}; no user frames "
                                       f"({self.unsampled})")
                except (UserError, RuntimeError, OSError) as exc:
                    tracer.abort()
                    self.status = ("failed", f"{self.spec.name}: {exc}")
        self._stop_sampler(abort=True)  # where it was not read above: nothing kept
        rows.probes.append(ProbeRow(PROBE, *self.status))
        return rows

    def _stop_sampler(self, abort: bool) -> str:
        """The user frames' bpftrace stopped (``abort``: at once, keeping nothing); what
        it printed ("" where it was not running or failed: ``unsampled`` says why)."""
        sampler, self.sampler = self.sampler, None
        if sampler is None or sampler.proc is None:
            return ""
        if abort:
            sampler.abort()
            return ""
        try:
            data, err = sampler.finish()
        except (UserError, RuntimeError, OSError) as exc:
            sampler.abort()
            self.unsampled = str(exc)
            return ""
        (self.out_dir / "frames.json").write_bytes(data)
        if err.strip():
            (self.out_dir / "frames.err").write_text(err)
        return data.decode(errors="replace")

    def abort(self) -> None:
        """End bpftrace there at once; keep nothing."""
        tracer, self.tracer = self.tracer, None
        if tracer is not None:
            tracer.abort()
        self._stop_sampler(abort=True)


class LocalLocks:
    """The lock probe of a primary on this machine (a ``kernel = "host"`` cell, or a
    spec without hosts): the same program, watchdog and files as on a host, run here
    (hosts/local.LocalHost), so that a cell here and its twin in a guest are counted
    alike. Where this machine's kernel has no kprobes (this project's has none), it
    counts the waits alone, and its row says so."""

    def __init__(self, data_dir: Path, admin: str, out_dir: Path, duration: float) -> None:
        from syncrep_lab.hosts.local import LocalHost

        host = LocalHost()
        self.data_dir, self.admin = data_dir, admin
        self.seen: dict[int, tuple[str, str]] = {}
        self.locks = HostLocks(host.spec, str(data_dir), out_dir, duration, host=host)

    def start(self) -> None:
        if os.geteuid() != 0:
            self.locks.status = ("skipped", "bpftrace needs root here: run syncrep-lab as "
                                 "root, or place the primary on an SSH host with sudo")
            return
        self.seen = self._roles(walsenders(self.admin))
        try:
            self.locks.start()
        except BaseException:  # an interrupt during the attach: nothing left running
            self.locks.abort()
            raise

    def _roles(self, serving: Mapping[int, str]) -> dict[int, tuple[str, str]]:
        """pid -> (node, role label) of the primary's processes now (``serving``: the
        standby each walsender serves)."""
        from syncrep_lab.cluster.server import postmaster_pid
        from syncrep_lab.pg.roles import node_processes

        pid = postmaster_pid(self.data_dir)
        if pid is None:
            return {}
        return {p.pid: (p.node, p.label)
                for p in node_processes("primary", pid, dict(serving))}

    def stop(self, ending: Ending) -> ProbeRows:
        # the processes seen when it began (the workload's backends, gone by now) and
        # those still there; the rest are named by the titles the program read. The
        # walsenders asked once, for both
        serving = walsenders(self.admin)
        return self.locks.stop({**self.seen, **self._roles(serving)}, serving)

    def abort(self) -> None:
        self.locks.abort()
