"""The reasoning of observe's answer (analysis/observe.verdicts), on figures given by
hand: which verdict each combination of wait share, walsender load and lag gives."""

from __future__ import annotations

import dataclasses
from typing import Any

from syncrep_lab.analysis.model import Bound, Interval
from syncrep_lab.analysis.observe import Observation, ObserverCost, WalsenderLoad, verdicts
from syncrep_lab.analysis.verdict import Verdict
from syncrep_lab.store.queries import ReplicationSummary


def sender(cpu_us: float, cores_busy: float, max_tps: float) -> WalsenderLoad:
    return WalsenderLoad("b", {"mean": cpu_us, "low": None, "high": None}, cores_busy,
                         max_tps, max_tps / 4000.0)


def sync_b(flush_ms: float) -> ReplicationSummary:
    return ReplicationSummary("b", "sync", 10, None, flush_ms, None, None, None, None, None)


def window(**changes: Any) -> Observation:
    base = Observation(
        idx=1, label="w", version="18.6", synchronous_commit="on",
        synchronous_standby_names="1(b,c)", seconds=10.0, slices=2, writes_per_s=4000.0,
        writes_ci=(None, None), commits_per_s=4000.0, rollbacks_per_s=0.0,
        wal_mb_per_s=1.0, wal_records_per_s=None, sessions_max=4, in_transaction_mean=3.5,
        in_server_ms=0.9, sync_wait_share=0.6, waiting_backends_mean=2.0,
        backend_waits={"IPC:SyncRep": 0.6}, walsenders=(sender(30.0, 0.12, 33000.0),),
        replication=(sync_b(0.2),), state_changes=(),
        lowest_bound=Bound("machine", "machine", None, 2.0, Interval(6500.0, 6400.0, 6600.0),
                           "given"),
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
    o = window(replication=(sync_b(0.7),))
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
