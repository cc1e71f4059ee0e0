"""The probes of one probed repeat: started just before pgbench, stopped after it.

Order matters. The tracker snapshots every process first; perf attaches to
the processes that exist (and, through the postmaster, to every child born
later: pgbench's backends); the recorders sample every CPU; the samplers
connect last. At the end the tracker waits until pgbench's backends have been
reaped (their CPU is then exact, and perf has folded their counts into the
postmaster's), perf stops before the samplers disconnect, so the samplers'
own backends never count as the workload's cost. Each probe that cannot run
here is skipped with its reason, which is stored; none of them can fail the
repeat. The recordings are analysed after pgbench has finished and deleted
once analysed (they are large); folded stacks and flame graphs are kept.
"""

from __future__ import annotations

import contextlib
import resource
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import psycopg

from syncrep_lab import shutdown
from syncrep_lab.cluster import server
from syncrep_lab.pg.admin import admin_connection
from syncrep_lab.pg.roles import NodeProcess
from syncrep_lab.probes import flamegraph, gprof, perfstat, sched
from syncrep_lab.probes.activity import ActivityResult, ActivitySampler
from syncrep_lab.probes.perfrun import SETTLE_SECONDS
from syncrep_lab.probes.recorder import Ending
from syncrep_lab.probes.tracker import ProcessTracker, TrackerResult
from syncrep_lab.readers.timeline import Timeline
from syncrep_lab.store import (
    CostRow,
    ProbeRow,
    ProbeRows,
    ProcCostRow,
    SchedRoleRow,
    WaitRow,
    WaitTimelineRow,
    WakeupRow,
)

if TYPE_CHECKING:  # the spec's types only: probes do not depend on the experiment
    from syncrep_lab.plan.spec import Probes


class _Startable(Protocol):
    """A perf recording: launched, then, after one pause for all of them to open their
    events, confirmed (raises if it failed at once)."""

    def launch(self) -> None: ...

    def confirm(self) -> None: ...


@dataclass(frozen=True)
class ProbeNode:
    name: str
    admin: str  # the tool's connection to it
    data_dir: Path | None  # None: not on this machine (attached), no process probes
    primary: bool


@dataclass
class ProbeData:
    status: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    costs: list[CostRow] = field(default_factory=list)
    activity: dict[str, ActivityResult] = field(default_factory=dict)
    sampled_from: float = 0.0  # when the samplers began (monotonic): their times' origin
    proc: TrackerResult | None = None
    flame: flamegraph.FlameResult | None = None
    sched: sched.SchedResult | None = None
    gprof: gprof.GprofResult | None = None


def walsenders(admin: str) -> dict[int, str]:
    """pid -> the standby each walsender of the primary at ``admin`` serves ({} when the
    primary does not answer)."""
    try:
        with admin_connection(admin, seconds=5, what="the primary") as conn:
            return {int(str(r[0])): str(r[1]) for r in conn.execute(
                "select pid, application_name from pg_stat_replication")}
    except psycopg.Error:
        return {}


def node_tracker(nodes: list[ProbeNode], *, hz: float, numa: bool, seconds: float
                 ) -> ProcessTracker | None:
    """A tracker of every node on this machine (None when none is: attached, or all on
    SSH hosts), each walsender named by the standby it serves, polling at ``hz`` or
    four times in the repeat's ``seconds``, whichever is more often. A backend born and
    gone between two polls is never seen, and a node none of whose backends was seen
    gets no backend row (the postmaster's cutime cannot be told apart from other
    children's then): a one-second measured repeat polled once a second had none in 7
    of 12 repeats."""
    postmasters = {}
    for node in nodes:
        pid = server.postmaster_pid(node.data_dir) if node.data_dir is not None else None
        if pid is not None:
            postmasters[node.name] = pid
    if not postmasters:
        return None
    primary = next((n for n in nodes if n.primary), None)
    return ProcessTracker(postmasters, walsenders(primary.admin) if primary else {},
                          hz=max(hz, 4.0 / seconds) if seconds > 0 else hz, numa=numa)


