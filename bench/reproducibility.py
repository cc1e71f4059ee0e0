"""Reproducibility: the same question asked several times in one sitting, interleaved
against blocked, and A/A pairs through `syncrep-lab compare`.

Part 1. The seed preset (or --preset) run --runs times interleaved and --runs times
blocked, the two orders alternating (I B I B ...), each a full `syncrep-lab run` with
probes off. For every headline ratio (each cell against its baseline, as
`results --json` gives ratio_to_baseline) the runs' values and intervals are printed
side by side, with whether all of one order's intervals overlap, whether each met
±ci_target, and each run's wall time.

Part 2. --pairs A/A pairs of the quick preset (the same spec twice, nothing changed):
how many matched cells `compare` declared different in TPS, with each run's drift in
the intervals (as now) and without it (Welch's t over the repeats alone, as before).

    .venv/bin/python bench/reproducibility.py [--runs 3] [--pairs 5] [--preset seed]
        [--budget 6m] [--out /tmp/repro] [--skip-aa] [--skip-orders]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from syncrep_lab.analysis.compare import compare_runs
from syncrep_lab.plan.spec import preset_text
from syncrep_lab.stats.intervals import welch_t
from timed_run import timed_run


def run(spec_text: str, out: Path, budget: str | None) -> float:
    return timed_run(spec_text, out, *(["--budget", budget] if budget else []), capture=True)


def ratios(out: Path) -> dict[str, dict[str, Any]]:
    res = subprocess.run([sys.executable, "-m", "syncrep_lab", "results", str(out), "--json"],
                         capture_output=True, text=True, check=True)
    return {f"{r['label']} ÷ {r['ratio_to_baseline']['baseline']}": r["ratio_to_baseline"]
            for r in json.loads(res.stdout) if r.get("ratio_to_baseline")}


def with_order(text: str, order: str) -> str:
    """The preset with run.order set and probes off (they are not what is measured)."""
    data = tomllib.loads(text)
    lines = text.splitlines()
    out = []
    for line in lines:
        out.append(line)
        if line.strip() == "[run]":
            out.append(f'order = "{order}"')
    text = "\n".join(out) + "\n"
    if "run" not in data:
        text += f'\n[run]\norder = "{order}"\n'
    return text + "\n[probes]\nprobed_repeats = 0\n"


def overlap(intervals: list[tuple[float, float]]) -> bool:
    return max(lo for lo, _ in intervals) <= min(hi for _, hi in intervals)


def _interval(r: dict[str, Any], target: float) -> str:
    wide = max(r["high"] / r["mean"] - 1, 1 - r["low"] / r["mean"]) > target
    return (f"{r['mean']:.3f} [{r['low']:.3f}, {r['high']:.3f}]"
            + (f" (wider than ±{100 * target:g} %)" if wide else ""))


def part_orders(args: argparse.Namespace) -> None:
    text = preset_text(args.preset)
    target = tomllib.loads(text).get("run", {}).get("ci_target", 0.03)
    found: dict[str, dict[str, list[dict[str, Any]]]] = {"interleaved": {}, "blocked": {}}
    times: dict[str, list[float]] = {"interleaved": [], "blocked": []}
    for i in range(args.runs):
        for order in ("interleaved", "blocked"):
            out = args.out / f"{order}-{i + 1}"
            took = run(with_order(text, order), out, args.budget)
            times[order].append(took)
            for name, r in ratios(out).items():
                found[order].setdefault(name, []).append(r)
            print(f"{order} run {i + 1}: {took / 60:.1f} min", flush=True)
    failed_overlap = {o: 0 for o in found}
    for name in sorted(set(found["interleaved"]) | set(found["blocked"])):
        print(f"\n{name}")
        for order in ("interleaved", "blocked"):
            rs = found[order].get(name, [])
            shown = ", ".join(_interval(r, target) for r in rs if r["low"] is not None)
            ok = overlap([(r["low"], r["high"]) for r in rs if r["low"] is not None]) \
                if len(rs) > 1 else True
            failed_overlap[order] += not ok
            print(f"  {order:11s} {shown}  {'overlap' if ok else 'DO NOT OVERLAP'}")
    for order in ("interleaved", "blocked"):
        t = times[order]
        print(f"\n{order}: wall time per run {', '.join(f'{x / 60:.1f}' for x in t)} min; "
              f"ratios whose intervals did not all overlap: {failed_overlap[order]} "
              f"of {len(found[order])}")


def part_aa(args: argparse.Namespace) -> None:
    text = with_order(preset_text("quick"), "interleaved")
    declared = {"with drift": 0, "without drift": 0}
    cells = 0
    for i in range(args.pairs):
        a, b = args.out / f"aa-{i + 1}-a", args.out / f"aa-{i + 1}-b"
        run(text, a, None)
        run(text, b, None)
        data = compare_runs(a, b)
        for pair in data.pairs:
            tps = pair.figures[0]
            cells += 1
            declared["with drift"] += bool(tps.significant)
            values_a, values_b = tps.a.values, tps.b.values
            if len(values_a) > 1 and len(values_b) > 1:
                declared["without drift"] += welch_t(values_b, values_a).significant
        print(f"A/A pair {i + 1}: so far {declared} of {cells} cells", flush=True)
    for how, n in declared.items():
        print(f"A/A: {n} of {cells} cells declared different ({100 * n / max(cells, 1):.1f} %) "
              f"{how} in the intervals")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--preset", default="seed")
    parser.add_argument("--budget", default=None)
    parser.add_argument("--out", type=Path, default=Path("/tmp/repro"))
    parser.add_argument("--skip-aa", action="store_true")
    parser.add_argument("--skip-orders", action="store_true")
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    args.out.chmod(0o755)
    if not args.skip_orders:
        part_orders(args)
    if not args.skip_aa:
        part_aa(args)


if __name__ == "__main__":
    main()
