"""An observe window's answer as Prometheus metric families (``observe --serve``,
``--textfile``).

Named by the Prometheus conventions: a ``syncrep_`` prefix, base units (seconds, bytes,
ratios of 1), ``_total`` for counters, ``_info`` for facts carried in labels. Every
gauge is the window's figure, the same the window's ``observe --json`` gives (the
same objects print both), so a scrape and the JSON of one window agree exactly.

A figure that could not be measured is never exported as zero: it is absent, and
``syncrep_missing_info{metric, application_name, reason}`` says why. The commit
anatomy's parts are exported by their component name, whatever parts the anatomy has.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
)
from prometheus_client.metrics_core import Metric

from syncrep_lab.analysis.observe import WindowFigures
from syncrep_lab.observe.lags import PARTS, StandbyLags

POSITIONS = ("sent", "write", "flush", "replay")
CEILING = ("The rate of writes at which this resource alone would be saturated (the "
           "bottleneck model's bound; kind wait: the commit anatomy's)")


class Families:
    """The families of one answer, built once, served to every scrape until the next."""

    def __init__(self) -> None:
        self.gauges: dict[str, GaugeMetricFamily] = {}
        self.others: list[Metric] = []
        self.missing = InfoMetricFamily(
            "syncrep_missing", "A metric absent from this answer, and why it could not be "
            "measured", labels=["metric", "application_name", "reason"])

    def gauge(self, name: str, doc: str, value: float | None, labels: dict[str, str]
              | None = None, why: str | None = None) -> None:
        """``value`` under ``labels``; absent, with ``why`` in syncrep_missing_info,
        where it is None."""
        labels = labels or {}
        if value is None:
            self.absent(name, why or "not measured", labels.get("application_name", ""))
            return
        family = self.gauges.get(name)
        if family is None:
            family = self.gauges[name] = GaugeMetricFamily(name, doc,
                                                           labels=list(labels))
        family.add_metric(list(labels.values()), float(value))

    def absent(self, name: str, why: str, standby: str = "") -> None:
        self.missing.add_metric([name, standby, why], {})

    def all(self) -> list[Metric]:
        return [*self.gauges.values(), *self.others, self.missing]


def not_yet(reason: str, windows: int) -> list[Metric]:
    """Before the first answer (or once the primary stopped answering): down, and why."""
    f = Families()
    f.gauge("syncrep_up", "1 while the latest window's answer is served", 0.0)
    f.absent("syncrep_*", reason)
    windows_total = CounterMetricFamily("syncrep_windows", "Windows answered",
                                        value=windows)
    f.others.append(windows_total)
    return f.all()


def families(figures: WindowFigures, lags: Sequence[StandbyLags], window: int,
             windows: int, ended_at: float | None = None) -> list[Metric]:
    """Every metric of one window's answer (``window``: its number, from 1)."""
    o = figures.observation
    f = Families()
    f.gauge("syncrep_up", "1 while the latest window's answer is served", 1.0)
    info = InfoMetricFamily("syncrep_window", "The window the answer is of",
                            labels=["window", "version", "synchronous_commit",
                                    "synchronous_standby_names"])
    info.add_metric([str(window), o.version, str(o.synchronous_commit or ""),
                     str(o.synchronous_standby_names or "")], {})
    f.others.append(info)
    f.others.append(CounterMetricFamily("syncrep_windows", "Windows answered",
                                        value=windows))
    f.gauge("syncrep_window_index", "The number of the window the answer is of", window)
    f.gauge("syncrep_window_duration_seconds", "Sampled length of the window", o.seconds)
    f.gauge("syncrep_window_slices", "Slices of the window (the intervals are over them)",
            o.slices)
    f.gauge("syncrep_window_end_timestamp_seconds", "When the window ended (Unix time)",
            ended_at if ended_at is not None else time.time())
    rate = "Transactions that wrote (were given a transaction id) per second"
    f.gauge("syncrep_writes_per_second", rate, o.writes_per_s)
    low, high = o.writes_ci
    one = "one slice: no interval"
    f.gauge("syncrep_writes_per_second_lower", "95 % interval over slices, lower end", low,
            why=one)
    f.gauge("syncrep_writes_per_second_upper", "95 % interval over slices, upper end", high,
            why=one)
    f.gauge("syncrep_commits_per_second", "Commits per second (pg_stat_database, the "
            "observer's own taken out)", o.commits_per_s)
    f.gauge("syncrep_rollbacks_per_second", "Rollbacks per second", o.rollbacks_per_s)
    f.gauge("syncrep_wal_bytes_per_second", "WAL written per second", o.wal_mb_per_s * 1e6)
    no_wait = (f"PostgreSQL {o.version or '9.6'} shows no wait event while a commit "
               "waits for a standby" if o.version.startswith("9.") or not o.version
               else "no client backend was seen in a transaction in the window")
    f.gauge("syncrep_sync_wait_ratio", "Share of the client backends' time in a "
            "transaction spent in IPC:SyncRep", o.sync_wait_share, why=no_wait)
    f.gauge("syncrep_waiting_backends", "Client backends waiting for a standby at once, "
            "on average", o.waiting_backends_mean, why=no_wait)
    f.gauge("syncrep_transaction_in_server_seconds", "A transaction's time in the server "
            "(Little's law)", o.in_server_ms / 1000.0 if o.in_server_ms is not None else None,
            why="no transaction in the window")
    _ceilings(f, figures)
    _cpu(f, figures)
    _standbys(f, figures, lags)
    _anatomy(f, figures)
    f.gauge("syncrep_observer_cpu_ratio", "The observer's backend's CPU, share of a core",
            o.own.cpu_share_of_core, why=o.cpu_note or "not measured")
    f.gauge("syncrep_observer_queries_per_second", "The observer's read-only statements "
            "per second", o.own.queries_per_s)
    verdicts = InfoMetricFamily("syncrep_verdict", "The answer's verdicts",
                                labels=["verdict", "confidence"])
    for v in o.verdicts:
        verdicts.add_metric([v.mechanism, v.confidence], {})
    f.others.append(verdicts)
    return f.all()


