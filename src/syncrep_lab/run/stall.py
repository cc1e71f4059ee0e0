"""Telling a stalled commit wait from a slow one while pgbench runs.

pgbench prints a progress line every second. When none has shown a transaction for
``run.stall_seconds`` in a cell whose commits wait for a standby, the primary is
asked (one bounded query) whether pgbench's sessions are waiting in ``SyncRep`` or
the standbys it needs are missing. Only then is the repeat stopped, with what the
primary sees as the cause: a stall that can end by itself (a checkpoint, a lock held
by someone else) is left to pgbench's own bound (``-T`` plus a minute).

Without this, a standby that stops confirming makes the cell wait that whole minute,
and on an attached cluster the tool's backends would then still sit in the wait.
"""

from __future__ import annotations

import time

import psycopg

from syncrep_lab.pg import replication, sync_names
from syncrep_lab.pg.admin import admin_connection

CHECK_SECONDS = 5.0


class SyncStallWatch:
    """A :data:`~syncrep_lab.run.workload.StallWatch` for one primary."""

    def __init__(self, admin: str, pgbench_name: str, stall_seconds: float,
                 version_num: int) -> None:
        self.admin = admin
        self.pgbench_name = pgbench_name  # the application_name pgbench's sessions carry
        self.stall_seconds = stall_seconds
        self.version_num = version_num
        self.next_check = 0.0

    def __call__(self, idle_s: float) -> tuple[str, str] | None:
        if idle_s < self.stall_seconds or time.monotonic() < self.next_check:
            return None
        self.next_check = time.monotonic() + 1.0
        try:
            with admin_connection(self.admin, seconds=CHECK_SECONDS, what="the primary") as conn:
                row = conn.execute(
                    "select count(*) filter (where wait_event = 'SyncRep'), "
                    "current_setting('synchronous_standby_names') from pg_stat_activity "
                    "where application_name = %s", (self.pgbench_name,)).fetchone()
                seen = replication.walsenders(conn)
        except psycopg.Error:
            return None  # the primary itself is in trouble: pgbench's own bound decides
        assert row is not None
        waiting, text = int(row[0]), str(row[1])
        if sync_names.parse(text, version_num=self.version_num) is None:
            return None  # commits wait for no standby: whatever holds them, it is not that
        problem = replication.shortfall(text, seen, self.version_num)
        if problem is None and waiting == 0:
            return None
        cause = (f"pgbench completed no transaction for {idle_s:.0f} s"
                 + (f" and {waiting} of its sessions were waiting for a synchronous standby"
                    if waiting else "")
                 + (f": {problem[0]}" if problem is not None else
                    f" (the primary sees: {replication.seen_text(seen)})"))
        fix = (problem[1] if problem is not None else
               "check the standbys (their logs, the link to them); raise run.stall_seconds "
               "if the standby is only slow")
        return cause, fix
