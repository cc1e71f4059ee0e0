"""The kernel's locks per commit (the lock probe's rows, probes/kernel_locks.py): for each
process role, each lock by kind, the kernel function that took it and the user frames
above the system call, how often it was taken (a counted lock), waited for, and for how
long, per commit of the probed repeats; and the seed's question asked of them: do the
commits take the epoll mutex, and who waits for it.

A figure's interval is over the probed repeats the lock probe ran in (a repeat where a
lock was never met counts 0), divided by the commits of the instance it watched
(store/queries.watched_commits).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from syncrep_lab.analysis.anatomy import PerCommit, per_commit
from syncrep_lab.json_form import JSON
from syncrep_lab.probes.kernel_locks import PROBE
from syncrep_lab.store import Store, queries

EPOLL_MUTEX = "epmutex"  # the global one; each epoll set has its own too (ep->mtx)
EPOLL_CALLERS = ("ep_", "do_epoll_", "__ep_", "eventpoll_")  # fs/eventpoll.c's functions
# its close path, by kernel: ep_free (before the 6.4 rework), ep_clear_and_put (after)
EPOLL_CLOSE = ("ep_free", "ep_clear_and_put", "ep_eventpoll_release")


@dataclass(frozen=True)
class LockCosts:
    """One lock site of one role, per commit over a cell's probed repeats."""

    node: str
    role: str
    lock: str  # a counted lock's symbol (epmutex), else ""
    kind: str  # mutex, spin, read, write
    caller: str  # the kernel function that took it
    user_stack: str  # "close < FreeWaitEventSet"
    acquisitions: PerCommit | None  # takes per commit; None where not counted
    contentions: PerCommit  # waits per commit
    wait_us: PerCommit  # µs waited per commit
    repeats: int

    def to_json(self) -> dict[str, JSON]:
        return {"node": self.node, "role": self.role, "lock": self.lock,
                "kind": self.kind, "caller": self.caller, "user_stack": self.user_stack,
                "acquisitions_per_commit": (self.acquisitions.to_json()
                                            if self.acquisitions is not None else None),
                "contentions_per_commit": self.contentions.to_json(),
                "wait_us_per_commit": self.wait_us.to_json(), "repeats": self.repeats}


@dataclass(frozen=True)
class CellLocks:
    """A cell's lock sites, busiest first, what the probe's rows said it counted, and
    the probed repeats they are per commit of (those it ran in that had commits)."""

    sites: list[LockCosts]
    notes: list[str]  # the probe's "ran" reasons: the kernel, and what it counted
    repeats: int

    @property
    def counted(self) -> bool:
        """Whether the mutexes' takes were counted (the kernel had kprobes)."""
        return any(s.acquisitions is not None for s in self.sites) or any(
            "every take of a mutex" in n for n in self.notes)

    def epoll_takes(self, role: str = "backend", *, lock: str | None = None,
                    closing: bool = False) -> float | None:
        """Mutex takes per commit by the epoll code (fs/eventpoll.c) for ``role`` on the
        primary, summed over its sites; only those of ``lock`` (epmutex) where given,
        only those closing a set where ``closing``; None where takes were not counted,
        or no probed repeat had a commit to count them per (not 0: nothing was seen).

        >>> took = LockCosts("primary", "backend", "", "mutex", "do_epoll_wait", "",
        ...                  per_commit([2.0]), per_commit([0.0]), per_commit([0.0]), 1)
        >>> CellLocks([took], ["every take of a mutex"], 1).epoll_takes()
        2.0
        >>> CellLocks([], ["every take of a mutex"], 0).epoll_takes() is None
        True
        """
        if not self.counted or not self.repeats:
            return None
        return sum(s.acquisitions.mean or 0.0 for s in self.sites
                   if s.node == "primary" and s.role == role and s.acquisitions is not None
                   and s.caller.startswith(EPOLL_CALLERS)
                   and (not closing or s.caller in EPOLL_CLOSE)
                   and (lock is None or s.lock == lock))

    def to_json(self) -> dict[str, JSON]:
        return {"sites": [s.to_json() for s in self.sites], "notes": list(self.notes),
                "repeats": self.repeats,
                "epoll_takes_per_commit": self.epoll_takes(),
                "epoll_close_takes_per_commit": self.epoll_takes(closing=True),
                "epmutex_takes_per_commit": self.epoll_takes(lock=EPOLL_MUTEX)}


def cell_locks(store: Store, cell_id: int) -> CellLocks | None:
    """The lock probe's figures of a cell, None where it never ran there."""
    stored = [r for r in store.repeats(cell_id) if r.probed]
    ran = {repeat_id: p.reason or "" for repeat_id, p in queries.probes_of(
        store, [r.id for r in stored]) if p.probe == PROBE and p.status == "ran"}
    if not ran:
        return None
    commits = {r: c for r, (c, _) in queries.watched_commits(
        store, [r for r in stored if r.id in ran]).items() if c > 0}
    notes = sorted(set(ran.values()) - {""})
    if not commits:
        return CellLocks([], notes, 0)
    Key = tuple[str, str, str, str, str, str]
    per: dict[Key, dict[int, tuple[int | None, int, float]]] = defaultdict(dict)
    for repeat_id, row in queries.kernel_locks_of(store, list(commits)):
        key = (row.node, row.role, row.lock, row.kind, row.caller, row.user_stack)
        per[key][repeat_id] = (row.acquisitions, row.contentions, row.wait_ns)
    sites = []
    repeat_commits = list(commits.values())
    for key, by_repeat in per.items():
        values = [by_repeat.get(r, (0, 0, 0.0)) for r in commits]
        counted = any(a is not None for a, _, _ in by_repeat.values())
        rows = list(zip(values, repeat_commits, strict=True))
        sites.append(LockCosts(
            *key,
            acquisitions=(per_commit([(a or 0) / n for (a, _, _), n in rows])
                          if counted else None),
            contentions=per_commit([c / n for (_, c, _), n in rows]),
            wait_us=per_commit([w / 1000.0 / n for (_, _, w), n in rows]),
            repeats=len(commits)))
    sites.sort(key=lambda s: (-((s.acquisitions.mean if s.acquisitions else None) or 0.0),
                              -(s.contentions.mean or 0.0), s.node, s.role, s.caller))
    return CellLocks(sites, notes, len(commits))
