"""Where a synchronous commit's time goes, per cell, from the commit anatomy probe
(probes/anatomy.py) of its probed repeats (an observe window's: of its slices): each
component per commit with its share of the commit wait, its distribution per event, the
sync walsender's releases, and the two ceilings the waiting itself sets.

The components of a backend's commit:

- ``local_flush``: the WAL flush on the primary (``XLogFlush``), waiting for another
  backend's flush included (group commit);
- ``commit_wait``: ``SyncRepWaitForLSN``, entry to return, split into
  ``standby_wait`` (until the walsender's release that freed it began: the standby's
  round trip), ``wakeup_queue`` (from that release's start to the walsender's signal
  aimed at this backend: its place in the walsender's loop, the seed's mechanism) and
  ``run_queue`` (from the signal to the return: the scheduler, then the wait's own
  exit); a wait that returned with no signal seen for it is ``unsignalled``, whole.

The sync walsender's, per release: how long it took (``release``), the time between
releases (``release_gap``: the round trip as the walsender sees it) and the waiters it
freed (``waiters_freed``, a count, not a time).

The ceilings (the model's shape, not a forecast):

- **Little's law at this concurrency**: with ``clients`` sessions and R seconds of each
  commit spent in the flush and the wait, no more than clients / R commits a second,
  however fast everything else became;
- **the serial release**: the walsender frees waiters one at a time, holding
  SyncRepLock; its release time over the commits of the same time is a commit's share
  of that serial work, and no more commits than one per that share pass in a second.
  Over the commits, not over the waiters freed: a backend that reaches the wait after
  the standby already confirmed its WAL returns without queueing, and when the releases
  are slow (the lock held long), most do (0.59 of the commits at 1 ms a waiter, 18.6
  built with presets/syncrep-release-delay-18.patch, 64 clients).

For comparisons between cells (analysis/compare.py) the same figures one value per
anatomy repeat (:func:`anatomy_values`), and why a cell has none (:func:`why_no_anatomy`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from syncrep_lab.json_form import JSON
from syncrep_lab.stats.histogram import LatencyHistogram
from syncrep_lab.stats.intervals import mean_ci
from syncrep_lab.store import Store, queries

BACKEND_COMPONENTS = ("local_flush", "commit_wait", "standby_wait", "wakeup_queue",
                      "run_queue", "unsignalled")
WAIT_PARTS = ("standby_wait", "wakeup_queue", "run_queue", "unsignalled")
WALSENDER_COMPONENTS = ("release", "release_gap", "waiters_freed")
# the sync standby's half (probes/standby_anatomy.py), rows of standby:NAME
STANDBY = "standby:"
STANDBY_PARTS = ("send", "transit_out", "queue", "write", "flush", "replay", "reply",
                 "transit_back", "reply_handling")
STANDBY_WHOLE = "whole"
STANDBY_SYNC = "sync_call"  # each fdatasync/fsync of the walreceiver, per call
DISTRIBUTION_BINS = 4  # per power of two: the report's histograms


@dataclass(frozen=True)
class PerCommit:
    """A figure's mean over the repeats traced and its 95 % interval (low and high None
    with one repeat; all None where none timed it)."""

    mean: float | None
    low: float | None
    high: float | None

    def to_json(self) -> dict[str, JSON]:
        return {"mean": self.mean, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class Component:
    """One component of a backend's commit."""

    component: str
    us_per_commit: PerCommit  # over the repeats traced (an observe window's slices)
    share_of_wait: float | None  # of commit_wait's time (its parts only)
    events: int  # how many times it happened
    mean_us: float | None  # per event
    p50_us: float | None
    p99_us: float | None
    # per event, for a chart: (low µs, high µs, events) at DISTRIBUTION_BINS per octave
    distribution: tuple[tuple[float, float, int], ...]

    def to_json(self) -> dict[str, JSON]:
        return {"component": self.component, "us_per_commit": self.us_per_commit.to_json(),
                "share_of_wait": self.share_of_wait, "events": self.events,
                "mean_us": self.mean_us, "p50_us": self.p50_us, "p99_us": self.p99_us,
                "distribution": [[low, high, n] for low, high, n in self.distribution]}


