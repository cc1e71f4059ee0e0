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
from collections.abc import Callable, Mapping
from typing import Any

from syncrep_lab.cluster import server
from syncrep_lab.cluster.manifest import Manifest, Node
from syncrep_lab.cluster.remote_node import host_spec
from syncrep_lab.errors import UserError
from syncrep_lab.hosts import placement, snapshots
from syncrep_lab.hosts.ssh import SshHost
from syncrep_lab.network.delivery import delivered
from syncrep_lab.network.plan import NetworkPlan
from syncrep_lab.network.readback import delay_line_counters, readback
from syncrep_lab.pg.roles import NodeProcess, node_processes, role_of_title
from syncrep_lab.placement.cgroups import CpusetGroup, cpuset_support, placement_of
from syncrep_lab.placement.cpus import format_cpus, parse_list
from syncrep_lab.placement.layout import Quota
from syncrep_lab.placement.numa import numastat
from syncrep_lab.placement.pinning import GroupRule, PinRule, RolePinner
from syncrep_lab.placement.quota import QuotaFigures, QuotaGroup, quota_support
from syncrep_lab.probes.recorder import Client, Ending
from syncrep_lab.probes.remote import node_processes as remote_processes
from syncrep_lab.probes.session import walsenders
from syncrep_lab.run.target import Target
from syncrep_lab.store import LinkRow, NumastatRow, PlacementRow, ProbeRows, QuotaRow


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


class HostPinner:
    """Role pins of a node on an SSH host, kept up from here: every ``interval`` seconds
    its processes are read there (hosts/snapshots.proc_snapshot, one command on the run's
    connection), named by role, and each one whose CPUs are not its rule's is pinned
    with ``taskset -p`` there (one more command, only when some are). A process is
    pinned within an interval of having its role's title; a walsender once the
    primary names its standby. Nothing is left to undo: an affinity ends with its
    process."""

    def __init__(self, node: Node, rules: list[PinRule],
                 walsender_of: Callable[[int], str | None], interval: float = 0.5) -> None:

        assert node.host is not None and node.remote_data is not None
        self.node, self.data, self.spec = node.name, node.remote_data, host_spec(node.host)
        self.rules, self.walsender_of, self.interval = rules, walsender_of, interval
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name=f"pin-{self.node}@{self.spec.name}")

    def start(self) -> None:
        self.thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self.stopping.set()
        self.thread.join(timeout)

    def _run(self) -> None:

        host = SshHost(self.spec)
        try:
            while not self.stopping.is_set():
                try:
                    self.poll(host)
                except UserError as exc:  # the host is checked elsewhere; keep trying
                    if exc.cause not in self.errors:
                        self.errors.append(exc.cause)
                self.stopping.wait(self.interval)
        finally:
            host.close()

    def poll(self, host: Any) -> list[tuple[int, str]]:
        """One pass: what was pinned now, (pid, CPUs)."""

        snap = snapshots.proc_snapshot(host, self.data)
        senders = {int(p["pid"]): name for p in snap
                   if role_of_title(str(p["title"])) == "walsender"
                   and (name := self.walsender_of(int(p["pid"]))) is not None}
        allowed = {int(p["pid"]): str(p["cpus_allowed_list"]) for p in snap}
        todo = []
        for process in remote_processes(self.node, snap, senders):
            rule = next((r for r in self.rules if r.matches(process.label)), None)
            if rule is None:
                continue
            try:
                have = set(parse_list(allowed[process.pid]))
            except UserError:
                have = set()
            if have != set(rule.cpus):
                todo.append((process.pid, format_cpus(rule.cpus)))
        if todo:
            failed = host.sh('for a; do taskset -pc "${a#*=}" "${a%%=*}" >/dev/null 2>&1 '
                             '|| echo "$a"; done; exit 0', *(f"{p}={c}" for p, c in todo),
                             what="pinning processes").stdout.split()
            gone = {int(a.split("=")[0]) for a in failed}
            todo = [t for t in todo if t[0] not in gone]
        return todo


