"""Cost per commit: for each cell, node and process role, CPU microseconds, context
switches and system calls of each kind per committed transaction, with
confidence intervals over the repeats; and where each role's time went by wait
event. Pure functions over the store: nothing here runs anything.

Per-commit figures are the stable ones on a noisy machine: a cell's TPS can
move by tens of percent between repeats while what one commit costs each
process moves by a few.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypedDict

from syncrep_lab.analysis.anatomy import Anatomy, cell_anatomy
from syncrep_lab.analysis.kernel import FlameGraph, RoleKernel, cell_kernel
from syncrep_lab.analysis.locks import CellLocks, cell_locks
from syncrep_lab.analysis.resources import Resources, cell_resources
from syncrep_lab.json_form import JSON, json_value
from syncrep_lab.stats.intervals import mean_ci
from syncrep_lab.store import Store, StoredCell, cluster_key_text, queries

KEY_SYSCALLS = ("epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "kill", "futex",
                "semop", "semtimedop", "read", "write", "sendto", "recvfrom", "fdatasync",
                "close")


class MeanCI(TypedDict):
    """A figure's mean over repeats and its 95 % interval (None: not measured)."""

    mean: float | None
    low: float | None
    high: float | None


class RoleValues(TypedDict):
    """A node's role: its per-repeat values per commit (:func:`role_values`)."""

    node: str
    role: str
    cpu_source: str  # a key of CPU_SOURCES
    cpu_us_per_commit: list[float]
    context_switches_per_commit: list[float]
    syscalls_per_commit: dict[str, list[float]]


class RoleCosts(TypedDict):
    """A node's role: what one commit costs it, over the cell's repeats."""

    node: str
    role: str
    cpu_source: str  # a key of CPU_SOURCES
    cpu_us_per_commit: MeanCI
    context_switches_per_commit: MeanCI
    repeats: int
    syscalls_per_commit: dict[str, MeanCI]
    perf_cpu_us_per_commit: MeanCI  # perf's, whatever cpu_us_per_commit came from
    proc: dict[str, MeanCI]  # /proc of the probed repeats: user_us_per_commit, ...
    sched: dict[str, MeanCI]  # the scheduler trace: sleep_us_per_commit, ...
    # bytes its processes read and wrote through the block layer (/proc/PID/io), per
    # commit, over the measured repeats (the probed ones where none): read, write
    disk_bytes_per_commit: dict[str, MeanCI]


class WaitShares(TypedDict):
    """Where a node's role spent its sampled time, by ``type:event``, largest first."""

    node: str
    role: str
    samples: int
    share: dict[str, float]


class WakeupCosts(TypedDict):
    waker_node: str
    waker_role: str
    wakee_node: str
    wakee_role: str
    per_commit: MeanCI


class GprofFunction(TypedDict):
    """A function of a role's gprof profile: exact calls per commit (None: code not
    compiled with -pg) and its share of the role's sampled time."""

    function: str
    calls_per_commit: float | None
    self_share: float


class GprofProfile(TypedDict):
    """A role's gprof profile on a profiling build, over the probed repeats."""

    node: str
    role: str
    processes: int
    sampled_s: float  # per repeat, on average
    profile: str  # the last repeat's flat profile (text), named in full
    setlatch_per_commit: MeanCI
    kill_per_commit: MeanCI  # perf's kill() per commit in the same role, to set beside
    functions: list[GprofFunction]  # the hottest by self time, then the most called


