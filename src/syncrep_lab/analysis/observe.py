"""The answer to an observation of a live cluster (``syncrep-lab observe``): is
synchronous replication what limits it, and how much headroom is left.

Read from the store like every analysis (observe/record.py says what an observe run's
rows mean), so ``observe``, ``diagnose`` and the report give the same answer:

- **the wait**: the share of the client backends' time in a transaction spent in
  ``IPC:SyncRep``, waiting for a standby, and how many backends wait at once;
- **the sync walsender**: its CPU per written transaction (/proc), the share of a core
  it keeps busy now, and the rate at which it alone would be busy all the time (the
  bottleneck model's bound, analysis/model.py): the headroom is that over today's rate;
- **the standbys**: sync states, flush and replay lags;
- **the observer's own cost**: its backend's CPU and its statements per second;
- **the commit anatomy** (``observe --anatomy``): where a written transaction's commit
  time goes inside the primary, and the wait-bound ceilings (analysis/anatomy.py).

The verdicts use the diagnosis's shape (analysis/verdict.Verdict) and thresholds
written next to each rule. What the evidence lacks (no CPU access, 9.6 without the
SyncRep wait event) is said as a verdict of confidence ``unknown``, with what the other
verdicts rest on instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from syncrep_lab import format as fmt
from syncrep_lab.analysis import model
from syncrep_lab.analysis.anatomy import Anatomy, in_words, share_of_commit
from syncrep_lab.analysis.costs import CellCosts, MeanCI, cell_costs, cluster_version
from syncrep_lab.analysis.verdict import LAG_OF_LEVEL, CellDiagnosis, Verdict
from syncrep_lab.json_form import JSON, json_value
from syncrep_lab.pg.replication import WAITING_LEVELS
from syncrep_lab.store import Store, StoredCell, queries
from syncrep_lab.store.queries import ReplicationSummary

WAIT_MOST = 0.5  # of the backends' in-transaction time: the wait is most of a commit
WAIT_SOME = 0.1  # below this, synchronous replication is not what commits spend time on
BUSY = 0.7  # of one core: a single process this busy is near its own ceiling
IDLE_BACKENDS = 0.5  # client backends in a transaction on average: the load is light


@dataclass(frozen=True)
class WalsenderLoad:
    """The walsender of a standby that was synchronous (or a quorum candidate) during
    the window: its CPU per written transaction, the share of a core it kept busy, and
    the rate at which it alone would be busy all the time (None: not measured)."""

    standby: str
    cpu_us_per_commit: MeanCI | None
    cores_busy: float | None
    max_tps: float | None
    headroom: float | None  # max_tps over the window's rate

    @property
    def cpu_us(self) -> float | None:
        """CPU µs per written transaction, the mean."""
        return self.cpu_us_per_commit["mean"] if self.cpu_us_per_commit else None

    def to_json(self) -> dict[str, JSON]:
        return {"standby": self.standby, "cpu_us_per_commit": json_value(self.cpu_us_per_commit),
                "cores_busy": self.cores_busy, "max_tps": self.max_tps,
                "headroom": self.headroom}


@dataclass(frozen=True)
class StateChange:
    """A standby's sync_state moving, seconds since the window began."""

    t_s: float
    standby: str
    change: str  # "sync -> potential"

    def to_json(self) -> dict[str, JSON]:
        return {"t_s": self.t_s, "standby": self.standby, "change": self.change}


@dataclass(frozen=True)
class ObserverCost:
    """What watching cost: the observer's backend's CPU (None: not measured) and its
    read-only statements a second."""

    cpu_share_of_core: float | None
    queries_per_s: float

    def to_json(self) -> dict[str, JSON]:
        return {"cpu_share_of_core": self.cpu_share_of_core,
                "queries_per_s": self.queries_per_s}


