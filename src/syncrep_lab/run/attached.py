"""A cluster the user runs (``topology.attach``), left as it was found.

The tool provisions nothing there, but it does open sessions, create its workload's
tables and, with ``allow_alter``, change ``synchronous_standby_names``. Each of those
is bounded and undone:

- **Refused before anything starts** (:func:`check_serves`, called by
  ``preflight.check_machine`` and so by ``run --check``): a cell whose commits wait
  for a standby, on a primary that cannot acknowledge them
  (:mod:`syncrep_lab.pg.replication` says why).
- **Named**: every session of one invocation carries the application_name
  ``syncrep-lab TOKEN`` (pgbench's ``syncrep-lab TOKEN pgbench``), TOKEN random per
  invocation. That name, never a pid list or a user name, is what the tool ends:
  nobody else's session is touched, another syncrep-lab run's neither.
- **Recorded before it exists** (:class:`Visit`): a record in the state dir names the
  owner (pid and start time), the nodes (passwords masked), the tables and the
  setting to put back, written before the first session is opened.
- **Left** (:meth:`Visit.leave`: the end of the run, a failed cell, an interrupt):
  the run's sessions are cancelled, then those still there terminated (a backend
  waiting for a synchronous standby does not notice that pgbench is gone; a cancel
  or a terminate ends its wait, its commit stays durable locally without a standby's
  confirmation); then its tables are dropped with a lock timeout (a table that cannot
  be dropped is named with the statement to drop it); then the setting is put back;
  then the record goes. Every server's part is bounded in time (:data:`LEAVE_SECONDS`).
- **Cleaned after a crash**: ``syncrep-lab clean`` does the same for every record
  whose owner no longer runs (:func:`clean_visits`) and leaves a live run's alone.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from syncrep_lab import paths, procs
from syncrep_lab.errors import UserError
from syncrep_lab.pg import replication
from syncrep_lab.pg.admin import admin_connection, alter_system
from syncrep_lab.pg.conninfo import mask_conninfo, mask_text, without_masked_password
from syncrep_lab.plan.spec import Attach, Spec
from syncrep_lab.run.workload import ATTACHED_TABLES, Tables, table_is_ours

APP_PREFIX = "syncrep-lab"
# The whole cleanup of one server: the primary's (sessions, tables, the setting) and
# each standby's (sessions only). Connecting adds at most pg.admin.CONNECT_SECONDS.
LEAVE_SECONDS = {"primary": 15.0, "standby": 5.0}
CANCEL_GRACE_SECONDS = 1.0  # after the cancels, before the terminates
GONE_WAIT_SECONDS = 5.0  # for terminated backends to exit
CHECK_SECONDS = 10.0


def records_dir() -> Path:
    return paths.state_dir() / "attached"


def stamped(conninfo: str, application_name: str) -> str:
    """``conninfo`` with ``application_name`` set (a URI comes back as key=value pairs)."""
    return make_conninfo(conninfo, application_name=application_name)


# -- before anything starts -----------------------------------------------------------


def check_serves(spec: Spec) -> None:
    """Refuse a run whose cells wait for a standby that the attached primary cannot give
    (read-only: one short session, named ``syncrep-lab check``)."""
    from syncrep_lab.plan.matrix import expand

    attach = spec.topology.attach
    assert attach is not None
    waiting = [c for c in expand(spec).cells
               if c.synchronous_commit in replication.WAITING_LEVELS]
    if not waiting:
        return
    try:
        with admin_connection(stamped(attach.primary, f"{APP_PREFIX} check"),
                              seconds=CHECK_SECONDS, what="the attached primary") as conn:
            row = conn.execute("select current_setting('server_version_num')::int, "
                               "current_setting('synchronous_standby_names')").fetchone()
            seen = replication.walsenders(conn)
    except psycopg.Error as exc:
        raise UserError(f"cannot connect to the attached primary: {mask_text(str(exc).strip())}",
                        "check topology.attach.primary (and that the server runs)") from None
    assert row is not None
    version_num, current = int(row[0]), str(row[1])
    for cell in waiting:
        text = current if cell.sync is None else cell.sync
        problem = replication.shortfall(text, seen, version_num,
                                        proposed=cell.sync is not None)
        if problem is not None:
            cause, fix = problem
            raise UserError(f"the attached primary cannot serve cell {cell.label} "
                            f"(synchronous_commit = {cell.synchronous_commit}): {cause}; "
                            "nothing was started", fix)


# -- one invocation's presence on an attached cluster ---------------------------------------


@dataclass
class Ended:
    """The run's sessions that one server still held when the run left it."""

    node: str
    cancelled: int = 0
    terminated: int = 0
    in_syncrep: int = 0  # of them, waiting for a synchronous standby
    left: list[int] = field(default_factory=list)  # pids that would not go

    @property
    def count(self) -> int:
        return self.cancelled + self.terminated

    def describe(self) -> str:
        text = (f"ended {self.count} session{'s' if self.count != 1 else ''} of this run on "
                f"{self.node} ({self.cancelled} cancelled, {self.terminated} terminated)")
        if self.in_syncrep:
            text += (f"; {self.in_syncrep} of them were waiting for a synchronous standby: "
                     "their commits are durable on the primary but were never confirmed "
                     "by a standby")
        if self.left:
            text += f"; still there: pids {', '.join(map(str, self.left))}"
        return text


