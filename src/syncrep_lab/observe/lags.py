"""Lags that lie, and lags from positions.

Before PostgreSQL commit 883a95646a8 ("Fix stalled lag columns in pg_stat_replication
when replay LSN stops advancing", 2025-10-22, backpatched to every supported branch and
first released on 2025-11-13 in 18.1, 17.7, 16.11, 15.15, 14.20 and 13.23), the
walsender's LagTracker kept one cyclic buffer of (LSN, time) samples for its three read
heads: once the standby's replay position stopped advancing, the write head caught up
with the replay head, rewound onto its own last sample, and ``write_lag`` and
``flush_lag`` froze at their last value while the standby kept writing and flushing.
10, 11 and 12 ended before the fix and never got it.

So where the primary's minor version predates the fix *and* the window saw replay stall
(the standby's replay position did not move while its flush position did), the lag
columns of ``pg_stat_replication`` may be stale: observe says so and gives lags from
positions instead. Those come from the same statement that reads the view (one row per
walsender with the primary's insert position and the standby's write, flush and replay
positions, at the sampling rate): the time since the primary's WAL passed the standby's
position, interpolated between the two samples of the primary's position around it. It
is as fine as the sampling (0.1 s at 10 Hz, less with interpolation while WAL flows at a
steady rate) and it never freezes.
"""

from __future__ import annotations

import bisect
from array import array
from collections import deque
from dataclasses import dataclass
from typing import Any

from syncrep_lab.json_form import JSON
from syncrep_lab.probes import activity

FIX_COMMIT = "883a95646a8"
# the first minor release of each branch that carries the fix (2025-11-13)
FIXED_IN = {13: 23, 14: 20, 15: 15, 16: 11, 17: 7, 18: 1}
# positions kept: the lag from positions of a standby further behind is not known
HISTORY_SECONDS = 600.0
PARTS = ("write", "flush", "replay")
STALL_SECONDS = 1.0  # replay standing still this long, while the standby flushes


def lag_columns_may_freeze(version_num: int) -> bool:
    """Whether this server's ``write_lag``/``flush_lag`` freeze once replay stalls.

    >>> [lag_columns_may_freeze(v) for v in (90624, 100023, 120022, 130022, 130023)]
    [False, True, True, True, False]
    >>> [lag_columns_may_freeze(v) for v in (170006, 170007, 180000, 180001, 190000)]
    [True, False, True, False, False]
    """
    if version_num < 100000:
        return False  # no lag columns before 10: nothing to freeze
    major, minor = divmod(version_num, 10000)
    if major < 13:
        return True  # ended before the fix
    fixed = FIXED_IN.get(major)
    return fixed is not None and minor < fixed


def replication_sql(version_num: int) -> str:
    """The sampling's pg_stat_replication statement (probes/activity.py's: pid, standby,
    sync_state, the three lags in ms, the flush distance), with the primary's insert
    position and the standby's sent, write, flush and replay positions in bytes after
    them on 10 and later (9.6 has no lag columns: nothing for positions to stand in
    for, and the statement is the probe's)."""
    return activity.replication_sql(version_num, tuple(
        f"pg_wal_lsn_diff({c}, '0/0')::float8" for c in (
            "pg_current_wal_lsn()", "sent_lsn", "write_lsn", "flush_lsn", "replay_lsn")))


@dataclass(frozen=True)
class StandbyLags:
    """One standby over a window: its positions at the window's end (bytes), the lags
    from positions (seconds, means over the window's samples; None where not known),
    whether replay stalled, and whether the view's lag columns may be stale."""

    standby: str
    primary_lsn: float
    sent_lsn: float | None
    write_lsn: float | None
    flush_lsn: float | None
    replay_lsn: float | None
    lag_s: dict[str, float | None]  # write | flush | replay -> seconds, from positions
    replay_stalled: bool
    stale: bool  # the view's write_lag/flush_lag may have frozen (version and stall)
    reason: str | None  # why stale, or why a lag from positions is missing

    def to_json(self) -> dict[str, JSON]:
        return {"standby": self.standby, "primary_lsn": self.primary_lsn,
                "sent_lsn": self.sent_lsn, "write_lsn": self.write_lsn,
                "flush_lsn": self.flush_lsn, "replay_lsn": self.replay_lsn,
                "lag_from_positions_s": {k: v for k, v in self.lag_s.items()},
                "replay_stalled": self.replay_stalled, "lags_may_be_stale": self.stale,
                "reason": self.reason}


def _stalled(samples: list[tuple[float, tuple[float | None, ...], float]]) -> bool:
    """Whether replay stood still for the window's last STALL_SECONDS or more while the
    standby flushed WAL (a standby that replays what it flushes is not stalled)."""
    end = samples[-1]
    replay, flush = end[1][3], end[1][2]
    if replay is None or flush is None:
        return False
    since = end
    for sample in reversed(samples):
        if sample[1][3] != replay:
            break
        since = sample
    return (end[0] - since[0] >= STALL_SECONDS and since[1][2] is not None
            and flush > since[1][2])


