"""One named row type per table a repeat writes besides ``repeats``: what the probes,
the fault driver, the placement read-back and ``observe`` store.

Each is a ``NamedTuple`` whose fields are the table's columns (``repeat_id`` left out:
the store adds it), in the schema's order (store/schema.py). A row stays a tuple, so
``executemany`` takes it as it is, while mypy checks each field's name and type where
the row is built and where it is read: adding a column is one field here, not a tuple
position agreed on by the probes, the runner and the analysis. The insert statement's
column list is the row type's ``_fields``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple


class SampleRow(NamedTuple):
    """``samples``: pgbench's progress, one a second (an observe slice: written
    transactions a second, the rest empty)."""

    t_s: float
    tps: float
    latency_ms: float | None
    stddev_ms: float | None
    failed: int


class ProbeRow(NamedTuple):
    """``probes``: whether each probe ran in a repeat, and why not."""

    # perf | activity | proc | flamegraphs | sched | gprof | anatomy | standby_anatomy
    probe: str
    status: str  # ran | skipped | failed
    reason: str | None


class CostRow(NamedTuple):
    """``costs``: perf stat per node and process role."""

    node: str
    role: str
    processes: int
    cpu_ms: float
    context_switches: int
    syscalls_json: str


class WaitRow(NamedTuple):
    """``waits``: pg_stat_activity samples per node, role and wait event."""

    node: str
    role: str
    wait_type: str
    wait_event: str
    samples: int
    ticks: int  # samples taken of the node


class ReplicationSample(NamedTuple):
    """``replication_samples``: one standby as pg_stat_replication showed it."""

    t_s: float
    standby: str
    sync_state: str | None
    write_lag_ms: float | None  # lags: null before PostgreSQL 10
    flush_lag_ms: float | None
    replay_lag_ms: float | None
    flush_lag_bytes: float | None


class ProcCostRow(NamedTuple):
    """``proc_costs``: /proc per node and process role."""

    node: str
    role: str
    processes: int
    user_ms: float
    system_ms: float
    voluntary_cs: int
    involuntary_cs: int
    # runnable, waiting for a core (/proc/PID/schedstat), and moves to another CPU
    # (/proc/PID/sched); None where not read (the client's, an SSH host's, an older store)
    run_delay_ms: float | None = None
    migrations: int | None = None
    # bytes its processes had the block layer read and write (/proc/PID/io's read_bytes,
    # write_bytes: a write counts when it dirties the page cache); None where not read
    read_bytes: int | None = None
    write_bytes: int | None = None


class NumaPagesRow(NamedTuple):
    """``numa_pages``: a role's pages per NUMA node, before and after a repeat."""

    node: str
    role: str
    phase: str  # before | after
    numa_node: str
    pages: int


class FlameGraphRow(NamedTuple):
    """``flamegraphs``: one per node and role, plus '*'/'all'."""

    node: str
    role: str
    cpu_us: int
    folded_path: str  # relative to the run folder
    svg_path: str


class StackFrameRow(NamedTuple):
    """``stack_frames``: the frames over 1 % of a role's on-CPU time."""

    node: str
    role: str
    frame: str
    inclusive_us: int
    self_us: int


class SchedRoleRow(NamedTuple):
    """``sched_roles``: the scheduler trace per node and role."""

    node: str
    role: str
    threads: int
    cpu_ms: float
    sleep_ms: float
    runq_ms: float
    switches: int
    voluntary: int
    wakeups_received: int
    duration_s: float  # the traced seconds


class WakeupRow(NamedTuple):
    """``wakeups``: who woke whom, during the traced seconds."""

    waker_node: str
    waker_role: str
    wakee_node: str
    wakee_role: str
    # the column's name; it hides tuple.count, which nothing calls on a row
    count: int  # type: ignore[assignment]
    duration_s: float


class WaitTimelineRow(NamedTuple):
    """``wait_timeline``: wait kinds second by second."""

    t_s: int  # whole seconds since the sampler started
    node: str
    role: str
    wait_type: str
    samples: int
    ticks: int  # samples of the node that second


class FaultEventRow(NamedTuple):
    """``fault_events``: a fault scenario's events and what followed."""

    t_s: float  # seconds since pgbench started
    kind: str  # fault | state | stall | error | restore
    node: str
    detail: str


class DurabilityRow(NamedTuple):
    """``durability``: rows counted on a node after a faulted repeat."""

    node: str
    rows: int
    expected: int
    ok: int  # 1 or 0
    detail: str


class InstanceResultRow(NamedTuple):
    """``instance_results``: each instance's own figures in a repeat of several."""

    instance: int
    tps: float
    transactions: int
    failed: int
    lat_mean_ms: float | None
    lat_p99_ms: float | None


class PlacementRow(NamedTuple):
    """``placement``: what the kernel gave a role's processes, read mid-repeat."""

    instance: int
    node: str
    role: str
    processes: int
    cpus: str  # Cpus_allowed_list
    mems: str  # Mems_allowed_list
    cgroup: str
    numa_policy: str


