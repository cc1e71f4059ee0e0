"""The answer to an observation of a live cluster (``syncrep-lab observe``): is
synchronous replication what limits it, and how much headroom is left.

Read from the store like every analysis (observe/record.py says what an observe run's
rows mean), so ``observe``, ``diagnose`` and the report give the same answer:

- **the wait**: the share of the client backends' time in a transaction spent in
  ``IPC:SyncRep``, waiting for a standby, and how many backends wait at once;
- **the sync walsender**: its CPU per written transaction (/proc), the share of a core
  it keeps busy now, and the rate at which it alone would be busy all the time (the
  bottleneck model's bound, analysis/model.py): the headroom is that over today's rate;
- **the standbys**: sync states; flush and replay lags, pg_stat_replication's and the
  lag from WAL positions (bytes behind over the WAL's rate), the latter trusted where
  they disagree beyond their noise; each walreceiver's time in a WAL sync and write
  (its wait events on the standby), which names a slow sync standby without the lags;
- **the headroom**: the lowest of every ceiling the answer knows over today's rate:
  each process's and the machine's CPU (the bottleneck model) and the wait's ceiling at
  this concurrency (Little's law on the sampled IPC:SyncRep share). A cluster at its
  wait ceiling reads 1x. A sync standby's walreceiver busy all the time is no ceiling:
  its flush takes as long for one commit as for sixteen (bench/headroom_accuracy.py: a
  standby flushing all the time at half the rate its clients could reach);
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
from syncrep_lab.analysis.verdict import (
    LAG_OF_LEVEL,
    SYNC_EVENTS,
    WRITE_EVENTS,
    CellDiagnosis,
    Verdict,
)
from syncrep_lab.json_form import JSON, json_value
from syncrep_lab.pg.replication import WAITING_LEVELS
from syncrep_lab.store import Store, StoredCell, queries
from syncrep_lab.store.queries import ReplicationSummary

WAIT_MOST = 0.5  # of the backends' in-transaction time: the wait is most of a commit
WAIT_SOME = 0.1  # below this, synchronous replication is not what commits spend time on
BUSY = 0.7  # of one core: a single process this busy is near its own ceiling
IDLE_BACKENDS = 0.5  # client backends in a transaction on average: the load is light
# a sync standby's walreceiver in a WAL sync this much of its time: its flush binds
# (its wait events on the standby; no lag column needed)
FLUSHING = 0.5
FLUSHING_SURE = 0.8
# the two lags disagree beyond their noise: one more than twice the other and more than
# a millisecond apart (the view's lags are the LagTracker's samples, positions are read
# at --hz: each is good to about one sampling interval)
LAGS_APART = 2.0
LAGS_APART_MS = 1.0
RECEIVER_IDLE = "Activity:WalReceiverMain"  # waiting for WAL to arrive
WAIT_CEILING = "commit wait at this concurrency"


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
class DiskLoad:
    """The block device under a server's WAL over the window (/proc/diskstats)."""

    device: str
    writes_per_s: float
    write_mb_per_s: float
    busy: float | None  # the share of the window it had an I/O in flight

    @classmethod
    def of(cls, d: queries.DiskMeans) -> DiskLoad:
        seconds = float(d.seconds) or 1e-9
        return cls(str(d.device), int(d.writes) / seconds,
                   int(d.write_bytes) / seconds / 1e6, d.busy_share)

    def words(self) -> str:
        busy = f"{100 * self.busy:.0f} % busy" if self.busy is not None else "busy unknown"
        return (f"its disk {self.device} {busy} at {self.writes_per_s:,.0f} writes/s "
                f"({self.write_mb_per_s:,.2f} MB/s)")

    def to_json(self) -> dict[str, JSON]:
        return {"device": self.device, "writes_per_s": self.writes_per_s,
                "write_mb_per_s": self.write_mb_per_s, "busy": self.busy}


