"""``observe --serve`` soaked: the endpoint scraped every second for --minutes while
pgbench runs, the exporter's memory (RSS, /proc) sampled at each scrape and each
scrape's time taken (request to the last byte, on this machine: no network).

Memory is flat if the slope of RSS over time, after the first window (the imports and
the first analysis are the exporter's start, not a leak), has an interval that holds
0 or stays under --slope-kib-per-min; the slope is least squares with its 95 %
Student-t interval (serially correlated samples make it narrower than it should be: a
slope outside it is worth a look, not proof). Scrape times: median, p99, max, against
a 50 ms target. pgbench runs at a fixed --rate so that the machine (2 cores shared with
three servers, pgbench and the exporter) is not saturated.

    .venv/bin/python bench/metrics_soak.py [--minutes 10] [--window 30] [--rate 500]
        [--json out.json] [--arenas N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psycopg
from scipy import stats

from syncrep_lab.cluster.manifest import load
from syncrep_lab.pg.installations import resolve

TOOL = [sys.executable, "-m", "syncrep_lab"]


def rss_kib(pid: int) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"^VmRSS:\s+(\d+) kB", text, re.M)
    assert found is not None, text
    return int(found.group(1))


def slope(times: list[float], values: list[float]) -> tuple[float, float, float]:
    """Least-squares slope and its 95 % interval (units of values per unit of time)."""
    fit = stats.linregress(times, values)
    t = float(stats.t.ppf(0.975, len(times) - 2))
    return float(fit.slope), float(fit.slope - t * fit.stderr), float(fit.slope + t * fit.stderr)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--window", type=int, default=30, help="observe --seconds")
    ap.add_argument("--rate", type=int, default=500, help="pgbench -R (transactions/s)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--arenas", type=int, default=None,
                    help="MALLOC_ARENA_MAX for the exporter (glibc's malloc arenas)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="srl-soak-metrics-", dir="/tmp"))
    root.chmod(0o755)
    where = root / "c"
    up = subprocess.run([*TOOL, "cluster", "up", "--pg", "18", "--standbys", "1", "--dir",
                         str(where)], capture_output=True, text=True, check=False)
    if up.returncode:
        raise SystemExit(up.stdout + up.stderr)
    exporter = bench = None
    try:
        manifest = load(where)
        assert manifest is not None
        conninfo = manifest.conninfo(manifest.primary)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("create table soak_rows(id bigserial, v int)")
        script = root / "w.sql"
        script.write_text("insert into soak_rows(v) values (1);\n")
        seconds = int(args.minutes * 60)
        bench = subprocess.Popen(
            [str(resolve("18").program("pgbench")), "-n", "-c", "4", "-j", "2", "-R",
             str(args.rate), "-T", str(seconds + 3 * args.window), "-f", str(script),
             conninfo], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        exporter = subprocess.Popen(
            [*TOOL, "observe", "--dir", str(where), "--seconds", str(args.window),
             "--serve", "127.0.0.1:0", "--json"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **({"MALLOC_ARENA_MAX": str(args.arenas)} if args.arenas
                                  else {})})
        assert exporter.stderr is not None
        line = exporter.stderr.readline()
        found = re.search(r"http://\S+/metrics", line)
        if found is None:
            raise SystemExit(f"the exporter said: {line}")
        url = found.group(0)
        began = time.monotonic()
        times: list[float] = []
        rss: list[float] = []
        took: list[float] = []
        windows_seen: set[str] = set()
        failed = 0
        while (now := time.monotonic()) - began < seconds:
            asked = time.perf_counter()
            try:
                with urllib.request.urlopen(url, timeout=10) as answer:
                    body = answer.read().decode()
                took.append(time.perf_counter() - asked)
                index = re.search(r"^syncrep_window_index (\S+)", body, re.M)
                if index:
                    windows_seen.add(index.group(1))
            except OSError:
                failed += 1
            times.append(now - began)
            rss.append(rss_kib(exporter.pid))
            time.sleep(max(0.0, 1.0 - (time.monotonic() - now)))
        settled = [i for i, t in enumerate(times) if t >= args.window + 5]
        per_min = slope([times[i] / 60 for i in settled], [rss[i] for i in settled])
        ms = sorted(1000 * t for t in took)
        result = {
            "minutes": args.minutes, "window_s": args.window, "rate": args.rate,
            "scrapes": len(took), "failed": failed, "windows_served": len(windows_seen),
            "scrape_ms": {"median": statistics.median(ms),
                          "p99": ms[min(len(ms) - 1, int(0.99 * len(ms)))],
                          "max": ms[-1]},
            "rss_kib": {"first": rss[0], "after_first_window": rss[settled[0]],
                        "last": rss[-1], "max": max(rss)},
            "rss_slope_kib_per_min": {"mean": per_min[0], "low": per_min[1],
                                      "high": per_min[2]},
            "rss_kib_each_minute": [rss[i] for i in range(0, len(rss), 60)],
        }
        print(json.dumps(result, indent=2))
        if args.json is not None:
            args.json.write_text(json.dumps(result, indent=2) + "\n")
    finally:
        if exporter is not None:
            exporter.terminate()
            exporter.communicate(timeout=60)
        if bench is not None:
            bench.terminate()
            bench.communicate(timeout=60)
        subprocess.run([*TOOL, "cluster", "down", "--dir", str(where)], capture_output=True,
                       check=False)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
