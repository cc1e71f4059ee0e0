"""The sampling loop of ``observe``: wait events and replication state at ``hz`` (10 by
default), the commit and WAL counters once a second, CPU per role at each slice's end.

The window is cut into slices (``slice_seconds``, 10 by default), stored as the repeats
of one cell, so that every figure gets an interval over slices as a run's figures do
over repeats. What a slice counts:

- **transactions that wrote**: transaction ids assigned (the snapshot's ``xmax``
  moving), the transactions whose commit waits for a synchronous standby; read-only
  transactions never wait and get no id. Per-commit costs are per such transaction.
- **commits**: ``pg_stat_database.xact_commit`` over every database, less the observer's
  own statements (each is a transaction of its own);
- **WAL**: bytes from the insert position, records from ``pg_stat_wal`` (14+);
- **wait events** of every process (``pg_stat_activity``), client backends only while
  in a transaction (an idle session is not part of any commit's time), the observer's
  own session never;
- **pg_stat_replication**: each standby's sync state, lags and flush distance, and
  its WAL positions with the primary's (kept in memory for lags from positions,
  observe/lags.py);
- **CPU per role** from /proc (observe/cpu.py), where the server's processes are
  reachable;
- with ``--anatomy``, a numbered snapshot of the commit anatomy probe's aggregates
  (observe/anatomy.py) just before the counters that open the window and end each slice
  are read: the snapshot is waited for (a few ms, up to ~0.1 s on a loaded machine; the
  sampling pauses meanwhile), so that a slice's anatomy spans the slice's own counters.

A server that stops answering ends the observation: what was gathered until then is
kept (the slice in progress too, when it is at least a second long), and the reason is
returned for the record.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from syncrep_lab.errors import Interrupted, UserError
from syncrep_lab.observe import disks
from syncrep_lab.observe.cpu import NodeCpu
from syncrep_lab.observe.lags import Positions, replication_sql
from syncrep_lab.observe.session import ObserverSession, ServerGone
from syncrep_lab.readers.io_counters import DiskCounters
from syncrep_lab.run.io_watch import HERE, disk_rows
from syncrep_lab.store import (
    AnatomyRow,
    DiskIoRow,
    ObservedRow,
    ProbeRow,
    ProcCostRow,
    ReplicationSample,
    SampleRow,
)

BACKEND_TYPES = {"client backend": "backend", "walsender": "walsender",
                 "walreceiver": "walreceiver", "startup": "startup", "walwriter": "walwriter",
                 "checkpointer": "checkpointer", "background writer": "bgwriter",
                 "autovacuum worker": "autovacuum", "autovacuum launcher": "autovacuum"}


def activity_sql(version_num: int) -> str:
    kind = "backend_type" if version_num >= 100000 else "null::text"
    return (f"select pid, {kind}, state, wait_event_type, wait_event, application_name "
            "from pg_stat_activity where pid <> pg_backend_pid()")


def counters_sql(version_num: int) -> str:
    xmax = ("pg_snapshot_xmax(pg_current_snapshot())::text::bigint" if version_num >= 130000
            else "txid_snapshot_xmax(txid_current_snapshot())")
    lsn = ("pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8" if version_num >= 100000
           else "pg_xlog_location_diff(pg_current_xlog_location(), '0/0')::float8")
    records = ("(select wal_records from pg_stat_wal)" if version_num >= 140000
               else "null::bigint")
    return (f"select sum(xact_commit)::bigint, sum(xact_rollback)::bigint, {xmax}, {lsn}, "
            f"{records} from pg_stat_database")


@dataclass
class Counters:
    commits: int
    rollbacks: int
    xmax: int
    wal_bytes: float
    wal_records: int | None
    own_queries: int  # the observer's statements on the primary so far
    at: float  # monotonic


@dataclass
class Slice:
    started_at: str
    start: float  # monotonic
    first: Counters
    duration_s: float = 0.0
    last: Counters | None = None
    waits: Counter[tuple[str, str, str, str]] = field(default_factory=Counter)
    ticks: Counter[str] = field(default_factory=Counter)  # per node
    timeline: Counter[tuple[int, str, str, str]] = field(default_factory=Counter)
    ticks_per_second: Counter[tuple[int, str]] = field(default_factory=Counter)
    replication: list[ReplicationSample] = field(default_factory=list)
    # written transactions per second (no latency: the tool runs no load here)
    per_second: list[SampleRow] = field(default_factory=list)
    sessions_max: int = 0
    in_transaction: int = 0  # summed over the primary's ticks
    proc_rows: list[ProcCostRow] = field(default_factory=list)
    own_cpu_ms: float | None = None
    # the WAL disks' counters when the slice began, and their growth over it
    disks_from: dict[str, DiskCounters] = field(default_factory=dict)
    disk_rows: list[DiskIoRow] = field(default_factory=list)
    # the commit anatomy's snapshots at the slice's start and end (None: none taken), and
    # what they gave (observe/anatomy.py fills these once the window is over)
    anatomy_from: int | None = None
    anatomy_to: int | None = None
    anatomy: list[AnatomyRow] = field(default_factory=list)
    anatomy_probe: ProbeRow | None = None

    def counts(self, cpu_note: str | None = None) -> ObservedRow:
        """The slice's ``observed`` row (``cpu_note``: why CPU per role is missing)."""
        assert self.last is not None
        own = self.last.own_queries - self.first.own_queries
        ticks = self.ticks["primary"]
        return ObservedRow(
            commits=max(0, self.last.commits - self.first.commits - own),
            rollbacks=max(0, self.last.rollbacks - self.first.rollbacks),
            xids=max(0, self.last.xmax - self.first.xmax),
            wal_bytes=max(0.0, self.last.wal_bytes - self.first.wal_bytes),
            wal_records=(self.last.wal_records - self.first.wal_records
                         if self.last.wal_records is not None
                         and self.first.wal_records is not None else None),
            sessions_max=self.sessions_max,
            in_transaction_mean=self.in_transaction / ticks if ticks else 0.0,
            own_queries=own, own_cpu_ms=self.own_cpu_ms, cpu_note=cpu_note)


