"""Whether a cell's leading verdict survives the noise: the same cell run several times
(nothing changed between the sittings: an A/A), each run diagnosed twice from the same
store — ranked on the points, as the rules did before their evidence carried intervals,
and on the intervals, as they do now (analysis/evidence.py).

The cell is the seed's shape at the size of this machine: a primary and 2 standbys,
``synchronous_commit = on``, ``1(b,c)``, --clients clients inserting, 3 measured
repeats and 1 probed repeat of 5 seconds (perf and the wait-event sampler; the flame
graphs, the scheduler trace and the commit anatomy off: they add evidence, not the
figures the thresholds read).

For each sitting it prints the backends' SyncRep share with its interval, each verdict's
level at the point and its range, the leading verdict on the points and on the
intervals (with the verdicts tied with it). At the end: how many distinct leading
verdicts each ranking gave over the sittings, and whether every sitting's leading
verdict on the intervals is the first sitting's or tied with it.

The ranking on the points is rebuilt from the same rules: their verdicts sorted by the
level at the point, in the rules' order (what ``diagnose_facts`` did before). A rule
that fires only on its interval's favourable end has the level "low" at the point and
ranks last there, as a verdict the old rules did not give would have.

    .venv/bin/python bench/verdict_stability.py [--runs 4] [--clients 32]
        [--out /tmp/verdicts]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from syncrep_lab.analysis import diagnosis, model
from syncrep_lab.analysis.diagnosis import ORDER, RULES, CellFacts
from syncrep_lab.analysis.verdict import Verdict
from syncrep_lab.store import Store
from timed_run import timed_run

SPEC = """\
name = "verdict-stability"

[topology]
standbys = 2
sync = "1(b,c)"

[workload]
clients = {clients}
duration = 5
warmup = 2

[matrix]
synchronous_commit = ["on"]

[run]
repeats_min = 3
repeats_max = 3

[probes]
probed_repeats = 1
flamegraphs = false
sched = false
anatomy = false
"""


def facts_of(folder: Path) -> CellFacts:
    """The one cell's facts, with the model's bounds, as ``diagnose`` gathers them."""
    store = Store(folder, create=False)
    try:
        run = store.run()
        cpus = int(run.machine.get("cpus_usable") or run.machine.get("cpu_count") or 1)
        (cell,) = [c for c in store.cells(run.id) if c.status == "done"]
        facts = diagnosis.cell_facts(store, cell, cpus)
        facts.bounds = list(model.cell_model(store, cell, model.series_index([cell]),
                                             run.machine).bounds)
        return facts
    finally:
        store.close()


def on_points(facts: CellFacts) -> list[Verdict]:
    verdicts = [v for rule in RULES if (v := rule(facts)) is not None]
    return sorted(verdicts, key=lambda v: ORDER[v.confidence])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--out", type=Path, default=Path("/tmp/verdicts"))
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    args.out.chmod(0o755)
    spec = SPEC.format(clients=args.clients)
    by_points: list[str] = []
    by_intervals: list[tuple[str, set[str]]] = []
    for i in range(args.runs):
        folder = args.out / f"run-{i}"
        seconds = timed_run(spec, folder, capture=True)
        facts = facts_of(folder)
        share = facts.wait_figure("primary", "backend", "IPC:SyncRep")
        print(f"sitting {i} ({seconds:.0f} s): {facts.tps:,.0f} tps, SyncRep share "
              f"{share.pct()}")
        now = diagnosis.diagnose_facts(facts)
        for v in now:
            print(f"  {v.mechanism}: {v.confidence} at the point, "
                  f"{diagnosis.confidence_text(v)} over the intervals")
        old = next((v for v in on_points(facts) if v.confidence != "unknown"), None)
        lead = diagnosis.leading_verdict(now)
        tied = {v.mechanism for v in diagnosis.tied_with_lead(now)}
        by_points.append(old.mechanism if old else "none")
        by_intervals.append((lead.mechanism if lead else "none", tied))
        print(f"  leading on the points: {by_points[-1]}")
        print(f"  leading on the intervals: {diagnosis.leading_title(now) or 'none'}")
    first, first_tied = by_intervals[0]
    agree = all(lead == first or lead in first_tied or first in tied
                for lead, tied in by_intervals)
    print(f"\n{args.runs} sittings: {len(set(by_points))} distinct leading verdicts on the "
          f"points ({', '.join(sorted(set(by_points)))}); "
          f"{len({lead for lead, _ in by_intervals})} on the intervals "
          f"({', '.join(sorted({lead for lead, _ in by_intervals}))}); every sitting's "
          f"leading verdict on the intervals is the first's or tied with it: "
          f"{'yes' if agree else 'no'}")


if __name__ == "__main__":
    main()
