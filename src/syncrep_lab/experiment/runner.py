"""Running a plan: cells measured, every repeat stored as it ends.

The cells run in interleaved rounds (``run.order = "interleaved"``, the default:
one repeat of every cell still needed per round, in a shuffled order,
experiment/rounds.py), over units of clusters held up at once
(experiment/clusters.py), or one cell after another (``blocked``). Before a cell's
first repeat on a cluster: ``synchronous_standby_names`` by reload when the cell
asks for another, the workload's tables, a warm-up that is not counted. Each
repeat starts from the same state (experiment/reset.py), and its figures are
built from pgbench's by experiment/repeat_record.py. A cell that fails is recorded
with its error and the run goes on with a fresh cluster. The tool's own cost per
repeat is a few SQLite rows and a log parse after pgbench has exited, so nothing
of it overlaps the measurement. What is checked before anything starts is in
experiment/checks.py.
"""

from __future__ import annotations

import contextlib
import json
import math
import secrets
import shutil
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syncrep_lab import __version__, shutdown
from syncrep_lab.cluster.ready import wait_replication
from syncrep_lab.errors import Interrupted, UserError
from syncrep_lab.experiment import faults, repeat_record, reset, sysbench
from syncrep_lab.experiment.attached import APP_PREFIX, Visit, stamped
from syncrep_lab.experiment.checks import check_machine, check_out
from syncrep_lab.experiment.clusters import ActiveCluster, ClusterPool, Target, units
from syncrep_lab.experiment.host_watch import HostWatch, host_facts
from syncrep_lab.experiment.machine import machine_metadata
from syncrep_lab.experiment.plan import (
    NO_FAULTS,
    Cell,
    Plan,
    expand,
    link_profiles,
)
from syncrep_lab.experiment.remote_client import RemoteRunningPgbench, start_remote_client
from syncrep_lab.experiment.rounds import Member, Rounds
from syncrep_lab.experiment.spec import FaultScenario, Spec, parse_spec
from syncrep_lab.experiment.stall import SyncStallWatch
from syncrep_lab.experiment.workload import (
    ATTACHED_TABLES,
    SEED_TABLES,
    PgbenchRun,
    RunningPgbench,
    Tables,
    prepare_tables,
    script_text,
    start_pgbench,
)
from syncrep_lab.hosts.ssh import HostSpec, kept_connections
from syncrep_lab.measure.histogram import LatencyHistogram
from syncrep_lab.measure.pairing import baselines, by_round, rows_per_second
from syncrep_lab.measure.pgbench_log import ProgressSample, parse_transaction_logs
from syncrep_lab.measure.stats import mean_ci, stein_rounds, trend
from syncrep_lab.measure.timeline import Timeline
from syncrep_lab.pg import replication, sync_names
from syncrep_lab.pg.builds import Build, build_at, unfit_note
from syncrep_lab.pg.conninfo import (
    mask_toml,
    without_masked_password,
)
from syncrep_lab.pg.sync_names import check_sync
from syncrep_lab.placement.watch import (
    PlacementWatch,
    link_rows,
    numastat_rows,
)
from syncrep_lab.probes.gprof import GprofSetup
from syncrep_lab.probes.remote import HostProbes
from syncrep_lab.probes.session import RepeatProbes, UntracedCpu, probe_rows, walsenders
from syncrep_lab.store import (
    DurabilityRow,
    FaultEventRow,
    ProbeRows,
    ProcCostRow,
    Store,
    StoredCell,
    StoredRepeat,
    cluster_key_text,
    mark_run,
    now,
    with_defaults,
)


@dataclass
class Events:
    """What the runner reports while it works; the CLI draws it, tests ignore it."""

    plan: Callable[[Plan, int], None] = lambda plan, done: None
    cell_start: Callable[[Cell], None] = lambda cell: None
    phase: Callable[[Cell, str], None] = lambda cell, phase: None
    live: Callable[[Cell, ProgressSample], None] = lambda cell, sample: None
    repeat: Callable[[Cell, int, float], None] = lambda cell, n, tps: None
    cell_end: Callable[[Cell, dict[str, Any]], None] = lambda cell, summary: None
    message: Callable[[str], None] = lambda text: None


