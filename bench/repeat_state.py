"""What the state a repeat starts from does to the noise: bench/variance.py's cell (the
seed's shape, 64 clients, ``on`` against ``local`` interleaved, 5-second repeats) run
under each variant of the start, the variants alternated over sittings (A B C A B C, the
order turned each sitting, so a machine that drifts over the hour weighs on each alike),
and for each run the noise split per cell and the paired ratio.

    PYTHONPATH=src .venv/bin/python bench/repeat_state.py [--out /tmp/repeat-state]
        [--sittings 2] [--rounds 10] [--variants full no-checkpoint none warmup-6]
        [--from /tmp/repeat-state]

The variants (``run.reset`` and ``workload.warmup`` of the spec):

- ``full``: the tool's default; the table emptied, a checkpoint on every node, the
  standbys caught up, a 2 s warm-up;
- ``no-checkpoint``: the table emptied, no checkpoint;
- ``none``: neither (the table grows over the run);
- ``warmup-6``: as ``full`` with a 6 s warm-up (the warm-up is a pgbench run of its
  own before every repeat: the server's backends and caches warmed longer);
- and, read from the ``full`` runs without running anything: each repeat's first 2
  seconds left out of its mean (``full-skip-2``), the "longer warm-up inside the
  repeat".

A variant lowers the start state's noise if its ``between`` part (and the repeats'
spread) falls; it leaves the comparison unbiased if its ratio agrees with ``full``'s
(the A/A check: the difference of the log ratios against its standard error from both
runs' intervals). ``--from`` reads the runs of an earlier call.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

from syncrep_lab.stats.variance import NoiseSplit, Repeat, noise_split
from variance import make_run, repeats_of

VARIANTS = {"full": ("full", 2), "no-checkpoint": ("no-checkpoint", 2),
            "none": ("none", 2), "warmup-6": ("full", 6)}
SKIP = 2  # seconds left out of each repeat's mean for "full-skip-2"


def ratio_of(out: Path) -> dict[str, float] | None:
    """The run's paired ratio on ÷ local with its interval, as results --json has it."""
    res = subprocess.run([sys.executable, "-m", "syncrep_lab", "results", str(out), "--json"],
                         capture_output=True, text=True, check=True)
    for row in json.loads(res.stdout):
        ratio = row.get("ratio_to_baseline")
        if ratio and ratio.get("low") is not None:
            return {"mean": ratio["mean"], "low": ratio["low"], "high": ratio["high"]}
    return None


def skipped(repeats: list[Repeat]) -> list[Repeat]:
    """Each repeat's mean from its seconds after the first SKIP."""
    return [Repeat(statistics.fmean(r.seconds[SKIP:]), r.seconds[SKIP:])
            for r in repeats if len(r.seconds) > SKIP]


def pct(value: float | None) -> str:
    return "    -" if value is None else f"{100 * value:5.1f}"


def line(variant: str, sitting: int, label: str, split: NoiseSplit) -> str:
    p = "-" if split.between_p is None else f"{split.between_p:.2f}"
    return (f"{variant:14s} {sitting:3d} {label:30.30s} {pct(split.within)} "
            f"{pct(split.between)} {pct(split.drift)} {pct(split.total)}   {p}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/repeat-state"))
    parser.add_argument("--sittings", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS),
                        choices=list(VARIANTS))
    parser.add_argument("--from", dest="existing", action="store_true",
                        help="read the runs already in --out")
    args = parser.parse_args()
    runs: list[tuple[str, int, Path]] = []
    for sitting in range(args.sittings):
        turn = sitting % len(args.variants)
        for variant in args.variants[turn:] + args.variants[:turn]:
            out = args.out / f"{variant}-{sitting}"
            runs.append((variant, sitting, out))
            if not args.existing:
                reset, warmup = VARIANTS[variant]
                took = make_run(out, args.rounds, "30m", reset=reset, warmup=warmup,
                                capture=True)
                print(f"{variant} sitting {sitting}: {took / 60:.1f} min", flush=True)
    print(f"\n{'variant':14s} sit {'cell':30s} within between drift spread  p(between)")
    between: dict[str, list[float]] = {}
    spread: dict[str, list[float]] = {}
    ratios: dict[str, list[tuple[int, dict[str, float]]]] = {}
    for variant, sitting, out in runs:
        cells = repeats_of(out)
        forms = [(variant, cells)]
        if variant == "full":
            forms.append((f"full-skip-{SKIP}", {k: skipped(v) for k, v in cells.items()}))
        for name, of in forms:
            for label, repeats in of.items():
                split = noise_split(repeats)
                print(line(name, sitting, label, split))
                if split.between is not None:
                    between.setdefault(name, []).append(split.between)
                if split.total is not None:
                    spread.setdefault(name, []).append(split.total)
        ratio = ratio_of(out)
        if ratio is not None:
            ratios.setdefault(variant, []).append((sitting, ratio))
    print("\nmedians over cells and sittings")
    for name in between:
        print(f"  {name:14s} between {pct(statistics.median(between[name]))} %, "
              f"repeats' spread {pct(statistics.median(spread.get(name, [math.nan])))} %")
    print("\nratio on ÷ local, and the A/A check against full of the same sitting")
    base = dict(ratios.get("full", []))
    for variant, found in ratios.items():
        for sitting, r in found:
            told = ""
            ref = base.get(sitting)
            if variant != "full" and ref is not None:
                # se of each log ratio from its 95 % interval, the difference in se units
                se = math.hypot(math.log(r["high"] / r["low"]) / 3.92,
                                math.log(ref["high"] / ref["low"]) / 3.92)
                z = math.log(r["mean"] / ref["mean"]) / se
                told = f"   vs full {r['mean'] / ref['mean']:.3f}, z = {z:+.2f}"
            print(f"  {variant:14s} {sitting}: {r['mean']:.3f} [{r['low']:.3f}, "
                  f"{r['high']:.3f}]  ±{50 * (r['high'] - r['low']) / r['mean']:.1f} %{told}")


if __name__ == "__main__":
    main()
