"""The diagnosis rules on stored real runs (tests/data/runs: small runs of this
machine kept as SQL dumps, refreshed by tests/data/runs/refresh.py), so each
verdict is checked against figures real servers produced, without a cluster."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any, cast

import pytest

from syncrep_lab.analysis import diagnosis
from syncrep_lab.analysis.costs import run_costs
from syncrep_lab.analysis.diagnosis import diagnose_run
from syncrep_lab.analysis.evidence import Reach, RepeatWaits, share_figure
from syncrep_lab.analysis.model import Bound, Interval
from syncrep_lab.analysis.verdict import CellDiagnosis, Verdict
from syncrep_lab.stats.intervals import share_interval
from syncrep_lab.store import Store

from .data.runs.refresh import load
from .helpers import cli_here


def _verdicts(run: Path) -> dict[str, dict[str, Any]]:
    return {c.label: {v.mechanism: v.to_json() for v in c.verdicts} for c in diagnose_run(run)}


def test_wakeup_bound_on_18(workdir: Path) -> None:
    run = load("pg18-local-on", workdir)
    cells = _verdicts(run)
    on, local = cells["sc=on"], cells["sc=local"]
    wake = on["commit-wait wake-up bound"]
    assert wake["confidence"] in ("high", "medium")
    evidence = wake["evidence"]
    # Three independent witnesses of one mechanism: the walsender's kill() calls
    # (perf), the kernel's wake-ups (scheduler trace), and where its CPU goes (stacks).
    assert evidence["kill_per_commit"] > 0.5
    assert evidence["backends_woken_per_commit"] > 0.3
    assert evidence["walsender_cpu_share_releasing_waiters"] > 0
    assert evidence["backend_syncrep_share"] > 0.05
    assert "commit-wait wake-up bound" not in local
    assert "per-wait epoll set-up" not in on
    # Two cores shared by 8 clients, pgbench and three servers are saturated; the
    # verdict carries how long a woken backend waits for a core.
    cpu = on["CPU saturation"]
    assert cpu["confidence"] in ("high", "medium")
    assert cpu["evidence"]["cpus"] == 2
    assert cpu["evidence"]["backend_run_queue_us_per_commit"] >= 0
    res = cli_here("results", str(run), "--json")
    assert res.returncode == 0, res.stderr
    rows = {r["label"]: r for r in json.loads(res.stdout)}
    typed = next(c.verdicts for c in diagnose_run(run) if c.label == "sc=on")
    lead = diagnosis.leading_verdict(typed)
    assert lead is not None
    assert rows["sc=on"]["limit"].startswith(diagnosis.verdict_title(lead))
    assert rows["sc=on"]["limit"] == diagnosis.leading_title(typed)
    assert rows["sc=on"]["verdicts"] == [v.to_json() for v in typed]
    assert {v["mechanism"] for v in rows["sc=on"]["verdicts"]} == set(on)


def test_epoll_setup_on_96(workdir: Path) -> None:
    cells = _verdicts(load("pg96-on", workdir))
    on = cells["pg=9.6 sc=on"]
    epoll = on["per-wait epoll set-up"]
    assert epoll["evidence"]["epoll_create1_per_commit"] > 0.5
    assert "no wait event" in on["commit-wait wake-up bound"]["summary"]
    # 9.6 reports no lags in pg_stat_replication: that rule says it cannot judge.
    assert on["network or standby flush/apply bound"]["confidence"] == "unknown"


def test_without_perf_cpu_comes_from_proc(workdir: Path) -> None:
    run = load("pg18-proc-only", workdir)
    on = _verdicts(run)["sc=on"]
    wake = on["commit-wait wake-up bound"]
    assert wake["confidence"] == "unknown"
    assert "turned off" in wake["summary"]
    # CPU per role is still known, from /proc, and the saturation rule judges on it
    # (without perf's tracing, which costs CPU itself, this cell is not saturated).
    facts = _facts(run, "sc=on")
    assert facts.cpu_known
    used = sum(facts.cores(n, r) for (n, r) in facts.roles)
    assert 0.3 < used < 2.0
    verdict = diagnosis.rule_cpu_saturated(facts)
    assert verdict is None or verdict.confidence != "unknown"
    assert ("CPU saturation" in on) == (used / 2 >= 0.6)
    roles: dict[tuple[str, str], Any] = {(r["node"], r["role"]): r
                                         for r in run_costs(run)[0].costs.roles}
    assert roles[("primary", "backend")]["cpu_source"] == "proc"
    assert roles[("primary", "backend")]["cpu_us_per_commit"]["mean"] > 0
    res = cli_here("costs", str(run))
    assert res.returncode == 0, res.stderr
    assert "(/proc, probed)" in res.stdout


def _facts(run: Path, label: str) -> diagnosis.CellFacts:
    store = Store(run, create=False)
    try:
        cell = next(c for c in store.cells(store.run().id) if c.label == label)
        return diagnosis.cell_facts(store, cell, 2)
    finally:
        store.close()


def test_standby_and_network_rule(workdir: Path) -> None:
    """The rule's branches, on a real cell's figures with the standby side changed."""
    facts = _facts(load("pg18-local-on", workdir), "sc=on")
    assert facts.latency_ms is not None
    sync = [r for r in facts.replication if r.states == "sync"]
    assert [r.standby for r in sync] == ["b"]
    base = sync[0]
    slow = dataclasses.replace(base, flush_ms=0.9 * facts.latency_ms)
    waits = dict(facts.waits)
    # The standby's walreceiver busy flushing: standby flush bound.
    waits[("b", "walreceiver")] = {"IO:WalSync": 0.7, "Activity:WalReceiverMain": 0.3}
    v = diagnosis.rule_standby_or_network(dataclasses.replace(
        facts, replication=[slow], waits=waits))
    assert v is not None and v.confidence == "high" and "flushing" in v.summary
    # Both ends idle, waiting for each other: the time is on the wire.
    waits[("b", "walreceiver")] = {"Activity:WalReceiverMain": 0.9}
    waits[("primary", "walsender:b")] = {"Activity:WalSenderMain": 0.9}
    v = diagnosis.rule_standby_or_network(dataclasses.replace(
        facts, replication=[slow], waits=waits))
    assert v is not None and "on the wire" in v.summary
    # A lag that is a small part of the commit: not this mechanism.
    quick = dataclasses.replace(base, flush_ms=0.1 * facts.latency_ms)
    assert diagnosis.rule_standby_or_network(dataclasses.replace(
        facts, replication=[quick], waits=waits)) is None
    # Under local, no standby is waited for.
    assert diagnosis.rule_standby_or_network(dataclasses.replace(
        facts, synchronous_commit="local")) is None


def _bound(resource: str, kind: str, max_tps: float) -> Bound:
    return Bound(resource, kind, None, 1.0, Interval(max_tps, max_tps, max_tps), "untraced")


def test_the_cpu_rule_reads_the_model_s_machine_bound(workdir: Path) -> None:
    """Where the model has a machine bound, saturation is how close the cell came to
    it; a process bound lower than the machine's keeps the verdict at medium."""
    facts = _facts(load("pg18-local-on", workdir), "sc=on")
    facts.bounds = [_bound("machine", "machine", facts.tps / 0.9)]
    verdict = diagnosis.rule_cpu_saturated(facts)
    assert verdict is not None and verdict.confidence == "high"
    assert verdict.evidence["fraction"] == pytest.approx(0.9, abs=1e-3)
    assert verdict.evidence["machine_bound_tps"] == round(facts.tps / 0.9)
    facts.bounds = [_bound("walsender:b", "process", facts.tps / 0.95), facts.bounds[0]]
    lower = diagnosis.rule_cpu_saturated(facts)
    assert lower is not None and lower.confidence == "medium"
    facts.bounds = [_bound("machine", "machine", facts.tps / 0.3)]
    assert diagnosis.rule_cpu_saturated(facts) is None  # far from the bound


