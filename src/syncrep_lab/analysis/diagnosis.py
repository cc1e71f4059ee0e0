"""Diagnosis: rules over a cell's per-commit costs and wait events that name the
limiting mechanism, the numbers it rests on, and what to try next.

Every verdict carries its confidence (high, medium, low) and its evidence as
numbers; a rule whose evidence is missing (a probe skipped here) says so
instead of guessing. The thresholds are deliberately plain and written next
to each rule, so a reader can check a verdict by hand against ``costs``.
The figures the thresholds read carry their intervals (analysis/evidence.py): a
rule fires where its evidence's interval reaches the threshold, its confidence is a
range where the interval spans one, and verdicts rank on the highest level they
reach, so noise near a threshold makes a range or a tie, not a different verdict.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syncrep_lab.analysis import model
from syncrep_lab.analysis.anatomy import (
    Anatomy,
    growth_sentence,
    share_of_commit,
    standby_sentence,
)
from syncrep_lab.analysis.costs import RoleCosts, cell_costs, cluster_version
from syncrep_lab.analysis.evidence import (
    Figure,
    Reach,
    RepeatWaits,
    busy_spread,
    graded,
    share_figure,
    wait_samples,
)
from syncrep_lab.analysis.kernel import RoleKernel, function_text
from syncrep_lab.analysis.observe import observed_cells
from syncrep_lab.analysis.resources import LinkDelivered, link_deliveries
from syncrep_lab.analysis.sync_walsender import choose, stored_clues, sync_shown
from syncrep_lab.analysis.verdict import (
    LAG_OF_LEVEL,
    SYNC_EVENTS,
    WRITE_EVENTS,
    CellDiagnosis,
    Verdict,
)
from syncrep_lab.errors import UserError
from syncrep_lab.pg.replication import WAITING_LEVELS
from syncrep_lab.store import HostRepeatRow, Store, StoredCell, queries

SINGLE_PROCESS_ROLES = ("walwriter", "startup", "walreceiver", "checkpointer", "bgwriter")


@dataclass
class CellFacts:
    """What the rules read, gathered once per cell."""

    label: str
    tps: float
    clients: int
    synchronous_commit: str
    cpus: int
    roles: dict[tuple[str, str], RoleCosts]
    waits: dict[tuple[str, str], dict[str, float]]
    perf_missing: str | None
    version: str = ""  # the primary's server version, "" when unknown
    # (waker node, waker role, wakee node, wakee role) -> wake-ups per commit
    wakeups: dict[tuple[str, str, str, str], float] = field(default_factory=dict)
    # (node, role) -> {frame: share of the role's on-CPU time, inclusive}
    frames: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    replication: list[queries.ReplicationSummary] = field(default_factory=list)
    latency_ms: float | None = None
    # the bottleneck model's bounds, lowest first (analysis/model.py), when it has them
    bounds: list[model.Bound] = field(default_factory=list)
    # its wait bounds (Little's law, the serial release), where the cell has an anatomy
    wait_bounds: list[model.WaitBound] = field(default_factory=list)
    # SSH host -> what runs there, the CPUs it kept busy on average, its CPUs
    hosts: dict[str, tuple[str, float, int]] = field(default_factory=dict)
    anatomy: Anatomy | None = None  # where a commit's time goes (analysis/anatomy.py)
    # the sampled repeats' wait samples, for the shares' intervals (analysis/evidence.py)
    wait_repeats: dict[tuple[str, str], list[RepeatWaits]] = field(default_factory=dict)
    # the relative half width of the busy CPUs over the measured repeats
    busy_spread: float | None = None
    # the walsender the commits wait for (analysis/sync_walsender.py), None where none
    sync_walsender: str | None = None
    # the CPU quotas the cell's placement held roles to (placement/quota.py)
    quotas: list[queries.QuotaMeans] = field(default_factory=list)
    # the disks and network interfaces over the measured repeats (run/io_watch.py)
    disks: list[queries.DiskMeans] = field(default_factory=list)
    network: list[queries.NetMeans] = field(default_factory=list)
    # each role's kernel share of its on-CPU samples (analysis/kernel.py)
    kernel: list[RoleKernel] = field(default_factory=list)
    # the emulated links' rates: (a, b) -> bits a second, where the link has one
    link_rates: dict[tuple[str, str], int] = field(default_factory=dict)
    # what each emulated link's delay line delivered (analysis/resources.py)
    link_delays: list[LinkDelivered] = field(default_factory=list)
    # the primary's interface to each peer it has a link to (to-b; l3-... where long)
    link_ifaces: dict[str, str] = field(default_factory=dict)

    def link_iface(self, peer: str) -> str:
        return self.link_ifaces.get(peer, f"to-{peer}")

    def bound(self, resource: str) -> model.Bound | None:
        return next((b for b in self.bounds if b.resource == resource), None)

    @property
    def cpu_known(self) -> bool:
        """CPU per role is known (untraced /proc, perf, or a probed repeat's /proc)."""
        return any(r.get("cpu_source") in ("untraced", "perf", "proc")
                   for r in self.roles.values())

    def sched(self, node: str, role: str, name: str) -> float | None:
        r = self.roles.get((node, role))
        ci = r.get("sched", {}).get(name) if r else None
        return None if ci is None else float(ci["mean"] or 0.0)

    def woken(self, waker_node: str, waker_role: str, wakee_role: str) -> float:
        return sum(v for (wn, wr, _en, er), v in self.wakeups.items()
                   if wn == waker_node and wr == waker_role and er == wakee_role)

    def frame_share(self, node: str, role: str, *names: str) -> float:
        shares = self.frames.get((node, role), {})
        return max((shares.get(n, 0.0) for n in names), default=0.0)

    @property
    def has_syncrep_wait_event(self) -> bool:
        """9.6 shows no wait event while a commit waits for a standby."""
        return not self.version.startswith("9.")

    def cpu_us(self, node: str, role: str) -> float:
        r = self.roles.get((node, role))
        return float(r["cpu_us_per_commit"]["mean"] or 0.0) if r else 0.0

    def syscall(self, node: str, role: str, name: str) -> float:
        r = self.roles.get((node, role))
        if not r or name not in r["syscalls_per_commit"]:
            return 0.0
        return float(r["syscalls_per_commit"][name]["mean"] or 0.0)

    def wait_share(self, node: str, role: str, *events: str) -> float:
        shares = self.waits.get((node, role), {})
        return sum(v for k, v in shares.items() if k in events)

    def wait_figure(self, node: str, role: str, *events: str) -> Figure:
        """:meth:`wait_share` with its interval."""
        figure = share_figure(self.wait_repeats.get((node, role), []), events)
        return figure or Figure.exact(self.wait_share(node, role, *events))

    def syscall_figure(self, node: str, role: str, name: str) -> Figure:
        r = self.roles.get((node, role))
        ci = r["syscalls_per_commit"].get(name) if r else None
        return _figure(ci, self.syscall(node, role, name))

    def cores_figure(self, node: str, role: str) -> Figure:
        """:meth:`cores` with its interval over the repeats."""
        r = self.roles.get((node, role))
        return _figure(r["cpu_us_per_commit"] if r else None, 0.0).scaled(self.tps / 1e6)

    def cores(self, node: str, role: str) -> float:
        """Cores a role keeps busy: CPU per commit times commits per second."""
        return self.cpu_us(node, role) * self.tps / 1e6


def _figure(ci: Any, point: float) -> Figure:
    """A figure from a mean and its interval over the repeats (costs' ``MeanCI``)."""
    if ci is None or ci.get("mean") is None:
        return Figure.exact(point)
    mean = float(ci["mean"])
    if ci.get("low") is None or ci.get("high") is None:
        return Figure.exact(mean)
    return Figure(mean, max(0.0, float(ci["low"])), float(ci["high"]))


def _sync_walsender(store: Store, cell: StoredCell, facts: CellFacts) -> str | None:
    """The walsender the cell's commits wait for, by the one rule, from what the facts
    hold of each of the primary's walsenders."""
    senders = [r for (n, r) in facts.roles if n == "primary" and r.startswith("walsender:")]
    # the replication samples as cell_costs read them (every repeat of the cell)
    shown = sync_shown((r.standby, r.states) for r in facts.replication)
    clues = dataclasses.replace(
        stored_clues(store, cell, senders, shown),
        releases=facts.anatomy.releases if facts.anatomy is not None else (),
        release_share={r: facts.frame_share("primary", r, "SyncRepReleaseWaiters")
                       for r in senders},
        kills={r: facts.syscall("primary", r, "kill") for r in senders},
        cpu_us={r: facts.cpu_us("primary", r) for r in senders})
    chosen = choose(clues)
    return chosen.role if chosen is not None else None


def _perf_unknown(facts: CellFacts, mechanism: str) -> Verdict:
    return Verdict(mechanism, "unknown",
                   f"cannot judge: per-process counts are missing ({facts.perf_missing})")


def _wake_evidence(facts: CellFacts, sender: str, evidence: dict[str, float | str]) -> str:
    """What the scheduler trace and the flame graph add to a wake-up verdict."""
    said = []
    woken = facts.woken("primary", sender, "backend")
    if facts.wakeups:
        evidence["backends_woken_per_commit"] = round(woken, 3)
        said.append(f"the scheduler saw it wake {woken:.2f} backends per commit")
    share = facts.frame_share("primary", sender, "SyncRepWakeQueue", "SyncRepReleaseWaiters")
    if facts.frames.get(("primary", sender)):
        evidence["walsender_cpu_share_releasing_waiters"] = round(share, 3)
        said.append(f"{100 * share:.0f} % of its CPU is spent releasing waiters "
                    "(SyncRepReleaseWaiters)")
    runq = facts.sched("primary", "backend", "runq_us_per_commit")
    if runq is not None:
        evidence["backend_run_queue_us_per_commit"] = round(runq, 1)
    if facts.anatomy is not None:
        queue = share_of_commit(facts.anatomy, "wakeup_queue")
        if queue is not None:
            evidence["wakeup_queue_share_of_commit"] = round(queue, 3)
            said.append(f"the commit anatomy puts {100 * queue:.0f} % of a commit in the "
                        "wake-up queue")
    return ("; " + "; ".join(said)) if said else ""


def rule_wakeup_bound(facts: CellFacts) -> Verdict | None:
    """Commits wait for the sync walsender to wake them one by one (SetLatch → kill)."""
    name = "commit-wait wake-up bound"
    if facts.synchronous_commit not in WAITING_LEVELS:
        return None
    if facts.perf_missing:
        return _perf_unknown(facts, name)
    sender = facts.sync_walsender
    if sender is None:
        return None
    kills = facts.syscall_figure("primary", sender, "kill")
    sender_cores = facts.cores("primary", sender)
    evidence: dict[str, float | str] = {"kill_per_commit": round(kills.point, 3),
                                        "walsender_cores_busy": round(sender_cores, 3)}
    intervals = {"kill_per_commit": kills}
    if facts.has_syncrep_wait_event:
        share = facts.wait_figure("primary", "backend", "IPC:SyncRep")
        evidence["backend_syncrep_share"] = round(share.point, 3)
        intervals["backend_syncrep_share"] = share
        reach = graded(_wakeup_grade, kills, share)
        waited = f"backends spend {share.pct()} of their samples waiting in SyncRep"
    else:
        reach = graded(lambda k: _wakeup_grade(k, None), kills)
        waited = (f"PostgreSQL {facts.version} shows no wait event for it, so the share of "
                  "time spent waiting is not measured")
    if reach is None:
        return None
    extra = _wake_evidence(facts, sender, evidence)
    queue = (share_of_commit(facts.anatomy, "wakeup_queue")
             if facts.anatomy is not None else None)
    if queue is not None and queue < WAKEUP_QUEUE_BINDS:
        # one signal per commit, but the commits' time is not in the wake-up: the
        # anatomy timed the queue, and it is a sliver of a commit
        reach = Reach("low", "low", "low")
        extra += (f"; so the wake-up is not where a commit's time goes (under "
                  f"{100 * WAKEUP_QUEUE_BINDS:.0f} %)")
    return Verdict.graded(
        name, reach,
        f"{sender} on the primary sends {kills.point:.2f} wake-up signals per commit; "
        f"{waited}" + extra,
        evidence,
        ["more rows per commit (the batch axis) amortises each wake-up",
         f"give {sender} a core of its own (cpuset/pinning, as the seed did)",
         "compare synchronous_commit=local to see the price of the wait"],
        intervals,
    )


WAKEUP_QUEUE_BINDS = 0.05  # of a commit, the wake-up queue's share below which it does not


def _wakeup_grade(kills: float, share: float | None) -> str | None:
    """~1 kill per commit means one wake-up per committing backend; a third of the
    backends' samples in SyncRep means that wait is a large part of a commit (None: a
    server with no wait event for it, graded on the signals alone)."""
    if kills < 0.5:
        return None
    if share is None:
        return "medium" if kills >= 0.8 else "low"
    return "high" if kills >= 0.8 and share >= 0.3 else ("medium" if share >= 0.15
                                                         else "low")


def rule_epoll_setup(facts: CellFacts) -> Verdict | None:
    """Every wait creates and closes an epoll set (PostgreSQL 9.6's WaitLatch)."""
    name = "per-wait epoll set-up"
    if facts.perf_missing:
        return None
    creates = facts.syscall("primary", "backend", "epoll_create1")
    ctls = facts.syscall("primary", "backend", "epoll_ctl")
    if creates < 0.5:
        return None
    return Verdict(
        name, "high" if creates >= 0.8 else "medium",
        f"backends create {creates:.2f} epoll sets and make {ctls:.2f} epoll_ctl calls per "
        "commit: every wait builds its wait set anew",
        {"epoll_create1_per_commit": round(creates, 3), "epoll_ctl_per_commit": round(ctls, 3)},
        ["newer PostgreSQL keeps one wait set per process (compare the pg axis: 18 shows 0)",
         "the kernel's epoll mutexes are shared by all instances of one OS (seed group 5)"],
    )


def rule_cpu_saturated(facts: CellFacts) -> Verdict | None:
    name = "CPU saturation"
    if not facts.cpu_known:
        return _perf_unknown(facts, name)
    used = sum(facts.cores(n, r) for (n, r) in facts.roles if n != "client")
    client = sum(facts.cores(n, r) for (n, r) in facts.roles if n == "client")
    machine = facts.bound("machine")
    if machine is not None and machine.max_tps.mean:
        # the model's machine bound: its CPUs over every process's demand, pgbench's
        # included where it shares them; the fraction is how close the cell came to it
        fraction = facts.tps / machine.max_tps.mean
        binds = bool(facts.bounds) and facts.bounds[0].resource == "machine"
    else:
        fraction, binds = (used + client) / max(facts.cpus, 1), True
    spread = facts.busy_spread or 0.0
    figure = Figure(fraction, fraction * max(0.0, 1 - spread), fraction * (1 + spread))
    reach = graded(lambda f: None if f < 0.6 else ("high" if f >= 0.85 and binds
                                                   else "medium"), figure)
    if reach is None:
        return None
    idle = 1 - (used + client) / max(facts.cpus, 1)
    if idle >= WIRE_IDLE_CPUS:
        # near the machine's bound by the sum of the demands, yet a third of the CPUs
        # idle: a process that can use one core is what holds the rest back
        reach = Reach("low", "low", "low")
    evidence: dict[str, float | str] = {"cores_busy": round(used, 3), "cpus": facts.cpus,
                                        "fraction": round(fraction, 3)}
    if machine is not None:
        evidence["machine_bound_tps"] = round(machine.max_tps.mean)
    queued = ""
    runq = facts.sched("primary", "backend", "runq_us_per_commit")
    if runq is not None and facts.latency_ms:
        # Time a woken backend waits for a core is latency no server setting removes.
        evidence["backend_run_queue_us_per_commit"] = round(runq, 1)
        evidence["run_queue_share_of_latency"] = round(runq / 1e3 / facts.latency_ms, 3)
        queued = (f"; a woken backend waits {runq:.0f} µs per commit for a core "
                  f"({100 * runq / 1e3 / facts.latency_ms:.0f} % of the commit latency)")
    return Verdict.graded(
        name, reach,
        f"PostgreSQL's processes keep {used:.2f} of {facts.cpus} CPUs busy "
        f"({figure.pct()}), "
        + (f"and pgbench {client:.2f} more" if client else "before counting pgbench itself")
        + queued,
        evidence,
        ["more clients will not raise throughput here; fewer may lower latency",
         "run pgbench (the client) on other cores or another host"],
        {"fraction": figure},
    )


# the sync walsender binds: on a CPU this share of the time or more (its busy cores'
# interval reaching it), with the cell's TPS within WALSENDER_NEAR of its lowest bound
WALSENDER_BUSY, WALSENDER_BUSY_HIGH, WALSENDER_NEAR = 0.7, 0.8, 0.85


def rule_walsender_binds(facts: CellFacts) -> Verdict | None:
    """The seed's regime: the sync walsender on its CPU nearly all the time, the cell at
    its bound (its CPU, or its serial release under SyncRepLock), the rest of the machine
    idle. High where the CPUs were WIRE_IDLE_CPUS idle or more."""
    name = "the sync walsender binds"
    sender = facts.sync_walsender
    if (facts.synchronous_commit not in WAITING_LEVELS or sender is None
            or not facts.cpu_known or facts.tps <= 0):
        return None
    busy = facts.cores_figure("primary", sender)
    own = [b for b in [facts.bound(sender)] if b is not None and b.max_tps.mean] + [
        b for b in facts.wait_bounds if b.law == "release" and b.max_tps.mean]
    if busy.high < WALSENDER_BUSY or not own:
        return None
    lowest = min(own, key=lambda b: b.max_tps.mean)
    near = facts.tps / lowest.max_tps.mean
    if near < WALSENDER_NEAR:
        return None
    evidence: dict[str, float | str] = {
        "walsender": sender, "cores_busy": round(busy.point, 3),
        "bound": lowest.resource, "bound_tps": round(lowest.max_tps.mean),
        "tps_over_bound": round(near, 3)}
    idle = machine_idle(facts, evidence, sender.partition(":")[2])
    said = [f"{sender} was on a CPU {100 * busy.point:.0f} % of the time"
            + (idle.replace("; ", " while ", 1) if idle else "")]
    releases = facts.anatomy.releases if facts.anatomy is not None else ()
    released = next((r for r in releases
                     if r.walsender == sender and r.per_waiter_us), None)
    if released is not None:
        freed = released.freed_per_commit
        per_waiter = float(released.per_waiter_us or 0.0)
        # one walsender freeing (not a quorum's two sharing the waiters): the rest of the
        # commits never queued
        alone = sum(1 for r in releases if r.waiters_per_release) == 1
        said.append(f"it freed {released.waiters_per_release or 0:.1f} waiters a release "
                    f"at {per_waiter:,.0f} µs each"
                    + (f" ({freed:.2f} a commit: the other commits found their WAL "
                       "confirmed once they had SyncRepLock, and never queued)"
                       if alone and freed is not None and freed < 0.9 else ""))
        evidence["per_waiter_us"] = round(per_waiter, 1)
        if freed is not None:
            evidence["freed_per_commit"] = round(float(freed), 3)
    queue = (share_of_commit(facts.anatomy, "wakeup_queue")
             if facts.anatomy is not None else None)
    if queue is not None:
        evidence["wakeup_queue_share_of_commit"] = round(queue, 3)
        said.append(f"commits spent {100 * queue:.0f} % of their time in its wake-up queue")
    blocked = (share_of_commit(facts.anatomy, "unsignalled")
               if facts.anatomy is not None else None)
    if blocked is not None and blocked >= 0.2:
        # a wait no release signalled: blocked on SyncRepLock, then found its WAL confirmed
        evidence["unsignalled_share_of_commit"] = round(blocked, 3)
        said.append(f"{100 * blocked:.0f} % in waits no release signalled (for "
                    "SyncRepLock, which its release loop holds, or freed before they slept)")
    said.append(f"{facts.tps:,.0f} tps is {100 * near:.0f} % of its bound, "
                + (f"{lowest.max_tps.mean:,.0f} tps"
                   if not isinstance(lowest, model.ReleaseBound) else
                   f"{lowest.max_tps.mean:,.0f} tps of serial release under SyncRepLock"))
    cpus_idle = float(evidence.get("cpus_idle_share", 0.0))
    reach = graded(lambda c: None if c < WALSENDER_BUSY else (
        "high" if c >= WALSENDER_BUSY_HIGH and cpus_idle >= WIRE_IDLE_CPUS else "medium"),
        busy)
    if reach is None:
        return None
    return Verdict.graded(
        name, reach, "; ".join(said), evidence,
        [f"what {sender} spends its CPU on is in its flame graph: the release loop "
         "(SyncRepWakeQueue) runs holding SyncRepLock, so every committing backend queues "
         "behind it",
         "more cores will not raise this: one process, one lock (syncrep-lab model "
         "--cores)"],
        {"cores_busy": busy},
    )


QUOTA_BINDS = 0.5  # of the periods a held role ran in, the share that used its quota up


def machine_idle(facts: CellFacts, evidence: dict[str, float | str],
                 standby: str | None = None) -> str:
    """What the rest of the machine did, for a verdict that names something else: the
    CPUs left idle, the busiest disk, and the bytes the link to ``standby`` (or the
    whole network) carried; "" where none was measured."""
    said = []
    if facts.cpu_known:
        busy = sum(facts.cores(n, r) for (n, r) in facts.roles)
        idle = max(0.0, 1 - busy / max(facts.cpus, 1))
        evidence["cpus_busy"], evidence["cpus"] = round(busy, 3), facts.cpus
        evidence["cpus_idle_share"] = round(idle, 3)
        said.append(f"the machine's {facts.cpus} CPUs were {100 * idle:.0f} % idle")
    disks = [d for d in facts.disks if d.host == "" and d.busy_share is not None]
    if disks:
        disk = max(disks, key=lambda d: d.busy_share or 0.0)
        evidence["disk_busy_share"] = round(disk.busy_share or 0.0, 3)
        said.append(f"its busiest disk ({disk.device}) {100 * (disk.busy_share or 0):.0f} "
                    "% busy")
    link = [n for n in facts.network if n.node == "primary"
            and n.interface == facts.link_iface(standby) and n.seconds > 0] if standby else []
    # without the link, the host's own loopback where the nodes share it
    nets = link or [n for n in facts.network if n.node == "" and n.interface == "lo"
                    and n.seconds > 0]
    if nets:
        n = nets[0]
        # a link's two directions; the loopback counts each byte once each way
        mb_s = (n.tx_bytes + (0 if n.interface == "lo" else n.rx_bytes)) / n.seconds / 1e6
        evidence["network_mb_s"] = round(mb_s, 3)
        where = f"the link to {standby}" if link else "the loopback"
        if link or mb_s >= 0.05:  # nodes on one host stream over Unix sockets, not lo
            said.append(f"{where} carried {mb_s:.1f} MB/s")
    late = [x for x in facts.link_delays if x.ran_late and standby is not None
            and {x.into, x.source} == {"primary", standby}]
    if late:
        worst = max(late, key=lambda x: x.late_mean_ms)
        evidence["link_late_ms"] = round(worst.late_mean_ms, 3)
        said.append(f"and its delay line ran late ({worst.line()}): part of the wait is "
                    "this machine's load on the emulation, not the link asked for")
    return ("; " + ", ".join(said)) if said else ""


def rule_quota_binds(facts: CellFacts) -> Verdict | None:
    """A role held to a CPU quota that used it up in most of the periods it ran in: the
    quota paces it, not the machine. High where the held role is the sync walsender or
    a commit's own backend and it was throttled in 80 % of its periods or more."""
    name = "a CPU quota holds a role"
    held = [q for q in facts.quotas
            if q.throttled_share is not None and q.throttled_share >= QUOTA_BINDS]
    if not held:
        return None
    q = max(held, key=lambda q: q.throttled_ms_per_s or 0.0)
    share = q.throttled_share or 0.0
    waited = q.throttled_ms_per_s or 0.0
    # "walsender": every walsender in one quota, the sync one among them
    in_path = (q.node == "primary" and q.role in (facts.sync_walsender, "backend",
                                                  "walsender"))
    who = ("the sync walsender" if q.node == "primary" and q.role == facts.sync_walsender
           else "the walsenders, the sync one among them" if q.node == "primary"
           and q.role == "walsender" else f"{q.node} {q.role}")
    evidence: dict[str, float | str] = {
        "role": f"{q.node}/{q.role}", "share_cpus": q.share, "quota_us": q.quota_us,
        "period_us": q.period_us, "periods": q.periods, "throttled": q.throttled,
        "throttled_share": round(share, 3), "throttled_ms_per_s": round(waited, 1)}
    sync = facts.sync_walsender or ""
    idle = machine_idle(facts, evidence, sync.partition(":")[2] or None)
    # a walsender held at a level whose commits wait for none paces nobody's commit
    waited_for = facts.synchronous_commit in WAITING_LEVELS or not q.role.startswith(
        "walsender")
    return Verdict(
        name, ("high" if in_path and share >= 0.8 else "medium") if waited_for else "low",
        f"{who} is held to {q.share:g} CPU ({q.quota_us / 1000:g} ms of CPU every "
        f"{q.period_us / 1000:g} ms): it used the quota up in {100 * share:.0f} % of the "
        f"{q.periods} periods it ran in, and "
        + (f"waited {waited:.0f} ms a second for the next one" if model.role_kind(q.role)
           == "process" else f"its run queues spent {waited:.0f} ms a second throttled "
           "(summed over the CPUs)") + idle,
        evidence,
        ["the quota is the placement's own (placements.NAME.quota): compare with the same "
         "cell without it to see what the role costs unheld",
         "a throttled walsender answers nothing until its next period: commits wait for "
         "the period as well as for the CPU the quota takes away"],
    )


KERNEL_HEAVY = 0.5  # of a role's on-CPU samples, the kernel's share that is said


def rule_kernel_heavy(facts: CellFacts) -> Verdict | None:
    """The commit path's roles (the sync walsender, the primary's backends) spending
    most of their CPU in the kernel: where, and called from which PostgreSQL function
    (the seed's perf report -g reading). It explains CPU that another verdict names;
    low confidence: a share of CPU is not a bound."""
    name = "most of a role's CPU is in the kernel"
    path = {("primary", "backend"), *((("primary", facts.sync_walsender),)
                                      if facts.sync_walsender else ())}
    heavy = [k for k in facts.kernel if (k.node, k.role) in path
             and k.kernel_share >= KERNEL_HEAVY and k.top]
    if not heavy:
        return None
    told = "; ".join(
        f"{k.role} {100 * k.kernel_share:.0f} % ("
        + ", ".join(function_text(f) for f in k.top[:3]) + ")" for k in heavy)
    evidence: dict[str, float | str] = {
        f"{k.role}_kernel_share": round(k.kernel_share, 3) for k in heavy}
    return Verdict(
        name, "low", f"of their on-CPU samples, in the kernel: {told}", evidence,
        ["the kernel's time follows the system calls per commit (costs): fewer wake-ups "
         "(more rows per commit), fewer waits (9.6 builds an epoll set for each)",
         "a kernel function that spins (a lock's owner) points at a lock the processes "
         "share: the seed's was one per OS instance, which VMs escaped"],
    )


def rule_host_saturated(facts: CellFacts) -> Verdict | None:
    """An SSH host whose CPUs are all busy: its standby or client sets the pace."""
    name = "an SSH host's CPUs are saturated"
    full = {h: v for h, v in facts.hosts.items() if v[2] and v[1] / v[2] >= 0.85}
    if not full:
        return None
    worst = max(v[1] / v[2] for v in full.values())
    told = "; ".join(f"host {h} ({roles}) keeps {busy:.1f} of {cpus} CPUs busy"
                     for h, (roles, busy, cpus) in sorted(facts.hosts.items()))
    evidence: dict[str, float | str] = {}
    for h, (_, busy, cpus) in facts.hosts.items():
        evidence[f"{h}_busy_cpus"], evidence[f"{h}_cpus"] = round(busy, 2), cpus
    return Verdict(
        name, "high" if worst >= 0.95 else "medium", told, evidence,
        ["what runs on that host competes for its CPUs: give the client or the standby a "
         "host of its own, or fewer clients"],
    )


def rule_single_process(facts: CellFacts) -> Verdict | None:
    name = "one process saturates its core"
    if not facts.cpu_known:
        return None
    busiest = max(((facts.cores_figure(n, r).high, n, r) for (n, r) in facts.roles
                   if r.startswith("walsender") or r in SINGLE_PROCESS_ROLES),
                  default=None)
    if busiest is None:
        return None
    _, node, role = busiest
    cores = facts.cores_figure(node, role)
    # the model's bound of this process (1 / its CPU per commit) says the same as its
    # busy share; whether it binds is the model's: another bound may be lower
    own = facts.bound(role if node == "primary" else f"{node} {role}")
    binds = own is None or (bool(facts.bounds) and facts.bounds[0] is own)
    reach = graded(lambda c: None if c < 0.7 else ("high" if c >= 0.9 and binds
                                                   else "medium"), cores)
    if reach is None:
        return None
    evidence: dict[str, float | str] = {"node": node, "role": role,
                                        "cores_busy": round(cores.point, 3)}
    if own is not None and own.max_tps.mean:
        evidence["bound_tps"] = round(own.max_tps.mean)
    interval = f" ({cores.low:.2f}–{cores.high:.2f})" if cores.known else ""
    return Verdict.graded(
        name, reach,
        f"{role} on {node} alone keeps {cores.point:.2f}{interval} of a core busy: it "
        "cannot go faster",
        evidence,
        [f"give {role} a core of its own, and check what it spends it on (flame graph)"],
        {"cores_busy": cores},
    )


def rule_local_flush(facts: CellFacts) -> Verdict | None:
    name = "local WAL flush bound"
    share = facts.wait_figure("primary", "backend", "IO:WalSync", "LWLock:WALWrite",
                              "LWLockNamed:WALWriteLock", "IO:WALSync")
    reach = graded(lambda s: None if s < 0.25 else ("high" if s >= 0.45 else "medium"), share)
    if reach is None:
        return None
    return Verdict.graded(
        name, reach,
        f"backends spend {share.pct()} of their samples flushing WAL or waiting "
        "for the WAL write lock",
        {"backend_wal_flush_share": round(share.point, 3)},
        ["synchronous_commit=local vs off shows the price of the local flush",
         "commit_delay/commit_siblings group flushes; faster WAL storage helps"],
        {"backend_wal_flush_share": share},
    )


def rule_client_bound(facts: CellFacts) -> Verdict | None:
    name = "the benchmark client is the bottleneck"
    share = facts.wait_figure("primary", "backend", "Client:ClientRead", "Client:idle")
    reach = graded(lambda s: None if s < 0.4 else ("medium" if s < 0.6 else "high"), share)
    if reach is None:
        return None
    return Verdict.graded(
        name, reach,
        f"backends spend {share.pct()} of their samples waiting for pgbench to send "
        "the next statement",
        {"backend_client_wait_share": round(share.point, 3), "clients": facts.clients},
        ["pgbench shares the machine's cores: give it its own, or use fewer threads",
         "figures here describe client plus server, not the server alone"],
        {"backend_client_wait_share": share},
    )


def rule_too_many_clients(facts: CellFacts) -> Verdict | None:
    if facts.clients <= 8 * facts.cpus:
        return None
    busy = sum(facts.cores(n, r) for (n, r) in facts.roles) if facts.cpu_known else None
    # with a third of the CPUs idle, the clients do not queue for them
    idle = busy is not None and 1 - busy / max(facts.cpus, 1) >= WIRE_IDLE_CPUS
    return Verdict(
        "too many clients for the cores", "low" if idle else "medium",
        f"{facts.clients} clients on {facts.cpus} CPUs: most of them queue for a core",
        {"clients": facts.clients, "cpus": facts.cpus},
        ["sweep clients (the clients axis) to find the knee"],
    )


WIRE_IDLE_CPUS = 0.3  # the machine's CPUs idle at least this share for "high" on the wire
# of a link's rate, what its busier direction carried to be called full, and to be called
# so with high confidence where it paces the commits: a synchronous stream leaves gaps
# while it waits for the standby's answer (a 10 Mbit/s link at 8 clients carried 83 %)
LINK_FULL, LINK_FULL_HIGH = 0.7, 0.75


def rule_link_full(facts: CellFacts) -> Verdict | None:
    """An emulated link with a rate that carried nearly all it can, one way: the bytes
    the primary sends a standby (the WAL) or receives from the client, a second, against
    the link's rate. High where it is the sync standby's link at a level that waits, or
    the client's, at LINK_FULL_HIGH or more with the CPUs idle WIRE_IDLE_CPUS or more."""
    name = "a link is full"
    sync = (facts.sync_walsender or "").partition(":")[2]
    full = []
    for (a, b), rate in facts.link_rates.items():
        peer = b if a == "primary" else a if b == "primary" else None
        iface = next((n for n in facts.network if peer is not None and n.node == "primary"
                      and n.interface == facts.link_iface(peer) and n.seconds > 0), None)
        if peer is None or iface is None:
            continue
        busiest = max(iface.tx_bytes, iface.rx_bytes) * 8 / iface.seconds
        if busiest >= LINK_FULL * rate:
            full.append((busiest / rate, peer, iface, rate))
    if not full:
        return None
    used, peer, iface, rate = max(full, key=lambda f: f[0])
    from syncrep_lab.network.links import format_rate

    out_mb, in_mb = (iface.tx_bytes / iface.seconds / 1e6, iface.rx_bytes / iface.seconds / 1e6)
    paces = peer == "client" or (peer == sync and facts.synchronous_commit in WAITING_LEVELS)
    evidence: dict[str, float | str] = {
        "link": f"primary-{peer}", "rate_bits_s": rate, "out_mb_s": round(out_mb, 3),
        "in_mb_s": round(in_mb, 3), "used_share": round(used, 3)}
    idle = machine_idle(facts, evidence)
    cpus_idle = float(evidence.get("cpus_idle_share", 0.0))  # unknown: not idle
    return Verdict(
        name, "high" if paces and used >= LINK_FULL_HIGH and cpus_idle >= WIRE_IDLE_CPUS
        else "medium",
        f"the link between the primary and {peer} is full: it carried {out_mb:.2f} MB/s out "
        f"of the primary and {in_mb:.2f} MB/s in, {100 * used:.0f} % of its "
        f"{format_rate(rate)} one way" + idle,
        evidence,
        [f"a faster link to {peer} (its rate is the spec's [links] rate)",
         "fewer bytes a commit: wal_compression, fewer full-page images (a longer "
         "checkpoint_timeout)"],
    )


def rule_standby_or_network(facts: CellFacts) -> Verdict | None:
    """Commits wait on the standby's side or the wire, not on the primary; where the
    commit anatomy split the wait for the standby, the part that binds is named."""
    verdict = _standby_or_network(facts)
    halves = facts.anatomy.standby if facts.anatomy is not None else ()
    said = standby_sentence(halves[0]) if halves else None
    binding = halves[0].binding() if halves else None
    if said is None or binding is None or facts.anatomy is None:
        return verdict
    evidence: dict[str, float | str] = {
        "standby_part_binding": binding.component,
        "standby_part_share_of_wait": round(binding.share_of_wait or 0.0, 3)}
    if verdict is not None:
        return dataclasses.replace(verdict, summary=f"{verdict.summary}; the part that "
                                   f"binds is {said}", evidence={**verdict.evidence,
                                                                 **evidence})
    # the lags and wait events did not say it (a remote_apply cell's replay lag, a
    # sleep no wait event shows), the anatomy timed it: the wait's share of a commit
    waiting = share_of_commit(facts.anatomy, "standby_wait")
    if waiting is None or waiting < 0.5:
        return None
    evidence["standby_wait_share_of_commit"] = round(waiting, 3)
    return Verdict("network or standby flush/apply bound",
                   "high" if waiting >= 0.7 and (binding.share_of_wait or 0) >= 0.5
                   else "medium",
                   f"the commit anatomy puts {100 * waiting:.0f} % of a commit in the wait "
                   f"for the standby; the part that binds is {said}", evidence,
                   [STANDBY_STEPS.get(binding.component, STANDBY_STEPS["transit_out"])])


STANDBY_STEPS = {
    "flush": "faster WAL storage on the standby (or remote_write, which does not wait "
             "for its flush)",
    "replay": "remote_apply waits for replay: on or remote_write do not; a replay held "
              "back (recovery_min_apply_delay, a conflict) is the standby's setting",
    "write": "the standby's WAL writes: its disk or its walreceiver's CPU",
    "send": "the walsender's CPU on the primary (a core of its own)",
    "reply": "the standby's walreceiver's CPU (a core of its own)",
    "reply_handling": "the walsender's CPU on the primary (a core of its own)",
    "transit_out": "measure the round trip between the hosts; put the synchronous standby "
                   "nearer (or use quorum ANY over standbys on short links)"}
STANDBY_STEPS["transit_back"] = STANDBY_STEPS["transit_out"]
STANDBY_STEPS["queue"] = STANDBY_STEPS["flush"]  # the WAL waited for a flush to end


# a sync standby's walreceiver writing and flushing this much of its samples: the
# standby's flush binds, whatever its lag columns say
FLUSH_BINDS = 0.5


def _standby_or_network(facts: CellFacts) -> Verdict | None:
    name = "network or standby flush/apply bound"
    if facts.synchronous_commit not in WAITING_LEVELS:
        return None
    sync = [r for r in facts.replication if "sync" in str(r.states).split(",")
            or str(r.states) == "quorum"]
    lag_key = LAG_OF_LEVEL[facts.synchronous_commit]  # a ReplicationSummary field
    lags = [float(lag) for r in sync if (lag := getattr(r, lag_key)) is not None]
    if not sync or not lags or not facts.latency_ms:
        return Verdict(name, "unknown",
                       "cannot judge: no per-standby lag was sampled (pg_stat_replication "
                       "reports lags from PostgreSQL 10; or the replication sampler was off)")
    # the sync standby whose walreceiver flushes most: its wait events name a slow
    # flush whatever the lag columns say (they stay small for a standby answering late)
    standby = max((r.standby for r in sync), key=lambda name: facts.wait_share(
        name, "walreceiver", *SYNC_EVENTS))
    lag = min(lags)
    share = lag / facts.latency_ms
    evidence: dict[str, float | str] = {"standby": standby, f"{lag_key[:-3]}_lag_ms": round(lag, 3),
                                        "commit_latency_ms": round(facts.latency_ms, 3),
                                        "lag_share_of_latency": round(share, 3)}
    flushing = facts.wait_share(standby, "walreceiver", *SYNC_EVENTS, *WRITE_EVENTS)
    applying = facts.cores(standby, "startup") if facts.cpu_known else 0.0
    receiver_idle = facts.wait_share(standby, "walreceiver", "Activity:WalReceiverMain")
    sender_idle = facts.wait_share("primary", f"walsender:{standby}", "Activity:WalSenderMain")
    evidence.update({"walreceiver_flushing_share": round(flushing, 3),
                     "startup_cores_busy": round(applying, 3),
                     "walreceiver_idle_share": round(receiver_idle, 3),
                     "walsender_idle_share": round(sender_idle, 3)})
    if share < 0.5 and flushing < FLUSH_BINDS:
        return None
    if facts.synchronous_commit == "remote_apply" and applying >= 0.7:
        return Verdict(name, "high",
                       f"standby {standby} replays WAL with its startup process {applying:.2f} "
                       f"of a core busy; the replay lag is {lag:.2f} ms of a "
                       f"{facts.latency_ms:.2f} ms commit", evidence,
                       ["remote_apply waits for replay: on or remote_write do not",
                        "replay is single-threaded: a faster core for the standby helps"])
    if flushing >= 0.4:
        lag_said = (f"its {lag_key[:-3]} lag is {lag:.2f} ms of a {facts.latency_ms:.2f} ms "
                    "commit" if share >= 0.5 else
                    f"its {lag_key[:-3]} lag in pg_stat_replication ({lag:.2f} ms) is small "
                    f"beside a {facts.latency_ms:.2f} ms commit: the view's lags lag behind "
                    "a standby that answers late")
        return Verdict(name, "high" if flushing >= 0.6 else "medium",
                       f"standby {standby}'s WAL flush binds: its walreceiver spends "
                       f"{100 * flushing:.0f} % of its samples writing and flushing WAL; "
                       f"{lag_said}", evidence,
                       ["faster WAL storage on the standby (or remote_write, which does not "
                        "wait for its flush)",
                        "a second synchronous candidate with ANY 1 (b, c) takes the faster"])
    if receiver_idle >= 0.5 and sender_idle >= 0.5:
        # Little's law with no think time: N clients, each a commit per R
        little = facts.clients / (facts.latency_ms / 1000)
        evidence["little_tps"] = round(little, 1)
        idle = machine_idle(facts, evidence, standby)
        # where the CPUs were busy, part of that wait is the standby's and the primary's
        # processes waiting for a core, not the wire
        cpus_idle = float(evidence.get("cpus_idle_share", 0.0))  # unknown: not idle
        sure = (share >= 0.8 and receiver_idle >= 0.8 and sender_idle >= 0.8
                and cpus_idle >= WIRE_IDLE_CPUS)
        return Verdict(name, "high" if sure else "medium",
                       f"waiting for the standby binds: {facts.clients} clients ÷ "
                       f"{facts.latency_ms:.2f} ms a commit = {little:,.0f} tps (Little's "
                       f"law); the {lag_key[:-3]} lag of standby {standby} is {lag:.2f} ms "
                       "of it while its walreceiver and the walsender both mostly wait for "
                       f"the other side: the time is on the wire{idle}",
                       evidence,
                       ["measure the round trip (ping) between the hosts; a commit costs at "
                        "least one", "put the synchronous standby nearer (or use quorum "
                        "ANY over standbys on short links)"])
    return None


RULES = (rule_quota_binds, rule_walsender_binds, rule_wakeup_bound, rule_epoll_setup,
         rule_cpu_saturated, rule_host_saturated,
         rule_single_process, rule_local_flush, rule_standby_or_network, rule_client_bound,
         rule_too_many_clients, rule_kernel_heavy, rule_link_full)
ORDER = {"high": 0, "medium": 1, "low": 2, "unknown": 3}


def _rank(v: Verdict) -> tuple[int, int, int]:
    """Highest reachable level first, then the point's, then the unfavourable end's."""
    reach = v.reach or Reach(v.confidence, v.confidence, v.confidence)
    return ORDER[reach.best], ORDER[reach.point], ORDER[reach.worst]


def diagnose_facts(facts: CellFacts) -> list[Verdict]:
    verdicts = [v for rule in RULES if (v := rule(facts)) is not None]
    return sorted(verdicts, key=_rank)


def confidence_text(verdict: Verdict) -> str:
    """"high", or "medium–high" where the evidence's interval spans a threshold."""
    worst, best = verdict.levels
    return best if worst == best else f"{worst}–{best}"


def verdict_title(verdict: Verdict) -> str:
    """A verdict's name with its confidence, as it reads in a line: "the benchmark client
    is the bottleneck (high confidence)" (the name is a phrase of its own, which the
    confidence put before it would garble)."""
    return f"{verdict.mechanism} ({confidence_text(verdict)} confidence)"


def leading_verdict(verdicts: Sequence[Verdict]) -> Verdict | None:
    """The most confident verdict that is not 'unknown' (they come sorted: on the
    highest level their evidence reaches)."""
    return next((v for v in verdicts if v.confidence != "unknown"), None)


def tied_with_lead(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """The other verdicts whose evidence reaches the leading verdict's highest level:
    at this precision either may be the limit, and the closing lines say so rather
    than let the noise pick one."""
    lead = leading_verdict(verdicts)
    if lead is None:
        return []
    return [v for v in verdicts if v is not lead and v.confidence != "unknown"
            and v.levels[1] == lead.levels[1]]


def leading_title(verdicts: Sequence[Verdict],
                  title: Callable[[Verdict], str] = verdict_title) -> str:
    """The leading verdict's title, and the verdicts tied with it: "CPU saturation (high
    confidence), as likely at this precision: commit-wait wake-up bound (medium–high
    confidence)"; "" with no verdict. ``title`` writes each (the terminal's in colour)."""
    lead = leading_verdict(verdicts)
    if lead is None:
        return ""
    tied = tied_with_lead(verdicts)
    return title(lead) + (", as likely at this precision: "
                          + "; ".join(title(v) for v in tied) if tied else "")


def cell_facts(store: Store, cell: StoredCell, cpus: int) -> CellFacts:
    costs = cell_costs(store, cell.id)
    repeats = store.repeats(cell.id)
    params = cell.params
    perf = costs.probes.get("perf", [])
    perf_missing = None if any(s == "ran" for s in perf) else ("; ".join(perf) or
                                                               "no perf data stored")
    lb = costs.latency_breakdown
    facts = CellFacts(
        wakeups={(w["waker_node"], w["waker_role"], w["wakee_node"], w["wakee_role"]):
                 float(w["per_commit"]["mean"] or 0.0) for w in costs.wakeups},
        frames={(g["node"], g["role"]): {f["frame"]: f["inclusive"] for f in g["frames"]}
                for g in costs.flamegraphs},
        replication=costs.replication,
        latency_ms=(float(lb["latency_ms"]) if lb else
                    float(cell.lat_mean_ms) if cell.lat_mean_ms is not None else None),
        version=cluster_version(store, cell),
        label=cell.label, tps=float(cell.tps_mean or 0.0), clients=int(params["clients"]),
        synchronous_commit=str(params["synchronous_commit"]), cpus=cpus,
        roles={(r["node"], r["role"]): r for r in costs.roles},
        waits={(w["node"], w["role"]): w["share"] for w in costs.waits},
        perf_missing=perf_missing,
        hosts=_host_load(store, cell.id),
        anatomy=costs.anatomy,
        kernel=costs.kernel,
        wait_repeats=wait_samples(store, [r.id for r in repeats if r.probed]),
        busy_spread=busy_spread(store, {r.id: (int(r.transactions), float(r.tps))
                                        for r in repeats if not r.probed}),
    )
    facts.sync_walsender = _sync_walsender(store, cell, facts)
    facts.quotas = queries.quota_means(store, cell.id)
    facts.disks = queries.disk_means(store, cell.id)
    facts.network = queries.net_means(store, cell.id)
    facts.link_rates, facts.link_ifaces = _links(store, cell.id)
    facts.link_delays = link_deliveries(store, cell.id)
    return facts


def _links(store: Store, cell_id: int) -> tuple[dict[tuple[str, str], int], dict[str, str]]:
    """The rate of each emulated link of the cell that has one, and the primary's
    interface to each peer (its last measured repeat's links as applied)."""
    from syncrep_lab.network.links import parse_rate

    last = queries.last_measured_repeat(store, cell_id)
    rates, ifaces = {}, {}
    for link in queries.links_of(store, last) if last is not None else []:
        try:
            ends = json.loads(link.applied_json or "[]")
        except ValueError:
            continue
        ends = [e for e in ends if isinstance(e, dict)]
        for e in ends:
            if e.get("endpoint") == "primary" and e.get("peer") and e.get("interface"):
                ifaces[str(e["peer"])] = str(e["interface"])
        rate = next((e["profile"].get("rate") for e in ends
                     if isinstance(e.get("profile"), dict)), None)
        if rate:
            with contextlib.suppress(UserError):
                rates[(link.a, link.b)] = parse_rate(str(rate))
    return rates, ifaces


def _anatomy_growth(this: tuple[StoredCell, Anatomy],
                    cells: list[tuple[StoredCell, Anatomy]]) -> str | None:
    """Which part of this cell's commit grew against the same cell (every parameter
    but the clients) at its fewest clients."""
    cell, anatomy = this

    def others(c: StoredCell) -> dict[str, object]:
        return {k: v for k, v in c.params.items() if k != "clients"}

    clients = cell.typed_params.clients or 0
    fewer = [(c.typed_params.clients or 0, a) for c, a in cells
             if others(c) == others(cell) and (c.typed_params.clients or 0) < clients]
    if not fewer:
        return None
    return growth_sentence(min(fewer, key=lambda ca: ca[0]), (clients, anatomy))


def _host_load(store: Store, cell_id: int) -> dict[str, tuple[str, float, int]]:
    """Each SSH host's busy CPUs over the cell's measured repeats, on average."""
    measured = [r.id for r in store.repeats(cell_id) if not r.probed]
    seen: dict[str, list[HostRepeatRow]] = {}
    for _, row in queries.host_repeats_of(store, measured):
        seen.setdefault(row.host, []).append(row)
    out = {}
    for host, rows in seen.items():
        busy = [r.busy_cpus for r in rows if r.busy_cpus is not None]
        if busy:
            out[host] = (rows[0].roles, sum(busy) / len(busy), rows[0].cpus)
    return out


def diagnose_run(folder: Path) -> list[CellDiagnosis]:
    store = Store(folder, create=False)
    try:
        run = store.run()
        machine = run.machine
        if run.kind == "observe":
            # a live cluster watched, no load run: its own rules (analysis/observe.py)
            return observed_cells(store, run.id, machine)
        cpus = int(machine.get("cpus_usable") or machine.get("cpu_count") or 1)
        series = model.series_index(store.cells(run.id))
        anatomies: dict[int, tuple[StoredCell, Anatomy]] = {}
        done: list[tuple[StoredCell, CellFacts, model.CellModel]] = []
        for cell in store.cells(run.id):
            if cell.status != "done":
                continue
            facts = cell_facts(store, cell, cpus)
            bound = model.cell_model(store, cell, series, machine)
            facts.bounds, facts.wait_bounds = list(bound.bounds), list(bound.wait_bounds)
            if facts.anatomy is not None:
                anatomies[cell.idx] = (cell, facts.anatomy)
            done.append((cell, facts, bound))
        return [CellDiagnosis(
            cell.idx, cell.label, facts.tps, model.headline(bound), tuple(bound.errors),
            tuple(diagnose_facts(facts)),
            anatomy=(_anatomy_growth(anatomies[cell.idx], list(anatomies.values()))
                     if cell.idx in anatomies else None),
            anatomy_key=cell.idx in anatomies) for cell, facts, bound in done]
    finally:
        store.close()
