"""The store's schema: the tables every run folder's SQLite database holds, its version,
and the upgrade of a store written by an earlier version.

docs/store.md documents every table and column for users who query a store with SQL;
a change here is a change there, and a new version with its upgrade below: stores
written before must still open.
"""

from __future__ import annotations

import math
import sqlite3

SCHEMA_VERSION = 20

SCHEMA = """
create table if not exists meta (key text primary key, value text not null);
create table if not exists runs (
    id integer primary key,
    name text not null,
    started_at text not null,
    finished_at text,
    status text not null,            -- running | done | interrupted | failed
    spec_toml text not null,
    machine_json text not null,
    tool_version text not null,
    seed integer,                    -- the rounds' shuffles (run.seed, or drawn)
    order_mode text,                 -- interleaved | blocked
    order_note text,                 -- which clusters were held up together, or why not
    kind text                        -- experiment (null in stores before 9) | observe
);
create table if not exists clusters (
    id integer primary key,
    run_id integer not null references runs(id),
    cluster_key text not null,
    version text, bin_dir text, nodes_json text,
    settings_json text,              -- every non-default setting per node, read back
    build_json text,                 -- a build of `pg build` (10): name, flavor, patches
    created_at text not null
);
create table if not exists cells (
    id integer primary key,
    run_id integer not null references runs(id),
    idx integer not null,
    key text not null,
    label text not null,
    axes_json text not null,
    params_json text not null,
    status text not null,            -- pending | running | done | failed
    error text,
    repeats integer not null default 0,
    stop_reason text,                -- ci (target met) | max (repeats_max) | budget
    tps_mean real, tps_stdev real, tps_ci_low real, tps_ci_high real, tps_ci_rel real,
    transactions integer, failed integer,
    lat_mean_ms real, lat_p50_ms real, lat_p90_ms real, lat_p99_ms real,
    lat_p999_ms real, lat_max_ms real,
    histogram blob,                  -- all repeats merged
    started_at text, finished_at text,
    notes_json text,                 -- why its figures may not hold (trend, disturbed repeats)
    unique (run_id, key)
);
create table if not exists repeats (
    id integer primary key,
    cell_id integer not null references cells(id),
    n integer not null,
    probed integer not null default 0,  -- 1: probes ran, 2: the commit anatomy alone;
                                        -- either is kept out of the cell's figures
    started_at text not null,
    duration_s real not null,
    transactions integer not null,   -- from the per-transaction logs
    failed integer not null,
    tps real not null,               -- pgbench's own figure (without connection time)
    pgbench_transactions integer,
    pgbench_latency_avg_ms real,
    lat_mean_ms real, lat_p50_ms real, lat_p90_ms real, lat_p99_ms real,
    lat_p999_ms real, lat_max_ms real,
    histogram blob not null,
    stdout_path text, stderr_path text,
    round integer,                   -- interleaved: the round it ran in (1, 2, ...)
    position integer,                -- its place in that round's shuffled order (0, 1, ...)
    checkpoints integer,             -- checkpoints that began during it (primary)
    autovacuums integer,             -- autovacuum/autoanalyze runs on the workload's table
    other_cpu real,                  -- CPUs other processes of the machine took meanwhile
    disturbed text,                  -- what hit it, comma separated; null: nothing seen
    pair integer,                    -- duet: its pair's place in the round (0, 1, ...),
                                     -- the other side of it the baseline's or compared
                                     -- cell's repeat of the same round and pair
    cpus text,                       -- duet: the CPUs its side was confined to ("0")
    unique (cell_id, n)
);
create table if not exists samples (
    repeat_id integer not null references repeats(id),
    t_s real not null, tps real not null, latency_ms real, stddev_ms real,
    failed integer not null default 0
);
create index if not exists samples_by_repeat on samples(repeat_id);
create table if not exists probes (
    repeat_id integer not null references repeats(id),
    probe text not null,             -- perf | activity | proc | flamegraphs | sched | gprof
                                     -- | anatomy
    status text not null,            -- ran | skipped | failed
    reason text
);
create table if not exists costs (   -- perf stat per node and process role
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, processes integer not null,
    cpu_ms real not null, context_switches integer not null, syscalls_json text not null
);
create table if not exists waits (   -- pg_stat_activity samples per node and role
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, wait_type text not null,
    wait_event text not null, samples integer not null, ticks integer not null
);
create table if not exists replication_samples (
    repeat_id integer not null references repeats(id),
    t_s real not null,               -- seconds since the client started (negative: before)
    standby text not null, sync_state text,
    write_lag_ms real, flush_lag_ms real, replay_lag_ms real, flush_lag_bytes real
);
create table if not exists proc_costs (   -- /proc per node and process role
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, processes integer not null,
    user_ms real not null, system_ms real not null,
    voluntary_cs integer not null, involuntary_cs integer not null,
    run_delay_ms real,               -- runnable, waiting for a core (schedstat); null: not read
    migrations integer,              -- moves to another CPU (/proc/PID/sched); null: not read
    read_bytes integer,              -- the block layer's bytes (/proc/PID/io); null: not read
    write_bytes integer
);
create table if not exists numa_pages (   -- numa_maps before and after a repeat
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, phase text not null,
    numa_node text not null, pages integer not null
);
create table if not exists flamegraphs (   -- one per node and role, plus '*'/'all'
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, cpu_us integer not null,
    folded_path text not null, svg_path text not null   -- relative to the run folder
);
create table if not exists stack_frames (   -- frames over 1 % of a role's on-CPU time
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, frame text not null,
    inclusive_us integer not null, self_us integer not null
);
create table if not exists sched_roles (   -- scheduler trace per node and role
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, threads integer not null,
    cpu_ms real not null, sleep_ms real not null, runq_ms real not null,
    switches integer not null, voluntary integer not null,
    wakeups_received integer not null, duration_s real not null
);
create table if not exists wakeups (   -- who woke whom, during the traced seconds
    repeat_id integer not null references repeats(id),
    waker_node text not null, waker_role text not null,
    wakee_node text not null, wakee_role text not null,
    count integer not null, duration_s real not null
);
create table if not exists wait_timeline (   -- wait kinds second by second
    repeat_id integer not null references repeats(id),
    t_s integer not null,            -- whole second since the client started (negative: before)
    node text not null, role text not null, wait_type text not null,
    samples integer not null, ticks integer not null   -- ticks: samples of the node that second
);
create table if not exists fault_events (   -- a fault scenario's events and what followed
    repeat_id integer not null references repeats(id),
    t_s real not null,               -- seconds since the client started
    kind text not null,              -- fault | state | stall | error | restore
    node text not null, detail text not null
);
create table if not exists durability (   -- rows counted on every node after a faulted repeat
    repeat_id integer not null references repeats(id),
    node text not null,
    rows integer not null,           -- rows the repeat added, as this node sees them
    expected integer not null,       -- primary: acknowledged rows; standby: the primary's rows
    ok integer not null, detail text not null
);
create table if not exists instance_results (   -- each instance of a repeat with instances > 1
    repeat_id integer not null references repeats(id),
    instance integer not null, tps real not null, transactions integer not null,
    failed integer not null, lat_mean_ms real, lat_p99_ms real
);
create table if not exists placement (   -- what the kernel gave each role, read mid-repeat
    repeat_id integer not null references repeats(id),
    instance integer not null, node text not null, role text not null,
    processes integer not null,
    cpus text not null, mems text not null,   -- Cpus_allowed_list, Mems_allowed_list
    cgroup text not null, numa_policy text not null
);
create table if not exists quotas (   -- a role's CPU quota and its cpu.stat over the repeat
    repeat_id integer not null references repeats(id),
    instance integer not null, node text not null, role text not null,
    share real not null, quota_us integer not null, period_us integer not null,
    processes integer not null, periods integer not null, throttled integer not null,
    throttled_ms real not null, seconds real not null   -- the counters' window
);
create table if not exists disk_io (   -- a block device over a repeat (/proc/diskstats)
    repeat_id integer not null references repeats(id),
    host text not null,              -- "" this machine, else an SSH host's name
    device text not null, reads integer not null, writes integer not null,
    read_bytes integer not null, write_bytes integer not null,
    busy_ms real not null,           -- time with an I/O in flight
    seconds real not null
);
create table if not exists net_io (   -- an interface over a repeat (/proc/net/dev)
    repeat_id integer not null references repeats(id),
    host text not null, instance integer not null,
    node text not null,              -- whose namespace; "" the host's own
    interface text not null,
    rx_bytes integer not null, tx_bytes integer not null,
    rx_packets integer not null, tx_packets integer not null,
    seconds real not null
);
create table if not exists links (   -- emulated links as applied, read back
    repeat_id integer not null references repeats(id),
    instance integer not null, a text not null, b text not null,
    profile text not null, applied_json text not null
);
create table if not exists numastat (   -- numastat -p of each postmaster, before and after
    repeat_id integer not null references repeats(id),
    instance integer not null, node text not null, phase text not null,
    numa_node text not null, mb real not null
);
create table if not exists observed (   -- a window of `observe`, per repeat (its slice)
    repeat_id integer not null references repeats(id),
    commits integer not null,        -- pg_stat_database.xact_commit delta, the tool's own out
    rollbacks integer not null,
    xids integer not null,           -- transaction ids assigned: the transactions that wrote
    wal_bytes real not null,
    wal_records integer,             -- pg_stat_wal (14+)
    sessions_max integer not null,   -- client backends seen at once, at most
    in_transaction_mean real not null,  -- client backends in a transaction, on average
    own_queries integer not null,    -- the observer's statements on the primary
    own_cpu_ms real,                 -- the observer's backend's CPU (null: /proc not reached)
    cpu_note text                    -- why CPU per role is missing, when it is
);
create table if not exists gprof_roles (   -- a profiling build's gprof per node and role
    repeat_id integer not null references repeats(id),
    node text not null, role text not null,
    processes integer not null,      -- gmon.out files summed
    sampled_s real not null,         -- the flat profile's seconds
    profile_path text not null       -- the flat profile's text, relative to the run folder
);
create table if not exists gprof_functions (   -- each role's flat profile
    repeat_id integer not null references repeats(id),
    node text not null, role text not null, function text not null,
    calls integer,                   -- null: not compiled with -pg (libc)
    self_s real not null
);
create table if not exists host_repeats (   -- each SSH host of the cluster, per repeat
    repeat_id integer not null references repeats(id),
    host text not null, roles text not null,   -- what runs there: standbys, client
    clock_offset_ms real not null,   -- its clock minus this machine's, at the start
    clock_uncertainty_ms real not null,   -- half the round trip it was read in
    busy_cpus real,                  -- CPUs it kept busy during the repeat, on average
    cpus integer not null,
    steal_cpus real                  -- CPUs' worth its hypervisor took (/proc/stat steal)
);
create table if not exists guest_repeats (   -- each guest the run booted, seen from here
    repeat_id integer not null references repeats(id),
    guest text not null,
    vcpus integer not null,          -- its vCPU threads
    vcpu_cpus real not null,         -- CPUs they ran on here, on average
    vcpu_delay_cpus real not null,   -- their time runnable, waiting for a CPU here
    qemu_cpus real not null,         -- the whole QEMU process's CPUs here
    seconds real not null
);
create table if not exists kernel_locks (   -- the lock probe: the kernel's locks a role
    repeat_id integer not null references repeats(id),   -- took or waited for (bpftrace)
    node text not null, role text not null,
    lock text not null,              -- a counted lock's symbol (epmutex), else ''
    kind text not null,              -- mutex, spin, read, write (the tracepoint's flags)
    caller text not null,            -- the kernel function that took it (ep_free ...)
    user_stack text not null,        -- the system call's frames: close < FreeWaitEventSet
    acquisitions integer,            -- a counted lock's takes (kprobes); None: not counted
    contentions integer not null,    -- lock:contention_begin .. end
    wait_ns real not null            -- their time waiting, summed
);
create table if not exists host_numa (   -- each NUMA node of a host with several (a
    repeat_id integer not null references repeats(id),   -- guest's virtual ones), over a
    host text not null, numa_node integer not null,       -- repeat, in pages
    numa_hit integer not null, numa_miss integer not null, numa_foreign integer not null,
    interleave_hit integer not null, local_node integer not null,
    other_node integer not null, seconds real not null
);
create table if not exists anatomy (   -- the commit anatomy probe: bpftrace's aggregates
    repeat_id integer not null references repeats(id),
    who text not null,               -- backend | walsender:NAME (the standby it serves)
    component text not null,         -- local_flush, commit_wait, standby_wait, wakeup_queue,
                                     -- run_queue, unsignalled; release, release_gap,
                                     -- waiters_freed
    count integer not null,
    total real not null,             -- ns (waiters_freed: waiters), exact
    min real not null, max real not null,   -- ns (waiters_freed: waiters)
    histogram blob not null          -- a LatencyHistogram of the values, in ns
);
create view if not exists cell_results as
    select r.name as run, c.idx, c.label, c.status, c.repeats, c.stop_reason,
           c.tps_mean, c.tps_ci_low, c.tps_ci_high, c.tps_ci_rel,
           c.lat_mean_ms, c.lat_p50_ms, c.lat_p90_ms, c.lat_p99_ms, c.lat_p999_ms,
           c.lat_max_ms, c.transactions, c.failed, c.axes_json, c.params_json, c.error
    from cells c join runs r on r.id = c.run_id;
"""


