"""The probes of a node on an SSH host.

CPU: /proc read there (one command over SSH, hosts/snapshots.proc_snapshot) before and
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
import threading
from collections import Counter, defaultdict
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from syncrep_lab.errors import UserError
from syncrep_lab.hosts.numa import numa_pages
from syncrep_lab.hosts.perf import (
    PerfAccess,
    RemotePerfRun,
    RemotePerfStat,
    RemoteRecording,
    perf_access,
)
from syncrep_lab.hosts.ssh import HostSpec, SshHost
from syncrep_lab.pg.roles import NodeProcess, role_of_title, titled
from syncrep_lab.probes import flamegraph, sched
from syncrep_lab.probes.kernel_locks import HostLocks
from syncrep_lab.probes.perfstat import SYSCALLS, cost_rows, parse_perf_stat
from syncrep_lab.probes.recorder import Ending
from syncrep_lab.probes.session import sched_rows, wakeup_rows
from syncrep_lab.probes.session import walsenders as primary_walsenders
from syncrep_lab.store import CostRow, NumaPagesRow, ProbeRow, ProbeRows, ProcCostRow

if TYPE_CHECKING:  # the spec's types only: probes do not depend on the experiment
    from syncrep_lab.plan.spec import Probes


def postmaster_of(snapshot: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The postmaster among a node's processes: the one whose parent is not one of them."""
    pids = {int(p["pid"]) for p in snapshot}
    return next((p for p in snapshot if int(p["ppid"]) not in pids), None)


def role_costs(node: str, before: list[dict[str, Any]], after: list[dict[str, Any]], *,
               walsenders: dict[int, str] | None = None, ignore: Collection[int] = ()
               ) -> list[ProcCostRow]:
    """proc_costs rows, one per role. ``walsenders`` names each walsender by the standby it serves
    (``walsender:b``); ``ignore``: pids that are the tool's own sessions. No run delay or
    migrations (None): the host's snapshot reads neither, and what reads them (the noise's
    sync walsender, analysis/noise.py) reads measured repeats, which snapshot no host."""
    first = {int(p["pid"]): p for p in before}
    postmaster = postmaster_of(after)
    names = walsenders or {}
    sums: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0, 0])
    # bytes per role; None once a process of the role could not tell them, and for the
    # postmaster, whose file holds its reaped children's (probes/tracker.py)
    io: dict[str, list[int] | None] = defaultdict(lambda: [0, 0])
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
        bytes_ = io[role]
        if role == "postmaster" or p.get("write_bytes") is None or bytes_ is None or (
                base and base.get("write_bytes") is None):
            io[role] = None
        else:
            bytes_[0] += int(p["read_bytes"]) - int(base.get("read_bytes") or 0)
            bytes_[1] += int(p["write_bytes"]) - int(base.get("write_bytes") or 0)
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
                        int(v[4]), None, None,
                        *((None, None) if (b := io.get(role)) is None else (b[0], b[1])))
            for role, v in sorted(sums.items())]


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


def seen_again(seen: list[dict[str, Any]], now: list[dict[str, Any]]
               ) -> list[dict[str, Any]]:
    """A node's processes seen so far, with those of a later look: each new one added,
    and one first seen with the postmaster's command line for a title (just forked)
    taking the title it has now, where PostgreSQL has written it.

    >>> first = [{"pid": 1, "ppid": 0, "title": "postgres -D d"},
    ...          {"pid": 7, "ppid": 1, "title": "postgres -D d"}]
    >>> later = [{"pid": 7, "ppid": 1, "title": "postgres: u db [local] idle"},
    ...          {"pid": 8, "ppid": 1, "title": "postgres: walwriter"}]
    >>> [(p["pid"], p["title"]) for p in seen_again(first, later)]
    [(1, 'postgres -D d'), (7, 'postgres: u db [local] idle'), (8, 'postgres: walwriter')]
    """
    newer = {int(p["pid"]): p for p in now}
    out = []
    for p in seen:
        then = newer.get(int(p["pid"]))
        if then is not None and not titled(str(p["title"])) and titled(str(then["title"])):
            p = {**p, "title": then["title"]}
        out.append(p)
    known = {int(p["pid"]) for p in seen}
    return out + [p for p in now if int(p["pid"]) not in known]


Hosts = dict[str, tuple[HostSpec, dict[str, str]]]  # host -> (spec, node -> its data dir)


