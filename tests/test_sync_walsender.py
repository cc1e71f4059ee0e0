"""The one rule that names the walsender a cell's commits wait for
(analysis/sync_walsender.py), step by step: each clue decides only where the stronger
ones do not name a single walsender. Where it is used on real servers' stores: the noise
(test_variance.py), the diagnosis and the model (test_diagnosis.py, test_model.py), ab's
A/A (test_ab.py: walsender:b of 1(b,c) whatever walsender:c does)."""

from __future__ import annotations

import dataclasses

from syncrep_lab.analysis.anatomy import Releases
from syncrep_lab.analysis.sync_walsender import (
    ANATOMY,
    CPU,
    FRAMES,
    KILLS,
    NAMES,
    SERVER,
    Clues,
    SyncWalsender,
    choose,
)

BOTH = ("walsender:b", "walsender:c")


def _freed(who: str, releases: int, waiters: float | None) -> Releases:
    return Releases(who, releases, waiters, None, None, None, None, None, None)


def test_each_clue_decides_only_where_the_stronger_ones_do_not() -> None:
    # c does the most of everything measured: only the server and the names outrank it
    measured = Clues(walsenders=BOTH, level="on", sync_names="ANY 1 (b, c)",
                     releases=[_freed("walsender:b", 90, 2.0), _freed("walsender:c", 100, 1.5)],
                     release_share={"walsender:b": 0.1, "walsender:c": 0.3},
                     kills={"walsender:b": 0.4, "walsender:c": 0.6},
                     cpu_us={"walsender:b": 5.0, "walsender:c": 9.0})
    assert choose(dataclasses.replace(measured, shown_sync={"b"})) == \
        SyncWalsender("walsender:b", SERVER)
    assert choose(dataclasses.replace(measured, sync_names="1(b,c)")) == \
        SyncWalsender("walsender:b", NAMES)
    # a quorum names no single one: what the walsenders did, strongest clue first
    assert choose(measured) == SyncWalsender("walsender:c", ANATOMY)
    # a potential standby's walsender enters the release on every reply and frees nobody
    idle = dataclasses.replace(measured, releases=[_freed("walsender:b", 90, 2.0),
                                                   _freed("walsender:c", 300, 0.0)])
    assert choose(idle) == SyncWalsender("walsender:b", ANATOMY)
    no_anatomy = dataclasses.replace(measured, releases=[])
    assert choose(no_anatomy) == SyncWalsender("walsender:c", FRAMES)
    assert choose(dataclasses.replace(no_anatomy, release_share={})) == \
        SyncWalsender("walsender:c", KILLS)
    assert choose(dataclasses.replace(no_anatomy, release_share={}, kills={})) == \
        SyncWalsender("walsender:c", CPU)
    assert choose(Clues(walsenders=BOTH, level="on", sync_names="ANY 1 (b, c)")) is None


def test_none_where_commits_do_not_wait_or_the_word_names_no_walsender_that_ran() -> None:
    for level in ("local", "off"):
        assert choose(Clues(walsenders=BOTH, level=level, shown_sync={"b"})) is None
    # FIRST 2: both are sync, neither alone; the names agree; then the measures
    two = Clues(walsenders=BOTH, level="remote_apply", shown_sync={"b", "c"},
                sync_names="FIRST 2 (b, c)", kills={"walsender:b": 0.2, "walsender:c": 0.5})
    assert choose(two) == SyncWalsender("walsender:c", KILLS)
    # the server showed d, whose walsender was not measured: the names decide
    gone = Clues(walsenders=BOTH, level="on", shown_sync={"d"}, sync_names="c, b")
    assert choose(gone) == SyncWalsender("walsender:c", NAMES)
