"""The SSH hosts a cluster uses (``topology.hosts``), seen from the run: what each one is
(stored once, with the run's machine), and in every repeat its clock against this
machine's and the CPUs it kept busy.

The clock offset is read at the start of every repeat (the shortest of five SSH round
trips; half of it is the uncertainty) and stored with it. It is applied where a host's
clock stamps a timeline: a client on a host says when it started by that host's clock,
and the repeat's one timeline (readers/timeline.py) is placed with it. The CPUs kept
busy are the host's /proc/stat
before and after the repeat: the diagnosis judges each host's saturation from them, as
it judges this machine's; the same lines give the host's steal (a VM's hypervisor's
share). A guest the run booted is also seen from here: its QEMU's vCPU threads, their
CPU and their wait for a CPU on this machine (guests/costs.py).
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from syncrep_lab.guests import costs
from syncrep_lab.hosts import machine
from syncrep_lab.hosts.ssh import HostSpec, SshHost
from syncrep_lab.probes.recorder import Ending
from syncrep_lab.run.io_watch import disk_rows, net_rows
from syncrep_lab.store import (
    DiskIoRow,
    GuestRepeatRow,
    HostNumaRow,
    HostRepeatRow,
    NetIoRow,
    ProbeRows,
)

if TYPE_CHECKING:
    from syncrep_lab.cluster.manifest import Manifest
    from syncrep_lab.plan.spec import Spec


def host_roles(spec: Spec) -> dict[str, list[str]]:
    """Each SSH host of the spec's topology, and what runs there (standbys, client)."""
    roles: dict[str, list[str]] = defaultdict(list)
    topo = spec.topology
    for node, host in sorted(topo.hosts.items()):
        roles[host].append(node)
    if topo.guests is not None and "guests" in (spec.matrix.isolation or [topo.isolation]):
        # isolation = "guests": instance i's guest nodes in guest i, as guest1 holds them
        most = max(spec.matrix.instances or [topo.instances])
        for host, nodes in list(roles.items()):
            if spec.is_guest(host):
                for name in topo.guests.names()[1:most]:
                    roles.setdefault(name, list(nodes))
    # matrix.kernel: each guest's twins booted with the other kernels hold what it holds
    for host, nodes in list(roles.items()):
        if spec.is_guest(host):
            for kernel in spec.guest_kernels()[1:]:
                roles.setdefault(spec.guest_of(host, kernel), list(nodes))
    return dict(roles)


def host_facts(spec: Spec) -> dict[str, dict[str, Any]]:
    """What each host is, with what runs there: stored in the run's ``machine``."""
    out = {}
    for name, roles in host_roles(spec).items():
        with SshHost(spec.ssh_host(name)) as host:
            out[name] = {**machine.machine_facts(host), "roles": roles}
    return out


def numa_rows(host: str, before: dict[int, dict[str, int]], after: dict[int, dict[str, int]],
              seconds: float) -> list[HostNumaRow]:
    """Each node's numastat counters over a repeat, for a host of several nodes (with
    one, every allocation is a hit there: nothing to tell)."""
    if len(after) < 2:
        return []
    out = []
    for node, counts in sorted(after.items()):
        first = before.get(node, {})
        hit, miss, foreign, interleave, local, other = (
            counts.get(k, 0) - first.get(k, 0) for k in machine.NUMASTAT)
        out.append(HostNumaRow(host, node, hit, miss, foreign, interleave, local, other,
                               seconds))
    return out


