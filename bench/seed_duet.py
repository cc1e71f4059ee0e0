"""The seed preset in duet pairs against the seed preset interleaved, from the same
budget, in one sitting: ``syncrep-lab run --preset seed`` and ``run --preset seed
--duet`` alternating (which goes first swaps from one pair of runs to the next), each
with ``--budget``.

    .venv/bin/python bench/seed_duet.py [--pairs 1] [--budget 8m] [--json FILE]

In a duet every comparison of the seed is a pair run at the same moment, each side on
one half of the CPUs, swapped every round (plan/duet.py): local beside off, beside
remote_write and beside on; group 1's on beside batch 10 and beside the link; off
beside on without standbys; the pairs on one cluster with their other side on a twin of
it. Per run and comparison: the ratio to its baseline and its interval's half width
(relative; a duet's the crossover's, with the per-round interval of the same rounds
beside it), and the rounds; then per comparison the median half width of each order and
their ratio (interleaved / duet: how many times narrower the duet's interval was).
Needs root (the seed's group 4 link is a network namespace's).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ORDERS = ("interleaved", "duet")


def one_run(work: Path, order: str, budget: str, name: str) -> dict[str, Any]:
    """One run of the seed preset in ``order``: each compared cell's ratio."""
    out = work / name
    argv = [sys.executable, "-m", "syncrep_lab", "run", "--preset", "seed", "--budget",
            budget, "--out", str(out)]
    if order == "duet":
        argv.append("--duet")
    began = time.monotonic()
    res = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=work,
                         stdin=subprocess.DEVNULL)
    took = time.monotonic() - began
    if res.returncode != 0:
        raise SystemExit(f"{name}: run exited {res.returncode}\n{res.stderr[-3000:]}")
    rows = json.loads(subprocess.run(
        [sys.executable, "-m", "syncrep_lab", "results", str(out), "--json"],
        capture_output=True, text=True, check=True, cwd=work).stdout)
    cells = []
    for row in rows:
        r = row.get("ratio_to_baseline")
        if not r or r.get("low") is None:
            continue
        each = r.get("per_round") or {}
        cells.append({"cell": row["label"], "baseline": r.get("baseline"),
                      "ratio": r["mean"], "rounds": r.get("rounds"),
                      "units": r.get("crossover_units"), "half_width": _half(r),
                      "per_round_half_width": _half(each) if each else None})
    shutil.rmtree(out, ignore_errors=True)
    return {"asked": order, "seconds": took, "cells": cells}


def _half(r: dict[str, Any]) -> float | None:
    """An interval's half width, relative (on the log scale, where it is symmetric)."""
    return (r["high"] / r["low"]) ** 0.5 - 1 if r.get("low") and r.get("high") else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1, help="runs of each order")
    parser.add_argument("--budget", default="8m", help="each run's --budget")
    parser.add_argument("--json", type=Path, default=None, help="write every run here")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="srl-seed-duet-", dir="/tmp"))
    work.chmod(0o755)
    runs: list[dict[str, Any]] = []
    try:
        for i in range(args.pairs):
            for order in ORDERS if i % 2 == 0 else ORDERS[::-1]:
                run = one_run(work, order, args.budget, f"{order}-{i}")
                runs.append(run)
                print(f"{i + 1}/{args.pairs} {order} {run['seconds']:.0f} s", flush=True)
                for c in run["cells"]:
                    per = (f" (per round ±{100 * c['per_round_half_width']:.1f} %)"
                           if c["per_round_half_width"] is not None else "")
                    print(f"  {c['cell']} / {c['baseline']}: {c['ratio']:.3f} "
                          f"±{100 * (c['half_width'] or 0):.1f} %{per}, {c['rounds']} "
                          "rounds", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    labels = list(dict.fromkeys(c["cell"] for r in runs for c in r["cells"]))
    for label in labels:
        widths = {}
        for order in ORDERS:
            got = [c["half_width"] for r in runs if r["asked"] == order for c in r["cells"]
                   if c["cell"] == label and c["half_width"] is not None]
            widths[order] = statistics.median(got) if got else None
        a, b = widths["interleaved"], widths["duet"]
        shown = " ".join(f"{o} ±{100 * w:.1f} %" if w is not None else f"{o} -"
                         for o, w in widths.items())
        times = f", {a / b:.2f} times narrower in duet" if a and b else ""
        print(f"{label}: {shown}{times}")
    if args.json is not None:
        args.json.write_text(json.dumps(runs, indent=2) + "\n")


if __name__ == "__main__":
    main()
