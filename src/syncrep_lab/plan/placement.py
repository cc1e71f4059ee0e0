"""From a spec's placement, cores, links and instances to each instance's layout
(``placement/layout.py``). What they need of this machine is checked in
``plan/checks.py``, before anything is made."""

from __future__ import annotations

import os

from syncrep_lab.placement.layout import CLIENT, Launch, Layout, Pin, Quota
from syncrep_lab.plan.matrix import (
    CLIENT_LINK,
    NO_PLACEMENT,
    SOCKET,
    Cell,
    cell_hosts,
    cell_links,
    link_profiles,
    standby_names,
    uses_namespaces,
)
from syncrep_lab.plan.spec import Spec


def _split(cpus: list[int], instance: int, instances: int) -> list[int]:
    """The instance's share of ``cpus`` (1-based instance), as even as it goes."""
    if instances == 1:
        return cpus
    size, extra = divmod(len(cpus), instances)
    start = (instance - 1) * size + min(instance - 1, extra)
    return cpus[start : start + size + (1 if instance - 1 < extra else 0)]


def layout_for(spec: Spec, cell: Cell, instance: int, run_key: str,
               confined: list[int] | None = None) -> Layout | None:
    """One instance's layout (instance counts from 1), or None when the cell runs as
    plain processes on this host's loopback. ``confined``: every node and the client in
    a cpuset of these CPUs (a duet's side, run/duet.py; a duet has no placement)."""
    from syncrep_lab.network.plan import Link, plan_network
    from syncrep_lab.placement.cpus import machine_cpus, parse_cpus

    names = standby_names(spec, cell.standbys)
    place = spec.placements.get(cell.placement) if cell.placement != NO_PLACEMENT else None
    # the owner's pid in the key: `clean` leaves the cpusets of a run still going alone
    layout = Layout(run_key=f"{run_key}-{os.getpid()}i{instance}")
    separate = place is not None and place.instances == "separate"
    share = (lambda cpus: _split(cpus, instance, cell.instances)) if separate else (
        lambda cpus: cpus)

    def cpus_of(node: str) -> list[int] | None:
        if confined is not None:
            return list(confined)
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

    remote = set(cell_hosts(spec, cell))  # started on their SSH hosts, placed there
    for node in ["primary", *names]:
        launch = Launch(numa=numa_of(node), cpus=cpus_of(node))
        if node in remote:
            layout.hosts[node] = launch
        else:
            layout.nodes[node] = launch
    if CLIENT in remote:
        layout.hosts[CLIENT] = Launch(cpus=cpus_of(CLIENT))
    else:
        layout.client = Launch(cpus=cpus_of(CLIENT))
    if place is not None:
        layout.exclusive = place.exclusive
        for key, cpus in place.pin.items():
            node, _, role = key.rpartition("/")
            node = node or "primary"
            if node in layout.nodes or node in layout.hosts:  # else: not in this cell
                layout.pins.append(Pin(node, role, share(parse_cpus(cpus))))
        for key, cpu_share in place.quota.items():
            node, _, role = key.rpartition("/")
            node = node or "primary"
            if node in layout.nodes:  # else: not in this cell (or on a host: refused)
                layout.quotas.append(Quota(node, role, cpu_share))
    if uses_namespaces(spec, cell):
        profiles = link_profiles(spec)
        wanted = cell_links(spec, cell)
        links = [Link("primary", standby, profiles[wanted[standby]])
                 for standby in names if wanted[standby] != SOCKET]
        if wanted[CLIENT_LINK] != SOCKET:
            links.append(Link(CLIENT, "primary", profiles[wanted[CLIENT_LINK]]))
        # the run's digest and the pool slot ("DIGEST" or "DIGEST-kN", run/clusters.py's
        # slot_dir): clusters of one run held up at once get namespaces of their own
        digest, _, slot = run_key.partition("-")
        plan = plan_network(f"srl-{digest[:5]}{slot}{instance}", links)
        layout.network = plan.to_json()
        for node, launch in layout.nodes.items():
            # a standby beside the primary shares its namespace and its unix socket
            launch.netns = plan.namespace("primary" if wanted.get(node) == SOCKET else node)
        if wanted[CLIENT_LINK] != SOCKET:
            layout.client.netns = plan.namespace(CLIENT)
    return None if layout.empty else layout