@dataclass(frozen=True)
class StandbyLoad:
    """A standby during the window: how its walreceiver spent its time (the shares of
    its wait-event samples; None where the standby was not watched or is 9.6), and its
    flush lag both ways: pg_stat_replication's and from WAL positions."""

    standby: str
    sync: bool  # synchronous (or a quorum candidate) during the window
    syncing: float | None  # its walreceiver's share of samples in a WAL sync
    writing: float | None  # ... in a WAL write
    busy: float | None  # ... not waiting for WAL to arrive
    view_flush_ms: float | None
    position_flush_ms: float | None  # bytes behind over the window's WAL rate
    sync_call_us: float | None  # one sync's time, where --anatomy split its half
    syncs: int
    disk: DiskLoad | None = None  # the block device under its WAL, where it was read

    @property
    def lags_disagree(self) -> bool:
        """The two flush lags apart beyond their noise (LAGS_APART, LAGS_APART_MS)."""
        a, b = self.view_flush_ms, self.position_flush_ms
        if a is None or b is None:
            return False
        low, high = sorted((a, b))
        return high - low > LAGS_APART_MS and high > LAGS_APART * low

    @property
    def flush_ms(self) -> float | None:
        """The flush lag the answer rests on: from positions where the two disagree."""
        if self.lags_disagree or self.view_flush_ms is None:
            return self.position_flush_ms
        return self.view_flush_ms

    def to_json(self) -> dict[str, JSON]:
        return {"standby": self.standby, "sync": self.sync, "syncing": self.syncing,
                "writing": self.writing, "busy": self.busy,
                "view_flush_ms": self.view_flush_ms,
                "position_flush_ms": self.position_flush_ms,
                "lags_disagree": self.lags_disagree, "flush_ms": self.flush_ms,
                "sync_call_us": self.sync_call_us, "syncs": self.syncs,
                "disk": self.disk.to_json() if self.disk is not None else None}


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
    standbys: tuple[StandbyLoad, ...]
    replication: tuple[ReplicationSummary, ...]
    state_changes: tuple[StateChange, ...]
    # every ceiling the headroom is the lowest of: CPU (the model's) and the wait's at
    # this concurrency; lowest first
    bounds: tuple[model.Bound, ...]
    lowest_bound: model.Bound | None
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
            "standbys": [b.to_json() for b in self.standbys],
            "replication": [json_value(asdict(r)) for r in self.replication],
            "state_changes": [c.to_json() for c in self.state_changes],
            "bounds": [b.to_json() for b in self.bounds],
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
    devices = params.get("wal_devices") or {}
    measured = {str(d.device): DiskLoad.of(d) for d in queries.disk_means(store, cell_id)
                if not d.host}
    standbys = _standby_loads(costs.waits, replication, sums["wal_bytes"] / seconds,
                              costs.anatomy, {node: measured[dev] for node, dev
                                              in devices.items() if dev in measured})
    in_tx = sums["in_transaction_mean"]
    interval = (cell.tps_ci_low, cell.tps_ci_high)
    ceilings = [b for b in built.bounds if b.kind != "clients"]
    waiting = (params.get("synchronous_commit") in WAITING_LEVELS
               and bool(params.get("synchronous_standby_names")))
    if waiting and sync_share:
        ceilings.append(_wait_ceiling(rate, sync_share, sums["sessions_max"], in_tx,
                                      interval))
    ceilings.sort(key=lambda b: b.max_tps.mean)
    lowest = ceilings[0] if ceilings else None
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
        walsenders=tuple(walsenders), standbys=standbys, replication=replication,
        state_changes=tuple(_state_changes(store, cell_id)),
        bounds=tuple(ceilings), lowest_bound=lowest,
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


def _share(waits: Sequence[Mapping[str, Any]], node: str, role: str,
           events: Sequence[str]) -> float | None:
    """A role's share of samples in ``events`` (None: the role was not sampled)."""
    row = next((w for w in waits if (w["node"], w["role"]) == (node, role)), None)
    if row is None:
        return None
    return sum(float(row["share"].get(e, 0.0)) for e in events)