class Runner:
    def __init__(self, store: Store, spec: Spec, spec_text: str, spec_dir: Path,
                 run_id: int, events: Events | None = None) -> None:
        self.store = store
        self.spec = spec
        self.spec_text = spec_text
        self.spec_dir = spec_dir
        self.run_id = run_id
        self.events = events or Events()
        # Every session this invocation opens on a server carries this name (pgbench's
        # with " pgbench" after it): what it ends, and only that (experiment/attached.py).
        self.application_name = f"{APP_PREFIX} {secrets.token_hex(4)}"
        attach = spec.topology.attach
        self.visit = (Visit(attach, store.folder, token=self.application_name.split()[1])
                      if attach is not None else None)
        self.pool = ClusterPool(self)
        run = store.run(run_id)
        # a run stored before rounds existed resumes as it began: one cell after another
        self.order = str(run.order_mode or "blocked")
        self.seed = int(run.seed or 0)
        self._tables_made: set[int] = set()  # the cluster generations they were made in
        self._said: set[str] = set()

    @property
    def cluster(self) -> ActiveCluster:
        """The cluster the current cell runs on."""
        return self.pool.current

    def named(self, conninfo: str, what: str = "") -> str:
        """``conninfo`` carrying this invocation's application_name."""
        return stamped(conninfo, f"{self.application_name} {what}".strip())

    def execute(self) -> None:
        # one SSH connection per host for the whole run (hosts/ssh.kept_connections)
        with kept_connections():
            self._execute()

    def _execute(self) -> None:
        plan = expand(self.spec, machine_metadata()["cpus_usable"] or 2)
        rows = {c.key: self.store.ensure_cell(self.run_id, c.index, c.key, c.label, c.axes,
                                              c.params()) for c in plan.cells}
        done = sum(1 for r in rows.values() if r.status in ("done", "failed"))
        self.events.plan(plan, done)
        for message in plan.dropped:
            self.events.message(f"left out: {message}")
        self.store.set_run_status(self.run_id, "running")
        # A second Ctrl-C exits at once; the run is then marked from a connection of
        # its own if the store is free (shutdown.py).
        folder, run_id = self.store.folder, self.run_id
        take_back = shutdown.at_force(lambda: mark_run(folder, run_id, "interrupted"))
        todo = [c for c in plan.cells if rows[c.key].status not in ("done", "failed")]
        try:
            if self.order == "blocked":
                budget = self.spec.run.budget_seconds
                started = time.monotonic()
                for left, cell in zip(range(len(todo), 0, -1), todo, strict=True):
                    self._run_cell(cell, rows[cell.key].id,
                                   _share(budget, started, 1, left))
            else:
                self._run_units(todo, plan.cells, rows)
        except BaseException:
            # Interrupted, the run folder unwritable, or a bug: undo what was started
            # (a first signal arriving now waits until this is done), keep what is stored.
            with shutdown.critical():
                shutdown.kill_tracked()
                with contextlib.suppress(UserError, sqlite3.Error, OSError):
                    self.store.set_run_status(self.run_id, "interrupted")
                self._down_or_say()
            raise
        finally:
            take_back()
        with shutdown.critical():
            self.pool.down()
            self.store.set_run_status(self.run_id, "done")

    def _down_or_say(self) -> None:
        """Take the cluster down on the way out without hiding why the run stopped."""
        try:
            self.pool.down()
        except Exception as exc:  # the error that stopped the run is the one to show
            self.events.message(f"could not take the run's cluster down ({exc}); "
                                "syncrep-lab clean removes what is left")

    def _run_cell(self, cell: Cell, cell_id: int, budget: float | None = None) -> None:
        self.events.cell_start(cell)
        self.store.update_cell(cell_id, status="running", started_at=now(), error=None)
        try:
            summary = self._measure(cell, cell_id, budget)
        except Exception as exc:  # a failed cell is a result; the run goes on
            self._cell_failed(cell, cell_id, exc)
            return
        except BaseException:  # interrupted: the cell is measured again on --resume
            with shutdown.critical(), contextlib.suppress(UserError, sqlite3.Error, OSError):
                self.store.update_cell(cell_id, status="pending")
            raise
        self.events.cell_end(cell, summary)

    def _cell_failed(self, cell: Cell, cell_id: int, exc: Exception) -> None:
        """A failed cell is a result, and the run goes on with a fresh cluster ... unless
        the failure is the interrupt's (a terminal's Ctrl-C reaches pgbench too, which
        may exit first) or the run folder's: then it is raised. A signal arriving while
        this is decided is raised after it (critical), never half-way."""
        with shutdown.critical():
            signum = shutdown.requested()
            unwritable = self.store.unwritable(exc) if signum is None else None
            if signum is not None or unwritable is not None:
                with contextlib.suppress(UserError, sqlite3.Error, OSError):
                    self.store.update_cell(cell_id, status="pending")
                if signum is not None:
                    raise Interrupted(signum) from exc
                assert unwritable is not None  # not the cell's fault: stop; --resume
                raise unwritable from exc
            error = (exc.cause if isinstance(exc, UserError)
                     else f"{type(exc).__name__}: {exc}")
            self.store.update_cell(cell_id, status="failed", error=error, finished_at=now())
        self.events.cell_end(cell, {"status": "failed", "error": error})
        self.cluster.down()

    # --- one cell after another (run.order = "blocked") -----------------------------------

    def _measure(self, cell: Cell, cell_id: int, budget: float | None) -> dict[str, Any]:
        run = self._cell_run(cell, cell_id)
        self._enter(run, fresh_tables=True)
        tps = [float(r.tps) for r in self.store.repeats(cell_id) if not r.probed]
        ctl = self.spec.run
        started, spent = time.monotonic(), False
        while len(tps) < ctl.repeats_max and not self._enough(tps):
            if budget is not None and len(tps) >= 2 and time.monotonic() - started >= budget:
                spent = True  # as in rounds: never below 2 repeats
                break
            self.events.phase(cell, f"repeat {len(tps) + 1}")
            tps.append(self._measured(run, None, None))
            self.events.repeat(cell, len(tps), tps[-1])
        self._probed(run)
        reason = "ci" if self._enough(tps) else "budget" if spent else "max"
        return self._summarise(run, tps, reason)

    def _enough(self, tps: list[float]) -> bool:
        """Stein's rule on the cell's own log TPS (see experiment/rounds.py)."""
        ctl = self.spec.run
        pilot = min(max(2, ctl.repeats_min), ctl.repeats_max)
        if len(tps) < max(2, pilot):
            return False
        logs = [math.log(v) for v in tps]
        return len(tps) >= stein_rounds(logs[:pilot], math.log1p(ctl.ci_target),
                                        ctl.confidence)

    # --- cells in rounds (run.order = "interleaved") --------------------------------------

    def _run_units(self, todo: list[Cell], every: list[Cell], rows: dict[str, StoredCell]
                   ) -> None:
        """The cells in units of clusters held up together (experiment/clusters.py), each
        unit in rounds; the run's budget shared among the units by their cells."""
        groups = _by_cluster(todo)
        plan = units(self.spec, groups, self.order)
        if plan.said:
            self.events.message(plan.said)
            if self.store.run(self.run_id).order_note is None:  # resumed: as it began
                self.store.set_order_note(self.run_id, plan.said)
        budget = self.spec.run.budget_seconds
        started, left = time.monotonic(), len(todo)
        # the plan's clusters in order (done ones included: the numbering must not move
        # on resume)
        keys = list(dict.fromkeys(c.cluster_key for c in every))
        for unit in plan.units:
            cells = unit.cells
            share = _share(budget, started, len(cells), left)
            self.pool.keep = {g[0].cluster_key for g in unit.groups}
            # the rounds of each unit are numbered apart (from ROUND_SPAN times the place
            # of its first cluster in the plan, + 1), so that no analysis pairs repeats
            # of two units that ran at other times
            first = min(keys.index(g[0].cluster_key) for g in unit.groups)
            self._run_group(cells, {c.key: rows[c.key].id for c in cells}, share,
                            base=first * ROUND_SPAN)
            left -= len(cells)
        self.pool.keep = set()

    def _run_group(self, cells: list[Cell], ids: dict[str, int], budget: float | None,
                   base: int = 0) -> None:
        """Round after round, one repeat of every cell still needed, in an order shuffled
        per round (experiment/rounds.py); then the probed repeats, cell by cell."""
        by_index = {c.index: c for c in cells}
        runs = {c.index: self._cell_run(c, ids[c.key]) for c in cells}
        base_of = baselines([(c.index, with_defaults(c.params())) for c in cells],
                            self.spec.compare.rules(self.spec.matrix))
        ctl = self.spec.run
        rounds = Rounds([Member(c.index, c.label, base_of[c.index],
                                by_round(self.store.repeats(ids[c.key]), c.params()))
                         for c in cells], seed=self.seed,
                        group=" + ".join(dict.fromkeys(cluster_key_text(c.params())
                                                       for c in cells)),
                        base=_stored_base(self.store, ids.values(), base),
                        repeats_min=ctl.repeats_min, repeats_max=ctl.repeats_max,
                        ci_target=ctl.ci_target, confidence=ctl.confidence)
        for cell in cells:
            self.store.update_cell(ids[cell.key], status="running", started_at=now(),
                                   error=None)
        started, spent, ran = time.monotonic(), False, 0
        try:
            while (step := rounds.next_round()) is not None:
                # the budget never cuts a cluster below 2 rounds: the fewest that give
                # an interval at all
                if (budget is not None and step[0] - rounds.base > 2
                        and time.monotonic() - started >= budget):
                    spent = True
                    self.events.message(f"the budget ({ctl.budget}) is spent: no new round")
                    break
                round_no, order = step
                for position, idx in enumerate(order):
                    member, run = rounds.members[idx], runs[idx]
                    if member.failed:
                        continue
                    self.events.cell_start(run.cell)
                    self.events.phase(run.cell, f"round {round_no - rounds.base}")
                    try:
                        tps = self._measured(run, round_no, position)
                    except Exception as exc:
                        self._cell_failed(run.cell, run.cell_id, exc)
                        member.failed = True
                        continue
                    member.values[round_no] = rows_per_second(tps, run.cell.params())
                    self.events.repeat(run.cell, len(member.values), tps)
                ran += 1
                self._say_round(rounds, round_no - rounds.base,
                                (time.monotonic() - started) / ran)
            for idx in sorted(by_index):
                member, run = rounds.members[idx], runs[idx]
                if member.failed:
                    continue
                try:
                    self._probed(run)
                    measured = [float(r.tps) for r in self.store.repeats(run.cell_id)
                                if not r.probed]
                    narrow = rounds.not_narrowing(member)
                    summary = self._summarise(run, measured, rounds.stop_reason(
                        member, budget_spent=spent), [narrow] if narrow else [])
                except Exception as exc:
                    self._cell_failed(run.cell, run.cell_id, exc)
                    member.failed = True
                    continue
                self.events.cell_end(run.cell, summary)
        except BaseException:  # interrupted: the group's cells go on at --resume
            with shutdown.critical(), contextlib.suppress(UserError, sqlite3.Error, OSError):
                for idx, run in runs.items():
                    if not rounds.members[idx].failed and self.store.cell(
                            run.cell_id).status == "running":
                        self.store.update_cell(run.cell_id, status="pending")
            raise

    def _say_round(self, rounds: Rounds, round_no: int, per_round: float) -> None:
        """The widest interval now, and how many more rounds the comparisons need."""
        widest = rounds.widest()
        if widest is None:
            return
        label, rel = widest
        wanted = rounds.wanted()
        needs = [rounds.needed(rounds.members[i]) for i in wanted]
        if not wanted or round_no >= rounds.max_rounds:
            more = "done"
        elif any(n is None for n in needs):
            more = f"{len(wanted)} cells go on (the pilot is not complete)"
        else:
            left = min(max(n for n in needs if n is not None), rounds.max_rounds) - round_no
            capped = " (capped by repeats_max)" if max(
                n for n in needs if n is not None) > rounds.max_rounds else ""
            more = (f"{len(wanted)} cells go on, {left} more round{'s' if left != 1 else ''}"
                    f"{capped}, ETA {left * per_round / 60:.1f} min")
        self.events.message(f"round {round_no}: widest interval ±{100 * rel:.1f} % "
                            f"({label}; target ±{100 * self.spec.run.ci_target:g} %); {more}")

    # --- shared by both orders -----------------------------------------------------------

    def _cell_run(self, cell: Cell, cell_id: int) -> CellRun:
        cell_dir = self.store.artifacts / f"cell-{cell.index:03d}"
        cell_dir.mkdir(parents=True, exist_ok=True)
        if cell.driver == "sysbench":
            script = cell_dir / "workload.lua"
            script.write_text(sysbench.script_text(self.spec.workload, cell.batch,
                                                   self._tables))
        else:
            script = cell_dir / "workload.sql"
            script.write_text(script_text(self.spec.workload, cell.batch, self.spec_dir,
                                          self._tables))
        # A session's own synchronous_commit (PGOPTIONS) outranks a reload, so a
        # scenario that reloads it mid-cell sets the cell's level in the server instead.
        scenario = self.spec.faults.get(cell.faults)
        session_sc = (None if scenario is not None and faults.sets_synchronous_commit(scenario)
                      else cell.synchronous_commit)
        common: dict[str, Any] = dict(clients=cell.clients, threads=cell.threads,
                                      synchronous_commit=session_sc)
        return CellRun(cell, cell_id, cell_dir, script, common,
                       n=len(self.store.repeats(cell_id)))

    @property
    def _tables(self) -> Tables:
        return ATTACHED_TABLES if self.cluster.attach is not None else SEED_TABLES

    def _enter(self, run: CellRun, *, fresh_tables: bool = False) -> Target:
        """The cell's cluster up, its sync level in force, its tables there and its
        warm-up done (once per cluster it runs on)."""
        cell = run.cell
        target = self.pool.for_cell(cell)
        self.cluster.set_sync(cell)
        if fresh_tables or self.cluster.generation not in self._tables_made:
            self.events.phase(cell, "prepare")
            for each in self.cluster.targets or [target]:
                prepare_tables(each.admin, self.spec.workload, self._tables)
            self._tables_made.add(self.cluster.generation)
        if run.common["synchronous_commit"] is None:
            faults.set_on_primary(target.admin, "synchronous_commit", cell.synchronous_commit)
        if run.warmed_in != self.cluster.generation:
            self.cluster.require_acknowledging(cell)
            if self.spec.workload.warmup > 0:
                self.events.phase(cell, "warm-up")
                _finish_all(self._start_pgbench(cell, self.cluster.targets or [target],
                                                target.pgbench, run.script, None, run.common,
                                                self.spec.workload.warmup))
            run.warmed_in = self.cluster.generation
        return target

    def _measured(self, run: CellRun, round_no: int | None, position: int | None) -> float:
        target = self._enter(run)
        run.n += 1
        return self._repeat(run.cell, run.cell_id, run.n, target.pgbench, target.conninfo,
                            run.script, run.cell_dir, run.common, probed=False,
                            round_no=round_no, position=position)

    def _probed(self, run: CellRun) -> None:
        """Probes cost throughput on a small machine (perf counting every traced system
        call, samplers polling every node), so the figures are measured without them and
        the probes get repeats of their own, kept apart."""
        probed = sum(1 for r in self.store.repeats(run.cell_id) if r.probed)
        while probed < self.spec.probes.probed_repeats:
            target = self._enter(run)
            probed += 1
            run.n += 1
            self.events.phase(run.cell, f"probed repeat {probed}")
            self._repeat(run.cell, run.cell_id, run.n, target.pgbench, target.conninfo,
                         run.script, run.cell_dir, run.common, probed=True)

    def _repeat(self, cell: Cell, cell_id: int, n: int, pgbench: Path, conninfo: str,
                script: Path, cell_dir: Path, common: dict[str, Any], *, probed: bool,
                round_no: int | None = None, position: int | None = None) -> float:
        rep_dir = cell_dir / f"repeat-{n:02d}"
        if rep_dir.exists():
            shutil.rmtree(rep_dir)  # the remains of a repeat that was killed
        rep_dir.mkdir()
        target = self.cluster.target
        assert target is not None
        behind = self._reset(cell)
        counted = reset.counters(target.admin, target.version_num, self._tables.insert)
        data_dirs = [n.data_dir for t in self.cluster.targets or [target] for n in t.nodes
                     if n.data_dir is not None]
        ledger = reset.cpu_ledger(data_dirs)
        started = now()
        built = (build_at(target.manifest.bin_dir) if probed and target.manifest is not None
                 else None)
        probes = (RepeatProbes(self.spec.probes, target.nodes, target.version_num, rep_dir,
                               self.spec.workload.duration, self._profiling(target, built),
                               frame_pointers=built is not None
                               and built.flavor == "frame-pointers")
                  if probed else None)
        fault = self._fault_run(cell, target)
        on_hosts = _host_nodes(target) if probed else {}
        host_probes = (HostProbes(on_hosts, self.spec.probes, self.spec.workload.duration,
                                  rep_dir) if on_hosts else None)
        host_rows = ProbeRows()
        if host_probes is not None:
            host_probes.start()
        hosts = HostWatch.of(target.manifest) if target.manifest is not None else None
        if hosts is not None:
            hosts.start()
        if probes is not None:
            probes.start()
        if fault is not None:
            fault.start()
        targets = self.cluster.targets or [target]
        # measured repeats: CPU per role from /proc only, nothing attached (the model's
        # service demands); one instance, no faults (probes/session.UntracedCpu)
        untraced = (UntracedCpu(target.nodes) if not probed and fault is None
                    and len(targets) == 1 and self.spec.probes.proc_hz > 0 else None)
        untraced_rows: list[ProcCostRow] = []
        if untraced is not None:
            untraced.start()
        watch: PlacementWatch | None = None
        placed = any(t.manifest is not None and t.manifest.layout for t in targets)
        before_numa = numastat_rows(targets, "before") if self._numa_placed(cell) else []
        try:
            running = self._start_pgbench(cell, targets, pgbench, script, rep_dir, common,
                                          self.spec.workload.duration)
            if placed:
                watch = PlacementWatch(targets, lambda: [(t.instance, r.driver, r.placement)
                                                         for t, r in zip(targets, running,
                                                                         strict=True)],
                                       min(2.0, self.spec.workload.duration / 2))
                watch.start()
            runs = _finish_all(running)
            host_rows.host_repeats = hosts.stop() if hosts is not None else []
            if host_probes is not None:
                # the primary's walsenders by standby name what was read on the hosts
                host_rows.add(host_probes.stop(walsenders(target.admin),
                                               str(rep_dir.relative_to(self.store.folder))))
            if untraced is not None:
                # a client on an SSH host is not this process's child: no figure of it
                client_here = target.manifest is None or target.manifest.client is None
                untraced_rows, untraced = untraced.stop(
                    len(runs), cell.driver if client_here else None), None
            ledger_after = reset.cpu_ledger(data_dirs)
        except UserError:
            if fault is not None and fault.driver.stalled:
                raise UserError(fault.driver.stalled, _STALL_FIX) from None
            raise
        finally:
            if hosts is not None:
                hosts.close()
            if host_probes is not None:
                host_probes.abort()  # what stop() did not reach
            if untraced is not None:
                untraced.abort()
            placement = watch.stop() if watch is not None else []
            probe_data = probes.stop() if probes is not None else None
            if fault is not None:
                fault.finish()
        if fault is not None and fault.driver.stalled:
            raise UserError(fault.driver.stalled, _STALL_FIX)
        if watch is not None and watch.error is not None:
            self.events.message(f"{cell.label}: the placement was not read back in repeat "
                                f"{n}: {watch.error}")
        for t, run in zip(targets, runs, strict=True):
            suffix = "" if t.instance == 1 else f"-i{t.instance}"
            (rep_dir / f"{run.driver}{suffix}.stdout").write_text(run.stdout)
            (rep_dir / f"{run.driver}{suffix}.stderr").write_text(run.stderr)
            (rep_dir / f"{run.driver}{suffix}.argv").write_text(" ".join(run.argv) + "\n")
        # each instance's logs read once (sysbench: its histogram); the repeat's figures
        # are their sum
        per_instance = [run.stats or parse_transaction_logs(run.log_files) for run in runs]
        if not self.spec.workload.keep_logs:
            for run in runs:
                for f in run.log_files:
                    f.unlink()
        for run in runs:
            if run.summary.tps is None or run.summary.transactions is None:
                raise UserError(f"{run.driver} printed no summary",
                                f"see {rep_dir}/{run.driver}.stdout")
        # the repeat's one timeline: seconds since the client started (measure/timeline.py)
        timeline = Timeline.of(runs[0].launched_epoch,
                               hosts.offset(runs[0].host) if hosts is not None else 0.0)
        rows = (probe_rows(probe_data, str(rep_dir.relative_to(self.store.folder)), timeline)
                if probe_data is not None else ProbeRows())
        if untraced_rows:
            rows.proc_costs = untraced_rows
        rows.add(host_rows)
        remote_cpu = [r.cpu_ms for r in running if isinstance(r, RemoteRunningPgbench)]
        if remote_cpu and all(remote_cpu):
            # the client on its host: its CPU there, from the shell that waited for it
            rows.proc_costs.append(ProcCostRow(
                "client", cell.driver, len(remote_cpu), sum(c[0] for c in remote_cpu if c),
                sum(c[1] for c in remote_cpu if c), 0, 0))
        if placed:
            rows.placement = placement
            rows.links = link_rows(targets)
        if before_numa:
            rows.numastat = before_numa + numastat_rows(targets, "after")
        other = reset.other_cores(ledger, ledger_after)
        seen = reset.disturbed(
            counted, reset.counters(target.admin, target.version_num, self._tables.insert),
            behind, other)
        record = repeat_record.build(
            runs, per_instance, [t.instance for t in targets], n=n, probed=probed,
            started_at=started, round_no=round_no, position=position,
            seen=seen,
            stdout_path=str((rep_dir / f"{cell.driver}.stdout").relative_to(self.store.folder)),
            stderr_path=str((rep_dir / f"{cell.driver}.stderr").relative_to(self.store.folder)))
        if fault is not None:
            rows.fault_events, rows.durability = fault.rows(
                record.values["transactions"] * cell.batch, timeline)
        if record.instance_rows:
            rows.instance_results = record.instance_rows
        self.store.add_repeat(cell_id, record.values, record.samples, rows)
        return record.tps

    def _profiling(self, target: Target, built: Build | None) -> GprofSetup | None:
        """What the gprof probe needs, when the cluster runs on a profiling build."""
        if built is None or built.flavor != "profiling":
            return None
        return GprofSetup(built.bin_dir / "postgres",
                          lambda: self.cluster.wait_streaming(target))

    def _reset(self, cell: Cell) -> bool:
        """Each repeat from the same state (experiment/reset.py); whether a standby was
        still behind when it began."""
        behind = False
        table = self._tables.insert if self.spec.workload.kind == "insert" else None
        for target in self.cluster.targets or ([self.cluster.target] if self.cluster.target
                                               else []):
            standbys = [n.admin for n in target.nodes if not n.primary]
            done = reset.reset(target.admin, standbys, table, target.version_num)
            behind = behind or done.behind
            for note in done.notes:
                if note not in self._said:
                    self._said.add(note)
                    self.events.message(f"{cell.label}: {note}")
        return behind

    def _numa_placed(self, cell: Cell) -> bool:
        place = self.spec.placements.get(cell.placement)
        return place is not None and bool(place.numa)

    def _start_pgbench(self, cell: Cell, targets: list[Target], pgbench: Path, script: Path,
                       rep_dir: Path | None, common: dict[str, Any], duration: int
                       ) -> list[RunningPgbench]:
        """pgbench against every instance at once (started from this, the main thread)."""
        running: list[RunningPgbench] = []
        try:
            for t in targets:
                suffix = "" if t.instance == 1 else f"_i{t.instance}"
                layout = t.manifest.placed() if t.manifest is not None else None
                live = ((lambda s: self.events.live(cell, s)) if t.instance == 1 else None)
                launch = layout.client if layout is not None else None
                watch = self._stall_watch(cell, t)
                if t.manifest is not None and t.manifest.client is not None:
                    running.append(start_remote_client(
                        t.manifest.client, t.manifest.dir, script.read_text(), t.conninfo,
                        duration=duration, on_progress=live, watch=watch, driver=cell.driver,
                        log_prefix=rep_dir / f"pgbench_log{suffix}" if rep_dir else None,
                        prefix=t.manifest.on_host("client"), **common))
                    continue
                if cell.driver == "sysbench":  # no per-transaction logs: its histogram
                    running.append(sysbench.start_sysbench(
                        script, t.conninfo, clients=common["clients"], duration=duration,
                        synchronous_commit=common["synchronous_commit"], on_progress=live,
                        launch=launch, watch=watch))
                    continue
                running.append(start_pgbench(
                    pgbench, t.conninfo, script, duration=duration,
                    log_prefix=rep_dir / f"pgbench_log{suffix}" if rep_dir else None,
                    on_progress=live, launch=launch, watch=watch, **common))
        except BaseException:
            for r in running:
                r.kill()
            raise
        return running

    def _stall_watch(self, cell: Cell, target: Target) -> SyncStallWatch | None:
        """Cells whose commits wait for a standby stop early when that wait stalls; a
        fault scenario watches for that itself (its own stall_seconds)."""
        if (cell.synchronous_commit not in replication.WAITING_LEVELS
                or cell.faults != NO_FAULTS):
            return None
        return SyncStallWatch(target.admin, f"{self.application_name} pgbench",
                              self.spec.run.stall_seconds, target.version_num)

    def _fault_run(self, cell: Cell, target: Target) -> FaultRun | None:
        if cell.faults == NO_FAULTS:
            return None
        if target.manifest is None:
            raise UserError("faults need a cluster syncrep-lab built",
                            "leave the faults axis out with attach")
        ctx = faults.FaultContext(target.manifest, target.admin, cell.synchronous_commit,
                                  self.cluster.sync or "", target.version_num,
                                  link_profiles(self.spec),
                                  pgbench_name=f"{self.application_name} pgbench")
        return FaultRun(self.spec.faults[cell.faults], ctx, self.spec.workload.kind == "insert",
                        self.cluster, self.spec.run.ready_timeout)

    def _summarise(self, run: CellRun, tps: list[float], stop_reason: str,
                   more_notes: list[str] | None = None) -> dict[str, Any]:
        cell_id = run.cell_id
        repeats = [r for r in self.store.repeats(cell_id) if not r.probed]
        merged = LatencyHistogram()
        for r in repeats:
            merged = merged + LatencyHistogram.from_bytes(r.histogram)
        ctl = self.spec.run
        ci = mean_ci(tps, ctl.confidence)
        h = merged.summary()
        notes = reliability_notes(repeats, ctl.confidence) + (more_notes or [])
        notes += sorted({note for t in self.cluster.targets if t.manifest is not None
                         if (note := unfit_note(t.manifest.bin_dir)) is not None})
        for note in notes:
            self.events.message(f"{run.cell.label}: {note}")
        summary: dict[str, Any] = {
            "status": "done", "repeats": len(tps), "stop_reason": stop_reason,
            "tps_mean": ci.mean, "tps_stdev": ci.stdev, "tps_ci_low": ci.low,
            "tps_ci_high": ci.high, "tps_ci_rel": ci.half_width_rel,
            "transactions": sum(int(r.transactions) for r in repeats),
            "failed": sum(int(r.failed) for r in repeats),
            **repeat_record.latency_fields(h),
        }
        self.store.update_cell(cell_id, **summary, histogram=merged.to_bytes(),
                               notes_json=json.dumps(notes), finished_at=now())
        return summary