def start_pinners(manifest: Manifest) -> list[RolePinner | HostPinner]:
    """One pinner per node that has pin rules, started: here, or on its SSH host."""

    layout = manifest.placed()
    if layout is None or not (layout.pins or layout.quotas):
        return []
    pinners: list[RolePinner | HostPinner] = []
    for name in sorted({p.node for p in layout.pins} | {q.node for q in layout.quotas}):
        node = manifest.node(name)
        pins = [p for p in layout.pins if p.node == name]
        rules = [PinRule(p.role, p.cpus) for p in pins]
        if node.host is not None:  # quotas are refused there (plan/checks.py)
            on_host = HostPinner(node, rules, Walsenders(manifest.admin_conninfo(node)))
            on_host.start()
            pinners.append(on_host)
            continue
        pid = server.postmaster_pid(node.data_dir(manifest.dir))
        if pid is None:
            continue
        groups = {p.role: CpusetGroup.open(cpuset_support(), layout.run_key, p.group)
                  for p in pins if p.group}

        def move_to(rule: PinRule, groups: dict[str, Any] = groups) -> Any:
            return groups.get(rule.role)

        held = [GroupRule(q.role, QuotaGroup.open(quota_support(), layout.run_key,
                                                  q.group).add_pid)
                for q in layout.quotas if q.node == name]
        pinner = RolePinner(pid, rules, Walsenders(manifest.admin_conninfo(node)),
                            move_to=move_to, groups=held)
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

    out = []
    for p in _processes(target, senders):
        try:
            out.append((p.node, p.label, placement_of(p.pid)))
        except OSError:
            continue  # gone meanwhile
    return out


def _on_hosts(target: Target, senders: dict[int, str]) -> list[Placed]:
    """The same of the target's nodes on SSH hosts, read there (two commands a node)."""

    manifest = target.manifest
    out: list[Placed] = []
    for node in manifest.nodes if manifest is not None else []:
        if node.host is None or node.remote_data is None:
            continue
        with SshHost(host_spec(node.host)) as host:
            found = remote_processes(node.name, snapshots.proc_snapshot(host, node.remote_data),
                                     senders if node.role == "primary" else {})
            got = placement.placement_of(host, [p.pid for p in found])
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
        # the client first: it ends with the repeat, and the servers' reads through SSH
        # on a loaded machine took longer than a short repeat had left (the client on a
        # host was gone when its turn came, and its row was missing)
        found: list[Placed] = []
        for inst, program, read in clients:
            if inst == target.instance:
                with contextlib.suppress(OSError, UserError):  # gone meanwhile
                    found.append(("client", program, read()))
        manifest = target.manifest
        senders = (walsenders(manifest.admin_conninfo(manifest.primary))
                   if manifest is not None else {})
        found += _here(target, senders) + _on_hosts(target, senders)
        for node, role, got in found:
            seen[(target.instance, node, role, got.get("cpus", ""), got.get("mems", ""),
                  got.get("cgroup", ""), got.get("numa_policy", ""))] += 1
    return [PlacementRow(k[0], k[1], k[2], n, *k[3:]) for k, n in sorted(seen.items())]


READ_BACK_SECONDS = 60.0  # a read-back's wait once the repeat has ended


class PlacementReadBack:
    """What the kernel applied to a placed cluster during one repeat: each role's CPUs,
    memory nodes, cgroup and NUMA policy, read once ``at`` seconds after the clients
    started (their backends exist then); the emulated links' settings; and, where the
    placement asks for a NUMA policy, each postmaster's pages per NUMA node before and
    after; and what each delay line delivered over the repeat (network/delivery.py). A
    recorder of the repeat (probes/recorder.py); a read-back that fails is said through
    ``say`` and never fails the repeat."""

    def __init__(self, targets: list[Target], client: Client, at: float, *, placed: bool,
                 numa: bool, say: Callable[[str], None]) -> None:
        self.targets, self.client, self.at = targets, client, at
        self.placed, self.numa, self.say = placed, numa, say
        self.rows: list[PlacementRow] = []
        self.numa_before: list[NumastatRow] = []
        self.quotas_before: dict[tuple[int, str, str], QuotaFigures] = {}
        self.quotas_since = time.monotonic()
        self.lines_before: dict[tuple[str, str], dict[str, Any]] = {}
        self.done = threading.Event()
        self.error: str | None = None
        self.thread = threading.Thread(target=self._read, daemon=True, name="placement-watch")

    def start(self) -> None:
        if self.numa:
            self.numa_before = numastat_rows(self.targets, "before")
        self.quotas_before = {k: f for k, (_, _, f) in _quota_figures(self.targets).items()}
        self.quotas_since = time.monotonic()
        if self.placed:
            self.lines_before = {k: v for _, plan in _plans(self.targets)
                                 for k, v in delay_line_counters(plan).items()}
            self.thread.start()

    def _read(self) -> None:
        while not self.client.started.wait(0.1):
            if self.done.is_set():
                return
        if self.done.wait(self.at):
            return
        clients = [(t.instance, r.driver, r.placement)
                   for t, r in zip(self.targets, self.client.running, strict=True)]
        try:
            self.rows = placement_rows(self.targets, clients)
        except Exception as exc:  # a probe failing must not fail the repeat
            self.error = f"{type(exc).__name__}: {exc}"

    def stop(self, ending: Ending) -> ProbeRows:
        # a read begun mid-repeat is let finish: through SSH into an emulated guest on a
        # loaded machine it can outlast a 3 s repeat (a guest cell once lost its rows so)
        self.abort(READ_BACK_SECONDS)
        if self.thread.is_alive() and self.error is None:
            self.error = f"still reading {READ_BACK_SECONDS:g} s after the repeat ended"
        rows = ProbeRows()
        if self.placed:
            if self.error is not None:
                self.say(f"the placement was not read back: {self.error}")
            rows.placement = self.rows
            rows.links = link_rows(self.targets, self.lines_before)
            rows.quotas = quota_rows(self.targets, self.quotas_before,
                                     time.monotonic() - self.quotas_since)
        if self.numa_before:
            rows.numastat = self.numa_before + numastat_rows(self.targets, "after")
        return rows

    def abort(self, wait: float = 10.0) -> None:
        self.done.set()
        if self.thread.ident is not None:
            self.thread.join(timeout=wait)