def test_a_saturated_ssh_host_is_named_with_every_host_s_load() -> None:
    facts = diagnosis.CellFacts(label="x", tps=9000.0, clients=64, synchronous_commit="on",
                                cpus=16, roles={}, waits={}, perf_missing=None,
                                hosts={"d": ("client", 15.6, 16), "s2": ("c", 3.0, 16)})
    verdict = diagnosis.rule_host_saturated(facts)
    assert verdict is not None and verdict.confidence == "high"
    assert "host d (client) keeps 15.6 of 16 CPUs busy" in verdict.summary
    assert "host s2 (c) keeps 3.0 of 16 CPUs busy" in verdict.summary
    assert verdict.evidence["d_busy_cpus"] == 15.6 and verdict.evidence["s2_cpus"] == 16
    facts.hosts = {"d": ("client", 3.0, 16)}
    assert diagnosis.rule_host_saturated(facts) is None


def test_a_verdict_reads_as_its_name_then_its_confidence(workdir: Path) -> None:
    """The run's closing lines, `results` and `diagnose` say "the benchmark client is the
    bottleneck (high confidence)", never "high the benchmark client is the bottleneck"."""
    from rich.console import Console

    from syncrep_lab.terminal.analysis import print_verdict_lines, print_verdicts

    client = Verdict("the benchmark client is the bottleneck", "high",
                               "backends wait for pgbench", {"share": 0.7},
                               ["run pgbench elsewhere"])
    flush = Verdict("local WAL flush bound [x]", "medium", "flushing")
    assert diagnosis.verdict_title(client) == ("the benchmark client is the bottleneck "
                                               "(high confidence)")
    console = Console(record=True, width=200, force_terminal=False)
    print_verdict_lines([CellDiagnosis(3, "sc=on", 0.0, None, (), (client, flush))], console)
    print_verdicts([client, flush], console)
    assert console.export_text().splitlines() == [
        "  cell 3 sc=on: the benchmark client is the bottleneck (high confidence)",
        "  the benchmark client is the bottleneck (high confidence): backends wait for "
        "pgbench",
        "    evidence: share=0.7",
        "    try: run pgbench elsewhere",
        "  local WAL flush bound [x] (medium confidence): flushing",
    ]
    run = load("pg18-local-on", workdir)
    res = cli_here("results", str(run))
    assert res.returncode == 0, res.stderr
    closing = res.stdout[res.stdout.index("what limits each cell"):]
    assert "  cell 1 sc=on: commit-wait wake-up bound (high confidence)" in closing
    res = cli_here("diagnose", str(run))
    assert "  commit-wait wake-up bound (high confidence): walsender:b" in res.stdout
    # an evidence figure with an interval is printed with it
    assert re.search(r"backend_syncrep_share=0\.\d+ \[0\.\d+, 0\.\d+\]", res.stdout)


