"""Each cell's noise split into the seconds inside a repeat, the state at a repeat's
start and the drift across rounds (:mod:`syncrep_lab.stats.variance`), read from the
store: the measured repeats in the order they ran, each with its per-second samples.
``results --json`` carries it per cell (``noise``), ``results`` and the run's end say
where it sits, the report's Method gives the table and what it means for the budget.

One candidate for what sets a repeat's state is measured beside it: how long the sync
walsender waited for a core in each measured repeat (its run delay, from the process
tracker's /proc/PID/schedstat) as a share of the repeat's seconds, and how much of the
spread of the repeats' TPS that share explains (``noise.walsender``, a sentence where
it explains more than chance would).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

from syncrep_lab import format as fmt
from syncrep_lab.analysis.sync_walsender import choose, stored_clues
from syncrep_lab.json_form import JSON
from syncrep_lab.stats.intervals import Correlation, MeanCI, mean_ci, pearson
from syncrep_lab.stats.variance import (
    NoiseSplit,
    Repeat,
    RepeatLength,
    noise_split,
    pooled_split,
    repeat_length,
)
from syncrep_lab.store import Store, StoredCell, StoredRepeat, queries

# What dominates, in words (a repeat's noise "sits" there), and what it means for a budget.
WHERE = {"within": "the per-second noise inside a repeat",
         "between": "the state at a repeat's start",
         "drift": "the drift across rounds"}
BUDGET = {
    "within": "longer repeats: the seconds average out inside a repeat, and every repeat "
              "costs a reset and a catch-up that a longer one spends measuring",
    "between": "more, shorter repeats: only a new repeat draws a new start state, so "
               "the interval narrows with the number of repeats, hardly with their length",
    "drift": "more rounds, interleaved: a ratio within a round cancels the drift a cell "
             "and its baseline share; longer repeats do not",
}


# A gap longer than this between two repeats is a run stopped and resumed, not a repeat's
# cost.
RESUMED_GAP_S = 600.0


def repeat_overhead(store: Store, run_id: int) -> float | None:
    """What a repeat costs beside its measured seconds: the reset before it, starting and
    stopping what records it, storing it. The median gap from one repeat's end
    (``started_at``, taken after the reset, plus ``duration_s``) to the next one's start
    over the run's repeats in the order they ran; a gap after a probed repeat (its probes
    fold and store for seconds) or of a resume left out. None with no such gap."""
    repeats = sorted((r for c in store.cells(run_id) for r in store.repeats(c.id)),
                     key=lambda r: str(r.started_at))
    gaps = []
    for a, b in itertools.pairwise(repeats):
        if a.probed:
            continue
        gap = (datetime.fromisoformat(str(b.started_at))
               - datetime.fromisoformat(str(a.started_at))).total_seconds() - a.duration_s
        if 0 <= gap <= RESUMED_GAP_S:
            gaps.append(gap)
    return float(statistics.median(gaps)) if gaps else None


def measured_repeats(store: Store, cell: StoredCell) -> list[StoredRepeat]:
    """A cell's measured repeats (probed ones left out, as from every figure), in the
    order they ran."""
    return sorted((r for r in store.repeats(cell.id) if not r.probed),
                  key=lambda r: (str(r.started_at), r.n))


def cell_split(store: Store, cell: StoredCell, overhead_s: float | None = None
               ) -> NoiseSplit | None:
    """The split of a cell's measured repeats (:func:`measured_repeats`), with the run's
    cost of a repeat (:func:`repeat_overhead`); None without any."""
    measured = measured_repeats(store, cell)
    if not measured:
        return None
    split = noise_split([Repeat(float(r.tps), [float(s.tps) for s in
                                               queries.samples_of(store, r.id)])
                         for r in measured])
    return dataclasses.replace(split, overhead_s=overhead_s)


# Below this many measured repeats no correlation is worked out: with 3, r = ±0.997 is
# needed for p < 0.05, and one odd repeat decides it.
MIN_CORRELATED = 4
# The p under which the walsender's share is said to explain the spread.
ALPHA = 0.05


@dataclass(frozen=True)
class WalsenderNoise:
    """The sync walsender's wait for a core over a cell's measured repeats: its run
    delay as a share of each repeat's seconds, its CPU migrations per second, and
    Pearson's r of the repeats' log TPS against that share (None under
    MIN_CORRELATED repeats, or when either does not vary)."""

    role: str  # walsender:NAME
    chosen_by: str  # what told (analysis/sync_walsender.py: pg_stat_replication, ...)
    shares: tuple[float, ...]  # per measured repeat with the figure, in the order they ran
    share: MeanCI
    migrations_per_s: float | None  # mean over those repeats; None: not read here
    correlation: Correlation | None

    def to_json(self) -> dict[str, JSON]:
        """``noise.walsender``: the role, how it was chosen, its run delay's share of
        each repeat (mean, its 95 % interval, per repeat), migrations per second, and r,
        r², p of the repeats' log TPS against that share."""
        c, share = self.correlation, self.share
        return {"role": self.role, "chosen_by": self.chosen_by, "repeats": len(self.shares),
                "run_delay_share": {"mean": share.mean, "low": share.low,
                                    "high": share.high, "per_repeat": list(self.shares)},
                "migrations_per_s": self.migrations_per_s,
                "r": c.r if c else None, "r2": c.r2 if c else None,
                "p": c.p_value if c else None}

    @property
    def explains_spread(self) -> bool:
        """Whether the share explains part of the repeats' spread (p < ALPHA)."""
        return self.correlation is not None and self.correlation.p_value < ALPHA