@dataclass(frozen=True)
class Releases:
    """A walsender's releases of waiting backends."""

    walsender: str  # walsender:NAME, the standby it serves
    releases: int
    waiters_per_release: float | None
    release_us: float | None  # mean per release
    per_waiter_us: float | None  # release time over waiters freed
    freed_per_commit: float | None  # waiters freed over the traced commits
    us_per_commit: float | None  # release time over the traced commits: the serial share
    gap_us: float | None  # mean time between releases
    gap_p99_us: float | None

    def to_json(self) -> dict[str, JSON]:
        return {"walsender": self.walsender, "releases": self.releases,
                "waiters_per_release": self.waiters_per_release,
                "release_us": self.release_us, "per_waiter_us": self.per_waiter_us,
                "freed_per_commit": self.freed_per_commit,
                "us_per_commit": self.us_per_commit, "gap_us": self.gap_us,
                "gap_p99_us": self.gap_p99_us}


@dataclass(frozen=True)
class StandbyParts:
    """The sync standby's half of the commits that slept to their release
    (probes/standby_anatomy.py): ``standby_wait`` in its parts, each per commit joined,
    with its share of the whole; ``whole_us`` is the anatomy's standby_wait of those
    commits and ``sum_ratio`` the parts' sum over it (measured apart: the check that
    they add up). A part not measured (the flush under remote_write, or with fsync off)
    is absent."""

    standby: str  # standby:NAME
    commits: int  # commits joined
    parts: tuple[Component, ...]  # share_of_wait: of the whole
    whole_us: float | None  # per commit joined
    sum_ratio: float | None
    sync_us: float | None = None  # the walreceiver's fdatasync/fsync, mean per call
    syncs: int = 0  # those calls

    def to_json(self) -> dict[str, JSON]:
        return {"standby": self.standby, "commits": self.commits,
                "parts": [p.to_json() for p in self.parts], "whole_us": self.whole_us,
                "sum_ratio": self.sum_ratio, "sync_us": self.sync_us, "syncs": self.syncs}

    def binding(self) -> Component | None:
        """The part that takes the most of the whole."""
        return max((p for p in self.parts if p.share_of_wait is not None),
                   key=lambda p: p.share_of_wait or 0.0, default=None)


@dataclass(frozen=True)
class Anatomy:
    """A cell's commit anatomy (``costs --json``: ``anatomy``; None: not measured)."""

    commits: int  # the traced repeats' transactions (observe: that wrote)
    components: tuple[Component, ...]
    releases: tuple[Releases, ...]
    little_bound_tps: float | None
    release_bound_tps: float | None
    standby: tuple[StandbyParts, ...] = ()  # the sync standby's half, where measured

    def to_json(self) -> dict[str, JSON]:
        found: dict[str, JSON] = {
            "commits": self.commits, "components": [c.to_json() for c in self.components],
            "releases": [r.to_json() for r in self.releases],
            "little_bound_tps": self.little_bound_tps,
            "release_bound_tps": self.release_bound_tps}
        if self.standby:  # a key only where measured: the outputs before it are the same
            found["standby"] = [s.to_json() for s in self.standby]
        return found


def _us(ns: float | None) -> float | None:
    return None if ns is None else ns / 1000.0


def per_commit(values: list[float]) -> PerCommit:
    """The mean of per-repeat figures and its interval (all None where there are none)."""
    if not values:
        return PerCommit(None, None, None)
    ci = mean_ci(values)
    return PerCommit(ci.mean, ci.low, ci.high)


def releasing(releases: Iterable[Releases]) -> Releases | None:
    """The walsender that freed the waiters: of those that freed any, the one with the
    most releases; None where none did (commits that do not wait). Not simply the one
    with the most releases: a potential standby's walsender enters
    SyncRepReleaseWaiters on every reply too and returns having freed nobody, and at
    some loads it makes more of those calls than the sync one makes releases (15.18 at
    8 clients: 32,105 against 31,699)."""
    return max((r for r in releases if r.waiters_per_release),
               key=lambda r: r.releases, default=None)