def _ceilings(f: Families, figures: WindowFigures) -> None:
    o, built = figures.observation, figures.model
    why = o.cpu_note or ("no transaction wrote in the window" if o.writes_per_s <= 0
                         else "no ceiling was measured")
    # the model's, and the answer's own (the wait's ceiling at this concurrency, each
    # sync standby's walreceiver), each once
    bounds = list({(b.resource, b.kind): b for b in [*built.bounds, *built.wait_bounds,
                                                     *o.bounds]}.values())
    if not bounds:
        f.absent("syncrep_ceiling_writes_per_second", why)
    for b in bounds:
        labels = {"resource": b.resource, "kind": b.kind}
        f.gauge("syncrep_ceiling_writes_per_second", CEILING, b.max_tps.mean, labels)
        f.gauge("syncrep_ceiling_writes_per_second_lower", "Its 95 % interval, lower end",
                b.max_tps.low, labels)
        f.gauge("syncrep_ceiling_writes_per_second_upper", "Its 95 % interval, upper end",
                b.max_tps.high, labels)
    a = o.anatomy
    if not built.wait_bounds and a is not None:
        # the model reads wait bounds from a run's traced cell; a window's anatomy has
        # its own (analysis/anatomy.py), without an interval
        for resource, tps in (("commit_wait_little", a.little_bound_tps),
                              ("walsender_release", a.release_bound_tps)):
            f.gauge("syncrep_ceiling_writes_per_second", CEILING, tps,
                    {"resource": resource, "kind": "wait"},
                    why="the commit anatomy could not bound it")
    elif not built.wait_bounds:
        f.absent("syncrep_ceiling_writes_per_second",
                 "wait bounds: " + (built.wait_missing or "observe without --anatomy"))
    lowest = o.lowest_bound
    headroom = ("The lowest ceiling the answer knows (CPU, the wait's at this "
                "concurrency, a sync standby's walreceiver) over the window's rate of "
                "writes; resource and kind name it")
    # the ceiling that sets it is the metric's labels: an alert can say which binds
    named = {"resource": lowest.resource, "kind": lowest.kind} if lowest else None
    f.gauge("syncrep_headroom_ratio", headroom, o.headroom, named, why=why)
    rate = o.writes_per_s
    f.gauge("syncrep_headroom_ratio_lower", "Its 95 % interval, lower end",
            lowest.max_tps.low / rate if lowest and rate > 0 else None, named, why=why)
    f.gauge("syncrep_headroom_ratio_upper", "Its 95 % interval, upper end",
            lowest.max_tps.high / rate if lowest and rate > 0 else None, named, why=why)
    if lowest is not None:
        binding = InfoMetricFamily("syncrep_headroom", "The ceiling the headroom is of",
                                   labels=["resource", "kind"])
        binding.add_metric([lowest.resource, lowest.kind], {})
        f.others.append(binding)


