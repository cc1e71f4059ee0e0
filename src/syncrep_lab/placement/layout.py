"""Where a cluster's processes run and what joins them: its *layout*.

A layout says, for one instance of a cell, which cpuset each node (and the
client) runs in, which numactl policy each node's postmaster is started under,
which roles are pinned to which CPUs or held to a CPU quota, and which network namespace each node
lives in with the emulated links between them. It is computed from the spec
before anything is made, saved in the cluster's manifest before anything is
applied (so ``cluster down`` and ``clean`` can undo it after a crash), applied
before the first server starts, and undone after the last one stopped.

Everything is started *inside* its placement rather than moved there later:
a postmaster joins its cgroup between fork and exec, and ``ip netns exec`` and
``numactl`` exec the server, so every backend and walsender it forks inherits
the placement from its first instruction.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from syncrep_lab import procs
from syncrep_lab.errors import UserError
from syncrep_lab.guests.leftovers import leftover_dirs as guest_leftovers
from syncrep_lab.network import netns
from syncrep_lab.network.plan import NetworkPlan
from syncrep_lab.placement.cgroups import (
    CpusetGroup,
    JoinFn,
    cpuset_support,
    leftover_runs,
    remove_run,
)
from syncrep_lab.placement.cpus import format_cpus
from syncrep_lab.placement.numa import numactl_args, numactl_prefix
from syncrep_lab.placement.quota import (
    QuotaGroup,
    leftover_quota_runs,
    quota_support,
    remove_quotas,
)

CLIENT = "client"  # the placement key and network endpoint of pgbench


@dataclass
class Launch:
    """How one node's postmaster (or the client) is started."""

    netns: str | None = None
    numa: str = "default"
    cpus: list[int] | None = None  # its cpuset's CPUs, None: not confined
    cgroup: str | None = None  # the cpuset group's path, once made

    def prefix(self) -> list[str]:
        """What the server's argv is wrapped in: the namespace, then numactl (each execs
        the next, so the pid the tool spawned is the postmaster's)."""

        out = ["ip", "netns", "exec", self.netns] if self.netns else []
        return out + numactl_prefix(self.numa)

    def on_host(self) -> list[str]:
        """What a process on an SSH host is started under: numactl, then taskset (the
        last word on its CPUs). There a node's ``cpus`` are its postmaster's CPU
        affinity, which every process it forks inherits; a cpuset would need root there
        (docs/decisions.md, "Nodes and the client on SSH hosts")."""

        out = numactl_args(self.numa)
        return out + (["taskset", "-c", format_cpus(self.cpus)] if self.cpus else [])

    def join(self) -> JoinFn | None:
        """A preexec function that puts the child in its cpuset before exec (close it
        once the child has started)."""
        if self.cgroup is None:
            return None

        return JoinFn(Path(self.cgroup) / "cgroup.procs")


@dataclass
class Pin:
    node: str
    role: str  # as `costs` names it: walsender:b, walwriter, backend ...
    cpus: list[int]
    group: str | None = None  # a cpuset of its own, when its CPUs are outside the node's


@dataclass
class Quota:
    node: str
    role: str  # as a pin's
    share: float  # CPUs a period (placement/quota.py)
    group: str = ""  # its quota group's name in the cpu hierarchy, once made


_RETIRED = ("cgroup_version", "applied")  # kept by manifests written before they went


@dataclass
class Layout:
    run_key: str  # the cpuset groups' folder and the namespaces' prefix
    nodes: dict[str, Launch] = field(default_factory=dict)
    client: Launch = field(default_factory=Launch)
    exclusive: bool = False
    pins: list[Pin] = field(default_factory=list)
    network: dict[str, Any] | None = None  # a NetworkPlan, as JSON
    # the nodes (and the client) on SSH hosts: started there under Launch.on_host()
    hosts: dict[str, Launch] = field(default_factory=dict)
    quotas: list[Quota] = field(default_factory=list)

    @property
    def uses_cgroups(self) -> bool:
        return any(n.cpus is not None for n in (*self.nodes.values(), self.client)) or any(
            p.node in self.nodes for p in self.pins)  # a host's node is pinned there

    def launch(self, node: str) -> Launch:
        return self.nodes.get(node) or Launch()

    def network_plan(self) -> NetworkPlan | None:
        return NetworkPlan.from_json(self.network) if self.network else None

    def address(self, of: str, seen_from: str) -> str | None:
        """``of``'s address on its link to ``seen_from``; None without a link between
        them (a standby or client beside the primary reaches it over its unix socket)."""
        plan = self.network_plan()
        if plan is None or not any({k.a, k.b} == {of, seen_from} for k in plan.links):
            return None
        return str(plan.address(of, seen_from))

    def subnets(self) -> list[str]:
        plan = self.network_plan()
        return [] if plan is None else list(plan.subnets())

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Layout:
        data = {k: v for k, v in data.items() if k not in _RETIRED}
        data["nodes"] = {k: Launch(**v) for k, v in data.get("nodes", {}).items()}
        data["client"] = Launch(**data.get("client", {}))
        data["pins"] = [Pin(**p) for p in data.get("pins", [])]
        data["quotas"] = [Quota(**q) for q in data.get("quotas", [])]
        data["hosts"] = {k: Launch(**v) for k, v in data.get("hosts", {}).items()}
        return cls(**data)

    @property
    def empty(self) -> bool:
        return (not self.uses_cgroups and self.network is None
                and all(n.numa == "default" for n in self.nodes.values())
                and not any(n.on_host() for n in self.hosts.values()) and not self.pins
                and not self.quotas)


