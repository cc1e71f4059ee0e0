"""A duet's rounds (``[run] order = "duet"``, ``ab --duet``): each cell and its baseline
measured at the same moment, each side a whole cluster of its own (primary, standbys,
client) confined to a CPU set of its own, the sides swapping their sets every round.

Interleaving spreads what else the machine does over both cells of a comparison but
cannot cancel it: they never run at the same moment. Run together, whatever hits the
machine during a repeat (another tenant, a frequency step, the host's steal) hits both
sides alike and leaves their ratio (Bulej et al., ICPE 2020). Sharing every CPU, the two
sides would also fight each other for them, and which one wins would be noise; each side
is held to its own CPUs with the cpusets placement already makes (Japke et al. 2025:
isolated duets lowered false positives, shared ones did not). One side's CPUs may be the
better ones (another tenant's interrupts, a sibling thread): the sides swap every round,
so each comparison has both sides on both sets equally often over an even number of
rounds.

Which cells pair is plan/duet.py's; the round's pairs run one after another in an order
shuffled per round, and which side of a pair starts its client first is shuffled too
(seeded by the run's seed, stored as ``position`` 0 or 1). Both sides are brought to the
same state first (run/reset.py), then both recorders started, then both clients
launched back to back: their starts are milliseconds apart, their runs overlap for all
but that.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from syncrep_lab.placement.cpus import format_cpus
from syncrep_lab.plan.matrix import Cell, standby_names
from syncrep_lab.plan.spec import Spec
from syncrep_lab.probes.recorder import Recording
from syncrep_lab.run.repeat import Repeat
from syncrep_lab.run.workload import RunningClient
from syncrep_lab.stats.pairing import CROSSOVER_NOTE
from syncrep_lab.store import now


@dataclass(frozen=True)
class Sides:
    """The two CPU sets a duet's sides take in turn."""

    first: list[int]
    second: list[int]

    def of(self, round_no: int, baseline: bool) -> list[int]:
        """The set of a pair's baseline side (``baseline``) or its other side in round
        ``round_no``: swapped every round."""
        return self.first if (round_no % 2 == 0) == baseline else self.second


def sides(cpus: list[int]) -> Sides | None:
    """The machine's usable CPUs in two halves (an odd one out left idle: the sides
    must be alike); None with fewer than two."""
    half = len(cpus) // 2
    return Sides(cpus[:half], cpus[half : 2 * half]) if half >= 1 else None


def cannot(cpus: list[int]) -> str | None:
    """Why a duet cannot run on these CPUs (it is then interleaved), or None."""
    if len(cpus) >= 2:
        return None
    return (f"a duet was asked for, but this machine gives the run {len(cpus)} CPU "
            f"({format_cpus(cpus)}) and a duet needs one a side: the cells are interleaved "
            "instead")


def roles_a_side(spec: Spec, cell: Cell) -> list[str]:
    """What runs on each side: every node and the client."""
    return ["primary", *standby_names(spec, cell.standbys), "client"]


def what_it_is(spec: Spec, cell: Cell, split: Sides) -> str:
    """The duet in one line, saying where the layout wants more CPUs a side than the
    machine gives."""
    roles = roles_a_side(spec, cell)
    per = len(split.first)
    line = (f"duet on CPUs {format_cpus(split.first)} and {format_cpus(split.second)}, "
            "one set a side, swapped every round, the ratio over a "
            f"{CROSSOVER_NOTE}")
    if per < len(roles):
        line += (f"; a side runs {len(roles)} roles ({', '.join(roles)}) where the "
                 f"layout would give each a CPU, and this machine gives each side {per}: "
                 "the pair's ratio holds, each side's TPS is what "
                 f"{'one CPU gives' if per == 1 else f'{per} CPUs give'}")
    return line


def _draw(seed: int, group: str, round_no: int, what: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}/{group}/{round_no}/{what}".encode()).hexdigest()
    return random.Random(int(digest[:16], 16))


def pair_order(seed: int, group: str, round_no: int, pairs: int) -> list[int]:
    """The round's pairs (by their place in the plan) in a shuffled, reproducible order."""
    order = list(range(pairs))
    _draw(seed, group, round_no, "pairs").shuffle(order)
    return order


def baseline_first(seed: int, group: str, round_no: int, pair: int) -> bool:
    """Whether the pair's baseline side starts its client first (a seeded coin)."""
    return _draw(seed, group, round_no, f"pair {pair}").random() < 0.5


class SideFailed(Exception):
    """One side of a pair failed (``side``: 0 started first, 1 second); both were
    stopped."""

    def __init__(self, side: int, error: Exception) -> None:
        super().__init__(str(error))
        self.side, self.error = side, error


def run_pair(first: Repeat, second: Repeat) -> tuple[float, float]:
    """Both repeats at the same moment, ``first``'s client launched first; both stored.
    Their TPS; SideFailed names the side whose step failed, with every client and
    recorder of both stopped."""
    repeats = (first, second)
    watches = [_side(i, r.prepare) for i, r in enumerate(repeats)]
    with ExitStack() as stack:
        recordings = [stack.enter_context(_side(i, partial(_recording, r)))
                      for i, r in enumerate(repeats)]
        running: list[list[RunningClient]] = []
        for i, r in enumerate(repeats):
            r.started = now()
            clients = _side(i, r.start_client)
            stack.callback(_stop, clients)  # a no-op once they have ended
            running.append(clients)
        rows = [_side(i, partial(r.finish, watches[i], recordings[i], running[i]))
                for i, r in enumerate(repeats)]
    tps = [_side(i, partial(r.keep, watches[i], running[i], rows[i]))
           for i, r in enumerate(repeats)]
    return tps[0], tps[1]


T = TypeVar("T")


def _recording(repeat: Repeat) -> Recording:
    return Recording(repeat.recorders())


def _side(side: int, step: Callable[[], T]) -> T:
    """``step`` of side ``side``; its failure as SideFailed."""
    try:
        return step()
    except Exception as exc:
        raise SideFailed(side, exc) from exc


def _stop(clients: list[RunningClient]) -> None:
    for client in clients:
        client.kill()


def stored(pair: int, cpus: list[int]) -> dict[str, int | str]:
    """A duet repeat's own columns (repeats.pair, repeats.cpus)."""
    return {"pair": pair, "cpus": format_cpus(cpus)}
