"""A repeat's stored figures from pgbench's, on values worked out by hand: one instance,
two instances summed, and what was seen around it."""

from __future__ import annotations

import pytest

from syncrep_lab.readers.pgbench_log import PgbenchSummary, ProgressSample, TransactionLogStats
from syncrep_lab.run.repeat_record import Disturbance, build, summed_progress
from syncrep_lab.run.workload import ClientRun
from syncrep_lab.stats.histogram import LatencyHistogram


def _stats(latencies_us: list[int], failed: int = 0) -> TransactionLogStats:
    h = LatencyHistogram()
    for v in latencies_us:
        h.record(v)
    return TransactionLogStats(len(latencies_us), failed, 1_000_000, 2_000_000, h)


def _run(tps: float, transactions: int, seconds: float, latency_ms: float,
         progress: list[tuple[float, float, float]]) -> ClientRun:
    return ClientRun(["pgbench"], 0, "", "", PgbenchSummary(
        transactions=transactions, tps=tps, latency_avg_ms=latency_ms),
        [ProgressSample(t, v, lat, None) for t, v, lat in progress], [], seconds)


def _build(runs: list[ClientRun], stats: list[TransactionLogStats]) -> dict[str, object]:
    return build(runs, stats, list(range(1, len(runs) + 1)), n=3, probed=False,
                 started_at="t", round_no=2, position=1, seen=Disturbance(),
                 stdout_path="o", stderr_path="e").values


def test_one_instance_keeps_pgbench_s_own_figures() -> None:
    run = _run(1000.0, 5000, 5.02, 2.5, [(1.0, 990.0, 2.4), (2.0, 1010.0, 2.6)])
    values = _build([run], [_stats([1000, 2000, 3000, 4000])])
    assert values["tps"] == 1000.0 and values["pgbench_transactions"] == 5000
    assert values["transactions"] == 4 and values["failed"] == 0  # from the logs
    assert values["pgbench_latency_avg_ms"] == 2.5  # pgbench's summary, not the logs'
    assert values["lat_mean_ms"] == pytest.approx(2.5, rel=0.01)
    assert values["lat_max_ms"] == pytest.approx(4.0, rel=0.01)
    assert values["duration_s"] == 5.02 and values["round"] == 2 and values["position"] == 1
    assert values["disturbed"] is None and values["checkpoints"] is None


def test_two_instances_sum_tps_and_merge_latencies() -> None:
    a = _run(600.0, 3000, 5.0, 1.0, [(1.0, 600.0, 1.0), (2.0, 600.0, 1.0)])
    b = _run(400.0, 2000, 5.1, 3.0, [(1.0, 400.0, 3.0)])
    record = build([a, b], [_stats([1000, 1000, 1000]), _stats([3000], failed=2)], [1, 2],
                   n=1, probed=True, started_at="t", round_no=None, position=None,
                   seen=Disturbance(1, 0, 0.4, "1 checkpoint"), stdout_path="o",
                   stderr_path="e")
    v = record.values
    assert record.tps == 1000.0 and v["pgbench_transactions"] == 5000
    assert v["transactions"] == 4 and v["failed"] == 2 and v["duration_s"] == 5.1
    # the merged logs' mean (1.5 ms), not the first instance's summary
    assert v["pgbench_latency_avg_ms"] == pytest.approx(1.5, rel=0.01)
    assert v["probed"] == 1 and v["checkpoints"] == 1 and v["disturbed"] == "1 checkpoint"
    assert [r[:4] for r in record.instance_rows] == [(1, 600.0, 3, 0), (2, 400.0, 1, 2)]
    # the seconds both reported: TPS summed, latency weighted by TPS
    [(t, tps, lat, sd, failed)] = record.samples
    assert (t, tps, sd, failed) == (1.0, 1000.0, None, 0)
    assert lat == pytest.approx((600 * 1.0 + 400 * 3.0) / 1000)


def test_one_instance_s_progress_is_its_own() -> None:
    run = _run(10.0, 10, 1.0, 1.0, [(1.0, 10.0, 1.5)])
    assert summed_progress([run]) == [(1.0, 10.0, 1.5, None, 0)]


def test_mismatched_inputs_are_refused() -> None:
    with pytest.raises(ValueError):
        build([], [], [], n=1, probed=False, started_at="t", round_no=None, position=None,
              seen=Disturbance(), stdout_path="o", stderr_path="e")