class _PerHost:
    """A recording of every CPU of each host that has nodes (where the account may run
    perf), read back as text when it stops and named by the nodes' processes seen on
    that host: the snapshots at the start and those taken midway, which hold the
    backends the workload opened (a process seen in none shows as its host's)."""

    probe = ""  # the status rows' name: "PROBE on HOST"

    def __init__(self, hosts: Hosts, snapshots: dict[str, list[dict[str, Any]]],
                 checked: dict[str, PerfAccess | str], out_dir: Path) -> None:
        self.hosts, self.snapshots = hosts, snapshots
        self.checked = checked  # how perf runs on each host, shared with RemotePerf
        self.out_dir = out_dir
        self.status: list[ProbeRow] = []
        self.running: dict[str, tuple[SshHost, RemoteRecording]] = {}

    def _recording(self, host: SshHost, access: PerfAccess, base: str) -> RemoteRecording:
        raise NotImplementedError

    def _read(self, host: str, text: Path, roles: dict[int, tuple[str, str]]) -> None:
        raise NotImplementedError

    def start(self) -> None:
        for name, (spec, nodes) in sorted(self.hosts.items()):
            probe = f"{self.probe} on {name}"
            opened = _with_perf(spec, probe, self.status, self.checked)
            if opened is None:
                continue
            host, access = opened
            try:
                base = posixpath.join(posixpath.dirname(next(iter(nodes.values()))), name)
                recording = self._recording(host, access, base)
                recording.start()
                self.running[name] = (host, recording)
            except (UserError, RuntimeError) as exc:
                self.status.append(ProbeRow(probe, "failed", str(exc)))
                host.close()

    def stop(self, walsenders: dict[int, str]) -> None:
        """Every host's recording read (into what the subclass keeps)."""
        for name, (host, recording) in sorted(self.running.items()):
            probe = f"{self.probe} on {name}"
            text = self.out_dir / f"{name}.{self.probe}.txt"
            try:
                self.out_dir.mkdir(parents=True, exist_ok=True)
                text.write_bytes(recording.stop())
                self._read(name, text, self._roles(self.hosts[name][1], walsenders))
            except (UserError, RuntimeError, OSError) as exc:
                self.status.append(ProbeRow(probe, "failed", str(exc)))
                continue
            finally:
                host.close()
                text.unlink(missing_ok=True)
            self.status.append(ProbeRow(probe, "ran", None))
        self.running = {}

    def _roles(self, nodes: dict[str, str], walsenders: dict[int, str]
               ) -> dict[int, tuple[str, str]]:
        return {p.pid: (p.node, p.label) for node in nodes
                for p in node_processes(node, self.snapshots.get(node, []), walsenders)}

    def abort(self) -> None:
        """Kill what was started and not stopped (the repeat failed)."""
        _abort(self.running)
        self.running = {}


class RemoteOnCpu(_PerHost):
    """On-CPU stacks: ``perf record -a`` with DWARF call graphs on each host, ``perf
    script`` there, folded and drawn here per node and role as the local recording is
    (probes/flamegraph.py), plus one graph of everything on the host (``*HOST``)."""

    probe = "flamegraphs"

    def __init__(self, hosts: Hosts, snapshots: dict[str, list[dict[str, Any]]],
                 checked: dict[str, PerfAccess | str], hz: int, seconds: float,
                 out_dir: Path) -> None:
        super().__init__(hosts, snapshots, checked, out_dir)
        self.hz, self.seconds = hz, seconds
        self.result = flamegraph.FlameResult()

    def _recording(self, host: SshHost, access: PerfAccess, base: str) -> RemoteRecording:
        return RemoteRecording(host, access, base, "oncpu",
                               ["--call-graph", "dwarf", "-F", str(self.hz)],
                               self.seconds + 61, flamegraph.SCRIPT_ARGS)

    def _read(self, host: str, text: Path, roles: dict[int, tuple[str, str]]) -> None:
        made = flamegraph.graphs_of(
            flamegraph.fold(text), self.out_dir / f"flame-{host}", roles.get,
            f"{self.hz} Hz per CPU of {host}; µs on CPU", everything=f"*{host}")
        self.result.graphs += made.graphs
        self.result.frames += made.frames