def cell_anatomy(store: Store, commits: dict[int, int], clients: int) -> Anatomy | None:
    """The anatomy of the repeats in ``commits`` (repeat id -> transactions) that have
    one (a run's probed repeat of its own, the slices of an ``observe --anatomy``
    window); None when none of them has one."""
    rows = queries.anatomy_of(store, commits)
    if not rows:
        return None
    measured = sorted({repeat_id for repeat_id, _ in rows})
    per_repeat: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    events: dict[tuple[str, str], int] = defaultdict(int)
    totals: dict[tuple[str, str], float] = defaultdict(float)
    merged: dict[tuple[str, str], LatencyHistogram] = {}
    counted: dict[tuple[str, str], dict[int, int]] = defaultdict(dict)
    for repeat_id, row in rows:
        key = (row.who, row.component)
        per_repeat[key][repeat_id] = float(row.total)
        counted[key][repeat_id] = int(row.count)
        events[key] += int(row.count)
        totals[key] += float(row.total)
        histogram = LatencyHistogram.from_bytes(row.histogram)
        merged[key] = merged[key] + histogram if key in merged else histogram
    all_commits = sum(commits[r] for r in measured)
    wait_total = totals.get(("backend", "commit_wait"), 0.0)
    components: list[Component] = []
    for name in BACKEND_COMPONENTS:
        key = ("backend", name)
        if key not in events:
            continue
        values = [per_repeat[key].get(r, 0.0) / 1000.0 / commits[r]
                  for r in measured if commits[r] > 0]
        components.append(_component(
            name, values, events[key], totals[key],
            totals[key] / wait_total if name in WAIT_PARTS and wait_total > 0 else None,
            merged[key]))
    releases: list[Releases] = []
    for who in sorted({w for w, _ in events if w.startswith("walsender")}):
        n = events.get((who, "release"), 0)
        freed = totals.get((who, "waiters_freed"), 0.0)
        spent = totals.get((who, "release"), 0.0)
        gaps = events.get((who, "release_gap"), 0)
        gap_h = merged.get((who, "release_gap"))
        releases.append(Releases(
            walsender=who, releases=n,
            waiters_per_release=freed / n if n else None,
            release_us=_us(spent / n) if n else None,
            per_waiter_us=_us(spent / freed) if freed else None,
            freed_per_commit=freed / all_commits if all_commits else None,
            us_per_commit=_us(spent / all_commits) if all_commits and spent else None,
            gap_us=_us(totals[(who, "release_gap")] / gaps) if gaps else None,
            gap_p99_us=_us(gap_h.percentile(99)) if gap_h is not None else None))
    in_server = (totals.get(("backend", "local_flush"), 0.0) + wait_total) / 1e9
    busiest = releasing(releases)
    standby = tuple(
        _standby_parts(who, measured, per_repeat, counted, events, totals, merged)
        for who in sorted({w for w, _ in events if w.startswith(STANDBY)}))
    return Anatomy(
        commits=all_commits, components=tuple(components), releases=tuple(releases),
        little_bound_tps=(clients * all_commits / in_server if in_server > 0 else None),
        release_bound_tps=(1e6 / busiest.us_per_commit
                           if busiest is not None and busiest.us_per_commit else None),
        standby=standby)


def _component(name: str, values: list[float], events: int, total: float,
               share: float | None, h: LatencyHistogram) -> Component:
    return Component(
        component=name, us_per_commit=per_commit(values), share_of_wait=share,
        events=events, mean_us=_us(total / events) if events else None,
        p50_us=_us(h.percentile(50)), p99_us=_us(h.percentile(99)),
        distribution=tuple((low / 1000.0, high / 1000.0, n)
                           for low, high, n in h.bins(DISTRIBUTION_BINS)))


def _standby_parts(who: str, measured: list[int],
                   per_repeat: dict[tuple[str, str], dict[int, float]],
                   counted: dict[tuple[str, str], dict[int, int]],
                   events: dict[tuple[str, str], int], totals: dict[tuple[str, str], float],
                   merged: dict[tuple[str, str], LatencyHistogram]) -> StandbyParts:
    """A standby's parts: each per commit joined (in every repeat its commits are the
    whole's), its share of the whole, the sum against the whole."""
    whole_key = (who, STANDBY_WHOLE)
    joined = counted[whole_key]
    counts = events.get(whole_key, 0)
    whole = totals.get(whole_key, 0.0)
    parts = []
    for name in STANDBY_PARTS:
        key = (who, name)
        if key not in events:
            continue
        values = [per_repeat[key].get(r, 0.0) / 1000.0 / joined[r]
                  for r in measured if joined.get(r)]
        parts.append(_component(name, values, events[key], totals[key],
                                totals[key] / whole if whole > 0 else None, merged[key]))
    summed = sum(totals.get((who, p), 0.0) for p in STANDBY_PARTS)
    syncs = events.get((who, STANDBY_SYNC), 0)
    return StandbyParts(who, counts, tuple(parts),
                        _us(whole / counts) if counts else None,
                        summed / whole if whole > 0 else None,
                        _us(totals[(who, STANDBY_SYNC)] / syncs) if syncs else None, syncs)