@dataclass(frozen=True)
class CellCosts:
    """:func:`cell_costs`: what the diagnosis, the model, observe and the report read.
    The figures per role and pair stay TypedDicts: they are JSON-shaped, and their
    readers (the terminal, the report's charts) take them as they are printed."""

    roles: list[RoleCosts]
    waits: list[WaitShares]
    latency_breakdown: dict[str, float] | None  # latency_ms, then ms per BREAKDOWN kind
    replication: list[queries.ReplicationSummary]
    wakeups: list[WakeupCosts]
    flamegraphs: list[FlameGraph]
    # each role's share of on-CPU samples in the kernel and where (analysis/kernel.py)
    kernel: list[RoleKernel]
    numa: list[queries.NumaPagesMean]
    gprof: list[GprofProfile]
    anatomy: Anatomy | None  # where a commit's time goes (analysis/anatomy.py)
    probes: dict[str, list[str]]  # probe -> its outcomes ('ran', 'skipped: why', ...)
    # each disk and network interface a second of the measured repeats, and the CPU
    # quotas (analysis/resources.py)
    resources: Resources
    # the kernel's locks per commit, where the lock probe ran (analysis/locks.py)
    locks: CellLocks | None = None

    def to_json(self) -> dict[str, JSON]:
        """The costs as ``costs --json`` and the report print them."""
        return {"roles": json_value(self.roles), "waits": json_value(self.waits),
                "latency_breakdown": json_value(self.latency_breakdown),
                "replication": [json_value(asdict(r)) for r in self.replication],
                "wakeups": json_value(self.wakeups), "flamegraphs": json_value(self.flamegraphs),
                "kernel": [k.to_json() for k in self.kernel],
                "numa": [json_value(asdict(r)) for r in self.numa],
                "gprof": json_value(self.gprof),
                "anatomy": self.anatomy.to_json() if self.anatomy is not None else None,
                "probes": json_value(self.probes), **self.resources.to_json(),
                "locks": self.locks.to_json() if self.locks is not None else None}


@dataclass(frozen=True)
class RunCellCosts:
    """A done cell's costs in :func:`run_costs` (``costs --json``)."""

    idx: int
    label: str
    version: str
    tps_mean: float | None
    costs: CellCosts

    def to_json(self) -> dict[str, JSON]:
        return {"idx": self.idx, "label": self.label, "version": self.version,
                "tps_mean": self.tps_mean, **self.costs.to_json()}


def _ci(values: list[float]) -> MeanCI:
    if not values:
        return {"mean": None, "low": None, "high": None}
    ci = mean_ci(values)
    return {"mean": ci.mean, "low": ci.low, "high": ci.high}


def cluster_version(store: Store, cell: StoredCell) -> str:
    """The server version a cell ran on ('' when not recorded)."""
    version = queries.cluster_version(store, cell.run_id, cluster_key_text(cell.params))
    return str(version) if version else ""


def _role_figures(store: Store, repeats: dict[int, int], tps: dict[int, float],
                  probed: Collection[int]) -> dict[tuple[str, str], dict[str, list[float]]]:
    """Per node and role, each figure's per-commit values, one per repeat that has it.
    /proc figures of probed repeats are ``proc:``, those of measured repeats (nothing
    attached to any process: probes/session.UntracedCpu) ``untraced:``."""
    per: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for repeat_id, cost in queries.costs_of(store, repeats):
        commits = repeats[repeat_id]
        if commits <= 0:
            continue
        figures = per[(cost.node, cost.role)]
        figures["cpu_us"].append(1000.0 * cost.cpu_ms / commits)
        figures["context_switches"].append(cost.context_switches / commits)
        for name, n in json.loads(cost.syscalls_json).items():
            figures[f"syscall:{name}"].append(n / commits)
    for repeat_id, proc in queries.proc_costs_of(store, repeats):
        commits = repeats[repeat_id]
        if commits <= 0:
            continue
        figures = per[(proc.node, proc.role)]
        kind = "proc" if repeat_id in probed else "untraced"
        figures[f"{kind}:user_us"].append(1000.0 * proc.user_ms / commits)
        figures[f"{kind}:system_us"].append(1000.0 * proc.system_ms / commits)
        figures[f"{kind}:voluntary_cs"].append(proc.voluntary_cs / commits)
        figures[f"{kind}:involuntary_cs"].append(proc.involuntary_cs / commits)
        if proc.run_delay_ms is not None:
            figures[f"{kind}:run_delay_us"].append(1000.0 * proc.run_delay_ms / commits)
        for way, n in (("read", proc.read_bytes), ("write", proc.write_bytes)):
            if n is not None:
                figures[f"{kind}:{way}_bytes"].append(n / commits)
    for repeat_id, sched in queries.sched_roles_of(store, repeats):
        # The scheduler trace covers the first seconds of the repeat: commits in
        # that window are estimated from the repeat's own TPS.
        commits_traced = tps[repeat_id] * float(sched.duration_s)
        if commits_traced <= 0:
            continue
        if sched.node == "-":
            continue  # the kernel's threads and unrelated processes
        figures = per[(sched.node, sched.role)]
        figures["sched:sleep_us"].append(1000.0 * sched.sleep_ms / commits_traced)
        figures["sched:runq_us"].append(1000.0 * sched.runq_ms / commits_traced)
        figures["sched:wakeups_received"].append(sched.wakeups_received / commits_traced)
    return per