def cell_walsender(store: Store, cell: StoredCell) -> WalsenderNoise | None:
    """The sync walsender's run delay over the cell's measured repeats (probed ones left
    out: what traces them makes them wait), and its correlation with their TPS; None
    without a sync walsender (:func:`sync_walsender`) or without its run delay."""
    measured = measured_repeats(store, cell)
    if not measured:
        return None
    senders = [(repeat_id, row) for repeat_id, row in
               queries.proc_costs_of(store, [r.id for r in measured])
               if row.node == "primary" and row.role.startswith("walsender:")]
    # the rule's last clue: over the same repeats, the CPU ranks as the CPU per commit
    cpu: dict[str, float] = defaultdict(float)
    for _, row in senders:
        cpu[row.role] += row.user_ms + row.system_ms
    clues = dataclasses.replace(stored_clues(store, cell, cpu), cpu_us=cpu)
    chosen = choose(clues)
    if chosen is None:
        return None
    role, how = chosen.role, chosen.told_by
    rows = {repeat_id: row for repeat_id, row in senders if row.role == role}
    timed: list[tuple[StoredRepeat, float, int | None]] = [
        (r, float(rows[r.id].run_delay_ms or 0.0), rows[r.id].migrations)
        for r in measured if r.id in rows and rows[r.id].run_delay_ms is not None
        and r.duration_s > 0 and r.tps > 0]
    if not timed:
        return None
    shares = [delay / 1e3 / r.duration_s for r, delay, _ in timed]
    moves = [m / r.duration_s for r, _, m in timed if m is not None]
    correlation = (pearson([math.log(r.tps) for r, _, _ in timed], shares)
                   if len(timed) >= MIN_CORRELATED else None)
    return WalsenderNoise(role, how, tuple(shares), mean_ci(shares),
                          statistics.fmean(moves) if len(moves) == len(timed) else None,
                          correlation)


@dataclass(frozen=True)
class CellNoise:
    """A cell's noise (a results row's ``noise``): the split of its measured repeats and
    its sync walsender's wait for a core (None: no sync walsender, or no run delay)."""

    split: NoiseSplit
    walsender: WalsenderNoise | None

    def to_json(self) -> dict[str, JSON]:
        """Each part as a fraction of the cell's mean (the relative sd of one repeat's
        mean), what was used, what dominates, the repeat length that would narrow the
        interval fastest (``best_seconds``, None: as long as the budget allows;
        ``time_at_best``: the time it needs for the same interval, over the time the
        repeats run need), and the sync walsender's (``walsender``)."""
        split = self.split
        length = repeat_length(split)
        return {"within": split.within, "between": split.between, "drift": split.drift,
                "repeats": split.repeats, "seconds": split.seconds,
                "seconds_per_repeat": split.seconds_per_repeat, "total": split.total,
                "short_term": split.short_term, "lag1": split.lag1,
                "lag1_raw": split.lag1_raw, "dominant": split.dominant,
                "between_p": split.between_p, "drift_p": split.drift_p, "note": split.note,
                "repeat_overhead_s": split.overhead_s,
                "best_seconds": length.best_s if length else None,
                "time_at_best": length.time_ratio if length else None,
                "walsender": self.walsender.to_json() if self.walsender else None}


def cell_noise(store: Store, cell: StoredCell, overhead_s: float | None = None
               ) -> CellNoise | None:
    """A cell's noise: :func:`cell_split` and :func:`cell_walsender`; None without a
    measured repeat."""
    split = cell_split(store, cell, overhead_s)
    return None if split is None else CellNoise(split, cell_walsender(store, cell))


# The repeat length is advised only where it saves this much of the time or more.
WORTH_SAYING = 0.8


def length_advice(split: NoiseSplit) -> str | None:
    """'repeats of 2 s would reach the same interval in 0.62 of the time (a repeat costs
    4.1 s beside its 10 measured)', where another length saves a fifth of the time or
    more; None otherwise."""
    length: RepeatLength | None = repeat_length(split)
    if length is None or length.time_ratio > WORTH_SAYING:
        return None
    cost = (f"a repeat costs {length.overhead_s:.1f} s beside its {length.now_s:.0f} "
            "measured")
    if length.best_s is None:
        return (f"longer repeats would reach the same interval in as little as "
                f"{length.time_ratio:.2f} of the time ({cost}; the start state adds "
                "nothing measurable)")
    return (f"repeats of {length.best_s:.0f} s would reach the same interval in "
            f"{length.time_ratio:.2f} of the time ({cost})")


