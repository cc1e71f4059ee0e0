"""What a duet buys: A/A runs of ``syncrep-lab ab`` (the empty patch, stock's
installation copied) in duet order (``--duet``: both sides at the same moment, each on
its own half of the CPUs, swapped every round) and in interleaved order, each from the
same budget, the two orders alternating in one sitting (which goes first swaps from one
pair of runs to the next) so that the machine's mood falls on both.

    .venv/bin/python bench/duet.py [--pairs 3] [--budget 3m] [--duration 2]
        [--clients 8] [--confidence 0.95] [--json FILE]

Per order and cell (``on`` and the control ``local``): the rounds the budget gave, the
interval's half width of patched / stock (relative), and whether the interval held 1
(an A/A: every miss is a false positive); then each order's median half width and its
misses over all runs. A duet's ratio is the crossover's (units of two rounds, each
side once on each CPU set); the per-round interval of the same rounds (``ab.json``'s
``per_round``) is printed beside it, and its median too: what the crossover removed
from the same run. The rounds stop on the budget alone (``repeats_max`` 1000, the
target ±0.1 %), so both orders get the same time. The builds are cached (the first run
builds stock 18); the probed repeats are off: the ratios are what is compared.
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

ROOT = Path(__file__).resolve().parent.parent
EMPTY = ROOT / "tests" / "data" / "patches" / "empty.patch"
SPEC = (ROOT / "tests" / "data" / "ab-small.toml").read_text()
ORDERS = ("interleaved", "duet")


def spec_text(duration: int, clients: int, confidence: float) -> str:
    """tests/test_ab.py's A/A spec, its rounds left to the budget."""
    text = SPEC.format(rounds=3, confidence=confidence, probes="probed_repeats = 0")
    text = text.replace("repeats_max = 3", "repeats_max = 1000\nci_target = 0.001")
    text = text.replace("duration = 1", f"duration = {duration}")
    return text.replace("clients = 4", f"clients = {clients}")


def one_run(work: Path, spec: Path, order: str, budget: str, name: str) -> dict[str, Any]:
    """One A/A run of ``ab`` in ``order``: its cells' ratios, rounds and wall time."""
    out = work / name
    argv = [sys.executable, "-m", "syncrep_lab", "ab", "18", "--patch", str(EMPTY),
            "--spec", str(spec), "--budget", budget, "--out", str(out)]
    if order == "duet":
        argv.append("--duet")
    began = time.monotonic()
    res = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=work)
    took = time.monotonic() - began
    if res.returncode != 0:
        raise SystemExit(f"{name}: ab exited {res.returncode}\n{res.stderr[-2000:]}")
    answer = json.loads((out / "ab.json").read_text())["bases"][0]["answer"]
    cells = []
    for cell in answer["cells"]:
        r = cell["ratio"]
        each = r.get("per_round") or {}
        cells.append({"level": cell["level"], "rounds": r["rounds"], "ratio": r["mean"],
                      "low": r["low"], "high": r["high"], "half_width": _half(r),
                      "held": r["low"] is not None and r["low"] <= 1 <= r["high"],
                      "units": r.get("crossover_units"),
                      "per_round_half_width": _half(each) if each else None,
                      "per_round_held": bool(each) and each["low"] is not None
                      and each["low"] <= 1 <= each["high"]})
    shutil.rmtree(out, ignore_errors=True)
    return {"order": answer["order"], "asked": order, "seconds": took,
            "note": answer.get("order_note"), "cells": cells}


def _half(r: dict[str, Any]) -> float | None:
    """An interval's half width, relative (on the log scale, where it is symmetric)."""
    return (r["high"] / r["low"]) ** 0.5 - 1 if r.get("low") and r.get("high") else None


def _shown(c: dict[str, Any]) -> str:
    if c["half_width"] is None:
        return f"{c['level']} no interval"
    text = (f"{c['level']} {c['rounds']} rounds ±{100 * c['half_width']:.1f} %"
            f"{'' if c['held'] else ' MISSED 1'}")
    if c["per_round_half_width"] is not None:
        text += (f" (per round ±{100 * c['per_round_half_width']:.1f} %"
                 f"{'' if c['per_round_held'] else ' MISSED 1'})")
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3, help="runs of each order")
    parser.add_argument("--budget", default="3m", help="each run's --budget")
    parser.add_argument("--duration", type=int, default=2, help="a repeat's seconds")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--json", type=Path, default=None, help="write every run here")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="srl-duet-bench-", dir="/tmp"))
    work.chmod(0o755)
    spec = work / "spec.toml"
    spec.write_text(spec_text(args.duration, args.clients, args.confidence))
    runs: list[dict[str, Any]] = []
    try:
        for i in range(args.pairs):
            orders = ORDERS if i % 2 == 0 else ORDERS[::-1]
            for order in orders:
                run = one_run(work, spec, order, args.budget, f"{order}-{i}")
                runs.append(run)
                shown = ", ".join(_shown(c) for c in run["cells"])
                print(f"{i + 1}/{args.pairs} {order:<11} ran as {run['order']:<11} "
                      f"{run['seconds']:5.0f} s: {shown}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    for order in ORDERS:
        mine = [c for r in runs if r["asked"] == order for c in r["cells"]]
        halves = [c["half_width"] for c in mine if c["half_width"] is not None]
        missed = sum(1 for c in mine if not c["held"])
        median = f"±{100 * statistics.median(halves):.1f} %" if halves else "-"
        print(f"{order:<11} median half width {median} over {len(halves)} intervals; "
              f"{missed} of {len(mine)} missed 1")
        each = [c["per_round_half_width"] for c in mine
                if c["per_round_half_width"] is not None]
        if each:
            missed = sum(1 for c in mine if c["per_round_half_width"] is not None
                         and not c["per_round_held"])
            print(f"{'':<11} per round, same rounds: median half width "
                  f"±{100 * statistics.median(each):.1f} % over {len(each)} intervals; "
                  f"{missed} missed 1")
    if args.json is not None:
        args.json.write_text(json.dumps(runs, indent=2) + "\n")


if __name__ == "__main__":
    main()
