"""Which walsender a cell's commits wait for: one rule for every analysis that names it
(the noise's run delay, the diagnosis's wake-up rules, the model's serial release, the
commit anatomy's ceilings, ``ab``'s walsender bound).

The first of these that names a single one decides:

1. the server's word: the one standby the primary showed as ``sync`` in the cell's
   stored replication samples (pg_stat_replication, sampled in probed repeats);
2. the cell's ``synchronous_standby_names``, among the standbys whose walsenders ran;
3. where neither names a single one (``ANY`` quorums and ``FIRST 2``, where more than one
   releases waiters; a store without samples of an attached cluster's names), what the
   walsenders did: the one the commit anatomy saw free waiters most often, else the one
   whose flame graph spends the most in SyncRepReleaseWaiters, else the one that sent
   the most ``kill()`` a commit (each wakes a waiting backend), else the one with the
   most CPU a commit.

Not simply the busiest: a potential standby's walsender enters SyncRepReleaseWaiters on
every reply too and frees nobody, and ``ab`` once named it from its CPU (docs/decisions.md).
None where commits do not wait for a standby (``off``, ``local``) and where nothing tells.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from syncrep_lab.analysis.anatomy import Releases, releasing
from syncrep_lab.pg.replication import WAITING_LEVELS
from syncrep_lab.pg.sync_names import SyncNamesError, expect, parse
from syncrep_lab.store import Store, StoredCell, queries

# how each step of the rule is named where the choice is shown (told_by)
SERVER = "pg_stat_replication"
NAMES = "synchronous_standby_names"
ANATOMY = "commit anatomy"
FRAMES = "flame graph"
KILLS = "kill() per commit"
CPU = "CPU per commit"


@dataclass(frozen=True)
class SyncWalsender:
    role: str  # walsender:NAME
    told_by: str  # SERVER, NAMES, ANATOMY, FRAMES, KILLS or CPU


@dataclass(frozen=True)
class Clues:
    """What a caller knows of a cell's walsenders, each keyed by role (walsender:NAME);
    what it does not know stays empty."""

    walsenders: Collection[str]  # the primary's walsender roles that ran
    level: str | None  # the cell's synchronous_commit
    shown_sync: Collection[str] = ()  # standbys the primary showed as sync
    sync_names: str | None = None  # the cell's synchronous_standby_names
    releases: Sequence[Releases] = ()  # the commit anatomy's walsenders
    release_share: Mapping[str, float] = field(default_factory=dict)  # in the flame graph
    kills: Mapping[str, float] = field(default_factory=dict)  # kill() per commit
    cpu_us: Mapping[str, float] = field(default_factory=dict)  # CPU µs per commit


def choose(clues: Clues) -> SyncWalsender | None:
    """The rule (see the module's text)."""
    if clues.level not in WAITING_LEVELS:
        return None
    if len(clues.shown_sync) == 1:
        shown = f"walsender:{next(iter(clues.shown_sync))}"
        if not clues.walsenders or shown in clues.walsenders:
            return SyncWalsender(shown, SERVER)
    named = _named(clues)
    if named is not None:
        return SyncWalsender(named, NAMES)
    freed = releasing([r for r in clues.releases if r.walsender in clues.walsenders]
                      if clues.walsenders else clues.releases)
    if freed is not None:
        return SyncWalsender(freed.walsender, ANATOMY)
    for told_by, figures in ((FRAMES, clues.release_share), (KILLS, clues.kills),
                             (CPU, clues.cpu_us)):
        found = _most(figures, clues.walsenders)
        if found is not None:
            return SyncWalsender(found, told_by)
    return None


def _named(clues: Clues) -> str | None:
    """The one standby the names make ``sync`` among those whose walsenders ran."""
    standbys = sorted({role.split(":", 1)[1] for role in clues.walsenders})
    if not standbys:
        return None
    try:
        names = parse(clues.sync_names or "")
    except SyncNamesError:
        return None
    chosen = [s for s, state in expect(names, standbys).states.items() if state == "sync"]
    return f"walsender:{chosen[0]}" if len(chosen) == 1 else None


def _most(figures: Mapping[str, float], walsenders: Collection[str]) -> str | None:
    """The walsender with the most of a figure, where any has some."""
    found = [(value, role) for role, value in figures.items()
             if role.startswith("walsender:") and (not walsenders or role in walsenders)
             and value > 0]
    return max(found)[1] if found else None


def sync_shown(summaries: Iterable[tuple[str, str | None]]) -> frozenset[str]:
    """The standbys the primary showed as ``sync``, from (standby, the states it was seen
    in, comma separated) of the replication samples (queries.replication_summary)."""
    return frozenset(standby for standby, states in summaries
                     if "sync" in (states or "").split(","))


def stored_clues(store: Store, cell: StoredCell, walsenders: Iterable[str],
                 shown: Collection[str] | None = None) -> Clues:
    """The clues the store holds for every cell: the level, the names, and the standbys
    the primary showed as sync in any of the cell's repeats (``shown``, where the caller
    has read them already: :func:`sync_shown`)."""
    if shown is None:
        everything = [r.id for r in store.repeats(cell.id)]
        shown = sync_shown((s.standby, s.states)
                           for s in queries.replication_summary(store, everything))
    return Clues(walsenders=frozenset(walsenders),
                 level=str(cell.typed_params.synchronous_commit),
                 shown_sync=frozenset(shown), sync_names=cell.typed_params.sync or "")