NEW_COLUMNS = (  # 6 -> 7, 7 -> 8 (runs.order_note), 8 -> 9 (runs.kind), 9 -> 10 (build),
    # 12 -> 13 (proc_costs' scheduler figures)
    ("runs", "seed integer"), ("runs", "order_mode text"), ("cells", "notes_json text"),
    ("repeats", "round integer"), ("repeats", "position integer"),
    ("repeats", "checkpoints integer"), ("repeats", "autovacuums integer"),
    ("repeats", "other_cpu real"), ("repeats", "disturbed text"), ("runs", "order_note text"),
    ("runs", "kind text"), ("clusters", "build_json text"),
    ("proc_costs", "run_delay_ms real"), ("proc_costs", "migrations integer"),
    # 15 -> 16 (each role's bytes read and written, /proc/PID/io)
    ("proc_costs", "read_bytes integer"), ("proc_costs", "write_bytes integer"),
    # 16 -> 17 (a duet repeat's pair and CPUs)
    ("repeats", "pair integer"), ("repeats", "cpus text"),
    # 17 -> 18 (an SSH host's steal; guest_repeats is a new table)
    ("host_repeats", "steal_cpus real"))


def upgrade(db: sqlite3.Connection, version: int) -> None:
    """Bring a store of an earlier ``version`` (1 to 19) to SCHEMA_VERSION, in place.

    1 -> 2 added the first probe tables and repeats.probed; 2 -> 3 the tables of /proc,
    NUMA, flame graphs and the scheduler trace; 3 -> 4 the wait timeline; 4 -> 5 fault
    events and durability checks; 5 -> 6 instances, placement, links and numastat. New
    tables only, but for 6 -> 7: the rounds of interleaved runs and what disturbed a
    repeat (new columns); 7 -> 8 the run's note on which clusters were held up together;
    8 -> 9 the run's kind and the observed table (syncrep-lab observe); 9 -> 10 the
    gprof tables of profiling builds and the build a cluster ran on; 10 -> 11 the SSH
    hosts' clocks and busy CPUs per repeat; 11 -> 12 the commit anatomy probe's table;
    12 -> 13 each role's run delay and CPU migrations in proc_costs (new columns: the
    rows of a store written before read them as None); 13 -> 14 the cells' TPS
    intervals on the log scale (:func:`log_scale_intervals`); 14 -> 15 the CPU quotas
    per role, and the disks' and network interfaces' counters per repeat (new tables);
    15 -> 16 each role's bytes read and written in proc_costs (new columns, None before);
    16 -> 17 a duet repeat's pair and the CPUs its side had (new columns, None before);
    17 -> 18 an SSH host's steal per repeat (a new column, None before) and the guests'
    costs seen from this machine (a new table); 18 -> 19 the lock probe's table; 19 -> 20
    the NUMA counters of hosts with several nodes (host_numa).
    """
    db.executescript(SCHEMA)
    if version == 1:
        db.execute("alter table repeats add column probed integer not null default 0")
    for table, column in NEW_COLUMNS:
        have = {r[1] for r in db.execute(f"pragma table_info({table})")}
        if column.split()[0] not in have:
            db.execute(f"alter table {table} add column {column}")
    if version <= 13:
        log_scale_intervals(db)
    db.execute("update meta set value = ? where key = 'schema_version'",
               (str(SCHEMA_VERSION),))