def _standby_loads(waits: Sequence[Mapping[str, Any]],
                   replication: Sequence[ReplicationSummary], wal_bytes_per_s: float,
                   anatomy: Anatomy | None, disks: Mapping[str, DiskLoad]
                   ) -> tuple[StandbyLoad, ...]:
    """Every standby in pg_stat_replication: its walreceiver's time (where the standby
    was watched) and its flush lag both ways."""
    sync = set(_sync_standbys(replication))
    halves = {h.standby.removeprefix("standby:"): h
              for h in (anatomy.standby if anatomy is not None else ())}
    out = []
    for r in replication:
        name = str(r.standby)
        idle = _share(waits, name, "walreceiver", (RECEIVER_IDLE,))
        half = halves.get(name)
        out.append(StandbyLoad(
            name, name in sync, _share(waits, name, "walreceiver", SYNC_EVENTS),
            _share(waits, name, "walreceiver", WRITE_EVENTS),
            None if idle is None else max(0.0, 1.0 - idle),
            float(r.flush_ms) if r.flush_ms is not None else None,
            (1000.0 * float(r.flush_bytes) / wal_bytes_per_s
             if r.flush_bytes is not None and wal_bytes_per_s > 0 else None),
            half.sync_us if half is not None else None, half.syncs if half else 0,
            disks.get(name)))
    return tuple(out)


def _scaled(tps: float, rate: float, interval: tuple[float | None, float | None]
            ) -> model.Interval:
    """A ceiling read in proportion to the window's rate, with the rate's interval over
    slices carried to it (the slices' spread is the one the window measured)."""
    low, high = interval
    return model.Interval(tps, tps * low / rate if low else tps,
                          tps * high / rate if high else tps)


def _wait_ceiling(rate: float, share: float, sessions: int, in_tx: float,
                  interval: tuple[float | None, float | None]) -> model.Bound:
    """The wait's ceiling at this concurrency (Little's law): the sessions seen, each
    waiting ``share`` of its time in a transaction for a standby, can commit no faster
    than the sessions over the wait a commit, however fast the rest became. At a share
    of 1 with every session in a transaction it is today's rate: 1x."""
    wait_s = share * in_tx / rate  # a commit's wait, Little's law on the waiting ones
    tps = max(sessions, in_tx) / wait_s
    return model.Bound(WAIT_CEILING, "wait",
                       model.Interval(wait_s * 1e6, wait_s * 1e6, wait_s * 1e6),
                       float(max(sessions, in_tx)), _scaled(tps, rate, interval),
                       "Little's law: the sessions seen over a commit's wait for a standby "
                       "(the IPC:SyncRep share of their time in a transaction)")


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
    for b in o.standbys:
        if b.lags_disagree:
            found.append(Verdict(
                "lags disagree", "medium",
                f"standby {b.standby}'s flush lag in pg_stat_replication "
                f"({float(b.view_flush_ms or 0):,.2f} ms) and from WAL positions "
                f"({float(b.position_flush_ms or 0):,.2f} ms) disagree beyond their noise: "
                "the answer rests on positions (the view's lags are sampled by the "
                "walsender when replies come, and stand still or lag behind a standby "
                "that answers late)",
                {"standby": b.standby, "view_flush_ms": round(float(b.view_flush_ms or 0), 3),
                 "position_flush_ms": round(float(b.position_flush_ms or 0), 3)},
                ["compare pg_current_wal_lsn() with the standby's flush_lsn over time"]))
    if o.in_transaction_mean < IDLE_BACKENDS:
        found.append(Verdict(
            "light load", "medium",
            f"on average {o.in_transaction_mean:.2f} client backends were in a "
            "transaction: the application's load sets the rate, the server waits for work",
            {"in_transaction_mean": round(o.in_transaction_mean, 3),
             "sessions_max": o.sessions_max},
            ["observe again at the busiest hour"]))
    if o.headroom is not None and o.lowest_bound is not None:
        found.append(_headroom(o, o.lowest_bound, o.headroom, rate))
    order = {"high": 0, "medium": 1, "low": 2, "unknown": 3}
    return sorted(found, key=lambda v: order[v.confidence])


