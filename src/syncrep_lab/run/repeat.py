"""One repeat of a cell: from the same state, its recorders around its client, its
figures stored the moment it ends.

The recorders (probes/recorder.py) are chosen here, in the order they start: the fault
run first (it counts rows and sets the level before anything else, and puts the cluster
back only after every probe has stopped), then in a probed repeat the probes of the
nodes here and on SSH hosts, or in the commit anatomy's repeat that probe alone (its
traps would weigh on every other probe's figure), the hosts' clocks and CPUs, the
untraced CPU of a measured repeat, and the placement read-back last, nearest the client.
They stop in the reverse order, once the client has finished; an error or an interrupt
aborts exactly those started. The repeat's figures are built from the client's output by
run/repeat_record.py.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from syncrep_lab.cluster import server
from syncrep_lab.errors import UserError
from syncrep_lab.hosts.ssh import HostSpec
from syncrep_lab.pg.builds import Build, build_at
from syncrep_lab.plan.matrix import NO_FAULTS, Cell, link_profiles
from syncrep_lab.probes.anatomy import PROBE as ANATOMY_PROBE
from syncrep_lab.probes.anatomy import CommitAnatomy, unavailable_reason
from syncrep_lab.probes.gprof import GprofSetup
from syncrep_lab.probes.host_anatomy import HostAnatomy, HostHalf, unavailable_on_host
from syncrep_lab.probes.kernel_locks import LocalLocks
from syncrep_lab.probes.recorder import Client, Ending, Recorder, Recording, Skipped
from syncrep_lab.probes.remote import HostProbes
from syncrep_lab.probes.session import RepeatProbes, UntracedCpu
from syncrep_lab.readers.pgbench_log import TransactionLogStats, parse_transaction_logs
from syncrep_lab.readers.timeline import Timeline
from syncrep_lab.run import faults, repeat_record, reset
from syncrep_lab.run.clients import ClientOptions, finish_all, remote_client_costs, start_clients
from syncrep_lab.run.clusters import ActiveCluster
from syncrep_lab.run.context import RunContext
from syncrep_lab.run.fault_run import FaultRun
from syncrep_lab.run.host_watch import HostWatch
from syncrep_lab.run.io_watch import IoWatch
from syncrep_lab.run.placement_watch import PlacementReadBack
from syncrep_lab.run.target import Target
from syncrep_lab.run.workload import ClientRun, RunningClient
from syncrep_lab.store import ANATOMY, MEASURED, PROBED, ProbeRows, now


@dataclass
class CellRun:
    """A cell being measured: its folder, script and client options, and how far it got."""

    cell: Cell
    cell_id: int
    cell_dir: Path
    script: Path
    options: ClientOptions
    n: int = 0  # the number of its last stored repeat
    # the cluster generations its warm-up ran in (a duet's cell may run on its
    # cluster and on a twin of it in turn, and is warmed once on each)
    warmed_in: set[int] = field(default_factory=set)


class Repeat:
    """Repeat ``run.n`` of a cell, on ``cluster``, the run's active one."""

    def __init__(self, ctx: RunContext, cluster: ActiveCluster, run: CellRun, *, kind: int,
                 round_no: int | None = None, position: int | None = None) -> None:
        """``kind``: MEASURED, PROBED (the probes) or ANATOMY (the commit anatomy alone),
        as stored in ``repeats.probed``."""
        self.ctx, self.cluster = ctx, cluster
        self.run, self.cell, self.kind = run, run.cell, kind
        self.probed = kind != MEASURED
        self.round_no, self.position = round_no, position
        target = cluster.target
        assert target is not None
        self.target, self.targets = target, cluster.targets or [target]
        self.dir = run.cell_dir / f"repeat-{run.n:02d}"
        self.here = str(self.dir.relative_to(ctx.store.folder))  # as the store names it
        self.client = Client()
        self.hosts: HostWatch | None = None
        self.fault: FaultRun | None = None
        self.logs: list[TransactionLogStats] | None = None
        self.runs: list[ClientRun] = []
        self.started = ""
        # a duet's: the other side's data dirs, and its pair and CPUs as stored
        self.also_ours: list[Path] = []
        self.duet: dict[str, int | str] = {}

    def measure(self) -> float:
        """Run the repeat and store it; its TPS."""
        watch = self.prepare()
        with Recording(self.recorders()) as recording:
            running = self.start_client()
            rows = self.finish(watch, recording, running)
        return self.keep(watch, running, rows)

    # A duet (run/duet.py) drives two repeats through these steps together: both
    # prepared, both recorders' and clients started, both finished, both kept.

    def prepare(self) -> reset.Disturbances:
        """Its folder made and its cluster in the state every repeat starts from; what
        would disturb it read from here (``also_ours``: the servers of a duet's other
        side, which are not other processes)."""
        if self.dir.exists():
            shutil.rmtree(self.dir)  # the remains of a repeat that was killed
        self.dir.mkdir()
        data_dirs = [n.data_dir for t in self.targets for n in t.nodes if n.data_dir]
        watch = reset.Disturbances(self.target.admin, self.target.version_num,
                                   self.ctx.tables.insert, data_dirs + self.also_ours,
                                   behind=self._reset())
        self.started = now()
        return watch

    def start_client(self) -> list[RunningClient]:
        running = start_clients(
            self.targets, self.run.options, self.target.pgbench, self.run.script,
            self.dir, self.ctx.spec.workload.duration,
            live=lambda s: self.ctx.events.live(self.cell, s),
            stall_watch=self.ctx.stall_watch(self.cell))
        self.client.begin(running)
        return running

    def finish(self, watch: reset.Disturbances, recording: Recording,
               running: list[RunningClient]) -> ProbeRows:
        """The client waited for, then the recorders stopped: their rows."""
        self.runs = self._finished(running)
        watch.ended()
        runs = self.runs
        return recording.stop(Ending(self._timeline(runs), lambda: self._rows_written(runs)))

    def keep(self, watch: reset.Disturbances, running: list[RunningClient],
             rows: ProbeRows) -> float:
        """The repeat stored; its TPS."""
        runs = self.runs
        rows.proc_costs += remote_client_costs(running, self.cell.driver)
        record = repeat_record.build(
            runs, self._logs_of(runs), [t.instance for t in self.targets], n=self.run.n,
            probed=self.kind, started_at=self.started, round_no=self.round_no,
            position=self.position, seen=watch.seen(),
            stdout_path=f"{self.here}/{self.cell.driver}.stdout",
            stderr_path=f"{self.here}/{self.cell.driver}.stderr")
        rows.instance_results = record.instance_rows
        self.ctx.store.add_repeat(self.run.cell_id, {**record.values, **self.duet}, record.samples,
                                  rows)
        return record.tps

    def _reset(self) -> bool:
        """The repeat from the same state as every other (run/reset.py); whether a
        standby was still behind when it began."""
        behind = False
        spec = self.ctx.spec
        table = self.ctx.tables.insert if spec.workload.kind == "insert" else None
        for target in self.targets:
            standbys = [n.admin for n in target.nodes if not n.primary]
            done = reset.reset(target.admin, standbys, table, target.version_num,
                               spec.run.reset)
            behind = behind or done.behind
            for note in done.notes:
                self.ctx.say_once(note, f"{self.cell.label}: {note}")
        return behind

    def recorders(self) -> list[Recorder]:
        """What records this repeat, in the order it starts (see the module's text)."""
        ctx, spec, target = self.ctx, self.ctx.spec, self.target
        cell, duration = self.cell, spec.workload.duration
        chosen: list[Recorder | None] = []
        if cell.faults != NO_FAULTS:
            chosen.append(self._fault_run())
        if self.kind == ANATOMY:  # alone: its traps would weigh on the probes' figures
            chosen.append(self._anatomy())
        if self.kind == PROBED:
            built = build_at(target.manifest.bin_dir) if target.manifest is not None else None
            chosen.append(RepeatProbes(
                spec.probes, target.nodes, target.version_num, self.dir, duration,
                self._profiling(built), here=self.here,
                frame_pointers=built is not None and built.flavor == "frame-pointers"))
            # where the anatomy gets no repeat of its own, this one says why
            if not spec.probes.anatomy:
                chosen.append(Skipped(ANATOMY_PROBE, "turned off in the spec ([probes] "
                                                     "anatomy)"))
            elif (reason := anatomy_unavailable(self.targets)) is not None:
                chosen.append(Skipped(ANATOMY_PROBE, reason))
            here = [n for n in target.nodes if n.primary and n.data_dir is not None]
            if spec.probes.locks and here and here[0].data_dir is not None:
                # the primary on this machine (a kernel = "host" cell, or no hosts): the
                # probe here; on a host, HostProbes runs it there
                chosen.append(LocalLocks(here[0].data_dir, target.admin, self.dir, duration))
            on_hosts = _host_nodes(target)
            chosen.append(HostProbes(on_hosts, spec.probes, duration, self.dir,
                                     target.admin, self.here) if on_hosts else None)
        manifests = [t.manifest for t in self.targets if t.manifest is not None]
        self.hosts = HostWatch.of(*manifests) if manifests else None
        chosen.append(self.hosts)
        chosen.append(IoWatch(self.targets))
        # measured repeats: CPU per role from /proc only, nothing attached (the model's
        # service demands); one instance, no faults (probes/session.UntracedCpu)
        if (not self.probed and self.fault is None and len(self.targets) == 1
                and spec.probes.proc_hz > 0):
            # a client on an SSH host is not this process's child: no figure of it
            client_here = target.manifest is None or target.manifest.client is None
            # in a duet the other side's client is reaped in the same window: its CPU
            # would be counted as this one's
            client_here = client_here and not self.duet
            chosen.append(UntracedCpu(target.nodes, len(self.targets),
                                      cell.driver if client_here else None, duration))
        placed = any(t.manifest is not None and t.manifest.layout for t in self.targets)
        place = spec.placements.get(cell.placement)
        numa = place is not None and bool(place.numa)
        if placed or numa:
            chosen.append(PlacementReadBack(
                self.targets, self.client, min(2.0, duration / 2), placed=placed, numa=numa,
                say=lambda text: ctx.events.message(
                    f"{cell.label}: in repeat {self.run.n}, {text}")))
        return [r for r in chosen if r is not None]

    def _anatomy(self) -> Recorder:
        """The commit anatomy of the primary on this machine (probes/anatomy.py), or of
        the primary on an SSH host, run there (probes/host_anatomy.py). Of several
        instances, the first's, as every probe of a repeat: its per-commit figures are
        divided by that instance's commits (store/queries.watched_commits)."""
        primaries = _local_primaries([self.target])
        if primaries:  # the rest of anatomy_unavailable is the probe's own start()
            # and the sync standby's half of each commit, where asked for
            standbys = ({n.name: n.admin for n in self.target.nodes if not n.primary}
                        if self.ctx.spec.probes.standby_anatomy else None)
            return CommitAnatomy(_binary(primaries), [pid for pid, _ in primaries],
                                 self.dir, [admin for _, admin in primaries],
                                 standbys=standbys, hosts=_host_standbys([self.target]),
                                 duration=self.ctx.spec.workload.duration,
                                 remote_half=HostHalf)
        on_host = _host_primary([self.target])
        if on_host is not None:
            spec, data_dir, admin = on_host
            return HostAnatomy(spec, data_dir, admin, self.dir,
                               self.ctx.spec.workload.duration)
        return Skipped(ANATOMY_PROBE, NOT_HERE)

    def _finished(self, running: list[RunningClient]) -> list[ClientRun]:
        """The clients' runs, once all have ended, their output kept beside the repeat.
        A client that failed because the fault scenario left no standby says so."""
        try:
            runs = finish_all(running)
        except UserError:
            stalled = self.fault.stall_error() if self.fault is not None else None
            if stalled is not None:
                raise stalled from None
            raise
        for t, run in zip(self.targets, runs, strict=True):
            name = run.driver + ("" if t.instance == 1 else f"-i{t.instance}")
            (self.dir / f"{name}.stdout").write_text(run.stdout)
            (self.dir / f"{name}.stderr").write_text(run.stderr)
            (self.dir / f"{name}.argv").write_text(" ".join(run.argv) + "\n")
        return runs

    def _timeline(self, runs: list[ClientRun]) -> Timeline:
        """The repeat's one timeline: seconds since the client started
        (readers/timeline.py), placed with its host's clock offset."""
        offset = self.hosts.offset(runs[0].host) if self.hosts is not None else 0.0
        return Timeline.of(runs[0].launched_epoch, offset)

    def _logs_of(self, runs: list[ClientRun]) -> list[TransactionLogStats]:
        """Each instance's logs, read once (sysbench: its histogram), then dropped unless
        the spec keeps them; a client that printed no summary fails the repeat."""
        if self.logs is None:
            self.logs = [run.stats or parse_transaction_logs(run.log_files) for run in runs]
            if not self.ctx.spec.workload.keep_logs:
                for run in runs:
                    for f in run.log_files:
                        f.unlink()
        for run in runs:
            if run.summary.tps is None or run.summary.transactions is None:
                raise UserError(f"{run.driver} printed no summary",
                                f"see {self.dir}/{run.driver}.stdout")
        return self.logs

    def _rows_written(self, runs: list[ClientRun]) -> int:
        """Rows the clients were told were committed: their transactions times the batch."""
        return sum(s.transactions for s in self._logs_of(runs)) * self.cell.batch

    def _fault_run(self) -> FaultRun:
        target, spec = self.target, self.ctx.spec
        if target.manifest is None:
            raise UserError("faults need a cluster syncrep-lab built",
                            "leave the faults axis out with attach")
        ctx = faults.FaultContext(target.manifest, target.admin, self.cell.synchronous_commit,
                                  self.cluster.sync or "", target.version_num,
                                  link_profiles(spec),
                                  pgbench_name=f"{self.ctx.application_name} pgbench")
        self.fault = FaultRun(spec.faults[self.cell.faults], ctx,
                              spec.workload.kind == "insert", self.cluster,
                              spec.run.ready_timeout, self.client)
        return self.fault

    def _profiling(self, built: Build | None) -> GprofSetup | None:
        """What the gprof probe needs, when the cluster runs on a profiling build."""
        if built is None or built.flavor != "profiling":
            return None
        target = self.target
        return GprofSetup(built.bin_dir / "postgres",
                          lambda: self.cluster.wait_streaming(target))


