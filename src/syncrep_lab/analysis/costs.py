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
from pathlib import Path
from typing import Any

from syncrep_lab.measure.stats import mean_ci
from syncrep_lab.store import Store, cluster_key_text

KEY_SYSCALLS = ("epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "kill", "futex",
                "read", "write", "sendto", "recvfrom", "fdatasync", "close")


def _marks(ids: Collection[int]) -> str:
    """The placeholders of an SQL ``in (...)`` over these repeat ids."""
    return ",".join("?" * len(ids))


def _ci(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "low": None, "high": None}
    ci = mean_ci(values)
    return {"mean": ci.mean, "low": ci.low, "high": ci.high}


def cluster_version(store: Store, cell: Any) -> str:
    """The server version a cell ran on ('' when not recorded)."""
    params = json.loads(cell["params_json"])
    key = cluster_key_text(params)
    row = store.db.execute("select version from clusters where run_id = ? and cluster_key = ? "
                           "order by id desc limit 1", (cell["run_id"], key)).fetchone()
    return str(row["version"]) if row and row["version"] else ""


def _role_figures(store: Store, repeats: dict[int, int], tps: dict[int, float],
                  probed: Collection[int]) -> dict[tuple[str, str], dict[str, list[float]]]:
    """Per node and role, each figure's per-commit values, one per repeat that has it.
    /proc figures of probed repeats are ``proc:``, those of measured repeats (nothing
    attached to any process: probes/session.UntracedCpu) ``untraced:``."""
    per: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in store.db.execute(
            f"select * from costs where repeat_id in ({_marks(repeats)})",
            tuple(repeats)):
        commits = repeats[int(row["repeat_id"])]
        if commits <= 0:
            continue
        figures = per[(row["node"], row["role"])]
        figures["cpu_us"].append(1000.0 * row["cpu_ms"] / commits)
        figures["context_switches"].append(row["context_switches"] / commits)
        for name, n in json.loads(row["syscalls_json"]).items():
            figures[f"syscall:{name}"].append(n / commits)
    for row in store.db.execute(
            f"select * from proc_costs where repeat_id in ({_marks(repeats)})", tuple(repeats)):
        commits = repeats[int(row["repeat_id"])]
        if commits <= 0:
            continue
        figures = per[(row["node"], row["role"])]
        kind = "proc" if int(row["repeat_id"]) in probed else "untraced"
        figures[f"{kind}:user_us"].append(1000.0 * row["user_ms"] / commits)
        figures[f"{kind}:system_us"].append(1000.0 * row["system_ms"] / commits)
        figures[f"{kind}:voluntary_cs"].append(row["voluntary_cs"] / commits)
        figures[f"{kind}:involuntary_cs"].append(row["involuntary_cs"] / commits)
    for row in store.db.execute(
            f"select * from sched_roles where repeat_id in ({_marks(repeats)})", tuple(repeats)):
        # The scheduler trace covers the first seconds of the repeat: commits in
        # that window are estimated from the repeat's own TPS.
        commits_traced = tps[int(row["repeat_id"])] * float(row["duration_s"])
        if commits_traced <= 0:
            continue
        if row["node"] == "-":
            continue  # the kernel's threads and unrelated processes
        figures = per[(row["node"], row["role"])]
        figures["sched:sleep_us"].append(1000.0 * row["sleep_ms"] / commits_traced)
        figures["sched:runq_us"].append(1000.0 * row["runq_ms"] / commits_traced)
        figures["sched:wakeups_received"].append(row["wakeups_received"] / commits_traced)
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
    """A cell's repeats: commits and TPS by repeat id, and the ids of the probed ones."""
    stored = store.repeats(cell_id)
    return ({int(r["id"]): int(r["transactions"]) for r in stored},
            {int(r["id"]): float(r["tps"]) for r in stored},
            {int(r["id"]) for r in stored if r["probed"]})