CPU_SOURCES = {"untraced": "/proc, measured repeats (nothing traced)",
               "perf": "perf stat, probed repeats (every system call counted)",
               "proc": "/proc, probed repeats (the probes running beside them)",
               "none": "not measured"}


def _cpu_values(figures: dict[str, list[float]]) -> tuple[str, list[float], list[float]]:
    """Where a role's CPU figures come from, and its per-repeat CPU µs and context
    switches per commit: the measured repeats' /proc figures when there are any (tracing
    inflates CPU per commit: perf counting every system call nearly doubled the
    backends'), else perf's of the probed repeats, else their /proc figures. System call
    counts always come from the probed repeats (CPU_SOURCES says which is which)."""
    if figures["untraced:user_us"]:
        kind = "untraced"
    elif figures["cpu_us"]:
        return "perf", figures["cpu_us"], figures["context_switches"]
    else:
        kind = "proc"
    cpu = [u + s for u, s in zip(figures[f"{kind}:user_us"], figures[f"{kind}:system_us"],
                                 strict=True)]
    switches = [v + i for v, i in zip(figures[f"{kind}:voluntary_cs"],
                                      figures[f"{kind}:involuntary_cs"], strict=True)]
    return (kind if cpu else "none"), cpu, switches


def _cell_repeats(store: Store, cell_id: int
                  ) -> tuple[dict[int, int], dict[int, float], set[int]]:
    """A cell's repeats: commits and TPS by repeat id (a probed repeat's those of the
    instance its probes watched), and the ids of the probed ones."""
    stored = store.repeats(cell_id)
    watched = queries.watched_commits(store, stored)
    return ({r: c for r, (c, _) in watched.items()}, {r: t for r, (_, t) in watched.items()},
            {r.id for r in stored if r.probed})


def role_run_delay(store: Store, cell_id: int, node: str, role: str) -> float | None:
    """A role's wait for a CPU (runnable, not running), µs per commit: its schedstat
    over the measured repeats, else the scheduler trace of the probed ones; None where
    neither was read."""
    repeats, tps, probed = _cell_repeats(store, cell_id)
    figures = _role_figures(store, repeats, tps, probed).get((node, role), {})
    values = figures.get("untraced:run_delay_us") or figures.get("sched:runq_us")
    return sum(values) / len(values) if values else None


def role_values(store: Store, cell_id: int) -> list[RoleValues]:
    """Per node and role, the per-repeat values behind :func:`cell_costs`'s intervals
    (CPU µs, context switches and each system call per commit), for tests between
    cells that need the spread, not only the mean."""
    repeats, tps, probed = _cell_repeats(store, cell_id)
    out: list[RoleValues] = []
    for (node, role), figures in sorted(_role_figures(store, repeats, tps, probed).items()):
        source, cpu, switches = _cpu_values(figures)
        out.append({"node": node, "role": role, "cpu_source": source,
                    "cpu_us_per_commit": cpu, "context_switches_per_commit": switches,
                    "syscalls_per_commit": {k.removeprefix("syscall:"): v
                                            for k, v in figures.items()
                                            if k.startswith("syscall:")}})
    return out


def untraced_cpu(store: Store, cell_id: int) -> dict[tuple[str, str], dict[int, float]]:
    """Per node and role, CPU µs per commit of each measured repeat (/proc, nothing
    traced) by repeat id: the figures ``cpu_us_per_commit`` is read from where there are
    any, kept with their repeats so that two cells can be paired round by round."""
    stored = store.repeats(cell_id)
    commits = {r.id: int(r.transactions) for r in stored if not r.probed}
    out: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for repeat_id, proc in queries.proc_costs_of(store, commits):
        if commits[repeat_id] > 0:
            out[(proc.node, proc.role)][repeat_id] = (
                1000.0 * (proc.user_ms + proc.system_ms) / commits[repeat_id])
    return dict(out)