@dataclass(frozen=True)
class Observation:
    """Every figure of the answer for one observe window, and its verdicts (``observe
    --json`` prints ``to_json()`` as each of its ``windows``)."""

    idx: int
    label: str
    version: str  # the primary's server version, "" when unknown
    synchronous_commit: str | None
    synchronous_standby_names: str | None
    seconds: float
    slices: int
    writes_per_s: float  # transactions that wrote (were given a transaction id)
    writes_ci: tuple[float | None, float | None]
    commits_per_s: float
    rollbacks_per_s: float
    wal_mb_per_s: float
    wal_records_per_s: float | None
    sessions_max: int
    in_transaction_mean: float  # client backends in a transaction, on average
    in_server_ms: float | None  # a transaction's time in the server (Little's law)
    sync_wait_share: float | None  # None: the server shows no wait event for it (9.6)
    waiting_backends_mean: float | None
    backend_waits: dict[str, float]  # the backends' six largest wait-event shares
    walsenders: tuple[WalsenderLoad, ...]
    replication: tuple[ReplicationSummary, ...]
    state_changes: tuple[StateChange, ...]
    lowest_bound: model.Bound | None  # the model's lowest capacity bound
    headroom: float | None  # its rate over the window's
    cpus: float | None
    cpu_note: str | None  # why CPU per process was not measured
    own: ObserverCost
    notes: tuple[str, ...]
    anatomy: Anatomy | None  # observe --anatomy's (analysis/anatomy.py)
    verdicts: tuple[Verdict, ...] = field(default=())

    def to_json(self) -> dict[str, JSON]:
        return {
            "idx": self.idx, "label": self.label, "version": self.version,
            "synchronous_commit": self.synchronous_commit,
            "synchronous_standby_names": self.synchronous_standby_names,
            "seconds": self.seconds, "slices": self.slices,
            "writes_per_s": self.writes_per_s, "writes_ci": list(self.writes_ci),
            "commits_per_s": self.commits_per_s, "rollbacks_per_s": self.rollbacks_per_s,
            "wal_mb_per_s": self.wal_mb_per_s, "wal_records_per_s": self.wal_records_per_s,
            "sessions_max": self.sessions_max,
            "in_transaction_mean": self.in_transaction_mean,
            "in_server_ms": self.in_server_ms, "sync_wait_share": self.sync_wait_share,
            "waiting_backends_mean": self.waiting_backends_mean,
            "backend_waits": {k: v for k, v in self.backend_waits.items()},
            "walsenders": [w.to_json() for w in self.walsenders],
            "replication": [json_value(asdict(r)) for r in self.replication],
            "state_changes": [c.to_json() for c in self.state_changes],
            "lowest_bound": self.lowest_bound.to_json() if self.lowest_bound else None,
            "headroom": self.headroom, "cpus": self.cpus, "cpu_note": self.cpu_note,
            "own": self.own.to_json(), "notes": list(self.notes),
            "anatomy": self.anatomy.to_json() if self.anatomy is not None else None,
            "verdicts": [v.to_json() for v in self.verdicts]}


@dataclass(frozen=True)
class ObservedCell(CellDiagnosis):
    """An observe window as the diagnosis gives a run's cell (``diagnose``, the report),
    with its observation."""

    observation: Observation = field(kw_only=True)

    def extra_json(self) -> dict[str, JSON]:
        return {"observation": self.observation.to_json()}


def _sums(store: Store, cell_id: int) -> dict[str, Any]:
    slices = queries.observed_of(store, cell_id)
    rows = [s.observed for s in slices]
    seconds = sum(float(s.duration_s) for s in slices)
    own = [r.own_cpu_ms for r in rows]
    records = [r.wal_records for r in rows]
    return {
        "seconds": seconds, "slices": len(rows),
        "commits": sum(int(r.commits) for r in rows),
        "rollbacks": sum(int(r.rollbacks) for r in rows),
        "writes": sum(int(r.xids) for r in rows),
        "wal_bytes": sum(float(r.wal_bytes) for r in rows),
        "wal_records": (sum(int(v) for v in records if v is not None)
                        if records and None not in records else None),
        "sessions_max": max((int(r.sessions_max) for r in rows), default=0),
        "in_transaction_mean": (sum(float(s.observed.in_transaction_mean) * float(s.duration_s)
                                    for s in slices) / seconds if seconds else 0.0),
        "own_queries": sum(int(r.own_queries) for r in rows),
        "own_cpu_ms": (sum(float(v) for v in own if v is not None)
                       if own and None not in own else None),
        "cpu_note": next((r.cpu_note for r in rows if r.cpu_note), None),
    }


def _state_changes(store: Store, cell_id: int) -> list[StateChange]:
    """Each standby's sync_state moves during the window (seconds since it began)."""
    changes: list[StateChange] = []
    last: dict[str, str | None] = {}
    offset = 0.0
    for r in store.repeats(cell_id):
        for s in queries.replication_samples_of(store, r.id):
            before = last.get(s.standby)
            if before is not None and before != s.sync_state:
                changes.append(StateChange(round(offset + float(s.t_s), 1), s.standby,
                                           f"{before} -> {s.sync_state}"))
            last[s.standby] = s.sync_state
        offset += float(r.duration_s)
    return changes


