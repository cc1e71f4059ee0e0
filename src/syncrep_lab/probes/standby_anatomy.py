"""The standby's half of a synchronous commit: the commit anatomy's ``standby_wait``
(probes/anatomy.py) split, commit by commit, into the steps between the backend's wait
and the release that frees it.

A committing backend waits in ``SyncRepWaitForLSN(lsn)``. Its WAL reaches the standby
and comes back confirmed through one pipeline of single processes, each step done for
a batch of commits at once, in order:

- ``send``: from the wait's start to the sync walsender's ``sendto`` of the WAL that
  holds the commit's LSN (the walsender's wake-up, its read of the WAL and its framing);
- ``transit_out``: from that ``sendto``'s entry to the return of the walreceiver's next
  ``recvfrom`` that got bytes (the kernel's network path both ends), less the ``queue``;
- ``queue``: the part of that span the walreceiver was busy, not waiting for WAL in its
  ``epoll_wait`` (a flush, a sleep before one, its CPU): the WAL had arrived, or was on
  its way, and waited at the standby for its walreceiver to come and read it. It is the
  standby's, not the wire's: on one machine over a Unix socket a slowed flush once read
  as 62 % "transit out". Where no wait of the walreceiver's was seen (a recording made
  before this probe), the part of the span inside its ``fdatasync``/``fsync`` calls;
- ``write``: from there to the end of the walreceiver's next WAL ``write``/``pwrite64``;
- ``flush``: from there to the end of its next ``fdatasync``/``fsync``;
- ``reply``: from there to its ``sendto`` of the status message whose position (the
  level's: write, flush or apply) covers the commit's LSN, read from the message (its
  three positions, big-endian, 6, 14 and 22 bytes in, from 9.6 to 18). The walreceiver
  replies after its writes (their position changed) and again after its flush; under
  ``remote_write`` the first is the one and the flush is no part of the wait; where
  it does not sync (``fsync = off``) the flush is not an event and is no part;
- ``replay`` (``remote_apply``, instead of ``reply``): from the flush to the status
  message whose apply position covers the commit: the startup process's replay up to it
  and its request for a reply (the reply itself is not apart: its start is no event of
  the startup process's that this program sees);
- ``transit_back``: from that ``sendto``'s entry to the return of the walsender's next
  ``recvfrom`` that got bytes;
- ``reply_handling``: from there to the walsender's next ``SyncRepReleaseWaiters``.

Each boundary is an event of its own, timed in the kernel: the parts are measured, none
is the whole less the others. What ties them to a commit: the walsender's send is the
first whose ``MyWalSnd->sentPtr`` (set by XLogSendPhysical before the send: the WAL in
the message) is at or past the commit's LSN, the wait's first argument; the receive that
got it is found by the bytes sent and received on the connection (a socket is first in,
first out), the reply's likewise; the write and flush are the walreceiver's next of
their kind, which is what its loop does (receive, write, reply, flush, reply); the reply
is found by the position it carries; the release is the one that reply caused, by count
(the walsender calls SyncRepReleaseWaiters once per reply it reads). A boundary earlier
than the one before it (the walsender sent the WAL before the backend began to wait)
counts from that one: the part is 0, never negative. The release that really freed the
commit is the anatomy's (the one whose ``kill`` woke it): ``whole`` is that
``standby_wait``, commit by commit, and the parts' sum is held against it (the sum
check: it fails where the join is wrong; matched by time alone it summed to 0.84 and
0.90 of the wait, and 2.5 times it where the probe was attached under load without
taking off the bytes already on their way: docs/decisions.md, "The standby's half of a
commit").

System-call tracepoints are the same on every version and build (9.6's fetched binary is
stripped: its static functions and variables, LogstreamResult and sentPtr among them,
are not there to probe or read; the embedded 18 inlines XLogWalRcvWrite and
XLogWalRcvProcessMsg); read from memory are only the walsender's position, through
``MyWalSnd`` (exported in every build, its ``sentPtr`` 8 bytes into ``WalSnd`` from 9.6
to 18), and the walreceiver's status messages as it sends them. Processes are filtered
by pid, the walsender's and the walreceiver's, in the kernel: both live as long as the
stream.

A sync standby on an SSH host (in a run, where the manifest says where it is): the
walreceiver's probes run there (:func:`host_program`, by probes/host_anatomy.HostHalf,
as the primary's program on a host is run), the walsender's here, and what the two
printed is joined as one, by the same bytes and positions. The two sides' times are on
two clocks: the offset is estimated NTP-style from the commits' own round trips
(:func:`split`, :class:`Clock`), the transits out and back are taken with it (split
assuming the fastest round trips take as long each way; their sum is exact whatever
the offset), and every other part is within one machine's clock: measured, not the
whole less the others, so the sum check can still fail. The offset and its spread are
said in the probe's row and kept beside the repeat (``standby-clock.json``). observe
knows no standby's host: there a standby not on this machine is not split.

Joined per window, in Python: bpftrace cannot look, at a walsender's send, for the
waiters it covers (no loop over a map in 0.17), so the events are printed (one line per
system call of the two processes: per batch, not per commit) and one line per commit
that slept to its release; :func:`join` matches them. What that costs is measured beside
the anatomy's (bench/anatomy_cost.py, docs/benchmarks.md).
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import accumulate
from pathlib import Path

import numpy as np
import psycopg

from syncrep_lab import procs
from syncrep_lab.hosts.ssh import HostSpec
from syncrep_lab.pg.admin import admin_connection
from syncrep_lab.probes.bpftrace_json import printed
from syncrep_lab.probes.uprobe_points import elf_symbols
from syncrep_lab.stats.histogram import LatencyHistogram
from syncrep_lab.store import AnatomyRow

PROBE = "standby_anatomy"
PARTS = ("send", "transit_out", "queue", "write", "flush", "replay", "reply",
         "transit_back", "reply_handling")
WHOLE = "whole"  # the anatomy's standby_wait of the commits joined
SYNC = "sync_call"  # each fdatasync/fsync of the walreceiver, per call
WHO = "standby:"  # the rows' ``who``: standby:NAME
WALSND = "MyWalSnd"
# pages of bpftrace's perf ring buffer per CPU (its default 64): the lines come in
# bursts of a batch's, and one lost breaks the byte offsets of every join after it
PERF_PAGES = 1024
SENT_OFFSET = 8  # WalSnd.sentPtr: after pid_t pid and WalSndState state, 9.6 to 18
REMOTE_WRITE, REMOTE_APPLY = 2, 4  # synchronous_commit's enum, 9.6 to 18


@dataclass(frozen=True)
class Standby:
    """The sync standby the parts are taken for: its name, its walsender's pid on the
    primary and its walreceiver's, and where ``MyWalSnd`` is in the walsender."""

    name: str
    walsender: int
    walreceiver: int  # its pid as its host sees it
    walsnd_at: int
    # the SSH host the standby runs on, and its data dir there (None: this machine):
    # the walreceiver's probes run there (probes/host_anatomy.HostHalf)
    host: HostSpec | None = None
    data_dir: str | None = None


