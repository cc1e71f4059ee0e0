"""The probes of a node on an SSH host.

CPU: /proc read there (one command over SSH, hosts/remote.proc_snapshot) before and
after a probed repeat, the difference per role. Processes born during the repeat count
from zero; those that also ended during it are not seen (their CPU is in the
postmaster's cutime/cstime, which is added as the role ``backend`` when it grew), as
with the local /proc probe.

System calls and CPU by perf (:class:`RemotePerf`): ``perf stat`` run there where the
account may (root, or ``sudo -n``), its output read here by the local probe's parser.
"""

from __future__ import annotations

import contextlib
import posixpath
from collections import defaultdict
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from syncrep_lab.errors import UserError
from syncrep_lab.hosts.remote import (
    PerfAccess,
    RemotePerfRun,
    RemotePerfStat,
    RemoteRecording,
    perf_access,
)
from syncrep_lab.hosts.ssh import HostSpec, SshHost
from syncrep_lab.pg.roles import NodeProcess, role_of_title
from syncrep_lab.probes import flamegraph
from syncrep_lab.probes.perfstat import SYSCALLS, cost_rows, parse_perf_stat
from syncrep_lab.store import CostRow, ProbeRow, ProcCostRow


def postmaster_of(snapshot: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The postmaster among a node's processes: the one whose parent is not one of them."""
    pids = {int(p["pid"]) for p in snapshot}
    return next((p for p in snapshot if int(p["ppid"]) not in pids), None)


def role_costs(node: str, before: list[dict[str, Any]], after: list[dict[str, Any]], *,
               walsenders: dict[int, str] | None = None, ignore: Collection[int] = ()
               ) -> list[ProcCostRow]:
    """proc_costs rows, one per role. ``walsenders`` names each walsender by the standby it serves
    (``walsender:b``); ``ignore``: pids that are the tool's own sessions."""
    first = {int(p["pid"]): p for p in before}
    postmaster = postmaster_of(after)
    names = walsenders or {}
    sums: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0, 0])
    for p in after:
        if int(p["pid"]) in ignore:
            continue
        tick_ms = 1000.0 / int(p.get("clk_tck") or 100)
        base = first.get(int(p["pid"]), {})
        role = "postmaster" if p is postmaster else role_of_title(str(p["title"]))
        if role == "walsender" and names.get(int(p["pid"])):
            role = f"walsender:{names[int(p['pid'])]}"
        row = sums[role]
        row[0] += 1
        row[1] += (int(p["utime"]) - int(base.get("utime", 0))) * tick_ms
        row[2] += (int(p["stime"]) - int(base.get("stime", 0))) * tick_ms
        row[3] += int(p["voluntary"]) - int(base.get("voluntary", 0))
        row[4] += int(p["involuntary"]) - int(base.get("involuntary", 0))
    if postmaster is not None:
        base = first.get(int(postmaster["pid"]), {})
        tick_ms = 1000.0 / int(postmaster.get("clk_tck") or 100)
        reaped_user = (int(postmaster["cutime"]) - int(base.get("cutime", 0))) * tick_ms
        reaped_sys = (int(postmaster["cstime"]) - int(base.get("cstime", 0))) * tick_ms
        if reaped_user or reaped_sys:
            row = sums["backend"]
            row[1] += reaped_user
            row[2] += reaped_sys
    return [ProcCostRow(node, role, int(v[0]), round(v[1], 3), round(v[2], 3), int(v[3]),
                        int(v[4])) for role, v in sorted(sums.items())]


def _with_perf(spec: HostSpec, probe: str, status: list[ProbeRow],
               checked: dict[str, PerfAccess | str]) -> tuple[SshHost, PerfAccess] | None:
    """A connection to the host and how perf runs there; None (the probe's status then
    says why) when it cannot. ``checked`` keeps each host's answer, so that the probes
    of one repeat ask it once."""
    host = SshHost(spec)
    try:
        if spec.name not in checked:
            checked[spec.name] = perf_access(host)
        access = checked[spec.name]
    except UserError as exc:
        status.append(ProbeRow(probe, "failed", f"{spec.name}: {exc.cause}"))
        host.close()
        return None
    if isinstance(access, str):
        status.append(ProbeRow(probe, "skipped", f"{spec.name}: {access}"))
        host.close()
        return None
    return host, access


def _abort(running: Mapping[str, tuple[SshHost, RemotePerfRun]]) -> None:
    for host, run in running.values():
        if run.pid is not None:
            with contextlib.suppress(UserError):
                host.kill(run.pid, 9)
        host.close()


