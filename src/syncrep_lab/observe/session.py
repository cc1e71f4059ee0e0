"""The observer's session on a server it does not own: read-only and bounded by
construction, so that pointing ``observe`` at production cannot hurt it.

- **Read-only**: every transaction of the session is ``read only``
  (``default_transaction_read_only``), so even a bug here could not write; nothing is
  created, no setting is changed (not even with ``SET``: the session's settings come in
  the start-up packet's ``options``).
- **Bounded on the server**: ``statement_timeout`` and ``lock_timeout`` end a statement
  that would run or queue long; ``idle_in_transaction_session_timeout`` ends the session
  if the tool froze inside a transaction.
- **Bounded on the client**: every query runs under :func:`~syncrep_lab.pg.deadline.
  query_deadline`, so a server that stops answering ends the observation instead of
  hanging it.
- **Named**: ``application_name = 'syncrep-lab observe'``, so a DBA sees who it is.
- **Least privilege**: reading other sessions' wait events and ``pg_stat_replication``
  needs ``pg_monitor`` (10+) or a superuser; :func:`open_session` refuses a role that
  has neither, with the grant to ask for, before any sampling starts.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from syncrep_lab.errors import UserError
from syncrep_lab.pg.conninfo import mask_conninfo
from syncrep_lab.pg.deadline import query_deadline

APPLICATION_NAME = "syncrep-lab observe"
STATEMENT_TIMEOUT_MS = 2000
LOCK_TIMEOUT_MS = 500
IDLE_IN_TRANSACTION_MS = 10_000
QUERY_SECONDS = 5.0  # the client-side bound on any one query
CONNECT_SECONDS = 5


class ServerGone(Exception):
    """The server stopped answering mid-observation (stopped, restarted, frozen)."""


@dataclass
class ObserverSession:
    """One read-only connection to one node, and the count of statements it ran (each is
    a transaction of its own: pg_stat_database counts them, and the observer takes them
    back out of the commit rate)."""

    node: str  # "primary", or the standby's name
    conninfo: str
    conn: psycopg.Connection[tuple[Any, ...]]
    version_num: int
    backend_pid: int
    user: str
    queries: int = 0

    def query(self, sql: str, params: tuple[Any, ...] | None = None) -> list[tuple[Any, ...]]:
        """Rows of one statement; :class:`ServerGone` when the server does not answer."""
        try:
            with query_deadline(self.conn, QUERY_SECONDS, f"{self.node}'s server"):
                rows = self.conn.execute(sql, params, prepare=True).fetchall()
        except psycopg.OperationalError as exc:
            raise ServerGone(f"{self.node}: {str(exc).strip()}") from exc
        self.queries += 1
        return rows

    def one(self, sql: str, params: tuple[Any, ...] | None = None) -> tuple[Any, ...]:
        rows = self.query(sql, params)
        if not rows:
            raise ServerGone(f"{self.node}: no row from {sql.split()[0]}")
        return rows[0]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


def session_options(conninfo: str) -> str:
    """The start-up options: the conninfo's own first, then ours, which win."""
    own = conninfo_to_dict(conninfo).get("options") or ""
    return (f"{own} -c default_transaction_read_only=on "
            f"-c statement_timeout={STATEMENT_TIMEOUT_MS} -c lock_timeout={LOCK_TIMEOUT_MS} "
            f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}").strip()


def open_session(node: str, conninfo: str, *, primary: bool) -> ObserverSession:
    """Connect to ``node`` and check, before anything is sampled, that this role may see
    what the observation needs and that the server is what it was said to be."""
    try:
        conn: psycopg.Connection[tuple[Any, ...]] = psycopg.connect(
            conninfo, autocommit=True, connect_timeout=CONNECT_SECONDS,
            options=session_options(conninfo), application_name=APPLICATION_NAME,
            client_encoding="UTF8")
    except psycopg.Error as exc:
        raise UserError(f"cannot connect to {node} ({mask_conninfo(conninfo)}): "
                        f"{str(exc).strip()}",
                        "check the connection string (host, port, user, dbname); a password "
                        "is read from PGPASSWORD or ~/.pgpass") from None
    session = ObserverSession(node, conninfo, conn, 0, 0, "")
    try:
        version_num, pid, user, superuser, recovery = session.one(
            "select current_setting('server_version_num')::int, pg_backend_pid(), "
            "current_user::text, (select rolsuper from pg_roles where rolname = current_user),"
            " pg_is_in_recovery()")
        session.version_num, session.backend_pid, session.user = version_num, pid, user
        _check_privilege(session, bool(superuser))
        if primary and recovery:
            raise UserError(f"{mask_conninfo(conninfo)} is a standby (in recovery), not a "
                            "primary", "give the primary's connection string first, and each "
                            "standby's with --standby NAME=CONNINFO")
        if not primary and not recovery:
            raise UserError(f"--standby {node}: {mask_conninfo(conninfo)} is not in recovery: "
                            "it is a primary, not a standby",
                            "give the standby's own connection string")
    except ServerGone as exc:
        session.close()
        raise UserError(f"{node} stopped answering during the checks: {exc}",
                        "check that the server is up and try again") from None
    except BaseException:
        session.close()
        raise
    return session


def _check_privilege(session: ObserverSession, superuser: bool) -> None:
    if superuser:
        return
    if session.version_num < 100000:
        raise UserError(
            f"role {session.user} is not a superuser, and on 9.6 only a superuser sees "
            "other sessions' wait events and pg_stat_replication's positions (9.6 has no "
            "pg_monitor role)", "connect as a superuser; observe only reads")
    (member,) = session.one("select pg_has_role(current_user, 'pg_monitor', 'member')")
    if not member:
        raise UserError(
            f"role {session.user} may not read other sessions' wait events and "
            f"pg_stat_replication on {session.node}: it is neither a superuser nor a member "
            "of pg_monitor",
            f"ask for the monitoring role (it grants reading, nothing else): "
            f"grant pg_monitor to {session.user};")
