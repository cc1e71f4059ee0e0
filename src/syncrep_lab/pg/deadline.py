"""A client-side time limit for the tool's own queries.

``connect_timeout`` bounds a connection's start-up, and ``statement_timeout`` is
enforced by the server, so neither helps when the server stops answering after
we connected: a postmaster or backend frozen by SIGSTOP (the ``pause`` fault, a
debugger, a host whose TCP peer lives on while PostgreSQL does not). psycopg
waits on the socket without a limit there. ``query_deadline`` shuts the
connection's socket down when the time is up, which wakes the blocked call with
an error; that error is raised as ``QueryTimeout``, a ``psycopg.OperationalError``,
so code that already copes with a lost connection copes with this too.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

import psycopg


class QueryTimeout(psycopg.OperationalError):
    """The server did not answer within the deadline; the connection is closed."""


@contextlib.contextmanager
def query_deadline(conn: psycopg.Connection[Any], seconds: float, what: str = "the server"
                   ) -> Iterator[None]:
    """Bound everything done on ``conn`` inside the block to ``seconds`` of wall time.

    After the deadline the connection is unusable (its socket is shut down);
    within it nothing changes.
    """
    fired = threading.Event()
    lock = threading.Lock()
    done = False

    def fire() -> None:
        with lock:
            if done:
                return
            fired.set()
            # shutdown() acts on the socket itself, which the dup'ed fd shares
            with (contextlib.suppress(OSError, psycopg.Error),
                  socket.socket(fileno=os.dup(conn.fileno())) as sock):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    except psycopg.OperationalError as exc:
        if fired.is_set():
            # Closed here, so that leaving `with psycopg.connect()` does not try a
            # rollback on the dead socket (psycopg would log a warning about it).
            with contextlib.suppress(psycopg.Error):
                conn.close()
            raise QueryTimeout(f"{what} did not answer within {seconds:g} s") from exc
        raise
    finally:
        with lock:
            done = True
        timer.cancel()
    # A block that finished just as the deadline passed keeps its results; only the
    # connection is then unusable, which its next use reports as a lost connection.
