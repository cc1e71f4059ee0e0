"""The bottleneck model: where a cell's throughput ceiling is, which process sets it,
and what it would be on a machine with more cores.

Operational analysis (Lazowska et al., *Quantitative System Performance*, ch. 5) on
what every repeat stores. A process role's **service demand** D is its CPU seconds
per commit, read from the measured repeats' /proc figures (nothing traced:
probes/session.UntracedCpu) or, for a run made before those existed, the probed
repeats' (inflated by tracing, and said). Then:

- a role that is **one process** (a walsender, the walwriter, a standby's walreceiver
  or startup process, the checkpointer) cannot pass 1 / D commits a second: it has
  one core at most (q / D where a placement holds it to a CPU quota of q CPUs);
- a **pool** (the backends, pgbench's threads) cannot pass min(n, C) / D, n its
  processes, C the usable CPUs;
- the **machine** cannot pass C / ΣD over every process on it (pgbench included
  when it runs there);
- N clients cannot pass N / R₁ (Little's law with no think time), R₁ the mean
  latency of a 1-client cell of the same series, or ΣD when the run has none (the
  response time is at least the demand: a higher, weaker bound).

The lowest bound binds; the knee N* ≈ R₁ · X_max is where the clients stop being the
limit. For the sync walsender, its CPU per commit times the share of its on-CPU time
spent releasing waiters (SyncRepReleaseWaiters in its flame graph) is a lower bound on
how long it holds SyncRepLock per commit: the serial part of the commit path.

Beside those CPU bounds, two **wait bounds** (kind ``wait``) where the cell has a commit
anatomy (analysis/anatomy.py, its traced repeat):

- **Little's law at this concurrency** (``flush and wait``): N clients, each spending
  at least R per commit in the local flush and the commit wait, cannot pass N / R;
- **the serial release** (``serial release``): the sync walsender frees waiters one at a
  time, holding SyncRepLock; c = its release time over the commits of the same time
  (not over the waiters it freed: commits that find their WAL already confirmed do not
  queue); at most 1 / c a second.

The traced repeat's traps slow its commits (docs/decisions.md, "The commit anatomy
probe"), so its durations are not those of the measured repeats. What the model takes
from it are shares of time: s, the part of each client's time spent in the flush and
the wait (R × the traced TPS / N), and u, the part of a second the walsender spent
releasing (c × the traced TPS). Assuming both shares hold in the measured repeats,
R = s · N / X and c = u / X, X the measured TPS, whose 95 % interval gives the bounds'
(the anatomy has one traced repeat: its own figures have none). On another machine
(``--cores``, ``--clients``): c stays (one process's serial cost per waiter does not
shrink with cores), R stays as measured at this concurrency (N' / R at N' clients). The
shape, not a forecast (docs/decisions.md, "The wait bounds").

The Universal Scalability Law, X(N) = λN / (1 + σ(N − 1) + κN(N − 1)), is fitted to
TPS against clients (and against cores where a run varies them), with bootstrap
intervals over the repeats. Everything here reads the store; nothing runs.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import warnings
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from syncrep_lab import format as fmt
from syncrep_lab.analysis.anatomy import WAIT_PARTS, Anatomy, PerCommit, cell_anatomy
from syncrep_lab.analysis.costs import CPU_SOURCES, role_run_delay, role_values
from syncrep_lab.analysis.sync_walsender import choose, stored_clues
from syncrep_lab.json_form import JSON, finite
from syncrep_lab.pg.replication import WAITING_LEVELS
from syncrep_lab.pg.roles import CLIENT_PROGRAMS
from syncrep_lab.stats.intervals import mean_ci
from syncrep_lab.store import Store, StoredCell, queries

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# Roles that are one process each: each of them is a serial point.
SINGLE = ("walsender", "walwriter", "walreceiver", "startup", "checkpointer", "bgwriter")
POOLS = ("backend", *CLIENT_PROGRAMS)
RELEASE_FRAME = "SyncRepReleaseWaiters"
# the wait bounds' resources (kind "wait"), the same name in every cell
LITTLE = "flush and wait"
RELEASE = "serial release"
ANATOMY_PROBE = "anatomy"  # probes/anatomy.py's name in the probes table
USL_MIN_POINTS = 3  # distinct x values a fit needs (three parameters)
BOOTSTRAP = 200


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float

    def to_json(self) -> dict[str, JSON]:
        return {"mean": self.mean, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class Bound:
    """A resource's ceiling in commits per second, from its demand per commit."""

    resource: str  # "walsender:b", "backends", "machine", "clients", ...
    kind: str  # process | pool | machine | clients | wait
    demand_us: Interval | None  # µs per commit (None for the clients bound)
    capacity: float  # cores it may use (or clients for the clients bound)
    max_tps: Interval
    source: str  # where the demand comes from

    def to_json(self) -> dict[str, JSON]:
        return {"resource": self.resource, "kind": self.kind,
                "demand_us_per_commit": self.demand_us.mean if self.demand_us else None,
                "demand_low": self.demand_us.low if self.demand_us else None,
                "demand_high": self.demand_us.high if self.demand_us else None,
                "capacity": self.capacity, "max_tps": self.max_tps.mean,
                "low": self.max_tps.low, "high": self.max_tps.high, "source": self.source}