def dominant_words(split: NoiseSplit) -> str | None:
    """'the state at a repeat's start dominates' (half of the variance or more) or
    '... is the largest part', and when the repeats cannot tell that part from none
    (p of 5 % or more), '... though 6 repeats cannot tell it from none'."""
    if split.dominant is None:
        return None
    share = split.dominant_share or 0.0
    words = f"{WHERE[split.dominant]} {'dominates' if share >= 0.5 else 'is the largest part'}"
    if not split.dominant_told:
        words += f", though {split.repeats} repeats cannot tell it from none"
    return words


class NoisyRow(Protocol):
    """What the lines below read of a row (analysis/cells.py's CellRow, which reads this
    module's noise into its rows: a protocol, not an import back)."""

    @property
    def cell(self) -> StoredCell: ...
    @property
    def noise(self) -> CellNoise | None: ...


Row = TypeVar("Row", bound=NoisyRow)


def noise_lines(rows: Sequence[NoisyRow]) -> list[tuple[str, NoiseSplit]]:
    """Where the run's noise sits, as (whose, split): one for the run when its cells
    agree (their parts pooled: the same part dominates in each, or none can be split),
    else one per cell."""
    cells = [(r, r.noise.split) for r in rows
             if r.cell.status == "done" and r.noise and r.noise.split.repeats]
    if not cells:
        return []
    if len(cells) > 1 and len({s.dominant for _, s in cells}) == 1:
        pooled = pooled_split([s for _, s in cells])
        if pooled is not None:
            return [(f"{len(cells)} cells", pooled)]
    return [(f"cell {r.cell.idx}", s) for r, s in cells]


def walsender_words(walsender: WalsenderNoise | None) -> str | None:
    """'the sync walsender (walsender:b) waited for a core 12 % of a repeat on average,
    from 8.0 to 17 % over the 12 repeats; that explains 40 % of the spread of the
    repeats' TPS (r = −0.63, p = 0.01: more waiting went with fewer commits)', from
    ``noise.walsender``, where p < ALPHA; None otherwise (the JSON keeps the figures)."""
    if walsender is None or walsender.correlation is None or not walsender.explains_spread:
        return None
    each = walsender.shares
    r, p = walsender.correlation.r, walsender.correlation.p_value
    told = "p < 0.001" if p < 0.001 else f"p = {p:.2g}"
    went = "fewer" if r < 0 else "more"
    return (f"the sync walsender ({walsender.role}) waited for a core "
            f"{fmt.share(walsender.share.mean)} % of a repeat on average, from "
            f"{fmt.share(min(each))} to "
            f"{fmt.share(max(each))} % over the {len(each)} repeats; that explains "
            f"{100 * walsender.correlation.r2:.0f} % of the spread of the repeats' TPS "
            f"(r = {r:.2f}, {told}: more waiting went with {went} "
            f"commits)").replace("r = -", "r = −")


def walsender_lines(rows: Sequence[Row]) -> list[tuple[Row, str]]:
    """(row, words) of each finished cell whose sync walsender's wait for a core explains
    part of its repeats' spread (:func:`walsender_words`)."""
    return [(r, words) for r in rows if r.cell.status == "done" and r.noise
            and (words := walsender_words(r.noise.walsender))]


def budget_sentences(rows: Sequence[NoisyRow]) -> list[str]:
    """What dominates the noise and what that means for the budget: a sentence per
    line of :func:`noise_lines`, then one per cell whose sync walsender's wait for a
    core explains part of the spread (:func:`walsender_lines`); the report's Method."""
    out = []
    for who, split in noise_lines(rows):
        if split.dominant is None:
            known = f"; the within part is {100 * split.within:.1f} %" \
                if split.within is not None else ""
            out.append(f"{who[0].upper()}{who[1:]}: the noise is not split "
                       f"({split.note or 'nothing to split'}){known}.")
            continue
        share = split.dominant_share or 0.0
        advice = (f"for the budget that means {BUDGET[split.dominant]}"
                  if split.dominant_told else
                  "more repeats would say whether the budget should go to more repeats "
                  "or longer ones")
        length = length_advice(split)
        out.append(f"{who[0].upper()}{who[1:]}: {dominant_words(split)} "
                   f"({100 * share:.0f} % of a repeat's variance); {advice}"
                   + (f"; here {length}" if length else "") + ".")
    out += [f"Cell {r.cell.idx} {r.cell.label}: {words[0].upper()}{words[1:]}."
            for r, words in walsender_lines(rows)]
    return out