class RemotePerf:
    """perf stat of the nodes on SSH hosts, where the account may run perf (root, or
    ``sudo = true`` in the host's spec); elsewhere skipped with the reason, as the local
    probe is. Each node's processes are those of its /proc snapshot at the start (not
    its backends, which come and go: the workload's are counted through the postmaster,
    whose row is the role ``backend``, as here)."""

    def __init__(self, nodes: dict[str, tuple[HostSpec, str]],
                 snapshots: dict[str, list[dict[str, Any]]],
                 checked: dict[str, PerfAccess | str]) -> None:
        self.nodes, self.snapshots, self.checked = nodes, snapshots, checked
        self.status: list[ProbeRow] = []
        self.running: dict[str, tuple[SshHost, RemotePerfStat]] = {}

    def start(self) -> None:
        for node, (spec, data) in sorted(self.nodes.items()):
            probe = f"perf on {node}"
            opened = _with_perf(spec, probe, self.status, self.checked)
            if opened is None:
                continue
            host, access = opened
            try:
                wanted = [s for s in SYSCALLS if s in access.syscalls]
                events = ["task-clock", "context-switches",
                          *(f"syscalls:sys_enter_{s}" for s in wanted)]
                snapshot = self.snapshots.get(node, [])
                postmaster = postmaster_of(snapshot)
                pids = [int(p["pid"]) for p in snapshot if p is postmaster
                        or role_of_title(str(p["title"])) != "backend"]
                stat = RemotePerfStat(host, access, posixpath.join(
                    posixpath.dirname(data), node), events, pids)
                stat.start()
                self.running[node] = (host, stat)
            except (UserError, RuntimeError) as exc:
                self.status.append(ProbeRow(probe, "failed", f"{spec.name}: {exc}"))
                host.close()

    def stop(self, walsenders: dict[int, str]) -> list[CostRow]:
        """Stop every perf started; cost rows per node and role."""
        rows: list[CostRow] = []
        for node, (host, stat) in sorted(self.running.items()):
            probe = f"perf on {node}"
            try:
                counts = parse_perf_stat(stat.stop())
            except (UserError, RuntimeError) as exc:
                self.status.append(ProbeRow(probe, "failed", f"{host.spec.name}: {exc}"))
                continue
            finally:
                host.close()
            self.status.append(ProbeRow(probe, "ran", None))
            rows += cost_rows(node_processes(node, self.snapshots.get(node, []), walsenders),
                              counts)
        self.running = {}
        return rows

    def abort(self) -> None:
        """Kill what was started and not stopped (the repeat failed)."""
        _abort(self.running)
        self.running = {}


def node_processes(node: str, snapshot: list[dict[str, Any]], walsenders: dict[int, str]
                   ) -> list[NodeProcess]:
    """A node's processes on its host, from its /proc snapshot, each with its role."""
    postmaster = postmaster_of(snapshot)
    out = []
    for p in snapshot:
        pid = int(p["pid"])
        role = "postmaster" if p is postmaster else role_of_title(str(p["title"]))
        out.append(NodeProcess(node, pid, role,
                               walsenders.get(pid, "") if role == "walsender" else ""))
    return out


class RemoteOnCpu:
    """On-CPU stacks of the hosts' nodes: ``perf record -a`` on each host (where the
    account may run perf), ``perf script`` there, folded and drawn here per node and
    role as the local recording is (probes/flamegraph.py). A process is named by the
    node snapshot that holds its pid; backends born during the repeat on a host's
    primary are in no snapshot and show in the host's graph of everything only."""

    def __init__(self, hosts: dict[str, tuple[HostSpec, dict[str, str]]],
                 snapshots: dict[str, list[dict[str, Any]]],
                 checked: dict[str, PerfAccess | str], hz: int, seconds: float,
                 out_dir: Path) -> None:
        self.hosts, self.snapshots = hosts, snapshots  # host -> (spec, node -> data dir)
        self.checked = checked  # how perf runs on each host, shared with RemotePerf
        self.hz, self.seconds, self.out_dir = hz, seconds, out_dir
        self.status: list[ProbeRow] = []
        self.running: dict[str, tuple[SshHost, RemoteRecording]] = {}

    def start(self) -> None:
        for name, (spec, nodes) in sorted(self.hosts.items()):
            probe = f"flamegraphs on {name}"
            opened = _with_perf(spec, probe, self.status, self.checked)
            if opened is None:
                continue
            host, access = opened
            try:
                base = posixpath.join(posixpath.dirname(next(iter(nodes.values()))), name)
                recording = RemoteRecording(host, access, base, self.hz, self.seconds + 60,
                                            flamegraph.SCRIPT_FIELDS)
                recording.start()
                self.running[name] = (host, recording)
            except (UserError, RuntimeError) as exc:
                self.status.append(ProbeRow(probe, "failed", str(exc)))
                host.close()

    def stop(self, walsenders: dict[int, str]) -> flamegraph.FlameResult:
        """Every host's graphs, their paths relative to ``out_dir``'s parent."""
        result = flamegraph.FlameResult()
        for name, (host, recording) in sorted(self.running.items()):
            probe = f"flamegraphs on {name}"
            text = self.out_dir / f"{name}.oncpu.txt"
            try:
                self.out_dir.mkdir(parents=True, exist_ok=True)
                text.write_bytes(recording.stop())
                roles = self._roles(self.hosts[name][1], walsenders)
                made = flamegraph.graphs_of(
                    flamegraph.fold(text), self.out_dir / f"flame-{name}", roles.get,
                    f"{self.hz} Hz per CPU of {name}; µs on CPU", everything=f"*{name}")
            except (UserError, RuntimeError, OSError) as exc:
                self.status.append(ProbeRow(probe, "failed", str(exc)))
                continue
            finally:
                host.close()
                text.unlink(missing_ok=True)
            self.status.append(ProbeRow(probe, "ran", None))
            result.graphs += made.graphs
            result.frames += made.frames
        self.running = {}
        return result

    def _roles(self, nodes: dict[str, str], walsenders: dict[int, str]
               ) -> dict[int, tuple[str, str]]:
        return {p.pid: (p.node, p.label) for node in nodes
                for p in node_processes(node, self.snapshots.get(node, []), walsenders)}

    def abort(self) -> None:
        """Kill what was started and not stopped (the repeat failed)."""
        _abort(self.running)
        self.running = {}
