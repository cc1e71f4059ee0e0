"""The least time a run of a spec takes, and a budget checked against it before
anything starts.

The runner never cuts a cluster's rounds below two (two values are the fewest that give
an interval; a duet's two crossover units are four rounds), and runs each cell's probed
repeats (the commit anatomy's too) after its rounds. So a run of ``cells`` takes at least
its clusters' starts, two rounds of every cell, every probed repeat and the end (results,
verdicts, report). A ``--budget`` shorter than that cannot bound the command: it is
refused with the time the spec needs and what would shorten it, rather than overrun
(``run --preset quick --budget 2m`` once took 4 min 20 s after saying the budget left
no time for another round).

The per-step figures below are floors measured here (2 CPUs, clusters on tmpfs; the
quick preset's run, its repeats' stored starts and durations): the least a step took,
not its typical time, so that a budget the run could keep is not refused. A slower
machine overruns a budget that passed this check by what its steps take beyond them;
the rounds then stop at the floor and the run says the budget stopped them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from syncrep_lab import format as fmt
from syncrep_lab.errors import UserError
from syncrep_lab.plan.matrix import Cell
from syncrep_lab.plan.spec import Spec

FLOOR_ROUNDS = 2  # interleaved and blocked: the fewest that give an interval
DUET_FLOOR_ROUNDS = 4  # a duet's two crossover units of two rounds
# a measured repeat beyond its duration: the table reset (emptied, a checkpoint, the
# standbys' replay waited for), pgbench's start and the readings (0.05 s at least, 0.13
# s the median, over 36 repeats of the quick preset here)
REPEAT_S = 0.05
# a probed repeat beyond a measured one: its probes' start and stop (1.45 s at least,
# 1.54 the median, with the quick preset's probes: perf, the scheduler trace, the
# anatomy's bpftrace; flame graphs folded)
PROBED_S = 1.4
CLUSTER_S = 1.0  # a cluster made from the template and started here
GUEST_S = 10.0  # a guest booted (KVM); under TCG several times that
END_S = 1.0  # the results, the verdicts and the report


@dataclass(frozen=True)
class LeastTime:
    """What a run of a spec cannot take less than, and of what."""

    clusters: int
    guests: int
    rounds: int
    measured: int  # measured repeats, every cell's floor
    probed: int  # probed and anatomy repeats
    repeat_s: float  # a measured repeat's duration
    seconds: float

    def words(self) -> str:
        parts = [f"{self.measured} measured repeats ({self.rounds} rounds) of "
                 f"{self.repeat_s:g} s and a warm-up a cell"]
        if self.probed:
            parts.append(f"{self.probed} probed repeats")
        parts.append(f"{self.clusters} cluster start{'s' if self.clusters != 1 else ''}")
        if self.guests:
            parts.append(f"{self.guests} guest boot{'s' if self.guests != 1 else ''}")
        return ", ".join(parts)


def _probed_per_cell(spec: Spec) -> int:
    probes = spec.probes
    if probes.probed_repeats <= 0:
        return 0
    return probes.probed_repeats + (probes.anatomy_repeats if probes.anatomy else 0)


def least_time(spec: Spec, cells: Sequence[Cell], *, probed: bool = True) -> LeastTime:
    """The least a run of ``cells`` takes (``probed``: with the spec's probed repeats).
    A duet runs each pair's two cells at once: a round takes a repeat per pair, not per
    cell."""
    duet = spec.run.order == "duet"
    rounds = DUET_FLOOR_ROUNDS if duet else FLOOR_ROUNDS
    workload = spec.workload
    repeat_s = float(workload.duration)
    at_once = max(1, math.ceil(len(cells) / 2)) if duet else len(cells)
    measured = rounds * len(cells)
    probes = _probed_per_cell(spec) * len(cells) if probed else 0
    clusters = len({c.cluster_key for c in cells}) * (2 if duet else 1)
    guests = (len(spec.guest_names()) if spec.topology.guests is not None else 0)
    # the warm-up: once per cell and cluster it runs on (runner._enter)
    seconds = (rounds * at_once * (repeat_s + REPEAT_S) + at_once * workload.warmup
               + probes * (repeat_s + REPEAT_S + PROBED_S)
               + clusters * CLUSTER_S + guests * GUEST_S + END_S)
    return LeastTime(clusters, guests, rounds, measured, probes, repeat_s, seconds)


def check_budget(spec: Spec, cells: Sequence[Cell], source: str = "--budget") -> None:
    """Refused, with the time it needs and what would shorten it, where the spec's
    budget cannot hold the least its run takes."""
    budget = spec.run.budget_seconds
    if budget is None or not cells:
        return
    least = least_time(spec, cells)
    if least.seconds <= budget:
        return
    shorter = []
    if least.probed:
        without = least_time(spec, cells, probed=False)
        shorter.append(f"[probes] probed_repeats = 0 (then {fmt.duration(without.seconds)},"
                       " but no costs, flame graphs or anatomy)")
    shorter += ["fewer cells (fewer matrix values)",
                f"a shorter [workload] duration (now {spec.workload.duration} s)"]
    raise UserError(
        f"the budget ({spec.run.budget}) cannot hold this run: its {len(cells)} cells take "
        f"at least {fmt.duration(least.seconds)} here ({least.words()}), since the rounds "
        "never stop below their floor and every cell's probed repeats follow them",
        f"give {source} {_rounded_up(least.seconds)} or more; or shorten the run: "
        + "; ".join(shorter))


def _rounded_up(seconds: float) -> str:
    """A budget to suggest: whole minutes above a minute, else 10 s steps."""
    if seconds > 60:
        return f"{math.ceil(seconds / 60)}m"
    return f"{10 * math.ceil(seconds / 10)}s"
