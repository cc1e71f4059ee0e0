"""``observe --serve`` soaked: the endpoint scraped every second for --minutes while
pgbench runs, the exporter's memory (RSS, /proc) sampled at each scrape and each
scrape's time taken (request to the last byte, on this machine: no network).

Memory is flat when, from --settle minutes on (the imports, the first analyses, the
first arenas and buffers of a starting exporter), (1) the upper end of RSS's slope
(least squares, 95 % Student-t interval; serially correlated samples make it narrower
than it should be) is at most --flat KiB/min and (2) no minute adds more than --step
KiB. --flat defaults to twice what the primary's positions kept for lags from positions
add (2 arrays x 8 bytes x 10 Hz x 60 s = 9.4 KiB/min until they reach their ten-minute
bound; arrays grow by reallocation, which may leave as much again in the heap): the only
state meant to grow. --step (256 KiB) is well under a malloc arena's or a pymalloc
arena's first megabyte, the steps a leak or a new arena makes. The bench prints the
verdict and RSS by kind of mapping each minute (heap, arenas, stacks, files) to say
where growth is. Scrape times: median, p99, max, against
a 50 ms target. pgbench runs at a fixed --rate so that the machine (2 cores shared with
three servers, pgbench and the exporter) is not saturated.

    .venv/bin/python bench/metrics_soak.py [--minutes 10] [--window 30] [--rate 500]
        [--json out.json] [--arenas N] [--settle 2] [--flat 19] [--step 256]
"""

from __future__ import annotations

import argparse
import itertools
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


def memory_parts(pid: int) -> dict[str, int]:
    """RSS (KiB) by kind of mapping, from /proc/PID/smaps: the main heap (brk, glibc's
    main arena), anonymous mappings of each size class (glibc's per-thread arenas
    reserve 64 MiB each, threads' stacks 8 MiB, pymalloc's arenas 1 MiB, big blocks
    their own size), and files (code and data of the interpreter and libraries)."""
    parts: dict[str, int] = {}
    kind = "files"
    for text in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = re.match(r"([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$", text)
        if head is not None:
            size = int(head.group(2), 16) - int(head.group(1), 16)
            name = head.group(3)
            if name == "[heap]":
                kind = "heap"
            elif name.startswith("["):
                kind = name.strip("[]")
            elif name:
                kind = "files"
            elif int(head.group(1), 16) % (64 << 20) == 0:  # an arena's heap is aligned
                kind = "anon 64 MiB (arenas)"
            elif size >= 7 << 20:
                kind = "anon 8 MiB (stacks)"
            elif size >= 1 << 20:
                kind = "anon 1-7 MiB"
            else:
                kind = "anon < 1 MiB"
        elif text.startswith("Rss:"):
            parts[kind] = parts.get(kind, 0) + int(text.split()[1])
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"^Threads:\s+(\d+)", status, re.M)
    parts["threads"] = int(found.group(1)) if found else 0
    return parts


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
    ap.add_argument("--settle", type=float, default=2.0,
                    help="minutes of start-up left out of the verdict")
    ap.add_argument("--flat", type=float, default=2 * 2 * 8 * 10 * 60 / 1024,
                    help="KiB/min the slope's upper end may reach (twice the positions')")
    ap.add_argument("--step", type=float, default=256.0,
                    help="KiB the most any one minute after --settle may add")
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
        parts: list[dict[str, int]] = []
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
            if len(times) % 60 == 1:
                parts.append(memory_parts(exporter.pid))
            time.sleep(max(0.0, 1.0 - (time.monotonic() - now)))
        settled = [i for i, t in enumerate(times) if t >= args.window + 5]
        per_min = slope([times[i] / 60 for i in settled], [rss[i] for i in settled])
        tail = [i for i, t in enumerate(times) if t >= 60 * args.settle]
        tail_slope = slope([times[i] / 60 for i in tail], [rss[i] for i in tail])
        marks = [rss[i] for i in tail[::60]] + [rss[-1]]
        step = max(b - a for a, b in itertools.pairwise(marks))
        flat = tail_slope[2] <= args.flat and step <= args.step
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
            "verdict": {
                "from_minute": args.settle, "rss_kib_then": rss[tail[0]],
                "slope_kib_per_min": {"mean": tail_slope[0], "low": tail_slope[1],
                                      "high": tail_slope[2]},
                "largest_minute_rise_kib": step, "flat_kib_per_min": args.flat,
                "step_kib": args.step, "flat": flat,
                "says": (f"{'flat' if flat else 'NOT flat'}: from minute {args.settle:g}, "
                         f"{tail_slope[0]:+.0f} KiB/min ({tail_slope[1]:+.0f} to "
                         f"{tail_slope[2]:+.0f}; at most {args.flat:.0f}), largest rise in a "
                         f"minute {step:+.0f} KiB (at most {args.step:.0f})")},
            "rss_kib_by_mapping_each_minute": {
                k: [p.get(k, 0) for p in parts] for k in sorted({k for p in parts for k in p})},
        }
        print(json.dumps(result, indent=2))
        print(result["verdict"]["says"])
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