def _rows(admin: str, query: str) -> list[tuple[object, ...]]:
    with admin_connection(admin, seconds=5, what="a node") as conn:
        return [tuple(r) for r in conn.execute(query)]


def load_base(pid: int, binary: Path) -> int:
    """Where ``binary`` is loaded in process ``pid``, to add to its linked addresses: 0
    for a position-dependent executable, the start of its first mapping for a
    position-independent one. OSError where the process is gone."""
    with binary.open("rb") as f:
        header = f.read(18)
    if header[16] != 3:  # ET_DYN
        return 0
    exe = Path(f"/proc/{pid}/exe").resolve()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[2] == "00000000" and Path(fields[5]) == exe:
            return int(fields[0].split("-")[0], 16)
    raise OSError(f"the server binary is not mapped in process {pid}")


def find(primary_admin: str, standbys: Mapping[str, str], binary: Path,
         hosts: Mapping[str, tuple[HostSpec, str]] | None = None) -> Standby | str:
    """The sync standby, or why its half of a commit cannot be split (with the fix
    where there is one): ``standbys`` maps each standby's name to the tool's connection
    to it; ``binary`` is the primary's server binary; ``hosts``: the standbys on SSH
    hosts, each with its host and its data dir there."""
    try:
        streaming = _rows(primary_admin, "select pid, application_name, sync_state "
                                         "from pg_stat_replication")
    except psycopg.Error as exc:
        return f"the primary did not say which standby is synchronous: {exc}"
    sync = sorted((str(state) != "sync", str(name), int(str(pid)))
                  for pid, name, state in streaming if str(state) in ("sync", "quorum"))
    if not sync:
        return "no synchronous standby is streaming from the primary"
    _, name, walsender = sync[0]
    admin = standbys.get(name)
    if admin is None:
        return f"the synchronous standby {name} is not one of the cluster's nodes here"
    try:
        receivers = _rows(admin, "select pid from pg_stat_wal_receiver")
    except psycopg.Error as exc:
        return f"the standby {name} did not say which process receives the WAL: {exc}"
    if not receivers or receivers[0][0] is None:
        return f"the standby {name} has no walreceiver running"
    walreceiver = int(str(receivers[0][0]))
    on = (hosts or {}).get(name)
    if not procs.alive(walsender):
        return f"the walsender of {name} is not a process of this machine"
    if on is None and not procs.alive(walreceiver):
        return (f"the standby {name}'s walreceiver is not a process of this machine (one "
                "on an SSH host is traced there in a run, where its host is known)")
    try:
        symbol = elf_symbols(binary, (WALSND,)).get(WALSND)
        if symbol is None or symbol[1] != 1:
            return f"the server binary {binary} exports no {WALSND}"
        return Standby(name, walsender, walreceiver,
                       load_base(walsender, binary) + symbol[0],
                       *(on if on is not None else (None, None)))
    except (OSError, ValueError) as exc:
        return f"cannot read where {WALSND} is in the walsender: {exc}"


# -- the program's part ---------------------------------------------------------------


def probes(s: Standby) -> str:
    """The bpftrace probes on the walsender's and the walreceiver's system calls (the
    commit lines and the releases are printed by probes/anatomy.py's program): each
    send and receive with its bytes, the sends timed at their entry. Where the standby
    is on an SSH host, the walsender's only: the walreceiver's run there
    (:func:`walreceiver_probes`)."""
    w = int(s.walsender)
    return f"""
// The standby's half (probes/standby_anatomy.py): walsender {w}.
tracepoint:syscalls:sys_enter_sendto /pid == {w}/ {{
    $snd = *uptr((uint64 *){int(s.walsnd_at)});
    $sent = (uint64)0;
    if ($snd) {{ $sent = *uptr((uint64 *)($snd + {SENT_OFFSET})); }}
    @sfd[pid] = args->fd; @st[pid] = nsecs; @sp[pid] = $sent;
}}
tracepoint:syscalls:sys_exit_sendto /pid == {w} && args->ret > 0/ {{
    printf("S %d %llu %lld %llu\\n", @sfd[pid], @st[pid], args->ret, @sp[pid]);
}}
tracepoint:syscalls:sys_enter_recvfrom /pid == {w}/ {{ @rfd[pid] = args->fd; }}
tracepoint:syscalls:sys_exit_recvfrom /pid == {w} && args->ret > 0/ {{
    printf("r %d %llu %lld\\n", @rfd[pid], nsecs, args->ret);
}}
""" + ("" if s.host is not None else walreceiver_probes(s.walreceiver))


