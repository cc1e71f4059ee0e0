"""How many costs ``syncrep-lab ab`` marks as moved when nothing changed: A/A runs (the
empty patch, stock's installation copied), each cell's figures counted three ways:

- marked: what ``ab`` marks (``*``), at the run's level over all the figures the cell
  compares (Bonferroni);
- at the level each: the figures whose own interval (as shown) leaves out 1, which is
  what ``*`` meant before the correction;
- compared: how many figures the cell tests.

    .venv/bin/python bench/ab_false_marks.py [--runs 5] [--rounds 3] [--probed 3]
        [--confidence 0.95]

With one probed repeat a side the system calls have no interval (nothing to mark): the
default is three, as a longer ``ab`` budget gives.

Every mark here is a false one. Builds are cached (the first run builds stock 18).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EMPTY = ROOT / "tests" / "data" / "patches" / "empty.patch"

# the A/A of tests/test_ab.py, with its level and the probed repeats chosen here
SPEC = (ROOT / "tests" / "data" / "ab-small.toml").read_text()


def _figures(cell: dict[str, Any]) -> list[dict[str, Any]]:
    return [fig for role in cell.get("roles") or []
            for fig in [role["cpu_us"], *role["syscalls"].values()] if fig is not None]


def _outside(fig: dict[str, Any]) -> bool:
    return fig["low"] is not None and fig["high"] is not None and \
        not fig["low"] <= 1 <= fig["high"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--probed", type=int, default=3)
    parser.add_argument("--confidence", type=float, default=0.95)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="srl-ab-marks-", dir="/tmp"))
    work.chmod(0o755)
    spec = work / "spec.toml"
    spec.write_text(SPEC.format(rounds=args.rounds, confidence=args.confidence,
                                probes=f"anatomy = false\nprobed_repeats = {args.probed}"))
    totals = {"cells": 0, "marked": 0, "each": 0, "compared": 0, "cells_marked": 0,
              "cells_each": 0}
    print(f"{'run':>3} {'cell':<6} {'compared':>8} {'shown':>5} {'at level each':>13} "
          f"{'marked':>6}")
    try:
        for run in range(1, args.runs + 1):
            out = work / f"aa-{run}"
            done = subprocess.run(
                [sys.executable, "-m", "syncrep_lab", "ab", "18", "--patch", str(EMPTY),
                 "--spec", str(spec), "--out", str(out)], cwd=work, check=False,
                stdin=subprocess.DEVNULL, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"ab failed (exit {done.returncode}): {done.stderr[-2000:]}")
            answer = json.loads((out / "ab.json").read_text())["bases"][0]["answer"]
            for cell in answer["cells"]:
                figs = _figures(cell)
                marked = sum(1 for f in figs if f["significant"])
                each = sum(1 for f in figs if _outside(f))
                print(f"{run:>3} {cell['level']:<6} {cell['figures_tested']:>8} "
                      f"{len(figs):>5} {each:>13} {marked:>6}", flush=True)
                totals["cells"] += 1
                totals["compared"] += cell["figures_tested"]
                totals["marked"] += marked
                totals["each"] += each
                totals["cells_marked"] += marked > 0
                totals["cells_each"] += each > 0
            shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = totals["cells"]
    print(f"\n{n} A/A cells at {100 * args.confidence:g} %, {totals['compared'] / n:.0f} "
          f"figures compared a cell: at the level each, {totals['each']} false marks "
          f"({totals['cells_each']} of {n} cells with one or more); marked by ab, "
          f"{totals['marked']} ({totals['cells_marked']} of {n} cells)")


if __name__ == "__main__":
    main()
