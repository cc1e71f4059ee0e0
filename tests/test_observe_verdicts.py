"""The reasoning of observe's answer (analysis/observe.verdicts), on figures given by
hand: which verdict each combination of wait share, walsender load and lag gives."""

from __future__ import annotations

import dataclasses
from typing import Any

from syncrep_lab.analysis.model import Bound, Interval
from syncrep_lab.analysis.observe import (
    WAIT_CEILING,
    Observation,
    ObserverCost,
    StandbyLoad,
    WalsenderLoad,
    verdicts,
)
from syncrep_lab.analysis.verdict import Verdict
from syncrep_lab.store.queries import ReplicationSummary


def sender(cpu_us: float, cores_busy: float, max_tps: float) -> WalsenderLoad:
    return WalsenderLoad("b", {"mean": cpu_us, "low": None, "high": None}, cores_busy,
                         max_tps, max_tps / 4000.0)


def sync_b(flush_ms: float) -> ReplicationSummary:
    return ReplicationSummary("b", "sync", 10, None, flush_ms, None, None, None, None, None)


def load(name: str, *, sync: bool = True, syncing: float = 0.05, view_ms: float = 0.2,
         position_ms: float | None = None) -> StandbyLoad:
    return StandbyLoad(name, sync, syncing, 0.01, syncing + 0.05, view_ms,
                       view_ms if position_ms is None else position_ms, None, 0)


MACHINE = Bound("machine", "machine", None, 2.0, Interval(6500.0, 6400.0, 6600.0), "given")


def window(**changes: Any) -> Observation:
    base = Observation(
        idx=1, label="w", version="18.6", synchronous_commit="on",
        synchronous_standby_names="1(b,c)", seconds=10.0, slices=2, writes_per_s=4000.0,
        writes_ci=(None, None), commits_per_s=4000.0, rollbacks_per_s=0.0,
        wal_mb_per_s=1.0, wal_records_per_s=None, sessions_max=4, in_transaction_mean=3.5,
        in_server_ms=0.9, sync_wait_share=0.6, waiting_backends_mean=2.0,
        backend_waits={"IPC:SyncRep": 0.6}, walsenders=(sender(30.0, 0.12, 33000.0),),
        replication=(sync_b(0.2),), standbys=(load("b"),), state_changes=(),
        bounds=(MACHINE,), lowest_bound=MACHINE,
        headroom=1.6, cpus=2.0, cpu_note=None, own=ObserverCost(None, 1.0), notes=(),
        anatomy=None)
    return dataclasses.replace(base, **changes)


def mechanisms(o: Observation) -> list[str]:
    return [v.mechanism for v in verdicts(o)]


def test_a_busy_walsender_with_most_time_waiting_sets_the_ceiling() -> None:
    found: list[Verdict] = verdicts(window(walsenders=(sender(200.0, 0.8, 5000.0),)))
    assert found[0].mechanism == "sync walsender saturated"
    assert found[0].confidence == "high"


def test_a_lag_that_is_most_of_the_time_points_at_the_standby() -> None:
    o = window(replication=(sync_b(0.7),), standbys=(load("b", view_ms=0.7),))
    assert "standby or network" in mechanisms(o)


def test_little_wait_says_it_is_not_synchronous_replication() -> None:
    o = window(sync_wait_share=0.03, waiting_backends_mean=0.1)
    assert "not synchronous replication" in mechanisms(o)
    assert "headroom" in mechanisms(o)


def test_no_writes_and_no_sync_are_said() -> None:
    assert mechanisms(window(writes_per_s=0.0)) == ["no writes"]
    assert "synchronous replication off" in mechanisms(window(synchronous_standby_names=""))


def test_on_9_6_the_walsender_load_stands_in_for_the_wait() -> None:
    found = mechanisms(window(version="9.6.24", sync_wait_share=None,
                              waiting_backends_mean=None,
                              walsenders=(sender(200.0, 0.8, 5000.0),)))
    assert "sync walsender busy" in found and "commit wait share" in found


def test_without_cpu_the_missing_evidence_is_a_verdict() -> None:
    found = verdicts(window(cpu_note="the server is not on this machine", walsenders=(),
                            headroom=None, lowest_bound=None))
    missing = next(v for v in found if v.mechanism == "CPU per process")
    assert missing.confidence == "unknown" and "not on this machine" in missing.summary
    assert "headroom" not in [v.mechanism for v in found]


def slow_b(**changes: Any) -> Observation:
    """The slow standby's figures as a DBA met them (248 tps at 16 clients, b's
    walreceiver inside fdatasync most of its time, its view lags 50x under its lag from
    positions, c quick), the wait's ceiling at this concurrency among the bounds."""
    wait = Bound(WAIT_CEILING, "wait", Interval(64000.0, 64000.0, 64000.0), 16.0,
                 Interval(251.0, 240.0, 262.0), "given")
    cpu = Bound("machine", "machine", None, 2.0, Interval(5459.0, 5300.0, 5600.0), "given")
    base = window(writes_per_s=248.0, sessions_max=16, in_transaction_mean=15.9,
                  sync_wait_share=0.99, in_server_ms=64.0,
                  backend_waits={"IPC:SyncRep": 0.99}, walsenders=(sender(30.0, 0.01, 33000.0),),
                  replication=(sync_b(0.86),),
                  standbys=(load("b", syncing=0.96, view_ms=0.86, position_ms=67.7),
                            load("c", sync=False, syncing=0.03, view_ms=0.4)),
                  bounds=(wait, cpu), lowest_bound=wait, headroom=251.0 / 248.0)
    return dataclasses.replace(base, **changes)


def test_a_slow_sync_standby_is_named_with_its_cause_and_the_quorum_it_suggests() -> None:
    found = verdicts(slow_b())
    first = found[0]
    assert first.mechanism == "standby flush" and first.confidence == "high", first
    assert "standby b's WAL flush binds" in first.summary, first.summary
    assert "96 % of its time in a WAL sync" in first.summary, first.summary
    assert "c's walreceiver 3 %" in first.summary, first.summary
    quorum = next(step for step in first.next_steps if step.startswith("quorum ANY 1 (b, c)"))
    # c's 0.4 ms in place of b's 63 ms wait: Little's law at 15.9 sessions gives ~24k,
    # past the CPUs' 5,459, which bind first
    assert "machine would, at ~5,459 tps, 22.0x today's" in quorum, quorum
    assert "Little's law alone gives ~" in quorum, quorum
    uncapped = verdicts(slow_b(bounds=(slow_b().bounds[0],)))[0]
    assert any("that predicts ~" in step for step in uncapped.next_steps), uncapped
    assert first.evidence["position_flush_lag_ms"] == 67.7


def test_lags_that_disagree_are_said_and_positions_trusted() -> None:
    found = verdicts(slow_b())
    said = next(v for v in found if v.mechanism == "lags disagree")
    assert "0.86 ms" in said.summary and "67.70 ms" in said.summary
    # a quick standby without the flush share: the lag from positions points at it
    quiet = verdicts(slow_b(standbys=(load("b", syncing=0.1, view_ms=0.86,
                                           position_ms=67.7),)))
    assert quiet[0].mechanism == "standby or network", quiet[0]
    assert "67.70 ms" in quiet[0].summary


def test_headroom_at_the_wait_ceiling_reads_about_1x() -> None:
    head = next(v for v in verdicts(slow_b()) if v.mechanism == "headroom")
    assert head.evidence["bound_kind"] == "wait" and head.evidence["headroom"] == 1.01, head
    assert "1.0x today's 248" in head.summary and "machine 5,459" in head.summary, head.summary
