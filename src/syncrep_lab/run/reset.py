"""Every repeat from the same state, and what disturbed it.

Before each measured repeat (:func:`reset`): the insert workload's table is emptied
(``TRUNCATE ... RESTART IDENTITY``: the same empty heap and index every time, rather
than one that grew by every repeat before it), a ``CHECKPOINT`` is taken on the
primary and then on each standby syncrep-lab can reach (so no checkpoint is owed from
the previous repeat's WAL), and the run waits until every streaming standby has
replayed up to the primary's position. The spec's ``run.reset`` can leave out the
checkpoints ("no-checkpoint") or the emptying too ("none"): the modes for finding out
what the start state does to the noise (bench/repeat_state.py). Lookup and script
workloads keep their tables.

Around it: the checkpoints that began during the repeat (from ``pg_stat_checkpointer``
on 17+, ``pg_stat_bgwriter`` before), the autovacuum and autoanalyze runs on the
workload's table, and the CPU other processes of the machine took (:class:`CpuLedger`:
the machine's busy time from /proc/stat, CPU steal included, minus the servers', the
tool's and pgbench's). A repeat with any of them is flagged; the figures stay, and the
terminal and the report say which repeats were hit. The insert table is created with
autovacuum off (run/workload.py), so an autovacuum there is the exception (a
wraparound vacuum) and is flagged as one.

On an attached cluster ``CHECKPOINT`` needs a superuser or ``pg_checkpoint`` (15+);
without it the checkpoint is left out and said once.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from syncrep_lab import procs
from syncrep_lab.pg.admin import admin_connection
from syncrep_lab.pg.conninfo import mask_text
from syncrep_lab.plan.spec import ResetMode
from syncrep_lab.run.repeat_record import Disturbance

CATCH_UP_SECONDS = 10.0
OTHER_CORES_FLAG = 0.25  # other processes' CPU during a repeat, in cores, that flags it


@dataclass(frozen=True)
class Counters:
    checkpoints: int
    autovacuums: int


@dataclass
class ResetResult:
    notes: list[str]  # what could not be done (said once per cell)
    behind: bool  # a standby had not replayed up to the primary in time


def reset(primary: str, standbys: list[str], insert_table: str | None, version_num: int,
          mode: ResetMode = "full") -> ResetResult:
    """Empty the insert table, checkpoint everywhere, wait for the standbys; ``mode``
    (the spec's ``run.reset``) "no-checkpoint" leaves the checkpoints out, "none" the
    table too. The wait for the standbys is in every mode: it changes no state, only
    keeps the last repeat's WAL out of this one."""
    notes: list[str] = []
    with admin_connection(primary, seconds=60, lock_timeout_s=10, what="the primary") as conn:
        if insert_table is not None and mode != "none":
            conn.execute(f"truncate table {insert_table} restart identity")
        if mode == "full":
            try:
                conn.execute("checkpoint")
            except psycopg.errors.InsufficientPrivilege:
                notes.append("no CHECKPOINT before each repeat: the role may not (it needs "
                             "superuser or pg_checkpoint)")
        lsn_fn = "pg_current_wal_lsn()" if version_num >= 100000 else \
            "pg_current_xlog_location()"
        row = conn.execute(f"select {lsn_fn}::text").fetchone()
        assert row is not None
        target = str(row[0])
        behind = not _caught_up(conn, target, version_num, standbys)
    for conninfo in standbys if mode == "full" else []:
        try:
            with admin_connection(conninfo, seconds=30, what="a standby") as sconn:
                sconn.execute("checkpoint")  # a restartpoint
        except psycopg.errors.InsufficientPrivilege:
            pass  # said for the primary already
        except psycopg.Error as exc:  # a standby down between repeats: the repeat says so
            first = (str(exc).strip() or type(exc).__name__).splitlines()[0]
            notes.append(f"a standby was not checkpointed before a repeat "
                         f"({mask_text(first)})")
    return ResetResult(notes, behind)


def _caught_up(conn: psycopg.Connection[Any], target: str, version_num: int,
               standbys: list[str] | None = None) -> bool:
    """Whether every streaming standby replays up to ``target`` within CATCH_UP_SECONDS.

    The primary hears of a standby's replay in the standby's next status message. 10 and
    later send one as soon as they replay; 9.6's walreceiver only every
    wal_receiver_status_interval (a second, pg/settings.py), so the primary's view alone
    kept each 9.6 repeat waiting about a second for a replay long done. While the
    primary's view lags, the ``standbys`` syncrep-lab reaches are asked themselves: when
    each has replayed up to the target and they are at least as many as the standbys
    streaming from the primary, every one of those has too (a standby that does not
    answer leaves the primary's view to decide)."""
    replay = "replay_lsn" if version_num >= 100000 else "replay_location"
    diff = "pg_wal_lsn_diff" if version_num >= 100000 else "pg_xlog_location_diff"
    replayed = ("pg_last_wal_replay_lsn()" if version_num >= 100000 else
                "pg_last_xlog_replay_location()")
    deadline = time.monotonic() + CATCH_UP_SECONDS
    with contextlib.ExitStack() as opened:
        asked: list[psycopg.Connection[Any]] | None = None
        while True:
            row = conn.execute(
                f"select count(*) filter (where {replay} is null or "
                f"{diff}(%s::pg_lsn, {replay}) > 0), count(*) from pg_stat_replication "
                "where state = 'streaming'", (target,)).fetchone()
            if row is None or int(row[0]) == 0:
                return True
            if standbys and len(standbys) >= int(row[1]):
                try:
                    if asked is None:
                        asked = [opened.enter_context(admin_connection(
                            s, seconds=CATCH_UP_SECONDS + 5, what="a standby"))
                            for s in standbys]
                    if all(_replayed(s, replayed, diff, target) for s in asked):
                        return True
                except psycopg.Error:
                    standbys = None  # the primary's view alone, as before
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)


