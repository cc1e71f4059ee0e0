"""The read queries of the analysis and the report: the one place that knows their SQL.

Each returns the table's row type (store/rows.py) or, for a query that groups or joins,
a small frozen dataclass named for what it holds, so what a caller reads is checked by
mypy and a column is renamed here alone. Queries over several repeats return each row
beside its repeat id, ``(repeat_id, row)``, in the order SQLite gives them; queries
over one repeat return its rows. Nothing here computes a figure: the grouping, order
and null handling are SQL's, and the analysis does the rest.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection
from dataclasses import dataclass, fields
from typing import Any, NamedTuple, TypeVar

from syncrep_lab.store.db import Store
from syncrep_lab.store.keys import cluster_key_text
from syncrep_lab.store.records import StoredRepeat
from syncrep_lab.store.rows import (
    AnatomyRow,
    CostRow,
    DurabilityRow,
    FaultEventRow,
    FlameGraphRow,
    GprofFunctionRow,
    GprofRoleRow,
    GuestRepeatRow,
    HostNumaRow,
    HostRepeatRow,
    KernelLockRow,
    LinkRow,
    ObservedRow,
    PlacementRow,
    ProbeRow,
    ProcCostRow,
    ReplicationSample,
    SampleRow,
    SchedRoleRow,
    StackFrameRow,
    WaitRow,
    WaitTimelineRow,
    WakeupRow,
)

Row = TypeVar("Row", bound=NamedTuple)


def _marks(ids: Collection[int]) -> str:
    """The placeholders of an SQL ``in (...)`` over these ids."""
    return ",".join("?" * len(ids))


def _columns(row_type: type[NamedTuple], alias: str = "") -> str:
    return ", ".join(f"{alias}{name}" for name in row_type._fields)


def _of_repeats(store: Store, table: str, row_type: type[Row], repeat_ids: Collection[int]
                ) -> list[tuple[int, Row]]:
    """Every row of ``table`` of these repeats, beside its repeat id (the table's order)."""
    rows = store.db.execute(f"select repeat_id, {_columns(row_type)} from {table} "
                            f"where repeat_id in ({_marks(repeat_ids)})", tuple(repeat_ids))
    return [(int(r[0]), row_type._make(r[1:])) for r in rows]


Grouped = TypeVar("Grouped")


def _grouped(store: Store, shape: type[Grouped], table: str, value: str,
             repeat_ids: Collection[int], *, ordered: bool = False) -> list[Grouped]:
    """``table``'s rows of these repeats, grouped by every field of the dataclass
    ``shape`` but its last, which is ``value`` (an SQL aggregate) over each group; in
    the fields' order when ``ordered``, else in SQLite's."""
    keys = ", ".join(f.name for f in fields(shape)[:-1])  # type: ignore[arg-type]
    order = f" order by {keys}" if ordered else ""
    return [shape(*r) for r in store.db.execute(
        f"select {keys}, {value} from {table} where repeat_id in ({_marks(repeat_ids)}) "
        f"group by {keys}{order}", tuple(repeat_ids))]


def _made(row_type: type[Row], rows: sqlite3.Cursor) -> list[Row]:
    return [row_type._make(r) for r in rows]


# --- clusters ------------------------------------------------------------------------


@dataclass(frozen=True)
class StoredCluster:
    """A cluster a run built (or attached to), as ``clusters`` keeps it."""

    cluster_key: str
    version: str | None
    bin_dir: str | None
    nodes_json: str | None
    settings_json: str | None
    build_json: str | None  # `pg build`'s description of the build (schema 10)


def clusters_of(store: Store, run_id: int) -> list[StoredCluster]:
    """The run's clusters, in the order they were stored."""
    return [StoredCluster(*r) for r in store.db.execute(
        "select cluster_key, version, bin_dir, nodes_json, settings_json, build_json "
        "from clusters "
        "where run_id = ? order by id", (run_id,))]


def primary_settings(store: Store, run_id: int, params: dict[str, Any]) -> dict[str, str]:
    """The non-default settings of the primary of the cluster a cell with ``params`` ran
    on, as the server had them when the cluster was made (read back)."""
    row = store.db.execute("select settings_json from clusters where run_id = ? and "
                           "cluster_key = ? order by id desc limit 1",
                           (run_id, cluster_key_text(params))).fetchone()
    try:
        settings = json.loads(row[0]) if row is not None and row[0] else {}
    except ValueError:
        return {}
    primary = settings.get("primary", {}) if isinstance(settings, dict) else {}
    return {k: str(v["setting"]) for k, v in primary.items()
            if isinstance(v, dict) and "setting" in v}


def primary_setting(store: Store, run_id: int, params: dict[str, Any],
                    name: str) -> str | None:
    """One of :func:`primary_settings`; None where the primary had it at its default."""
    return primary_settings(store, run_id, params).get(name)


def cluster_version(store: Store, run_id: int, cluster_key: str) -> str | None:
    """The server version of the cluster last stored under ``cluster_key``."""
    row = store.db.execute("select version from clusters where run_id = ? and cluster_key = ? "
                           "order by id desc limit 1", (run_id, cluster_key)).fetchone()
    return None if row is None or row[0] is None else str(row[0])


# --- repeats -------------------------------------------------------------------------


def last_measured_repeat(store: Store, cell_id: int) -> int | None:
    """The id of a cell's last measured (not probed) repeat."""
    row = store.db.execute("select id from repeats where cell_id = ? and probed = 0 "
                           "order by n desc limit 1", (cell_id,)).fetchone()
    return None if row is None else int(row[0])


def samples_of(store: Store, repeat_id: int) -> list[SampleRow]:
    """A repeat's per-second samples, in time order."""
    return _made(SampleRow, store.db.execute(
        f"select {_columns(SampleRow)} from samples where repeat_id = ? order by t_s",
        (repeat_id,)))


def mean_latency_with_waits(store: Store, repeat_ids: Collection[int]) -> float | None:
    """The mean of the mean latencies of those of these repeats whose wait events were
    sampled (None: none was)."""
    row = store.db.execute(
        f"select avg(lat_mean_ms) from repeats where id in ({_marks(repeat_ids)}) and id in "
        f"(select repeat_id from waits)", tuple(repeat_ids)).fetchone()
    return None if row is None or row[0] is None else float(row[0])


@dataclass(frozen=True)
class InstanceMeans:
    """One instance's figures, averaged over a cell's measured repeats."""

    instance: int
    tps: float
    lat_mean_ms: float | None
    lat_p99_ms: float | None


def instance_means(store: Store, cell_id: int) -> list[InstanceMeans]:
    """Each instance's mean figures over a cell's measured repeats, by instance."""
    return [InstanceMeans(*r) for r in store.db.execute(
        "select i.instance, avg(i.tps) as tps, avg(i.lat_mean_ms) as lat_mean_ms, "
        "avg(i.lat_p99_ms) as lat_p99_ms from instance_results i join repeats r "
        "on r.id = i.repeat_id where r.cell_id = ? and r.probed = 0 "
        "group by i.instance order by i.instance", (cell_id,))]


def watched_commits(store: Store, repeats: Collection[StoredRepeat]
                    ) -> dict[int, tuple[int, float]]:
    """Commits and TPS of each repeat as its probes saw them, by repeat id: a repeat of
    several instances is probed on its first (run/repeat.py), so its per-commit figures
    divide by instance 1's commits; any other repeat's are its own."""
    out = {r.id: (int(r.transactions), float(r.tps)) for r in repeats}
    ids = [r.id for r in repeats]
    for repeat_id, transactions, tps in store.db.execute(
            "select repeat_id, transactions, tps from instance_results where instance = 1 "
            f"and repeat_id in ({_marks(ids)})", tuple(ids)):
        out[repeat_id] = (int(transactions), float(tps))
    return out


# --- probes --------------------------------------------------------------------------


def probes_of(store: Store, repeat_ids: Collection[int]) -> list[tuple[int, ProbeRow]]:
    return _of_repeats(store, "probes", ProbeRow, repeat_ids)


@dataclass(frozen=True)
class ProbeCount:
    """How many of a run's repeats a probe ended with this status (and reason) in."""

    probe: str
    status: str
    reason: str | None
    repeats: int


def probe_counts(store: Store, run_id: int) -> list[ProbeCount]:
    """Each probe's outcomes over a run's repeats, by probe."""
    return [ProbeCount(*r) for r in store.db.execute(
        "select p.probe, p.status, p.reason, count(*) as repeats from probes p "
        "join repeats r on r.id = p.repeat_id join cells c on c.id = r.cell_id "
        "where c.run_id = ? group by p.probe, p.status, p.reason order by p.probe",
        (run_id,))]


def costs_of(store: Store, repeat_ids: Collection[int]) -> list[tuple[int, CostRow]]:
    return _of_repeats(store, "costs", CostRow, repeat_ids)


def anatomy_of(store: Store, repeat_ids: Collection[int]) -> list[tuple[int, AnatomyRow]]:
    """The commit anatomy's aggregates of these repeats (probes/anatomy.py)."""
    return _of_repeats(store, "anatomy", AnatomyRow, repeat_ids)


def proc_costs_of(store: Store, repeat_ids: Collection[int]
                  ) -> list[tuple[int, ProcCostRow]]:
    return _of_repeats(store, "proc_costs", ProcCostRow, repeat_ids)


def sched_roles_of(store: Store, repeat_ids: Collection[int]
                   ) -> list[tuple[int, SchedRoleRow]]:
    return _of_repeats(store, "sched_roles", SchedRoleRow, repeat_ids)


def wakeups_of(store: Store, repeat_ids: Collection[int]) -> list[tuple[int, WakeupRow]]:
    return _of_repeats(store, "wakeups", WakeupRow, repeat_ids)


@dataclass(frozen=True)
class WaitTotal:
    """Samples of one wait event of a node's role, summed over repeats."""

    node: str
    role: str
    wait_type: str
    wait_event: str
    samples: int


def waits_of(store: Store, repeat_ids: Collection[int]) -> list[tuple[int, WaitRow]]:
    """Every wait event sampled in these repeats, per repeat (the sampler's ticks with
    it, for an interval on a share: analysis/evidence.py)."""
    return _of_repeats(store, "waits", WaitRow, repeat_ids)


def wait_totals(store: Store, repeat_ids: Collection[int]) -> list[WaitTotal]:
    """Every wait event of every node and role, its samples summed over these repeats."""
    return _grouped(store, WaitTotal, "waits", "sum(samples)", repeat_ids)


def wait_timeline_of(store: Store, repeat_id: int, node: str, role: str
                     ) -> list[WaitTimelineRow]:
    """A role's wait kinds second by second in one repeat, in time order."""
    return _made(WaitTimelineRow, store.db.execute(
        f"select {_columns(WaitTimelineRow)} from wait_timeline where repeat_id = ? "
        "and node = ? and role = ? order by t_s", (repeat_id, node, role)))


# --- replication ---------------------------------------------------------------------


def replication_samples_of(store: Store, repeat_id: int) -> list[ReplicationSample]:
    """A repeat's pg_stat_replication samples, in time order."""
    return _made(ReplicationSample, store.db.execute(
        f"select {_columns(ReplicationSample)} from replication_samples where repeat_id = ? "
        "order by t_s", (repeat_id,)))


def has_replication_samples(store: Store, repeat_id: int) -> bool:
    return store.db.execute("select 1 from replication_samples where repeat_id = ? limit 1",
                            (repeat_id,)).fetchone() is not None


@dataclass(frozen=True)
class ReplicationSummary:
    """One standby over a set of repeats: the sync states it was seen in (comma
    separated) and its lags, mean and worst (null where never reported)."""

    standby: str
    states: str | None
    n: int
    write_ms: float | None
    flush_ms: float | None
    flush_max_ms: float | None
    replay_ms: float | None
    replay_max_ms: float | None
    flush_bytes: float | None
    flush_max_bytes: float | None


def replication_summary(store: Store, repeat_ids: Collection[int]
                        ) -> list[ReplicationSummary]:
    """Each standby's states and lags over these repeats, by standby."""
    return [ReplicationSummary(*r) for r in store.db.execute(
        f"select standby, group_concat(distinct sync_state) as states, count(*) as n, "
        f"avg(write_lag_ms) as write_ms, avg(flush_lag_ms) as flush_ms, "
        f"max(flush_lag_ms) as flush_max_ms, avg(replay_lag_ms) as replay_ms, "
        f"max(replay_lag_ms) as replay_max_ms, avg(flush_lag_bytes) as flush_bytes, "
        f"max(flush_lag_bytes) as flush_max_bytes from replication_samples "
        f"where repeat_id in ({_marks(repeat_ids)}) group by standby order by standby",
        tuple(repeat_ids))]


# --- stacks and NUMA -----------------------------------------------------------------


def last_flamegraphs(store: Store, repeat_ids: Collection[int]
                     ) -> list[tuple[int, FlameGraphRow]]:
    """The flame graphs of the last of these repeats that has any, by node and role."""
    return [(int(r[0]), FlameGraphRow._make(r[1:])) for r in store.db.execute(
        f"select repeat_id, {_columns(FlameGraphRow)} from flamegraphs where repeat_id = "
        f"(select max(repeat_id) from flamegraphs where repeat_id in ({_marks(repeat_ids)})) "
        f"order by node, role", tuple(repeat_ids))]


def stack_frames_of(store: Store, repeat_id: int, node: str, role: str
                    ) -> list[StackFrameRow]:
    """A role's summarised frames in one repeat, the most inclusive first."""
    return _made(StackFrameRow, store.db.execute(
        f"select {_columns(StackFrameRow)} from stack_frames where repeat_id = ? and "
        "node = ? and role = ? order by inclusive_us desc", (repeat_id, node, role)))


def gprof_of(store: Store, repeat_ids: Collection[int]
             ) -> tuple[list[tuple[int, GprofRoleRow]], list[tuple[int, GprofFunctionRow]]]:
    """The gprof profiles of these repeats: per role, and per function of each role."""
    return (_of_repeats(store, "gprof_roles", GprofRoleRow, repeat_ids),
            _of_repeats(store, "gprof_functions", GprofFunctionRow, repeat_ids))


def host_repeats_of(store: Store, repeat_ids: Collection[int]
                    ) -> list[tuple[int, HostRepeatRow]]:
    """The SSH hosts' clocks and busy CPUs in these repeats."""
    return _of_repeats(store, "host_repeats", HostRepeatRow, repeat_ids)


def kernel_locks_of(store: Store, repeat_ids: Collection[int]
                    ) -> list[tuple[int, KernelLockRow]]:
    return _of_repeats(store, "kernel_locks", KernelLockRow, repeat_ids)


def host_numa_of(store: Store, repeat_ids: Collection[int]
                 ) -> list[tuple[int, HostNumaRow]]:
    """Each NUMA node's allocation counters of the hosts with several, in these repeats."""
    return _of_repeats(store, "host_numa", HostNumaRow, repeat_ids)


def guest_repeats_of(store: Store, repeat_ids: Collection[int]
                     ) -> list[tuple[int, GuestRepeatRow]]:
    """The guests' vCPUs and QEMU seen from this machine in these repeats."""
    return _of_repeats(store, "guest_repeats", GuestRepeatRow, repeat_ids)


@dataclass(frozen=True)
class RoleFrame:
    """A role's on-CPU µs in a flame graph, and the inclusive µs of one frame in it
    (None: the frame was not among the role's summarised frames)."""

    cpu_us: int
    frame_us: int | None


def last_role_frame(store: Store, cell_id: int, node: str, role: str, frame: str
                    ) -> RoleFrame | None:
    """``frame`` in the role's flame graph of the cell's last repeat that has one."""
    row = store.db.execute(
        "select f.cpu_us as total, (select max(s.inclusive_us) from stack_frames s "
        " where s.repeat_id = f.repeat_id and s.node = f.node and s.role = f.role "
        " and s.frame = ?) as releasing "
        "from flamegraphs f join repeats r on r.id = f.repeat_id "
        "where r.cell_id = ? and f.node = ? and f.role = ? "
        "order by f.repeat_id desc limit 1", (frame, cell_id, node, role)).fetchone()
    return None if row is None else RoleFrame(row["total"], row["releasing"])


@dataclass(frozen=True)
class NumaPagesMean:
    """A role's pages on one NUMA node in one phase, averaged over repeats."""

    node: str
    role: str
    phase: str
    numa_node: str
    pages: float


def numa_pages_mean(store: Store, repeat_ids: Collection[int]) -> list[NumaPagesMean]:
    return _grouped(store, NumaPagesMean, "numa_pages", "avg(pages)", repeat_ids,
                    ordered=True)


# --- placement -----------------------------------------------------------------------


def placement_of(store: Store, repeat_id: int) -> list[PlacementRow]:
    """What the kernel gave each role in one repeat, by instance, node and role."""
    return _made(PlacementRow, store.db.execute(
        f"select {_columns(PlacementRow)} from placement where repeat_id = ? "
        "order by instance, node, role", (repeat_id,)))


def links_of(store: Store, repeat_id: int) -> list[LinkRow]:
    """The emulated links of one repeat as applied, by instance and ends."""
    return _made(LinkRow, store.db.execute(
        f"select {_columns(LinkRow)} from links where repeat_id = ? "
        "order by instance, a, b", (repeat_id,)))


@dataclass(frozen=True)
class QuotaMeans:
    """A role's CPU quota over a cell's measured repeats: what was asked and set, and
    how often it bound (the sums of cpu.stat's counters over the repeats)."""

    instance: int
    node: str
    role: str
    share: float
    quota_us: int
    period_us: int
    repeats: int
    periods: int
    throttled: int
    throttled_ms: float
    seconds: float  # the time the counters ran over, summed over the repeats

    @property
    def throttled_share(self) -> float | None:
        """Of the periods its processes ran in, the share that used the quota up."""
        return self.throttled / self.periods if self.periods else None

    @property
    def throttled_ms_per_s(self) -> float | None:
        """Milliseconds its processes waited for a period, a second of the repeats."""
        return self.throttled_ms / self.seconds if self.seconds > 0 else None


def quota_means(store: Store, cell_id: int) -> list[QuotaMeans]:
    """Each CPU quota of a cell, over its measured repeats, by instance, node and role."""
    return [QuotaMeans(*r) for r in store.db.execute(
        "select q.instance, q.node, q.role, max(q.share), max(q.quota_us), "
        "max(q.period_us), count(*), sum(q.periods), sum(q.throttled), sum(q.throttled_ms), "
        "sum(q.seconds) from quotas q join repeats r on r.id = q.repeat_id "
        "where r.cell_id = ? and r.probed = 0 group by q.instance, q.node, q.role "
        "order by q.instance, q.node, q.role", (cell_id,))]


@dataclass(frozen=True)
class DiskMeans:
    """A block device over a cell's measured repeats: the sums of its counters and of
    the time they grew over."""

    host: str
    device: str
    reads: int
    writes: int
    read_bytes: int
    write_bytes: int
    busy_ms: float
    seconds: float
    repeats: int

    @property
    def busy_share(self) -> float | None:
        """The share of the time the device had an I/O in flight."""
        return self.busy_ms / 1000 / self.seconds if self.seconds > 0 else None


def disk_means(store: Store, cell_id: int) -> list[DiskMeans]:
    """Each block device of a cell's measured repeats, by host and device."""
    return [DiskMeans(*r) for r in store.db.execute(
        "select d.host, d.device, sum(d.reads), sum(d.writes), sum(d.read_bytes), "
        "sum(d.write_bytes), sum(d.busy_ms), sum(d.seconds), count(*) from disk_io d "
        "join repeats r on r.id = d.repeat_id where r.cell_id = ? and r.probed = 0 "
        "group by d.host, d.device order by d.host, d.device", (cell_id,))]


@dataclass(frozen=True)
class NetMeans:
    """A network interface over a cell's measured repeats (sums, as DiskMeans)."""

    host: str
    instance: int
    node: str
    interface: str
    rx_bytes: int
    tx_bytes: int
    rx_packets: int
    tx_packets: int
    seconds: float
    repeats: int


def net_means(store: Store, cell_id: int) -> list[NetMeans]:
    """Each network interface of a cell's measured repeats, by host, namespace and name."""
    return [NetMeans(*r) for r in store.db.execute(
        "select n.host, n.instance, n.node, n.interface, sum(n.rx_bytes), sum(n.tx_bytes), "
        "sum(n.rx_packets), sum(n.tx_packets), sum(n.seconds), count(*) from net_io n "
        "join repeats r on r.id = n.repeat_id where r.cell_id = ? and r.probed = 0 "
        "group by n.host, n.instance, n.node, n.interface "
        "order by n.host, n.instance, n.node, n.interface", (cell_id,))]


# --- faults --------------------------------------------------------------------------


def fault_events_of(store: Store, repeat_id: int) -> list[FaultEventRow]:
    """A repeat's fault events and what followed, in time order."""
    return _made(FaultEventRow, store.db.execute(
        f"select {_columns(FaultEventRow)} from fault_events where repeat_id = ? "
        "order by t_s", (repeat_id,)))


def durability_of(store: Store, repeat_id: int) -> list[DurabilityRow]:
    """The rows counted on each node after a repeat: the primary, then the standbys."""
    return _made(DurabilityRow, store.db.execute(
        f"select {_columns(DurabilityRow)} from durability where repeat_id = ? "
        "order by node = 'primary' desc, node", (repeat_id,)))


# --- observe -------------------------------------------------------------------------


@dataclass(frozen=True)
class ObservedSlice:
    """An observe slice's ``observed`` row and how long the slice lasted."""

    observed: ObservedRow
    duration_s: float


def observed_of(store: Store, cell_id: int) -> list[ObservedSlice]:
    """Every slice of an observe window (a cell)."""
    return [ObservedSlice(ObservedRow._make(r[:-1]), r[-1]) for r in store.db.execute(
        f"select {_columns(ObservedRow, 'o.')}, r.duration_s from observed o "
        "join repeats r on r.id = o.repeat_id where r.cell_id = ?", (cell_id,))]
