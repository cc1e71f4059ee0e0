"""The pairs of a duet (``[run] order = "duet"``): which two cells run at the same moment,
each on a cluster of its own, read from the spec's comparisons without touching the
machine.

A pair is a cell and its baseline (``[compare] baseline``, plan/baselines.py): the ratio
a duet takes is the one the run compares. Every comparison is a pair of its own: a
baseline compared by several cells (the seed's ``local``, which ``on``, ``remote_write``
and ``off`` are compared with) runs once beside each of them in every round, and each
cell's ratio is taken to the baseline's repeat measured beside it (the repeat's
``pair``). A pair whose two cells share a cluster (they differ only in what the
workload or a session sets: ``synchronous_commit``, ``batch``, ``clients``) has its
cell's side on a *twin*: a second cluster made like the first, since one cluster cannot
be confined to two CPU sets at once. A cell compared with nothing, and the baseline of
nothing, has no partner and is refused with the fix, at ``[run] order``'s line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from syncrep_lab.plan.baselines import baselines
from syncrep_lab.plan.matrix import NO_PLACEMENT, Cell
from syncrep_lab.plan.spec import Spec
from syncrep_lab.store.keys import with_defaults

FIX = ('give every cell a partner through [compare] baseline (each cell compared with '
       'one, or the baseline of one), or set [run] order = "interleaved"')


@dataclass(frozen=True)
class Pair:
    """Two cells measured at the same moment: ``base`` and the cell compared with it."""

    base: Cell
    cell: Cell

    @property
    def indices(self) -> tuple[int, int]:
        return self.base.index, self.cell.index

    @property
    def twin(self) -> bool:
        """Whether the cell's side runs on a twin of the baseline's cluster."""
        return self.cell.cluster_key == self.base.cluster_key


class NotPaired(ValueError):
    """The cells cannot all be put in pairs; the message says which and why."""


def duet_pairs(spec: Spec, cells: Sequence[Cell]) -> list[Pair]:
    """The pairs of ``cells`` in the plan's order (a pair's place in this list is its
    number, stored with its repeats), or NotPaired naming the cells that cannot be
    paired."""
    by_index = {c.index: c for c in cells}
    base_of = baselines([(c.index, with_defaults(c.params())) for c in cells],
                        spec.compare.rules(spec.matrix))
    partners = {b for b in base_of.values() if b is not None}
    alone = [c.label for c in cells if base_of[c.index] is None and c.index not in partners]
    if alone:
        raise NotPaired(f"a duet runs each cell beside the cell it is compared with, and "
                        f"{_names(alone)} {'is' if len(alone) == 1 else 'are'} compared "
                        "with none")
    pairs = [Pair(by_index[b], c) for c in cells if (b := base_of[c.index]) is not None]
    placed = [c.label for c in cells if c.placement != NO_PLACEMENT or c.cores is not None
              or c.instances > 1]
    if placed:
        raise NotPaired(f"a duet places each side on CPUs of its own, and "
                        f"{_names(placed)} {'asks' if len(placed) == 1 else 'ask'} for "
                        "a placement, cores or instances (leave them out of a duet)")
    return pairs


def _names(labels: list[str]) -> str:
    shown = ", ".join(labels[:3])
    return shown + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")


def duet_problem(spec: Spec, cells: Sequence[Cell]) -> str | None:
    """Why a duet spec's cells cannot be paired, with the fix; None when they can (or the
    spec is not a duet)."""
    if spec.run.order != "duet":
        return None
    if spec.topology.attach is not None:
        return "a duet runs two clusters of its own; an attached cluster is one (" + \
            'set [run] order = "interleaved")'
    if set(spec.topology.hosts):
        return ("a duet confines each side to CPUs of this machine; nodes on SSH hosts "
                'are not (set [run] order = "interleaved")')
    try:
        duet_pairs(spec, cells)
    except NotPaired as exc:
        return f"{exc}: {FIX}"
    return None
