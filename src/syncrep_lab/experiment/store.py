"""The run store: one SQLite database (WAL mode) per run folder, beside ``artifacts/``.

Every repeat is written in one transaction as soon as it ends, so killing the
tool (even with SIGKILL) loses at most the repeat in progress, and ``--resume``
continues from what is stored. The schema is documented in docs/store.md and
versioned in ``meta.schema_version``; users are welcome to query it with SQL
(the ``cell_results`` view is the one-row-per-cell summary).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from syncrep_lab.errors import UserError

SCHEMA_VERSION = 9
DB_NAME = "syncrep-lab.sqlite"

SCHEMA = """
create table if not exists meta (key text primary key, value text not null);
create table if not exists runs (
    id integer primary key,
    name text not null,
    started_at text not null,
    finished_at text,
    status text not null,            -- running | done | interrupted | failed
    spec_toml text not null,
    machine_json text not null,
    tool_version text not null,
    seed integer,                    -- the rounds' shuffles (run.seed, or drawn)
    order_mode text,                 -- interleaved | blocked
    order_note text,                 -- which clusters were held up together, or why not
    kind text                        -- experiment (null in stores before 9) | observe
);
create table if not exists clusters (
    id integer primary key,
    run_id integer not null references runs(id),
    cluster_key text not null,
    version text, bin_dir text, nodes_json text,
    settings_json text,              -- every non-default setting per node, read back
    created_at text not null
);
create table if not exists cells (
    id integer primary key,
    run_id integer not null references runs(id),
    idx integer not null,
    key text not null,
    label text not null,
    axes_json text not null,
    params_json text not null,
    status text not null,            -- pending | running | done | failed
    error text,
    repeats integer not null default 0,
    stop_reason text,                -- ci (target met) | max (repeats_max) | budget
    tps_mean real, tps_stdev real, tps_ci_low real, tps_ci_high real, tps_ci_rel real,
    transactions integer, failed integer,
    lat_mean_ms real, lat_p50_ms real, lat_p90_ms real, lat_p99_ms real,
    lat_p999_ms real, lat_max_ms real,
    histogram blob,                  -- all repeats merged
    started_at text, finished_at text,
    notes_json text,                 -- why its figures may not hold (trend, disturbed repeats)
    unique (run_id, key)
);
create table if not exists repeats (
    id integer primary key,
    cell_id integer not null references cells(id),
    n integer not null,
    probed integer not null default 0,  -- 1: probes ran; kept out of the cell's figures
    started_at text not null,
    duration_s real not null,
    transactions integer not null,   -- from the per-transaction logs
    failed integer not null,
    tps real not null,               -- pgbench's own figure (without connection time)
    pgbench_transactions integer,
    pgbench_latency_avg_ms real,
    lat_mean_ms real, lat_p50_ms real, lat_p90_ms real, lat_p99_ms real,
    lat_p999_ms real, lat_max_ms real,
    histogram blob not null,
    stdout_path text, stderr_path text,
    round integer,                   -- interleaved: the round it ran in (1, 2, ...)
    position integer,                -- its place in that round's shuffled order (0, 1, ...)
    checkpoints integer,             -- checkpoints that began during it (primary)
    autovacuums integer,             -- autovacuum/autoanalyze runs on the workload's table
    other_cpu real,                  -- CPUs other processes of the machine took meanwhile
    disturbed text,                  -- what hit it, comma separated; null: nothing seen
    unique (cell_id, n)
);
create table if not exists samples (
    repeat_id integer not null references repeats(id),
    t_s real not null, tps real not null, latency_ms real, stddev_ms real,
    failed integer not null default 0
);
create index if not exists samples_by_repeat on samples(repeat_id);
create table if not exists probes (
    repeat_id integer not null references repeats(id),
    probe text not null,             -- perf | activity | proc | flamegraphs | sched
    status text not null,            -- ran | skipped | failed
    reason text
);
create table if not exists costs (   -- perf stat per node and process role
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, processes integer not null,
    cpu_ms real not null, context_switches integer not null, syscalls_json text not null
);
create table if not exists waits (   -- pg_stat_activity samples per node and role
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, wait_type text not null,
    wait_event text not null, samples integer not null, ticks integer not null
);
create table if not exists replication_samples (
    repeat_id integer not null references repeats(id),
    t_s real not null, standby text not null, sync_state text,
    write_lag_ms real, flush_lag_ms real, replay_lag_ms real, flush_lag_bytes real
);
create table if not exists proc_costs (   -- /proc per node and process role
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, processes integer not null,
    user_ms real not null, system_ms real not null,
    voluntary_cs integer not null, involuntary_cs integer not null
);
create table if not exists numa_pages (   -- numa_maps before and after a repeat
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, phase text not null,
    numa_node text not null, pages integer not null
);
create table if not exists flamegraphs (   -- one per node and role, plus '*'/'all'
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, cpu_us integer not null,
    folded_path text not null, svg_path text not null   -- relative to the run folder
);
create table if not exists stack_frames (   -- frames over 1 % of a role's on-CPU time
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, frame text not null,
    inclusive_us integer not null, self_us integer not null
);
create table if not exists sched_roles (   -- scheduler trace per node and role
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, threads integer not null,
    cpu_ms real not null, sleep_ms real not null, runq_ms real not null,
    switches integer not null, voluntary integer not null,
    wakeups_received integer not null, duration_s real not null
);
create table if not exists wakeups (   -- who woke whom, during the traced seconds
    repeat_id integer not null references repeats(id),
    waker_node text not null, waker_role text not null,
    wakee_node text not null, wakee_role text not null,
    count integer not null, duration_s real not null
);
create table if not exists wait_timeline (   -- wait kinds second by second
    repeat_id integer not null references repeats(id),
    t_s integer not null,            -- whole seconds since the sampler started
    node text not null, role text not null, wait_type text not null,
    samples integer not null, ticks integer not null   -- ticks: samples of the node that second
);
create table if not exists fault_events (   -- a fault scenario's events and what followed
    repeat_id integer not null references repeats(id),
    t_s real not null,               -- seconds since pgbench started
    kind text not null,              -- fault | state | stall | error | restore
    node text not null, detail text not null
);
create table if not exists durability (   -- rows counted on every node after a faulted repeat
    repeat_id integer not null references repeats(id),
    node text not null,
    rows integer not null,           -- rows the repeat added, as this node sees them
    expected integer not null,       -- primary: acknowledged rows; standby: the primary's rows
    ok integer not null, detail text not null
);
create table if not exists instance_results (   -- each instance of a repeat with instances > 1
    repeat_id integer not null references repeats(id),
    instance integer not null, tps real not null, transactions integer not null,
    failed integer not null, lat_mean_ms real, lat_p99_ms real
);
create table if not exists placement (   -- what the kernel gave each role, read mid-repeat
    repeat_id integer not null references repeats(id),
    instance integer not null, node text not null, role text not null,
    processes integer not null,
    cpus text not null, mems text not null,   -- Cpus_allowed_list, Mems_allowed_list
    cgroup text not null, numa_policy text not null
);
create table if not exists links (   -- emulated links as applied, read back
    repeat_id integer not null references repeats(id),
    instance integer not null, a text not null, b text not null,
    profile text not null, applied_json text not null
);
create table if not exists numastat (   -- numastat -p of each postmaster, before and after
    repeat_id integer not null references repeats(id),
    instance integer not null, node text not null, phase text not null,
    numa_node text not null, mb real not null
);
create table if not exists observed (   -- a window of `observe`, per repeat (its slice)
    repeat_id integer not null references repeats(id),
    commits integer not null,        -- pg_stat_database.xact_commit delta, the tool's own out
    rollbacks integer not null,
    xids integer not null,           -- transaction ids assigned: the transactions that wrote
    wal_bytes real not null,
    wal_records integer,             -- pg_stat_wal (14+)
    sessions_max integer not null,   -- client backends seen at once, at most
    in_transaction_mean real not null,  -- client backends in a transaction, on average
    own_queries integer not null,    -- the observer's statements on the primary
    own_cpu_ms real,                 -- the observer's backend's CPU (null: /proc not reached)
    cpu_note text                    -- why CPU per role is missing, when it is
);
create view if not exists cell_results as
    select r.name as run, c.idx, c.label, c.status, c.repeats, c.stop_reason,
           c.tps_mean, c.tps_ci_low, c.tps_ci_high, c.tps_ci_rel,
           c.lat_mean_ms, c.lat_p50_ms, c.lat_p90_ms, c.lat_p99_ms, c.lat_p999_ms,
           c.lat_max_ms, c.transactions, c.failed, c.axes_json, c.params_json, c.error
    from cells c join runs r on r.id = c.run_id;
