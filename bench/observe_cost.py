"""What watching costs the watched: pgbench's TPS with and without ``syncrep-lab
observe`` beside it, on one cluster, interleaved.

Each round runs pgbench twice in a shuffled order, once alone and once with observe
started 2 s in, sampling at --hz for all but the last 8 s; the paired ratio observed /
alone over the rounds (log scale, Student-t interval) is the observer's cost on this
machine, where the tool, pgbench and the three servers share 2 cores: an upper bound for
a production host with cores to spare. Two ratios: over pgbench's whole run (the tool's
start-up and its analysis after the window included), and over the seconds 4 to
duration - 6, while it samples (pgbench's per-second progress, the same seconds in both
runs of a round). The observer's own CPU is printed too: its backend on the server (as
observe reports it) and the observe process (start-up and analysis included).

    .venv/bin/python bench/observe_cost.py [--rounds 8] [--duration 12] [--hz 10]
        [--clients 8]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from syncrep_lab.cluster.manifest import load
from syncrep_lab.pg.installations import resolve
from syncrep_lab.stats.intervals import paired_ratio

TOOL = [sys.executable, "-m", "syncrep_lab"]


def tool(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TOOL, *args], capture_output=True, text=True, timeout=timeout,
                          check=False, stdin=subprocess.DEVNULL)


def pgbench(program: str, conninfo: str, script: Path, seconds: int, clients: int
            ) -> subprocess.Popen[str]:
    return subprocess.Popen([program, "-n", "-c", str(clients), "-j", "2", "-T", str(seconds),
                             "-P", "1", "-f", str(script), conninfo],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def tps_of(text: str) -> float:
    found = re.search(r"^tps = ([0-9.]+)", text, re.M)
    if found is None:
        raise SystemExit(f"pgbench printed no tps:\n{text}")
    return float(found.group(1))


def steady_tps(text: str, first: int, last: int) -> float:
    """Mean of pgbench's per-second TPS over its seconds ``first`` to ``last``."""
    rates = [float(m.group(2)) for m in re.finditer(
        r"^progress: ([0-9.]+) s, ([0-9.]+) tps", text, re.M)
        if first < float(m.group(1)) <= last]
    if not rates:
        raise SystemExit(f"pgbench printed no progress between {first} and {last} s")
    return statistics.fmean(rates)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--duration", type=int, default=24)
    ap.add_argument("--hz", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="srl-obs-cost-", dir="/tmp"))
    root.chmod(0o755)
    where = root / "c"
    up = tool("cluster", "up", "--standbys", "2", "--dir", str(where))
    if up.returncode != 0:
        raise SystemExit(up.stdout + up.stderr)
    try:
        manifest = load(where)
        assert manifest is not None
        conninfo = manifest.conninfo(manifest.primary)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("create table bench_rows(id bigserial, v int)")
        script = root / "insert.sql"
        script.write_text("insert into bench_rows(v) values (1);\n")
        program = str(resolve("18").program("pgbench"))
        rng = random.Random(args.seed)
        alone: list[float] = []
        observed: list[float] = []
        steady: dict[str, list[float]] = {"alone": [], "observed": []}
        own_server: list[float] = []
        own_tool: list[float] = []
        for n in range(1, args.rounds + 1):
            order = ["alone", "observed"]
            rng.shuffle(order)
            for kind in order:
                bench = pgbench(program, conninfo, script, args.duration, args.clients)
                if kind == "observed":
                    time.sleep(2)
                    # observe is the only child reaped in between: its CPU, exactly
                    before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    watch = subprocess.run(
                        [*TOOL, "observe", "--dir", str(where), "--seconds",
                         str(args.duration - 8), "--hz", str(args.hz), "--slice", "5",
                         "--out", str(root / f"obs-{n}"), "--json"],
                        capture_output=True, text=True, timeout=120, check=False)
                    after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    own_tool.append((after.ru_utime + after.ru_stime - before.ru_utime
                                     - before.ru_stime) / (args.duration - 8))
                    if watch.returncode != 0:
                        raise SystemExit(watch.stdout + watch.stderr)
                    window = json.loads(watch.stdout)["windows"][0]
                    own_server.append(window["own"]["cpu_share_of_core"] or 0.0)
                text, _ = bench.communicate(timeout=args.duration + 60)
                (observed if kind == "observed" else alone).append(tps_of(text))
                steady[kind].append(steady_tps(text, 4, args.duration - 6))
            print(f"round {n}: alone {alone[-1]:,.0f} tps, observed {observed[-1]:,.0f} tps "
                  f"({' then '.join(order)})", flush=True)
        ratio = paired_ratio(observed, alone)
        print(f"\nmedian TPS alone {statistics.median(alone):,.0f}, observed "
              f"{statistics.median(observed):,.0f}")
        print(f"observed / alone, whole run: {ratio.mean:.3f} (95 % CI {ratio.low or 0:.3f} - "
              f"{ratio.high or 0:.3f}, {ratio.rounds} rounds)")
        while_sampling = paired_ratio(steady["observed"], steady["alone"])
        print(f"observed / alone, while it samples (s 4 to {args.duration - 6}): "
              f"{while_sampling.mean:.3f} (95 % CI {while_sampling.low or 0:.3f} - "
              f"{while_sampling.high or 0:.3f})")
        print(f"the observer's backend on the server: median "
              f"{100 * statistics.median(own_server):.2f} % of a core at {args.hz:g} Hz")
        print(f"the observe process itself (Python start-up included): median "
              f"{100 * statistics.median(own_tool):.1f} % of a core")
    finally:
        tool("cluster", "down", "--dir", str(where))
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