def _group_name(node: str, role: str) -> str:
    """The cgroup directory of one node's role (a pin's cpuset, a quota's group)."""
    return f"{node}-{role.replace(':', '-')}"


def _support() -> Any:

    support = cpuset_support()
    if support.reason is not None:
        raise UserError(f"cpusets cannot be used here: {support.reason}",
                        "leave placement cpus, pin and cores out of the spec, or run where "
                        "cgroup cpusets are writable (as root)")
    return support


def apply(layout: Layout) -> None:
    """Make the cpuset groups and the network; all or nothing."""

    try:
        if layout.uses_cgroups:
            support = _support()
            for name, launch in sorted([*layout.nodes.items(), (CLIENT, layout.client)]):
                if launch.cpus is not None:
                    group = CpusetGroup.create(support, layout.run_key, name, launch.cpus,
                                               exclusive=layout.exclusive and name != CLIENT)
                    launch.cgroup = str(group.path)
            for pin in (p for p in layout.pins if p.node in layout.nodes):
                node_cpus = layout.launch(pin.node).cpus
                if node_cpus is not None and not set(pin.cpus) <= set(node_cpus):
                    # outside the node's cpuset: a group of its own, which the pinner
                    # moves the role's processes to
                    pin.group = _group_name(pin.node, pin.role)
                    CpusetGroup.create(support, layout.run_key, pin.group, pin.cpus)
        if layout.quotas:
            support = quota_support()
            for quota in layout.quotas:
                quota.group = _group_name(quota.node, quota.role)
                QuotaGroup.create(support, layout.run_key, quota.group, quota.share)
        plan = layout.network_plan()
        if plan is not None:

            netns.create(plan)
    except BaseException:
        undo(layout)
        raise


def reconfine(layout: Layout, cpus: list[int]) -> None:
    """Every node's cpuset and the client's given ``cpus`` instead, under the running
    processes (the kernel moves them at the write: a duet's sides swapping CPUs between
    rounds, run/duet.py); the layout says so after. Pins and quotas are left as they are
    (a duet has none)."""
    support = _support()
    for name, launch in sorted([*layout.nodes.items(), (CLIENT, layout.client)]):
        if launch.cgroup is not None:
            CpusetGroup.create(support, layout.run_key, name, cpus,
                               exclusive=layout.exclusive and name != CLIENT)
            launch.cpus = list(cpus)


def undo(layout: Layout) -> list[str]:
    """Remove the network and the cpuset groups (after the servers stopped).
    Returns what could not be removed."""
    problems = []
    plan = layout.network_plan() if layout.network else None
    if plan is not None:

        try:
            netns.destroy(plan)
        except Exception as exc:
            problems.append(f"network {plan.prefix}: {exc}")
    if layout.uses_cgroups:

        support = cpuset_support()
        if support.root is not None:
            try:
                remove_run(support, layout.run_key)
            except Exception as exc:
                problems.append(f"cpusets {layout.run_key}: {exc}")
    if layout.quotas:
        try:
            remove_quotas(layout.run_key)
        except Exception as exc:
            problems.append(f"CPU quotas {layout.run_key}: {exc}")
    return problems


def leftovers(remove: bool = True) -> list[str]:
    """Remove namespaces, cpuset groups and CPU quota groups of this tool that no cluster
    owns any more (a run killed between making them and recording them). Returns what
    was removed; ``remove`` False: what would be (`clean --list`), touching nothing."""
    found: list[str] = []
    with contextlib.suppress(Exception):
        names = netns.ours()
        if names and remove:
            netns.destroy_namespaces(names)
        found += [f"network namespace {n}" for n in names]
    with contextlib.suppress(Exception):  # after the namespaces: a dead guest's are gone
        found += [f"guest files {d}" for d in guest_leftovers(remove)]
    with contextlib.suppress(Exception):
        support = cpuset_support()
        if support.root is not None:
            for key in leftover_runs(support):
                if _owner_alive(key):
                    continue  # a run still going (another session, another terminal)
                if remove:
                    remove_run(support, key)
                found.append(f"cpuset group {key}")
    with contextlib.suppress(Exception):
        for key in leftover_quota_runs():
            if not _owner_alive(key):
                if remove:
                    remove_quotas(key)
                found.append(f"CPU quota group {key}")
    return found


def _owner_alive(run_key: str) -> bool:
    """Whether the process that made a layout's cpusets (its pid is in the key:
    ``DIGEST-PIDiK``) still runs."""
    match = re.search(r"-(\d+)i\d+$", run_key)
    if match is None:
        return False
    return procs.alive(int(match.group(1)))
