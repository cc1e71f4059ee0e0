"""What a duet buys: runs of ``syncrep-lab ab 18`` in duet order (``--duet``: both sides at
the same moment, each on its own half of the CPUs, swapped every round) and in
interleaved order, each from the same budget, the two orders alternating in one sitting
(which goes first swaps from one pair of runs to the next) so that the machine's mood
falls on both.

    .venv/bin/python bench/duet.py [--pairs 3] [--budget 3m] [--duration 2]
        [--clients 8] [--confidence 0.95] [--pilot 3] [--orders interleaved,duet]
        [--patch FILE] [--target 0.02] [--json FILE]

Without ``--patch`` an A/A (the empty patch, stock's installation copied): every
interval that excludes 1 is a false positive. With ``--patch`` a change whose cost is
known (examples/patches/syncrep-wait-spin-18.patch: CPU spent in every commit's wait
for a standby, none in ``local``'s): an ``on`` interval that excludes 1 is the cost
detected, a ``local`` one a false positive of the control.

Per order and cell (``on`` and the control ``local``): the rounds the budget gave, the
ratio patched / stock, its interval's half width (relative), and whether the interval
excluded 1; then per order and level the median ratio, the median half width, how many
intervals excluded 1, how many ratios were above 1 (an A/A's sign is a coin: a side that
wins more often than a coin is a bias of the sides) and the runs' median wall time. A
duet's ratio is the crossover's (units of two rounds, each side once on each CPU set);
the per-round interval of the same rounds (``ab.json``'s ``per_round``) is printed
beside it, and its median too: what the crossover removed from the same run. Without
``--target`` the rounds stop on the budget alone (``repeats_max`` 1000, the target
±0.1 %), so both orders get the same time; with it, ab's stop rule aims at that target within
the budget (what a user's ``ab`` does). ``--pilot`` is the rounds (a duet: its units of
two) every run takes before the stop rule may end it (``repeats_min``). The builds are
cached (the first run builds what it needs); the probed repeats are off: the ratios are
what is compared.
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


def spec_text(duration: int, clients: int, confidence: float, target: float | None,
              pilot: int = 3) -> str:
    """tests/test_ab.py's A/A spec, its rounds left to the budget (or to ``target``)
    after the first ``pilot``."""
    text = SPEC.format(rounds=pilot, confidence=confidence, probes="probed_repeats = 0")
    text = text.replace(f"repeats_max = {pilot}", "repeats_max = 1000\nci_target = "
                        f"{0.001 if target is None else target}")
    text = text.replace("duration = 1", f"duration = {duration}")
    return text.replace("clients = 4", f"clients = {clients}")


def one_run(work: Path, spec: Path, order: str, budget: str, name: str, patch: Path
            ) -> dict[str, Any]:
    """One run of ``ab`` in ``order``: its cells' ratios, rounds and wall time."""
    out = work / name
    argv = [sys.executable, "-m", "syncrep_lab", "ab", "18", "--patch", str(patch),
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
            "stopped_by": answer.get("stop_reasons"),
            "note": answer.get("order_note"), "cells": cells}


def _half(r: dict[str, Any]) -> float | None:
    """An interval's half width, relative (on the log scale, where it is symmetric)."""
    return (r["high"] / r["low"]) ** 0.5 - 1 if r.get("low") and r.get("high") else None


def _shown(c: dict[str, Any]) -> str:
    if c["half_width"] is None:
        return f"{c['level']} no interval"
    text = (f"{c['level']} {c['rounds']} rounds {c['ratio']:.3f} ±{100 * c['half_width']:.1f} %"
            f"{'' if c['held'] else ' EXCLUDES 1'}")
    if c["per_round_half_width"] is not None:
        text += (f" (per round ±{100 * c['per_round_half_width']:.1f} %"
                 f"{'' if c['per_round_held'] else ' EXCLUDES 1'})")
    return text