def _sync_standbys(replication: Sequence[ReplicationSummary]) -> list[str]:
    """Standbys that were synchronous (or quorum candidates) during the window."""
    return [str(r.standby) for r in replication
            if {"sync", "quorum"} & set(str(r.states or "").split(","))]


def _usable(machine: Mapping[str, JSON]) -> float | None:
    """The machine record's usable CPUs, None where it has none (a count, as stored:
    not made a float, so the JSON prints it as it was)."""
    stored: Any = machine.get("cpus_usable")
    cpus: float | None = stored
    return cpus


@dataclass(frozen=True)
class WindowFigures:
    """An observe cell's answer with the costs and the bottleneck model it was read
    from (``observe --serve`` exports every role's CPU and every ceiling of them)."""

    observation: Observation
    costs: CellCosts
    model: model.CellModel


def observation(store: Store, cell: StoredCell, machine: Mapping[str, JSON]) -> Observation:
    """Every figure of the answer for one observe cell, and its verdicts."""
    return window_figures(store, cell, machine).observation


def window_figures(store: Store, cell: StoredCell, machine: Mapping[str, JSON]
                   ) -> WindowFigures:
    """:func:`observation`, with the costs and the model it was read from."""
    cell_id = cell.id
    params = cell.params
    sums = _sums(store, cell_id)
    costs = cell_costs(store, cell_id)
    seconds = sums["seconds"] or 1e-9
    rate = sums["writes"] / seconds
    version = cluster_version(store, cell)
    shares = {(w["node"], w["role"]): w for w in costs.waits}
    backend = shares.get(("primary", "backend"))
    waits_known = not version.startswith("9.")
    sync_share = (float(backend["share"].get("IPC:SyncRep", 0.0))
                  if backend is not None and waits_known else None)
    built = model.cell_model(store, cell, model.series_index([cell]), machine)
    bounds = {b.resource: b for b in built.bounds}
    roles = {(r["node"], r["role"]): r for r in costs.roles}
    replication = tuple(costs.replication)
    walsenders = []
    for name in _sync_standbys(replication):
        role = roles.get(("primary", f"walsender:{name}"))
        cpu = role["cpu_us_per_commit"] if role else None
        bound = bounds.get(f"walsender:{name}")
        walsenders.append(WalsenderLoad(
            name, cpu,
            (float(cpu["mean"]) * rate / 1e6 if cpu and cpu["mean"] is not None else None),
            bound.max_tps.mean if bound else None,
            bound.max_tps.mean / rate if bound and rate > 0 else None))
    capacity = [b for b in built.bounds if b.kind != "clients"]
    lowest = capacity[0] if capacity else None
    found = Observation(
        idx=cell.idx, label=cell.label, version=version,
        synchronous_commit=params.get("synchronous_commit"),
        synchronous_standby_names=params.get("synchronous_standby_names"),
        seconds=sums["seconds"], slices=sums["slices"],
        writes_per_s=rate, writes_ci=(cell.tps_ci_low, cell.tps_ci_high),
        commits_per_s=sums["commits"] / seconds,
        rollbacks_per_s=sums["rollbacks"] / seconds,
        wal_mb_per_s=sums["wal_bytes"] / seconds / 1e6,
        wal_records_per_s=(sums["wal_records"] / seconds
                           if sums["wal_records"] is not None else None),
        sessions_max=sums["sessions_max"],
        in_transaction_mean=sums["in_transaction_mean"],
        in_server_ms=cell.lat_mean_ms,
        sync_wait_share=sync_share,
        waiting_backends_mean=(sync_share * sums["in_transaction_mean"]
                               if sync_share is not None else None),
        backend_waits=dict(list(backend["share"].items())[:6]) if backend else {},
        walsenders=tuple(walsenders), replication=replication,
        state_changes=tuple(_state_changes(store, cell_id)),
        lowest_bound=lowest,
        headroom=lowest.max_tps.mean / rate if lowest and rate > 0 else None,
        cpus=built.cpus if built.bounds else _usable(machine),
        cpu_note=sums["cpu_note"],
        own=ObserverCost((sums["own_cpu_ms"] / 1000.0 / seconds
                          if sums["own_cpu_ms"] is not None else None),
                         sums["own_queries"] / seconds),
        notes=tuple(cell.notes),
        anatomy=costs.anatomy)
    return WindowFigures(dataclasses.replace(found, verdicts=tuple(verdicts(found))), costs,
                         built)


