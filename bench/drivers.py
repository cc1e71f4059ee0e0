"""pgbench against sysbench as the client of one cell: the seed's three nodes ('1(b,c)'),
the insert workload, the two drivers interleaved (each round runs both, in a shuffled
order, and sysbench / pgbench is paired by round).

Prints per driver: TPS with its interval, the p50 and p99 latencies, the client's own CPU
per commit (from /proc of the measured repeats) and the primary's backends' CPU per
commit; then the TPS ratio with its interval.

    .venv/bin/python bench/drivers.py [--out DIR] [--clients 16] [--duration 10]
        [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

TOOL = [sys.executable, "-m", "syncrep_lab"]
SPEC = """\
name = "drivers"
description = "pgbench against sysbench on the same cell"

[topology]
standbys = 2
sync = "1(b,c)"

[workload]
kind = "insert"
clients = {clients}
duration = {duration}
warmup = 3

[matrix]
driver = ["pgbench", "sysbench"]

[compare]
baseline = {{ driver = "pgbench" }}

[run]
repeats_min = {repeats}
repeats_max = {repeats_max}
ci_target = 0.02

[probes]
probed_repeats = 0
"""


def tool(*args: str) -> str:
    res = subprocess.run([*TOOL, *args], capture_output=True, text=True, check=False,
                         stdin=subprocess.DEVNULL, timeout=7200)
    if res.returncode not in (0, 4):
        raise SystemExit(f"syncrep-lab {' '.join(args)} failed ({res.returncode}):\n"
                         f"{res.stdout}{res.stderr}")
    return res.stdout


def cpu(cell: dict[str, Any], node: str, role: str) -> float | None:
    found = next((r for r in cell["roles"] if (r["node"], r["role"]) == (node, role)), None)
    return found["cpu_us_per_commit"]["mean"] if found else None


def fmt(value: float | None, form: str) -> str:
    return "-" if value is None else form.format(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="srl-drivers-", dir="/tmp")) / "run"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.parent.chmod(0o755)
    spec = out.parent / "drivers.toml"
    spec.write_text(SPEC.format(clients=args.clients, duration=args.duration,
                                repeats=args.repeats, repeats_max=args.repeats + 3))
    tool("run", str(spec), "--out", str(out))
    results = {r["params"].get("driver", "pgbench"): r
               for r in json.loads(tool("results", str(out), "--json"))}
    costs = {c["label"].split("=", 1)[1]: c for c in json.loads(tool("costs", str(out),
                                                                      "--json"))}
    print(f"run folder: {out}")
    print(f"{'driver':<9} {'TPS':>8} {'95% CI':>19} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'client µs/commit':>17} {'backends µs/commit':>19}")
    for driver in ("pgbench", "sysbench"):
        r, c = results[driver], costs[driver]
        print(f"{driver:<9} {r['tps_mean']:>8,.0f} "
              f"{fmt(r['tps_ci_low'], '{:,.0f}'):>9}–{fmt(r['tps_ci_high'], '{:,.0f}'):<9} "
              f"{r['lat_p50_ms']:>7.3f} {r['lat_p99_ms']:>7.3f} "
              f"{fmt(cpu(c, 'client', driver), '{:.1f}'):>17} "
              f"{fmt(cpu(c, 'primary', 'backend'), '{:.1f}'):>19}")
    ratio = results["sysbench"]["ratio_to_baseline"]
    if ratio:
        paired = f"paired over {ratio['rounds']} rounds" if ratio["paired"] else "unpaired"
        print(f"\nTPS sysbench / pgbench: {ratio['mean']:.3f} "
              f"({ratio['low']:.3f}–{ratio['high']:.3f}, {paired})")


if __name__ == "__main__":
    main()