def _headroom(o: Observation, b: model.Bound, headroom: float, rate: float) -> Verdict:
    """The lowest ceiling over today's rate, said by what sets it."""
    resource = str(b.resource)
    if b.kind == "wait":
        what = (f"the wait for the standby at this concurrency ({b.capacity:g} sessions, "
                f"{float(b.demand_us.mean if b.demand_us else 0) / 1000:,.2f} ms a commit "
                "in IPC:SyncRep; Little's law)")
    elif resource.startswith("walsender:"):
        what = f"the sync walsender for {resource.split(':', 1)[1]} alone"
    else:
        what = f"the {o.cpus:g} CPUs" if b.kind == "machine" else resource
    others = ", ".join(f"{x.resource} {fmt.tps_short(x.max_tps.mean)}"
                       for x in o.bounds[1:4])
    return Verdict(
        "headroom", "medium",
        f"{what} would bind at ~{fmt.tps_short(b.max_tps.mean)} written transactions per "
        f"second, {headroom:.1f}x today's {rate:,.0f} (the lowest of the ceilings known "
        f"here{'; then ' + others if others else ''})",
        {"bound": resource, "bound_kind": b.kind, "max_tps": round(b.max_tps.mean, 1),
         "max_tps_low": round(b.max_tps.low, 1), "max_tps_high": round(b.max_tps.high, 1),
         "headroom": round(headroom, 2)},
        ["more sessions raise the wait's ceiling only where the standby batches more "
         "commits a flush: syncrep-lab run on a copy measures it" if b.kind == "wait" else
         f"syncrep-lab model RUN_FOLDER --cores N: what {resource} would allow on N cores"])


Busiest = tuple[WalsenderLoad, float]  # and the share of a core it kept busy


def _busiest(o: Observation) -> Busiest | None:
    """The sync walsender that kept the most of a core busy (None: no walsender's CPU
    was measured)."""
    return max(((w, w.cores_busy) for w in o.walsenders if w.cores_busy is not None),
               key=lambda wb: wb[1], default=None)


def _sync_lag(o: Observation, level: str) -> float | None:
    """The sync standbys' lag of the level (the least of them): a flush lag from WAL
    positions where pg_stat_replication's disagrees with it beyond their noise."""
    key = LAG_OF_LEVEL.get(level, "flush_ms")
    if key == "flush_ms":
        lags = [b.flush_ms for b in o.standbys if b.sync and b.flush_ms is not None]
        return min(lags) if lags else None
    sync = set(_sync_standbys(o.replication))
    found = [float(lag) for r in o.replication
             if r.standby in sync and (lag := getattr(r, key)) is not None]
    return min(found) if found else None