def verdicts(o: Observation) -> list[Verdict]:
    found: list[Verdict] = []
    rate = float(o.writes_per_s)
    share = o.sync_wait_share
    level = str(o.synchronous_commit or "")
    waiting_level = level in WAITING_LEVELS and bool(o.synchronous_standby_names)
    if rate <= 0:
        return [Verdict("no writes", "unknown", "no transaction wrote during the window: "
                        "there is no commit to judge", {"seconds": round(o.seconds, 1)},
                        ["observe while the application writes"])]
    if share is None:
        found.append(Verdict(
            "commit wait share", "unknown",
            f"PostgreSQL {o.version or '9.6'} shows no wait event while a commit waits "
            "for a standby: the share of commit time spent waiting cannot be measured; "
            "what follows rests on the walsender's CPU and the standbys' lags", {},
            ["PostgreSQL 10 or later shows the wait as IPC:SyncRep"]))
    if o.cpu_note:
        found.append(Verdict(
            "CPU per process", "unknown",
            f"CPU per process role was not measured ({o.cpu_note}): the walsender's load "
            "and the headroom are unknown; the verdicts rest on wait events and lags", {},
            ["run observe on the primary's host, or give --host NAME --hosts FILE"]))
    evidence: dict[str, float | str] = {"writes_per_s": round(rate, 1)}
    if share is not None:
        evidence.update(sync_wait_share=round(share, 3),
                        waiting_backends=round(float(o.waiting_backends_mean or 0.0), 2))
    busiest = _busiest(o)
    if busiest is not None:
        sender, busy = busiest
        evidence.update({"walsender": sender.standby, "walsender_cores_busy": round(busy, 3)})
        if sender.cpu_us is not None:  # known wherever cores_busy is: made of it
            evidence["walsender_cpu_us_per_commit"] = round(sender.cpu_us, 2)
    if o.anatomy is not None:
        for part in ("standby_wait", "wakeup_queue", "run_queue"):
            part_share = share_of_commit(o.anatomy, part)
            if part_share is not None:
                evidence[f"{part}_share_of_commit"] = round(part_share, 3)
    lag = _sync_lag(o, level)
    if lag is not None:
        evidence[f"{LAG_OF_LEVEL.get(level, 'flush_ms')[:-3]}_lag_ms"] = round(lag, 3)
    if not waiting_level:
        found.append(Verdict(
            "synchronous replication off", "high",
            f"commits do not wait for a standby here (synchronous_commit = {level or '?'}, "
            f"synchronous_standby_names = '{o.synchronous_standby_names or ''}'); sessions "
            "that set synchronous_commit themselves would show as IPC:SyncRep waits",
            evidence, []))
    elif share is None:
        if busiest is not None and busiest[1] >= BUSY:
            # no wait event to weigh (9.6): the walsender's load alone
            found.append(Verdict(
                "sync walsender busy", "medium",
                f"the sync walsender for {busiest[0].standby} keeps "
                f"{busiest[1]:.2f} of a core busy: near its own ceiling, and "
                "every commit waits on it", evidence,
                ["fewer, larger transactions (batching) divide its work per row"]))
    elif share >= WAIT_SOME:
        found.append(_waiting(o, share, busiest, lag, evidence))
    else:
        found.append(Verdict(
            "not synchronous replication", "high" if o.in_transaction_mean >= 1 else "medium",
            f"only {100 * share:.0f} % of the backends' time in a transaction waits for a "
            f"standby: synchronous replication is not what limits commits now; their time "
            f"goes to {_top_waits(o)}", evidence,
            ["look at the largest wait above (syncrep-lab costs shows every role's)"]))
    if o.in_transaction_mean < IDLE_BACKENDS:
        found.append(Verdict(
            "light load", "medium",
            f"on average {o.in_transaction_mean:.2f} client backends were in a "
            "transaction: the application's load sets the rate, the server waits for work",
            {"in_transaction_mean": round(o.in_transaction_mean, 3),
             "sessions_max": o.sessions_max},
            ["observe again at the busiest hour"]))
    if o.headroom is not None and o.lowest_bound is not None:
        b = o.lowest_bound
        what = (f"the sync walsender for {b.resource.split(':', 1)[1]} alone"
                if str(b.resource).startswith("walsender:") else
                f"the {o.cpus:g} CPUs" if b.kind == "machine" else str(b.resource))
        found.append(Verdict(
            "headroom", "medium",
            f"{what} would bind at ~{fmt.tps_short(b.max_tps.mean)} written transactions "
            f"per second, {o.headroom:.1f}x today's {rate:,.0f} (the bottleneck model on "
            "CPU per commit measured here; wait-bound ceilings come first if the wait grows)",
            {"bound": str(b.resource), "max_tps": round(b.max_tps.mean, 1),
             "max_tps_low": round(b.max_tps.low, 1), "max_tps_high": round(b.max_tps.high, 1),
             "headroom": round(o.headroom, 2)},
            [f"syncrep-lab model RUN_FOLDER --cores N: what {b.resource} would allow "
             "on N cores"]))
    order = {"high": 0, "medium": 1, "low": 2, "unknown": 3}
    return sorted(found, key=lambda v: order[v.confidence])


