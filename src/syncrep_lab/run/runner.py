"""Running a plan: cells measured, every repeat stored as it ends.

The cells run in interleaved rounds (``run.order = "interleaved"``, the default:
one repeat of every cell still needed per round, in a shuffled order,
run/rounds.py), over units of clusters held up at once
(run/clusters.py), or one cell after another (``blocked``). Before a cell's
first repeat on a cluster: ``synchronous_standby_names`` by reload when the cell
asks for another, the workload's tables, a warm-up that is not counted. Each
repeat is run/repeat.py: from the same state (run/reset.py), its
recorders around its client, its figures built by run/repeat_record.py. A
cell that fails is recorded with its error and the run goes on with a fresh
cluster. The tool's own cost per
repeat is a few SQLite rows and a log parse after pgbench has exited, so nothing
of it overlaps the measurement. What is checked before anything starts is in
plan/checks.py.
"""

from __future__ import annotations

import contextlib
import json
import math
import secrets
import sqlite3
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syncrep_lab import __version__, shutdown
from syncrep_lab.errors import Interrupted, UserError
from syncrep_lab.guests.qemu import Guest
from syncrep_lab.hosts.ssh import kept_connections
from syncrep_lab.pg.builds import unfit_note
from syncrep_lab.pg.conninfo import (
    mask_toml,
    without_masked_password,
)
from syncrep_lab.placement.cpus import machine_cpus
from syncrep_lab.plan.baselines import baselines
from syncrep_lab.plan.duet import NotPaired, duet_pairs
from syncrep_lab.plan.load import load_spec
from syncrep_lab.plan.matrix import (
    Cell,
    expand,
)
from syncrep_lab.plan.spec import Spec
from syncrep_lab.run import duet as duet_mod
from syncrep_lab.run import faults, guests, repeat_record, sysbench
from syncrep_lab.run.attached import APP_PREFIX, Visit
from syncrep_lab.run.clients import ClientOptions, finish_all, start_clients
from syncrep_lab.run.clusters import (
    ActiveCluster,
    ClusterPool,
    DuetUnit,
    PoolPlan,
    duet_units,
    pool_key,
    units,
)
from syncrep_lab.run.context import Events, RunContext
from syncrep_lab.run.host_watch import host_facts
from syncrep_lab.run.machine import machine_metadata
from syncrep_lab.run.preflight import (
    check_installations,
    check_machine,
    check_out,
    make_builds,
    without_unlinkable,
)
from syncrep_lab.run.repeat import CellRun, Repeat, anatomy_unavailable
from syncrep_lab.run.rounds import Member, Rounds
from syncrep_lab.run.target import Target
from syncrep_lab.run.workload import (
    ATTACHED_TABLES,
    SEED_TABLES,
    prepare_tables,
    script_text,
)
from syncrep_lab.stats.histogram import LatencyHistogram
from syncrep_lab.stats.intervals import mean_ci, rate_ci, stein_rounds, trend
from syncrep_lab.stats.pairing import by_round, rows_per_second
from syncrep_lab.store import (
    ANATOMY,
    MEASURED,
    PROBED,
    Store,
    StoredCell,
    StoredRepeat,
    cluster_key_text,
    mark_run,
    now,
    with_defaults,
)

# What the budget keeps for the command's end after the last repeat: the results, the
# verdicts and the report (2 s for two cells with every probe here).
FINISH_SECONDS = 8.0
# A probed repeat's wall time beyond a measured one's in the rounds (its probes' start and
# stop, the flame graphs folded: 2.6 to 4.5 s here with every probe on, the commit
# anatomy's 1.2 to 2.1 s), until one of this run has been timed.
PROBE_EXTRA_SECONDS = 3.0