class UntracedCpu:
    """CPU per process role during a measured repeat, with nothing attached to any
    process: the tracker's /proc snapshots (one poll a second, or four in the repeat
    where it is shorter than four seconds, for the backends born during it: see
    node_tracker) and the
    client's own CPU from this process's ``RUSAGE_CHILDREN``. A probed repeat's figures
    are inflated by what traces it (perf counting every system call doubled the
    backends' CPU per commit); these are what the bottleneck model's service
    demands are read from (analysis/model.py). The client's figure is only right when
    the client is the one child reaped in the window: no perf, no fault driver.
    A recorder of the repeat (probes/recorder.py)."""

    def __init__(self, nodes: list[ProbeNode], clients: int, program: str | None,
                 duration: float) -> None:
        """``program``: the client (``clients`` processes of it), when it is a child of
        this process; None (a client on an SSH host): no row for it. ``duration``: the
        repeat's seconds."""
        self.nodes, self.clients, self.program = nodes, clients, program
        self.duration = duration
        self.tracker: ProcessTracker | None = None
        self.before: resource.struct_rusage | None = None

    def start(self) -> None:
        self.tracker = node_tracker(self.nodes, hz=1.0, numa=False, seconds=self.duration)
        if self.tracker is not None:
            self.tracker.begin()
        self.before = resource.getrusage(resource.RUSAGE_CHILDREN)

    def stop(self, ending: Ending) -> ProbeRows:
        """``proc_costs`` rows: every role of every local node, and the client's."""
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        rows: list[ProcCostRow] = []
        if self.tracker is not None:
            rows += self.tracker.finish().cost_rows()
        if self.before is not None and self.program is not None:
            b = self.before
            rows.append(ProcCostRow("client", self.program, self.clients,
                                    1000.0 * (after.ru_utime - b.ru_utime),
                                    1000.0 * (after.ru_stime - b.ru_stime),
                                    after.ru_nvcsw - b.ru_nvcsw, after.ru_nivcsw - b.ru_nivcsw))
        return ProbeRows(proc_costs=rows)

    def abort(self) -> None:
        if self.tracker is not None:
            self.tracker.stopping.set()


