"""How fast ``cluster up`` / ``cluster down`` are, against the hand-made baseline.

Targets (2-core machine, PostgreSQL 18, 2 standbys, sync states verified):
up under 3 s, down under 1 s, and faster than baseline_cluster.sh (initdb,
pg_basebackup, pg_ctl, 2 s settle). Both are run interleaved, A B A B, so that
machine noise hits both alike; medians and the ratio are printed.

    .venv/bin/python bench/cluster_speed.py [--rounds 7] [--pg 18]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from syncrep_lab.pg.installations import reachable_by, resolve
from syncrep_lab.runas import account_env, popen_kwargs, server_account

HERE = Path(__file__).resolve().parent


def timed(argv: list[str], **kwargs: object) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, **kwargs)  # type: ignore[call-overload]
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pg", default="18")
    args = parser.parse_args()

    account = server_account()
    inst = reachable_by(resolve(args.pg), account)
    base = Path(tempfile.mkdtemp(prefix="srl-bench-", dir="/tmp"))
    base.chmod(0o777)
    tool = [sys.executable, "-m", "syncrep_lab"]
    as_account = {"env": account_env(account), **popen_kwargs(account)}
    # One untimed round each: the template cache and the page cache are warm for both.
    results: dict[str, list[float]] = {"tool up": [], "tool down": [], "baseline up": [],
                                       "baseline down": []}
    for round_no in range(args.rounds + 1):
        d = base / f"t{round_no}"
        up = timed([*tool, "cluster", "up", "--pg", args.pg, "--dir", str(d)])
        down = timed([*tool, "cluster", "down", "--dir", str(d)])
        b = base / f"b{round_no}"
        port = 20000 + (os.getpid() % 20000)
        script = str(HERE / "baseline_cluster.sh")
        bup = timed([script, "up", str(inst.bin_dir), str(b), str(port)], **as_account)
        bdown = timed([script, "down", str(inst.bin_dir), str(b)], **as_account)
        if round_no == 0:
            continue
        for key, value in zip(results, (up, down, bup, bdown), strict=True):
            results[key].append(value)
        print(f"round {round_no}: tool up {up:.2f} s down {down:.2f} s | "
              f"baseline up {bup:.2f} s down {bdown:.2f} s", flush=True)
    base.rmdir()
    med = {k: statistics.median(v) for k, v in results.items()}
    summary = {
        "postgresql": str(inst.version),
        "rounds": args.rounds,
        "median_s": {k: round(v, 3) for k, v in med.items()},
        "up_ratio_tool_over_baseline": round(med["tool up"] / med["baseline up"], 3),
        "down_ratio_tool_over_baseline": round(med["tool down"] / med["baseline down"], 3),
        "targets_met": med["tool up"] < 3.0 and med["tool down"] < 1.0,
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
