"""sysbench's output (1.0, ``--report-interval=1 --histogram=on``), read into the figures
a pgbench run gives: the per-second progress, the end-of-run summary and, instead of
per-transaction logs, the latency histogram sysbench prints.

sysbench counts each call of the script's ``event()`` as one transaction; the scripts
syncrep-lab writes (run/sysbench.py) make each event one committed transaction,
as pgbench's script is. Its histogram has 1,024 buckets spaced evenly on a log scale
from 1 µs to 100 s, so a latency is known to within about 1.8 % (the bucket's width);
the histogram here takes each bucket's count at its printed value, which sysbench rounds
to 1 ns. pgbench's logs give each transaction to the microsecond: docs/decisions.md says
what that changes.
"""

from __future__ import annotations

import re

import numpy as np

from syncrep_lab.readers.pgbench_log import (
    PgbenchSummary,
    ProgressSample,
    TransactionLogStats,
)
from syncrep_lab.stats.histogram import LatencyHistogram

_N = r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"
_PROGRESS = re.compile(rf"^\[ *{_N}s \] thds: \d+ tps: {_N} qps: {_N}.*?err/s: {_N}")
_HISTOGRAM_LINE = re.compile(rf"^\s*{_N} \|\**\s+(\d+)\s*$")
_SUMMARY = {
    "transactions": re.compile(rf"^\s*transactions:\s+(\d+)\s+\({_N} per sec\.\)", re.M),
    "failed": re.compile(r"^\s*ignored errors:\s+(\d+)", re.M),
    "seconds": re.compile(rf"^\s*total time:\s+{_N}s", re.M),
    "avg": re.compile(rf"^\s*avg:\s+{_N}", re.M),
    "threads": re.compile(r"^Number of threads: (\d+)", re.M),
}


def parse_progress_line(line: str) -> ProgressSample | None:
    """One ``[ 1s ] thds: ... tps: ...`` line; None for any other. sysbench reports a
    percentile of each second's latencies, not their mean: the sample's latency is
    None, as pgbench's is for a second without transactions.

    >>> parse_progress_line("[ 2s ] thds: 8 tps: 4211.93 qps: 4211.93 (r/w/o: "
    ...                     "0.00/4211.93/0.00) lat (ms,95%): 2.81 err/s: 0.00 reconn/s: 0.00")
    ProgressSample(t_s=2.0, tps=4211.93, latency_ms=None, stddev_ms=None, failed=0, \
lag_ms=None, skipped=None)
    """
    match = _PROGRESS.match(line.strip())
    if match is None:
        return None
    t_s, tps, _, errors = (float(v) for v in match.groups())
    return ProgressSample(t_s=t_s, tps=tps, latency_ms=None, stddev_ms=None,
                          failed=round(errors))


def parse_summary(stdout: str) -> PgbenchSummary:
    """sysbench's end-of-run report as pgbench's fields: the transactions and their
    rate (over sysbench's whole run, connections included: it opens them before its
    clock starts), the failed ones (ignored errors), the mean latency."""
    found = {k: p.search(stdout) for k, p in _SUMMARY.items()}
    tx, failed, seconds, avg, threads = (found[k] for k in _SUMMARY)
    return PgbenchSummary(
        transaction_type="sysbench", clients=int(threads[1]) if threads else None,
        threads=int(threads[1]) if threads else None,
        duration_s=round(float(seconds[1])) if seconds else None,
        transactions=int(tx[1]) if tx else None, failed=int(failed[1]) if failed else None,
        latency_avg_ms=float(avg[1]) if avg else None, tps=float(tx[2]) if tx else None)


def parse_histogram(stdout: str) -> TransactionLogStats:
    """The latency histogram sysbench printed, as the figures per-transaction logs give
    (the transactions, each bucket's count at its value; no failed transaction is in it,
    and it holds no times of day).

    >>> s = parse_histogram('''Latency histogram (values are in milliseconds)
    ...        value  ------------- distribution ------------- count
    ...        1.040 |****                                     12
    ...        2.500 |*                                        3
    ...
    ... SQL statistics:''')
    >>> s.transactions, s.histogram.min, s.histogram.max
    (15, 1040, 2500)
    """
    values: list[int] = []
    counts: list[int] = []
    inside = False
    for line in stdout.splitlines():
        if line.startswith("Latency histogram"):
            inside = True
            continue
        if not inside:
            continue
        match = _HISTOGRAM_LINE.match(line)
        if match is not None:
            values.append(round(float(match[1]) * 1000))
            counts.append(int(match[2]))
        elif line.strip() and "distribution" not in line:
            break
    histogram = LatencyHistogram()
    if values:
        histogram.record_array(np.repeat(np.array(values, dtype=np.int64), counts))
    return TransactionLogStats(histogram.count, 0, None, None, histogram)