def walreceiver_probes(r: int) -> str:
    """The probes on the walreceiver ``r``'s system calls: its receives, its WAL writes
    and syncs, its replies with the positions they carry."""
    r = int(r)
    return f"""
// The standby's half (probes/standby_anatomy.py): walreceiver {r}.
// the walreceiver's status message: 'd', its length, 'r', then the write, flush and
// apply positions (big-endian, turned in Python), from 9.6 to 18
tracepoint:syscalls:sys_enter_sendto /pid == {r}/ {{
    $b = (uint64)args->buff;
    @sfd[pid] = args->fd; @st[pid] = nsecs; @pk[pid] = *uptr((uint8 *)($b + 5));
    @pw[pid] = *uptr((uint64 *)($b + 6)); @pf[pid] = *uptr((uint64 *)($b + 14));
    @pa[pid] = *uptr((uint64 *)($b + 22));
}}
tracepoint:syscalls:sys_exit_sendto /pid == {r} && args->ret > 0/ {{
    printf("P %d %llu %lld %d %llu %llu %llu\\n", @sfd[pid], @st[pid], args->ret, @pk[pid],
           @pw[pid], @pf[pid], @pa[pid]);
}}
tracepoint:syscalls:sys_enter_recvfrom /pid == {r}/ {{ @rfd[pid] = args->fd; }}
tracepoint:syscalls:sys_exit_recvfrom /pid == {r} && args->ret > 0/ {{
    printf("R %d %llu %lld\\n", @rfd[pid], nsecs, args->ret);
}}
tracepoint:syscalls:sys_enter_write, tracepoint:syscalls:sys_enter_pwrite64 /pid == {r}/ {{
    @wfd[pid] = args->fd;
}}
tracepoint:syscalls:sys_exit_write, tracepoint:syscalls:sys_exit_pwrite64
/pid == {r} && args->ret > 0/ {{ printf("W %d %llu\\n", @wfd[pid], nsecs); }}
// its waits for WAL (WaitLatchOrSocket's epoll): outside them it is busy
tracepoint:syscalls:sys_enter_epoll_wait, tracepoint:syscalls:sys_enter_epoll_pwait
/pid == {r}/ {{ @ew[pid] = nsecs; }}
tracepoint:syscalls:sys_exit_epoll_wait, tracepoint:syscalls:sys_exit_epoll_pwait /pid == {r}/ {{
    $waited = @ew[pid];
    if ($waited > 0) {{ printf("I 0 %llu %llu\\n", $waited, nsecs); }}
    delete(@ew[pid]);
}}
tracepoint:syscalls:sys_enter_fdatasync, tracepoint:syscalls:sys_enter_fsync /pid == {r}/ {{
    @fs[pid] = nsecs;
}}
// a sync already under way when the probe attached has no start: its return is still
// a flush (the boundary), its duration unknown (0, left out of the per-call figures);
// an unset start read as 0 once gave the time since boot as one call's length
tracepoint:syscalls:sys_exit_fdatasync, tracepoint:syscalls:sys_exit_fsync /pid == {r}/ {{
    $began = @fs[pid];
    printf("F 0 %llu %llu\\n", nsecs, $began > 0 ? nsecs - $began : 0);
    delete(@fs[pid]);
}}
"""


def host_program(r: int) -> str:
    """The program run on the standby's SSH host: the walreceiver's probes alone, its
    maps cleared at the end (nothing of them is read)."""
    return (f"// The standby's half of syncrep-lab on its host (probes/standby_anatomy.py)."
            f"\n{walreceiver_probes(r)}\nEND {{\n    clear(@sfd); clear(@st); clear(@pk); "
            "clear(@pw); clear(@pf); clear(@pa); clear(@rfd); clear(@wfd); clear(@fs);\n}\n")


# -- the join -------------------------------------------------------------------------


@dataclass(frozen=True)
class Commit:
    """A wait that slept to its release: its start, its LSN, the start of the release
    that freed it (the anatomy's), its synchronous_commit level."""

    start: int
    lsn: int
    release: int
    level: int


Stream = list[tuple[int, int]]  # (time, bytes) of a process's sends or receives, in order


@dataclass
class Events:
    """What the program printed: the commits, and each process's events in time order."""

    commits: list[Commit]
    sends: list[tuple[int, int, int]]  # the walsender's (sendto entry, bytes, sentPtr)
    received: Stream  # the walreceiver's recvfrom returns, on its socket
    writes: list[int]  # its WAL writes' returns
    flushes: list[int]  # its fdatasync/fsync returns
    replies: Stream  # its sendto entries
    read_back: Stream  # the walsender's recvfrom returns, on its socket
    releases: list[int]  # the walsender's SyncRepReleaseWaiters entries
    # its fdatasync/fsync calls: (return, how long each took)
    syncs: list[tuple[int, int]] = field(default_factory=list)
    # each reply's (write, flush, apply) positions, None where it was no status message
    positions: list[tuple[int, int, int] | None] = field(default_factory=list)
    # the walreceiver's waits for WAL (epoll_wait): (entry, return), in order
    idle: list[tuple[int, int]] = field(default_factory=list)