class RepeatProbes:
    """The probes of the nodes on this machine in one probed repeat; a recorder of the
    repeat (probes/recorder.py). ``here``: the repeat's folder, relative to the run
    folder, as its files are named in the store."""

    def __init__(self, config: Probes, nodes: list[ProbeNode], version_num: int,
                 out_dir: Path, duration: float, profiling: gprof.GprofSetup | None = None,
                 frame_pointers: bool = False, here: str = "") -> None:
        self.here = here
        self.config = config
        self.profiling = profiling  # the gprof probe's needs, on a profiling build
        self.frame_pointers = frame_pointers  # the servers keep frame pointers
        self.gprof: gprof.GprofProbe | None = None
        self.nodes = nodes
        self.version_num = version_num
        self.out_dir = out_dir
        self.duration = duration
        self.data = ProbeData()
        self.processes: list[NodeProcess] = []
        self.tracker: ProcessTracker | None = None
        self.perf: perfstat.PerfStat | None = None
        self.oncpu: flamegraph.OnCpuRecorder | None = None
        self.sched: sched.SchedRecorder | None = None
        self.sampler: ActivitySampler | None = None

    def _skip(self, probe: str, reason: str) -> None:
        self.data.status[probe] = ("skipped", reason)

    def _local_reason(self) -> str | None:
        if self.tracker is None:
            return ("no local PostgreSQL processes (attached cluster): process probes need "
                    "the servers on this machine")
        return None

    def start(self) -> None:
        self._start_gprof()  # first: it restarts the walsenders the others then find
        self.tracker = node_tracker(self.nodes, hz=self.config.proc_hz or 1.0,
                                    numa=self.config.numa, seconds=self.duration)
        if self.tracker is not None:
            self.processes = self.tracker.begin()
        self._start_perfs()
        self._start_samplers()

    def _launched(self, probe: str, enabled: bool, unavailable: Callable[[], str | None],
                  make: Callable[[], _Startable]) -> Any:
        """The probe, launched; or None, with the reason stored (off, impossible, failed)."""
        reason = (f"turned off in the spec ([probes] {probe})" if not enabled
                  else self._local_reason() or unavailable())
        if reason is not None:
            self._skip(probe, reason)
            return None
        started = make()
        try:
            started.launch()
        except (OSError, RuntimeError) as exc:
            self.data.status[probe] = ("failed", str(exc))
            return None
        return started

    def _confirmed(self, probe: str, started: _Startable | None) -> Any:
        """``started`` if it did not fail at once, else None with the failure stored."""
        if started is None:
            return None
        try:
            started.confirm()
        except (OSError, RuntimeError) as exc:
            self.data.status[probe] = ("failed", str(exc))
            return None
        return started

    def _start_gprof(self) -> None:
        local = [gprof.GprofNode(n.name, n.data_dir, n.admin, n.primary)
                 for n in self.nodes if n.data_dir is not None]
        reason = None
        if not self.config.gprof:
            reason = "turned off in the spec ([probes] gprof)"
        elif self.profiling is None:
            reason = ("not a profiling build: build one with `syncrep-lab pg build VERSION "
                      "--flavor profiling` and run the cell on it (--pg NAME)")
        elif not any(n.primary for n in local):
            reason = "the primary is not on this machine: gprof reads its data directory"
        else:
            reason = gprof.unavailable_reason()
        if reason is not None:
            self._skip("gprof", reason)
            return
        assert self.profiling is not None
        self.gprof = gprof.GprofProbe(self.profiling, local, self.out_dir / "gprof")
        try:
            self.gprof.start()
        except (OSError, RuntimeError) as exc:
            self.data.status["gprof"] = ("failed", str(exc))
            self.gprof = None

    def _start_perfs(self) -> None:
        """perf stat, the on-CPU recording and the scheduler's: launched together, given
        one pause to open their events (perfrun.SETTLE_SECONDS; one after another, each
        took its own), then each confirmed."""
        perf = self._launched(
            "perf", self.config.perf, perfstat.unavailable_reason,
            lambda: perfstat.PerfStat(self.processes, self.out_dir / "perf-stat.csv"))
        oncpu = self._launched(
            "flamegraphs", self.config.flamegraphs, flamegraph.unavailable_reason,
            lambda: flamegraph.OnCpuRecorder(self.out_dir / "oncpu.perf.data",
                                             self.config.flame_hz, self.duration + 60,
                                             self.call_graph()))
        recorder = self._launched(
            "sched", self.config.sched, sched.unavailable_reason,
            lambda: sched.SchedRecorder(self.out_dir / "sched.perf.data",
                                        min(self.config.sched_seconds, self.duration)))
        if perf or oncpu or recorder:
            time.sleep(SETTLE_SECONDS)
        self.perf = self._confirmed("perf", perf)
        self.oncpu = self._confirmed("flamegraphs", oncpu)
        self.sched = self._confirmed("sched", recorder)

    def call_graph(self) -> str:
        """How perf unwinds the on-CPU stacks: the spec's choice, or by the build."""
        if self.config.call_graph != "auto":
            return self.config.call_graph
        return "fp" if self.frame_pointers else "dwarf"

    def _start_samplers(self) -> None:
        hz = self.config.wait_events_hz
        if hz <= 0:
            self._skip("activity", "turned off in the spec ([probes] wait_events_hz = 0)")
            return
        self.sampler = ActivitySampler(
            [(n.name, n.admin, n.primary) for n in self.nodes],
            {p.pid: p.label for p in self.processes}, hz=hz,
            replication_hz=self.config.replication_hz, version_num=self.version_num)
        self.sampler.start()
        # Connected before pgbench starts, so its backends are never the samplers'.
        self.sampler.connected.wait(timeout=15)

    def _role_of(self, pid: int) -> tuple[str, str] | None:
        return self.tracker.role_of(pid) if self.tracker is not None else None

    def stop(self, ending: Ending) -> ProbeRows:
        """What the probes found, as the store's rows on the repeat's timeline."""
        return probe_rows(self.collect(), self.here, ending.timeline)

    def collect(self) -> ProbeData:
        """Stop every probe and analyse what it recorded."""
        if shutdown.requested() is not None:
            self.abort()  # the repeat will not be stored: nothing to wait for
            return self.data
        if self.tracker is not None:
            self.tracker.ignore(self.sampler.backend_pids if self.sampler else set())
            proc = self.tracker.finish()
            if self.config.proc_hz > 0:
                self.data.proc = proc
                self.data.status["proc"] = ("ran", None)
            else:
                self._skip("proc", "turned off in the spec ([probes] proc_hz = 0)")
        else:
            self._skip("proc", self._local_reason() or "")
        # every recording told to end at once: each perf takes a few tenths of a second
        # to close its events and write, and they need not take them one after another
        for recorder in (self.perf, self.oncpu, self.sched):
            if recorder is not None and recorder.perf is not None:
                recorder.perf.interrupt()
        # the scheduler trace first (its perf has mostly ended with its sleep): it is
        # read in a thread while the others close and the stacks are folded, each mostly
        # a perf script of its own that need not wait for the other
        self._stop("sched", self.sched.stop if self.sched else None)
        reading = None
        if self.sched is not None and self.data.status["sched"][0] == "ran":
            reading = threading.Thread(target=self._read_sched, args=(self.sched,),
                                       name="sched trace", daemon=True)
            reading.start()
        try:
            counts = self._stop("perf", self.perf.stop if self.perf else None)
            self._stop("flamegraphs", self.oncpu.stop if self.oncpu else None)
            if self.sampler is not None:
                self.data.activity = self.sampler.stop()
                self.data.sampled_from = self.sampler.started
                errors = [f"{n}: {r.error}" for n, r in self.data.activity.items()
                          if r.error]
                self.data.status["activity"] = (("failed", "; ".join(errors)) if errors
                                                else ("ran", None))
            if counts is not None:
                self.data.costs = perfstat.cost_rows(self.processes, counts)
            profiler = self.gprof
            if profiler is not None:  # last: it ends the walsenders the others watch
                self.data.gprof = self._stop("gprof", lambda: profiler.stop(self._role_of))
            self._fold()
        finally:
            if reading is not None:
                reading.join()
        return self.data

    def abort(self) -> None:
        """Stop every probe at once, analyse nothing: the tool was interrupted. perf is
        killed with its workload, the sampler and tracker threads are told to stop, and
        the recordings (large) are deleted."""
        for recorder in (self.perf, self.oncpu, self.sched):
            process = getattr(recorder, "perf", None)
            if process is not None:
                process.kill()
        for thread in (self.sampler, self.tracker):
            if thread is not None:
                thread.stopping.set()
        for recorder in (self.oncpu, self.sched):
            if recorder is not None:
                with contextlib.suppress(OSError):
                    recorder.out.unlink(missing_ok=True)
        if self.sampler is not None:
            self.sampler.join(timeout=2)

    def _stop(self, probe: str, stop: Any) -> Any:
        if stop is None or self.data.status.get(probe, ("", None))[0] in ("skipped", "failed"):
            return None
        try:
            result = stop()
        except (OSError, RuntimeError) as exc:
            self.data.status[probe] = ("failed", str(exc))
            return None
        self.data.status[probe] = ("ran", None)
        return result

    def _read_sched(self, recorder: sched.SchedRecorder) -> None:
        """Read the scheduler trace; then drop the recording."""
        try:
            self.data.sched = sched.parse(recorder.out, self._role_of)
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            self.data.status["sched"] = ("failed", str(exc))
        recorder.out.unlink(missing_ok=True)

    def _fold(self) -> None:
        """Fold and render the stacks; then drop the recording."""
        if self.oncpu is not None and self.data.status["flamegraphs"][0] == "ran":
            try:
                self.data.flame = flamegraph.flame_graphs(
                    self.oncpu.out, self.out_dir / "flame", self._role_of,
                    f"{self.config.flame_hz} Hz per CPU over {self.duration:g} s, "
                    f"{flamegraph.CALL_GRAPHS[self.oncpu.call_graph]}; µs on CPU")
            except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
                self.data.status["flamegraphs"] = ("failed", str(exc))
            self.oncpu.out.unlink(missing_ok=True)



