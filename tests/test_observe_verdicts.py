"""The reasoning of observe's answer (analysis/observe.verdicts), on figures given by
hand: which verdict each combination of wait share, walsender load and lag gives."""

from __future__ import annotations

from typing import Any

from syncrep_lab.analysis.observe import verdicts


def window(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "writes_per_s": 4000.0, "sync_wait_share": 0.6, "waiting_backends_mean": 2.0,
        "synchronous_commit": "on", "synchronous_standby_names": "1(b,c)",
        "version": "18.6", "seconds": 10.0, "cpu_note": None, "in_transaction_mean": 3.5,
        "in_server_ms": 0.9, "sessions_max": 4, "backend_waits": {"IPC:SyncRep": 0.6},
        "walsenders": [{"standby": "b", "cpu_us_per_commit": {"mean": 30.0},
                        "cores_busy": 0.12, "max_tps": 33000.0, "headroom": 8.25}],
        "replication": [{"standby": "b", "states": "sync", "flush_ms": 0.2}],
        "lowest_bound": {"resource": "machine", "kind": "machine", "max_tps": 6500.0,
                         "low": 6400.0, "high": 6600.0},
        "headroom": 1.6, "cpus": 2.0}
    return {**base, **changes}


def mechanisms(o: dict[str, Any]) -> list[str]:
    return [v.mechanism for v in verdicts(o)]


def test_a_busy_walsender_with_most_time_waiting_sets_the_ceiling() -> None:
    busy = [{"standby": "b", "cpu_us_per_commit": {"mean": 200.0}, "cores_busy": 0.8,
             "max_tps": 5000.0, "headroom": 1.25}]
    found = verdicts(window(walsenders=busy))
    assert found[0].mechanism == "sync walsender saturated"
    assert found[0].confidence == "high"


def test_a_lag_that_is_most_of_the_time_points_at_the_standby() -> None:
    o = window(replication=[{"standby": "b", "states": "sync", "flush_ms": 0.7}])
    assert "standby or network" in mechanisms(o)


def test_little_wait_says_it_is_not_synchronous_replication() -> None:
    o = window(sync_wait_share=0.03, waiting_backends_mean=0.1)
    assert "not synchronous replication" in mechanisms(o)
    assert "headroom" in mechanisms(o)


def test_no_writes_and_no_sync_are_said() -> None:
    assert mechanisms(window(writes_per_s=0.0)) == ["no writes"]
    assert "synchronous replication off" in mechanisms(window(synchronous_standby_names=""))


def test_on_9_6_the_walsender_load_stands_in_for_the_wait() -> None:
    busy = [{"standby": "b", "cpu_us_per_commit": {"mean": 200.0}, "cores_busy": 0.8,
             "max_tps": 5000.0, "headroom": 1.25}]
    found = mechanisms(window(version="9.6.24", sync_wait_share=None,
                              waiting_backends_mean=None, walsenders=busy))
    assert "sync walsender busy" in found and "commit wait share" in found


def test_without_cpu_the_missing_evidence_is_a_verdict() -> None:
    found = verdicts(window(cpu_note="the server is not on this machine", walsenders=[],
                            headroom=None, lowest_bound=None))
    missing = next(v for v in found if v.mechanism == "CPU per process")
    assert missing.confidence == "unknown" and "not on this machine" in missing.summary
    assert "headroom" not in [v.mechanism for v in found]
