"""What each fault did: for every event of a cell's fault scenario, the time until
the primary's ``pg_stat_replication`` showed a standby's state move, throughput
before, during and after, the time until throughput came back, the commits that
waited longer than the scenario's threshold, and whether every acknowledged
commit was found on every node afterwards. Pure functions over the store.

Each cell's report is a :class:`CellFaults` that owns its JSON form (``faults --json``
and the report's data print ``to_json()``).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from syncrep_lab.json_form import JSON
from syncrep_lab.stats.histogram import LatencyHistogram
from syncrep_lab.store import DurabilityRow, FaultEventRow, Store, StoredCell, queries

RECOVERED = 0.9  # back to 90 % of the throughput before the event
DETECT_WINDOW_S = 30.0
UNDONE = ("start", "continue")  # the first word of a record that undoes a fault


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


@dataclass(frozen=True)
class EventEffects:
    """What followed one fault event: when the primary saw a standby's state move (and
    which), TPS before, during and after it, and when TPS came back."""

    detect_s: float | None  # None: no state moved within DETECT_WINDOW_S
    detected: str | None  # "node: old -> new"
    tps_before: float | None
    tps_during: float | None
    recovery_s: float | None  # None: TPS never came back to RECOVERED of before
    tps_after: float | None

    def to_json(self) -> dict[str, JSON]:
        return {"detect_s": self.detect_s, "detected": self.detected,
                "tps_before": self.tps_before, "tps_during": self.tps_during,
                "recovery_s": self.recovery_s, "tps_after": self.tps_after}


def event_effects(t: float, states: list[FaultEventRow], samples: list[tuple[float, float]],
                  until: float | None) -> EventEffects:
    """A fault event at ``t`` against the states seen after it and pgbench's per-second TPS.

    ``samples`` are (second, tps) with second k covering (k-1, k]; ``until`` is when
    the fault was undone (a 'for' ran out), None if it lasted to the end.

    >>> e = event_effects(2.0, [FaultEventRow(2.3, "state", "c", "potential -> sync")],
    ...                   [(1, 100.0), (2, 90.0), (3, 10.0), (4, 50.0), (5, 95.0), (6, 99.0)], 4.0)
    >>> e.detect_s, e.detected, e.tps_before, e.tps_during, e.recovery_s, e.tps_after
    (0.3, 'c: potential -> sync', 95.0, 30.0, 3.0, 97.0)
    """
    after = [s for s in states if t <= float(s.t_s) <= t + DETECT_WINDOW_S]
    first = min(after, key=lambda s: float(s.t_s)) if after else None
    before = [tps for sec, tps in samples if sec <= t]
    end = until if until is not None else float("inf")
    during = [tps for sec, tps in samples if t < sec <= end]
    base = _mean(before)
    recovery_at = None
    if base:
        recovery_at = next((sec for sec, tps in samples
                            if sec > t and tps >= RECOVERED * base), None)
    return EventEffects(
        detect_s=round(float(first.t_s) - t, 3) if first else None,
        detected=f"{first.node}: {first.detail}" if first else None,
        tps_before=base, tps_during=_mean(during),
        recovery_s=round(recovery_at - t, 3) if recovery_at is not None else None,
        tps_after=_mean([tps for sec, tps in samples
                         if recovery_at is not None and sec >= recovery_at]))


@dataclass(frozen=True)
class FaultEvent:
    """One event of the scenario as the repeat stored it, and what followed."""

    record: FaultEventRow
    effects: EventEffects

    def to_json(self) -> dict[str, JSON]:
        return {**self.record._asdict(), **self.effects.to_json()}


@dataclass(frozen=True)
class FaultRepeat:
    """A faulted repeat: its events, its per-second TPS, every record the scenario
    stored, the slow commits, and the rows counted on each node afterwards."""

    n: int
    probed: bool
    events: tuple[FaultEvent, ...]
    samples: tuple[tuple[float, float], ...]  # (second, tps)
    records: tuple[FaultEventRow, ...]  # faults, states, stalls, ... in time order
    transactions: int
    slow_commits: int  # commits slower than the cell's slow_commit_ms
    durability: tuple[DurabilityRow, ...]  # the primary first

    @property
    def lost(self) -> tuple[DurabilityRow, ...]:
        """The nodes that miss acknowledged rows."""
        return tuple(d for d in self.durability if not d.ok)

    def to_json(self) -> dict[str, JSON]:
        return {"n": self.n, "probed": self.probed,
                "events": [e.to_json() for e in self.events],
                "samples": [[sec, tps] for sec, tps in self.samples],
                "records": [r._asdict() for r in self.records],
                "transactions": self.transactions, "slow_commits": self.slow_commits,
                "durability": [d._asdict() for d in self.durability],
                "lost": [d._asdict() for d in self.lost]}


@dataclass(frozen=True)
class CellFaults:
    """A cell that ran a fault scenario (``faults --json`` prints ``to_json()``)."""

    idx: int
    label: str
    status: str
    error: str | None
    scenario: dict[str, JSON]  # the [faults.NAME] table as the spec wrote it
    slow_commit_ms: float
    repeats: tuple[FaultRepeat, ...]

    @property
    def acknowledged_lost(self) -> bool:
        """Some node of some repeat misses rows whose commits were acknowledged."""
        return any(r.lost for r in self.repeats)

    def to_json(self) -> dict[str, JSON]:
        return {"idx": self.idx, "label": self.label, "status": self.status,
                "error": self.error, "scenario": self.scenario,
                "slow_commit_ms": self.slow_commit_ms,
                "repeats": [r.to_json() for r in self.repeats],
                "acknowledged_lost": self.acknowledged_lost}


def _follow_up_time(records: list[FaultEventRow], event: FaultEventRow) -> float | None:
    """When the fault on this node was undone within the repeat (start, continue)."""
    for r in records:
        if (r.kind == "fault" and r.node == event.node and float(r.t_s) > float(event.t_s)
                and r.detail.split(" ")[0] in UNDONE):
            return float(r.t_s)
    return None


def cell_faults(store: Store, cell: StoredCell, scenario: dict[str, JSON]) -> CellFaults:
    slow = scenario.get("slow_commit_ms", 1000.0)
    slow_ms = float(slow) if isinstance(slow, int | float) else 1000.0
    repeats = []
    for rep in store.repeats(cell.id):
        records = queries.fault_events_of(store, rep.id)
        samples = [(float(s.t_s), float(s.tps)) for s in queries.samples_of(store, rep.id)]
        states = [r for r in records if r.kind == "state"]
        events = tuple(
            FaultEvent(r, event_effects(float(r.t_s), states, samples,
                                        _follow_up_time(records, r)))
            for r in records if r.kind == "fault" and r.detail.split(" ")[0] not in UNDONE)
        hist = LatencyHistogram.from_bytes(rep.histogram)
        repeats.append(FaultRepeat(
            n=rep.n, probed=bool(rep.probed), events=events, samples=tuple(samples),
            records=tuple(records), transactions=rep.transactions,
            slow_commits=hist.count_at_least(int(slow_ms * 1000)),
            durability=tuple(queries.durability_of(store, rep.id))))
    return CellFaults(idx=cell.idx, label=cell.label, status=cell.status, error=cell.error,
                      scenario=scenario, slow_commit_ms=slow_ms, repeats=tuple(repeats))


def run_faults(folder: Path) -> list[CellFaults]:
    """Every cell that ran a fault scenario, with what each event did."""
    store = Store(folder, create=False)
    try:
        run = store.run()
        scenarios = run.spec.table.get("faults", {})
        out = []
        for cell in store.cells(run.id):
            name = cell.typed_params.faults
            if name:
                out.append(cell_faults(store, cell, scenarios.get(name, {})))
        return out
    finally:
        store.close()