"""


NEW_COLUMNS = (  # 6 -> 7, then 7 -> 8 (runs.order_note), 8 -> 9 (runs.kind)
    ("runs", "seed integer"), ("runs", "order_mode text"), ("cells", "notes_json text"),
    ("repeats", "round integer"), ("repeats", "position integer"),
    ("repeats", "checkpoints integer"), ("repeats", "autovacuums integer"),
    ("repeats", "other_cpu real"), ("repeats", "disturbed text"), ("runs", "order_note text"),
    ("runs", "kind text"))

PROBE_TABLES: dict[str, tuple[str, ...]] = {
    "probes": ("probe", "status", "reason"),
    "costs": ("node", "role", "processes", "cpu_ms", "context_switches", "syscalls_json"),
    "waits": ("node", "role", "wait_type", "wait_event", "samples", "ticks"),
    "replication_samples": ("t_s", "standby", "sync_state", "write_lag_ms",
                            "flush_lag_ms", "replay_lag_ms", "flush_lag_bytes"),
    "proc_costs": ("node", "role", "processes", "user_ms", "system_ms", "voluntary_cs",
                   "involuntary_cs"),
    "numa_pages": ("node", "role", "phase", "numa_node", "pages"),
    "flamegraphs": ("node", "role", "cpu_us", "folded_path", "svg_path"),
    "stack_frames": ("node", "role", "frame", "inclusive_us", "self_us"),
    "sched_roles": ("node", "role", "threads", "cpu_ms", "sleep_ms", "runq_ms", "switches",
                    "voluntary", "wakeups_received", "duration_s"),
    "wakeups": ("waker_node", "waker_role", "wakee_node", "wakee_role", "count",
                "duration_s"),
    "wait_timeline": ("t_s", "node", "role", "wait_type", "samples", "ticks"),
    "fault_events": ("t_s", "kind", "node", "detail"),
    "durability": ("node", "rows", "expected", "ok", "detail"),
    "instance_results": ("instance", "tps", "transactions", "failed", "lat_mean_ms",
                         "lat_p99_ms"),
    "placement": ("instance", "node", "role", "processes", "cpus", "mems", "cgroup",
                  "numa_policy"),
    "links": ("instance", "a", "b", "profile", "applied_json"),
    "numastat": ("instance", "node", "phase", "numa_node", "mb"),
    "observed": ("commits", "rollbacks", "xids", "wal_bytes", "wal_records", "sessions_max",
                 "in_transaction_mean", "own_queries", "own_cpu_ms", "cpu_note"),
}


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class RunFolderUnwritable(UserError):
    """The run folder (store or artifacts) cannot be written: a full disk, a read-only
    mount, no permission. The run stops (exit 2) rather than fail cell after cell;
    what was stored stays, and ``--resume`` continues once the folder is writable."""


# errno of a write that failed because of where the run folder is, not of the cell
FOLDER_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                 errno.EIO}
_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN = 8, 10, 13, 14


def folder_error(folder: Path, err: int, detail: str, *, resumable: bool = True
                 ) -> RunFolderUnwritable:
    """The error for a run folder that cannot be written, naming cause and fix
    (``resumable``: a run is stored there, to be continued)."""
    resume = f", then continue the run with: syncrep-lab run --resume --out {folder}"
    if err in (errno.ENOSPC, errno.EDQUOT):
        what = "its disk is full"
        fix = (f"free space on the file system that holds it (df -h {folder}){resume}"
               if resumable else f"free space there (df -h {folder.parent}) or choose "
               "another --out")
    elif err == errno.EROFS:
        what = "it is on a read-only file system"
        fix = (f"remount it read-write (or copy the run folder somewhere writable and "
               f"resume that copy){resume}" if resumable
               else "choose an --out on a writable file system")
    elif err in (errno.EACCES, errno.EPERM):
        what = "this user may not write to it"
        fix = (f"make it writable for this user (ls -ld {folder}){resume}" if resumable
               else "choose an --out this user can write to")
    else:
        what = "the disk reported an I/O error"
        fix = (f"check the disk (dmesg){resume}" if resumable
               else "check the disk (dmesg) or choose another --out")
    return RunFolderUnwritable(f"cannot write to the run folder {folder}: {what} ({detail})",
                               fix)


def _sqlite_errno(exc: sqlite3.Error, folder: Path) -> int | None:
    """The errno behind an SQLite error that is the run folder's, else None. SQLite's
    codes do not tell a read-only mount from a missing permission: the folder does."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None or code & 0xFF not in (_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL,
                                           _SQLITE_CANTOPEN):
        return None
    if code & 0xFF == _SQLITE_FULL:
        return errno.ENOSPC
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return errno.EROFS
    except OSError:
        return None
    if not os.access(folder, os.W_OK):
        return errno.EACCES
    return {_SQLITE_READONLY: errno.EACCES, _SQLITE_IOERR: errno.EIO}.get(code & 0xFF)