@dataclass
class LeaveReport:
    ended: list[Ended] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    sync_restored: str | None = None
    problems: list[str] = field(default_factory=list)  # each with what to do about it

    def lines(self) -> list[str]:
        out = [e.describe() for e in self.ended if e.count or e.left]
        if self.sync_restored is not None:
            out.append(f"synchronous_standby_names put back to {self.sync_restored!r}")
        return out + self.problems


class Visit:
    """One invocation's sessions, tables and setting changes on one attached cluster."""

    def __init__(self, attach: Attach, run_folder: Path, tables: Tables = ATTACHED_TABLES,
                 token: str | None = None) -> None:
        self.attach = attach
        self.run_folder = run_folder
        self.tables = tables
        self.token = token or secrets.token_hex(4)
        self.application_name = f"{APP_PREFIX} {self.token}"
        self.restore_sync: str | None = None
        self.path = records_dir() / f"{self.token}.json"

    # the record ------------------------------------------------------------------------

    def record(self) -> None:
        """Written before any session is opened, and again before a setting is changed."""
        data = {
            "format": 1, "owner": {"pid": os.getpid(), "start": procs.start_time(os.getpid())},
            "application_name": self.application_name, "run": str(self.run_folder),
            "nodes": {"primary": mask_conninfo(self.attach.primary),
                      **{k: mask_conninfo(v) for k, v in sorted(self.attach.standbys.items())}},
            "tables": [self.tables.insert, self.tables.lookup],
            "restore_sync": self.restore_sync,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, self.path)

    def will_alter_sync(self, original: str) -> None:
        """synchronous_standby_names is about to change: record what to put back."""
        if self.restore_sync is None:
            self.restore_sync = original
            self.record()

    def forget(self) -> None:
        self.path.unlink(missing_ok=True)

    # leaving -----------------------------------------------------------------------------

    def leave(self, current_sync: str | None = None) -> LeaveReport:
        """End this invocation's sessions on every node, drop its tables, put the setting
        back; the record goes when all of that worked. Never raises: what could not be
        done is in the report, with the way to finish it."""
        report = leave_nodes(self.attach.primary, self.attach.standbys,
                             self.application_name, self.tables,
                             self.restore_sync if self.restore_sync != current_sync else None)
        if not report.problems:
            self.forget()
            self.restore_sync = None
        else:
            report.problems.append(f"what is left is recorded in {self.path}; "
                                   "syncrep-lab clean finishes it once this run has ended")
        return report