class Positions:
    """The primary's insert position over time, kept for HISTORY_SECONDS, and each
    standby's positions, sampled with the view (``record``), kept until a window reads
    them (:meth:`window`)."""

    def __init__(self, hz: float = 10.0) -> None:
        # two flat arrays of doubles (16 bytes a sample, 96 KB for ten minutes at 10 Hz),
        # searched in place, used from ``start`` to ``end``. Made whole at once, twice the
        # bound (ten minutes and the trim's ten seconds at ``hz``): appended to one sample
        # at a time they were reallocated as they grew for ten minutes, each copy leaving
        # the last one's block in the heap (RSS that grew, docs/benchmarks.md); when the
        # end is reached, the samples kept move to the front.
        self.capacity = max(64, int(2 * (HISTORY_SECONDS + 10.0) * hz))
        self.times = array("d", bytes(8 * self.capacity))
        self.primary = array("d", bytes(8 * self.capacity))
        self.start = self.end = 0
        # (time, standby, (sent, write, flush, replay), the primary's position then)
        self.rows: deque[tuple[float, str, tuple[float | None, ...], float]] = deque()

    def __len__(self) -> int:
        return self.end - self.start

    def record(self, at: float, rows: list[tuple[Any, ...]]) -> None:
        """Rows of :func:`replication_sql` read at monotonic time ``at``."""
        rows = [r for r in rows if len(r) > 7 and r[7] is not None]
        if rows:
            lsn = float(rows[0][7])
            if self.end == self.start or lsn >= self.primary[self.end - 1]:
                if self.end == self.capacity:
                    self._move_to_front()
                self.times[self.end] = at
                self.primary[self.end] = lsn
                self.end += 1
        for r in rows:
            self.rows.append((at, str(r[1]), tuple(None if v is None else float(v)
                                                   for v in r[8:12]), float(r[7])))
        if self.end > self.start and self.times[self.start] < at - HISTORY_SECONDS - 10.0:
            self.start = bisect.bisect_left(self.times, at - HISTORY_SECONDS, self.start,
                                            self.end)

    def _move_to_front(self) -> None:
        n = self.end - self.start
        if n > self.capacity * 3 // 4:  # sampled faster than ``hz`` said: twice the room
            self.times.extend(array("d", bytes(8 * self.capacity)))
            self.primary.extend(array("d", bytes(8 * self.capacity)))
            self.capacity *= 2
            return
        self.times[:n] = self.times[self.start:self.end]  # as long: not reallocated
        self.primary[:n] = self.primary[self.start:self.end]
        self.start, self.end = 0, n

    def passed(self, lsn: float) -> float | None:
        """When the primary began writing the WAL after ``lsn``: between its last sample
        at or before ``lsn`` and its first past it, interpolated (WAL written at a steady
        pace between two samples); None when that was before the positions kept."""
        primary = self.primary
        i = bisect.bisect_right(primary, lsn, self.start, self.end)  # the first past lsn
        if i == self.start or i >= self.end:
            return None
        l0, l1 = primary[i - 1], primary[i]
        t0, t1 = self.times[i - 1], self.times[i]
        return t0 + (t1 - t0) * (lsn - l0) / (l1 - l0)

    def window(self, start: float, end: float, version_num: int) -> list[StandbyLags]:
        """Each standby seen between ``start`` and ``end`` (monotonic)."""
        found: dict[str, list[tuple[float, tuple[float | None, ...], float]]] = {}
        for at, standby, pos, primary in self.rows:
            if start <= at <= end:
                found.setdefault(standby, []).append((at, pos, primary))
        while self.rows and self.rows[0][0] <= end:  # each window reads its own once
            self.rows.popleft()
        freeze = lag_columns_may_freeze(version_num)
        primary_end = self.primary[self.end - 1] if len(self) else 0.0
        out = []
        for standby, samples in sorted(found.items()):
            lags: dict[str, float | None] = {}
            missing: list[str] = []
            for k, part in enumerate(PARTS, start=1):
                values = []
                for at, pos, primary in samples:
                    p = pos[k]
                    if p is None:
                        continue
                    if p >= primary:
                        values.append(0.0)  # caught up: nothing waits for it
                        continue
                    when = self.passed(p)
                    if when is not None:  # None: behind the positions kept
                        values.append(max(0.0, at - when))
                lags[part] = sum(values) / len(values) if values else None
                if not values and any(pos[k] is not None for _, pos, _ in samples):
                    missing.append(part)
            last = samples[-1][1]
            stalled = _stalled(samples)
            stale = freeze and stalled
            reason = None
            if stale:
                reason = (f"replay stalled and this PostgreSQL predates the fix of "
                          f"{FIX_COMMIT}: write_lag and flush_lag may be frozen")
            elif missing:
                reason = (f"{', '.join(missing)} position older than the primary's "
                          "positions kept (since the observer started, at most "
                          f"{HISTORY_SECONDS:.0f} s)")
            out.append(StandbyLags(standby, primary_end, last[0], last[1], last[2], last[3],
                                   lags, stalled, stale, reason))
        return out
