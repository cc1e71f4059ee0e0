"""Where one cell's noise sits on this machine: the seed's shape (a primary and 2
standbys, ``synchronous_commit = on``, 64 clients inserting) run with its ``local``
baseline through the tool's own ``run``, interleaved, 12 rounds of 5-second repeats
within a budget of 4 minutes of rounds, probes off; then each cell's noise split
(stats/variance.py) with bootstrap intervals, the ratio with its smallest detectable
change, the seconds' lag-1 correlation plain and corrected, and how much of the
repeats' spread the sync walsender's wait for a core explains (``noise.walsender``).

    PYTHONPATH=src .venv/bin/python bench/variance.py [--out /tmp/variance] [--rounds 12]
        [--budget 4m] [--from RUN_FOLDER] [--resamples 2000] [--seed 1]

The intervals: a moving-block bootstrap over the repeats in running order (blocks of 3
successive repeats drawn with replacement, as many as make the run's count), each
resample's parts read as stats/variance.py reads them except that half the mean
squared successive difference is taken within the blocks only (where two blocks meet,
two stretches of time meet: no successive difference); percentiles 2.5 and 97.5. Rough
with 12 repeats: on synthetic runs of 12 repeats (5-second seconds of 10 %, a start
state of 5 %, a drift of 0 or 1 % a round) these 95 % intervals held the true part 75
to 85 % of the time, so each part is less certain than they say. ``--from`` reads a run
made before instead of making one.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from scipy.special import chdtri

from syncrep_lab.stats.variance import PARTS, Repeat, noise_split, within_variance
from syncrep_lab.store import Store, queries
from timed_run import timed_run

SPEC = """\
# bench/variance.py: the seed's shape, one sync level and its baseline
name = "variance"

[topology]
standbys = 2
profile = "seed"

[workload]
kind = "insert"
clients = 64
duration = 5
warmup = {warmup}

[matrix]
synchronous_commit = ["local", "on"]

[run]
repeats_min = {rounds}
repeats_max = {rounds}
budget = "{budget}"
reset = "{reset}"

[probes]
probed_repeats = 0
"""


def make_run(out: Path, rounds: int, budget: str, reset: str = "full", warmup: int = 2,
             capture: bool = False) -> float:
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    return timed_run(SPEC.format(rounds=rounds, budget=budget, reset=reset, warmup=warmup),
                     out, capture=capture)


def repeats_of(out: Path) -> dict[str, list[Repeat]]:
    """Each cell's measured repeats in running order, with their seconds."""
    store = Store(out, create=False)
    try:
        run = store.run()
        cells = {}
        for cell in store.cells(run.id):
            measured = sorted((r for r in store.repeats(cell.id) if not r.probed),
                              key=lambda r: (str(r.started_at), r.n))
            cells[cell.label] = [Repeat(float(r.tps), [float(s.tps) for s in
                                                        queries.samples_of(store, r.id)])
                                 for r in measured]
        return cells
    finally:
        store.close()


def blocks_of(repeats: list[Repeat], rng: random.Random, block: int = 3
              ) -> list[list[Repeat]]:
    """Blocks of ``block`` successive repeats drawn with replacement until there are as
    many repeats as given (the last block cut short)."""
    k = len(repeats)
    block = min(block, k)
    out: list[list[Repeat]] = []
    taken = 0
    while taken < k:
        s = rng.randrange(k - block + 1)
        out.append(repeats[s:s + block][:k - taken])
        taken += len(out[-1])
    return out


def parts_of(blocks: list[list[Repeat]]) -> dict[str, float] | None:
    """The split of a resample: the variance over all its repeats, half the mean squared
    successive difference within its blocks only (a junction joins two stretches of
    time and is no successive difference), the seconds' part as stats/variance.py
    reads it from the distinct repeats drawn."""
    repeats = [r for b in blocks for r in b]
    means = [r.mean for r in repeats]
    diffs = [(y.mean - x.mean) ** 2 for b in blocks for x, y in itertools.pairwise(b)]
    # the seconds' part from each repeat once: a repeat drawn twice would take its own
    # deviations for a profile every repeat shares
    within = within_variance([r.seconds for r in {id(r): r for r in repeats}.values()])
    center = statistics.fmean(means)
    if not diffs or within is None or center <= 0 or len(means) < 3:
        return None
    q, s2 = sum(diffs) / (2 * len(diffs)), statistics.variance(means)
    return {"within": math.sqrt(within) / center,
            "between": math.sqrt(max(q - within, 0.0)) / center,
            "drift": math.sqrt(max(s2 - q, 0.0)) / center,
            "total": math.sqrt(s2) / center}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:5.1f} %"