class QuotaRow(NamedTuple):
    """``quotas``: a role's CPU quota in force during a measured repeat, and what
    cpu.stat counted over the repeat (placement/quota.py)."""

    instance: int
    node: str
    role: str
    share: float  # CPUs asked for
    quota_us: int  # cfs_quota_us read back
    period_us: int  # cfs_period_us read back
    processes: int  # in the group when the repeat ended
    periods: int  # periods in which its processes ran, over the repeat
    throttled: int  # of those, the periods that used the quota up
    throttled_ms: float  # the time its processes waited for their next period
    seconds: float  # the time over which these were counted


class DiskIoRow(NamedTuple):
    """``disk_io``: a whole block device over a repeat (/proc/diskstats)."""

    host: str  # "" this machine, else the SSH host's name
    device: str
    reads: int  # I/Os completed
    writes: int
    read_bytes: int
    write_bytes: int
    busy_ms: float  # time with an I/O in flight (io_ticks)
    seconds: float  # the time the counters grew over


class NetIoRow(NamedTuple):
    """``net_io``: a network interface over a repeat (/proc/net/dev of its namespace)."""

    host: str  # "" this machine, else the SSH host's name
    instance: int  # 0 for the host's own namespace
    node: str  # the node whose namespace it is, "" for the host's own
    interface: str  # a node's to-PEER is its emulated link to PEER
    rx_bytes: int
    tx_bytes: int
    rx_packets: int
    tx_packets: int
    seconds: float


class LinkRow(NamedTuple):
    """``links``: an emulated link as applied, read back."""

    instance: int
    a: str
    b: str
    profile: str
    applied_json: str


class NumastatRow(NamedTuple):
    """``numastat``: numastat -p of a postmaster, before and after."""

    instance: int
    node: str
    phase: str
    numa_node: str
    mb: float


class ObservedRow(NamedTuple):
    """``observed``: an observe slice's counters and the observer's own cost."""

    commits: int
    rollbacks: int
    xids: int  # transaction ids assigned: the transactions that wrote
    wal_bytes: float
    wal_records: int | None  # pg_stat_wal (14+)
    sessions_max: int
    in_transaction_mean: float
    own_queries: int
    own_cpu_ms: float | None  # null: /proc not reached
    cpu_note: str | None


class GprofRoleRow(NamedTuple):
    """``gprof_roles``: a profiling build's gprof profile per node and role."""

    node: str
    role: str
    processes: int  # gmon.out files summed
    sampled_s: float  # the flat profile's seconds (100 samples a second)
    profile_path: str  # the flat profile's text, relative to the run folder


class GprofFunctionRow(NamedTuple):
    """``gprof_functions``: one function of a role's flat profile."""

    node: str
    role: str
    function: str
    calls: int | None  # null: not compiled with -pg (libc, the kernel's vDSO)
    self_s: float


class HostRepeatRow(NamedTuple):
    """``host_repeats``: an SSH host of the cluster during a repeat."""

    host: str
    roles: str  # what runs there, comma separated (standbys' names, client)
    clock_offset_ms: float  # its clock minus this machine's, at the repeat's start
    clock_uncertainty_ms: float  # half the SSH round trip it was read in
    busy_cpus: float | None  # CPUs it kept busy during the repeat, on average
    cpus: int
    # CPUs' worth of time its hypervisor took from it (its /proc/stat steal), on average;
    # None in a store written before it was read
    steal_cpus: float | None = None


class GuestRepeatRow(NamedTuple):
    """``guest_repeats``: a guest the run booted, seen from this machine during a repeat
    (guests/costs.py): its vCPU threads' CPU and their wait for one, and QEMU's CPU."""

    guest: str  # its host name (guest1 ...)
    vcpus: int  # vCPU threads seen
    vcpu_cpus: float  # CPUs its vCPU threads ran on here, on average
    vcpu_delay_cpus: float  # their time runnable but waiting for a CPU here, on average
    qemu_cpus: float  # the whole QEMU process's CPUs here (vCPUs, I/O, emulation)
    seconds: float  # the span it was read over


class HostNumaRow(NamedTuple):
    """``host_numa``: one NUMA node of an SSH host or guest with more than one, its
    allocation counters over a repeat (/sys/devices/system/node/nodeN/numastat), in
    pages: what numastat shows per node."""

    host: str
    numa_node: int
    numa_hit: int  # allocated on this node as the policy wanted
    numa_miss: int  # allocated here though another node was wanted
    numa_foreign: int  # wanted here, allocated elsewhere
    interleave_hit: int  # interleave policy allocations that got this node
    local_node: int  # allocated here by a process running here
    other_node: int  # allocated here by a process running on another node
    seconds: float  # the span it was read over


