"""A placed cluster while it runs: role pinning kept up, and what the kernel applied
read back during every repeat.

Pinning follows processes that start later (pgbench's backends, a walsender that
reconnects): a thread per node watches the postmaster's children. What is stored
is not what the spec asked but what each process was given, read from
``/proc/PID/status`` (Cpus_allowed_list, Mems_allowed_list), ``/proc/PID/cgroup``
and ``numa_maps``, in the middle of each measured repeat, when pgbench's
backends exist.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from syncrep_lab.cluster import server
from syncrep_lab.cluster.manifest import Manifest
from syncrep_lab.errors import UserError
from syncrep_lab.pg.roles import NodeProcess, node_processes
from syncrep_lab.probes.session import walsenders
from syncrep_lab.store import LinkRow, NumastatRow, PlacementRow

if TYPE_CHECKING:
    from syncrep_lab.experiment.clusters import Target
    from syncrep_lab.placement.pinning import RolePinner


class Walsenders:
    """pid -> the standby a walsender serves, from pg_stat_replication, asked at most
    twice a second (the pinner asks for every walsender it has not named yet)."""

    def __init__(self, admin: str) -> None:
        self.admin = admin
        self.known: dict[int, str] = {}
        self.asked = 0.0
        self.lock = threading.Lock()

    def __call__(self, pid: int) -> str | None:
        with self.lock:
            if pid not in self.known and time.monotonic() - self.asked > 0.5:
                self.asked = time.monotonic()
                self.known = walsenders(self.admin)
            return self.known.get(pid)


def start_pinners(manifest: Manifest) -> list[RolePinner]:
    """One pinner per node that has pin rules, started."""
    from syncrep_lab.placement.cgroups import CpusetGroup, cpuset_support
    from syncrep_lab.placement.pinning import PinRule, RolePinner

    layout = manifest.placed()
    if layout is None or not layout.pins:
        return []
    pinners = []
    for name in sorted({p.node for p in layout.pins}):
        node = manifest.node(name)
        pid = server.postmaster_pid(node.data_dir(manifest.dir))
        if pid is None:
            continue
        pins = [p for p in layout.pins if p.node == name]
        rules = [PinRule(p.role, p.cpus) for p in pins]
        groups = {p.role: CpusetGroup.open(cpuset_support(), layout.run_key, p.group)
                  for p in pins if p.group}

        def move_to(rule: PinRule, groups: dict[str, Any] = groups) -> Any:
            return groups.get(rule.role)

        pinner = RolePinner(pid, rules, Walsenders(manifest.admin_conninfo(node)),
                            move_to=move_to)
        pinner.start()
        pinners.append(pinner)
    return pinners


Placed = tuple[str, str, dict[str, Any]]  # node, role, what the kernel applied


def _processes(target: Target, senders: dict[int, str]) -> list[NodeProcess]:
    """Every server process of a target's local nodes, with its role."""
    manifest = target.manifest
    if manifest is None:
        return []
    out = []
    for node in manifest.local_nodes:
        postmaster = server.postmaster_pid(node.data_dir(manifest.dir))
        if postmaster is not None:
            out += node_processes(node.name, postmaster,
                                  senders if node.role == "primary" else None)
    return out


def _here(target: Target, senders: dict[int, str]) -> list[Placed]:
    from syncrep_lab.placement.cgroups import placement_of

    out = []
    for p in _processes(target, senders):
        try:
            out.append((p.node, p.label, placement_of(p.pid)))
        except OSError:
            continue  # gone meanwhile
    return out