def _cpu(f: Families, figures: WindowFigures) -> None:
    o = figures.observation
    roles = figures.costs.roles
    if not roles:
        f.absent("syncrep_cpu_seconds_per_commit", o.cpu_note or (
            "no transaction wrote in the window" if o.writes_per_s <= 0
            else "CPU per role not read"))
    for r in roles:
        mean = r["cpu_us_per_commit"]["mean"]
        f.gauge("syncrep_cpu_seconds_per_commit", "CPU per transaction that wrote, per "
                "node and process role", mean / 1e6 if mean is not None else None,
                {"node": r["node"], "role": r["role"]},
                why=f"{r['node']} {r['role']}: {o.cpu_note or 'not measured'}")


def _standbys(f: Families, figures: WindowFigures, lags: Sequence[StandbyLags]) -> None:
    o = figures.observation
    states = {r.standby: (r.states or "").split(",")[-1] for r in o.replication}
    view = {"write": "write_ms", "flush": "flush_ms", "replay": "replay_ms"}
    for r in o.replication:
        for part, field in view.items():
            ms = getattr(r, field)
            f.gauge("syncrep_standby_lag_seconds", "pg_stat_replication's lag (mean over "
                    "the window)", ms / 1000.0 if ms is not None else None,
                    {"application_name": r.standby, "sync_state": states[r.standby],
                     "kind": part},
                    why="the standby reported none (PostgreSQL 9.6, or no WAL to confirm)")
    stale = InfoMetricFamily("syncrep_standby_lag_stale_reason", "Why the view's lags may "
                             "be stale", labels=["application_name", "reason"])
    primary = max((lag.primary_lsn for lag in lags), default=None)
    if primary is not None:
        f.gauge("syncrep_primary_lsn_bytes", "The primary's WAL insert position", primary)
    for lag in lags:
        who = {"application_name": lag.standby}
        state = states.get(lag.standby, "")
        for part in PARTS:
            f.gauge("syncrep_standby_position_lag_seconds", "Time since the primary's WAL "
                    "passed the standby's position (mean over the window's samples)",
                    lag.lag_s.get(part),
                    {**who, "sync_state": state, "kind": part}, why=lag.reason or "")
        for name, value in zip(POSITIONS, (lag.sent_lsn, lag.write_lsn, lag.flush_lsn,
                                           lag.replay_lsn), strict=True):
            f.gauge("syncrep_standby_lsn_bytes", "The standby's WAL positions at the "
                    "window's end", value, {**who, "position": name},
                    why="not reported by the walsender")
        f.gauge("syncrep_standby_replay_stalled", "1 where the standby flushed but did not "
                "replay during the window", float(lag.replay_stalled), who)
        f.gauge("syncrep_standby_lag_stale", "1 where pg_stat_replication's write_lag and "
                "flush_lag may be frozen (replay stalled on a release before the fix)",
                float(lag.stale), who)
        if lag.stale:
            stale.add_metric([lag.standby, lag.reason or ""], {})
    if any(lag.stale for lag in lags):
        f.others.append(stale)


def _anatomy(f: Families, figures: WindowFigures) -> None:
    a = figures.observation.anatomy
    if a is None:
        for name in ("syncrep_commit_part_seconds", "syncrep_commit_part_seconds_per_commit"):
            f.absent(name, "observe without --anatomy")
        return
    for c in a.components:
        f.gauge("syncrep_commit_part_seconds_per_commit", "A part of the commit, per "
                "transaction that wrote (mean over the slices)",
                c.us_per_commit.mean / 1e6 if c.us_per_commit.mean is not None else None,
                {"part": c.component}, why="no slice timed it")
    histogram = HistogramMetricFamily("syncrep_commit_part_seconds", "Each time a part of "
                                      "the commit happened, how long it took",
                                      labels=["part"])
    for c in a.components:
        histogram.add_metric([c.component], _buckets(c.distribution, c.events),
                             (c.mean_us or 0.0) * c.events / 1e6)
    f.others.append(histogram)


# the histogram's bucket bounds: every octave from 1 µs to about 1 s, the same in every
# window (the anatomy's bins, several an octave, each fall inside one octave, so the
# cumulative counts at these bounds are exact)
BUCKETS_NS = tuple(2 ** k for k in range(10, 31))


def _buckets(distribution: Iterable[tuple[float, float, int]], events: int
             ) -> list[tuple[str, float]]:
    """Cumulative buckets (upper bounds in seconds, BUCKETS_NS) of a part's (low µs,
    high µs, events) bins."""
    bins = [(high * 1000.0, n) for _, high, n in distribution]
    out = [(repr(le / 1e9), float(sum(n for high, n in bins if high <= le * (1 + 1e-9))))
           for le in BUCKETS_NS]
    out.append(("+Inf", float(max(events, sum(n for _, n in bins)))))
    return out