@dataclass
class CellRun:
    """A cell being measured: its folder, script and pgbench options, and how far it got."""

    cell: Cell
    cell_id: int
    cell_dir: Path
    script: Path
    common: dict[str, Any]
    n: int = 0  # the number of its last stored repeat
    warmed_in: int = -1  # the cluster generation its warm-up ran in


def _share(budget: float | None, started: float, cells: int, left: int) -> float | None:
    """The run's budget, shared: ``cells`` of the ``left`` cells still to run get their
    part of what is left of it when their turn comes."""
    if budget is None:
        return None
    return max(0.0, budget - (time.monotonic() - started)) * cells / left


ROUND_SPAN = 10_000  # round numbers per unit (repeats_max is at most 1000)


def _stored_base(store: Store, cell_ids: Any, planned: int) -> int:
    """The round base a unit's stored rounds have (a resumed run keeps its numbering),
    else the planned one."""
    stored = [int(r.round) for i in cell_ids for r in store.repeats(i) if r.round is not None]
    return (min(stored) - 1) // ROUND_SPAN * ROUND_SPAN if stored else planned


def _by_cluster(cells: list[Cell]) -> list[list[Cell]]:
    """Cells grouped by the cluster they need, groups in the plan's order."""
    groups: dict[tuple[Any, ...], list[Cell]] = {}
    for cell in cells:
        groups.setdefault(cell.cluster_key, []).append(cell)
    return list(groups.values())