@dataclass
class Watched:
    slices: list[Slice]
    ended: str | None  # why the observation ended before its time, if it did
    notes: list[str] = field(default_factory=list)  # standbys lost on the way, ...
    signum: int | None = None  # the signal that ended it, if one did


class Watch:
    def __init__(self, primary: ObserverSession, standbys: list[ObserverSession], *,
                 hz: float, slice_seconds: int, cpu: dict[str, NodeCpu]) -> None:
        self.primary, self.standbys = primary, standbys
        self.period = 1.0 / hz
        self.slice_seconds = slice_seconds
        self.cpu = cpu
        self.walsenders: dict[int, str] = {}  # pid -> the standby it serves
        self.seen: dict[int, str] = {}  # every walsender seen in the window, and its standby
        # the commit anatomy's snapshot, taken where a slice begins and ends (--anatomy)
        self.mark: Callable[[], int | None] | None = None
        v = primary.version_num
        self.sql = {"activity": activity_sql(v), "replication": replication_sql(v),
                    "counters": counters_sql(v)}
        self.notes: list[str] = []
        # the block devices under the watched servers' WAL (observe/disks.py)
        self.disks: set[str] = set()
        # the primary's and the standbys' WAL positions over time (observe/lags.py)
        self.positions = Positions(hz)

    def names(self) -> dict[int, str]:
        """pid -> the standby each walsender serves, as last sampled."""
        return dict(self.walsenders)

    def counters(self) -> Counters:
        row = self.primary.one(self.sql["counters"])
        return Counters(int(row[0] or 0), int(row[1] or 0), int(row[2] or 0),
                        float(row[3] or 0.0), None if row[4] is None else int(row[4]),
                        self.primary.queries, time.monotonic())

    def replication(self, slice_: Slice | None, t_s: float) -> None:
        rows = self.primary.query(self.sql["replication"])
        self.positions.record(time.monotonic(), rows)
        self.walsenders = {int(r[0]): str(r[1]) for r in rows}
        self.seen.update(self.walsenders)
        if slice_ is not None:
            slice_.replication += [ReplicationSample(round(t_s, 3), str(r[1]), str(r[2]), r[3],
                                                     r[4], r[5], r[6]) for r in rows]

    def _role(self, backend_type: str | None, pid: int, app: str | None) -> str:
        if backend_type is None:  # 9.6: client backends and walsenders only
            role = "walsender" if pid in self.walsenders else "backend"
        else:
            role = BACKEND_TYPES.get(backend_type, "other")
        if role == "walsender" and pid in self.walsenders:
            return f"walsender:{self.walsenders[pid]}"
        if role == "walsender" and app:
            return f"walsender:{app}"
        return role

    def activity(self, session: ObserverSession, slice_: Slice, second: int) -> None:
        rows = session.query(self.sql["activity"])
        node = session.node
        sessions = in_tx = 0
        for pid, backend_type, state, wtype, wevent, app in rows:
            role = self._role(backend_type, int(pid), app)
            if role == "backend":
                sessions += 1
                if state in (None, "idle", "disabled"):
                    continue  # between transactions: no commit's time
                in_tx += 1
            kind = str(wtype) if wtype else "CPU"
            event = str(wevent) if wtype else "running"
            slice_.waits[(node, role, kind, event)] += 1
            slice_.timeline[(second, node, role, kind)] += 1
        slice_.ticks[node] += 1
        slice_.ticks_per_second[(second, node)] += 1
        if node == "primary":
            slice_.sessions_max = max(slice_.sessions_max, sessions)
            slice_.in_transaction += in_tx

    def _new_slice(self, first: Counters, mark: int | None) -> Slice:
        # started when its first counters were read, not now: closing the slice before
        # (reading CPU per role) takes tens of ms
        began = datetime.now(UTC) - timedelta(seconds=time.monotonic() - first.at)
        return Slice(began.isoformat(timespec="milliseconds"), first.at, first,
                     anatomy_from=mark, disks_from=disks.read(self.disks))

    def _mark(self) -> int | None:
        return self.mark() if self.mark is not None else None

    def _close(self, slice_: Slice, last: Counters) -> None:
        slice_.last = last
        slice_.duration_s = last.at - slice_.start
        slice_.disk_rows = disk_rows(HERE, slice_.disks_from, disks.read(self.disks),
                                     slice_.duration_s)
        for node, reader in self.cpu.items():
            rows, own = reader.cut()
            slice_.proc_rows += rows
            if node == "primary":
                slice_.own_cpu_ms = own

    def run(self, seconds: float) -> Watched:
        """Sample for ``seconds``; ends early when the primary stops answering or a signal
        arrives, keeping what was gathered."""
        slices: list[Slice] = []
        ended: str | None = None
        signum: int | None = None
        self.replication(None, 0.0)
        first = self._mark()
        previous = self.counters()
        t0 = previous.at
        current = self._new_slice(previous, first)
        next_tick, next_second, next_cut = t0, t0 + 1.0, t0 + self.slice_seconds
        try:
            while time.monotonic() - t0 < seconds:
                now = time.monotonic()
                if now >= next_tick:
                    self._tick(current, int(now - current.start), now - t0)
                    next_tick = max(next_tick + self.period, now)  # behind: no catching up
                if now >= next_second:
                    cutting = time.monotonic() >= next_cut - 0.25
                    mark = self._mark() if cutting else None
                    counters = self.counters()
                    dt = counters.at - previous.at
                    if dt > 0:
                        current.per_second.append(SampleRow(
                            round(counters.at - current.start, 3),
                            (counters.xmax - previous.xmax) / dt, None, None, 0))
                    previous = counters
                    next_second += 1.0
                    if cutting:
                        current.anatomy_to = mark
                        self._close(current, counters)
                        slices.append(current)
                        current = self._new_slice(counters, mark)
                        next_cut += self.slice_seconds
                time.sleep(max(0.0, min(next_tick, next_second) - time.monotonic()))
            last = self._mark()
            previous = self.counters()
            current.anatomy_to = last  # a slice ended early (a server gone, a signal): none
        except ServerGone as exc:
            ended = f"the primary stopped answering after {time.monotonic() - t0:.1f} s: {exc}"
        except Interrupted as exc:
            ended = f"interrupted by {signal.Signals(exc.signum).name}"
            signum = exc.signum
        if previous.at - current.start >= 1.0:  # the slice in progress, if a second long
            try:
                self._close(current, previous)
            except UserError as exc:  # CPU of a node whose host went away
                self.notes.append(f"the last slice's CPU could not be read: {exc.cause}")
                current.last, current.duration_s = previous, previous.at - current.start
            slices.append(current)
        return Watched(slices, ended, self.notes, signum)

    def _tick(self, current: Slice, second: int, since_start: float) -> None:
        self.activity(self.primary, current, second)
        self.replication(current, time.monotonic() - current.start)
        for standby in list(self.standbys):
            try:
                self.activity(standby, current, second)
            except ServerGone as exc:
                self.standbys.remove(standby)
                self.notes.append(f"standby {standby.node} stopped answering after "
                                  f"{since_start:.1f} s ({exc}); its samples end there")