@dataclass(frozen=True)
class AnatomyValues:
    """A cell's anatomy figures one value per anatomy repeat, for comparisons between
    cells (analysis/compare.py): the spread between repeats is what an interval can
    stand on (docs/decisions.md, "Ratios of the commit anatomy")."""

    repeats: int  # the repeats with an anatomy
    backend: dict[str, list[float]]  # component -> µs per commit, one per repeat
    # walsender:NAME -> per_waiter_us | waiters_per_release -> one per repeat in which it
    # released (per_waiter_us: in which it freed a waiter)
    walsenders: dict[str, dict[str, list[float]]]
    # standby:NAME -> a part of its half -> µs per commit joined, one per repeat that
    # joined any
    standby: dict[str, dict[str, list[float]]] = field(default_factory=dict)


def anatomy_values(store: Store, cell_id: int) -> AnatomyValues | None:
    """The per-repeat figures of a cell's anatomy repeats; None when it has none."""
    commits = {r: c for r, (c, _) in queries.watched_commits(
        store, [r for r in store.repeats(cell_id) if r.probed]).items()}
    rows = queries.anatomy_of(store, commits)
    if not rows:
        return None
    measured = sorted({repeat_id for repeat_id, _ in rows})
    total: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    count: dict[tuple[str, str], dict[int, int]] = defaultdict(dict)
    for repeat_id, row in rows:
        total[(row.who, row.component)][repeat_id] = float(row.total)
        count[(row.who, row.component)][repeat_id] = int(row.count)
    backend = {name: [total[("backend", name)].get(r, 0.0) / 1000.0 / commits[r]
                      for r in measured if commits[r] > 0]
               for name in BACKEND_COMPONENTS if ("backend", name) in total}
    walsenders: dict[str, dict[str, list[float]]] = {}
    for who in sorted({w for w, _ in total if w.startswith("walsender")}):
        spent, freed = total[(who, "release")], total[(who, "waiters_freed")]
        releases = count[(who, "release")]
        walsenders[who] = {
            "per_waiter_us": [spent.get(r, 0.0) / 1000.0 / freed[r] for r in measured
                              if freed.get(r)],
            "waiters_per_release": [freed.get(r, 0.0) / releases[r] for r in measured
                                    if releases.get(r)]}
    standby = {who: {part: [total[(who, part)].get(r, 0.0) / 1000.0
                            / count[(who, STANDBY_WHOLE)][r]
                            for r in measured if count[(who, STANDBY_WHOLE)].get(r)]
                     for part in STANDBY_PARTS if (who, part) in total}
               for who in sorted({w for w, _ in total if w.startswith(STANDBY)})}
    return AnatomyValues(len(measured), backend, walsenders, standby)


def why_no_anatomy(store: Store, cell_id: int) -> str:
    """Why a cell has no anatomy: what its probed repeats stored for the probe."""
    repeats = [r.id for r in store.repeats(cell_id) if r.probed]
    reasons = sorted({f"{p.status}: {p.reason}" if p.reason else p.status
                      for _, p in queries.probes_of(store, repeats)
                      if p.probe == "anatomy" and p.status != "ran"})
    return "; ".join(reasons) if reasons else ("no probed repeat" if not repeats
                                               else "not recorded in its probed repeats")


def share_of_commit(a: Anatomy, component: str) -> float | None:
    """A component's share of a commit's time in the server (the local flush and the
    commit wait)."""
    found = {c.component: c.us_per_commit.mean for c in a.components}
    whole = (found.get("local_flush") or 0.0) + (found.get("commit_wait") or 0.0)
    value = found.get(component)
    return None if value is None or whole <= 0 else value / whole


