"""The repeat's recorder protocol (probes/recorder.py): started in order, stopped in
reverse, rows in the listed order, and on an error exactly the started ones aborted,
last first, each once."""

from __future__ import annotations

import pytest

from syncrep_lab.probes.recorder import Ending, Recording
from syncrep_lab.readers.timeline import Timeline
from syncrep_lab.store import ProbeRow, ProbeRows

ENDING = Ending(Timeline.of(0.0), lambda: 0)


class Logged:
    def __init__(self, name: str, log: list[str], *, fail: str = "") -> None:
        self.name, self.log, self.fail = name, log, fail

    def _act(self, what: str) -> None:
        self.log.append(f"{what} {self.name}")
        if what == self.fail:
            raise RuntimeError(f"{self.name} failed to {what}")

    def start(self) -> None:
        self._act("start")

    def stop(self, ending: Ending) -> ProbeRows:
        self._act("stop")
        return ProbeRows(probes=[ProbeRow(self.name, "ran", None)])

    def abort(self) -> None:
        self._act("abort")


def test_started_in_order_stopped_in_reverse_rows_in_listed_order() -> None:
    log: list[str] = []
    with Recording([Logged(n, log) for n in "abc"]) as recording:
        log.append("client")
        rows = recording.stop(ENDING)
    assert log == ["start a", "start b", "start c", "client", "stop c", "stop b", "stop a"]
    assert [r.probe for r in rows.probes] == ["a", "b", "c"]


def test_an_error_aborts_the_started_ones_last_first() -> None:
    log: list[str] = []
    with pytest.raises(KeyboardInterrupt), Recording([Logged(n, log) for n in "ab"]):
        raise KeyboardInterrupt  # what the tool's SIGTERM handler raises, as any error
    assert log == ["start a", "start b", "abort b", "abort a"]


def test_a_start_that_fails_aborts_only_those_before_it() -> None:
    log: list[str] = []
    recorders = [Logged("a", log), Logged("b", log, fail="start"), Logged("c", log)]
    with pytest.raises(RuntimeError, match="b failed to start"), Recording(recorders):
        log.append("client")
    assert log == ["start a", "start b", "abort a"]


def test_a_stop_that_fails_leaves_it_and_the_rest_aborted() -> None:
    log: list[str] = []
    recorders = [Logged("a", log), Logged("b", log, fail="stop"), Logged("c", log)]
    with pytest.raises(RuntimeError, match="b failed to stop"), \
            Recording(recorders) as recording:
        recording.stop(ENDING)
    assert log == ["start a", "start b", "start c", "stop c", "stop b", "abort b", "abort a"]


def test_an_abort_that_fails_does_not_keep_the_others_from_theirs() -> None:
    log: list[str] = []
    recorders = [Logged("a", log), Logged("b", log, fail="abort")]
    with pytest.raises(ValueError), Recording(recorders):
        raise ValueError("the client failed")
    assert log == ["start a", "start b", "abort b", "abort a"]
