"""Soak: runs with faults, back to back, for --minutes; then what is left over.

Each round is a full run (in this process, as `syncrep-lab run` does it) of a
small spec on the seed's topology: synchronous_commit local and on at 8
clients, each cell once without faults and once with a fault scenario that
kills the sync standby (back after 3 s) or pauses it for 2 s, so a fault fires
in every faulted repeat (several a minute). Before the first round and after
every round it counts: this process's RSS and open file descriptors, postgres
processes on the machine, clusters the tool has registered, cgroups under the
cpuset hierarchy and network namespaces. At the end it checks every round's
store: every cell done, every measured repeat there, every durability check ok.

    .venv/bin/python bench/soak.py [--minutes 30] [--out /tmp/soak] [--trace-memory]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sqlite3
import subprocess
import time
import tracemalloc
from pathlib import Path
from typing import Any

from syncrep_lab.cluster.manifest import registered
from syncrep_lab.plan.load import load_spec
from syncrep_lab.run.runner import start_run
from syncrep_lab.store import DB_NAME

SPEC = """\
name = "soak"

[topology]
standbys = 2

[workload]
clients = 8
duration = 6
warmup = 1

[matrix]
synchronous_commit = ["local", "on"]
faults = ["none", "kill-sync", "pause-sync"]

[run]
repeats_min = 2
repeats_max = 2

[probes]
probed_repeats = 0

[faults.kill-sync]
events = [{ at = 2, action = "kill", target = "sync", for = 3 }]

[faults.pause-sync]
events = [{ at = 2, action = "pause", target = "sync", for = 2 }]
"""


def _count_postgres() -> int:
    n = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() in ("postgres", "postmaster"):
                    n += 1
            except OSError:
                continue
    return n


def _cgroups() -> int:
    root = Path("/sys/fs/cgroup/cpuset")
    return sum(1 for _ in root.rglob("cpuset.cpus")) if root.is_dir() else 0


def _netns() -> int:
    try:
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                             timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return -1
    return len([line for line in out.splitlines() if line.strip()])


def snapshot() -> dict[str, int]:
    rss_kib = 0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss_kib = int(line.split()[1])
    return {"rss_kib": rss_kib, "fds": len(os.listdir("/proc/self/fd")),
            "postgres_processes": _count_postgres(), "clusters": len(registered()),
            "cgroups": _cgroups(), "netns": _netns()}


def check_store(run: Path) -> dict[str, Any]:
    db = sqlite3.connect(run / DB_NAME)
    try:
        cells = db.execute("select label, status, repeats from cells").fetchall()
        repeats = db.execute("select count(*) from repeats where probed = 0").fetchone()[0]
        lost = db.execute("select count(*) from durability where ok = 0").fetchone()[0]
        checked = db.execute("select count(*) from durability").fetchone()[0]
        faults = db.execute("select count(*) from fault_events where kind = 'fault'").fetchone()[0]
        integrity = db.execute("pragma integrity_check").fetchone()[0]
    finally:
        db.close()
    return {"cells": len(cells), "done": sum(1 for c in cells if c[1] == "done"),
            "repeats": repeats, "expected_repeats": sum(int(c[2]) for c in cells),
            "fault_events": faults, "durability_checks": checked, "lost": lost,
            "integrity": integrity}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--out", type=Path, default=Path("/tmp/syncrep-soak"))
    parser.add_argument("--trace-memory", action="store_true",
                        help="tracemalloc from the first run on: what grew between the "
                             "end of the first run and the end, by source line, and how "
                             "much of the RSS growth is Python objects at all")
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    args.out.chmod(0o755)
    spec = load_spec(SPEC, "soak")
    before = snapshot()
    rounds: list[dict[str, Any]] = []
    ends = time.monotonic() + 60 * args.minutes
    if args.trace_memory:
        tracemalloc.start(10)
    first: tracemalloc.Snapshot | None = None
    while time.monotonic() < ends:
        run = args.out / f"round-{len(rounds):03d}"
        started = time.monotonic()
        start_run(spec, SPEC, args.out, run)
        gc.collect()
        rounds.append({"seconds": round(time.monotonic() - started, 1), **snapshot(),
                       **check_store(run)})
        if args.trace_memory:
            rounds[-1]["python_traced_kib"] = tracemalloc.get_traced_memory()[0] // 1024
            if first is None:
                first = tracemalloc.take_snapshot()
        print(json.dumps(rounds[-1]), flush=True)
    if first is not None and len(rounds) > 1:
        last = tracemalloc.take_snapshot()
        print(f"Python objects grown from the end of run 1 to the end of run {len(rounds)}, "
              "by source line:")
        for stat in last.compare_to(first, "lineno")[:12]:
            print(f"  {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+6d} blocks  "
                  f"{stat.traceback[0]}")
    after = snapshot()
    print(json.dumps({"before": before, "after": after, "rounds": len(rounds),
                      "all_done": all(r["done"] == r["cells"] for r in rounds),
                      "all_repeats": all(r["repeats"] == r["expected_repeats"] for r in rounds),
                      "lost": sum(r["lost"] for r in rounds),
                      "fault_events": sum(r["fault_events"] for r in rounds),
                      "rss_kib_first_last": [rounds[0]["rss_kib"], rounds[-1]["rss_kib"]]
                      if rounds else None}, indent=2))


if __name__ == "__main__":
    main()
