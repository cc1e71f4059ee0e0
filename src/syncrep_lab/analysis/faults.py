"""What each fault did: for every event of a cell's fault scenario, the time until
the primary's ``pg_stat_replication`` showed a standby's state move, throughput
before, during and after, the time until throughput came back, the commits that
waited longer than the scenario's threshold, and whether every acknowledged
commit was found on every node afterwards. Pure functions over the store.
"""

from __future__ import annotations

import statistics
import tomllib
from pathlib import Path
from typing import Any

from syncrep_lab.stats.histogram import LatencyHistogram
from syncrep_lab.store import Store, StoredCell, queries

RECOVERED = 0.9  # back to 90 % of the throughput before the event
DETECT_WINDOW_S = 30.0


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def event_effects(event: dict[str, Any], states: list[dict[str, Any]],
                  samples: list[tuple[float, float]], until: float | None) -> dict[str, Any]:
    """One fault event against the states seen after it and pgbench's per-second TPS.

    ``samples`` are (second, tps) with second k covering (k-1, k]; ``until`` is when
    the fault was undone (a 'for' ran out), None if it lasted to the end.

    >>> e = event_effects({"t_s": 2.0}, [{"t_s": 2.3, "node": "c", "detail": "potential -> sync"}],
    ...                   [(1, 100.0), (2, 90.0), (3, 10.0), (4, 50.0), (5, 95.0), (6, 99.0)], 4.0)
    >>> e["detect_s"], e["tps_before"], e["tps_during"], e["recovery_s"], e["tps_after"]
    (0.3, 95.0, 30.0, 3.0, 97.0)
    """
    t = float(event["t_s"])
    after = [s for s in states if t <= float(s["t_s"]) <= t + DETECT_WINDOW_S]
    first = min(after, key=lambda s: float(s["t_s"])) if after else None
    before = [tps for sec, tps in samples if sec <= t]
    end = until if until is not None else float("inf")
    during = [tps for sec, tps in samples if t < sec <= end]
    base = _mean(before)
    recovery_at = None
    if base:
        recovery_at = next((sec for sec, tps in samples
                            if sec > t and tps >= RECOVERED * base), None)
    return {
        "detect_s": round(float(first["t_s"]) - t, 3) if first else None,
        "detected": f"{first['node']}: {first['detail']}" if first else None,
        "tps_before": base, "tps_during": _mean(during),
        "recovery_s": round(recovery_at - t, 3) if recovery_at is not None else None,
        "tps_after": _mean([tps for sec, tps in samples
                            if recovery_at is not None and sec >= recovery_at]),
    }


def _follow_up_time(records: list[dict[str, Any]], event: dict[str, Any]) -> float | None:
    """When the fault on this node was undone within the repeat (start, continue)."""
    for r in records:
        if (r["kind"] == "fault" and r["node"] == event["node"]
                and float(r["t_s"]) > float(event["t_s"])
                and r["detail"].split(" ")[0] in ("start", "continue")):
            return float(r["t_s"])
    return None


def cell_faults(store: Store, cell: StoredCell, scenario: dict[str, Any]) -> dict[str, Any]:
    slow_ms = float(scenario.get("slow_commit_ms", 1000.0))
    repeats = []
    for rep in store.repeats(cell.id):
        records = [r._asdict() for r in queries.fault_events_of(store, rep.id)]
        samples = [(float(s.t_s), float(s.tps)) for s in queries.samples_of(store, rep.id)]
        states = [r for r in records if r["kind"] == "state"]
        events = []
        for r in records:
            if r["kind"] != "fault" or r["detail"].split(" ")[0] in ("start", "continue"):
                continue
            events.append({**r, **event_effects(r, states, samples, _follow_up_time(records, r))})
        hist = LatencyHistogram.from_bytes(rep.histogram)
        durability = [d._asdict() for d in queries.durability_of(store, rep.id)]
        repeats.append({
            "n": rep.n, "probed": bool(rep.probed), "events": events, "samples": samples,
            "records": records, "transactions": rep.transactions,
            "slow_commits": hist.count_at_least(int(slow_ms * 1000)),
            "durability": durability,
            "lost": [d for d in durability if not d["ok"]],
        })
    return {"idx": cell.idx, "label": cell.label, "status": cell.status,
            "error": cell.error, "scenario": scenario, "slow_commit_ms": slow_ms,
            "repeats": repeats,
            "acknowledged_lost": any(r["lost"] for r in repeats)}


def run_faults(folder: Path) -> list[dict[str, Any]]:
    """Every cell that ran a fault scenario, with what each event did."""
    store = Store(folder, create=False)
    try:
        run = store.run()
        try:
            scenarios = tomllib.loads(run.spec_toml).get("faults", {})
        except tomllib.TOMLDecodeError:
            scenarios = {}
        out = []
        for cell in store.cells(run.id):
            name = cell.typed_params.faults
            if name:
                out.append(cell_faults(store, cell, scenarios.get(name, {})))
        return out
    finally:
        store.close()