def _slow_standby(o: Observation, said: str, confidence: str,
                  evidence: dict[str, float | str]) -> Verdict | None:
    """A sync standby whose walreceiver is inside a WAL sync most of its time: its flush
    binds, named from its wait events on the standby (no lag column needed), with what
    the other standbys do and what quorum would give."""
    flushing = [b for b in o.standbys if b.sync and (b.syncing or 0.0) >= FLUSHING]
    if not flushing:
        return None
    slow = max(flushing, key=lambda b: b.syncing or 0.0)
    share = float(slow.syncing or 0.0)
    per_call = ""
    if slow.sync_call_us is not None and slow.syncs:
        per_call = (f"; the fdatasync call itself {slow.sync_call_us / 1000:,.2f} ms over "
                    f"{slow.syncs:,} calls")
        inside = slow.sync_call_us * slow.syncs / 1e6
        if inside < 0.5 * share * float(o.seconds):
            # the wait event spans more than the call: a sleep or a lock before it
            per_call += (f", {inside:,.1f} s of the {share * float(o.seconds):,.1f} s the "
                         "wait event spans: the rest is before the call")
    lag = (f"; its flush lag from WAL positions is {slow.position_flush_ms:,.1f} ms"
           if slow.position_flush_ms is not None else "")
    if slow.disk is not None:
        lag += f"; {slow.disk.words()}"
        evidence.update({"disk": slow.disk.device,
                         "disk_writes_per_s": round(slow.disk.writes_per_s, 1)})
        if slow.disk.busy is not None:
            evidence["disk_busy"] = round(slow.disk.busy, 3)
            if slow.disk.busy < FLUSHING:
                # the flush waits while the device is idle: held above it
                lag += (" (the device is idle while the flush waits: a limit above it, a "
                        "volume's IOPS or throughput cap or an I/O cgroup)")
    others = [b for b in o.standbys if b is not slow and b.syncing is not None]
    beside = "".join(f"; {b.standby}'s walreceiver {100 * float(b.syncing or 0):.0f} %"
                     + (f" (flush lag {b.flush_ms:,.1f} ms)" if b.flush_ms is not None
                        else "") for b in others)
    evidence.update({"slow_standby": slow.standby,
                     "walreceiver_sync_share": round(share, 3)})
    if slow.position_flush_ms is not None:
        evidence["position_flush_lag_ms"] = round(slow.position_flush_ms, 3)
    if slow.sync_call_us is not None:
        evidence["sync_call_us"] = round(slow.sync_call_us, 1)
    steps = [f"a faster WAL disk on {slow.standby} (its volume's IOPS or throughput limit, "
             "a neighbour on it, its write cache)",
             f"synchronous_commit = remote_write waits for {slow.standby}'s write, not "
             "its flush"]
    quick = [b for b in others if (b.syncing or 0.0) < FLUSHING and b.flush_ms is not None]
    if quick:
        c = min(quick, key=lambda b: float(b.flush_ms or 0.0))
        steps.insert(1, _quorum_step(o, slow, c))
    return Verdict(
        "standby flush", "high" if share >= FLUSHING_SURE and confidence == "high"
        else "medium",
        f"{said}; standby {slow.standby}'s WAL flush binds: its walreceiver spends "
        f"{100 * share:.0f} % of its time in a WAL sync (IO:WalSync){per_call}{lag}"
        f"{beside}",
        evidence, steps)


def _quorum_step(o: Observation, slow: StandbyLoad, quick: StandbyLoad) -> str:
    """What ANY 1 over the slow standby and a quick one predicts at this concurrency
    (Little's law): a commit's wait for ``slow`` replaced by ``quick``'s flush lag."""
    names = ", ".join(sorted({slow.standby, quick.standby}))
    text = (f"quorum ANY 1 ({names}): {quick.standby} flushes with a lag of "
            f"{float(quick.flush_ms or 0):,.2f} ms")
    share, rate = o.sync_wait_share, float(o.writes_per_s)
    if share is None or rate <= 0 or o.in_transaction_mean <= 0:
        return text
    in_server = o.in_transaction_mean / rate
    faster = in_server * (1 - share) + float(quick.flush_ms or 0) / 1000
    if faster <= 0:
        return text
    predicted = o.in_transaction_mean / faster
    # the wait gone, the next ceiling that is no wait's binds first (the CPUs, say)
    capped = next((b for b in o.bounds if b.kind != "wait"
                   and b.max_tps.mean < predicted), None)
    if capped is not None:
        return (f"{text}: at this concurrency the wait would no longer bind; "
                f"{capped.resource} would, at ~{fmt.tps_short(capped.max_tps.mean)} tps, "
                f"{capped.max_tps.mean / rate:.1f}x today's (Little's law alone gives "
                f"~{fmt.tps_short(predicted)}, if {quick.standby} keeps its pace)")
    return (f"{text}: at this concurrency that predicts ~{fmt.tps_short(predicted)} tps, "
            f"{predicted / rate:.1f}x today's (Little's law, if {quick.standby} keeps "
            "that pace under the load)")


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
    slow = _slow_standby(o, said, confidence, evidence)
    if slow is not None:
        return slow
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