@dataclass(frozen=True)
class WaitBound(Bound):
    """A ceiling the commit's waiting sets (kind ``wait``), from the commit anatomy: a
    LittleBound or a ReleaseBound, each with how it was reached."""

    demand_us: Interval  # a wait bound always has one: R or c
    at_clients: int  # the clients of the traced cell
    share: float  # s or u: the share of time carried to the measured pace
    traced_tps: float
    scale: float  # the measured repeats' pace over the traced one's
    as_traced_tps: float
    traced_repeats: int
    carried: tuple[str, ...]  # what the bound carries to another machine
    dropped: tuple[str, ...]  # ... and what it leaves here (this machine's wait for a core)

    @property
    def law(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class LittleBound(WaitBound):
    """Little's law at this concurrency: N clients, each R a commit in the local flush
    and the commit wait."""

    clients: int  # N (another machine's where the bound is a what-if's)
    share_low: float
    share_high: float
    traced_commits: int
    parts_us: dict[str, float]  # each part of R at the measured pace

    @property
    def law(self) -> str:
        return "little"

    def to_json(self) -> dict[str, JSON]:
        return {**super().to_json(), "law": self.law, "clients": self.clients,
                "at_clients": self.at_clients, "share": self.share,
                "share_low": self.share_low, "share_high": self.share_high,
                "traced_tps": self.traced_tps, "scale": self.scale,
                "as_traced_tps": self.as_traced_tps, "traced_repeats": self.traced_repeats,
                "traced_commits": self.traced_commits, "parts_us": dict(self.parts_us),
                "carried": list(self.carried), "dropped": list(self.dropped)}


@dataclass(frozen=True)
class ReleaseBound(WaitBound):
    """The sync walsender's serial release: one waiter at a time under SyncRepLock."""

    walsender: str | None
    waiters_per_release: float | None
    per_waiter_us_as_traced: float | None
    us_per_commit_as_traced: float
    dropped_us: float  # its wait for a core a commit, left here (a what-if's)

    @property
    def law(self) -> str:
        return "release"

    def to_json(self) -> dict[str, JSON]:
        return {**super().to_json(), "law": self.law, "walsender": self.walsender,
                "waiters_per_release": self.waiters_per_release,
                "at_clients": self.at_clients, "share": self.share,
                "traced_tps": self.traced_tps, "scale": self.scale,
                "per_waiter_us_as_traced": self.per_waiter_us_as_traced,
                "us_per_commit_as_traced": self.us_per_commit_as_traced,
                "as_traced_tps": self.as_traced_tps, "traced_repeats": self.traced_repeats,
                "carried": list(self.carried), "dropped": list(self.dropped),
                "dropped_us": self.dropped_us}


@dataclass(frozen=True)
class Serial:
    """The sync walsender's CPU per commit spent releasing waiters, from its flame graph:
    a lower bound on the time it holds SyncRepLock per commit."""

    role: str
    share: float  # of its on-CPU time, in RELEASE_FRAME
    frame: str
    serial_us_per_commit: float
    max_tps_if_serial: float | None

    def to_json(self) -> dict[str, JSON]:
        return {"role": self.role, "share": self.share, "frame": self.frame,
                "serial_us_per_commit": self.serial_us_per_commit,
                "max_tps_if_serial": self.max_tps_if_serial}


@dataclass(frozen=True)
class WhatIf:
    """The bounds on another machine (``--cores``, ``--clients``), demands as measured."""

    cores: float
    clients: int
    bounds: tuple[Bound, ...]
    wait_bounds: tuple[WaitBound, ...]
    binding: str | None
    binding_kind: str | None
    max_tps: Interval | None

    def to_json(self) -> dict[str, JSON]:
        """The JSON form, unbounded figures null."""
        return finite({"cores": self.cores, "clients": self.clients,
                       "bounds": [b.to_json() for b in self.bounds],
                       "wait_bounds": [b.to_json() for b in self.wait_bounds],
                       "binding": self.binding, "binding_kind": self.binding_kind,
                       "max_tps": self.max_tps.to_json() if self.max_tps else None})


@dataclass(frozen=True)
class Estimate:
    """A fitted figure with its 95 % bootstrap interval (high ∞: unbounded)."""

    value: float
    low: float
    high: float

    def to_json(self) -> dict[str, JSON]:
        return {"value": self.value, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class UslFit:
    """The USL fitted over ``axis`` (clients or cores), or the reason there is none
    (``fit`` None)."""

    axis: str | None  # None: a series the run measured at one value (no fit attempted)
    reason: str | None = None  # why there is no fit
    points: int = 0
    x: tuple[float, ...] = ()
    bootstrap: int = 0  # the resamples that converged
    lam: Estimate | None = None
    sigma: Estimate | None = None
    kappa: Estimate | None = None
    peak_n: Estimate | None = None
    peak_tps: Estimate | None = None

    @property
    def fitted(self) -> bool:
        return self.lam is not None

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {} if self.axis is None else {"axis": self.axis}
        if (self.lam is None or self.sigma is None or self.kappa is None
                or self.peak_n is None or self.peak_tps is None):
            return {**out, "fit": None, "reason": self.reason}
        return {**out, "fit": "usl", "points": self.points, "x": list(self.x),
                "bootstrap": self.bootstrap, "lambda": self.lam.to_json(),
                "sigma": self.sigma.to_json(), "kappa": self.kappa.to_json(),
                "peak_n": self.peak_n.to_json(), "peak_tps": self.peak_tps.to_json()}


@dataclass(frozen=True)
class HeldFrom:
    """A cell held to a CPU quota, predicted from its twin without the placement."""

    cell: int  # the twin's index
    node: str
    role: str
    share: float  # the quota's CPUs
    unheld_us_per_commit: float
    predicted_tps: float
    measured_tps: float
    ratio: float  # measured over predicted

    def to_json(self) -> dict[str, JSON]:
        return {"cell": self.cell, "node": self.node, "role": self.role, "share": self.share,
                "unheld_us_per_commit": self.unheld_us_per_commit,
                "predicted_tps": self.predicted_tps, "measured_tps": self.measured_tps,
                "ratio": self.ratio}


@dataclass(frozen=True)
class DelayedFrom:
    """A cell with a release delay, predicted from its twin without it."""

    cell: int
    walsender: str
    delay_us: float
    stock_us_per_commit: float
    stock_freed_per_commit: float
    binding: str
    predicted_tps: float
    measured_tps: float
    ratio: float

    def to_json(self) -> dict[str, JSON]:
        return {"cell": self.cell, "walsender": self.walsender, "delay_us": self.delay_us,
                "stock_us_per_commit": self.stock_us_per_commit,
                "stock_freed_per_commit": self.stock_freed_per_commit,
                "binding": self.binding, "predicted_tps": self.predicted_tps,
                "measured_tps": self.measured_tps, "ratio": self.ratio}


@dataclass(frozen=True)
class LinkedFrom:
    """A cell behind an emulated link's delay, predicted from its twin without a link."""

    cell: int
    standby: str | None
    round_trip_ms: float
    clients: int
    unlinked_tps: float
    predicted_tps: float
    measured_tps: float
    ratio: float

    def to_json(self) -> dict[str, JSON]:
        return {"cell": self.cell, "standby": self.standby,
                "round_trip_ms": self.round_trip_ms, "clients": self.clients,
                "unlinked_tps": self.unlinked_tps, "predicted_tps": self.predicted_tps,
                "measured_tps": self.measured_tps, "ratio": self.ratio}


@dataclass(frozen=True)
class CellModel:
    """The bottleneck model of one cell (``model --json`` prints ``to_json()``)."""

    idx: int
    label: str
    measured_tps: float | None
    cpus: float
    clients: int
    sources: dict[str, str]  # where the demands come from -> in words
    bounds: tuple[Bound, ...]  # the CPU bounds, lowest first
    wait_bounds: tuple[WaitBound, ...]  # the commit anatomy's ceilings, beside them
    wait_missing: str | None  # why there are no wait bounds
    binding: str | None  # the lowest of every bound, CPU and wait
    binding_kind: str | None
    next: str | None
    beyond_cores: str | None  # what more cores would not raise
    knee_clients: float | None
    knee_from: str | None
    serial: tuple[Serial, ...]
    errors: tuple[str, ...]
    what_if: WhatIf | None
    missing: str | None  # why there are no CPU bounds
    # filled by run_model: the twins a prediction comes from, and the USL fits
    held_from: HeldFrom | None = None
    delayed_from: DelayedFrom | None = None
    linked_from: LinkedFrom | None = None
    usl: UslFit | None = None  # None: not fitted (run_model's fits=False)
    usl_cores: UslFit | None = None
    cores_fitted: bool = False  # usl_cores was looked for (the cell has a cores axis)

    def bound(self, resource: str | None) -> Bound | None:
        """The bound of ``resource``, CPU or wait."""
        return next((b for b in (*self.bounds, *self.wait_bounds)
                     if b.resource == resource), None)

    def to_json(self) -> dict[str, JSON]:
        """The JSON form, unbounded figures null (JSON has no infinity)."""
        out: dict[str, JSON] = {
            "idx": self.idx, "label": self.label, "measured_tps": self.measured_tps,
            "cpus": self.cpus, "clients": self.clients, "sources": dict(self.sources),
            "bounds": [b.to_json() for b in self.bounds],
            "wait_bounds": [b.to_json() for b in self.wait_bounds],
            "wait_missing": self.wait_missing, "binding": self.binding,
            "binding_kind": self.binding_kind, "next": self.next,
            "beyond_cores": self.beyond_cores, "knee_clients": self.knee_clients,
            "knee_from": self.knee_from, "serial": [s.to_json() for s in self.serial],
            "errors": list(self.errors),
            "what_if": self.what_if.to_json() if self.what_if else None,
            "missing": self.missing,
            "held_from": self.held_from.to_json() if self.held_from else None,
            "delayed_from": self.delayed_from.to_json() if self.delayed_from else None,
            "linked_from": self.linked_from.to_json() if self.linked_from else None}
        if self.usl is not None:
            out["usl"] = self.usl.to_json()
            if self.cores_fitted:
                out["usl_cores"] = self.usl_cores.to_json() if self.usl_cores else None
        return finite(out)


# (node, role) -> (µs per commit, where it comes from, processes)
Demands = dict[tuple[str, str], tuple[Interval, str, float]]


def role_kind(role: str) -> str | None:
    base = role.split(":", 1)[0]
    if base in SINGLE:
        return "process"
    if base in POOLS:
        return "pool"
    return None


def _interval(values: list[float]) -> Interval | None:
    values = [v for v in values if v is not None and v >= 0]
    if not values:
        return None
    if len(values) == 1:
        return Interval(values[0], values[0], values[0])
    ci = mean_ci(values)
    assert ci.low is not None and ci.high is not None
    return Interval(ci.mean, max(0.0, ci.low), ci.high)


def capacity_bound(resource: str, kind: str, demand_us: Interval, capacity: float,
                   source: str) -> Bound:
    """capacity / D commits a second; the interval from the demand's."""
    def tps(us: float) -> float:
        return math.inf if us <= 0 else capacity * 1e6 / us
    return Bound(resource, kind, demand_us, capacity,
                 Interval(tps(demand_us.mean), tps(demand_us.high), tps(demand_us.low)), source)


def clients_bound(clients: int, r1_ms: Interval, source: str) -> Bound:
    """N / R₁: N clients, each at most one commit per R₁."""
    def tps(ms: float) -> float:
        return math.inf if ms <= 0 else clients * 1000.0 / ms
    return Bound("clients", "clients", None, clients,
                 Interval(tps(r1_ms.mean), tps(r1_ms.high), tps(r1_ms.low)), source)


def sum_intervals(parts: list[Interval]) -> Interval:
    """A sum of independent means: means add, half widths in quadrature."""
    mean = sum(p.mean for p in parts)
    lo = math.sqrt(sum((p.mean - p.low) ** 2 for p in parts))
    hi = math.sqrt(sum((p.high - p.mean) ** 2 for p in parts))
    return Interval(mean, max(0.0, mean - lo), mean + hi)


def _replication(node: str, role: str) -> bool:
    """A walsender or a standby's process: what commits wait for only at the levels
    that wait for a standby."""
    return role.startswith("walsender") or node not in ("primary", "client")


def bounds(demands: Demands, *, cpus: float,
           clients: int, threads: int, r1_ms: Interval | None, r1_source: str,
           server_cores: float | None = None,
           quotas: dict[tuple[str, str], float] | None = None,
           waits_for_standbys: bool = True) -> list[Bound]:
    """Every bound of a cell, lowest first. ``demands``: (node, role) -> (µs per commit,
    source, processes). ``cpus``: the machine's, shared by every process here, pgbench
    included. ``server_cores``: the servers confined to that many of them (the
    ``cores`` axis; pgbench is not confined): the servers' demands then also meet a
    bound of their own on those cores. ``quotas``: (node, role) -> the CPUs a placement's
    quota gives that role's processes between them, which caps its capacity.
    ``waits_for_standbys`` False (a level whose commits wait for no standby: off, local):
    the walsenders and the standbys' processes pace no commit, so they get no bound of
    their own; their CPU still counts in the machine's."""
    held = quotas or {}
    out: list[Bound] = []
    for (node, role), (d, source, _) in sorted(demands.items()):
        kind = role_kind(role)
        if kind is None or d.mean <= 0:
            continue
        if not waits_for_standbys and _replication(node, role):
            continue  # replication runs beside the commits: it lags, it does not pace
        name = role if node in ("primary", "client") else f"{node} {role}"
        # a quota on "walsender" holds every walsender of the node in one group
        cap = held.get((node, role), held.get((node, role.split(":", 1)[0]), math.inf))
        if kind == "process":
            out.append(capacity_bound(name, kind, d, min(1.0, cap), source))
        else:
            # pgbench works with `threads` threads; sysbench's threads are its clients
            n = threads if role == "pgbench" else clients
            room = cpus if role in CLIENT_PROGRAMS or server_cores is None else server_cores
            out.append(capacity_bound(name + ("s" if role == "backend" else ""), kind, d,
                                      float(min(n, room, cap)), source))
    for (node, role), share in sorted(held.items()):
        members = [v for (n, r), v in demands.items()
                   if n == node and r.startswith(f"{role}:") and v[0].mean > 0]
        if role_kind(role) != "process" or len(members) < 2 or (
                not waits_for_standbys and _replication(node, role)):
            continue
        # the group's quota is shared: together they pass no more than share / ΣD
        name = f"{role}s" if node == "primary" else f"{node} {role}s"
        out.append(capacity_bound(f"{name} (one quota)", "pool",
                                  sum_intervals([d for d, _, _ in members]), share,
                                  ", ".join(sorted({s for _, s, _ in members}))))
    if demands:
        total = sum_intervals([d for d, _, _ in demands.values()])
        sources = sorted({s for _, s, _ in demands.values()})
        out.append(capacity_bound("machine", "machine", total, cpus, ", ".join(sources)))
    servers = [v for (node, _), v in demands.items() if node != "client"]
    if server_cores is not None and servers and server_cores < cpus:
        total = sum_intervals([d for d, _, _ in servers])
        out.append(capacity_bound("servers' cores", "machine", total, server_cores,
                                  ", ".join(sorted({s for _, s, _ in servers}))))
    if r1_ms is not None:
        out.append(clients_bound(clients, r1_ms, r1_source))
    return sorted(out, key=lambda b: b.max_tps.mean)


# --- the wait bounds -----------------------------------------------------------------------


@dataclass(frozen=True)
class Traced:
    """A cell's commit anatomy (its traced repeat) as the wait bounds read it."""

    anatomy: Anatomy
    repeats: int  # the traced repeats
    tps: float  # their mean TPS (slowed by the probe's traps)
    clients: int
    in_server_us: Interval  # the local flush and the commit wait per commit, as traced
    server_share: Interval  # s: of each client's time, the part in the flush and the wait
    walsender: str | None  # the sync walsender (analysis/sync_walsender.py), if it freed any
    waiters_per_release: float | None
    per_waiter_us: float | None  # its release time over the waiters freed, as traced
    release_us: float | None  # its release time over the commits, as traced
    release_share: float | None  # u: the part of a second it spent releasing


def _anatomy_interval(value: PerCommit) -> Interval | None:
    """analysis/anatomy.py's interval (low and high None with one traced repeat)."""
    mean, low, high = value.mean, value.low, value.high
    if mean is None:
        return None
    return Interval(float(mean), float(mean if low is None else max(0.0, low)),
                    float(mean if high is None else high))


def traced_commit(store: Store, cell: StoredCell) -> tuple[Traced | None, str | None]:
    """The commit anatomy of ``cell`` for the wait bounds, or None and why there is none."""
    probed = {r.id: r for r in store.repeats(cell.id) if r.probed}
    clients = cell.typed_params.clients or 0
    rows = queries.anatomy_of(store, list(probed)) if probed else []
    traced = sorted({repeat_id for repeat_id, _ in rows})
    watched = queries.watched_commits(store, [probed[r] for r in traced])
    anatomy = (cell_anatomy(store, {r: c for r, (c, _) in watched.items()}, clients)
               if traced else None)
    if anatomy is None:
        reasons = sorted({p.reason for _, p in queries.probes_of(store, list(probed))
                          if p.probe == ANATOMY_PROBE and p.status != "ran" and p.reason})
        return None, ("no commit anatomy: " + "; ".join(reasons) if reasons else
                      "no commit anatomy in this cell (it runs in a repeat of its own after "
                      "a probed one: [probes] anatomy, probed_repeats >= 1, root and bpftrace)")
    tps = sum(t for _, t in watched.values()) / len(traced)
    parts = {c.component: _anatomy_interval(c.us_per_commit) for c in anatomy.components}
    in_server = [v for k, v in parts.items() if k in ("local_flush", "commit_wait") and v]
    if not in_server or clients <= 0 or tps <= 0:
        return None, "the commit anatomy timed no commit in this cell"
    r = sum_intervals(in_server)
    share = Interval(*(x * tps / clients / 1e6 for x in (r.mean, r.low, r.high)))
    # the one rule names the walsender; its releases as the anatomy timed them
    chosen = choose(dataclasses.replace(
        stored_clues(store, cell, [r.walsender for r in anatomy.releases]),
        releases=anatomy.releases))
    busiest = next((r for r in anatomy.releases if chosen is not None
                    and r.walsender == chosen.role and r.waiters_per_release), None)
    per_waiter = float(busiest.per_waiter_us or 0) if busiest is not None else None
    per_commit = float(busiest.us_per_commit or 0) if busiest is not None else None
    return Traced(anatomy, len(traced), tps, clients, r, share,
                  busiest.walsender if busiest is not None else None,
                  busiest.waiters_per_release if busiest is not None else None, per_waiter,
                  per_commit, per_commit * tps / 1e6 if per_commit else None), None


def _wait_tps(demand_us: Interval, capacity: float) -> Interval:
    """A wait bound's ceiling: capacity / its time a commit (capacity_bound's)."""
    return capacity_bound("", "wait", demand_us, capacity, "").max_tps


SHORTAGE_PARTS = ("run_queue",)  # a commit's wait for a core: this machine's, not another's


def wait_bounds(t: Traced, measured: Interval, *,
                at_clients: int | None = None, elsewhere: bool = False,
                release_wait: tuple[float, float] | None = None) -> list[WaitBound]:
    """The Little's-law and serial-release bounds of a traced cell whose measured repeats
    ran at ``measured`` TPS: its shares of time (s, u) kept, its durations those of the
    measured repeats (R = s·N/X, c = u/X, the interval from X's); ``at_clients``: N' / R
    with R as at the cell's own N (another machine's client count). ``elsewhere``: on a
    machine with the cores this one lacks, the time a woken backend waited here for a
    core (the anatomy's run queue) is left out of R, and ``release_wait`` (µs a commit
    the walsender waited here for a core while releasing, and the floor: its CPU a commit
    in the release) out of c."""
    if measured.mean <= 0:
        return []
    n = t.clients if at_clients is None else at_clients
    scale = measured.mean / t.tps  # the measured repeats' pace over the traced one's
    traced = {c.component: float(c.us_per_commit.mean or 0.0) for c in t.anatomy.components}
    short = sum(traced.get(p, 0.0) for p in SHORTAGE_PARTS) if elsewhere else 0.0
    kept = max(0.0, 1 - short / t.in_server_us.mean) if t.in_server_us.mean > 0 else 1.0

    def per_commit(share: Interval, times: float) -> Interval:
        """share × times / X, in µs: the higher X, the shorter."""
        def us(sh: float, x: float) -> float:
            return math.inf if x <= 0 else sh * times * 1e6 / x
        return Interval(us(share.mean, measured.mean), us(share.low, measured.high),
                        us(share.high, measured.low))

    sh = t.server_share
    s = Interval(sh.mean * kept, sh.low * kept, sh.high * kept)
    parts = {c: us / scale for c, us in traced.items() if c in ("local_flush", *WAIT_PARTS)}
    at = "" if n == t.clients else f", R as at {t.clients} clients"
    if short:
        at += f", without the {short / scale:,.0f} µs a commit waited here for a core"
    r = per_commit(s, t.clients)
    out: list[WaitBound] = [LittleBound(
        LITTLE, "wait", r, float(n), _wait_tps(r, float(n)),
        f"commit anatomy: {100 * s.mean:.0f} % of a client's time in the local flush and the "
        f"commit wait, at the measured {measured.mean:,.0f} tps{at}",
        at_clients=t.clients, share=s.mean, traced_tps=t.tps, scale=scale,
        as_traced_tps=n * 1e6 / t.in_server_us.mean, traced_repeats=t.repeats,
        # what R carries to the other machine, and what it leaves here
        carried=tuple(p for p in parts if not (short and p in SHORTAGE_PARTS)),
        dropped=tuple(p for p in parts if short and p in SHORTAGE_PARTS),
        clients=n, share_low=s.low, share_high=s.high,
        traced_commits=t.anatomy.commits, parts_us=parts)]
    if t.release_us and t.release_share:
        u = Interval(t.release_share, t.release_share, t.release_share)
        dropped_us = 0.0
        if elsewhere and release_wait is not None:
            # the release's time a commit at the measured pace, less what the walsender
            # spent runnable but not running; never below its CPU in the release
            here_us = u.mean * 1e6 / measured.mean
            dropped_us = min(release_wait[0], max(0.0, here_us - release_wait[1]))
            kept_u = u.mean * (1 - dropped_us / here_us) if here_us > 0 else u.mean
            u = Interval(kept_u, kept_u, kept_u)
        waited = (f", without the {dropped_us:,.1f} µs a commit it waited here for a core"
                  if dropped_us else "")
        c = per_commit(u, 1.0)
        out.append(ReleaseBound(
            RELEASE, "wait", c, 1.0, _wait_tps(c, 1.0),
            f"commit anatomy: {t.walsender} releasing {100 * u.mean:.1f} % of the time, one "
            f"waiter at a time, at the measured {measured.mean:,.0f} tps{waited}",
            at_clients=t.clients, share=u.mean, traced_tps=t.tps, scale=scale,
            as_traced_tps=1e6 / t.release_us, traced_repeats=t.repeats,
            carried=("release",), dropped=("walsender run delay",) if dropped_us else (),
            walsender=t.walsender, waiters_per_release=t.waiters_per_release,
            per_waiter_us_as_traced=t.per_waiter_us, us_per_commit_as_traced=t.release_us,
            dropped_us=dropped_us))
    return out


def _measured(cell: StoredCell) -> Interval | None:
    """The cell's TPS over its measured repeats with its 95 % interval."""
    if cell.tps_mean is None:
        return None
    mean = float(cell.tps_mean)
    low = mean if cell.tps_ci_low is None else max(0.0, float(cell.tps_ci_low))
    high = mean if cell.tps_ci_high is None else float(cell.tps_ci_high)
    return Interval(mean, low, high)


# --- the Universal Scalability Law ---------------------------------------------------------


# X(N) at one N, or at each of an array of them (scipy's curve_fit passes its x)
Concurrency = TypeVar("Concurrency", float, "npt.NDArray[np.float64]")


def usl(n: Concurrency, lam: float, sigma: float, kappa: float) -> Concurrency:
    return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


def _fit(points: list[tuple[float, float]]) -> tuple[float, float, float] | None:
    import numpy as np
    from scipy.optimize import curve_fit

    x = np.array([p[0] for p in points], dtype=float)
    y = np.array([p[1] for p in points], dtype=float)
    lowest = x.min()
    lam0 = float(y[x == lowest].mean() / lowest)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            params, _ = curve_fit(usl, x, y, p0=(lam0, 0.05, 0.001),
                                  bounds=([0.0, 0.0, 0.0], [np.inf, 1.0, np.inf]),
                                  maxfev=20000)
    except (RuntimeError, ValueError):
        return None
    return float(params[0]), float(params[1]), float(params[2])


def peak(lam: float, sigma: float, kappa: float) -> tuple[float, float]:
    """The concurrency at which X(N) peaks, and X there (∞ without coherency cost)."""
    if kappa <= 0:
        return math.inf, (lam / sigma if sigma > 0 else math.inf)
    n = math.sqrt(max(0.0, 1 - sigma) / kappa)
    return n, float(usl(n, lam, sigma, kappa))


def fit_usl(samples: dict[float, list[float]], *, axis: str | None = None, seed: int = 1,
            rounds: int = BOOTSTRAP) -> UslFit:
    """σ, κ, λ, the peak and its TPS, each with a 95 % bootstrap interval (repeats
    resampled within each x), from TPS samples by x (clients or cores); or the reason
    there is no fit."""
    xs = sorted(x for x, v in samples.items() if v)
    if len(xs) < USL_MIN_POINTS:
        return UslFit(axis, f"{len(xs)} distinct values measured; the law has three "
                            f"parameters and needs {USL_MIN_POINTS}")
    points = [(x, v) for x in xs for v in samples[x]]
    best = _fit(points)
    if best is None:
        return UslFit(axis, "the least-squares fit did not converge")
    rng = random.Random(seed)
    boot: list[tuple[float, float, float, float, float]] = []
    for _ in range(rounds):
        resampled = [(x, rng.choice(samples[x])) for x in xs for _ in samples[x]]
        got = _fit(resampled)
        if got is not None:
            boot.append((*got, *peak(*got)))
    found: list[Estimate] = []
    for i in range(5):  # λ, σ, κ, the peak's N and TPS
        value = best[i] if i < 3 else peak(*best)[i - 3]
        kept = sorted(b[i] for b in boot if math.isfinite(b[i]))
        if len(kept) >= 0.9 * len(boot) and kept:
            lo, hi = kept[int(0.025 * (len(kept) - 1))], kept[int(0.975 * (len(kept) - 1))]
        else:  # many resamples without a peak: the upper end is unbounded
            lo = kept[int(0.025 * (len(kept) - 1))] if kept else value
            hi = math.inf
        found.append(Estimate(value, lo, hi))
    return UslFit(axis, None, len(points), tuple(xs), len(boot), *found)


# --- a run's cells ---------------------------------------------------------------------------


def _series_key(params: dict[str, Any], leave_out: str) -> str:
    return json.dumps({k: v for k, v in params.items() if k != leave_out}, sort_keys=True,
                      default=str)


def _serial(store: Store, cell_id: int, role: str, demand: Interval) -> Serial | None:
    """The walsender's CPU per commit spent releasing waiters (a lower bound on the time
    it holds SyncRepLock per commit), from its flame graph."""
    found = queries.last_role_frame(store, cell_id, "primary", role, RELEASE_FRAME)
    if found is None or not found.cpu_us:
        return None
    share = float(found.frame_us or 0) / float(found.cpu_us)
    return Serial(role, share, RELEASE_FRAME, demand.mean * share,
                  (1e6 / (demand.mean * share)) if share > 0 else None)


def cell_demands(store: Store, cell_id: int) -> Demands:
    """(node, role) -> (µs per commit with its interval over repeats, where it comes
    from, processes) of a cell."""
    demands: Demands = {}
    for r in role_values(store, cell_id):
        d = _interval(r["cpu_us_per_commit"])
        if d is not None and r["cpu_source"] != "none":
            demands[(r["node"], r["role"])] = (d, r["cpu_source"], 1.0)
    if any(source == "untraced" for _, source, _ in demands.values()):
        # all from the same (measured) repeats: a role seen only in probed ones is the
        # probes' own (the samplers' sessions on the standbys), not the workload's
        demands = {k: v for k, v in demands.items() if v[1] == "untraced"}
    return demands


def machine_cpus(machine: Mapping[str, JSON]) -> float:
    """The CPUs a run's machine record (run/machine.machine_metadata) says the run
    could use: its usable ones, else its count, else 1."""
    cpus: Any = machine.get("cpus_usable") or machine.get("cpu_count") or 1
    return float(cpus)


def cell_model(store: Store, cell: StoredCell, by_series: dict[str, dict[int, StoredCell]],
               machine: Mapping[str, JSON], *, cores: float | None = None,
               clients: int | None = None) -> CellModel:
    params, p = cell.params, cell.typed_params
    n_clients = p.clients or 1
    threads = p.threads or 1
    cpus = machine_cpus(machine)
    server_cores = p.cores
    demands = cell_demands(store, cell.id)
    one = by_series[_series_key(params, "clients")].get(1)
    if one is not None and one.lat_mean_ms is not None:
        reps = [float(r.lat_mean_ms) for r in store.repeats(one.id)
                if not r.probed and r.lat_mean_ms is not None]
        r1 = _interval(reps) or Interval(float(one.lat_mean_ms), float(one.lat_mean_ms),
                                         float(one.lat_mean_ms))
        r1_source = f"the 1-client cell {one.idx}'s mean latency"
    elif demands:
        r1 = sum_intervals([d for d, _, _ in demands.values()])
        r1 = Interval(r1.mean / 1000, r1.low / 1000, r1.high / 1000)
        r1_source = "the sum of the demands (no 1-client cell: a weaker bound)"
    else:
        r1, r1_source = None, ""
    # a CPU quota is the placement's: it holds its role here and on any machine
    quotas = {(q.node, q.role): q.share for q in queries.quota_means(store, cell.id)}
    waiting = p.synchronous_commit in WAITING_LEVELS
    found = bounds(demands, cpus=cpus, clients=n_clients, threads=threads, r1_ms=r1,
                   r1_source=r1_source, server_cores=server_cores, quotas=quotas,
                   waits_for_standbys=waiting)
    measured = float(cell.tps_mean) if cell.tps_mean is not None else None
    x = _measured(cell)
    traced, wait_missing = traced_commit(store, cell)
    waits = wait_bounds(traced, x) if traced is not None and x is not None else []
    if traced is not None and x is None:
        wait_missing = "the cell has no measured throughput to carry the anatomy's shares to"
    every = sorted([*found, *waits], key=lambda b: b.max_tps.mean)
    errors = [f"measured {measured:,.0f} tps is above the {b.resource} bound "
              f"({b.max_tps.high:,.0f} at most): a modelling error ("
              + ("the traced repeat's shares of time do not hold in the measured ones"
                 if b.kind == "wait" else "a demand overstated, or a process that is not one")
              + ")"
              for b in every if measured is not None and measured > b.max_tps.high * 1.0001]
    # the highest rate whatever the clients: the CPU capacities and the serial release
    # (Little's law depends on the clients, as the clients bound does)
    capacity = [b for b in every if b.kind not in ("clients", "wait")
                or (isinstance(b, WaitBound) and b.law == "release")]
    x_max = capacity[0].max_tps.mean if capacity else None
    knee = (r1.mean / 1000.0 * x_max) if (r1 is not None and x_max is not None) else None
    walsenders = [(role, d) for (node, role), (d, _, _) in demands.items()
                  if node == "primary" and role.startswith("walsender")]
    serial = [s for role, d in sorted(walsenders, key=lambda w: -w[1].mean)
              if (s := _serial(store, cell.id, role, d)) is not None]
    what_if = None
    if cores is not None or clients is not None:
        c = float(cores) if cores is not None else cpus
        n = clients if clients is not None else n_clients
        r1_at = r1
        # on C cores the servers are no longer confined: a machine of C CPUs
        hypo = bounds(demands, cpus=c, clients=n, threads=min(threads, n), r1_ms=r1_at,
                      r1_source=r1_source, quotas=quotas, waits_for_standbys=waiting)
        # the wait bounds there: the release's cost per waiter as here, the commit's time
        # in the server as at this cell's clients (docs/decisions.md, "The wait bounds")
        # the run queue stays here only where the other machine has the cores this
        # one lacked
        release_wait = None
        if traced is not None and traced.walsender is not None and c > cpus:
            runq = role_run_delay(store, cell.id, "primary", traced.walsender)
            share = next((sv.share for sv in serial if sv.role == traced.walsender), None)
            demand = demands.get(("primary", traced.walsender))
            if runq and share and demand is not None:
                # its wait for a core, in the part of its time spent releasing as its CPU
                release_wait = (runq * share, demand[0].mean * share)
        hypo_waits = (wait_bounds(traced, x, at_clients=n, elsewhere=c > cpus,
                                  release_wait=release_wait)
                      if traced is not None and x is not None else [])
        lowest = sorted([*hypo, *hypo_waits], key=lambda b: b.max_tps.mean)
        what_if = WhatIf(c, n, tuple(hypo), tuple(hypo_waits),
                         lowest[0].resource if lowest else None,
                         lowest[0].kind if lowest else None,
                         lowest[0].max_tps if lowest else None)
    return CellModel(
        idx=cell.idx, label=cell.label, measured_tps=measured, cpus=cpus, clients=n_clients,
        sources={s: CPU_SOURCES[s] for s in sorted({s for _, s, _ in demands.values()})},
        bounds=tuple(found),
        # the commit anatomy's ceilings (kind "wait"), beside the CPU bounds
        wait_bounds=tuple(waits), wait_missing=wait_missing,
        # the lowest of every bound, CPU and wait
        binding=every[0].resource if every else None,
        binding_kind=every[0].kind if every else None,
        next=every[1].resource if len(every) > 1 else None,
        # what more cores would not raise: the lowest serial point, the clients or the wait
        beyond_cores=next((b.resource for b in every
                           if b.kind in ("process", "clients", "wait")
                           and b.resource != (every[0].resource if every else None)), None),
        knee_clients=knee, knee_from=r1_source if knee is not None else None,
        serial=tuple(serial), errors=tuple(errors), what_if=what_if,
        missing=None if demands else "no CPU per process role was measured in this cell "
                                     "(probes off, or an attached cluster)")


def wait_name(b: WaitBound) -> str:
    """A wait bound in words: what sets it."""
    if isinstance(b, ReleaseBound):
        return (f"{b.walsender}'s serial release ({b.demand_us.mean:,.1f} µs "
                "a commit under SyncRepLock)")
    assert isinstance(b, LittleBound)
    n = b.clients
    # a level that waits for no standby (local): the flush alone
    what = "local flush and wait" if set(b.parts_us) - {"local_flush"} else "local flush"
    return (f"the commit's {what} (Little's law: {n} client"
            f"{'' if n == 1 else 's'}, {b.demand_us.mean / 1000:,.2f} ms each in "
            "the server)")


def headline(model: CellModel) -> str | None:
    """One sentence: the bound that binds here (a CPU bound or a wait bound), and the one
    more cores would not raise."""
    binding = model.bound(model.binding)
    if binding is None:
        return None
    if isinstance(binding, WaitBound):
        what = wait_name(binding)
    elif binding.kind == "process":
        held = binding.capacity < 1  # a placement's CPU quota
        what = (f"{binding.resource} (one process"
                + (f", held to {binding.capacity:g} CPU by its quota)" if held else ")"))
    else:
        what = (f"the {model.cpus:g} CPUs" if binding.kind == "machine"
                else binding.resource)
    plural = binding.kind == "machine" or binding.resource.endswith("s")
    text = f"here {what} bind{'' if plural else 's'} at " \
           f"~{fmt.tps_short(binding.max_tps.mean)} tps"
    cpu = [b for b in model.bounds if b.kind != "clients"]
    if isinstance(binding, WaitBound) and cpu:
        text += (f", below every CPU bound (the lowest: {cpu[0].resource} at "
                 f"~{fmt.tps_short(cpu[0].max_tps.mean)})")
    beyond = model.bound(model.beyond_cores)
    if beyond is not None:
        if isinstance(beyond, WaitBound):
            name = wait_name(beyond)
        else:
            name = beyond.resource + (" alone" if beyond.kind == "process" else "")
        text += (f"; {name} would bind at ~{fmt.tps_short(beyond.max_tps.mean)} "
                 "tps on a machine with enough cores")
    return text


def _twin(cell: StoredCell, cells: list[StoredCell], axis: str,
          alike: Callable[[StoredCell], bool]) -> StoredCell | None:
    """The cell of ``cells`` that differs from ``cell`` in ``axis`` alone and is
    ``alike`` (without the quota, the delay, the link), for a prediction from it."""
    key = _series_key(cell.params, axis)
    return next((c for c in cells if c.id != cell.id and _series_key(c.params, axis) == key
                 and alike(c)), None)


def held_from(store: Store, cell: StoredCell, cells: list[StoredCell]) -> HeldFrom | None:
    """A cell whose placement held a role to a CPU quota, predicted from the cell that
    differs only in having no placement: the quota's CPUs over that role's CPU per commit
    there (a process held to q CPUs passes at most q / D commits a second). None where
    the cell holds no role, or the run has no such cell."""
    quotas = queries.quota_means(store, cell.id)
    if not quotas or cell.tps_mean is None:
        return None
    waiting = cell.typed_params.synchronous_commit in WAITING_LEVELS
    free = _twin(cell, cells, "placement",
                 lambda c: c.typed_params.placement in (None, "none"))
    if free is None:
        return None
    demands = cell_demands(store, free.id)
    best: HeldFrom | None = None
    for q in quotas:
        d = demands.get((q.node, q.role))
        group = [v for (n, r), v in demands.items()
                 if n == q.node and r.startswith(f"{q.role}:")]
        if d is None and group:  # "walsender": every walsender of the node, one quota
            total = sum_intervals([v[0] for v in group])
            d = (total, group[0][1], float(len(group)))
        if d is None or d[0].mean <= 0:
            continue
        if not waiting and _replication(q.node, q.role):
            continue  # replication paces no commit at this level
        # one process uses one CPU at most, whatever its quota
        cpus = min(q.share, d[2]) if role_kind(q.role) == "process" else q.share
        tps = cpus * 1e6 / d[0].mean
        if best is None or tps < best.predicted_tps:
            best = HeldFrom(free.idx, q.node, q.role, q.share, d[0].mean, tps,
                            float(cell.tps_mean), float(cell.tps_mean) / tps)
    return best


RELEASE_DELAY = "synchronous_release_delay_us"  # presets/syncrep-release-delay-18.patch


def _release_delay_us(store: Store, cell: StoredCell) -> float:
    """The primary's synchronous_release_delay_us as its server had it (0: stock, or a
    server without the setting)."""
    value = queries.primary_setting(store, cell.run_id, cell.params, RELEASE_DELAY)
    try:
        return float(value) if value is not None else 0.0
    except ValueError:
        return 0.0


# what each cluster has of its own whatever the spec says: where it listens, its files
PER_CLUSTER = frozenset({"port", "listen_addresses", "unix_socket_directories",
                         "cluster_name", "data_directory", "config_file", "hba_file",
                         "ident_file", "external_pid_file", "log_directory",
                         "primary_conninfo", "primary_slot_name"})


def _primary_settings_but(store: Store, cell: StoredCell, name: str) -> dict[str, str]:
    """The primary's settings as its server had them, but ``name`` and those each cluster
    has of its own (PER_CLUSTER)."""
    return {k: v for k, v in queries.primary_settings(store, cell.run_id, cell.params).items()
            if k != name and k not in PER_CLUSTER}


def delayed_from(store: Store, cell: StoredCell, cells: list[StoredCell],
                 machine: Mapping[str, JSON]) -> DelayedFrom | None:
    """A cell whose sync walsender spends d µs more on each waiter it frees (the slowed
    build's synchronous_release_delay_us), predicted from the cell that differs only in
    having it 0: that cell's demands with the walsender's raised by d times the waiters
    it freed per commit there (its commit anatomy), every bound recomputed (the
    walsender's one CPU, the machine's), the lowest taken. None where the cell has no
    delay, or the run no such twin with a commit anatomy.

    What it leaves out (docs/decisions.md, "Two ways to make the walsender bind"): with
    the loop slow, SyncRepLock is held long, and most backends that wait for it find their
    WAL confirmed once they have it and never queue, so fewer waiters are freed per
    commit than in the stock cell (0.41 against 0.82 at 1 ms a waiter, 64 clients)."""
    delay = _release_delay_us(store, cell)
    if (delay <= 0 or cell.tps_mean is None
            or cell.typed_params.synchronous_commit not in WAITING_LEVELS):
        return None
    # the twin differs in the delay alone: its primary's other settings are the same
    others = _primary_settings_but(store, cell, RELEASE_DELAY)
    stock = _twin(cell, cells, "settings", lambda c: (
        c.tps_mean is not None and _release_delay_us(store, c) == 0
        and _primary_settings_but(store, c, RELEASE_DELAY) == others))
    if stock is None:
        return None
    traced, _ = traced_commit(store, stock)
    if traced is None or traced.walsender is None:
        return None
    demands = cell_demands(store, stock.id)
    sender = ("primary", traced.walsender)
    freed = next((r.freed_per_commit for r in traced.anatomy.releases
                  if r.walsender == traced.walsender), None)
    if sender not in demands or not freed:
        return None
    d, source, processes = demands[sender]
    added = delay * float(freed)
    demands[sender] = (Interval(d.mean + added, d.low + added, d.high + added), source,
                       processes)
    found = bounds(demands, cpus=machine_cpus(machine),
                   clients=cell.typed_params.clients or 1,
                   threads=cell.typed_params.threads or 1, r1_ms=None, r1_source="")
    lowest = min((b for b in found if b.kind != "clients"), key=lambda b: b.max_tps.mean)
    tps = lowest.max_tps.mean
    return DelayedFrom(stock.idx, traced.walsender, delay, d.mean, float(freed),
                       lowest.resource, tps, float(cell.tps_mean), float(cell.tps_mean) / tps)


def linked_from(store: Store, cell: StoredCell,
                cells: list[StoredCell]) -> LinkedFrom | None:
    """A cell whose standbys are behind an emulated link with a delay, predicted from the
    cell that differs only in having no link (Little's law: N clients, each commit's time
    there plus the round trip the link adds to the sync standby's answer). None where
    the cell's links add no delay, or the run has no such twin."""
    if cell.tps_mean is None or cell.typed_params.synchronous_commit not in WAITING_LEVELS:
        return None
    last = queries.last_measured_repeat(store, cell.id)
    added: dict[str, float] = {}  # standby -> the round trip its link adds, ms
    for link in queries.links_of(store, last) if last is not None else []:
        try:
            ends = json.loads(link.applied_json or "[]")
        except ValueError:
            continue
        if link.a != "primary" or not isinstance(ends, list):
            continue
        added[link.b] = sum(float((e.get("profile") or {}).get("delay_ms") or 0.0)
                            for e in ends if isinstance(e, dict))
    if not added or max(added.values()) <= 0:
        return None
    free = _twin(cell, cells, "link", lambda c: (
        c.tps_mean is not None and c.typed_params.link in (None, "none", "socket")))
    if free is None or not free.tps_mean:
        return None
    traced, _ = traced_commit(store, cell)
    standby = (traced.walsender.partition(":")[2]
               if traced is not None and traced.walsender else "")
    # the sync standby's link, none for one beside the primary (a "socket" link, the
    # seed's group 4); not known, the quickest (the first to answer)
    beside = int(cell.params.get("standbys") or 0) > len(added)
    rtt_ms = (added.get(standby, 0.0) if standby
              else 0.0 if beside else min(added.values()))
    n = cell.typed_params.clients or 1
    unlinked = float(free.tps_mean or 0.0)
    per_commit_s = n / unlinked + rtt_ms / 1000
    tps = n / per_commit_s
    return LinkedFrom(free.idx, standby or None, rtt_ms, n, unlinked, tps,
                      float(cell.tps_mean), float(cell.tps_mean) / tps)


def series_index(cells: list[StoredCell]) -> dict[str, dict[int, StoredCell]]:
    """Done cells by their series (every parameter but clients), then by clients."""
    out: dict[str, dict[int, StoredCell]] = defaultdict(dict)
    for c in cells:
        if c.status == "done":
            out[_series_key(c.params, "clients")][c.typed_params.clients or 1] = c
    return out


def run_model(folder: Path, *, cell: int | None = None, cores: float | None = None,
              clients: int | None = None, fits: bool = True) -> list[CellModel]:
    """The model of every done cell of the run in ``folder`` (or of cell ``cell``), each
    with the USL fit of its series over clients (``usl``) and, where the run varies
    them, over cores (``usl_cores``); ``fits`` False leaves the fits (and their
    bootstrap) out."""
    store = Store(folder, create=False)
    try:
        run = store.run()
        machine = run.machine
        cells = [c for c in store.cells(run.id) if c.status == "done"]
        if cell is not None and not any(c.idx == cell for c in cells):
            from syncrep_lab.errors import UserError

            done = ", ".join(str(c.idx) for c in cells) or "none"
            raise UserError(f"the run has no finished cell {cell}",
                            f"choose one of its finished cells ({done}), or leave --cell out")
        by_series = series_index(cells)
        fitted = {axis: _fits(store, cells, axis) if fits else {}
                  for axis in ("clients", "cores")}
        models = []
        for c in cells:
            if cell is not None and c.idx != cell:
                continue
            m = cell_model(store, c, by_series, machine, cores=cores, clients=clients)
            params = c.params
            m = dataclasses.replace(
                m, held_from=held_from(store, c, cells),
                delayed_from=delayed_from(store, c, cells, machine),
                linked_from=linked_from(store, c, cells))
            if fits:
                m = dataclasses.replace(
                    m, usl=fitted["clients"].get(_series_key(params, "clients")) or UslFit(
                        None, "the run measured this series at one client count"),
                    usl_cores=fitted["cores"].get(_series_key(params, "cores")),
                    cores_fitted=c.typed_params.cores is not None)
            models.append(m)
    finally:
        store.close()
    return models


def _fits(store: Store, cells: list[StoredCell], axis: str) -> dict[str, UslFit]:
    """The USL fit of each series that varies ``axis``, by series key."""
    series: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for c in cells:
        params = c.params
        if params.get(axis) is None:
            continue
        series[_series_key(params, axis)][float(params[axis])] += [
            float(r.tps) for r in store.repeats(c.id) if not r.probed]
    return {key: fit_usl(samples, axis=axis) for key, samples in series.items()
            if len(samples) >= 2}
