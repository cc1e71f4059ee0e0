"""Measurement primitives: histogram accuracy, pgbench log/summary parsing, statistics."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from syncrep_lab.readers.pgbench_log import (
    PgbenchSummary,
    ProgressSample,
    parse_progress_line,
    parse_summary,
    parse_transaction_log,
    parse_transaction_logs,
    transaction_log_paths,
)
from syncrep_lab.stats.histogram import MAX_VALUE, LatencyHistogram
from syncrep_lab.stats.intervals import ci_within, mean_ci, rate_ci, ratio_ci, welch_t

# --- histogram ---------------------------------------------------------------------------


def _lognormal_us(n: int, seed: int = 20240601) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.rint(rng.lognormal(mean=math.log(800), sigma=0.8, size=n)).astype(np.int64)


def test_small_values_are_exact() -> None:
    hist = LatencyHistogram()
    values = np.repeat(np.arange(128), np.arange(1, 129))
    hist.record_array(values)
    assert hist.count == values.size
    assert list(hist.counts[:128]) == list(range(1, 129))
    for p in (0.1, 1, 5, 25, 50, 75, 90, 99, 99.9, 100):
        expected = float(np.percentile(values, p, method="inverted_cdf"))
        assert hist.percentile(p) == expected, p


def test_percentiles_within_one_64th_of_numpy() -> None:
    values = _lognormal_us(200_000)
    hist = LatencyHistogram()
    hist.record_array(values)
    for p in (0.1, 1, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99):
        got = hist.percentile(p)
        assert got is not None
        nearest_rank = float(np.percentile(values, p, method="inverted_cdf"))
        assert abs(got - nearest_rank) <= nearest_rank / 128, p
        interpolated = float(np.percentile(values, p))
        assert abs(got - interpolated) <= interpolated / 64, p
    assert hist.percentile(0) == values.min()
    assert hist.percentile(100) == values.max()
    assert hist.mean() == pytest.approx(values.mean(), rel=1e-15)
    assert hist.total == int(values.sum())


def test_bucket_width_bound_over_whole_range() -> None:
    rng = np.random.default_rng(7)
    values = np.unique(rng.integers(0, MAX_VALUE, size=5_000, endpoint=True))
    for value in values[:: max(values.size // 500, 1)]:
        hist = LatencyHistogram()
        # Two values in the same bucket keep min/max from hiding the bucketing error.
        hist.record(int(value))
        hist.record(int(value))
        hist.record(0)
        hist.record(MAX_VALUE)
        got = hist.percentile(50)
        assert got is not None
        assert abs(got - value) <= max(value / 128, 0), value


def test_record_matches_record_array_and_clamps() -> None:
    values = [*_lognormal_us(1_000).tolist(), 0, 1, 127, 128, 129, MAX_VALUE, MAX_VALUE + 10**6]
    one_by_one = LatencyHistogram()
    for value in values:
        one_by_one.record(value)
    vectorised = LatencyHistogram()
    vectorised.record_array(np.array(values, dtype=np.int64))
    assert one_by_one == vectorised
    assert vectorised.max == MAX_VALUE
    assert vectorised.total == sum(min(v, MAX_VALUE) for v in values)


def test_rejects_negative_and_non_integer() -> None:
    hist = LatencyHistogram()
    with pytest.raises(ValueError):
        hist.record(-1)
    with pytest.raises(ValueError):
        hist.record_array(np.array([5, -3]))
    with pytest.raises(TypeError):
        hist.record_array(np.array([1.5]))
    assert hist.count == 0


def test_total_is_exact_beyond_int64() -> None:
    hist = LatencyHistogram()
    hist.record_array(np.full(1 << 20, MAX_VALUE, dtype=np.int64))
    assert hist.total == MAX_VALUE << 20
    assert hist.total > 2**63
    assert hist.mean() == MAX_VALUE


def test_merge_equals_recording_the_concatenation() -> None:
    a, b = _lognormal_us(50_000, seed=1), _lognormal_us(30_000, seed=2) + 5_000
    ha, hb, both = LatencyHistogram(), LatencyHistogram(), LatencyHistogram()
    ha.record_array(a)
    hb.record_array(b)
    both.record_array(np.concatenate([a, b]))
    assert ha + hb == both
    assert ha.count == a.size  # __add__ left its operands alone
    ha.merge(hb)
    assert ha == both
    assert ha.summary() == both.summary()
    ha.merge(LatencyHistogram())
    assert ha == both


def test_serialisation_round_trip() -> None:
    hist = LatencyHistogram()
    hist.record_array(_lognormal_us(100_000))
    hist.record(MAX_VALUE)
    hist.record_array(np.full(1 << 20, MAX_VALUE, dtype=np.int64))
    blob = hist.to_bytes()
    assert len(blob) < 8_000
    back = LatencyHistogram.from_bytes(blob)
    assert back == hist
    assert back.summary() == hist.summary()
    assert back.total == hist.total
    empty = LatencyHistogram.from_bytes(LatencyHistogram().to_bytes())
    assert empty == LatencyHistogram()
    assert empty.min is None


@pytest.mark.parametrize("blob", [b"", b"SRLH", b"XXXX\x01abc", b"SRLH\x01not zlib"])
def test_from_bytes_rejects_garbage(blob: bytes) -> None:
    with pytest.raises(ValueError):
        LatencyHistogram.from_bytes(blob)


def test_empty_histogram() -> None:
    hist = LatencyHistogram()
    assert hist.mean() is None
    assert hist.percentile(50) is None
    assert hist.percentile(0) is None
    assert hist.percentile(100) is None
    summary = hist.summary()
    assert summary.pop("count") == 0
    assert set(summary) == {"mean_us", "p50_us", "p90_us", "p99_us", "p999_us", "max_us", "min_us"}
    assert all(value is None for value in summary.values())
    with pytest.raises(ValueError):
        hist.percentile(101)
    with pytest.raises(ValueError):
        hist.percentile(math.nan)


# --- per-transaction logs ----------------------------------------------------------------


@dataclass
class Reference:
    transactions: int
    failed: int
    latencies: list[int]
    first: int | None
    last: int | None


def reference_parse(paths: Sequence[Path]) -> Reference:
    """The obvious line-by-line reading of a pgbench -l log."""
    latencies: list[int] = []
    failed = 0
    ends: list[int] = []
    for path in paths:
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            fields = line.split()
            if fields[2].isdigit():
                latencies.append(int(fields[2]))
            else:
                failed += 1
            ends.append(int(fields[4]) * 1_000_000 + int(fields[5]))
    return Reference(
        transactions=len(latencies),
        failed=failed,
        latencies=latencies,
        first=ends[0] if ends else None,
        last=ends[-1] if ends else None,
    )


def synthetic_lines(
    n: int,
    seed: int,
    extra_fields: int = 0,
    failure_words: Sequence[str] = (),
    failure_rate: float = 0.0,
) -> list[str]:
    rng = np.random.default_rng(seed)
    latencies = _lognormal_us(n, seed)
    ends = 1_700_000_000_000_000 + np.cumsum(rng.integers(1, 400, size=n))
    lines = []
    for i in range(n):
        time = str(latencies[i])
        if failure_words and rng.random() < failure_rate:
            time = failure_words[int(rng.integers(len(failure_words)))]
        epoch, micros = divmod(int(ends[i]), 1_000_000)
        fields = [str(i % 64), str(i // 64), time, str(i % 3), str(epoch), str(micros)]
        fields += [str(rng.integers(0, 500)) for _ in range(extra_fields)]
        lines.append(" ".join(fields))
    return lines


def write_log(path: Path, lines: Sequence[str], trailing_newline: bool = True) -> Path:
    text = "\n".join(lines)
    if trailing_newline and lines:
        text += "\n"
    path.write_text(text)
    return path


def assert_matches_reference(paths: Sequence[Path], chunk_bytes: int) -> None:
    ref = reference_parse(paths)
    if len(paths) == 1:
        got = parse_transaction_log(paths[0], chunk_bytes=chunk_bytes)
    else:
        got = parse_transaction_logs(paths, chunk_bytes=chunk_bytes)
    assert got.transactions == ref.transactions
    assert got.failed == ref.failed
    assert got.first_epoch_us == ref.first
    assert got.last_epoch_us == ref.last
    hist = got.histogram
    assert hist.count == ref.transactions
    if ref.latencies:
        assert hist.min == min(ref.latencies)
        assert hist.max == max(ref.latencies)
        assert hist.total == sum(ref.latencies)
        assert hist.mean() == sum(ref.latencies) / len(ref.latencies)
    else:
        assert hist.mean() is None
    expected = LatencyHistogram()
    expected.record_array(np.array(ref.latencies, dtype=np.int64))
    assert hist == expected


CHUNKS = [7, 100, 4096, 8 << 20]


@pytest.mark.parametrize("chunk_bytes", CHUNKS)
@pytest.mark.parametrize("extra_fields", [0, 1, 2])
def test_numeric_logs(tmp_path: Path, chunk_bytes: int, extra_fields: int) -> None:
    """6 fields, 7 with -R (schedule lag), 8 with -R and --max-tries (retries)."""
    lines = synthetic_lines(3_000, seed=extra_fields, extra_fields=extra_fields)
    assert_matches_reference([write_log(tmp_path / "pgbench_log.1", lines)], chunk_bytes)


@pytest.mark.parametrize("chunk_bytes", CHUNKS)
def test_logs_with_skipped_and_failed(tmp_path: Path, chunk_bytes: int) -> None:
    words = ["skipped", "failed", "serialization", "deadlock", "other"]
    lines = synthetic_lines(3_000, seed=9, extra_fields=1, failure_words=words, failure_rate=0.05)
    assert any(word in line for line in lines for word in words)
    assert_matches_reference([write_log(tmp_path / "log", lines)], chunk_bytes)


def test_log_of_only_failures(tmp_path: Path) -> None:
    lines = synthetic_lines(50, seed=3, failure_words=["failed"], failure_rate=1.0)
    stats = parse_transaction_log(write_log(tmp_path / "log", lines), chunk_bytes=64)
    assert (stats.transactions, stats.failed) == (0, 50)
    assert stats.first_epoch_us is not None
    assert stats.histogram.mean() is None


def test_empty_log(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    path.write_bytes(b"")
    stats = parse_transaction_log(path)
    assert (stats.transactions, stats.failed) == (0, 0)
    assert stats.first_epoch_us is None and stats.last_epoch_us is None
    assert stats.span_s is None
    assert stats.histogram.count == 0


@pytest.mark.parametrize("chunk_bytes", CHUNKS)
def test_log_without_trailing_newline(tmp_path: Path, chunk_bytes: int) -> None:
    lines = synthetic_lines(777, seed=4)
    path = write_log(tmp_path / "log", lines, trailing_newline=False)
    assert not path.read_bytes().endswith(b"\n")
    assert_matches_reference([path], chunk_bytes)


def test_one_line_without_newline(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_text("0 0 812 0 1700000000 5")
    stats = parse_transaction_log(path)
    assert stats.transactions == 1
    assert stats.first_epoch_us == stats.last_epoch_us == 1_700_000_000_000_005
    assert stats.histogram.max == 812
    assert stats.span_s == 0.0


def test_chunk_boundary_inside_lines(tmp_path: Path) -> None:
    lines = synthetic_lines(500, seed=5)
    path = write_log(tmp_path / "log", lines)
    for chunk_bytes in (1, 2, 3, 17, 33, 34, 35, 1000):
        assert_matches_reference([path], chunk_bytes)


def test_blank_lines_are_ignored(tmp_path: Path) -> None:
    lines = synthetic_lines(100, seed=6)
    path = write_log(tmp_path / "log", [*lines[:50], "", *lines[50:], ""])
    assert_matches_reference([path], 8 << 20)


def test_several_thread_logs(tmp_path: Path) -> None:
    names = ["pgbench_log.4242", "pgbench_log.4242.1", "pgbench_log.4242.2", "pgbench_log.4242.10"]
    for seed, name in enumerate(names):
        write_log(tmp_path / name, synthetic_lines(400 + seed, seed=seed, extra_fields=1))
    (tmp_path / "pgbench_log.4242.txt").write_text("not a log\n")
    (tmp_path / "other.4242").write_text("not a log\n")
    paths = transaction_log_paths(tmp_path)
    assert [p.name for p in paths] == names
    ref = reference_parse(paths)
    got = parse_transaction_logs(paths, chunk_bytes=999)
    assert got.transactions == ref.transactions
    assert got.histogram.total == sum(ref.latencies)
    ends = [parse_transaction_log(p) for p in paths]
    assert got.first_epoch_us == min(s.first_epoch_us for s in ends if s.first_epoch_us)
    assert got.last_epoch_us == max(s.last_epoch_us for s in ends if s.last_epoch_us)
    # the figures of logs read apart (one pgbench per instance), added, are those of
    # reading them all at once
    summed = parse_transaction_logs(paths[:2]) + parse_transaction_logs(paths[2:])
    assert (summed.transactions, summed.failed) == (got.transactions, got.failed)
    assert (summed.first_epoch_us, summed.last_epoch_us) == (got.first_epoch_us,
                                                             got.last_epoch_us)
    assert summed.histogram.to_bytes() == got.histogram.to_bytes()


def test_into_given_histogram(tmp_path: Path) -> None:
    hist = LatencyHistogram()
    hist.record(5)
    path = write_log(tmp_path / "log", synthetic_lines(100, seed=8))
    stats = parse_transaction_log(path, histogram=hist)
    assert stats.histogram is hist
    assert hist.count == 101


@pytest.mark.parametrize(
    "bad_line",
    [
        "0 1 812 0 1700000000",  # too few fields
        "0 x 812 0 1700000000 12",  # a word where a number must be
        "garbage",
    ],
)
def test_malformed_line_raises(tmp_path: Path, bad_line: str) -> None:
    lines = [*synthetic_lines(20, seed=1), bad_line, *synthetic_lines(20, seed=2)]
    with pytest.raises(ValueError, match="per-transaction log line"):
        parse_transaction_log(write_log(tmp_path / "log", lines))


# --- summary and progress ------------------------------------------------------------------

PGBENCH_96 = """\
starting vacuum...end.
transaction type: <builtin: TPC-B (sort of)>
scaling factor: 10
query mode: simple
number of clients: 8
number of threads: 2
duration: 10 s
number of transactions actually processed: 12345
latency average = 6.481 ms
latency stddev = 2.104 ms
tps = 1233.918004 (including connections establishing)
tps = 1235.201114 (excluding connections establishing)
"""

PGBENCH_18 = """\
pgbench (18.0)
transaction type: /tmp/x.sql
scaling factor: 1
query mode: prepared
number of clients: 4
number of threads: 2
maximum number of tries: 1
duration: 5 s
number of transactions actually processed: 23456
number of failed transactions: 0 (0.000%)
latency average = 0.851 ms
latency stddev = 0.412 ms
initial connection time = 4.215 ms
tps = 4691.612934 (without initial connection time)
"""

PGBENCH_15_SCRIPTS = """\
transaction type: multiple scripts
scaling factor: 1
query mode: simple
number of clients: 2
number of threads: 1
maximum number of tries: 1
number of transactions per client: 100
number of transactions actually processed: 180/200
number of failed transactions: 20 (10.000%)
latency average = 1.500 ms (including failures)
initial connection time = 2.000 ms
tps = 1000.000000 (without initial connection time)
SQL script 1: <builtin: TPC-B (sort of)>
 - weight: 1 (targets 50.0% of total)
 - 90 transactions (50.0% of total, tps = 500.000000)
 - number of failed transactions: 10 (10.000%)
 - latency average = 9.999 ms
 - latency stddev = 8.888 ms
