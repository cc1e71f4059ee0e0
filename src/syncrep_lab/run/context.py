"""What a run's parts read of the run: ``RunContext``, made once by the runner
(run/runner.py) and handed down to the clusters (run/clusters.py) and to every repeat
(run/repeat.py), which import this and never the runner: the imports of run/ go one way,
the runner at the top (docs/decisions.md, "Modules import one way").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from syncrep_lab.pg import replication
from syncrep_lab.plan.matrix import NO_FAULTS, Cell, Plan
from syncrep_lab.plan.spec import Spec
from syncrep_lab.readers.pgbench_log import ProgressSample
from syncrep_lab.run.attached import Visit, stamped
from syncrep_lab.run.stall import SyncStallWatch
from syncrep_lab.run.target import Target
from syncrep_lab.run.workload import Tables
from syncrep_lab.store import Store


@dataclass
class Events:
    """What the runner reports while it works; the CLI draws it, tests ignore it."""

    plan: Callable[[Plan, int], None] = lambda plan, done: None
    cell_start: Callable[[Cell], None] = lambda cell: None
    phase: Callable[[Cell, str], None] = lambda cell, phase: None
    live: Callable[[Cell, ProgressSample], None] = lambda cell, sample: None
    repeat: Callable[[Cell, int, float], None] = lambda cell, n, tps: None
    cell_end: Callable[[Cell, dict[str, Any]], None] = lambda cell, summary: None
    message: Callable[[str], None] = lambda text: None


@dataclass(frozen=True)
class RunContext:
    """The run as its clusters and repeats see it: where it is stored, what it measures,
    whom it tells, and the name its sessions carry. Nothing in it changes during the run
    but the notes already said."""

    store: Store
    spec: Spec
    run_id: int
    events: Events
    # Every session this invocation opens on a server carries this name (pgbench's with
    # " pgbench" after it): what it ends, and only that (run/attached.py).
    application_name: str
    visit: Visit | None  # the attached cluster's record of this run; None when built
    tables: Tables  # the workload's tables (an attached cluster's are named apart)
    said: set[str] = field(default_factory=set, compare=False)  # notes said once a run

    def named(self, conninfo: str, what: str = "") -> str:
        """``conninfo`` carrying this invocation's application_name."""
        return stamped(conninfo, f"{self.application_name} {what}".strip())

    def say_once(self, note: str, text: str) -> None:
        """``text`` told, the first time ``note`` comes up in the run."""
        if note not in self.said:
            self.said.add(note)
            self.events.message(text)

    def stall_watch(self, cell: Cell) -> Callable[[Target], SyncStallWatch | None]:
        """Each instance's watch: cells whose commits wait for a standby stop early when
        that wait stalls; a fault scenario watches for that itself (its own
        stall_seconds)."""
        def watch(target: Target) -> SyncStallWatch | None:
            if (cell.synchronous_commit not in replication.WAITING_LEVELS
                    or cell.faults != NO_FAULTS):
                return None
            return SyncStallWatch(target.admin, f"{self.application_name} pgbench",
                                  self.spec.run.stall_seconds, target.version_num)
        return watch