def cell_costs(store: Store, cell_id: int) -> CellCosts:
    """Per-commit costs and wait shares of one cell, over its repeats."""
    repeats, tps, probed = _cell_repeats(store, cell_id)
    probe_status: dict[str, set[str]] = defaultdict(set)
    for _, probe in queries.probes_of(store, repeats):
        probe_status[probe.probe].add(probe.status + (f": {probe.reason}"
                                                      if probe.reason else ""))
    per = _role_figures(store, repeats, tps, probed)
    roles: list[RoleCosts] = []
    for (node, role), figures in sorted(per.items()):
        source, cpu, switches = _cpu_values(figures)
        roles.append({
            "node": node, "role": role, "cpu_source": source, "cpu_us_per_commit": _ci(cpu),
            "context_switches_per_commit": _ci(switches), "repeats": len(cpu),
            "syscalls_per_commit": {k.removeprefix("syscall:"): _ci(v)
                                    for k, v in figures.items() if k.startswith("syscall:")},
            # perf's task-clock of the probed repeats, whatever the CPU above came from
            "perf_cpu_us_per_commit": _ci(figures["cpu_us"]),
            "proc": {k.removeprefix("proc:") + "_per_commit": _ci(v)
                     for k, v in figures.items() if k.startswith("proc:") and v},
            "sched": {k.removeprefix("sched:") + "_per_commit": _ci(v)
                      for k, v in figures.items() if k.startswith("sched:") and v},
            "disk_bytes_per_commit": {
                way: _ci(figures.get(f"untraced:{way}_bytes") or figures[f"proc:{way}_bytes"])
                for way in ("read", "write")
                if figures.get(f"untraced:{way}_bytes") or figures.get(f"proc:{way}_bytes")}})
    waits: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    totals: dict[tuple[str, str], int] = defaultdict(int)
    for w in queries.wait_totals(store, repeats):
        waits[(w.node, w.role)][f"{w.wait_type}:{w.wait_event}"] = w.samples
        totals[(w.node, w.role)] += w.samples
    shares: list[WaitShares] = [{"node": node, "role": role, "samples": totals[(node, role)],
               "share": {k: v / totals[(node, role)] for k, v in
                         sorted(events.items(), key=lambda kv: -kv[1])}}
              for (node, role), events in sorted(waits.items()) if totals[(node, role)]]
    graphs = _flamegraphs(store, list(repeats))
    return CellCosts(
        roles=roles, waits=shares,
        latency_breakdown=_latency_breakdown(store, list(repeats), waits),
        replication=(queries.replication_summary(store, list(repeats)) if repeats else []),
        wakeups=_wakeups(store, tps), flamegraphs=graphs, kernel=cell_kernel(graphs),
        numa=queries.numa_pages_mean(store, list(repeats)) if repeats else [],
        gprof=_gprof(store, repeats, roles),
        # the repeats that have one: a run's anatomy repeat, an observe window's
        # slices (measured, not probed: the window is all there is)
        anatomy=cell_anatomy(store, repeats, store.cell(cell_id).typed_params.clients or 0),
        probes={k: sorted(v) for k, v in probe_status.items()},
        resources=cell_resources(store, cell_id), locks=cell_locks(store, cell_id))


def _wakeups(store: Store, tps: dict[int, float]) -> list[WakeupCosts]:
    """Who woke whom, per commit, between PostgreSQL processes (and the client)."""
    if not tps:
        return []
    per: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    rows = queries.wakeups_of(store, tps)
    traced = {repeat_id for repeat_id, _ in rows}
    for repeat_id, w in rows:
        commits = tps[repeat_id] * float(w.duration_s)
        if commits > 0 and "-" not in (w.waker_node, w.wakee_node):
            per[(w.waker_node, w.waker_role, w.wakee_node, w.wakee_role)].append(
                w.count / commits)
    out: list[WakeupCosts] = []
    for (wn, wr, en, er), values in per.items():
        values += [0.0] * (len(traced) - len(values))  # repeats where this pair never woke
        out.append({"waker_node": wn, "waker_role": wr, "wakee_node": en, "wakee_role": er,
                    "per_commit": _ci(values)})
    return sorted(out, key=lambda r: -float(r["per_commit"]["mean"] or 0.0))


def _flamegraphs(store: Store, repeat_ids: list[int]) -> list[FlameGraph]:
    """Each role's flame graph (the last probed repeat's) and where its CPU goes."""
    if not repeat_ids:
        return []
    out: list[FlameGraph] = []
    for repeat_id, g in queries.last_flamegraphs(store, repeat_ids):
        frames = queries.stack_frames_of(store, repeat_id, g.node, g.role)
        total = max(1, int(g.cpu_us))
        out.append({"node": g.node, "role": g.role, "cpu_us": g.cpu_us,
                    "svg": str(store.folder / g.svg_path),
                    "folded": str(store.folder / g.folded_path),
                    "frames": [{"frame": f.frame, "inclusive": f.inclusive_us / total,
                                "self": f.self_us / total} for f in frames]})
    return out