def _printed(text: str) -> Iterator[list[str]]:
    """The words of every line the program printed with printf (``-f json``)."""
    for data in printed(text, "printf"):
        for line in str(data or "").splitlines():
            yield line.split()


def events(text: str) -> Events:
    """The events in what bpftrace printed, each list in time order. A process's socket
    is the descriptor most of its sends went to (another is a statistics socket's); the
    walreceiver's WAL writes are those not to its standard streams.

    >>> import json
    >>> text = '\\n'.join(json.dumps({"type": "printf", "data": d}) for d in (
    ...     "C 100 5000 900 3\\n", "S 9 150 80 5000\\n", "R 4 170 80\\n", "W 7 200\\n",
    ...     "F 0 300\\n", "P 4 310 39 0\\n", "r 9 330 39\\n", "L 340\\n", "W 2 999\\n"))
    >>> e = events(text)
    >>> e.commits, e.sends, e.writes, e.read_back
    ([Commit(start=100, lsn=5000, release=900, level=3)], [(150, 80, 5000)], [200], [(330, 39)])
    """
    commits: list[Commit] = []
    raw: dict[str, list[tuple[int, ...]]] = {k: [] for k in "SRWFPrLI"}
    for words in _printed(text):
        try:
            if words[0] == "C" and len(words) == 5:
                commits.append(Commit(*(int(w) for w in words[1:])))
            elif words[0] == "L" and len(words) == 2:
                raw["L"].append((0, int(words[1])))
            elif words[0] in raw and len(words) >= 3:
                raw[words[0]].append(tuple(int(w) for w in words[1:]))
        except ValueError:
            continue

    def socket(kind: str) -> int:
        found = Counter(e[0] for e in raw[kind]).most_common(1)
        return found[0][0] if found else -1

    def stream(kind: str, fd: int) -> Stream:
        return sorted((e[1], e[2]) for e in raw[kind] if e[0] == fd and len(e) >= 3)

    walsender, walreceiver = socket("S"), socket("P")
    replies = sorted(e[1:] for e in raw["P"] if e[0] == walreceiver and len(e) >= 3)
    return Events(
        commits=sorted(commits, key=lambda c: c.start),
        sends=sorted((e[1], e[2], e[3]) for e in raw["S"] if e[0] == walsender
                     and len(e) >= 4),
        received=stream("R", walreceiver),
        writes=sorted(e[1] for e in raw["W"] if e[0] > 2),
        flushes=sorted(e[1] for e in raw["F"]), replies=[(e[0], e[1]) for e in replies],
        read_back=stream("r", walsender), releases=sorted(e[1] for e in raw["L"]),
        syncs=sorted((e[1], e[2]) for e in raw["F"] if len(e) >= 3),
        positions=[_positions(e[2:]) for e in replies],
        idle=sorted((e[1], e[2]) for e in raw["I"] if len(e) >= 3))


def since(e: Events, t: int) -> Events:
    """The events from ``t`` on. bpftrace attaches its probes one after another: on a
    busy server (``observe``) one side's events are seen before the other's, sends
    whose receives were not (the receiver's offsets then run behind: a window summed to
    3.5 times its wait) or the other way, and not only under a workload: in a run, a
    standby still catching up when the probe attached gave a send of 64 KB whose receive
    came before its probe, and not one commit joined. From a moment when every probe was
    attached on (``time.monotonic_ns()`` once bpftrace says so: the clock of its
    ``nsecs``), only bytes already on their way are unseen, and :class:`_Pipe` takes
    them off."""
    return Events(
        [c for c in e.commits if c.start >= t], [s for s in e.sends if s[0] >= t],
        [r for r in e.received if r[0] >= t], [w for w in e.writes if w >= t],
        [f for f in e.flushes if f >= t],
        [r for r in e.replies if r[0] >= t], [r for r in e.read_back if r[0] >= t],
        [r for r in e.releases if r >= t], [s for s in e.syncs if s[0] >= t],
        [p for r, p in zip(e.replies, e.positions, strict=False) if r[0] >= t],
        [w for w in e.idle if w[1] >= t])


def _positions(words: Sequence[int]) -> tuple[int, int, int] | None:
    """A reply's write, flush and apply positions from its type (the byte after the
    CopyData header) and the three 8-byte words read little-endian (the message has
    them big-endian); None where it is no status message (its type not 'r': hot standby
    feedback is 'h')."""
    if len(words) < 4 or words[0] != ord("r"):
        return None

    def turned(v: int) -> int:
        return int.from_bytes((v & (2**64 - 1)).to_bytes(8, "little"), "big")

    return turned(words[1]), turned(words[2]), turned(words[3])


def _after(times: Sequence[int], t: int) -> int | None:
    """The first of the sorted ``times`` after ``t``."""
    i = bisect.bisect_right(times, t)
    return times[i] if i < len(times) else None