def _host_nodes(target: Target) -> dict[str, tuple[HostSpec, str]]:
    """The nodes on SSH hosts: each one's host and its data dir there."""
    from syncrep_lab.cluster import remote_node

    manifest = target.manifest
    return ({} if manifest is None else
            {n.name: (remote_node.host_spec(n.host), n.remote_data) for n in manifest.nodes
             if n.host is not None and n.remote_data is not None})


NOT_HERE = ("the primary is neither on this machine nor on an SSH host of the spec: the "
            "commit anatomy puts its probes on the primary's processes")


def _local_primaries(targets: Sequence[Target]) -> list[tuple[int, str]]:
    """(postmaster pid, admin connection) of each primary running on this machine."""
    out = []
    for t in targets:
        for n in t.nodes:
            if n.primary and n.data_dir is not None:
                pid = server.postmaster_pid(n.data_dir)
                if pid is not None:
                    out.append((pid, t.admin))
    return out


def _host_primary(targets: Sequence[Target]) -> tuple[HostSpec, str, str] | None:
    """The first of these targets' primaries that is on an SSH host (its host, its data
    dir there, the tool's connection to it)."""
    from syncrep_lab.cluster import remote_node

    for t in targets:
        manifest = t.manifest
        if manifest is None:
            continue
        node = manifest.primary
        if node.host is not None and node.remote_data is not None:
            return remote_node.host_spec(node.host), node.remote_data, t.admin
    return None


def _host_standbys(targets: Sequence[Target]) -> dict[str, tuple[HostSpec, str]]:
    """The standbys on SSH hosts: each one's host and its data dir there."""
    from syncrep_lab.cluster import remote_node

    return {n.name: (remote_node.host_spec(n.host), n.remote_data)
            for t in targets if t.manifest is not None for n in t.manifest.nodes
            if n.role != "primary" and n.host is not None and n.remote_data is not None}


def _binary(primaries: Sequence[tuple[int, str]]) -> Path:
    return Path(f"/proc/{primaries[0][0]}/exe")  # the server binary, as bpftrace opens it


def anatomy_unavailable(targets: Sequence[Target]) -> str | None:
    """Why the commit anatomy cannot run on these targets (with the fix), or None: asked
    before its repeat is spent, so a cell that cannot have it spends none."""
    primaries = _local_primaries(targets)
    if primaries:
        return unavailable_reason(_binary(primaries))
    on_host = _host_primary(targets)
    if on_host is not None:
        return unavailable_on_host(*on_host[:2])
    return NOT_HERE