def log_scale_intervals(db: sqlite3.Connection) -> None:
    """A cell's TPS interval as version 14 stores it (:func:`stats.rate_ci`, on the log
    scale), in place of the mean ± t · s / √n of earlier versions, which two repeats far
    apart took below zero. Recomputed from the cell's measured repeats with the t the
    stored interval used (its half width · √n / s: the run's confidence, without
    reading its spec), where they are the values it was computed from (their mean is the
    stored mean); any other cell keeps what it has."""
    # here, not at the top: the statistics load scipy (a third of a second), and every
    # command that opens a store imports this module; only an old store's upgrade needs it
    from syncrep_lab.stats.intervals import rate_ci

    cells = db.execute("select id, tps_mean, tps_stdev, tps_ci_low, tps_ci_high from cells "
                       "where tps_ci_low is not null and tps_ci_high is not null "
                       "and tps_stdev > 0").fetchall()
    for cell_id, mean, stdev, low, high in cells:
        tps = [float(v) for (v,) in db.execute(
            "select tps from repeats where cell_id = ? and probed = 0", (cell_id,))]
        if len(tps) < 2 or not math.isclose(sum(tps) / len(tps), mean, rel_tol=1e-9):
            continue
        ci = rate_ci(tps, t=(high - low) / 2 * math.sqrt(len(tps)) / stdev)
        db.execute("update cells set tps_ci_low = ?, tps_ci_high = ?, tps_ci_rel = ? "
                   "where id = ?", (ci.low, ci.high, ci.half_width_rel, cell_id))