class _Pipe:
    """One direction of the replication connection: what one process sent and what the
    other received, as byte offsets in the stream (a socket is first in, first out).

    The receiver's first bytes may have been sent before the probe was attached (on a
    busy server, ``observe``'s case): so many bytes, ``ahead``, are taken off its
    offsets. No receive can end with bytes of a send not yet begun, so by the time each
    send begins at most the sends before it, and ``ahead``, have been received; the
    least ``ahead`` that holds for every send is the one taken (it is the true one as
    soon as the receiver has once caught up with the sender between two sends, which
    it does after every batch). Taking none, the parts of a window attached under load
    summed to 2.5 times its wait. Where the two ends' clocks are known only to within
    ``slack``, a receive counts as before a send only where it ended ``slack`` earlier:
    one that seems to end just before a send began, by a clock a few µs off, may hold
    that send's first byte, and ``ahead`` would take it for a byte sent before the probe
    (below, the walsender reads a reply's first byte alone, as it does; the second reply
    seems 4 µs late):

    >>> replies, reads = [(1000, 39), (2020, 39)], [(1016, 1), (1030, 38), (2016, 1), (2030, 38)]
    >>> _Pipe(replies, reads).received(0), _Pipe(replies, reads, slack=50).received(0)
    (2, 1)
    """

    def __init__(self, sent: Stream, got: Stream, slack: int = 0) -> None:
        self.sent_at = [t for t, _ in sent]
        self.sent_end = list(_cumulative(n for _, n in sent))
        self.got_at = [t for t, _ in got]
        got_end = list(_cumulative(n for _, n in got))
        ahead = 0
        for k, t in enumerate(self.sent_at):
            # the receives ended before it began; ``slack`` earlier where the two ends'
            # clocks are known only to within it (:func:`split`'s first pass)
            i = bisect.bisect_left(self.got_at, t - slack)
            if i:
                ahead = max(ahead, got_end[i - 1] - (self.sent_end[k - 1] if k else 0))
        self.got_end = [g - ahead for g in got_end]

    def received(self, k: int) -> int | None:
        """The index of the receive that got the last byte of send ``k``."""
        j = bisect.bisect_left(self.got_end, self.sent_end[k])
        return j if j < len(self.got_at) else None

    def sends_in(self, j: int, k: int) -> int:
        """How many sends, up to ``k``, receive ``j`` finished: their messages, handled
        one after the other once it returned."""
        before = max(self.got_end[j - 1], 0) if j > 0 else 0
        return k - bisect.bisect_right(self.sent_end, before) + 1


def _cumulative(values: Iterator[int]) -> Iterator[int]:
    total = 0
    for v in values:
        total += v
        yield total


@dataclass(frozen=True)
class Chain:
    """A commit joined: when its wait began, its parts (nanoseconds; a part not measured
    for it is absent), its whole (the anatomy's standby_wait)."""

    start: int
    parts: dict[str, int]
    whole: int
    # the round trip it rode, as measured: the walsender's send (its entry), the
    # walreceiver's receive (its return), its reply (entry), the walsender's receive of
    # it (return); the standby's on its own clock
    trip: tuple[int, int, int, int] = (0, 0, 0, 0)


@dataclass(frozen=True)
class Joined:
    """The commits joined, and those left out and why."""

    chains: list[Chain]
    unmatched: int  # an event of the chain not seen (the window's end)
    applied: int  # remote_apply commits left out: no reply's position was read
    syncs: list[tuple[int, int]] = field(default_factory=list)  # as Events has them
    # commits left out whose chain led to another release than the one that freed them
    # (the anatomy's own): the join went wrong there, and their parts would be another
    # commit's (:func:`join`)
    elsewhere: int = 0

    @property
    def parts(self) -> dict[str, list[int]]:
        """Part -> its nanoseconds, one per commit that has it."""
        return {p: [c.parts[p] for c in self.chains if p in c.parts] for p in PARTS}

    @property
    def whole(self) -> list[int]:
        return [c.whole for c in self.chains]

    def between(self, low: int, high: int) -> Joined:
        """The commits whose wait began in [low, high) (an observe window's slice), and
        the syncs that ended in it."""
        return Joined([c for c in self.chains if low <= c.start < high], 0, 0,
                      [s for s in self.syncs if low <= s[0] < high])