class Runner:
    def __init__(self, store: Store, spec: Spec, spec_text: str, spec_dir: Path,
                 run_id: int, events: Events | None = None, *,
                 started: float | None = None) -> None:
        """``started``: when the command began (time.monotonic()), from which its budget
        runs; now when not given."""
        self.store = store
        self.spec = spec
        # The budget bounds the command, from its start to its report: the rounds get
        # what the clusters, the probed repeats and the end leave of it.
        budget = spec.run.budget_seconds
        self.deadline = (None if budget is None else
                         (time.monotonic() if started is None else started)
                         + budget - FINISH_SECONDS)
        self._probed_walls: list[float] = []  # each probed repeat's wall seconds, this run
        self.spec_text = spec_text
        self.spec_dir = spec_dir
        self.run_id = run_id
        self.events = events or Events()
        token = secrets.token_hex(4)
        attach = spec.topology.attach
        # what the run's clusters and repeats read of it (run/context.py)
        self.ctx = RunContext(
            store, spec, run_id, self.events, f"{APP_PREFIX} {token}",
            Visit(attach, store.folder, token=token) if attach is not None else None,
            ATTACHED_TABLES if attach is not None else SEED_TABLES)
        self.pool = ClusterPool(self.ctx)
        run = store.run(run_id)
        # a run stored before rounds existed resumes as it began: one cell after another
        self.order = str(run.order_mode or "blocked")
        self.seed = int(run.seed or 0)
        self._tables_made: set[int] = set()  # the cluster generations they were made in

    @property
    def cluster(self) -> ActiveCluster:
        """The cluster the current cell runs on."""
        return self.pool.current

    def execute(self) -> None:
        # one SSH connection per host for the whole run (hosts/ssh.kept_connections)
        with kept_connections():
            self._execute()

    def _execute(self) -> None:
        plan = without_unlinkable(self.spec,
                                  expand(self.spec, machine_metadata()["cpus_usable"] or 2))
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
                for left, cell in zip(range(len(todo), 0, -1), todo, strict=True):
                    self._run_cell(cell, rows[cell.key].id, self._ends(1, left))
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

    def _ends(self, cells: int, left: int) -> float | None:
        """When ``cells`` of the ``left`` cells still to run must be done with: their
        share of what is left of the budget, from now."""
        if self.deadline is None:
            return None
        now_s = time.monotonic()
        return now_s + max(0.0, self.deadline - now_s) * cells / left

    def _probed_left(self, run: CellRun) -> int:
        """The probed repeats (the commit anatomy's too, where asked for) a cell has still
        to run."""
        probes = self.spec.probes
        if probes.probed_repeats <= 0:
            return 0
        stored = [r.probed for r in self.store.repeats(run.cell_id)]
        left = max(0, probes.probed_repeats - stored.count(PROBED))
        if probes.anatomy:
            left += max(0, probes.anatomy_repeats - stored.count(ANATOMY))
        return left

    def _no_time_for(self, step_s: float, runs: Iterable[CellRun], ends: float | None
                     ) -> bool:
        """Whether one more step of ``step_s`` seconds (a round, a repeat) would leave too
        little before ``ends`` for the probed repeats of ``runs``: as long as those of
        this run took, else a measured repeat's time and PROBE_EXTRA_SECONDS each."""
        if ends is None:
            return False
        runs = list(runs)
        per = (statistics.fmean(self._probed_walls) if self._probed_walls else
               step_s / max(1, len(runs)) + PROBE_EXTRA_SECONDS)
        closing = per * sum(self._probed_left(r) for r in runs)
        return time.monotonic() + step_s + closing > ends

    def _run_cell(self, cell: Cell, cell_id: int, ends: float | None = None) -> None:
        self.events.cell_start(cell)
        self.store.update_cell(cell_id, status="running", started_at=now(), error=None)
        try:
            summary = self._measure(cell, cell_id, ends)
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

    def _measure(self, cell: Cell, cell_id: int, ends: float | None) -> dict[str, Any]:
        run = self._cell_run(cell, cell_id)
        self._enter(run, fresh_tables=True)
        tps = [float(r.tps) for r in self.store.repeats(cell_id) if not r.probed]
        ctl = self.spec.run
        spent, walls = False, list[float]()
        while len(tps) < ctl.repeats_max and not self._enough(tps):
            # as in rounds: never below 2 repeats
            if len(tps) >= 2 and walls and self._no_time_for(
                    statistics.fmean(walls), [run], ends):
                spent = True
                break
            self.events.phase(cell, f"repeat {len(tps) + 1}")
            began = time.monotonic()
            tps.append(self._measured(run, None, None))
            walls.append(time.monotonic() - began)
            self.events.repeat(cell, len(tps), tps[-1])
        self._probed(run)
        reason = "ci" if self._enough(tps) else "budget" if spent else "max"
        return self._summarise(run, tps, reason)

    def _enough(self, tps: list[float]) -> bool:
        """Stein's rule on the cell's own log TPS (see run/rounds.py)."""
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
        """The cells in units of clusters held up together (run/clusters.py), each
        unit in rounds; the run's budget shared among the units by their cells. A duet
        runs units of pairs instead (``_run_duet``)."""
        groups = _by_cluster(todo)
        plan = units(self.spec, groups, self.order)
        if self.order == "duet" and self._run_duet(plan, todo, every, rows):
            return
        if plan.said:
            self.events.message(plan.said)
            if self.store.run(self.run_id).order_note is None:  # resumed: as it began
                self.store.set_order_note(self.run_id, plan.said)
        left = len(todo)
        # the plan's clusters in order (done ones included: the numbering must not move
        # on resume)
        keys = list(dict.fromkeys(c.cluster_key for c in every))
        for unit in plan.units:
            cells = unit.cells
            ends = self._ends(len(cells), left)
            self.pool.keep = {g[0].cluster_key for g in unit.groups}
            # the rounds of each unit are numbered apart (from ROUND_SPAN times the place
            # of its first cluster in the plan, + 1), so that no analysis pairs repeats
            # of two units that ran at other times
            first = min(keys.index(g[0].cluster_key) for g in unit.groups)
            self._run_group(cells, {c.key: rows[c.key].id for c in cells}, ends,
                            base=first * ROUND_SPAN)
            left -= len(cells)
        self.pool.keep = set()

    def _run_duet(self, plan: PoolPlan, todo: list[Cell], every: list[Cell],
                  rows: dict[str, StoredCell]) -> bool:
        """A duet's rounds, unit by unit of pairs whose clusters fit in memory together
        (run/clusters.py ``duet_units``; one unit where they all fit), the run's budget
        shared among the units by their pairs; False where the machine cannot run it:
        the run is then interleaved, and says why (the store's order_mode too).

        A cell in the pairs of two units (the seed's group 1 on: beside local, and the
        baseline of the link's cell, whose clusters are not held with the twins) belongs
        to the unit of its own pair (a baseline of nothing: its first unit), which
        stores its status and summary; in the other it is a guest, measured only beside
        the cells it is the baseline of. A unit whose cells are all done (a resumed
        run) is passed over."""
        cpus = machine_cpus()
        why = duet_mod.cannot(cpus)
        split = duet_mod.sides(cpus)
        pairs = duet_pairs(self.spec, every)
        made: list[DuetUnit] = []
        said = None
        if why is None:
            try:
                made, said = duet_units(self.spec, pairs)
            except NotPaired as exc:
                why = f"{exc}: the cells are interleaved instead"
        if why is not None or split is None:
            text = why or ""
            self.events.message(text)
            self.order = "interleaved"
            self.store.set_order_mode(self.run_id, "interleaved")
            self.store.set_order_note(self.run_id, f"{text}; {plan.said}" if plan.said
                                      else text)
            return False
        note = duet_mod.what_it_is(self.spec, every[0], split)
        if said:
            note = f"{note}; {said}"
        self.events.message(note)
        if self.store.run(self.run_id).order_note is None:  # resumed: as it began
            self.store.set_order_note(self.run_id, note)
        by_index = {c.index: c for c in every}
        owner: dict[int, int] = {}
        for k, unit in enumerate(made):  # a cell's own pair's unit, else its first
            for _, pair in unit.pairs:
                owner[pair.cell.index] = k
        for k, unit in enumerate(made):
            for _, pair in unit.pairs:
                owner.setdefault(pair.base.index, k)
        waiting = {c.index for c in todo}
        cells_of = [sorted({i for _, p in u.pairs for i in p.indices}) for u in made]
        due = [k for k, mine in enumerate(cells_of)  # else every cell it owns is done
               if any(owner[i] == k and i in waiting for i in mine)]
        left = sum(len(made[k].pairs) for k in due)
        for k in due:
            unit, mine = made[k], cells_of[k]
            cells = [by_index[i] for i in mine]
            ends = self._ends(len(unit.pairs), max(left, 1))
            self.pool.keep = set(unit.keys)
            self._run_group(cells, {c.key: rows[c.key].id for c in cells}, ends,
                            base=k * ROUND_SPAN, duet=DuetPlan(split, [
                                DuetPair(n, p.base.index, p.cell.index, p.twin)
                                for n, p in unit.pairs]),
                            guests={i for i in mine if owner[i] != k})
            left -= len(unit.pairs)
        self.pool.keep = set()
        return True

    def _run_group(self, cells: list[Cell], ids: dict[str, int], ends: float | None,
                   base: int = 0, duet: DuetPlan | None = None,
                   guests: frozenset[int] | set[int] = frozenset()) -> None:
        """Round after round, one repeat of every cell still needed, in an order shuffled
        per round (run/rounds.py), or in a duet each pair at once (``_duet_round``);
        then the probed repeats, cell by cell. No round starts that would leave too
        little before ``ends`` for the probed repeats. ``guests``: a duet's cells that
        another unit owns (``_run_duet``): measured here beside their cells only, their
        status, probed repeats and summary left to their own unit."""
        by_index = {c.index: c for c in cells}
        runs = {c.index: self._cell_run(c, ids[c.key]) for c in cells}
        base_of = baselines([(c.index, with_defaults(c.params())) for c in cells],
                            self.spec.compare.rules(self.spec.matrix))
        ctl = self.spec.run
        partner_of = duet.partners() if duet is not None else {}
        numbers = {p.number for p in duet.pairs} if duet is not None else None
        rounds = Rounds([Member(c.index, c.label, base_of[c.index],
                                self._own(ids, c, partner_of.get(c.index), numbers),
                                partner=self._beside(by_index, ids, c, partner_of))
                         for c in cells], seed=self.seed,
                        group=" + ".join(dict.fromkeys(cluster_key_text(c.params())
                                                       for c in cells)),
                        base=_stored_base(self.store, ids.values(), base, numbers),
                        repeats_min=ctl.repeats_min, repeats_max=ctl.repeats_max,
                        ci_target=ctl.ci_target, confidence=ctl.confidence,
                        crossover=duet is not None)
        for cell in cells:
            if cell.index not in guests:
                self.store.update_cell(ids[cell.key], status="running", started_at=now(),
                                       error=None)
        started, spent, ran = time.monotonic(), False, 0
        try:
            per = rounds.per_step  # a duet's rounds go by crossover units, two at a time
            while (step := rounds.next_round()) is not None:
                # the budget never cuts a cluster below 2 rounds (a duet's: 2 units): the
                # fewest that give an interval at all; a duet's unit is started only
                # with the time for both its rounds, and its second round always runs
                k = step[0] - rounds.base
                if k > 2 * per and (k - 1) % per == 0 and ran and self._no_time_for(
                        per * (time.monotonic() - started) / ran,
                        [runs[i] for i, m in rounds.members.items() if not m.failed], ends):
                    spent = True
                    self.events.message(f"the budget ({ctl.budget}) leaves no time for "
                                        "another round and the probed repeats")
                    break
                round_no, order = step
                if duet is not None:
                    order = self._duet_round(rounds, runs, round_no, order, duet)
                for position, idx in enumerate(order):
                    self._alone(rounds, runs[idx], round_no, position)
                ran += 1
                self._say_round(rounds, round_no - rounds.base,
                                (time.monotonic() - started) / ran)
            if duet is not None:  # the probed repeats one at a time, on every CPU
                for cluster in self.pool.held.values():
                    cluster.confine(machine_cpus())
            for idx in sorted(by_index):
                member, run = rounds.members[idx], runs[idx]
                if member.failed or idx in guests:
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
                    if idx not in guests and not rounds.members[idx].failed and self.store.cell(
                            run.cell_id).status == "running":
                        self.store.update_cell(run.cell_id, status="pending")
            raise

    def _own(self, ids: dict[str, int], cell: Cell, partner: tuple[int, int] | None,
             numbers: set[int] | None) -> dict[int, float]:
        """A cell's stored values by round; in a duet, those of the unit's pairs
        (``numbers``), and of its own pair where it is also the baseline of others (the
        seed's on: beside local, and the baseline of batch 10 and of the link)."""
        repeats = self.store.repeats(ids[cell.key])
        if numbers is not None:
            repeats = [r for r in repeats if r.pair in numbers]
        if partner is not None:
            repeats = [r for r in repeats if r.pair == partner[1]]
        return by_round(repeats, cell.params())

    def _beside(self, by_index: dict[int, Cell], ids: dict[str, int], cell: Cell,
                partner_of: dict[int, tuple[int, int]]) -> dict[int, float]:
        """A duet cell's baseline values beside it (round -> rows/s), from the stored
        repeats of its pair: what a resumed run's stop rule pairs it with."""
        if cell.index not in partner_of or partner_of[cell.index][0] not in by_index:
            return {}
        base_index, number = partner_of[cell.index]
        base = by_index[base_index]
        return by_round([r for r in self.store.repeats(ids[base.key]) if r.pair == number],
                        base.params())

    def _alone(self, rounds: Rounds, run: CellRun, round_no: int, position: int) -> None:
        """One repeat of the round, the cell alone on its cluster."""
        member = rounds.members[run.cell.index]
        if member.failed:
            return
        self.events.cell_start(run.cell)
        self.events.phase(run.cell, f"round {round_no - rounds.base}")
        try:
            tps = self._measured(run, round_no, position)
        except Exception as exc:
            self._cell_failed(run.cell, run.cell_id, exc)
            member.failed = True
            return
        member.values[round_no] = rows_per_second(tps, run.cell.params())
        self.events.repeat(run.cell, len(member.values), tps)

    def _duet_round(self, rounds: Rounds, runs: dict[int, CellRun], round_no: int,
                    order: list[int], duet: DuetPlan) -> list[int]:
        """The round's pairs, each at once (run/duet.py), in a shuffled order; the cells
        of the round left to run alone (a cell whose partner failed), in its order."""
        wanted, left = set(order), set(order)
        for j in duet_mod.pair_order(self.seed, rounds.group, round_no, len(duet.pairs)):
            pair = duet.pairs[j]
            base, cell = pair.base, pair.cell
            # a pair runs while its cell is wanted; a baseline shared by several cells
            # (the seed's local) runs once beside each of them
            if cell not in wanted or rounds.members[base].failed \
                    or rounds.members[cell].failed:
                continue
            left -= {base, cell}
            first = duet_mod.baseline_first(self.seed, rounds.group, round_no, pair.number)
            sides = [(base, True), (cell, False)] if first else [(cell, False), (base, True)]
            repeats = []
            for position, (idx, is_base) in enumerate(sides):
                run, cpus = runs[idx], duet.split.of(round_no, is_base)
                twin = pair.twin and not is_base
                self.pool.confined[pool_key(run.cell, twin)] = cpus
                self.events.cell_start(run.cell)
                self.events.phase(run.cell, f"round {round_no - rounds.base}, duet")
                try:
                    self._enter(run, twin=twin)
                    self.cluster.confine(cpus)
                except Exception as exc:
                    self._cell_failed(run.cell, run.cell_id, exc)
                    rounds.members[idx].failed = True
                    break
                run.n += 1  # a number left unused where the pair does not run
                repeat = Repeat(self.ctx, self.cluster, run, kind=MEASURED,
                                round_no=round_no, position=position)
                repeat.duet = duet_mod.stored(pair.number, cpus)
                repeats.append(repeat)
            if len(repeats) < 2:
                continue
            for mine, other in ((repeats[0], repeats[1]), (repeats[1], repeats[0])):
                mine.also_ours = [n.data_dir for t in other.targets for n in t.nodes
                                  if n.data_dir]
            try:
                tps = duet_mod.run_pair(repeats[0], repeats[1])
            except duet_mod.SideFailed as failed:
                hit = repeats[failed.side]
                self.pool.current = hit.cluster  # the one taken down
                self._cell_failed(hit.cell, hit.run.cell_id, failed.error)
                rounds.members[hit.cell.index].failed = True
                continue
            values = {r.cell.index: rows_per_second(v, r.cell.params())
                      for r, v in zip(repeats, tps, strict=True)}
            for repeat, value in zip(repeats, tps, strict=True):
                member = rounds.members[repeat.cell.index]
                if repeat.cell.index == cell:  # its own pair's value is its round's
                    member.values[round_no] = values[cell]
                else:  # a baseline's first of the round, where it is in several pairs
                    member.values.setdefault(round_no, values[base])
                self.events.repeat(repeat.cell, len(member.values), value)
            rounds.members[cell].partner[round_no] = values[base]
        return [i for i in order if i in left]

    def _say_round(self, rounds: Rounds, round_no: int, per_round: float) -> None:
        """The widest interval now, and how many more rounds the comparisons need."""
        line = rounds.progress_line(round_no, per_round)
        if line is not None:
            self.events.message(line)

    # --- shared by both orders -----------------------------------------------------------

    def _cell_run(self, cell: Cell, cell_id: int) -> CellRun:
        cell_dir = self.store.artifacts / f"cell-{cell.index:03d}"
        cell_dir.mkdir(parents=True, exist_ok=True)
        if cell.driver == "sysbench":
            script = cell_dir / "workload.lua"
            script.write_text(sysbench.script_text(self.spec.workload, cell.batch,
                                                   self.ctx.tables))
        else:
            script = cell_dir / "workload.sql"
            script.write_text(script_text(self.spec.workload, cell.batch, self.spec_dir,
                                          self.ctx.tables))
        # A session's own synchronous_commit (PGOPTIONS) outranks a reload, so a
        # scenario that reloads it mid-cell sets the cell's level in the server instead.
        scenario = self.spec.faults.get(cell.faults)
        session_sc = (None if scenario is not None and faults.sets_synchronous_commit(scenario)
                      else cell.synchronous_commit)
        options = ClientOptions(cell.driver, cell.clients, cell.threads, session_sc)
        return CellRun(cell, cell_id, cell_dir, script, options,
                       n=len(self.store.repeats(cell_id)))

    def _enter(self, run: CellRun, *, fresh_tables: bool = False, twin: bool = False
               ) -> Target:
        """The cell's cluster (a duet's twin of it with ``twin``) up, its sync level in
        force, its tables there and its warm-up done (once per cluster it runs on)."""
        cell = run.cell
        target = self.pool.for_cell(cell, twin)
        self.cluster.set_sync(cell)
        if fresh_tables or self.cluster.generation not in self._tables_made:
            self.events.phase(cell, "prepare")
            for each in self.cluster.targets or [target]:
                prepare_tables(each.admin, self.spec.workload, self.ctx.tables)
            self._tables_made.add(self.cluster.generation)
        if run.options.synchronous_commit is None:
            faults.set_on_primary(target.admin, "synchronous_commit", cell.synchronous_commit)
        if self.cluster.generation not in run.warmed_in:
            self.cluster.require_acknowledging(cell)
            if self.spec.workload.warmup > 0:
                self.events.phase(cell, "warm-up")
                finish_all(start_clients(
                    self.cluster.targets or [target], run.options, target.pgbench, run.script,
                    None, self.spec.workload.warmup, live=lambda s: self.events.live(cell, s),
                    stall_watch=self.ctx.stall_watch(cell)))
            run.warmed_in.add(self.cluster.generation)
        return target

    def _measured(self, run: CellRun, round_no: int | None, position: int | None) -> float:
        self._enter(run)
        run.n += 1
        return Repeat(self.ctx, self.cluster, run, kind=MEASURED, round_no=round_no,
                      position=position).measure()

    def _probed(self, run: CellRun) -> None:
        """Probes cost throughput on a small machine (perf counting every traced system
        call, samplers polling every node), so the figures are measured without them and
        the probes get repeats of their own, kept apart."""
        stored = [r.probed for r in self.store.repeats(run.cell_id)]
        probed = stored.count(PROBED)
        while probed < self.spec.probes.probed_repeats:
            began = time.monotonic()
            self._enter(run)
            probed += 1
            run.n += 1
            self.events.phase(run.cell, f"probed repeat {probed}")
            Repeat(self.ctx, self.cluster, run, kind=PROBED).measure()
            self._probed_walls.append(time.monotonic() - began)
        # The commit anatomy's traps cost a quarter of the throughput where the kernel
        # steps them out of line (docs/decisions.md): a repeat of its own, so no other
        # probe's figure carries them. Where it cannot run, the probed repeat said why.
        # anatomy_repeats of them (1 by default): from 2 its figures' ratios get an
        # interval over repeats (docs/decisions.md, "Ratios of the commit anatomy").
        target = self.cluster.target
        wanted = self.spec.probes.anatomy_repeats
        anatomies = stored.count(ANATOMY)
        if (self.spec.probes.anatomy and self.spec.probes.probed_repeats > 0
                and anatomies < wanted and target is not None
                and anatomy_unavailable(self.cluster.targets or [target]) is None):
            while anatomies < wanted:
                began = time.monotonic()
                self._enter(run)
                anatomies += 1
                run.n += 1
                self.events.phase(run.cell, "commit anatomy" if wanted == 1
                                  else f"commit anatomy {anatomies}")
                Repeat(self.ctx, self.cluster, run, kind=ANATOMY).measure()
                self._probed_walls.append(time.monotonic() - began)

    def _summarise(self, run: CellRun, tps: list[float], stop_reason: str,
                   more_notes: list[str] | None = None) -> dict[str, Any]:
        cell_id = run.cell_id
        repeats = [r for r in self.store.repeats(cell_id) if not r.probed]
        merged = LatencyHistogram()
        for r in repeats:
            merged = merged + LatencyHistogram.from_bytes(r.histogram)
        ctl = self.spec.run
        ci = rate_ci(tps, ctl.confidence)
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