def _replayed(conn: psycopg.Connection[Any], replayed: str, diff: str, target: str) -> bool:
    """Whether the standby on ``conn`` has replayed up to ``target``."""
    row = conn.execute(f"select {replayed} is not null and {diff}(%s::pg_lsn, {replayed}) <= 0",
                       (target,)).fetchone()
    return row is not None and bool(row[0])


def counters(admin: str, version_num: int, table: str) -> Counters | None:
    """The primary's checkpoint count and the table's autovacuum count (None when the
    primary does not answer: the repeat is then simply not judged)."""
    checkpoints = ("select num_timed + num_requested from pg_stat_checkpointer"
                   if version_num >= 170000 else
                   "select checkpoints_timed + checkpoints_req from pg_stat_bgwriter")
    try:
        with admin_connection(admin, seconds=10, what="the primary") as conn:
            a = conn.execute(checkpoints).fetchone()
            b = conn.execute("select coalesce(sum(autovacuum_count + autoanalyze_count), 0) "
                             "from pg_stat_user_tables where relname = %s",
                             (table,)).fetchone()
    except psycopg.Error:
        return None
    assert a is not None and b is not None
    return Counters(int(a[0]), int(b[0]))


@dataclass(frozen=True)
class CpuLedger:
    """CPU seconds so far of every process that is not ours (not a server of the cluster,
    not this process nor one it started), by (pid, start time), and the machine's steal
    time (another tenant's use of this machine's CPUs)."""

    at: float
    others: dict[tuple[int, str], float]
    steal: float


def cpu_ledger(data_dirs: list[Path]) -> CpuLedger | None:
    """None without local servers (an attached cluster): its processes cannot be told
    from anyone else's."""
    if not data_dirs:
        return None
    from syncrep_lab.cluster.server import processes_in

    ours = set(processes_in(data_dirs)) | {os.getpid()}
    table = procs.table()
    # what this process started (pgbench, perf) and what those started (perf's sleep)
    for _ in range(3):
        ours |= {pid for pid, (ppid, _, _) in table.items() if ppid in ours}
    others = {(pid, start): cpu for pid, (_, start, cpu) in table.items() if pid not in ours}
    return CpuLedger(time.monotonic(), others, procs.machine_steal_seconds())


def other_cores(before: CpuLedger | None, after: CpuLedger | None) -> float | None:
    """The CPU other processes (and other tenants, as steal) took between two ledgers, in
    cores. A process that came and went between the two is not seen: this can only
    understate."""
    if before is None or after is None or after.at <= before.at:
        return None
    used = sum(cpu - before.others.get(key, 0.0) for key, cpu in after.others.items())
    used += after.steal - before.steal
    return max(0.0, used) / (after.at - before.at)


def disturbed(before: Counters | None, after: Counters | None, behind: bool,
              other: float | None = None) -> Disturbance:
    """What hit a repeat, from the counters read around it, whether a standby was
    behind when it began, and the other processes' CPU (in cores)."""
    marks = ["standby behind at start"] if behind else []
    if other is not None and other >= OTHER_CORES_FLAG:
        marks.append(f"other processes took {other:.2f} CPUs")
    if before is None or after is None:
        return Disturbance(None, None, other, ", ".join(marks) or None)
    checkpoints = after.checkpoints - before.checkpoints
    autovacuums = after.autovacuums - before.autovacuums
    if checkpoints > 0:
        marks.append(f"{checkpoints} checkpoint{'s' if checkpoints > 1 else ''}")
    if autovacuums > 0:
        marks.append("autovacuum")
    return Disturbance(checkpoints, autovacuums, other, ", ".join(marks) or None)


class Disturbances:
    """What else happened during one repeat, read when it begins (after its reset) and
    when its client has ended: the checkpoint and autovacuum counters of the primary
    at ``admin`` and the CPU the machine's other processes took (``data_dirs``: the
    local servers')."""

    def __init__(self, admin: str, version_num: int, insert_table: str,
                 data_dirs: list[Path], *, behind: bool) -> None:
        self.admin, self.version_num, self.table = admin, version_num, insert_table
        self.data_dirs, self.behind = data_dirs, behind
        self.counted = counters(admin, version_num, insert_table)
        self.ledger = cpu_ledger(data_dirs)
        self.ledger_after: CpuLedger | None = None

    def ended(self) -> None:
        """The client has ended: the other processes' CPU is read now, while what the
        tool started (perf) is still there to be told from them."""
        self.ledger_after = cpu_ledger(self.data_dirs)

    def seen(self) -> Disturbance:
        return disturbed(self.counted, counters(self.admin, self.version_num, self.table),
                         self.behind, other_cores(self.ledger, self.ledger_after))