def _quota_figures(targets: list[Target]
                   ) -> dict[tuple[int, str, str], tuple[Quota, QuotaGroup, QuotaFigures]]:
    """(instance, node, role) -> the quota, its group and its figures now, of every
    quota group of the targets' layouts that can still be read."""
    out = {}
    for target in targets:
        layout = target.manifest.placed() if target.manifest is not None else None
        if layout is None or not layout.quotas:
            continue
        support = quota_support()
        for quota in layout.quotas:
            with contextlib.suppress(UserError):
                group = QuotaGroup.open(support, layout.run_key, quota.group)
                figures = group.figures()
                if figures is not None:
                    out[(target.instance, quota.node, quota.role)] = (quota, group, figures)
    return out


def quota_rows(targets: list[Target], before: dict[tuple[int, str, str], QuotaFigures],
               seconds: float) -> list[QuotaRow]:
    """Each quota in force and what cpu.stat counted since ``before``, ``seconds`` ago
    (the repeat's start)."""
    rows = []
    for key, (quota, group, now) in sorted(_quota_figures(targets).items()):
        if key not in before:
            continue  # not counted from the repeat's start: no figure of the repeat
        grown = now.since(before[key])
        rows.append(QuotaRow(key[0], quota.node, quota.role, quota.share, now.quota_us,
                             now.period_us, len(group.pids()), grown.periods,
                             grown.throttled, grown.throttled_ns / 1e6, seconds))
    return rows


def _plans(targets: list[Target]) -> list[tuple[int, NetworkPlan]]:
    """Each instance's network plan, where its cluster has one."""
    plans = []
    for target in targets:
        layout = target.manifest.placed() if target.manifest is not None else None
        plan = layout.network_plan() if layout is not None else None
        if plan is not None:
            plans.append((target.instance, plan))
    return plans


def link_rows(targets: list[Target], before: Mapping[tuple[str, str], Mapping[str, Any]]
              ) -> list[LinkRow]:
    """(instance, a, b, profile, applied as JSON) of every emulated link; each end whose
    delay line's counters were read at the repeat's start (``before``) says what the line
    delivered since (its ``repeat``, network/delivery.py)."""

    rows = []
    for instance, plan in _plans(targets):
        applied = readback(plan)
        for end in applied:
            stats = (end.get("delayer") or {}).get("stats")
            key = (end["namespace"], end["interface"])
            if stats and key in before:
                got = delivered(before[key], stats)
                end["repeat"] = got.to_json() if got is not None else None
        for link in plan.links:
            ends = [e for e in applied if {e.get("endpoint"), e.get("peer")} == {link.a, link.b}]
            rows.append(LinkRow(instance, link.a, link.b, link.profile.describe(),
                                json.dumps(ends or applied, default=str)))
    return rows


def numastat_rows(targets: list[Target], phase: str) -> list[NumastatRow]:
    """(instance, node, phase, numa_node, MB) of each postmaster, from numastat -p."""

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