class RemoteSched(_PerHost):
    """The scheduler trace (sched_switch, sched_waking on every CPU) of each host, read
    by the local probe's analysis (probes/sched.py): per role the time asleep, waiting
    for a core and on one, and who woke whom. Threads of no node are the host's
    (``*HOST``), where a local trace names them ``-``."""

    probe = "sched"

    def __init__(self, hosts: Hosts, snapshots: dict[str, list[dict[str, Any]]],
                 checked: dict[str, PerfAccess | str], seconds: float, out_dir: Path) -> None:
        super().__init__(hosts, snapshots, checked, out_dir)
        self.seconds = seconds
        self.results: dict[str, sched.SchedResult] = {}

    def _recording(self, host: SshHost, access: PerfAccess, base: str) -> RemoteRecording:
        return RemoteRecording(host, access, base, "sched", ["-e", sched.TRACEPOINTS],
                               self.seconds, sched.SCRIPT_ARGS)

    def _read(self, host: str, text: Path, roles: dict[int, tuple[str, str]]) -> None:
        with text.open(errors="replace") as lines:
            result = sched.analyse(lines, roles.get)

        def named(who: tuple[str, str]) -> tuple[str, str]:
            return (f"*{host}", who[1]) if who[0] == "-" else who

        result.roles = {named(k): v for k, v in result.roles.items()}
        result.wakeups = {(*named(k[:2]), *named(k[2:])): n
                          for k, n in result.wakeups.items()}
        self.results[host] = result


LOOKS = 4  # looks midway at most: the first, then while a process is seen untitled


