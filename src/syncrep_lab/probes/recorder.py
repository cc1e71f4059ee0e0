"""What is recorded during one repeat, behind one protocol.

Every recorder of a repeat (the probes here and on SSH hosts, the untraced CPU, the
hosts' clocks and CPUs, the placement read-back, the fault run, and whatever comes
next) is driven the same way:

- ``start()`` just before the client starts (in the order the repeat lists them);
- ``stop(ending) -> ProbeRows`` after the client has finished, in the reverse order:
  the store's rows of what it found, its times moved onto the repeat's timeline;
- ``abort()`` when the repeat fails or the tool is interrupted: stop at once, keep
  nothing, put back what it changed. Only a recorder that was started and not stopped
  is aborted, and never twice.

A recorder that must act when the client starts, not before (the fault driver counts
its events from there; the placement is read while the clients run), is handed the
repeat's :class:`Client` when it is made and waits on it.

:class:`Recording` holds the started recorders on a stack: leaving its ``with`` block,
by an error or an interrupt, aborts exactly those started and not yet stopped, last
started first, and an abort that fails does not keep the others from theirs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

from syncrep_lab.readers.timeline import Timeline
from syncrep_lab.store import ProbeRow, ProbeRows

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Ending:
    """What a recorder is told when it stops: the repeat's one timeline (seconds since
    the client started), and how many rows the client's acknowledged transactions
    wrote (read from its logs the first time it is asked)."""

    timeline: Timeline
    acknowledged_rows: Callable[[], int]


@dataclass
class Client:
    """The repeat's client processes, for recorders that act while they run: ``started``
    is set the moment every client has been started, and ``running`` holds them."""

    started: threading.Event = field(default_factory=threading.Event)
    running: list[Any] = field(default_factory=list)

    def begin(self, running: list[Any]) -> None:
        self.running = list(running)
        self.started.set()


class Recorder(Protocol):
    def start(self) -> None: ...

    def stop(self, ending: Ending) -> ProbeRows: ...

    def abort(self) -> None: ...


class Skipped:
    """A probe that will not run in this repeat, and why: a recorder that records only
    its ``probes`` row."""

    def __init__(self, probe: str, reason: str) -> None:
        self.probe, self.reason = probe, reason

    def start(self) -> None:
        pass

    def stop(self, ending: Ending) -> ProbeRows:
        return ProbeRows(probes=[ProbeRow(self.probe, "skipped", self.reason)])

    def abort(self) -> None:
        pass


class Recording:
    """The recorders of one repeat, started in order when the ``with`` block is entered
    and stopped in reverse order by :meth:`stop`; whatever is still running when the
    block is left is aborted, in reverse order."""

    def __init__(self, recorders: Sequence[Recorder]) -> None:
        self.recorders = recorders
        self.running: list[Recorder] = []

    def __enter__(self) -> Recording:
        try:
            for recorder in self.recorders:
                recorder.start()
                self.running.append(recorder)
        except BaseException:
            self._abort()
            raise
        return self

    def stop(self, ending: Ending) -> ProbeRows:
        """Every running recorder stopped, the last started first; their rows together,
        in the order the recorders were listed. A recorder whose stop fails is aborted
        with the others when the block is left."""
        found: dict[int, ProbeRows] = {}
        while self.running:
            recorder = self.running[-1]
            found[id(recorder)] = recorder.stop(ending)
            self.running.pop()
        rows = ProbeRows()
        for recorder in self.recorders:
            if id(recorder) in found:
                rows.add(found[id(recorder)])
        return rows

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._abort()

    def _abort(self) -> None:
        while self.running:
            recorder = self.running.pop()
            try:
                recorder.abort()
            except Exception:  # the others still need theirs; the first error stands
                log.exception("aborting %s failed", type(recorder).__name__)