def summary(order: str, runs: list[dict[str, Any]]) -> str:
    """An order's lines: per level the median ratio and half width, how many intervals
    excluded 1 (the crossover's, then the per-round interval of the same rounds)."""
    mine = [r for r in runs if r["asked"] == order]
    lines = [f"{order}: {len(mine)} runs, median "
             f"{statistics.median(r['seconds'] for r in mine):.0f} s each" if mine
             else f"{order}: no runs"]
    for level in dict.fromkeys(c["level"] for r in mine for c in r["cells"]):
        cells = [c for r in mine for c in r["cells"] if c["level"] == level]
        halves = [c["half_width"] for c in cells if c["half_width"] is not None]
        if not halves:
            lines.append(f"  {level}: no interval")
            continue
        out = sum(1 for c in cells if not c["held"])
        above = sum(1 for c in cells if c["ratio"] > 1)
        line = (f"  {level}: median ratio {statistics.median(c['ratio'] for c in cells):.3f}"
                f" (above 1 in {above} of {len(cells)}), "
                f"median half width ±{100 * statistics.median(halves):.1f} % over "
                f"{len(halves)} intervals, {out} of {len(cells)} excluded 1")
        each = [c for c in cells if c["per_round_half_width"] is not None]
        if each:
            out = sum(1 for c in each if not c["per_round_held"])
            line += (f"; per round ±"
                     f"{100 * statistics.median(c['per_round_half_width'] for c in each):.1f}"
                     f" %, {out} excluded 1")
        lines.append(line)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3, help="runs of each order")
    parser.add_argument("--budget", default="3m", help="each run's --budget")
    parser.add_argument("--duration", type=int, default=2, help="a repeat's seconds")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--pilot", type=int, default=3,
                        help="rounds (a duet: units) before the stop rule may end a run")
    parser.add_argument("--orders", default=",".join(ORDERS),
                        help="which orders to run, comma-separated")
    parser.add_argument("--patch", type=Path, default=EMPTY,
                        help="the patched side's patch (default: the empty one, an A/A)")
    parser.add_argument("--target", type=float, default=None,
                        help="ab's stop rule aims at this (0.02: ±2 %%); default: the "
                             "budget alone")
    parser.add_argument("--json", type=Path, default=None, help="write every run here")
    args = parser.parse_args()
    orders_asked = tuple(o for o in ORDERS if o in args.orders.split(","))
    if not orders_asked or set(args.orders.split(",")) - set(ORDERS):
        parser.error(f"--orders: one or both of {', '.join(ORDERS)}")
    if args.pilot < 2:
        parser.error("--pilot: at least 2 (an interval needs two rounds)")
    work = Path(tempfile.mkdtemp(prefix="srl-duet-bench-", dir="/tmp"))
    work.chmod(0o755)
    spec = work / "spec.toml"
    spec.write_text(spec_text(args.duration, args.clients, args.confidence, args.target,
                              args.pilot))
    patch = args.patch.resolve()
    print(f"ab 18 --patch {patch.name}: {args.pairs} runs of each order, budget "
          f"{args.budget}, {args.duration} s repeats, {args.clients} clients, target "
          f"{'the budget' if args.target is None else f'±{100 * args.target:g} %'}, "
          f"a pilot of {args.pilot}",
          flush=True)
    runs: list[dict[str, Any]] = []
    try:
        for i in range(args.pairs):
            orders = orders_asked if i % 2 == 0 else orders_asked[::-1]
            for order in orders:
                run = one_run(work, spec, order, args.budget, f"{order}-{i}", patch)
                runs.append(run)
                shown = ", ".join(_shown(c) for c in run["cells"])
                print(f"{i + 1}/{args.pairs} {order:<11} ran as {run['order']:<11} "
                      f"{run['seconds']:5.0f} s (stopped by "
                      f"{', '.join(run['stopped_by'] or ['?'])}): {shown}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    for order in orders_asked:
        print(summary(order, runs))
    if args.json is not None:
        args.json.write_text(json.dumps(runs, indent=2) + "\n")


if __name__ == "__main__":
    main()