class HostProbes:
    """Every probe of the nodes on SSH hosts in one probed repeat: their /proc before and
    after (CPU per role, pages per NUMA node), perf stat per node, on-CPU stacks and the
    scheduler trace per host (where the account may run perf; else skipped with the
    reason), and more snapshots midway, when the workload's backends exist, to name
    them in the stacks, the trace and the locks (a second later again while one is seen
    before PostgreSQL wrote its title)."""

    def __init__(self, nodes: dict[str, tuple[HostSpec, str]], config: Probes,
                 duration: float, out_dir: Path, primary_admin: str, here: str) -> None:
        """``primary_admin``: the primary, whose walsenders name the standbys; ``here``:
        the repeat's folder relative to the run folder, as files are named in the store."""
        self.nodes, self.config, self.duration, self.out_dir = nodes, config, duration, out_dir
        self.primary_admin, self.here = primary_admin, here
        self.before: dict[str, list[dict[str, Any]]] = {}
        self.seen: dict[str, list[dict[str, Any]]] = {}
        self.perf: RemotePerf | None = None
        self.stacks: RemoteOnCpu | None = None
        self.sched: RemoteSched | None = None
        self.locks: HostLocks | None = None
        self.locks_status: list[ProbeRow] = []
        # the looks midway (see _look_again), and whether stop has begun: no look after
        self.looks: list[threading.Timer] = []
        self.looking = threading.Lock()
        self.stopping = False
        self.numa_before: dict[str, tuple[list[dict[str, Any]],
                                          dict[int, Counter[str]]]] | None = None

    @property
    def _probes(self) -> list[RemotePerf | _PerHost]:
        return [p for p in (self.perf, self.stacks, self.sched) if p is not None]

    def start(self) -> None:
        config, duration = self.config, self.duration
        self.before = snapshots(self.nodes)
        self.seen = {name: list(snap) for name, snap in self.before.items()}
        checked: dict[str, PerfAccess | str] = {}  # perf on each host, asked once
        hosts = by_host(self.nodes)
        self.perf = RemotePerf(self.nodes, self.before, checked) if config.perf else None
        self.stacks = (RemoteOnCpu(hosts, self.seen, checked, config.flame_hz, duration,
                                   self.out_dir) if config.flamegraphs else None)
        self.sched = (RemoteSched(hosts, self.seen, checked,
                                  min(config.sched_seconds, duration), self.out_dir)
                      if config.sched else None)
        self.numa_before = self._numa_pages(self.before) if config.numa else None
        if config.locks and "primary" in self.nodes:
            spec, data_dir = self.nodes["primary"]
            self.locks = HostLocks(spec, data_dir, self.out_dir, duration)
        try:
            if self.locks is not None:
                self.locks.start()
            for probe in self._probes:
                probe.start()
            self._look_in(min(2.0, duration / 2))
        except BaseException:
            self.abort()  # a recorder that fails to start is not aborted by the repeat
            raise

    def _look_in(self, seconds: float) -> None:
        """A look at the nodes' processes in ``seconds``, unless stop has begun."""
        with self.looking:
            if self.stopping or len(self.looks) >= LOOKS:
                return
            look = threading.Timer(seconds, self._look_again)
            look.daemon = True
            self.looks.append(look)
            look.start()

    def _look_again(self) -> None:
        """The processes seen now added to those seen so far; one seen before PostgreSQL
        wrote its title (a backend just forked: the workload's connect about when this
        looks, all at once where pgbench has a thread per client) takes the title it
        has now, and while any is seen so, another look comes a second later."""
        untitled = False
        with contextlib.suppress(UserError):  # naming only: the start's snapshot stands
            for name, snap in snapshots(self.nodes).items():
                self.seen[name] = seen_again(self.seen[name], snap)
                postmaster = postmaster_of(snap)
                untitled |= any(p is not postmaster and not titled(str(p["title"]))
                                for p in snap)
        if untitled:
            self._look_in(1.0)

    def _stop_looking(self) -> None:
        """No look after this; those under way ended (they write ``seen``)."""
        with self.looking:
            self.stopping = True
            looks = list(self.looks)
        for look in looks:
            look.cancel()
            if look.ident is not None and look is not threading.current_thread():
                look.join(timeout=60)

    def stop(self, ending: Ending) -> ProbeRows:
        """What the probes found, as the store's rows; the primary's walsenders, asked
        now, name by standby what was read on the hosts."""
        walsenders = primary_walsenders(self.primary_admin)
        here = self.here
        self._stop_looking()
        rows = ProbeRows()
        if self.perf is not None:
            rows.costs = self.perf.stop(walsenders)
        for recorder in (self.stacks, self.sched):
            if recorder is not None:
                recorder.stop(walsenders)
        if self.locks is not None:
            locks = self.locks.stop({p.pid: (p.node, p.label) for p in node_processes(
                "primary", self.seen.get("primary", []), walsenders)}, walsenders)
            rows.kernel_locks = locks.kernel_locks
            self.locks_status = locks.probes
        if self.stacks is not None:
            rows.flamegraphs = self.stacks.result.graphs_in(here)
            rows.stack_frames = list(self.stacks.result.frames)
        for result in self.sched.results.values() if self.sched is not None else []:
            rows.sched_roles += sched_rows(result)
            rows.wakeups += wakeup_rows(result)
        after = snapshots(self.nodes)
        for name, before in self.before.items():
            rows.proc_costs += role_costs(name, before, after.get(name, []),
                                          walsenders=walsenders if name == "primary" else None)
        if self.numa_before is not None:
            # the processes there before and still there after (as the local probe)
            known = {name: {int(p["pid"]) for p in snap} for name, snap in self.before.items()}
            stayed = {name: [p for p in snap if int(p["pid"]) in known.get(name, set())]
                      for name, snap in after.items()}
            rows.numa_pages = self._numa_rows(self.numa_before, "before", walsenders)
            rows.numa_pages += self._numa_rows(self._numa_pages(stayed), "after", walsenders)
        rows.probes = [s for p in self._probes for s in p.status] + self.locks_status
        return rows

    def _numa_pages(self, snaps: dict[str, list[dict[str, Any]]]
                    ) -> dict[str, tuple[list[dict[str, Any]], dict[int, Counter[str]]]]:
        """Each node's processes and their pages per NUMA node, read on its host."""
        out = {}
        for name, snap in snaps.items():
            spec, _ = self.nodes[name]
            with SshHost(spec) as host:
                out[name] = (snap, numa_pages(host, [int(p["pid"]) for p in snap]))
        return out

    @staticmethod
    def _numa_rows(read: dict[str, tuple[list[dict[str, Any]], dict[int, Counter[str]]]],
                   phase: str, walsenders: dict[int, str]) -> list[NumaPagesRow]:
        rows = []
        for name, (snap, pages) in sorted(read.items()):
            per_role: dict[str, Counter[str]] = defaultdict(Counter)
            for p in node_processes(name, snap, walsenders if name == "primary" else {}):
                per_role[p.label].update(pages.get(p.pid, Counter()))
            rows += [NumaPagesRow(name, role, phase, numa_node, n)
                     for role, counted in sorted(per_role.items())
                     for numa_node, n in sorted(counted.items())]
        return rows

    def abort(self) -> None:
        """Kill what was started and not stopped (the repeat failed)."""
        self._stop_looking()
        for probe in self._probes:
            probe.abort()
        if self.locks is not None:
            self.locks.abort()


def snapshots(nodes: dict[str, tuple[HostSpec, str]]) -> dict[str, list[dict[str, Any]]]:
    """/proc of every node on an SSH host, read there."""
    from syncrep_lab.cluster import remote_node

    return {name: remote_node.snapshot(spec, data) for name, (spec, data) in nodes.items()}


def by_host(nodes: dict[str, tuple[HostSpec, str]]) -> Hosts:
    """The same nodes, by host: each host and its nodes' data dirs."""
    hosts: Hosts = {}
    for name, (spec, data) in nodes.items():
        hosts.setdefault(spec.name, (spec, {}))[1][name] = data
    return hosts
