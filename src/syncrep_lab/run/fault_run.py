"""A fault scenario during one repeat, as a recorder of it (probes/recorder.py).

Started first and stopped last of the repeat's recorders: it counts the insert table's
rows and sets the cell's ``synchronous_commit`` before anything else starts, its driver
fires the scenario's events counted from the moment the client started, and only after
every probe has stopped does it put each standby and setting back as the cell had them
(so no probe measures the restore), then count the rows on every node against what the
client was told was committed.
"""

from __future__ import annotations

import time

from syncrep_lab import shutdown
from syncrep_lab.cluster.ready import wait_replication
from syncrep_lab.errors import UserError
from syncrep_lab.pg import sync_names
from syncrep_lab.pg.sync_names import check_sync
from syncrep_lab.plan.spec import FaultScenario
from syncrep_lab.probes.recorder import Client, Ending
from syncrep_lab.run import faults
from syncrep_lab.run.clusters import ActiveCluster
from syncrep_lab.store import DurabilityRow, FaultEventRow, ProbeRows

STALL_FIX = ("give the scenario a standby that stays up, or 'for' to bring one back, or "
             "a lower synchronous_commit; this is what an application would have seen")


class FaultRun:
    """One repeat's faults: the driver beside the client, then the cluster put back as
    the cell had it, and the rows counted on every node."""

    def __init__(self, scenario: FaultScenario, ctx: faults.FaultContext,
                 count_rows: bool, cluster: ActiveCluster, timeout: float,
                 client: Client) -> None:
        self.scenario, self.ctx, self.count_rows = scenario, ctx, count_rows
        self.cluster = cluster
        self.timeout = timeout
        self.standbys = faults.Standbys(ctx)
        self.driver = faults.FaultDriver(scenario, ctx, self.standbys)
        self.driver.client_started = client.started
        self.before: int | None = None
        self.restored: list[str] = []
        self.finished = False

    def start(self) -> None:
        self.before = faults.count_rows(self.ctx.admin) if self.count_rows else None
        if faults.sets_synchronous_commit(self.scenario):
            faults.set_on_primary(self.ctx.admin, "synchronous_commit",
                                  self.ctx.synchronous_commit)
        self.driver.start()

    def stop(self, ending: Ending) -> ProbeRows:
        """The repeat's ``fault_events`` on its timeline and, when rows were counted
        before it, its ``durability`` rows (every node counted now). A scenario that left
        no standby to confirm commits fails the repeat, as the application would have."""
        self._finish()
        if self.driver.stalled:
            raise UserError(self.driver.stalled, STALL_FIX)
        shift = ending.timeline.shift(self.driver.t0)
        rows = ProbeRows(fault_events=[
            FaultEventRow(round(r.t_s + shift, 3), r.kind, r.node, r.detail)
            for r in self.driver.records])
        rows.fault_events += [FaultEventRow(round(self.driver.now() + shift, 3), "restore",
                                            "-", what) for what in self.restored]
        if self.before is not None:
            rows.durability = [
                DurabilityRow(d.node, d.rows, d.expected, int(d.ok), d.detail)
                for d in faults.check_durability(self.ctx, self.before,
                                                 ending.acknowledged_rows(), self.timeout)]
        return rows

    def abort(self) -> None:
        self._finish()

    def stall_error(self) -> UserError | None:
        """Why the client failed, when it was the scenario that left no standby."""
        return UserError(self.driver.stalled, STALL_FIX) if self.driver.stalled else None

    def _finish(self) -> None:
        """Stop the driver and put every standby and setting back (also after an
        error: the next repeat, or the teardown, needs them running); once."""
        if self.finished:
            return
        self.finished = True
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
