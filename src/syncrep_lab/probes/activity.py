"""Wait events and replication state, sampled from the servers while pgbench runs.

One thread per node polls ``pg_stat_activity`` (20 Hz by default) and counts, per
process role, how often each wait event was seen: the share of samples a
backend spends in ``IPC:SyncRep`` is the share of its time spent waiting for
a standby. On the primary the same thread polls ``pg_stat_replication``
(10 Hz) for each standby's write/flush/replay lag. 9.6 has wait events but no
``backend_type`` and no SyncRep wait event (a commit waiting for a standby
shows no wait there); roles come from process titles on every version.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import psycopg

from syncrep_lab.probes.roles import role_of_title, title

ACTIVITY_SQL = """
select pid, coalesce(wait_event_type, ''), coalesce(wait_event, ''), coalesce(state, '')
from pg_stat_activity where pid <> pg_backend_pid()"""

REPLICATION_SQL_10 = """
select application_name, sync_state,
       extract(epoch from write_lag) * 1000, extract(epoch from flush_lag) * 1000,
       extract(epoch from replay_lag) * 1000,
       pg_wal_lsn_diff(pg_current_wal_lsn(), flush_lsn)::float8
from pg_stat_replication"""

REPLICATION_SQL_96 = """
select application_name, sync_state, null::float8, null::float8, null::float8,
       pg_xlog_location_diff(pg_current_xlog_location(), flush_location)::float8
from pg_stat_replication"""


@dataclass
class ActivityResult:
    ticks: int = 0
    # (role, wait_event_type, wait_event) -> samples; state 'active' with no wait is
    # counted as ('role', 'CPU', 'running') so that shares add up per role.
    waits: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    # (t_s, standby, sync_state, write_ms, flush_ms, replay_ms, flush_lag_bytes)
    replication: list[tuple[float, str, str, float | None, float | None, float | None,
                            float | None]] = field(default_factory=list)
    error: str | None = None


class NodeSampler(threading.Thread):
    def __init__(self, conninfo: str, roles_by_pid: dict[int, str], *, hz: float,
                 replication_hz: float = 0.0, version_num: int = 180000) -> None:
        super().__init__(daemon=True)
        self.conninfo = conninfo
        self.roles_by_pid = roles_by_pid
        self.period = 1.0 / hz
        self.replication_period = 1.0 / replication_hz if replication_hz > 0 else None
        self.version_num = version_num
        self.stopping = threading.Event()
        self.result = ActivityResult()
        self.backend_pid: int | None = None  # its own connection's, not the workload's

    def _role(self, pid: int) -> str:
        role = self.roles_by_pid.get(pid)
        if role is None:
            # Gone already (or on another machine): most such pids are backends.
            text = title(pid)
            role = role_of_title(text) if text else "backend"
            self.roles_by_pid[pid] = role
        return role

    def run(self) -> None:
        try:
            with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=5) as conn:
                conn.execute("set application_name = 'syncrep-lab probe'")
                self.backend_pid = conn.info.backend_pid
                started = time.monotonic()
                next_activity = next_replication = started
                rep_sql = REPLICATION_SQL_10 if self.version_num >= 100000 else REPLICATION_SQL_96
                while not self.stopping.is_set():
                    now = time.monotonic()
                    if now >= next_activity:
                        self._activity(conn)
                        next_activity += self.period
                    if self.replication_period is not None and now >= next_replication:
                        for row in conn.execute(rep_sql):
                            self.result.replication.append(
                                (round(now - started, 3), str(row[0]), str(row[1]),
                                 _f(row[2]), _f(row[3]), _f(row[4]), _f(row[5])))
                        next_replication += self.replication_period
                    wake = min(next_activity, next_replication
                               if self.replication_period is not None else next_activity)
                    self.stopping.wait(max(0.0, wake - time.monotonic()))
        except psycopg.Error as exc:
            self.result.error = str(exc).strip()

    def _activity(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        self.result.ticks += 1
        for pid, wtype, wevent, state in conn.execute(ACTIVITY_SQL):
            role = self._role(int(str(pid)))
            if wtype:
                self.result.waits[(role, str(wtype), str(wevent))] += 1
            elif state == "active" or role != "backend":
                self.result.waits[(role, "CPU", "running")] += 1
            else:
                self.result.waits[(role, "Client", "idle")] += 1

    def stop(self) -> ActivityResult:
        self.stopping.set()
        self.join(timeout=10)
        return self.result


def _f(value: object) -> float | None:
    return None if value is None else float(str(value))
