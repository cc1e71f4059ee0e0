"""How fast pgbench per-transaction logs are parsed, and that memory stays flat.

Target (2-core machine): at least 2 million lines per second, with peak memory
independent of the log's length. A synthetic ``pgbench -l`` log is written
(64 clients completing in random order, per-client transaction numbers,
lognormal latencies around 800 µs, end times advancing at about 50 000 tps)
and parsed --repeat times; then a log twice as long is parsed as often.

``ru_maxrss`` is a high-water mark that never goes down and that a child
process inherits from its parent, so generation and each measurement run in
fresh child processes of this (small) parent. ``peak_rss_growth_mib`` is the
growth over the first parse, the parser's own footprint; the growth after all
runs is shown too, as glibc keeps some freed heap between parses (it levels
off after a few). Prints one JSON object; temp files are removed.

    .venv/bin/python bench/pgbench_log_parse.py [--lines 5000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

CLIENTS = 64
BLOCK_LINES = 200_000
START_US = 1_700_000_000_000_000
TARGET_MLINES_PER_S = 2.0


def generate(path: Path, lines: int, seed: int) -> None:
    """Write ``lines`` realistic per-transaction log lines (runs in a child)."""
    import math

    import numpy as np

    rng = np.random.default_rng(seed)
    next_txno = np.zeros(CLIENTS, dtype=np.int64)
    now_us = START_US
    line_format = "%d %d %d 0 %d %d\n"
    with open(path, "w") as log:
        for start in range(0, lines, BLOCK_LINES):
            n = min(BLOCK_LINES, lines - start)
            clients = rng.integers(0, CLIENTS, size=n)
            # Per-client transaction numbers: rank of each line among its client's
            # lines in this block, continuing from the previous block.
            order = np.argsort(clients, kind="stable")
            sorted_clients = clients[order]
            group_start = np.searchsorted(sorted_clients, sorted_clients, side="left")
            txno = np.empty(n, dtype=np.int64)
            txno[order] = np.arange(n) - group_start + next_txno[sorted_clients]
            next_txno += np.bincount(clients, minlength=CLIENTS)
            latency = np.rint(rng.lognormal(math.log(800), 0.35, size=n)).astype(np.int64)
            ends = now_us + np.cumsum(rng.exponential(20.0, size=n).astype(np.int64) + 1)
            now_us = int(ends[-1])
            table = np.column_stack((clients, txno, latency, ends // 1_000_000, ends % 1_000_000))
            # One %-format over the whole block keeps the formatting in C.
            log.write((line_format * n) % tuple(table.ravel().tolist()))


def measure_here(path: Path, repeat: int) -> None:
    """Parse ``path`` ``repeat`` times in this fresh process; print timings and RSS.

    The peak after the first parse is the parser's own footprint. Later parses
    in the same process can raise it a little further, by what the C allocator
    keeps from earlier parses; that figure is reported too.
    """
    import resource
    import time

    from syncrep_lab.readers.pgbench_log import parse_transaction_log

    def peak_kib() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    warm = path.with_suffix(".warm")
    warm.write_text("0 0 800 0 1700000000 0\n")
    parse_transaction_log(warm)  # imports and first-call costs out of the measurement
    warm.unlink()
    before = peak_kib()
    seconds = []
    after_first = 0
    for _ in range(repeat):
        started = time.perf_counter()
        stats = parse_transaction_log(path)
        seconds.append(time.perf_counter() - started)
        after_first = after_first or peak_kib()
    json.dump(
        {
            "transactions": stats.transactions,
            "seconds": seconds,
            "rss_before_kib": before,
            "rss_after_first_kib": after_first,
            "rss_after_all_kib": peak_kib(),
            "p50_us": stats.histogram.percentile(50),
            "p99_us": stats.histogram.percentile(99),
        },
        sys.stdout,
    )


@dataclass(frozen=True)
class Measurement:
    lines: int
    file_mib: float
    runs: int
    seconds: list[float]
    median_seconds: float
    median_million_lines_per_s: float
    rss_before_mib: float
    peak_rss_growth_mib: float
    peak_rss_growth_after_all_runs_mib: float
    p50_us: float
    p99_us: float


def _child(*args: str) -> str:
    return subprocess.run(
        [sys.executable, os.path.abspath(__file__), *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def measure(path: Path, lines: int, repeat: int, seed: int) -> Measurement:
    _child("--generate", str(path), "--lines", str(lines), "--seed", str(seed))
    raw = json.loads(_child("--measure", str(path), "--repeat", str(repeat)))
    size = path.stat().st_size
    path.unlink()
    if raw["transactions"] != lines:
        raise SystemExit(f"parsed {raw['transactions']} transactions, wrote {lines}")
    median_s = statistics.median(raw["seconds"])

    def mib(kib: int) -> float:
        return round(kib / 1024, 1)

    return Measurement(
        lines=lines,
        file_mib=round(size / 2**20, 1),
        runs=repeat,
        seconds=[round(x, 3) for x in raw["seconds"]],
        median_seconds=round(median_s, 3),
        median_million_lines_per_s=round(lines / median_s / 1e6, 2),
        rss_before_mib=mib(raw["rss_before_kib"]),
        peak_rss_growth_mib=mib(raw["rss_after_first_kib"] - raw["rss_before_kib"]),
        peak_rss_growth_after_all_runs_mib=mib(raw["rss_after_all_kib"] - raw["rss_before_kib"]),
        p50_us=raw["p50_us"],
        p99_us=raw["p99_us"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--generate", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate is not None:
        generate(args.generate, args.lines, args.seed)
        return
    if args.measure is not None:
        measure_here(args.measure, args.repeat)
        return
    with tempfile.TemporaryDirectory(prefix="srl-bench-log-") as tmp:
        once = measure(Path(tmp) / "pgbench_log.1", args.lines, args.repeat, seed=1)
        twice = measure(Path(tmp) / "pgbench_log.2", 2 * args.lines, args.repeat, seed=2)
    result = {
        "lines": once.lines,
        "median_seconds": once.median_seconds,
        "median_million_lines_per_s": once.median_million_lines_per_s,
        "meets_target_2m_lines_per_s": once.median_million_lines_per_s >= TARGET_MLINES_PER_S,
        "peak_rss_growth_mib": once.peak_rss_growth_mib,
        "peak_rss_growth_mib_2x_lines": twice.peak_rss_growth_mib,
        "memory_flat": twice.peak_rss_growth_mib < 1.5 * max(once.peak_rss_growth_mib, 1.0),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "details": {"1x": asdict(once), "2x": asdict(twice)},
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
