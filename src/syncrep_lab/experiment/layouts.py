"""From a spec's placement, cores, links and instances to each instance's layout
(cluster/layout.py), and the checks of them that need this machine."""

from __future__ import annotations

import os
import shutil

from syncrep_lab.cluster.layout import CLIENT, Launch, Layout, Pin
from syncrep_lab.errors import UserError
from syncrep_lab.experiment.plan import (
    NO_PLACEMENT,
    Cell,
    expand,
    link_profiles,
    standby_names,
    uses_namespaces,
)
from syncrep_lab.experiment.spec import Spec


def _split(cpus: list[int], instance: int, instances: int) -> list[int]:
    """The instance's share of ``cpus`` (1-based instance), as even as it goes."""
    if instances == 1:
        return cpus
    size, extra = divmod(len(cpus), instances)
    start = (instance - 1) * size + min(instance - 1, extra)
    return cpus[start : start + size + (1 if instance - 1 < extra else 0)]


def layout_for(spec: Spec, cell: Cell, instance: int, run_key: str) -> Layout | None:
    """One instance's layout (instance counts from 1), or None when the cell runs as
    plain processes on this host's loopback."""
    from syncrep_lab.network.netns import Link, plan_network
    from syncrep_lab.placement.cpus import machine_cpus, parse_cpus

    names = standby_names(spec, cell.standbys)
    place = spec.placements.get(cell.placement) if cell.placement != NO_PLACEMENT else None
    # the owner's pid in the key: `clean` leaves the cpusets of a run still going alone
    layout = Layout(run_key=f"{run_key}-{os.getpid()}i{instance}")
    separate = place is not None and place.instances == "separate"
    share = (lambda cpus: _split(cpus, instance, cell.instances)) if separate else (
        lambda cpus: cpus)

    def cpus_of(node: str) -> list[int] | None:
        if cell.cores is not None and node != CLIENT:
            return _split(machine_cpus()[: cell.cores], instance, cell.instances)
        if place is None:
            return None
        group = CLIENT if node == CLIENT else ("standbys" if node != "primary" else None)
        for key in (node, group, None if node == CLIENT else "nodes"):
            if key is not None and key in place.cpus:
                return share(parse_cpus(place.cpus[key]))
        return None

    def numa_of(node: str) -> str:
        if place is None:
            return "default"
        group = "standbys" if node != "primary" else None
        for key in (node, group, "nodes"):
            if key is not None and key in place.numa:
                return place.numa[key]
        return "default"

    for node in ["primary", *names]:
        layout.nodes[node] = Launch(numa=numa_of(node), cpus=cpus_of(node))
    layout.client = Launch(cpus=cpus_of(CLIENT))
    if place is not None:
        layout.exclusive = place.exclusive
        for key, cpus in place.pin.items():
            node, _, role = key.rpartition("/")
            node = node or "primary"
            if node in layout.nodes:  # a standby this cell does not have: nothing to pin
                layout.pins.append(Pin(node, role, share(parse_cpus(cpus))))
    if uses_namespaces(spec):
        net = spec.network
        profiles = link_profiles(spec)
        links = [Link("primary", standby, profiles[net.standby_links.get(standby, cell.link)])
                 for standby in names]
        links.append(Link(CLIENT, "primary", profiles[net.client]))
        plan = plan_network(f"srl-{run_key[:5]}{instance}", links)
        layout.network = plan.to_json()
        for node, launch in layout.nodes.items():
            launch.netns = plan.namespace(node)
        layout.client.netns = plan.namespace(CLIENT)
    return None if layout.empty else layout


def check_machine(spec: Spec) -> None:
    """What the spec's placement needs of this machine, checked before anything is
    made: its CPUs and NUMA nodes, writable cpusets, numactl, namespaces."""
    from syncrep_lab.placement.cpus import check_cpus, machine_cpus, numa_nodes
    from syncrep_lab.placement.numa import numactl_prefix

    plan = expand(spec)
    wants_cpusets = False
    for cell in plan.cells:
        if cell.cores is not None and cell.cores > len(machine_cpus()):
            raise UserError(f"matrix.cores: {cell.cores} cores, but this machine lets "
                            f"syncrep-lab use {len(machine_cpus())} "
                            f"(CPUs {','.join(map(str, machine_cpus()))})",
                            f"sweep cores up to {len(machine_cpus())}")
        wants_cpusets = wants_cpusets or cell.cores is not None
        if cell.instances > 1 and cell.placement != NO_PLACEMENT:
            place = spec.placements[cell.placement]
            if place.instances == "separate":
                for key, text in place.cpus.items():
                    if len(check_cpus(text, key)) < cell.instances:
                        raise UserError(
                            f"placements.{cell.placement}.cpus.{key}: {text} cannot be split "
                            f"among {cell.instances} instances",
                            "give at least one CPU per instance, or instances = 'shared'")
    for name, place in spec.placements.items():
        for key, text in [*place.cpus.items(), *place.pin.items()]:
            check_cpus(text, f"placements.{name}: {key}")
        wants_cpusets = wants_cpusets or bool(place.cpus) or bool(place.pin)
        for key, policy in place.numa.items():
            try:
                numactl_prefix(policy)
            except UserError as exc:
                raise UserError(f"placements.{name}.numa.{key}: {exc.cause} (this machine's "
                                f"NUMA nodes: {','.join(map(str, numa_nodes()))})",
                                exc.fix) from None
            if policy != "default" and shutil.which("numactl") is None:
                raise UserError(f"placements.{name}.numa.{key} needs numactl, which is not "
                                "installed", "apt-get install numactl (./run setup does)")
    if wants_cpusets:
        from syncrep_lab.placement.cgroups import cpuset_support

        support = cpuset_support()
        if support.reason is not None:
            raise UserError(f"the spec places processes in cpusets, which cannot be done "
                            f"here: {support.reason}",
                            "run as root on a machine with the cpuset controller, or leave "
                            "placement cpus, pin and matrix.cores out")
    if uses_namespaces(spec):
        from syncrep_lab.network.netns import check_network_support

        reason = check_network_support()
        if reason is not None:
            raise UserError(f"emulated links need network namespaces: {reason}",
                            "run as root with iproute2 installed, or leave [network] and "
                            "matrix.link out")