def _with_share(facts: diagnosis.CellFacts, event: str, shares: list[float],
                ticks: int = 120, backends: int = 8) -> diagnosis.CellFacts:
    """The cell's facts with its backends' samples replaced: one sampled repeat per
    share, ``ticks`` ticks of ``backends`` backends each."""
    repeats = []
    for share in shares:
        hits = round(share * ticks * backends)
        repeats.append(RepeatWaits({event: hits, "CPU:running": ticks * backends - hits},
                                   ticks))
    total = sum(r.samples for r in repeats)
    hits = sum(r.events[event] for r in repeats)
    waits = {**facts.waits, ("primary", "backend"): {event: hits / total,
                                                     "CPU:running": 1 - hits / total}}
    return dataclasses.replace(facts, waits=waits,
                               wait_repeats={**facts.wait_repeats,
                                             ("primary", "backend"): repeats})


def test_a_share_either_side_of_a_threshold_gives_the_same_leading_verdict(
        workdir: Path) -> None:
    """Stock against a patch that changes nothing: one probed repeat each, 29 % and 37 %
    of the backends' samples in SyncRep, either side of the rule's 30 %. On the points
    the two cells got different leading verdicts; on the intervals both reach "high",
    both read "medium–high", and both lead with the same verdict."""
    facts = _facts(load("pg18-local-on", workdir), "sc=on")
    cells = [_with_share(facts, "IPC:SyncRep", [share]) for share in (0.29, 0.37)]
    wake = [diagnosis.rule_wakeup_bound(c) for c in cells]
    assert [w.confidence for w in wake if w] == ["medium", "high"]
    json_ = [w.to_json() for w in wake if w]
    assert [v["confidence_range"] for v in json_] == [["medium", "high"]] * 2
    assert [diagnosis.verdict_title(v) for v in wake if v] == [
        "commit-wait wake-up bound (medium–high confidence)"] * 2
    intervals = json_[0]["intervals"]
    assert isinstance(intervals, dict)
    low, high = cast(list[float], intervals["backend_syncrep_share"])
    assert low < 0.29 < 0.3 < high
    leads = [diagnosis.leading_verdict(diagnosis.diagnose_facts(c)) for c in cells]
    assert [lead.mechanism for lead in leads if lead] == ["commit-wait wake-up bound"] * 2