def reliability_notes(repeats: list[StoredRepeat], confidence: float) -> list[str]:
    """What says a cell's figures may not hold, one line each: a trend across its
    repeats, a first repeat unlike the others, repeats something else hit."""
    notes = []
    tps = [float(r.tps) for r in sorted(repeats, key=lambda r: str(r.started_at))]
    slope = trend(tps, confidence)
    if slope is not None and slope.significant and abs(slope.per_step_rel) * len(tps) > 0.05:
        notes.append(f"TPS drifted by {100 * slope.per_step_rel:+.1f} % per repeat "
                     f"({100 * slope.low:+.1f} to {100 * slope.high:+.1f} %) over "
                     f"{len(tps)} repeats")
    if len(tps) >= 4:
        rest = mean_ci(tps[1:], confidence)
        if rest.stdev is not None and rest.stdev > 0 and \
                abs(tps[0] - rest.mean) > 3 * rest.stdev and \
                abs(tps[0] - rest.mean) > 0.05 * rest.mean:
            notes.append(f"the first repeat ({tps[0]:,.0f} tps) is unlike the others "
                         f"({rest.mean:,.0f} ± {rest.stdev:,.0f})")
    hit = [f"{r.n} ({r.disturbed})" for r in repeats if r.disturbed]
    if hit:
        notes.append(f"repeat{'s' if len(hit) > 1 else ''} {', '.join(hit)} "
                     f"{'were' if len(hit) > 1 else 'was'} disturbed")
    return notes