GPROF_TOP = 10  # functions shown per role: this many by self time, as many by calls


def _gprof(store: Store, commits: dict[int, int], roles: list[RoleCosts]
           ) -> list[GprofProfile]:
    """Each role's gprof profile, per commit: the seed's table (SetLatch calls against
    transactions, beside the kill() calls perf counted) and the top functions."""
    role_rows, function_rows = queries.gprof_of(store, commits)
    if not role_rows:
        return []
    calls: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    self_s: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for repeat_id, f in function_rows:
        key = (f.node, f.role)
        self_s[key][f.function] += f.self_s
        if f.calls is not None and commits[repeat_id] > 0:
            calls[key][f.function].append(f.calls / commits[repeat_id])
    profiled: dict[tuple[str, str], list[tuple[int, Any]]] = defaultdict(list)
    for repeat_id, g in role_rows:
        profiled[(g.node, g.role)].append((repeat_id, g))
    kills = {(r["node"], r["role"]): r["syscalls_per_commit"].get("kill") for r in roles}
    out: list[GprofProfile] = []
    for key, rows in sorted(profiled.items()):
        n = len(rows)
        last = max(rows, key=lambda row: row[0])[1]
        sampled = sum(g.sampled_s for _, g in rows)

        def per_commit(function: str, key: tuple[str, str] = key, n: int = n) -> list[float]:
            values = calls[key].get(function, [])
            return values + [0.0] * (n - len(values))  # repeats where it was never called

        by_self = sorted(self_s[key].items(), key=lambda kv: -kv[1])[:GPROF_TOP]
        by_calls = sorted(calls[key], key=lambda fn: -sum(calls[key][fn]))[:GPROF_TOP]
        shown = [fn for fn, _ in by_self] + [fn for fn in by_calls
                                             if fn not in dict(by_self)]
        out.append({
            "node": key[0], "role": key[1], "processes": last.processes,
            "sampled_s": sampled / n, "profile": str(store.folder / last.profile_path),
            "setlatch_per_commit": _ci(per_commit("SetLatch")),
            "kill_per_commit": kills.get(key) or _ci([]),
            "functions": [{"function": fn,
                           "calls_per_commit": (sum(per_commit(fn)) / n
                                                if fn in calls[key] else None),
                           "self_share": self_s[key][fn] / sampled if sampled > 0 else 0.0}
                          for fn in shown]})
    return out


# Where a primary backend's time per transaction goes, by wait event. With no
# think time, each pgbench connection's cycle is one transaction, so the mean
# latency split by the share of samples in each state is time per commit.
BREAKDOWN = {
    "sync_wait": ("IPC:SyncRep",),
    "wal": ("LWLock:WALWrite", "LWLock:WALInsert", "IO:WalSync", "IO:WalWrite",
            "IO:WALSync", "IO:WALWrite", "LWLockNamed:WALWriteLock",
            "LWLockNamed:WALInsertLock"),
    "cpu": ("CPU:running",),
    "client": ("Client:ClientRead", "Client:idle"),
}


def _latency_breakdown(store: Store, repeat_ids: list[int],
                       waits: dict[tuple[str, str], dict[str, float]]) -> dict[str, float] | None:
    shares = waits.get(("primary", "backend"))
    if not shares or not repeat_ids:
        return None
    total = sum(shares.values())
    latency = queries.mean_latency_with_waits(store, repeat_ids)
    if latency is None or total <= 0:
        return None
    out = {"latency_ms": latency}
    known = 0.0
    for name, events in BREAKDOWN.items():
        share = sum(v for k, v in shares.items() if k in events) / total
        known += share
        out[f"{name}_ms"] = latency * share
    out["other_ms"] = latency * max(0.0, 1.0 - known)
    return out


def run_costs(folder: Path) -> list[RunCellCosts]:
    store = Store(folder, create=False)
    try:
        run = store.run()
        out: list[RunCellCosts] = []
        for cell in store.cells(run.id):
            if cell.status != "done":
                continue
            version = cluster_version(store, cell)
            out.append(RunCellCosts(cell.idx, cell.label, version, cell.tps_mean,
                                    cell_costs(store, cell.id)))
        return out
    finally:
        store.close()