def join(e: Events, slack: int = 0, *, own_release: bool = True) -> Joined:
    """Each commit's parts (see the module's text): the walsender's send found by LSN,
    the receive that got its last byte by the bytes sent and received on the connection
    (a receive may get several sends, or a send's bytes come in several), the write,
    flush and reply as the walreceiver's next of the kind, the walsender's receive of
    that reply by bytes again, and the release it caused by count (the walsender calls
    SyncRepReleaseWaiters once for each reply it reads, in order).

    The anatomy knows which release freed each commit (its ``release``), so a chain
    checks itself: one that leads to another release went wrong on the way (a part of
    it is another commit's) and is left out, counted in ``elsewhere`` (unless not
    ``own_release``: :func:`split`'s first pass wants the round trips alone, which end at
    the walsender's receive, before the release is found). Where every step
    holds, the parts add up to the wait exactly (six recordings of 4 to 64 clients here,
    55,039 commits: every chain); a join gone wrong under a loaded suite once summed to
    13.6 times the wait, which this check keeps out of the figures.

    >>> e = Events([Commit(100, 5000, 340, 3)], [(90, 80, 4000), (150, 80, 5000)],
    ...            [(95, 80), (170, 80)], [200], [300], [(205, 39), (310, 39)],
    ...            [(320, 39), (330, 39)], [325, 340])
    >>> j = join(e)
    >>> [v[0] for v in j.parts.values() if v], j.whole  # no replay under `on`
    ([50, 20, 0, 30, 100, 10, 20, 10], [240])
    >>> e.syncs = [(300, 160)]  # a sync from 140 to 300: the WAL sent at 150 waited
    >>> join(e).chains[0].parts["queue"], join(e).chains[0].parts["transit_out"]
    (20, 0)
    >>> e.idle = [(120, 165)]  # waiting for WAL until 165: 5 of the 20 were the standby's
    >>> join(e).chains[0].parts["queue"], join(e).chains[0].parts["transit_out"]
    (5, 15)
    >>> e.commits = [Commit(100, 5000, 325, 3)]  # freed by the release before
    >>> j = join(e)
    >>> j.chains, j.elsewhere
    ([], 1)
    """
    chains: list[Chain] = []
    unmatched = applied = elsewhere = 0
    sent_lsns = [lsn for _, _, lsn in e.sends]
    out = _Pipe([(t, n) for t, n, _ in e.sends], e.received, slack)
    back = _Pipe(e.replies, e.read_back, slack)
    reply_at = [t for t, _ in e.replies]
    queued = _Queued(e)
    flushed = bool(e.flushes)
    read = any(p is not None for p in e.positions)  # the replies' positions
    for c in e.commits:
        if c.level >= REMOTE_APPLY and not read:
            applied += 1
            continue
        # sentPtr only grows; a send's bytes may have left before this wait began: the
        # first send at or past the LSN is the one that carried it
        k = bisect.bisect_left(sent_lsns, c.lsn)
        j = out.received(k) if k < len(e.sends) else None
        got = out.got_at[j] if j is not None else None
        wrote = _after(e.writes, got) if got is not None else None
        synced = (_after(e.flushes, wrote) if wrote is not None and flushed
                  and c.level > REMOTE_WRITE else wrote)
        r = bisect.bisect_right(reply_at, synced) if synced is not None else len(reply_at)
        if read:
            # the first reply since whose position (the level's) covers the commit
            at = min(c.level, REMOTE_APPLY) - REMOTE_WRITE
            while r < len(reply_at) and ((p := e.positions[r]) is None or p[at] < c.lsn):
                r += 1
        elif not flushed and c.level > REMOTE_WRITE:
            # no sync to see (fsync off): the reply after the write gives the write's
            # position, the flush's is the next one
            r += 1
        heard = back.received(r) if r < len(reply_at) else None
        released = None
        if heard is not None:
            n = bisect.bisect_right(e.releases, back.got_at[heard])
            n += back.sends_in(heard, r) - 1
            released = e.releases[n] if n < len(e.releases) else None
        if released is None or got is None or wrote is None or synced is None:
            unmatched += 1
            continue
        if own_release and released != c.release:
            elsewhere += 1
            continue
        assert heard is not None
        bounds = [c.start]
        for t in (e.sends[k][0], got, wrote, synced, reply_at[r], back.got_at[heard],
                  released):
            bounds.append(max(t, bounds[-1]))
        # under remote_apply the span from the flush to the reply is the startup
        # process's replay and its request for a reply: replay, the reply not apart
        names = [p for p in PARTS if p != "queue"
                 and p != ("reply" if c.level >= REMOTE_APPLY else "replay")]
        parts = {name: high - low
                 for name, low, high in zip(names, bounds, bounds[1:], strict=False)
                 if name != "flush" or (flushed and c.level > REMOTE_WRITE)}
        parts["queue"] = queued.within(bounds[1], bounds[2])
        parts["transit_out"] -= parts["queue"]
        chains.append(Chain(c.start, parts, max(c.release, c.start) - c.start,
                            (e.sends[k][0], got, reply_at[r], back.got_at[heard])))
    return Joined(chains, unmatched, applied, e.syncs, elsewhere)


class _Queued:
    """How long the walreceiver kept WAL waiting in a span: the span less its waits for
    WAL (epoll_wait) where they were seen, else the span's part inside its syncs (each
    call's start and end; a sync whose start the probe missed is left out).

    >>> e = Events([], [], [], [], [], [], [], [], syncs=[(20, 10)])
    >>> _Queued(e).within(15, 40)  # the sync from 10 to 20
    5
    >>> e.idle = [(0, 25), (35, 60)]  # busy from 25 to 35 only
    >>> _Queued(e).within(15, 40)
    10
    """

    def __init__(self, e: Events) -> None:
        self.waits = bool(e.idle)
        spans = e.idle if self.waits else sorted((t - d, t) for t, d in e.syncs if d > 0)
        self.spans = spans  # in order and apart: one process's
        self.ends = [b for _, b in spans]

    def _overlap(self, low: int, high: int) -> int:
        total = 0
        for start, end in self.spans[bisect.bisect_right(self.ends, low):]:
            if start >= high:
                break
            total += min(end, high) - max(start, low)
        return total

    def within(self, low: int, high: int) -> int:
        if high <= low:
            return 0
        inside = self._overlap(low, high)
        return (high - low) - inside if self.waits else inside


# -- a standby on an SSH host: two clocks ----------------------------------------------

QUANTILE = 0.1  # the round trips the offset is taken from: the fastest tenth


def shifted(e: Events, offset: int) -> Events:
    """The events with the walreceiver's times put on the walsender's clock: ``offset``
    (its clock less the walsender's) taken off."""
    return replace(e, received=[(t - offset, n) for t, n in e.received],
                   writes=[t - offset for t in e.writes],
                   flushes=[t - offset for t in e.flushes],
                   replies=[(t - offset, n) for t, n in e.replies],
                   syncs=[(t - offset, d) for t, d in e.syncs],
                   idle=[(a - offset, b - offset) for a, b in e.idle])


def bound(e: Events) -> int | None:
    """An upper bound of the walreceiver's clock less the walsender's, from the WAL
    positions alone (no time of one side compared with the other's): a send that
    carried new WAL (its sentPtr past the send before it's) came before the first reply
    whose write position reaches it, so that reply's time less the send's is the offset
    plus a transit and a write at least; the least of them. None: no such pair.

    >>> e = Events([], [(100, 80, 4000), (200, 80, 5000)], [], [], [],
    ...            [(1150, 39), (1260, 39)], [], [], positions=[(4000, 0, 0), (5000, 0, 0)])
    >>> bound(e)
    1060
    """
    written = list(accumulate((p[0] if p is not None else -1 for p in e.positions), max))
    found: int | None = None
    for (t, _, lsn), (_, _, before) in zip(e.sends[1:], e.sends, strict=False):
        i = bisect.bisect_left(written, lsn)
        if lsn > before and i < len(written):
            d = e.replies[i][0] - t
            found = d if found is None else min(found, d)
    return found