def report(label: str, repeats: list[Repeat], resamples: int, seed: int) -> None:
    split = noise_split(repeats)
    rng = random.Random(seed)
    boot: dict[str, list[float]] = {p: [] for p in (*PARTS, "total")}
    for _ in range(resamples):
        parts = parts_of(blocks_of(repeats, rng))
        for p, value in (parts or {}).items():
            boot[p].append(value)
    print(f"\n{label}: {split.repeats} repeats, {split.seconds} seconds "
          f"({split.seconds_per_repeat} a repeat)")
    for p in (*PARTS, "total"):
        values = boot[p]
        interval = (f"[{pct(percentile(values, 0.025))}, {pct(percentile(values, 0.975))}]"
                    if len(values) > 10 else "")
        test = {"between": split.between_p, "drift": split.drift_p}.get(p)
        told = f"  p = {test:.3f}" if test is not None else ""
        name = "repeats' spread" if p == "total" else p
        if p == "within" and split.within is not None and split.within_df is not None:
            df = split.within_df  # within² as a χ² on the df of its jackknife variance
            low = split.within * math.sqrt(df / chdtri(df, 0.025))
            high = split.within * math.sqrt(df / chdtri(df, 0.975))
            told = f"  (χ² on {df:.1f} df: [{pct(low)}, {pct(high)}])"
        print(f"  {name:16s}{pct(getattr(split, p))}  95 % {interval}{told}")
    print(f"  seconds' lag-1 correlation: plain {fmt(split.lag1_raw)}, corrected "
          f"{fmt(split.lag1)} (independent seconds give -1/n plain: "
          f"{-1 / (split.seconds_per_repeat or 1):.2f})")
    print(f"  dominant: {split.dominant} ({fmt(split.dominant_share)} of the variance"
          f"{'' if split.dominant_told else ', not told from none'})")


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/variance/run"))
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--budget", default="4m")
    parser.add_argument("--from", dest="existing", type=Path, default=None)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    out = args.existing or args.out
    if args.existing is None:
        took = make_run(out, args.rounds, args.budget)
        print(f"\nrun: {took / 60:.1f} min in {out}")
    cells = repeats_of(out)
    for label, repeats in cells.items():
        report(label, repeats, args.resamples, args.seed)
    res = subprocess.run([sys.executable, "-m", "syncrep_lab", "results", str(out), "--json"],
                         capture_output=True, text=True, check=True)
    for row in json.loads(res.stdout):
        walsender = (row.get("noise") or {}).get("walsender")
        if walsender:
            share = walsender["run_delay_share"]
            each = share["per_repeat"]
            told = ("no r" if walsender["r"] is None else
                    f"r = {walsender['r']:.2f}, R² = {walsender['r2']:.2f}, "
                    f"p = {walsender['p']:.3f}")
            moves = walsender["migrations_per_s"]
            print(f"\n{row['label']}: {walsender['role']} ({walsender['chosen_by']}) waited "
                  f"for a core {pct(share['mean'])} of a repeat (95 % "
                  f"[{pct(share['low'])}, {pct(share['high'])}]; {pct(min(each))} to "
                  f"{pct(max(each))} over {len(each)} repeats), "
                  f"{'-' if moves is None else f'{moves:.0f}'} migrations a second; "
                  f"log TPS against it: {told}")
        ratio = row.get("ratio_to_baseline")
        if ratio and ratio["low"] is not None and ratio["detectable_pct"] is not None:
            print(f"\n{row['label']} ÷ {ratio['baseline']}: {ratio['mean']:.3f} "
                  f"({ratio['low']:.3f}–{ratio['high']:.3f}, {ratio['rounds']} rounds); "
                  f"smallest detectable change {ratio['detectable_pct']:.1f} %")


if __name__ == "__main__":
    main()
