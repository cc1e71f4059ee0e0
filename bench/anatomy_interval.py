"""How far one commit anatomy repeat can be trusted: the spread of a component's µs per
commit from one repeat to the next, against what the repeat's own events would claim.

A run of the seed's shape (a primary and standbys b and c, '1(b,c)', insert-only,
synchronous_commit = on) with ``[probes] anatomy_repeats = N`` gives each cell N anatomy
repeats back to back. Per cell and component this prints:

- ``between``: the sd of log(µs per commit) over those repeats (relative: 0.05 is 5 %);
- ``naive``: the relative standard error one repeat's events would give if they were
  independent, sd/(mean·√count), the per-event sd from the stored log-linear histogram
  (bucket midpoints; the mean is exact);
- ``between/naive``: how many times too narrow the naive interval is;
- ``A/A outside``: of the pairs of repeats (i, j), how many have a log ratio beyond the
  naive 95 % interval, 1.96·√(se_i² + se_j²) (for an honest interval, about 1 in 20);
- the cell's measured repeats' mean latency spread (sd of its log), for scale.

    PYTHONPATH=src .venv/bin/python bench/anatomy_interval.py [--repeats 8]
        [--clients 4,32] [--duration 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

from syncrep_lab.analysis.anatomy import BACKEND_COMPONENTS
from syncrep_lab.stats.histogram import _MIDS, LatencyHistogram  # the buckets' midpoints
from syncrep_lab.store import ANATOMY, Store, queries

SPEC = """\
name = "anatomy-interval"

[topology]
standbys = 2

[workload]
duration = {duration}
warmup = 2

[matrix]
synchronous_commit = ["on"]
clients = [{clients}]

[run]
repeats_min = 2
repeats_max = 2

[probes]
probed_repeats = 1
perf = false
flamegraphs = false
sched = false
gprof = false
anatomy_repeats = {repeats}
"""


def event_rel_se(h: LatencyHistogram) -> float | None:
    """sd/(mean·√count) of the values in ``h``: the naive relative standard error."""
    if h.count < 2 or not h.total:
        return None
    mean = h.total / h.count
    counts = h.counts.astype(np.float64)
    var = float((counts * (_MIDS - mean) ** 2).sum()) / (h.count - 1)
    return math.sqrt(var) / mean / math.sqrt(h.count)


def report(folder: Path) -> None:
    store = Store(folder, create=False)
    try:
        run = store.run()
        for cell in store.cells(run.id):
            reps = store.repeats(cell.id)
            anat = {r.id: int(r.transactions) for r in reps if r.probed == ANATOMY}
            lat = [math.log(float(r.lat_mean_ms)) for r in reps
                   if not r.probed and r.lat_mean_ms]
            per: dict[str, dict[int, tuple[float, float | None]]] = defaultdict(dict)
            for repeat_id, row in queries.anatomy_of(store, anat):
                if row.who != "backend" or not anat[repeat_id]:
                    continue
                h = LatencyHistogram.from_bytes(row.histogram)
                per[row.component][repeat_id] = (row.total / 1000 / anat[repeat_id],
                                                 event_rel_se(h))
            print(f"cell {cell.idx} {cell.label}: {len(anat)} anatomy repeats; measured "
                  f"repeats' mean latency sd {100 * statistics.stdev(lat):.1f} %"
                  if len(lat) > 1 else f"cell {cell.idx} {cell.label}")
            print(f"  {'component':14} {'µs/commit':>10} {'between':>8} {'naive':>7} "
                  f"{'ratio':>6} {'A/A outside':>12}")
            for name in BACKEND_COMPONENTS:
                values = per.get(name, {})
                if len(values) < 2 or any(v <= 0 for v, _ in values.values()):
                    continue
                logs = [math.log(v) for v, _ in values.values()]
                between = statistics.stdev(logs)
                ses = [se for _, se in values.values() if se is not None]
                naive = statistics.fmean(ses) if ses else float("nan")
                pairs = list(itertools.combinations(values.values(), 2))
                outside = sum(1 for (va, sa), (vb, sb) in pairs
                              if sa is not None and sb is not None
                              and abs(math.log(vb / va)) > 1.96 * math.hypot(sa, sb))
                print(f"  {name:14} {statistics.fmean(v for v, _ in values.values()):10.1f} "
                      f"{100 * between:7.1f}% {100 * naive:6.2f}% {between / naive:6.1f} "
                      f"{outside:5d} of {len(pairs):3d}")
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--clients", default="4,32")
    parser.add_argument("--duration", type=int, default=3)
    parser.add_argument("--out", type=Path, help="keep the run there (default: a temp dir)")
    parser.add_argument("--report", type=Path, help="only report a run already made")
    args = parser.parse_args()
    if args.report:
        report(args.report)
        return
    work = Path(tempfile.mkdtemp(prefix="anatomy-interval-"))
    out = args.out or work / "run"
    spec = work / "spec.toml"
    spec.write_text(SPEC.format(duration=args.duration, clients=args.clients,
                                repeats=args.repeats))
    done = subprocess.run([sys.executable, "-m", "syncrep_lab", "run", str(spec), "--out",
                           str(out)], check=False)
    if done.returncode != 0:
        raise SystemExit(f"the run failed ({done.returncode})")
    report(out)


if __name__ == "__main__":
    main()
