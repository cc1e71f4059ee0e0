"""Wait events and replication state, sampled from the servers while pgbench runs.

One thread polls ``pg_stat_activity`` on every node (20 Hz by default) and counts, per
process role, how often each wait event was seen: the share of samples a
backend spends in ``IPC:SyncRep`` is the share of its time spent waiting for
a standby. On the primary the same thread polls ``pg_stat_replication``
(10 Hz) for each standby's write/flush/replay lag. 9.6 has wait events but no
``backend_type`` and no SyncRep wait event (a commit waiting for a standby
shows no wait there); roles come from process titles on every version.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import psycopg
from psycopg import pq

from syncrep_lab.pg.roles import role_of_title, title
from syncrep_lab.store import ReplicationSample

# The function behind pg_stat_activity, without the view's joins to pg_database
# and pg_authid: the same rows at less cost per sample (9.6 to 18).
ACTIVITY_SQL = """
select pid, wait_event_type, wait_event, state
from pg_stat_get_activity(null) where pid <> pg_backend_pid()"""
ACTIVITY_STMT = b"syncrep_lab_activity"


def replication_sql(version_num: int, extra: tuple[str, ...] = ()) -> str:
    """pg_stat_replication on the primary, one row per walsender: pid, standby, sync_state,
    write, flush and replay lag in ms (null before 10) and the flush distance in bytes,
    then the ``extra`` columns (10 and later; observe/lags.py's positions)."""
    if version_num >= 100000:
        return ("select pid, application_name, sync_state, "
                "(extract(epoch from write_lag) * 1000)::float8, "
                "(extract(epoch from flush_lag) * 1000)::float8, "
                "(extract(epoch from replay_lag) * 1000)::float8, "
                "pg_wal_lsn_diff(pg_current_wal_lsn(), flush_lsn)::float8"
                + "".join(f", {c}" for c in extra) + " from pg_stat_replication")
    return ("select pid, application_name, sync_state, null::float8, null::float8, "
            "null::float8, pg_xlog_location_diff(pg_current_xlog_location(), "
            "flush_location)::float8 from pg_stat_replication")


@dataclass
class ActivityResult:
    ticks: int = 0
    # (role, wait_event_type, wait_event) -> samples; state 'active' with no wait is
    # counted as ('role', 'CPU', 'running') so that shares add up per role.
    waits: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    replication: list[ReplicationSample] = field(default_factory=list)
    error: str | None = None
    # (tick: seconds since the sampler started, role, wait_event_type) -> samples, and
    # each tick of the node: the wait kinds over time, put in whole seconds of the
    # repeat's timeline once it is known (:meth:`per_second`).
    timeline: Counter[tuple[float, str, str]] = field(default_factory=Counter)
    tick_times: list[float] = field(default_factory=list)

    def per_second(self, shift: float = 0.0
                   ) -> tuple[Counter[tuple[int, str, str]], Counter[int]]:
        """The timeline in whole seconds after adding ``shift`` to every tick (second k
        covers [k, k+1), so ticks before the client started fall in negative seconds),
        and the ticks taken in each second."""
        samples: Counter[tuple[int, str, str]] = Counter()
        for (t, role, wtype), n in self.timeline.items():
            samples[(math.floor(t + shift), role, wtype)] += n
        return samples, Counter(math.floor(t + shift) for t in self.tick_times)


@dataclass
class _Node:
    name: str
    conninfo: str
    replication: bool  # poll pg_stat_replication here (the primary)
    conn: psycopg.Connection[tuple[object, ...]] | None = None
    backend_pid: int | None = None  # the sampler's own connection's, not the workload's
    result: ActivityResult = field(default_factory=ActivityResult)


class ActivitySampler(threading.Thread):
    """One thread polls every node in turn: a thread per node would cost a third
    more CPU in wake-ups alone, on the machine whose CPU is being measured."""

    def __init__(self, nodes: list[tuple[str, str, bool]], roles_by_pid: dict[int, str], *,
                 hz: float, replication_hz: float = 0.0, version_num: int = 180000) -> None:
        super().__init__(daemon=True)
        self.nodes = [_Node(name, conninfo, replication) for name, conninfo, replication
                      in nodes]
        self.roles_by_pid = roles_by_pid
        self.period = 1.0 / hz
        self.replication_period = 1.0 / replication_hz if replication_hz > 0 else None
        self.version_num = version_num
        self.stopping = threading.Event()
        self.connected = threading.Event()
        self.started = time.monotonic()  # when sampling began: what its times count from

    @property
    def backend_pids(self) -> set[int]:
        return {n.backend_pid for n in self.nodes if n.backend_pid is not None}

    def _role(self, pid: int) -> str:
        role = self.roles_by_pid.get(pid)
        if role is None:
            # Gone already (or on another machine): most such pids are backends.
            text = title(pid)
            role = role_of_title(text) if text else "backend"
            self.roles_by_pid[pid] = role
        return role

    def _connect(self) -> None:
        for node in self.nodes:
            try:
                node.conn = psycopg.connect(node.conninfo, autocommit=True, connect_timeout=5)
                node.conn.execute("set application_name = 'syncrep-lab probe'")
                node.backend_pid = node.conn.info.backend_pid
                _check(node.conn.pgconn.prepare(ACTIVITY_STMT, ACTIVITY_SQL.encode()),
                       pq.ExecStatus.COMMAND_OK)
            except psycopg.Error as exc:
                node.result.error = str(exc).strip()
                node.conn = None
        self.connected.set()

    def run(self) -> None:
        try:
            self._connect()
            self._loop()
        finally:
            for node in self.nodes:
                if node.conn is not None:
                    node.conn.close()

    def _loop(self) -> None:
        started = self.started = time.monotonic()
        next_activity = next_replication = started
        rep_sql = replication_sql(self.version_num)
        while not self.stopping.is_set():
            now = time.monotonic()
            poll_replication = (self.replication_period is not None
                                and now >= next_replication)
            if now >= next_activity:
                tick = round(now - started, 3)
                for node in self.nodes:
                    self._activity(node, tick)
                next_activity += self.period
            if poll_replication:
                for node in self.nodes:
                    if node.replication:
                        self._replication(node, rep_sql, round(now - started, 3))
                assert self.replication_period is not None
                next_replication += self.replication_period
            wake = min(next_activity, next_replication
                       if self.replication_period is not None else next_activity)
            self.stopping.wait(max(0.0, wake - time.monotonic()))

    def _activity(self, node: _Node, tick: float) -> None:
        if node.conn is None:
            return
        # libpq directly, without a cursor: a third of the client CPU per sample.
        try:
            res = _check(node.conn.pgconn.exec_prepared(ACTIVITY_STMT, []),
                         pq.ExecStatus.TUPLES_OK)
        except psycopg.Error as exc:
            node.result.error = str(exc).strip()
            node.conn = None
            return
        result = node.result
        result.ticks += 1
        result.tick_times.append(tick)
        value = res.get_value
        for i in range(res.ntuples):
            role = self._role(int(value(i, 0) or 0))
            wtype = (value(i, 1) or b"").decode()
            if wtype:
                result.waits[(role, wtype, (value(i, 2) or b"").decode())] += 1
            elif value(i, 3) == b"active" or role != "backend":
                wtype = "CPU"
                result.waits[(role, wtype, "running")] += 1
            else:
                wtype = "Client"
                result.waits[(role, wtype, "idle")] += 1
            result.timeline[(tick, role, wtype)] += 1

    def _replication(self, node: _Node, sql: str, t_s: float) -> None:
        if node.conn is None:
            return
        try:
            rows = node.conn.execute(sql, prepare=True).fetchall()
        except psycopg.Error as exc:
            node.result.error = str(exc).strip()
            node.conn = None
            return
        for row in rows:
            node.result.replication.append(ReplicationSample(
                t_s, str(row[1]), str(row[2]), _f(row[3]), _f(row[4]), _f(row[5]),
                _f(row[6])))

    def stop(self) -> dict[str, ActivityResult]:
        self.stopping.set()
        self.join(timeout=10)
        return {n.name: n.result for n in self.nodes}


def _check(res: pq.abc.PGresult, expected: pq.ExecStatus) -> pq.abc.PGresult:
    if res.status != expected:
        raise psycopg.OperationalError((res.error_message or b"").decode(errors="replace"))
    return res


def _f(value: object) -> float | None:
    return None if value is None else float(str(value))