def test_a_rule_fires_on_its_interval_and_a_tie_is_said(workdir: Path) -> None:
    facts = _facts(load("pg18-local-on", workdir), "sc=on")
    # 22 % of 120 ticks: the point is under the flush rule's 25 %, the interval is not
    near = diagnosis.rule_local_flush(_with_share(facts, "IO:WalSync", [0.22]))
    assert near is not None and near.confidence == "low"
    assert near.to_json()["confidence_range"] == ["low", "medium"]
    # 10 % of 2,000 ticks: the whole interval is under it
    assert diagnosis.rule_local_flush(_with_share(facts, "IO:WalSync", [0.10],
                                                  ticks=2000)) is None
    # the client rule certainly high (80 % of 2,000 ticks) and a wake-up verdict that
    # only reaches medium: no tie; one that reaches high: said beside it
    client = Verdict("the benchmark client is the bottleneck", "high", "x")
    wake = Verdict("commit-wait wake-up bound", "medium", "y",
                             reach=Reach("low", "medium", "medium"))
    assert diagnosis.leading_title([client, wake]) == (
        "the benchmark client is the bottleneck (high confidence)")
    wake_high = Verdict("commit-wait wake-up bound", "medium", "y",
                                  reach=Reach("medium", "medium", "high"))
    verdicts = sorted([wake_high, client], key=lambda v: v.confidence != "high")
    assert diagnosis.leading_title(verdicts) == (
        "the benchmark client is the bottleneck (high confidence), as likely at this "
        "precision: commit-wait wake-up bound (medium–high confidence)")


def test_a_share_over_several_repeats_is_as_wide_as_their_spread() -> None:
    """Two sampled repeats that disagree (10 % and 60 %) give an interval at least as
    wide as the t interval of their two shares, wider than the ticks alone say."""
    repeats = [RepeatWaits({"IPC:SyncRep": 10, "CPU:running": 90}, 100),
               RepeatWaits({"IPC:SyncRep": 60, "CPU:running": 40}, 100)]
    both = share_figure(repeats, ["IPC:SyncRep"])
    assert both is not None and both.point == pytest.approx(0.35)
    ticks_alone = share_interval(0.35, 200)
    assert both.low < ticks_alone[0] and both.high > ticks_alone[1]
    assert both.low == 0.0 and both.high == 1.0  # 2 values: t(1 df) = 12.7
    same = share_figure([repeats[0], repeats[0]], ["IPC:SyncRep"])
    assert same is not None and same.low == pytest.approx(share_interval(0.1, 200)[0])
    assert share_figure([], ["IPC:SyncRep"]) is None


def test_a_cpu_quota_is_named_where_it_paces_the_commits() -> None:
    """The quota rule on a cell's figures: high where the sync walsender used its quota
    up and commits wait for it; low at a level whose commits wait for no walsender; none
    where the quota was seldom used up. The idle CPUs and the link's bytes are said."""
    from syncrep_lab.store.queries import NetMeans, QuotaMeans

    held = QuotaMeans(1, "primary", "walsender:b", 0.05, 1000, 20_000, 3, 750, 740,
                      1800.0, 15.0)
    backend: Any = {"node": "primary", "role": "backend", "cpu_source": "untraced",
                    "cpu_us_per_commit": {"mean": 100.0, "low": None, "high": None}}
    facts = diagnosis.CellFacts(
        label="x", tps=5700.0, clients=64, synchronous_commit="on", cpus=2,
        roles={("primary", "backend"): backend},
        waits={}, perf_missing=None, sync_walsender="walsender:b", quotas=[held],
        network=[NetMeans("", 1, "primary", "to-b", 3_000_000, 9_000_000, 1, 1, 15.0, 3)])
    v = diagnosis.rule_quota_binds(facts)
    assert v is not None and v.confidence == "high", v
    assert v.summary.startswith("the sync walsender is held to 0.05 CPU (1 ms of CPU every "
                                "20 ms): it used the quota up in 99 % of the 750 periods")
    assert "waited 120 ms a second" in v.summary  # 1,800 ms over 15 s
    assert "CPUs were 72 % idle" in v.summary  # 100 µs × 5,700 tps: 0.57 of 2 CPUs busy
    assert "the link to b carried 0.8 MB/s" in v.summary, v.summary
    local = diagnosis.rule_quota_binds(dataclasses.replace(facts, synchronous_commit="local"))
    assert local is not None and local.confidence == "low"
    seldom = dataclasses.replace(held, throttled=100)
    assert diagnosis.rule_quota_binds(dataclasses.replace(facts, quotas=[seldom])) is None