_STALL_FIX = ("give the scenario a standby that stays up, or 'for' to bring one back, or "
              "a lower synchronous_commit; this is what an application would have seen")


class FaultRun:
    """One repeat's faults: the driver beside pgbench, then the cluster put back as the
    cell had it, and the rows counted on every node."""

    def __init__(self, scenario: FaultScenario, ctx: faults.FaultContext,
                 count_rows: bool, cluster: ActiveCluster, timeout: float) -> None:
        self.ctx = ctx
        self.cluster = cluster
        self.timeout = timeout
        self.standbys = faults.Standbys(ctx)
        self.driver = faults.FaultDriver(scenario, ctx, self.standbys)
        self.before = faults.count_rows(ctx.admin) if count_rows else None
        if faults.sets_synchronous_commit(scenario):
            faults.set_on_primary(ctx.admin, "synchronous_commit", ctx.synchronous_commit)
        self.restored: list[str] = []
        self.durability: list[faults.Durability] = []

    def start(self) -> None:
        self.driver.t0 = time.monotonic()
        self.driver.start()

    def finish(self) -> None:
        """Stop the driver and put every standby and setting back (also after an
        error: the next repeat, or the teardown, needs them running)."""
        self.driver.stop()
        try:
            if shutdown.requested() is not None:
                # Interrupted: the cluster is about to be removed; only a paused standby
                # needs a hand (a stopped process cannot act on the shutdown signal).
                for name in sorted(self.standbys.paused):
                    self.standbys.resume(name)
                return
            self.restored = self.standbys.restore(time.monotonic() + self.timeout)
        finally:
            self.standbys.close()
        self.restored += self.driver.links.restore()
        faults.reset_settings(self.ctx, self.driver.changed_settings)
        target = self.cluster.target
        if target is not None and self.ctx.sync_names:
            spec, _ = check_sync(self.ctx.sync_names, target.standbys, target.version_num)
            wait_replication(target.admin, sync_names.expect(spec, target.standbys),
                             time.monotonic() + self.timeout, target.log_of)

    def rows(self, acknowledged_rows: int, timeline: Timeline
             ) -> tuple[list[FaultEventRow], list[DurabilityRow]]:
        """The repeat's ``fault_events``, on its ``timeline``, and, when rows were counted
        before it, its ``durability`` rows (every node counted now)."""
        shift = timeline.shift(self.driver.t0)
        events = [FaultEventRow(round(r.t_s + shift, 3), r.kind, r.node, r.detail)
                  for r in self.driver.records]
        events += [FaultEventRow(round(self.driver.now() + shift, 3), "restore", "-", what)
                   for what in self.restored]
        if self.before is None:
            return events, []
        self.durability = faults.check_durability(self.ctx, self.before, acknowledged_rows,
                                                  self.timeout)
        return events, [DurabilityRow(d.node, d.rows, d.expected, int(d.ok), d.detail)
                        for d in self.durability]