"""


def test_summary_96() -> None:
    assert parse_summary(PGBENCH_96) == PgbenchSummary(
        transaction_type="<builtin: TPC-B (sort of)>",
        scaling_factor=10,
        query_mode="simple",
        clients=8,
        threads=2,
        duration_s=10,
        transactions=12345,
        failed=None,
        latency_avg_ms=6.481,
        latency_stddev_ms=2.104,
        initial_connection_ms=None,
        tps=1235.201114,
    )


def test_summary_18() -> None:
    assert parse_summary(PGBENCH_18) == PgbenchSummary(
        transaction_type="/tmp/x.sql",
        scaling_factor=1,
        query_mode="prepared",
        clients=4,
        threads=2,
        duration_s=5,
        transactions=23456,
        failed=0,
        latency_avg_ms=0.851,
        latency_stddev_ms=0.412,
        initial_connection_ms=4.215,
        tps=4691.612934,
    )


def test_summary_ignores_per_script_sections() -> None:
    summary = parse_summary(PGBENCH_15_SCRIPTS)
    assert summary.transactions == 180
    assert summary.failed == 20
    assert summary.duration_s is None
    assert summary.latency_avg_ms == 1.5
    assert summary.latency_stddev_ms is None
    assert summary.tps == 1000.0


def test_summary_of_nothing() -> None:
    assert parse_summary("pgbench: error: connection refused\n") == PgbenchSummary()


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "progress: 1.0 s, 1234.5 tps, lat 0.812 ms stddev 0.123",
            ProgressSample(t_s=1.0, tps=1234.5, latency_ms=0.812, stddev_ms=0.123),
        ),
        (
            "progress: 2.0 s, 1500.0 tps, lat 0.650 ms stddev 0.200, 3 failed\n",
            ProgressSample(t_s=2.0, tps=1500.0, latency_ms=0.65, stddev_ms=0.2, failed=3),
        ),
        (
            "progress: 3.0 s, 100.0 tps, lat 1.000 ms stddev 0.500, 0 failed, lag 0.120 ms,"
            " 2 skipped, 4 retried, 5 retries",
            ProgressSample(
                t_s=3.0,
                tps=100.0,
                latency_ms=1.0,
                stddev_ms=0.5,
                failed=0,
                lag_ms=0.12,
                skipped=2,
            ),
        ),
        (
            "progress: 4.0 s, 99.9 tps, lat 1.001 ms stddev 0.010, lag 0.050 ms",
            ProgressSample(t_s=4.0, tps=99.9, latency_ms=1.001, stddev_ms=0.01, lag_ms=0.05),
        ),
        (
            "progress: 5.0 s, 0.0 tps, lat -nan ms stddev -nan",
            ProgressSample(t_s=5.0, tps=0.0, latency_ms=None, stddev_ms=None),
        ),
        (
            "progress: 1700000000.123 s, 10.0 tps, lat 2.000 ms",
            ProgressSample(t_s=1700000000.123, tps=10.0, latency_ms=2.0, stddev_ms=None),
        ),
    ],
)
def test_progress_lines(line: str, expected: ProgressSample) -> None:
    assert parse_progress_line(line) == expected


@pytest.mark.parametrize(
    "line",
    ["", "starting vacuum...end.", "pgbench (15.4)", "tps = 5.0 (without initial connection time)"],
)
def test_not_progress_lines(line: str) -> None:
    assert parse_progress_line(line) is None


# --- statistics --------------------------------------------------------------------------


def test_mean_ci_known_values() -> None:
    ci = mean_ci([10, 12, 14])
    t_975_df2 = float(scipy_stats.t.ppf(0.975, 2))
    assert t_975_df2 == pytest.approx(4.303, abs=5e-4)
    half = t_975_df2 * 2 / math.sqrt(3)  # t · s / √n
    assert ci.n == 3
    assert ci.mean == 12
    assert ci.stdev == 2
    assert ci.low == pytest.approx(12 - half, rel=1e-12)
    assert ci.high == pytest.approx(12 + half, rel=1e-12)
    assert ci.half_width_rel == pytest.approx(half / 12, rel=1e-12)
    assert ci.high is not None
    assert ci.high - ci.mean == pytest.approx(4.303 * 2 / math.sqrt(3), rel=1e-4)
    wider = mean_ci([10, 12, 14], confidence=0.99)
    assert wider.low is not None and ci.low is not None and wider.low < ci.low


def test_a_rates_interval_is_on_the_log_scale_and_above_zero() -> None:
    """TPS of two repeats far apart: mean ± t · s / √n reaches below zero; the log
    scale's interval, mean · e^∓h with h = t · s(log) / √n, cannot, and its relative half
    width is e^h - 1 (what the stopping rule holds to ci_target)."""
    tps = [4000.0, 16000.0]
    arithmetic = mean_ci(tps)
    assert arithmetic.low is not None and arithmetic.low < 0
    ci = rate_ci(tps)
    h = float(scipy_stats.t.ppf(0.975, 1)) * statistics.stdev([math.log(v) for v in tps]) \
        / math.sqrt(2)
    assert (ci.n, ci.mean, ci.stdev) == (2, 10000.0, arithmetic.stdev)
    assert ci.low == pytest.approx(10000 * math.exp(-h), rel=1e-12)
    assert ci.high == pytest.approx(10000 * math.exp(h), rel=1e-12)
    assert ci.half_width_rel == pytest.approx(math.expm1(h), rel=1e-12)
    # close values: much the arithmetic interval
    near = [9000.0, 9100.0, 9050.0, 8990.0]
    a, r = mean_ci(near), rate_ci(near)
    assert a.low is not None and r.low is not None and r.low == pytest.approx(a.low, rel=1e-3)
    # a given t (a stored interval's), and a value with no log: the t interval, cut at 0
    assert rate_ci(tps, t=1.0).half_width_rel == pytest.approx(
        math.expm1(statistics.stdev([math.log(v) for v in tps]) / math.sqrt(2)))
    cut = rate_ci([0.0, 10.0, 30.0])
    assert cut.low == 0.0 and cut.high == mean_ci([0.0, 10.0, 30.0]).high
    assert rate_ci([7.0]) == mean_ci([7.0])


def test_mean_ci_degenerate() -> None:
    single = mean_ci([5.0])
    assert (single.n, single.mean) == (1, 5.0)
    assert single.stdev is single.low is single.high is single.half_width_rel is None
    zero = mean_ci([-1.0, 1.0])
    assert zero.mean == 0 and zero.half_width_rel is None and zero.low is not None
    with pytest.raises(ValueError):
        mean_ci([])
    with pytest.raises(ValueError):
        mean_ci([1.0, 2.0], confidence=1.5)


def test_ci_within() -> None:
    assert not ci_within([100.0], 0.5)
    assert ci_within([100.0, 100.5, 99.5, 100.2, 99.8], 0.01)
    assert not ci_within([100.0, 110.0, 90.0], 0.01)
    assert not ci_within([-1.0, 1.0], 10.0)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([1.0, 2.0, 3.0, 4.0], [2.0, 3.5, 4.0, 5.5, 7.0]),
        ([100.1, 99.8, 100.4], [100.0, 100.2, 99.9, 100.1, 100.3, 99.7]),
        ([5.0, 5.0, 5.0], [4.0, 6.0, 7.0]),
    ],
)
# scipy warns about a sample without spread; its answer is still the reference.
@pytest.mark.filterwarnings("ignore:Precision loss occurred:RuntimeWarning")
def test_welch_t_matches_scipy(a: list[float], b: list[float]) -> None:
    ours = welch_t(a, b)
    theirs = scipy_stats.ttest_ind(a, b, equal_var=False)
    assert ours.t == pytest.approx(float(theirs.statistic), rel=1e-10)
    assert ours.p_value == pytest.approx(float(theirs.pvalue), rel=1e-9)
    assert ours.df == pytest.approx(float(theirs.df), rel=1e-10)
    assert ours.significant == (float(theirs.pvalue) < 0.05)


def test_welch_t_zero_variance() -> None:
    same = welch_t([3.0, 3.0, 3.0], [3.0, 3.0])
    assert (same.t, same.p_value, same.significant) == (0.0, 1.0, False)
    apart = welch_t([3.0, 3.0], [4.0, 4.0, 4.0])
    assert apart.p_value == 0.0 and apart.significant and apart.t == -math.inf
    with pytest.raises(ValueError):
        welch_t([1.0], [1.0, 2.0])


def test_ratio_ci_sanity() -> None:
    a = [2000.0, 2100.0, 1900.0, 2050.0, 1950.0]
    b = [1000.0, 1010.0, 990.0, 1005.0, 995.0]
    result = ratio_ci(a, b)
    assert result.ratio == statistics.fmean(a) / statistics.fmean(b)
    assert result.low is not None and result.high is not None
    assert result.low < result.ratio < result.high
    assert result.high - result.low < 0.2
    more = ratio_ci(a * 4, b * 4)
    assert more.low is not None and more.high is not None
    assert more.high - more.low < result.high - result.low
    exact = ratio_ci([4.0, 4.0], [2.0, 2.0])
    assert (exact.ratio, exact.low, exact.high) == (2.0, 2.0, 2.0)
    assert ratio_ci([4.0], [2.0, 2.1]).low is None
    with pytest.raises(ValueError):
        ratio_ci([1.0, 2.0], [1.0, -1.0])


def test_ratio_ci_coverage() -> None:
    """Over many simulated 5-run experiments the 95 % interval holds the true ratio ~95 %."""
    rng = np.random.default_rng(11)
    true_ratio = 1500.0 / 1000.0
    trials = 2_000
    hits = 0
    for _ in range(trials):
        a = rng.normal(1500.0, 60.0, size=5).tolist()
        b = rng.normal(1000.0, 30.0, size=5).tolist()
        result = ratio_ci(a, b)
        assert result.low is not None and result.high is not None
        hits += result.low <= true_ratio <= result.high
    assert 0.93 <= hits / trials <= 0.97


def test_huge_numbers_stay_exact(tmp_path: Path) -> None:
    """Numbers past int64 (or past where seconds*10**6 fits) take the exact path."""
    lines = [
        "0 1 99999999999999999999999 0 1700000000 5",
        "1 99999999999999999999 700 0 9999999999999 999999",
    ]
    stats = parse_transaction_log(write_log(tmp_path / "log", lines))
    assert stats.transactions == 2
    assert stats.histogram.max == MAX_VALUE
    assert stats.histogram.min == 700
    assert stats.first_epoch_us == 1_700_000_000_000_005
    assert stats.last_epoch_us == 9_999_999_999_999_999_999