@dataclass(frozen=True)
class Clock:
    """The walreceiver's clock less the walsender's, estimated as NTP does from the
    round trips the commits rode (t1 the walsender's send, t2 the walreceiver's
    receive, t3 its reply, t4 the walsender's receive of it): each trip's offset
    ((t2-t1)+(t3-t4))/2 is exact where it took as long each way, and wrong by at most
    half its delay (t4-t1)-(t3-t2) where not; the median of the fastest
    :data:`QUANTILE` of them. Nanoseconds."""

    offset: int
    spread: int  # half the interquartile range of those trips' offsets
    delay: int  # the slowest of those trips' delay: half of it bounds any one's error
    fastest: int  # how many trips it was taken from
    trips: int  # of how many

    def said(self, host: str) -> str:
        """The probe row's words on it."""
        offset = (f"{self.offset / 1e9:+.6f} s" if abs(self.offset) >= 1e9
                  else f"{self.offset / 1e3:+.1f} µs")
        return (f"the walreceiver traced on {host}, its clock taken as this one's "
                f"{offset} (spread ±{self.spread / 1e3:.1f} µs; the median of the "
                f"{self.fastest} fastest of {self.trips} round trips' ((t2-t1)+(t3-t4))/2, "
                f"each {self.delay / 1e3:.0f} µs of delay at most): transit_out and "
                "transit_back split assuming those round trips took as long each way; "
                "their sum is exact whatever the offset")

    def as_dict(self) -> dict[str, int]:
        return {"offset_ns": self.offset, "spread_ns": self.spread, "delay_ns": self.delay,
                "fastest": self.fastest, "trips": self.trips}


def clock(joined: Joined, base: int = 0) -> Clock | None:
    """The offset (:class:`Clock`) from the trips of ``joined``'s commits, each trip
    once however many commits rode it, plus ``base`` (the offset its events were
    already moved by). None: no trip."""
    trips = np.array(sorted({c.trip for c in joined.chains}), dtype=np.int64)
    if not len(trips):
        return None
    t1, t2, t3, t4 = trips.T
    delay = (t4 - t1) - (t3 - t2)
    offsets = ((t2 - t1) + (t3 - t4)) / 2
    cut = np.quantile(delay, QUANTILE, method="lower")
    fast = offsets[delay <= cut]
    q1, median, q3 = np.percentile(fast, [25, 50, 75])
    return Clock(base + round(float(median)), round(float(q3 - q1) / 2), int(cut),
                 len(fast), len(trips))