class HostWatch:
    """The hosts of one cluster, read before and after a repeat; a recorder of the
    repeat (probes/recorder.py)."""

    @classmethod
    def of(cls, *manifests: Manifest) -> HostWatch | None:
        """The watch of the hosts of a cell's clusters (one per instance: under
        isolation = "guests" each has guests of its own); None when all runs here."""
        if all(m.client is None and not any(n.host for n in m.nodes) for m in manifests):
            return None
        return cls(*manifests)

    def __init__(self, *manifests: Manifest) -> None:
        specs: dict[str, HostSpec] = {}
        roles: dict[str, list[str]] = defaultdict(list)
        for manifest in manifests:
            for node in manifest.nodes:
                if node.host is not None:
                    specs[node.host["name"]] = HostSpec(**node.host)
                    if node.name not in roles[node.host["name"]]:
                        roles[node.host["name"]].append(node.name)
            if manifest.client is not None:
                specs[manifest.client["host"]["name"]] = HostSpec(**manifest.client["host"])
                if "client" not in roles[manifest.client["host"]["name"]]:
                    roles[manifest.client["host"]["name"]].append("client")
        self.roles = dict(roles)
        self.hosts = {name: SshHost(spec) for name, spec in sorted(specs.items())}
        self.before: dict[str, machine.HostReading] = {}
        # the guests among them, seen from here too: QEMU's pid and its first reading
        self.guests = {name: spec.guest for name, spec in specs.items() if spec.guest}
        self.qemu_before: dict[str, tuple[int, float, costs.QemuReading]] = {}

    def start(self) -> None:
        try:
            for name, host in self.hosts.items():
                self.before[name] = machine.read_host(host)
            for name, namespace in self.guests.items():
                pid = costs.qemu_pid(namespace)
                first = costs.read_qemu(pid) if pid is not None else None
                if pid is not None and first is not None:
                    self.qemu_before[name] = (pid, time.monotonic(), first)
        except BaseException:
            self.close()
            raise

    def offset(self, name: str | None) -> float:
        """How far host ``name``'s clock was ahead of this machine's at the start of the
        repeat, in seconds (0 for None: this machine)."""
        reading = self.before.get(name) if name is not None else None
        return reading.offset_s if reading is not None else 0.0

    def stop(self, ending: Ending) -> ProbeRows:
        """``host_repeats``: each host's clock offset and the CPUs it kept busy;
        ``disk_io`` and ``net_io``: its disks and its own network's interfaces."""
        rows = []
        disks: list[DiskIoRow] = []
        nets: list[NetIoRow] = []
        numa: list[HostNumaRow] = []
        try:
            for name, host in self.hosts.items():
                first = self.before.get(name)
                if first is None:
                    continue
                after = machine.read_host(host, tries=1)
                rows.append(HostRepeatRow(name, ",".join(self.roles[name]),
                                          first.offset_s * 1e3, first.uncertainty_s * 1e3,
                                          machine.busy_cpus(first, after), after.cpus,
                                          machine.steal_cpus(first, after)))
                seconds = after.io_at - first.io_at  # this host's own readings' span
                numa += numa_rows(name, first.numa, after.numa, seconds)
                disks += disk_rows(name, first.disks, after.disks, seconds)
                nets += net_rows(name, {(0, ""): first.network}, {(0, ""): after.network},
                                 seconds)
            guests = [row for name in self.qemu_before if (row := self._guest_row(name))]
        finally:
            self.close()
        return ProbeRows(host_repeats=rows, disk_io=disks, net_io=nets, guest_repeats=guests,
                         host_numa=numa)

    def _guest_row(self, name: str) -> GuestRepeatRow | None:
        """What guest ``name``'s QEMU took of this machine since the repeat began."""
        pid, at, first = self.qemu_before[name]
        after = costs.read_qemu(pid)
        seconds = time.monotonic() - at
        if after is None or seconds <= 0:
            return None
        hz = os.sysconf("SC_CLK_TCK")
        return GuestRepeatRow(
            name, after.vcpus, (after.vcpu_cpu_ns - first.vcpu_cpu_ns) / 1e9 / seconds,
            (after.vcpu_delay_ns - first.vcpu_delay_ns) / 1e9 / seconds,
            (after.process_ticks - first.process_ticks) / hz / seconds, seconds)

    def abort(self) -> None:
        self.close()

    def close(self) -> None:
        for host in self.hosts.values():
            host.close()