def probe_rows(data: ProbeData, repeat_dir: str, timeline: Timeline | None = None
               ) -> ProbeRows:
    """The store's rows for what the probes of one repeat found; files are named
    relative to the run folder (``repeat_dir`` is the repeat's folder in it). The
    samplers' times are moved onto the repeat's ``timeline`` (seconds since the client
    started), when given."""
    rows = ProbeRows(
        probes=[ProbeRow(probe, status, reason)
                for probe, (status, reason) in data.status.items()],
        costs=list(data.costs))
    for node, result in data.activity.items():
        for (role, wtype, wevent), n in sorted(result.waits.items()):
            rows.waits.append(WaitRow(node, role, wtype, wevent, n, result.ticks))
        shift = timeline.shift(data.sampled_from) if timeline is not None else 0.0
        rows.replication_samples += [s._replace(t_s=round(s.t_s + shift, 3))
                                     for s in result.replication]
        per_second, ticks = result.per_second(shift)
        rows.wait_timeline += [
            WaitTimelineRow(second, node, role, wtype, n, ticks[second])
            for (second, role, wtype), n in sorted(per_second.items())]
    if data.proc is not None:
        rows.proc_costs = data.proc.cost_rows()
        rows.numa_pages = list(data.proc.numa)
    if data.flame is not None:
        rows.flamegraphs = data.flame.graphs_in(repeat_dir)
        rows.stack_frames = list(data.flame.frames)
    if data.sched is not None:
        rows.sched_roles = sched_rows(data.sched)
        rows.wakeups = wakeup_rows(data.sched)
    if data.gprof is not None:
        rows.gprof_roles = [g._replace(profile_path=f"{repeat_dir}/gprof/{g.profile_path}")
                            for g in data.gprof.roles]
        rows.gprof_functions = list(data.gprof.functions)
    return rows


def sched_rows(s: sched.SchedResult) -> list[SchedRoleRow]:
    """``sched_roles``: a scheduler trace per node and role."""
    return [SchedRoleRow(node, role, r.threads, r.cpu_s * 1e3, r.sleep_s * 1e3,
                         r.runq_s * 1e3, r.switches, r.voluntary, r.wakeups_received,
                         s.duration_s)
            for (node, role), r in sorted(s.roles.items())]


def wakeup_rows(s: sched.SchedResult) -> list[WakeupRow]:
    """``wakeups``: who woke whom in a scheduler trace."""
    return [WakeupRow(*key, n, s.duration_s) for key, n in sorted(s.wakeups.items())]