def mark_run(folder: Path, run_id: int, status: str, timeout: float = 0.5) -> None:
    """Set a run's status through a connection of its own, waiting at most ``timeout``
    for the store (a forced exit: the main connection may be in a transaction)."""
    db = sqlite3.connect(folder / DB_NAME, timeout=timeout, isolation_level=None)
    try:
        db.execute("update runs set status = ?, finished_at = ? where id = ?",
                   (status, now(), run_id))
    finally:
        db.close()


_SQLITE_NOTADB = 26


def _not_a_store(path: Path, exc: Exception) -> UserError:
    return UserError(f"{path} is not a syncrep-lab run store ({exc})",
                     "give the folder a run was written to (its --out)")


class Store:
    def __init__(self, folder: Path, *, create: bool) -> None:
        self.folder = folder
        self.artifacts = folder / "artifacts"
        path = folder / DB_NAME
        if not create and not path.is_file():
            raise UserError(f"{folder} is not a syncrep-lab run folder (no {DB_NAME})",
                            "give the folder a run was written to (its --out)")
        try:
            if create:
                self.artifacts.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(path, timeout=30, isolation_level=None)
            self.db.row_factory = sqlite3.Row
            self.db.execute("pragma journal_mode = wal")
            self.db.execute("pragma synchronous = normal")
            self.db.execute("pragma foreign_keys = on")
            if create:
                self.db.executescript(SCHEMA)
                self.db.execute("insert or ignore into meta values ('schema_version', ?)",
                                (str(SCHEMA_VERSION),))
        except (sqlite3.Error, OSError) as exc:
            err = exc.errno if isinstance(exc, OSError) else _sqlite_errno(exc, folder)
            if err in FOLDER_ERRNOS:
                assert err is not None
                raise folder_error(folder, err, f"cannot open the run store: {exc}",
                                   resumable=not create) from None
            if getattr(exc, "sqlite_errorcode", None) == _SQLITE_NOTADB:
                raise _not_a_store(path, exc) from None
            raise UserError(f"cannot open the run store in {folder}: {exc}",
                            "check that the folder is writable and the disk not full") from None
        try:
            version = self.db.execute(
                "select value from meta where key = 'schema_version'").fetchone()
        except sqlite3.Error as exc:  # an SQLite file, but not one of ours (or empty)
            self.db.close()
            raise _not_a_store(path, exc) from None
        if version is not None and int(version[0]) in (1, 2, 3, 4, 5, 6, 7, 8) and not create:
            # 1 -> 2 added the first probe tables and repeats.probed; 2 -> 3 the tables
            # of /proc, NUMA, flame graphs and the scheduler trace; 3 -> 4 the wait
            # timeline; 4 -> 5 fault events and durability checks; 5 -> 6 instances,
            # placement, links and numastat. New tables only, but for 6 -> 7: the
            # rounds of interleaved runs and what disturbed a repeat (new columns);
            # 7 -> 8 the run's note on which clusters were held up together; 8 -> 9 the
            # run's kind and the observed table (syncrep-lab observe).
            self.db.executescript(SCHEMA)
            if int(version[0]) == 1:
                self.db.execute(
                    "alter table repeats add column probed integer not null default 0")
            for table, column in NEW_COLUMNS:
                have = {r[1] for r in self.db.execute(f"pragma table_info({table})")}
                if column.split()[0] not in have:
                    self.db.execute(f"alter table {table} add column {column}")
            self.db.execute("update meta set value = ? where key = 'schema_version'",
                            (str(SCHEMA_VERSION),))
            version = (str(SCHEMA_VERSION),)
        if version is None or int(version[0]) != SCHEMA_VERSION:
            raise UserError(f"{path} has schema version {version[0] if version else '?'}, "
                            f"this syncrep-lab reads {SCHEMA_VERSION}",
                            "use the syncrep-lab version that wrote it")

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; a write the run folder refuses (full disk, read-only)
        is rolled back, which leaves the store as it was, and raised as
        RunFolderUnwritable."""
        try:
            self.db.execute("begin immediate")
        except sqlite3.Error as exc:
            raise self._write_error(exc) from None
        try:
            yield self.db
            self.db.execute("commit")
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                if self.db.in_transaction:
                    self.db.execute("rollback")
            if isinstance(exc, sqlite3.Error):
                raise self._write_error(exc) from None
            raise

    def _write_error(self, exc: sqlite3.Error) -> Exception:
        err = _sqlite_errno(exc, self.folder)
        if err is None:
            return exc
        return folder_error(self.folder, err, f"the store {self.folder / DB_NAME}: {exc}")

    def unwritable(self, exc: BaseException) -> RunFolderUnwritable | None:
        """The run-folder problem behind a failure, if there is one: the failure says so,
        or a small write into the folder fails now. None: the failure is the cell's."""
        if isinstance(exc, RunFolderUnwritable):
            return exc
        if isinstance(exc, sqlite3.Error):
            err = _sqlite_errno(exc, self.folder)
            if err is not None:
                return folder_error(self.folder, err, str(exc))
        if isinstance(exc, OSError) and exc.errno in FOLDER_ERRNOS and exc.filename and (
                Path(os.path.abspath(exc.filename)).is_relative_to(self.folder.absolute())):
            return folder_error(self.folder, exc.errno, f"{exc.strerror}: {exc.filename}")
        return self.check_writable()

    def check_writable(self, size: int = 64 << 10) -> RunFolderUnwritable | None:
        """Write (and remove) a small file among the artifacts; the error if that fails."""
        probe = self.artifacts / f".write-check-{os.getpid()}"
        try:
            self.artifacts.mkdir(parents=True, exist_ok=True)
            with open(probe, "wb") as fh:
                fh.write(b"\0" * size)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            with contextlib.suppress(OSError):
                probe.unlink(missing_ok=True)
            if exc.errno in FOLDER_ERRNOS:
                return folder_error(self.folder, exc.errno,
                                    f"{exc.strerror}: {exc.filename or self.artifacts}")
            return None
        with contextlib.suppress(OSError):
            probe.unlink()
        return None

    # --- runs ---------------------------------------------------------------------

    def create_run(self, name: str, spec_toml: str, machine: dict[str, Any],
                   tool_version: str, seed: int | None = None, order_mode: str | None = None,
                   kind: str = "experiment") -> int:
        with self.transaction() as db:
            cur = db.execute(
                "insert into runs(name, started_at, status, spec_toml, machine_json, "
                "tool_version, seed, order_mode, kind) "
                "values (?, ?, 'running', ?, ?, ?, ?, ?, ?)",
                (name, now(), spec_toml, json.dumps(machine), tool_version, seed, order_mode,
                 kind))
            assert cur.lastrowid is not None
            return cur.lastrowid

    def run(self, run_id: int | None = None) -> sqlite3.Row:
        if run_id is None:
            row = self.db.execute("select * from runs order by id desc limit 1").fetchone()
        else:
            row = self.db.execute("select * from runs where id = ?", (run_id,)).fetchone()
        if row is None:
            raise UserError(f"no run stored in {self.folder}", "start one with syncrep-lab run")
        return row  # type: ignore[no-any-return]

    def set_order_note(self, run_id: int, note: str) -> None:
        with self.transaction() as db:
            db.execute("update runs set order_note = ? where id = ?", (note, run_id))

    def set_run_status(self, run_id: int, status: str) -> None:
        with self.transaction() as db:
            db.execute("update runs set status = ?, finished_at = ? where id = ?",
                       (status, now() if status != "running" else None, run_id))

    # --- cells --------------------------------------------------------------------

    def ensure_cell(self, run_id: int, idx: int, key: str, label: str, axes: dict[str, Any],
                    params: dict[str, Any]) -> sqlite3.Row:
        with self.transaction() as db:
            db.execute(
                "insert or ignore into cells(run_id, idx, key, label, axes_json, params_json, "
                "status) values (?, ?, ?, ?, ?, ?, 'pending')",
                (run_id, idx, key, label, json.dumps(axes), json.dumps(params)))
            row = db.execute("select * from cells where run_id = ? and key = ?",
                             (run_id, key)).fetchone()
        return row  # type: ignore[no-any-return]

    def cells(self, run_id: int) -> list[sqlite3.Row]:
        return self.db.execute("select * from cells where run_id = ? order by idx",
                               (run_id,)).fetchall()

    def cell(self, cell_id: int) -> sqlite3.Row:
        return self.db.execute("select * from cells where id = ?",  # type: ignore[no-any-return]
                               (cell_id,)).fetchone()

    def update_cell(self, cell_id: int, **fields: Any) -> None:
        names = ", ".join(f"{k} = ?" for k in fields)
        with self.transaction() as db:
            db.execute(f"update cells set {names} where id = ?", (*fields.values(), cell_id))

    def repeats(self, cell_id: int) -> list[sqlite3.Row]:
        return self.db.execute("select * from repeats where cell_id = ? order by n",
                               (cell_id,)).fetchall()

    def add_repeat(self, cell_id: int, values: dict[str, Any],
                   samples: list[tuple[float, float, float | None, float | None, int]],
                   probe_rows: dict[str, list[tuple[Any, ...]]] | None = None) -> int:
        """One measured repeat, its per-second samples and its probes' rows, atomically."""
        cols = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        with self.transaction() as db:
            cur = db.execute(f"insert into repeats(cell_id, {cols}) values (?, {marks})",
                             (cell_id, *values.values()))
            repeat_id = cur.lastrowid
            assert repeat_id is not None
            db.executemany(
                "insert into samples(repeat_id, t_s, tps, latency_ms, stddev_ms, failed) "
                "values (?, ?, ?, ?, ?, ?)", [(repeat_id, *s) for s in samples])
            for table, rows in (probe_rows or {}).items():
                names = PROBE_TABLES[table]
                db.executemany(
                    f"insert into {table}(repeat_id, {', '.join(names)}) "
                    f"values (?, {', '.join('?' for _ in names)})",
                    [(repeat_id, *r) for r in rows])
            db.execute("update cells set repeats = (select count(*) from repeats "
                       "where cell_id = ? and probed = 0) where id = ?", (cell_id, cell_id))
        return repeat_id

    def add_cluster(self, run_id: int, cluster_key: str, version: str, bin_dir: str,
                    nodes: list[dict[str, Any]], settings: dict[str, Any]) -> None:
        with self.transaction() as db:
            db.execute(
                "insert into clusters(run_id, cluster_key, version, bin_dir, nodes_json, "
                "settings_json, created_at) values (?, ?, ?, ?, ?, ?, ?)",
                (run_id, cluster_key, version, bin_dir, json.dumps(nodes),
                 json.dumps(settings), now()))
