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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from syncrep_lab.errors import UserError
from syncrep_lab.store.records import StoredCell, StoredRepeat, StoredRun
from syncrep_lab.store.rows import PROBE_TABLES, ProbeRows, SampleRow
from syncrep_lab.store.schema import SCHEMA, SCHEMA_VERSION, upgrade

DB_NAME = "syncrep-lab.sqlite"


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


def _insert(table: str, fields: tuple[str, ...]) -> str:
    """The insert of one row of a repeat's ``table``: its repeat id, then ``fields``."""
    return (f"insert into {table}(repeat_id, {', '.join(fields)}) "
            f"values (?, {', '.join('?' for _ in fields)})")


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
        if version is not None and int(version[0]) in range(1, SCHEMA_VERSION) and not create:
            upgrade(self.db, int(version[0]))
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

    def run(self, run_id: int | None = None) -> StoredRun:
        """The run ``run_id``, or the last one stored."""
        if run_id is None:
            row = self.db.execute("select * from runs order by id desc limit 1").fetchone()
        else:
            row = self.db.execute("select * from runs where id = ?", (run_id,)).fetchone()
        if row is None:
            raise UserError(f"no run stored in {self.folder}", "start one with syncrep-lab run")
        return StoredRun.from_row(row)

    def set_order_note(self, run_id: int, note: str) -> None:
        with self.transaction() as db:
            db.execute("update runs set order_note = ? where id = ?", (note, run_id))

    def set_order_mode(self, run_id: int, mode: str) -> None:
        """The order the run's rounds really have (a duet the machine could not run is
        interleaved)."""
        with self.transaction() as db:
            db.execute("update runs set order_mode = ? where id = ?", (mode, run_id))

    def set_run_status(self, run_id: int, status: str) -> None:
        with self.transaction() as db:
            db.execute("update runs set status = ?, finished_at = ? where id = ?",
                       (status, now() if status != "running" else None, run_id))

    # --- cells --------------------------------------------------------------------

    def ensure_cell(self, run_id: int, idx: int, key: str, label: str, axes: dict[str, Any],
                    params: dict[str, Any]) -> StoredCell:
        """The run's cell ``key``, stored (pending) unless it already is."""
        with self.transaction() as db:
            db.execute(
                "insert or ignore into cells(run_id, idx, key, label, axes_json, params_json, "
                "status) values (?, ?, ?, ?, ?, ?, 'pending')",
                (run_id, idx, key, label, json.dumps(axes), json.dumps(params)))
            row = db.execute("select * from cells where run_id = ? and key = ?",
                             (run_id, key)).fetchone()
        return StoredCell.from_row(row)

    def cells(self, run_id: int) -> list[StoredCell]:
        """The run's cells, by index."""
        return [StoredCell.from_row(r) for r in self.db.execute(
            "select * from cells where run_id = ? order by idx", (run_id,))]

    def cell(self, cell_id: int) -> StoredCell:
        row = self.db.execute("select * from cells where id = ?", (cell_id,)).fetchone()
        if row is None:
            raise LookupError(f"no cell {cell_id} in the store of {self.folder}")
        return StoredCell.from_row(row)

    def update_cell(self, cell_id: int, **fields: Any) -> None:
        names = ", ".join(f"{k} = ?" for k in fields)
        with self.transaction() as db:
            db.execute(f"update cells set {names} where id = ?", (*fields.values(), cell_id))

    def repeats(self, cell_id: int) -> list[StoredRepeat]:
        """The cell's repeats (measured and probed), by number."""
        return [StoredRepeat.from_row(r) for r in self.db.execute(
            "select * from repeats where cell_id = ? order by n", (cell_id,))]

    def add_repeat(self, cell_id: int, values: dict[str, Any], samples: Sequence[SampleRow],
                   probe_rows: ProbeRows | None = None) -> int:
        """One measured repeat, its per-second samples and its probes' rows, atomically."""
        cols = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        with self.transaction() as db:
            cur = db.execute(f"insert into repeats(cell_id, {cols}) values (?, {marks})",
                             (cell_id, *values.values()))
            repeat_id = cur.lastrowid
            assert repeat_id is not None
            db.executemany(_insert("samples", SampleRow._fields),
                           [(repeat_id, *s) for s in samples])
            for table, rows in (probe_rows or ProbeRows()).tables():
                db.executemany(_insert(table, PROBE_TABLES[table]._fields),
                               [(repeat_id, *r) for r in rows])
            db.execute("update cells set repeats = (select count(*) from repeats "
                       "where cell_id = ? and probed = 0) where id = ?", (cell_id, cell_id))
        return repeat_id

    def add_cluster(self, run_id: int, cluster_key: str, version: str, bin_dir: str,
                    nodes: list[dict[str, Any]], settings: dict[str, Any],
                    build: dict[str, Any] | None = None) -> None:
        with self.transaction() as db:
            db.execute(
                "insert into clusters(run_id, cluster_key, version, bin_dir, nodes_json, "
                "settings_json, build_json, created_at) values (?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, cluster_key, version, bin_dir, json.dumps(nodes),
                 json.dumps(settings), json.dumps(build) if build else None, now()))
