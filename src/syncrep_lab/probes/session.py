"""The probes of one measured repeat: started just before pgbench, stopped after it.

Order matters. perf attaches first, to the processes that exist (and, through
the postmaster, to every child born later: pgbench's backends). The samplers
connect after, so their own backends are born under perf but exit after it
stops, and never count as the workload's cost. Each probe that cannot run
here is skipped with its reason, which is stored; none of them can fail the
repeat.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from syncrep_lab.cluster import server
from syncrep_lab.experiment.spec import Probes
from syncrep_lab.probes import perfstat
from syncrep_lab.probes.activity import ActivityResult, NodeSampler
from syncrep_lab.probes.roles import NodeProcess, node_processes


@dataclass(frozen=True)
class ProbeNode:
    name: str
    admin: str  # the tool's connection to it
    data_dir: Path | None  # None: not on this machine (attached), no process probes
    primary: bool


@dataclass
class ProbeData:
    status: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    costs: list[dict[str, Any]] = field(default_factory=list)
    activity: dict[str, ActivityResult] = field(default_factory=dict)


def _walsenders(admin: str) -> dict[int, str]:
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            return {int(str(r[0])): str(r[1]) for r in conn.execute(
                "select pid, application_name from pg_stat_replication")}
    except psycopg.Error:
        return {}


class RepeatProbes:
    def __init__(self, config: Probes, nodes: list[ProbeNode], version_num: int,
                 out_dir: Path) -> None:
        self.config = config
        self.nodes = nodes
        self.version_num = version_num
        self.out_dir = out_dir
        self.data = ProbeData()
        self.processes: list[NodeProcess] = []
        self.perf: perfstat.PerfStat | None = None
        self.samplers: dict[str, NodeSampler] = {}

    def start(self) -> None:
        primary = next((n for n in self.nodes if n.primary), None)
        senders = _walsenders(primary.admin) if primary else {}
        for node in self.nodes:
            if node.data_dir is None:
                continue
            pid = server.postmaster_pid(node.data_dir)
            if pid is not None:
                self.processes += node_processes(node.name, pid, senders)
        self._start_perf()
        self._start_samplers()

    def _start_perf(self) -> None:
        if not self.config.perf:
            self.data.status["perf"] = ("skipped", "turned off in the spec ([probes] perf)")
            return
        if not self.processes:
            self.data.status["perf"] = ("skipped", "no local PostgreSQL processes (attached "
                                        "cluster): process probes need the servers here")
            return
        reason = perfstat.unavailable_reason()
        if reason is not None:
            self.data.status["perf"] = ("skipped", reason)
            return
        self.perf = perfstat.PerfStat(self.processes, self.out_dir / "perf-stat.csv")
        try:
            self.perf.start()
        except (OSError, RuntimeError) as exc:
            self.data.status["perf"] = ("failed", str(exc))
            self.perf = None

    def _start_samplers(self) -> None:
        hz = self.config.wait_events_hz
        if hz <= 0:
            self.data.status["activity"] = ("skipped", "turned off in the spec")
            return
        roles = {p.pid: p.label for p in self.processes}
        for node in self.nodes:
            sampler = NodeSampler(
                node.admin, {pid: r for pid, r in roles.items()}, hz=hz,
                replication_hz=self.config.replication_hz if node.primary else 0.0,
                version_num=self.version_num)
            sampler.start()
            self.samplers[node.name] = sampler

    def stop(self) -> ProbeData:
        for name, sampler in self.samplers.items():
            self.data.activity[name] = sampler.stop()
        if self.samplers:
            errors = [f"{n}: {r.error}" for n, r in self.data.activity.items() if r.error]
            self.data.status["activity"] = (("failed", "; ".join(errors)) if errors
                                            else ("ran", None))
        if self.perf is not None:
            try:
                counts = self.perf.stop()
            except (OSError, RuntimeError) as exc:
                self.data.status["perf"] = ("failed", str(exc))
            else:
                self.data.costs = self._by_role(counts)
                self.data.status["perf"] = ("ran", None)
        return self.data

    def _by_role(self, counts: dict[int, perfstat.Counts]) -> list[dict[str, Any]]:
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        syscalls: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
        for proc in self.processes:
            c = counts.get(proc.pid)
            if c is None:
                continue
            # The postmaster's row holds every child born during the repeat.
            label = "backend" if proc.role == "postmaster" else proc.label
            key = (proc.node, label)
            row = rows.setdefault(key, {"node": proc.node, "role": label, "processes": 0,
                                        "cpu_ms": 0.0, "context_switches": 0})
            row["processes"] += 1
            row["cpu_ms"] += c.task_clock_ms
            row["context_switches"] += c.context_switches
            for name, n in c.syscalls.items():
                syscalls[key][name] = syscalls[key].get(name, 0) + n
        for key, row in rows.items():
            row["syscalls_json"] = json.dumps(syscalls[key], sort_keys=True)
        return sorted(rows.values(), key=lambda r: (r["node"], r["role"]))


def probe_rows(data: ProbeData) -> dict[str, list[tuple[Any, ...]]]:
    """The store's rows for what the probes of one repeat found."""
    waits = []
    replication = []
    for node, result in data.activity.items():
        for (role, wtype, wevent), n in sorted(result.waits.items()):
            waits.append((node, role, wtype, wevent, n, result.ticks))
        replication += result.replication
    return {
        "probes": [(probe, status, reason) for probe, (status, reason) in data.status.items()],
        "costs": [(r["node"], r["role"], r["processes"], r["cpu_ms"], r["context_switches"],
                   r["syscalls_json"]) for r in data.costs],
        "waits": waits,
        "replication_samples": replication,
    }