def in_words(a: Anatomy) -> str | None:
    """A commit's parts and the wait-bound ceilings in one sentence (``diagnose`` of an
    observe window); None without a commit wait."""
    found = {c.component: c for c in a.components}
    wait = found.get("commit_wait")
    if wait is None or wait.us_per_commit.mean is None:
        return None
    flush = found.get("local_flush")
    said = ((f"{flush.us_per_commit.mean:,.0f} µs flushing WAL and "
             if flush is not None and flush.us_per_commit.mean is not None else "")
            + f"{wait.us_per_commit.mean:,.0f} µs waiting for a standby")
    parts = [f"{100 * share:.0f} % {PART_NAMES[p]}" for p in WAIT_PARTS
             if p in found and (share := found[p].share_of_wait)]
    sentence = f"a written transaction's commit spends {said}" + (
        f" ({', '.join(parts)})" if parts else "")
    bounds = []
    if a.little_bound_tps:
        bounds.append(f"~{a.little_bound_tps:,.0f} tps at this concurrency (Little's law)")
    if a.release_bound_tps:
        bounds.append(f"~{a.release_bound_tps:,.0f} tps where the walsender's serial "
                      "release binds")
    return sentence + ("; the wait alone caps commits at " + ", ".join(bounds)
                       if bounds else "")


def growth_sentence(low: tuple[int, Anatomy], high: tuple[int, Anatomy]) -> str | None:
    """Which part of a commit grows with clients, from the same cell at ``low`` and
    ``high`` clients (each with its anatomy): "the wake-up queue takes 41 % of a commit
    at 64 clients, 9 % at 8: the sync walsender frees 23 waiters per release at 0.6 µs
    each"; None when no part's share grew."""
    (c_low, a_low), (c_high, a_high) = low, high
    grown = []
    for part in ("local_flush", *WAIT_PARTS):
        s_low, s_high = share_of_commit(a_low, part), share_of_commit(a_high, part)
        if s_low is not None and s_high is not None and s_high > s_low:
            grown.append((s_high - s_low, part, s_low, s_high))
    if not grown:
        return None
    _, part, s_low, s_high = max(grown)
    sentence = (f"the {PART_NAMES[part]} takes {100 * s_high:.0f} % of a commit at {c_high} "
                f"clients, {100 * s_low:.0f} % at {c_low}")
    busiest = releasing(a_high.releases)
    if busiest is not None and busiest.per_waiter_us:
        sentence += (f": {busiest.walsender} frees {busiest.waiters_per_release:.1f} "
                     f"waiters per release at {busiest.per_waiter_us:.2f} µs each")
    return sentence


STANDBY_NAMES = {"send": "primary's send", "transit_out": "transit out",
                 "queue": "standby's queue (its walreceiver in a flush)",
                 "write": "standby's write", "flush": "standby's flush",
                 "replay": "standby's replay",
                 "reply": "standby's reply", "transit_back": "transit back",
                 "reply_handling": "walsender's handling of the reply"}


def standby_sentence(s: StandbyParts) -> str | None:
    """The part of the wait for the standby that binds, in words: "the standby's flush:
    46 % of the wait for standby b, 599 µs per commit (the parts sum to 1.00 of the
    wait)"; None without a part."""
    part = s.binding()
    if part is None or part.share_of_wait is None:
        return None
    mean = part.us_per_commit.mean
    return (f"the {STANDBY_NAMES[part.component]}: {100 * part.share_of_wait:.0f} % of "
            f"the wait for standby {s.standby.removeprefix(STANDBY)}"
            + (f", {mean:,.0f} µs per commit" if mean is not None else "")
            + (f", {s.sync_us / 1000:.2f} ms an fdatasync"
               if part.component == "flush" and s.sync_us is not None else "")
            + (f" (the parts sum to {s.sum_ratio:.2f} of the wait)"
               if s.sum_ratio is not None else ""))


def standby_line(s: StandbyParts) -> str:
    """A standby's parts per commit joined, each with its share of the wait."""
    parts = " + ".join(
        f"{STANDBY_NAMES[p.component]} {p.us_per_commit.mean or 0:,.0f} µs "
        f"({100 * (p.share_of_wait or 0):.0f} %)" for p in s.parts)
    return (f"the wait for standby {s.standby.removeprefix(STANDBY)} ({s.commits:,} commits "
            f"joined, per commit): {parts}"
            + (f" = {s.sum_ratio:.2f} of its {s.whole_us:,.0f} µs"
               if s.sum_ratio is not None and s.whole_us is not None else "")
            + (f"; {s.syncs:,} fdatasync calls, {s.sync_us:,.0f} µs each"
               if s.sync_us is not None else ""))


PART_NAMES = {"local_flush": "local WAL flush", "commit_wait": "commit wait",
              "standby_wait": "wait for the standby", "wakeup_queue": "wake-up queue",
              "run_queue": "run queue", "unsignalled": "wait released before it slept"}