def split(e: Events, attached: int) -> tuple[Joined, Clock | None]:
    """The commits joined where the walreceiver's times are on a clock of their own
    (another machine's), and that clock's offset; None where none could be estimated.

    Two passes. The first moves the walreceiver's events by :func:`bound`, which is
    early by a transit and a write at most: the byte streams are matched taking a
    receive as before a send only where it ended a commit's median wait earlier
    (``slack``; the probes are attached on an idle stream, so the first sends' bytes
    are told apart all the same), and the offset is estimated (:func:`clock`) from the
    round trips so joined. The second joins again on that offset: the transits out and
    back are taken with it, the other parts are each within one machine's clock. Its
    byte streams are matched with the offset's own error bound as ``slack`` (half the
    slowest kept trip's delay; the whole delay, for margin): matched exactly, a clock
    a few µs off under load took the walsender's one-byte read of a reply's first byte
    for a byte sent before the probe, and from there about two thirds of the commits'
    chains led to the release after their own (a recording kept from
    tests/test_remote_standby.py beside two busy loops: 373 of 1,166 held; with the
    slack, all 1,166, their parts summing to their waits)."""
    coarse = bound(e)
    if coarse is None:
        return Joined([], len(e.commits), 0, []), None
    waits = sorted(max(c.release - c.start, 0) for c in e.commits)
    slack = waits[len(waits) // 2] if waits else 0
    first = clock(join(since(shifted(e, coarse), attached), slack, own_release=False),
                  coarse)
    if first is None:
        return Joined([], len(e.commits), 0, []), None
    return join(since(shifted(e, first.offset), attached), first.delay), first


SUM_OFF = 0.2  # the parts' sum this far off the whole, over a window: the join is wrong
OVERRAN = 0.1  # a commit whose parts' sum is this far off its own whole


def misjoined(joined: Joined, beyond: float = SUM_OFF) -> str | None:
    """Where the parts' sum misses the whole by more than ``beyond`` over the window
    (:data:`SUM_OFF`: the sum check failed), what the join did: how many commits' parts missed
    their own wait, by how much, and the part that grew most in them against the
    commits that added up (where the chain went wrong: ``transit_out`` for a receive
    found by bytes, ``reply`` for the reply found by its position, ``reply_handling``
    for the release found by count). None where the sum holds.

    >>> good = [Chain(0, {"send": 10_000, "transit_out": 20_000, "reply_handling": 5_000},
    ...               35_000)] * 3
    >>> bad = [Chain(0, {"send": 10_000, "transit_out": 900_000, "reply_handling": 5_000},
    ...              35_000)] * 2
    >>> misjoined(Joined(good + bad, 0, 0))  # doctest: +NORMALIZE_WHITESPACE
    'the parts sum to 11.06 of the wait: 2 of 5 commits joined off their own by more than
    10 %, 880 µs a commit over, most in transit_out (+880 µs a commit against those that
    added up)'
    >>> misjoined(Joined(good, 0, 0)) is None
    True
    """
    whole = sum(joined.whole)
    if not whole:
        return None
    ratio = sum(sum(c.parts.values()) for c in joined.chains) / whole
    if abs(ratio - 1) <= beyond:
        return None
    wrong = [abs(sum(c.parts.values()) - c.whole) > OVERRAN * c.whole for c in joined.chains]
    off = [c for c, w in zip(joined.chains, wrong, strict=True) if w]
    fine = [c for c, w in zip(joined.chains, wrong, strict=True) if not w]
    said = (f"the parts sum to {ratio:.2f} of the wait: {len(off):,} of "
            f"{len(joined.chains):,} commits joined off their own by more than "
            f"{OVERRAN * 100:.0f} %")
    if not off:
        return said
    over = sum(sum(c.parts.values()) - c.whole for c in off) / len(off) / 1000.0
    said += f", {abs(over):,.0f} µs a commit {'over' if over >= 0 else 'short'}"

    def mean(chains: list[Chain], part: str) -> float:
        values = [c.parts[part] for c in chains if part in c.parts]
        return sum(values) / len(values) if values else 0.0

    grown = {p: mean(off, p) - mean(fine, p) for p in PARTS
             if any(p in c.parts for c in off)}
    if grown:
        part = max(grown, key=lambda p: abs(grown[p]))
        said += f", most in {part} ({grown[part] / 1000.0:+,.0f} µs a commit" + (
            " against those that added up)" if fine else "; none added up)")
    return said


def rows(joined: Joined, name: str) -> list[AnatomyRow]:
    """The ``anatomy`` rows of the standby's half: ``standby:NAME``, each part's
    aggregate over the commits joined, then the whole's, then the walreceiver's syncs
    (each fdatasync/fsync call's own time, once, however many commits it covered)."""
    found = []
    # a duration of 0: a sync under way when the probe attached, whose start it missed
    syncs = [d for _, d in joined.syncs if d > 0] if joined.chains else []
    for component, values in (*((p, joined.parts[p]) for p in PARTS), (WHOLE, joined.whole),
                              (SYNC, syncs)):
        if not values:
            continue
        h = LatencyHistogram()
        h.record_array(np.array(values, dtype=np.int64))
        assert h.min is not None and h.max is not None
        found.append(AnatomyRow(WHO + name, component, h.count, float(h.total),
                                float(h.min), float(h.max), h.to_bytes()))
    return found


def marks(text: str) -> dict[int, int]:
    """The moment (nsecs) of each numbered snapshot (probes/anatomy.py's ``M`` lines)."""
    found: dict[int, int] = {}
    for words in _printed(text):
        if words[0] == "M" and len(words) == 3 and words[1].isdigit() and words[2].isdigit():
            found.setdefault(int(words[1]), int(words[2]))
    return found


def lost(said: str) -> int:
    """The events bpftrace says it lost (its perf buffer full), in what it printed: "Lost
    N events" as text, ``{"type": "lost_events", "data": {"events": N}}`` with ``-f
    json`` (on stdout, among the lines).

    >>> lost('Lost 3 events\\n{"type": "lost_events", "data": {"events": 4}}')
    7
    """
    return (sum(int(m) for m in re.findall(r"Lost (\d+) events", said))
            + sum(int(m) for m in re.findall(
                r'"type": *"lost_events", *"data": *\{ *"events": *(\d+)', said)))


def standby_rows(text: str, name: str, attached: int = 0, host_text: str | None = None
                 ) -> tuple[list[AnatomyRow], str | None, Clock | None, str | None]:
    """The rows of what bpftrace printed from ``attached`` on (see :func:`since`), why
    there are none (None: there are), where the walreceiver's events were printed on
    its SSH host (``host_text``) its clock's offset (:func:`split`), and where the sum
    check failed what the join did (:func:`misjoined`)."""
    found: Clock | None = None
    if host_text is None:
        joined = join(since(events(text), attached))
    else:
        joined, found = split(events(text + "\n" + host_text), attached)
        if found is None:
            return [], ("no round trip joined to estimate the standby's clock by (no reply "
                        "carried a write position, or no commit was joined)"), None, None
    if joined.whole:
        said = "; ".join(s for s in (led_elsewhere(joined), misjoined(joined)) if s)
        return rows(joined, name), None, found, said or None
    if joined.applied:
        return [], ("remote_apply: the standby's replies carried no position to find the "
                    "one that confirmed the replay by (not status messages as this program "
                    "reads them)"), found, None
    return [], (f"no commit joined to the standby's events ({joined.unmatched} without "
                f"their chain, {joined.elsewhere} whose chain led to another release than "
                "their own)"), found, None


def led_elsewhere(joined: Joined) -> str | None:
    """What the probe's row says of the commits :func:`join` left out because their
    chain led to another release than their own; None where there were none.

    >>> print(led_elsewhere(Joined([Chain(0, {}, 10)] * 3, 0, 0, elsewhere=1)))
    ... # doctest: +NORMALIZE_WHITESPACE
    1 of 4 commits left out: its chain led to another release than the one that freed it
    (the join went wrong there; the parts are of the 3 whose chain held)
    """
    if not joined.elsewhere:
        return None
    n = joined.elsewhere
    return (f"{n:,} of {n + len(joined.chains):,} commits left out: "
            f"{'its chain' if n == 1 else 'their chains'} led to another release than the "
            f"one that freed {'it' if n == 1 else 'them'} (the join went wrong there; the "
            f"parts are of the {len(joined.chains):,} whose chain held)")