def leave_nodes(primary: str, standbys: dict[str, str], application_name: str,
                tables: Tables, restore_sync: str | None) -> LeaveReport:
    report = LeaveReport()
    own = f"{APP_PREFIX} leave"
    try:
        with admin_connection(stamped(primary, own), seconds=LEAVE_SECONDS["primary"],
                              lock_timeout_s=3.0, what="the attached primary") as conn:
            report.ended.append(end_sessions(conn, "primary", application_name))
            _drop(conn, tables, report)
            if restore_sync is not None:
                alter_system(conn, {"synchronous_standby_names": restore_sync})
                report.sync_restored = restore_sync
    except psycopg.Error as exc:
        report.problems.append(
            f"could not finish on the attached primary ({mask_text(str(exc).strip())}): "
            f"sessions named '{application_name}…' and the tables "
            f"{tables.insert}, {tables.lookup} may be left"
            + (f", and synchronous_standby_names is not back at {restore_sync!r}"
               if restore_sync is not None and report.sync_restored is None else ""))
    for name, conninfo in sorted(standbys.items()):
        try:
            with admin_connection(stamped(conninfo, own), seconds=LEAVE_SECONDS["standby"],
                                  what=f"standby {name}") as conn:
                report.ended.append(end_sessions(conn, name, application_name))
        except psycopg.Error as exc:
            report.problems.append(f"could not end this run's sessions on standby {name} "
                                   f"({mask_text(str(exc).strip())})")
    return report


def end_sessions(conn: psycopg.Connection[Any], node: str, application_name: str) -> Ended:
    """Cancel every session whose application_name starts with ``application_name``, then
    terminate those still there; wait (bounded) until they are gone."""
    ended = Ended(node)
    pattern = application_name + "%"  # the token is hex: nothing in it is a LIKE wildcard
    rows = conn.execute("select pid, coalesce(wait_event, '') = 'SyncRep' "
                        "from pg_stat_activity where pid <> pg_backend_pid() "
                        "and application_name like %s", (pattern,)).fetchall()
    if not rows:
        return ended
    pids = [int(r[0]) for r in rows]
    ended.in_syncrep = sum(1 for r in rows if r[1])
    conn.execute("select pg_cancel_backend(pid) from unnest(%s::int[]) pid", (pids,))
    left = _wait_gone(conn, pids, CANCEL_GRACE_SECONDS)
    ended.cancelled = len(pids) - len(left)
    if left:
        conn.execute("select pg_terminate_backend(pid) from unnest(%s::int[]) pid", (left,))
        ended.left = _wait_gone(conn, left, GONE_WAIT_SECONDS)
        ended.terminated = len(left) - len(ended.left)
    return ended


def _wait_gone(conn: psycopg.Connection[Any], pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while True:
        left = [int(r[0]) for r in conn.execute(
            "select pid from pg_stat_activity where pid = any(%s::int[])", (pids,))]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def _drop(conn: psycopg.Connection[Any], tables: Tables, report: LeaveReport) -> None:
    for table in (tables.insert, tables.lookup):
        try:
            if not table_is_ours(conn, table):
                continue
            conn.execute(sql.SQL("drop table {}").format(sql.Identifier(table)))
            report.dropped.append(table)
        except UserError:
            continue  # a table of that name the tool did not make: never dropped
        except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled) as exc:
            report.problems.append(
                f"table {table} was not dropped ({str(exc).strip().splitlines()[0]}): "
                f"drop it with: DROP TABLE {table};")


# -- after a crash: syncrep-lab clean ---------------------------------------------------------


@dataclass
class CleanResult:
    record: Path
    run: str
    lines: list[str]
    done: bool  # the record is gone
    live: bool = False  # its run still goes: left alone


def visit_records() -> list[Path]:
    folder = records_dir()
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def clean_visits() -> list[CleanResult]:
    """Finish what killed runs left on attached clusters; a live run's record is spared.
    Passwords are not stored: libpq takes them from PGPASSWORD or ~/.pgpass."""
    results = []
    for path in visit_records():
        try:
            data = json.loads(path.read_text())
            owner = data["owner"]
            nodes = {k: without_masked_password(v) for k, v in data["nodes"].items()}
            name, tables = str(data["application_name"]), data["tables"]
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)  # not a record this version can act on
            continue
        run = str(data.get("run", "?"))
        if procs.is_running(int(owner["pid"]), owner.get("start")):
            results.append(CleanResult(path, run, [], False, live=True))
            continue
        primary = nodes.pop("primary")
        report = leave_nodes(primary, nodes, name, Tables(tables[0], tables[1], owned=True),
                             data.get("restore_sync"))
        lines = report.lines() + [f"dropped table {t}" for t in report.dropped]
        if not report.problems:
            path.unlink(missing_ok=True)
        else:
            lines.append("kept the record to try again: give the password in PGPASSWORD or "
                         "~/.pgpass, start the server if it is down, then syncrep-lab clean")
        results.append(CleanResult(path, run, lines, not report.problems))
    return results