def _host_nodes(target: Target) -> dict[str, tuple[HostSpec, str]]:
    """The nodes on SSH hosts: each one's host and its data dir there."""
    from syncrep_lab.cluster import remote_node

    manifest = target.manifest
    return ({} if manifest is None else
            {n.name: (remote_node.host_spec(n.host), n.remote_data) for n in manifest.nodes
             if n.host is not None and n.remote_data is not None})


def _finish_all(running: list[RunningPgbench]) -> list[PgbenchRun]:
    """Wait for every pgbench; if one fails, the others are stopped too."""
    runs = []
    try:
        for r in running:
            runs.append(r.finish())
    except BaseException:
        for r in running:
            r.kill()
        raise
    return runs


def stored_spec_text(spec_text: str) -> str:
    """The spec as it is stored (runs.spec_toml, RUN/spec.toml): every password masked;
    the real one stays in memory, in the parsed spec."""
    try:
        return mask_toml(spec_text)
    except ValueError as exc:
        raise UserError(f"the spec holds a password that cannot be masked for storing ({exc})",
                        "leave the password out of the conninfo and put it in ~/.pgpass "
                        "or PGPASSWORD") from None


def start_run(spec: Spec, spec_text: str, spec_dir: Path, out: Path,
              events: Events | None = None) -> Path:
    """A new run in ``out`` (which must not hold one already)."""
    out = out.absolute()
    check_machine(spec)
    spec_text = stored_spec_text(spec_text)  # the parsed spec keeps the real conninfos
    check_out(out)
    store = Store(out, create=True)
    try:
        seed = spec.run.seed if spec.run.seed is not None else secrets.randbelow(2**31)
        machine = machine_metadata()
        if spec.topology.hosts:
            machine["hosts"] = host_facts(spec)
        run_id = store.create_run(spec.name, spec_text, machine, __version__,
                                  seed=seed, order_mode=spec.run.order)
        try:
            (out / "spec.toml").write_text(spec_text)
            (out / "spec-dir").write_text(str(spec_dir) + "\n")
        except OSError as exc:
            problem = store.unwritable(exc)
            if problem is None:
                raise
            raise problem from None
        Runner(store, spec, spec_text, spec_dir, run_id, events).execute()
    finally:
        store.close()
    return out