ROUND_SPAN = 10_000  # round numbers per unit (repeats_max is at most 1000)


@dataclass(frozen=True)
class DuetPair:
    """A pair as the rounds run it: its number (stored with its repeats), the
    baseline's index, the other cell's, and whether that cell runs on a twin."""

    number: int
    base: int
    cell: int
    twin: bool


@dataclass(frozen=True)
class DuetPlan:
    """A duet's CPU sets and its pairs."""

    split: duet_mod.Sides
    pairs: list[DuetPair]

    def partners(self) -> dict[int, tuple[int, int]]:
        """cell index -> (its baseline's index, its pair's number)."""
        return {p.cell: (p.base, p.number) for p in self.pairs}


def _stored_base(store: Store, cell_ids: Any, planned: int,
                 pairs: set[int] | None = None) -> int:
    """The round base a unit's stored rounds have (a resumed run keeps its numbering,
    even where the memory free then cut a duet into other units), else the planned
    one. A duet's unit: the rounds of its ``pairs`` alone (a guest has rounds of
    another unit stored)."""
    stored = [int(r.round) for i in cell_ids for r in store.repeats(i)
              if r.round is not None and (pairs is None or r.pair in pairs)]
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
              events: Events | None = None, *, machine_checked: bool = False,
              started: float | None = None) -> Path:
    """A new run in ``out`` (which must not hold one already).

    The machine (and every SSH host and attached server the spec names) is checked here
    unless the caller did it already and says so with ``machine_checked``: the command
    line does, before its display starts, and checking twice would reach every host and
    the attached primary twice."""
    out = out.absolute()
    if not machine_checked:
        check_machine(spec)
    spec_text = stored_spec_text(spec_text)  # the parsed spec keeps the real conninfos
    check_out(out)
    started = _with_builds(spec, spec_dir, events, started)
    say = events.message if events is not None else (lambda _: None)
    with guests.booted(spec, say) as (spec, booted):
        _start_store(spec, spec_text, spec_dir, out, events, started, booted)
    return out