class KernelLockRow(NamedTuple):
    """``kernel_locks``: the kernel locks one process role took or waited for in a
    probed repeat (probes/kernel_locks.py), by lock, kernel caller and user frames."""

    node: str
    role: str
    lock: str  # a counted lock's symbol (epmutex), else "" (any other lock)
    kind: str  # mutex, spin, read, write: lock:contention_begin's flags
    caller: str  # the kernel function that took the lock (ep_free, do_epoll_ctl ...)
    user_stack: str  # the frames above the system call, " < " between: close < FreeWaitEventSet
    acquisitions: int | None  # a counted lock's takes (kprobes on mutex_lock); else None
    contentions: int  # waits for it (lock:contention_begin .. contention_end)
    wait_ns: float  # their time, summed


class AnatomyRow(NamedTuple):
    """``anatomy``: the commit anatomy probe's aggregate of one component (probes/
    anatomy.py), for the backends, one walsender or the sync standby's half of the
    commits (probes/standby_anatomy.py). Nanoseconds, but ``waiters_freed`` (waiters a
    release signalled)."""

    who: str  # backend | walsender:NAME (the standby it serves) | standby:NAME
    component: str  # local_flush | commit_wait | standby_wait | wakeup_queue | run_queue
    # | unsignalled (backend); release | release_gap | waiters_freed (walsender); send |
    # transit_out | queue | write | flush | reply | transit_back | reply_handling | whole (standby)
    # the column's name; it hides tuple.count, which nothing calls on a row
    count: int  # type: ignore[assignment]
    total: float  # exact sum, ns
    min: float  # ns
    max: float  # ns
    histogram: bytes  # LatencyHistogram.to_bytes() of the values in ns


# table -> its row type; the order is the order add_repeat writes them in
PROBE_TABLES: dict[str, type[NamedTuple]] = {
    "probes": ProbeRow, "costs": CostRow, "waits": WaitRow,
    "replication_samples": ReplicationSample, "proc_costs": ProcCostRow,
    "numa_pages": NumaPagesRow, "flamegraphs": FlameGraphRow, "stack_frames": StackFrameRow,
    "sched_roles": SchedRoleRow, "wakeups": WakeupRow, "wait_timeline": WaitTimelineRow,
    "fault_events": FaultEventRow, "durability": DurabilityRow,
    "instance_results": InstanceResultRow, "placement": PlacementRow, "quotas": QuotaRow,
    "disk_io": DiskIoRow, "net_io": NetIoRow,
    "links": LinkRow,
    "numastat": NumastatRow, "observed": ObservedRow, "gprof_roles": GprofRoleRow,
    "gprof_functions": GprofFunctionRow, "host_repeats": HostRepeatRow,
    "anatomy": AnatomyRow, "guest_repeats": GuestRepeatRow, "kernel_locks": KernelLockRow,
    "host_numa": HostNumaRow,
}


@dataclass
class ProbeRows:
    """A repeat's rows of every table in PROBE_TABLES, one typed list each (a field per
    table, named as the table): what the probes, the fault driver, the placement
    read-back and observe found, written with the repeat in one transaction."""

    probes: list[ProbeRow] = field(default_factory=list)
    costs: list[CostRow] = field(default_factory=list)
    waits: list[WaitRow] = field(default_factory=list)
    replication_samples: list[ReplicationSample] = field(default_factory=list)
    proc_costs: list[ProcCostRow] = field(default_factory=list)
    numa_pages: list[NumaPagesRow] = field(default_factory=list)
    flamegraphs: list[FlameGraphRow] = field(default_factory=list)
    stack_frames: list[StackFrameRow] = field(default_factory=list)
    sched_roles: list[SchedRoleRow] = field(default_factory=list)
    wakeups: list[WakeupRow] = field(default_factory=list)
    wait_timeline: list[WaitTimelineRow] = field(default_factory=list)
    fault_events: list[FaultEventRow] = field(default_factory=list)
    durability: list[DurabilityRow] = field(default_factory=list)
    instance_results: list[InstanceResultRow] = field(default_factory=list)
    placement: list[PlacementRow] = field(default_factory=list)
    quotas: list[QuotaRow] = field(default_factory=list)
    disk_io: list[DiskIoRow] = field(default_factory=list)
    net_io: list[NetIoRow] = field(default_factory=list)
    links: list[LinkRow] = field(default_factory=list)
    numastat: list[NumastatRow] = field(default_factory=list)
    observed: list[ObservedRow] = field(default_factory=list)
    gprof_roles: list[GprofRoleRow] = field(default_factory=list)
    gprof_functions: list[GprofFunctionRow] = field(default_factory=list)
    host_repeats: list[HostRepeatRow] = field(default_factory=list)
    anatomy: list[AnatomyRow] = field(default_factory=list)
    guest_repeats: list[GuestRepeatRow] = field(default_factory=list)
    kernel_locks: list[KernelLockRow] = field(default_factory=list)
    host_numa: list[HostNumaRow] = field(default_factory=list)

    def tables(self) -> Iterator[tuple[str, list[NamedTuple]]]:
        """(table, rows) of every table that has rows."""
        for table in PROBE_TABLES:
            rows: list[NamedTuple] = getattr(self, table)
            if rows:
                yield table, rows

    def add(self, other: ProbeRows) -> None:
        """Append ``other``'s rows to these, table by table."""
        for table, rows in other.tables():
            getattr(self, table).extend(rows)