def role_values(store: Store, cell_id: int) -> list[dict[str, Any]]:
    """Per node and role, the per-repeat values behind :func:`cell_costs`'s intervals
    (CPU µs, context switches and each system call per commit), for tests between
    cells that need the spread, not only the mean."""
    repeats, tps, probed = _cell_repeats(store, cell_id)
    out = []
    for (node, role), figures in sorted(_role_figures(store, repeats, tps, probed).items()):
        source, cpu, switches = _cpu_values(figures)
        out.append({"node": node, "role": role, "cpu_source": source,
                    "cpu_us_per_commit": cpu, "context_switches_per_commit": switches,
                    "syscalls_per_commit": {k.removeprefix("syscall:"): v
                                            for k, v in figures.items()
                                            if k.startswith("syscall:")}})
    return out


def cell_costs(store: Store, cell_id: int) -> dict[str, Any]:
    """Per-commit costs and wait shares of one cell, over its repeats."""
    repeats, tps, probed = _cell_repeats(store, cell_id)
    probe_status: dict[str, set[str]] = defaultdict(set)
    for row in store.db.execute(
            f"select * from probes where repeat_id in ({_marks(repeats)})",
            tuple(repeats)):
        probe_status[row["probe"]].add(row["status"] + (f": {row['reason']}"
                                                          if row["reason"] else ""))
    per = _role_figures(store, repeats, tps, probed)
    roles = []
    for (node, role), figures in sorted(per.items()):
        syscalls = {k.removeprefix("syscall:"): _ci(v) for k, v in figures.items()
                    if k.startswith("syscall:")}
        entry: dict[str, Any] = {"node": node, "role": role}
        source, cpu, switches = _cpu_values(figures)
        entry.update({"cpu_source": source, "cpu_us_per_commit": _ci(cpu),
                      "context_switches_per_commit": _ci(switches), "repeats": len(cpu)})
        entry["syscalls_per_commit"] = syscalls
        # perf's task-clock of the probed repeats, whatever the CPU above came from
        entry["perf_cpu_us_per_commit"] = _ci(figures["cpu_us"])
        entry["proc"] = {k.removeprefix("proc:") + "_per_commit": _ci(v)
                         for k, v in figures.items() if k.startswith("proc:") and v}
        entry["sched"] = {k.removeprefix("sched:") + "_per_commit": _ci(v)
                          for k, v in figures.items() if k.startswith("sched:") and v}
        roles.append(entry)
    waits: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    totals: dict[tuple[str, str], int] = defaultdict(int)
    for row in store.db.execute(
            f"select node, role, wait_type, wait_event, sum(samples) as n from waits "
            f"where repeat_id in ({_marks(repeats)}) "
            f"group by node, role, wait_type, wait_event", tuple(repeats)):
        waits[(row["node"], row["role"])][f"{row['wait_type']}:{row['wait_event']}"] = row["n"]
        totals[(row["node"], row["role"])] += row["n"]
    shares = [{"node": node, "role": role, "samples": totals[(node, role)],
               "share": {k: v / totals[(node, role)] for k, v in
                         sorted(events.items(), key=lambda kv: -kv[1])}}
              for (node, role), events in sorted(waits.items()) if totals[(node, role)]]
    return {"roles": roles, "waits": shares,
            "latency_breakdown": _latency_breakdown(store, list(repeats), waits),
            "replication": _replication(store, list(repeats)),
            "wakeups": _wakeups(store, tps),
            "flamegraphs": _flamegraphs(store, list(repeats)),
            "numa": _numa(store, list(repeats)),
            "probes": {k: sorted(v) for k, v in probe_status.items()}}


def _wakeups(store: Store, tps: dict[int, float]) -> list[dict[str, Any]]:
    """Who woke whom, per commit, between PostgreSQL processes (and the client)."""
    if not tps:
        return []
    per: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    rows = store.db.execute(f"select * from wakeups where repeat_id in ({_marks(tps)})",
                            tuple(tps)).fetchall()
    traced = {int(r["repeat_id"]) for r in rows}
    for row in rows:
        commits = tps[int(row["repeat_id"])] * float(row["duration_s"])
        if commits > 0 and "-" not in (row["waker_node"], row["wakee_node"]):
            per[(row["waker_node"], row["waker_role"], row["wakee_node"],
                 row["wakee_role"])].append(row["count"] / commits)
    out = []
    for (wn, wr, en, er), values in per.items():
        values += [0.0] * (len(traced) - len(values))  # repeats where this pair never woke
        out.append({"waker_node": wn, "waker_role": wr, "wakee_node": en, "wakee_role": er,
                    "per_commit": _ci(values)})
    return sorted(out, key=lambda r: -float(r["per_commit"]["mean"] or 0.0))