Busiest = tuple[WalsenderLoad, float]  # and the share of a core it kept busy


def _busiest(o: Observation) -> Busiest | None:
    """The sync walsender that kept the most of a core busy (None: no walsender's CPU
    was measured)."""
    return max(((w, w.cores_busy) for w in o.walsenders if w.cores_busy is not None),
               key=lambda wb: wb[1], default=None)


def _sync_lag(o: Observation, level: str) -> float | None:
    key = LAG_OF_LEVEL.get(level, "flush_ms")
    sync = set(_sync_standbys(o.replication))
    lags = [float(lag) for r in o.replication
            if r.standby in sync and (lag := getattr(r, key)) is not None]
    return min(lags) if lags else None


def _top_waits(o: Observation) -> str:
    parts = [f"{k} {100 * v:.0f} %" for k, v in o.backend_waits.items() if v >= 0.05]
    return ", ".join(parts[:4]) or "nothing in particular"


def _waiting(o: Observation, share: float, busiest: Busiest | None,
             lag: float | None, evidence: dict[str, float | str]) -> Verdict:
    """Commits spend a real part of their time waiting for a standby: why."""
    confidence = "high" if share >= WAIT_MOST else "medium"
    said = (f"{100 * share:.0f} % of the backends' time in a transaction waits for a "
            f"standby (IPC:SyncRep; {o.waiting_backends_mean or 0.0:.1f} backends wait at "
            "once)")
    if busiest is not None and busiest[1] >= BUSY:
        return Verdict(
            "sync walsender saturated", confidence,
            f"{said}, and the sync walsender for {busiest[0].standby} keeps "
            f"{busiest[1]:.2f} of a core busy: it releases the waiters one by "
            "one under SyncRepLock, and that single process sets the ceiling", evidence,
            ["fewer, larger transactions (batching) divide its work per row",
             "a faster core for the primary; several smaller primaries (the seed's remedy)",
             "syncrep-lab run with the same settings measures what the ceiling is"])
    if lag is not None and o.in_server_ms and lag >= 0.5 * float(o.in_server_ms):
        return Verdict(
            "standby or network", confidence,
            f"{said}; the sync standby's lag is {lag:.2f} ms of {float(o.in_server_ms):.2f} "
            "ms a transaction spends in the server: the time goes to the wire and the "
            "standby's WAL flush, not to the primary", evidence,
            ["measure the round trip between the hosts; a commit costs at least one",
             "faster WAL storage on the standby, or synchronous_commit = remote_write",
             "ANY 1 (b, c) lets the faster of two standbys answer"])
    return Verdict(
        "commit wait", confidence,
        f"{said}; neither the sync walsender's CPU nor the standby's lag explains it alone",
        evidence, ["syncrep-lab run on a copy of this setup shows where the time goes "
                   "(flame graphs, wake-ups per commit)"])


def observed_cells(store: Store, run_id: int, machine: Mapping[str, JSON]
                   ) -> list[CellDiagnosis]:
    """An observe run's windows as the diagnosis gives a run's cells (``diagnose``, the
    report): each one's verdicts, with its observation."""
    return [ObservedCell(o.idx, o.label, o.writes_per_s, None, (), o.verdicts,
                         in_words(o.anatomy) if o.anatomy else None, anatomy_key=True,
                         observation=o)
            for o in (observation(store, c, machine)
                      for c in store.cells(run_id) if c.status == "done")]


def run_figures(folder: Path, idx: int) -> WindowFigures:
    """The figures of the observe window stored as cell ``idx`` of ``folder``."""
    store = Store(folder, create=False)
    try:
        run = store.run()
        (cell,) = [c for c in store.cells(run.id) if c.idx == idx]
        return window_figures(store, cell, run.machine)
    finally:
        store.close()


def run_observations(folder: Path) -> list[Observation]:
    store = Store(folder, create=False)
    try:
        run = store.run()
        return [observation(store, c, run.machine) for c in store.cells(run.id)
                if c.status == "done"]
    finally:
        store.close()
