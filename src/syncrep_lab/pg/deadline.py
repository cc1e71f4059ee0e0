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
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg


class QueryTimeout(psycopg.OperationalError):
    """The server did not answer within the deadline; the connection is closed."""


class _Watchdog:
    """One thread for every deadline of the process, started with the first one.

    A ``threading.Timer`` per query started and ended a thread for every statement:
    ``observe`` runs about 30 a second, and each new thread may be given a malloc arena
    of its own when it overlaps others (the scrapes' threads of ``observe --serve``), which
    stays in RSS for good: memory that grew in steps over a long observation."""

    def __init__(self) -> None:
        self.wake = threading.Condition()
        # (when, order, the deadline's fire, [cancelled]) by when
        self.due: list[tuple[float, int, Callable[[], None], list[bool]]] = []
        self.order = itertools.count()
        self.thread: threading.Thread | None = None

    def add(self, seconds: float, fire: Callable[[], None]) -> list[bool]:
        """Call ``fire`` in ``seconds`` unless the flag returned is set first."""
        cancelled = [False]
        with self.wake:
            heapq.heappush(self.due, (time.monotonic() + seconds, next(self.order), fire,
                                      cancelled))
            if self.thread is None or not self.thread.is_alive():  # the first, or forked
                self.thread = threading.Thread(target=self._run, name="query-deadlines",
                                               daemon=True)
                self.thread.start()
            self.wake.notify()
        return cancelled

    def cancel(self, cancelled: list[bool]) -> None:
        with self.wake:
            cancelled[0] = True
            while self.due and self.due[0][3][0]:  # most end in the order they began
                heapq.heappop(self.due)

    def _run(self) -> None:
        while True:
            with self.wake:
                while self.due and self.due[0][3][0]:
                    heapq.heappop(self.due)
                if not self.due:
                    self.wake.wait()
                    continue
                when, _, fire, _ = self.due[0]
                if when > time.monotonic():
                    self.wake.wait(when - time.monotonic())
                    continue
                heapq.heappop(self.due)
            fire()  # outside the lock: it takes the deadline's own


_watchdog = _Watchdog()


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

    timer = _watchdog.add(seconds, fire)
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
        _watchdog.cancel(timer)
    # A block that finished just as the deadline passed keeps its results; only the
    # connection is then unusable, which its next use reports as a lost connection.