def _on_hosts(target: Target, senders: dict[int, str]) -> list[Placed]:
    """The same of the target's nodes on SSH hosts, read there (two commands a node)."""
    from syncrep_lab.cluster.remote_node import host_spec
    from syncrep_lab.hosts import remote
    from syncrep_lab.hosts.ssh import SshHost
    from syncrep_lab.probes.remote import node_processes as remote_processes

    manifest = target.manifest
    out: list[Placed] = []
    for node in manifest.nodes if manifest is not None else []:
        if node.host is None or node.remote_data is None:
            continue
        with SshHost(host_spec(node.host)) as host:
            found = remote_processes(node.name, remote.proc_snapshot(host, node.remote_data),
                                     senders if node.role == "primary" else {})
            got = remote.placement_of(host, [p.pid for p in found])
        out += [(node.name, p.label, got[p.pid]) for p in found if p.pid in got]
    return out


def placement_rows(targets: list[Target],
                   clients: list[tuple[int, str, Callable[[], dict[str, Any]]]]
                   ) -> list[PlacementRow]:
    """What each role's processes were given, here and on SSH hosts, grouped: (instance,
    node, role, processes, cpus, mems, cgroup, numa_policy). ``clients``: (instance, its
    program, what reads the client's placement)."""
    seen: Counter[tuple[Any, ...]] = Counter()
    for target in targets:
        manifest = target.manifest
        senders = (walsenders(manifest.admin_conninfo(manifest.primary))
                   if manifest is not None else {})
        found = _here(target, senders) + _on_hosts(target, senders)
        for inst, program, read in clients:
            if inst == target.instance:
                with contextlib.suppress(OSError, UserError):  # gone meanwhile
                    found.append(("client", program, read()))
        for node, role, got in found:
            seen[(target.instance, node, role, got.get("cpus", ""), got.get("mems", ""),
                  got.get("cgroup", ""), got.get("numa_policy", ""))] += 1
    return [PlacementRow(k[0], k[1], k[2], n, *k[3:]) for k, n in sorted(seen.items())]


class PlacementWatch(threading.Thread):
    """Reads the placement back once, ``at`` seconds into a repeat."""

    def __init__(self, targets: list[Target],
                 clients: Callable[[], list[tuple[int, str, Callable[[], dict[str, Any]]]]],
                 at: float) -> None:
        super().__init__(daemon=True, name="placement-watch")
        self.targets, self.clients, self.at = targets, clients, at
        self.rows: list[PlacementRow] = []
        self.done = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        if self.done.wait(self.at):
            return
        try:
            self.rows = placement_rows(self.targets, self.clients())
        except Exception as exc:  # a probe failing must not fail the repeat
            self.error = f"{type(exc).__name__}: {exc}"

    def stop(self) -> list[PlacementRow]:
        self.done.set()
        self.join(timeout=10)
        return self.rows


def link_rows(targets: list[Target]) -> list[LinkRow]:
    """(instance, a, b, profile, applied as JSON) of every emulated link."""
    from syncrep_lab.network import netns

    rows = []
    for target in targets:
        layout = target.manifest.placed() if target.manifest is not None else None
        plan = layout.network_plan() if layout is not None else None
        if plan is None:
            continue
        applied = netns.readback(plan)
        for link in plan.links:
            ends = [e for e in applied if {e.get("endpoint"), e.get("peer")} == {link.a, link.b}]
            rows.append(LinkRow(target.instance, link.a, link.b, link.profile.describe(),
                                json.dumps(ends or applied, default=str)))
    return rows


def numastat_rows(targets: list[Target], phase: str) -> list[NumastatRow]:
    """(instance, node, phase, numa_node, MB) of each postmaster, from numastat -p."""
    from syncrep_lab.placement.numa import numastat

    rows: list[NumastatRow] = []
    for target in targets:
        manifest = target.manifest
        if manifest is None:
            continue
        for node in manifest.local_nodes:
            pid = server.postmaster_pid(node.data_dir(manifest.dir))
            if pid is None:
                continue
            stats = numastat([pid])
            per_node = stats.get("processes", {}).get(pid, {}) or stats.get("total", {})
            for numa_node, mb in sorted(per_node.items()):
                rows.append(NumastatRow(target.instance, node.name, phase, str(numa_node),
                                        float(mb)))
    return rows