def _flamegraphs(store: Store, repeat_ids: list[int]) -> list[dict[str, Any]]:
    """Each role's flame graph (the last probed repeat's) and where its CPU goes."""
    if not repeat_ids:
        return []
    graphs = store.db.execute(
        f"select * from flamegraphs where repeat_id = (select max(repeat_id) from flamegraphs "
        f"where repeat_id in ({_marks(repeat_ids)})) order by node, role",
        tuple(repeat_ids)).fetchall()
    out = []
    for g in graphs:
        frames = store.db.execute(
            "select frame, inclusive_us, self_us from stack_frames where repeat_id = ? and "
            "node = ? and role = ? order by inclusive_us desc",
            (g["repeat_id"], g["node"], g["role"])).fetchall()
        total = max(1, int(g["cpu_us"]))
        out.append({"node": g["node"], "role": g["role"], "cpu_us": g["cpu_us"],
                    "svg": str(store.folder / g["svg_path"]),
                    "folded": str(store.folder / g["folded_path"]),
                    "frames": [{"frame": f["frame"], "inclusive": f["inclusive_us"] / total,
                                "self": f["self_us"] / total} for f in frames]})
    return out


def _numa(store: Store, repeat_ids: list[int]) -> list[dict[str, Any]]:
    if not repeat_ids:
        return []
    rows = store.db.execute(
        f"select node, role, phase, numa_node, avg(pages) as pages from numa_pages "
        f"where repeat_id in ({_marks(repeat_ids)}) group by node, role, phase, numa_node "
        f"order by node, role, phase, numa_node", tuple(repeat_ids)).fetchall()
    return [dict(r) for r in rows]


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
                       waits: dict[tuple[str, str], dict[str, float]]) -> dict[str, Any] | None:
    shares = waits.get(("primary", "backend"))
    if not shares or not repeat_ids:
        return None
    total = sum(shares.values())
    row = store.db.execute(
        f"select avg(lat_mean_ms) from repeats where id in ({_marks(repeat_ids)}) and id in "
        f"(select repeat_id from waits)", tuple(repeat_ids)).fetchone()
    if row is None or row[0] is None or total <= 0:
        return None
    latency = float(row[0])
    out: dict[str, Any] = {"latency_ms": latency}
    known = 0.0
    for name, events in BREAKDOWN.items():
        share = sum(v for k, v in shares.items() if k in events) / total
        known += share
        out[f"{name}_ms"] = latency * share
    out["other_ms"] = latency * max(0.0, 1.0 - known)
    return out


def _replication(store: Store, repeat_ids: list[int]) -> list[dict[str, Any]]:
    if not repeat_ids:
        return []
    rows = store.db.execute(
        f"select standby, group_concat(distinct sync_state) as states, count(*) as n, "
        f"avg(write_lag_ms) as write_ms, avg(flush_lag_ms) as flush_ms, "
        f"max(flush_lag_ms) as flush_max_ms, avg(replay_lag_ms) as replay_ms, "
        f"max(replay_lag_ms) as replay_max_ms, avg(flush_lag_bytes) as flush_bytes, "
        f"max(flush_lag_bytes) as flush_max_bytes from replication_samples "
        f"where repeat_id in ({_marks(repeat_ids)}) group by standby order by standby",
        tuple(repeat_ids)).fetchall()
    return [dict(r) for r in rows]


def run_costs(folder: Path) -> list[dict[str, Any]]:
    store = Store(folder, create=False)
    try:
        run = store.run()
        out = []
        for cell in store.cells(int(run["id"])):
            if cell["status"] != "done":
                continue
            version = cluster_version(store, cell)
            out.append({"idx": cell["idx"], "label": cell["label"], "version": version,
                        "tps_mean": cell["tps_mean"], **cell_costs(store, int(cell["id"]))})
        return out
    finally:
        store.close()
