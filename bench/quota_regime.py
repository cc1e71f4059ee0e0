"""Which regime a CPU quota on the sync walsender gives: its capacity, or the latency of
its bursts. One interleaved run of the seed's `on` cell at 64 clients, stock and with
the walsender held to a few shares of a CPU (placements.NAME.quota), then per cell:

- TPS with its interval, and the share of the machine's CPUs left idle;
- what the quota did (cpu.stat): the periods it used up, the time waited a second;
- two predictions of the cell from the stock cell and the quota alone:
  - capacity: the share ÷ the walsender's CPU per commit in the stock cell;
  - bursts: at most one round of the clients' commits a period, clients ÷ the period
    (the walsender, throttled, releases nobody until its next period);
  and which of the two is nearer.

    .venv/bin/python bench/quota_regime.py [--shares 0.1,0.05,0.02,0.01] [--rounds 3]
        [--clients 64] [--duration 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from syncrep_lab.placement.cpus import machine_cpus  # noqa: E402
from syncrep_lab.placement.quota import period_for  # noqa: E402

SPEC = """\
name = "quota-regime"

[topology]
standbys = 2
profile = "seed"

[workload]
kind = "insert"
clients = {clients}
duration = {duration}
warmup = 1

[matrix]
synchronous_commit = ["on"]
placement = {placements}

[run]
repeats_min = {rounds}
repeats_max = {rounds}

[probes]
probed_repeats = 0
{quotas}
"""


def _cli(*args: str) -> Any:
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "syncrep-lab"), *args],
                         capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL)
    return json.loads(out.stdout)


def _cpu(costs: dict[str, Any], node: str, role: str) -> float | None:
    for r in costs["roles"]:
        if (r["node"], r["role"]) == (node, role):
            return (r["cpu_us_per_commit"] or {}).get("mean")
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shares", default="0.1,0.05,0.02,0.01")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--run", type=Path, default=None,
                        help="read a run this script made instead of making one")
    args = parser.parse_args()
    shares = [float(s) for s in args.shares.split(",")]
    names = {f"q{s:g}".replace(".", "_"): s for s in shares}
    quotas = "".join(f'\n[placements.{n}]\nquota = {{ "walsender:b" = {s} }}\n'
                     for n, s in names.items())
    work = Path(tempfile.mkdtemp(prefix="srl-quota-", dir="/tmp"))
    work.chmod(0o755)
    spec = work / "spec.toml"
    spec.write_text(SPEC.format(clients=args.clients, duration=args.duration,
                                rounds=args.rounds, quotas=quotas,
                                placements=json.dumps(["none", *names])))
    run = args.run or work / "run"
    if args.run is None:
        subprocess.run([str(ROOT / ".venv" / "bin" / "syncrep-lab"), "run", str(spec),
                        "--out", str(run)], check=True, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL)
    cells = {c["axes"]["placement"]: c for c in _cli("results", str(run), "--json")}
    labels = {c["idx"]: c["axes"]["placement"] for c in cells.values()}
    costs = {labels[c["idx"]]: c for c in _cli("costs", str(run), "--json")}
    stock = cells["none"]
    sender_us = _cpu(costs["none"], "primary", "walsender:b")
    print(f"run {run}: {args.clients} clients, {args.rounds} interleaved rounds of "
          f"{args.duration} s; stock walsender:b {sender_us or 0:.1f} µs of CPU a commit")
    print(f"{'cell':<14} {'TPS':>7} {'95 % CI':>17} {'idle':>5} {'used up':>8} "
          f"{'waited':>9} {'capacity':>9} {'bursts':>8}  nearer")
    for label, cell in cells.items():
        busy = sum((r["cpu_us_per_commit"] or {}).get("mean") or 0.0
                   for r in costs[label]["roles"]) * (cell["tps_mean"] or 0) / 1e6
        idle = 1 - busy / len(machine_cpus())
        quota = (cell.get("quotas") or [None])[0]
        share = names.get(label)
        line = (f"{label:<14} {cell['tps_mean']:>7,.0f} "
                f"[{cell['tps_ci_low'] or 0:>7,.0f}, {cell['tps_ci_high'] or 0:>7,.0f}] "
                f"{100 * idle:>4.0f}%")
        if quota is None or share is None or not sender_us:
            print(line)
            continue
        capacity = share * 1e6 / sender_us
        bursts = args.clients / (period_for(share) / 1e6)
        tps = cell["tps_mean"]
        nearer = "capacity" if abs(capacity - tps) < abs(bursts - tps) else "bursts"
        print(f"{line} {100 * (quota['throttled_share'] or 0):>7.0f}% "
              f"{quota['throttled_ms_per_s'] or 0:>6.0f} ms/s {capacity:>9,.0f} "
              f"{bursts:>8,.0f}  {nearer} (measured ÷ capacity {tps / capacity:.3f}, "
              f"÷ bursts {tps / bursts:.2f})")
    print(f"stock cell: {stock['tps_mean']:,.0f} tps, led by: {stock['limit']}")


if __name__ == "__main__":
    main()
