"""The tool's own connection to a server, always bounded.

Every statement syncrep-lab runs for itself (creating and dropping the workload's
tables, reading settings, a reload, ending its own sessions) goes through
:func:`admin_connection`, which bounds it three ways:

- ``connect_timeout`` for the start-up;
- ``lock_timeout`` and ``statement_timeout``, enforced by the server: a ``DROP TABLE``
  queued behind a backend stuck in the ``SyncRep`` wait gives up instead of holding its
  place in the lock queue for ever (which would also block every later query on the
  table);
- the client-side deadline of :mod:`syncrep_lab.pg.deadline`, for a server that stops
  answering altogether.

A session kept open beside a run (the fault driver's) is :func:`admin_session`: the same
server-side bounds, and a deadline on each use instead of one on the whole block.

The session commits with ``synchronous_commit = local``: the tool's own catalogue
changes must never wait for a standby that stopped confirming.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import pq, sql
from psycopg.conninfo import conninfo_to_dict

from syncrep_lab.pg.deadline import query_deadline

CONNECT_SECONDS = 5  # the most a connection's start-up may take


@contextlib.contextmanager
def admin_connection(conninfo: str, *, seconds: float = 30.0, lock_timeout_s: float = 5.0,
                     statement_timeout_s: float | None = None, what: str = "the server"
                     ) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection whose every statement ends within its bounds, and the
    whole block within ``seconds`` (then :class:`~syncrep_lab.pg.deadline.QueryTimeout`).

    ``statement_timeout_s`` defaults to ``seconds``; ``lock_timeout_s`` is how long a
    statement may queue for a lock before it fails (``LockNotAvailable``)."""
    statement_s = seconds if statement_timeout_s is None else statement_timeout_s
    # libpq reads connect_timeout in whole seconds, and treats less than 2 as 2
    connect_s = max(2, min(CONNECT_SECONDS, math.ceil(seconds)))
    with (admin_session(conninfo, lock_timeout_s=lock_timeout_s,
                        statement_timeout_s=statement_s, connect_s=connect_s) as conn,
          query_deadline(conn, seconds, what)):
        yield conn


@contextlib.contextmanager
def admin_session(conninfo: str, *, lock_timeout_s: float = 5.0,
                  statement_timeout_s: float = 30.0, connect_s: int = CONNECT_SECONDS
                  ) -> Iterator[psycopg.Connection[Any]]:
    """The connection of :func:`admin_connection` without its deadline on the whole
    block, for a session kept open as long as something else runs (the fault driver's,
    beside pgbench): the server bounds each statement, and the caller bounds each use
    of the connection with :func:`~syncrep_lab.pg.deadline.query_deadline`."""
    # the conninfo's own options (a search_path, say) are kept; ours come after and win
    own = conninfo_to_dict(conninfo).get("options") or ""
    options = (f"{own} -c synchronous_commit=local -c lock_timeout={_ms(lock_timeout_s)} "
               f"-c statement_timeout={_ms(statement_timeout_s)}").strip()
    # client_encoding: on a SQL_ASCII database psycopg would return text as bytes
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=connect_s,
                         options=options, client_encoding="UTF8") as conn:
        try:
            yield conn
        except BaseException as exc:
            if not isinstance(exc, psycopg.Error):
                _abandon(conn)
            raise


def _abandon(conn: psycopg.Connection[Any]) -> None:
    """Left mid-statement (a signal, a bug): cancel the statement on the server, where it
    would otherwise go on (a lock wait does not notice its client is gone), and close
    the connection, so that leaving it tries no rollback on a busy socket."""
    with contextlib.suppress(Exception):
        if conn.pgconn.transaction_status == pq.TransactionStatus.ACTIVE:
            conn.cancel()
    with contextlib.suppress(Exception):
        conn.close()


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def alter_system(conn: psycopg.Connection[Any], changes: dict[str, str | None]) -> None:
    """``ALTER SYSTEM SET`` each name to its value (None: ``RESET`` to the default), then
    one reload, on a connection of :func:`admin_connection`."""
    for name, value in changes.items():
        if value is None:
            conn.execute(sql.SQL("alter system reset {}").format(sql.Identifier(name)))
        else:
            conn.execute(sql.SQL("alter system set {} = {}").format(sql.Identifier(name),
                                                                   sql.Literal(value)))
    conn.execute("select pg_reload_conf()")