def _with_masked_passwords_dropped(spec: Spec) -> Spec:
    """A stored spec's attach conninfos hold ``password=***``: resumed, they connect
    without it, and libpq takes the password from PGPASSWORD or ~/.pgpass."""
    attach = spec.topology.attach
    if attach is None:
        return spec
    attach = attach.model_copy(update={
        "primary": without_masked_password(attach.primary),
        "standbys": {k: without_masked_password(v) for k, v in attach.standbys.items()}})
    return spec.model_copy(update={"topology": spec.topology.model_copy(
        update={"attach": attach})})


def resume_run(out: Path, events: Events | None = None, *, allow_alter: bool = False,
               budget: str | None = None) -> Path:
    out = out.absolute()
    store = Store(out, create=False)
    try:
        run = store.run()
        if run.status == "done":
            events = events or Events()
            events.message(f"{out}: the run is complete; nothing to resume")
            return out
        spec = _with_masked_passwords_dropped(parse_spec(run.spec_toml, f"{out}/spec.toml",
                                                         allow_alter=allow_alter))
        if budget is not None:  # this invocation's, not stored
            spec = spec.model_copy(update={"run": spec.run.model_copy(
                update={"budget": budget})})
        spec_dir_file = out / "spec-dir"
        spec_dir = Path(spec_dir_file.read_text().strip()) if spec_dir_file.exists() else out
        Runner(store, spec, run.spec_toml, spec_dir, run.id, events).execute()
    finally:
        store.close()
    return out