def _start_store(spec: Spec, spec_text: str, spec_dir: Path, out: Path,
                 events: Events | None, started: float | None,
                 booted: list[Guest]) -> None:
    store = Store(out, create=True)
    try:
        seed = spec.run.seed if spec.run.seed is not None else secrets.randbelow(2**31)
        machine = machine_metadata()
        if booted:
            machine["guests"] = guests.facts(booted)
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
        Runner(store, spec, spec_text, spec_dir, run_id, events, started=started).execute()
    finally:
        store.close()


def _with_builds(spec: Spec, spec_dir: Path, events: Events | None,
                 started: float | None, *, resuming: bool = False) -> float | None:
    """The spec's [builds] made (or found in the cache) and its installations checked;
    ``started`` moved past the time building took: the budget is the measuring's."""
    if not spec.builds:
        return started
    say = events.message if events is not None else (lambda _: None)
    spent = make_builds(spec, spec_dir, say, resuming=resuming)
    check_installations(spec)
    return None if started is None else started + spent


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
               budget: str | None = None, started: float | None = None) -> Path:
    out = out.absolute()
    store = Store(out, create=False)
    try:
        run = store.run()
        if run.status == "done":
            events = events or Events()
            events.message(f"{out}: the run is complete; nothing to resume")
            return out
        spec = _with_masked_passwords_dropped(load_spec(run.spec_toml, f"{out}/spec.toml",
                                                        allow_alter=allow_alter))
        if budget is not None:  # this invocation's, not stored
            spec = spec.model_copy(update={"run": spec.run.model_copy(
                update={"budget": budget})})
        spec_dir_file = out / "spec-dir"
        spec_dir = Path(spec_dir_file.read_text().strip()) if spec_dir_file.exists() else out
        started = _with_builds(spec, spec_dir, events, started, resuming=True)
        say = events.message if events is not None else (lambda _: None)
        with guests.booted(spec, say) as (spec, _):
            Runner(store, spec, run.spec_toml, spec_dir, run.id, events,
                   started=started).execute()
    finally:
        store.close()
    return out
