"""How well the bottleneck model predicts what it did not see.

One interleaved run: clients 1, 2, 4, 8, 16, 32, 64 × synchronous_commit local, on ×
cores 1, 2 (the servers confined to the first N CPUs; pgbench runs beside them). CPU per
commit comes from the measured repeats (nothing traced); each cell also has one probed
repeat with every probe off but the commit anatomy, which runs in a repeat of its own
after it and gives the wait bounds (analysis/model.py: Little's law, the serial
release). Then:

1. Clients: the Universal Scalability Law fitted on clients ≤ 8 of each (level, cores)
   series predicts TPS at 16, 32 and 64; so do the CPU bounds of the 8-client cell
   (min of N / R₁ and the lowest capacity bound, with that cell's demands), its wait
   bounds (Little's law at N with the commit's time in the server as at 8, the serial
   release as at 8) and the lowest of both. Each prediction's error against the
   measured mean; where the wait bounds miss by more than 15 %, which part of the
   commit they missed: the time in the server at N against at 8, part by part (µs per
   commit at each cell's measured pace), and the part of a client's time outside it.
2. Cores: the bounds from the cores = 1 cells, recomputed for 2 CPUs (the wait bounds do
   not move with cores), predict the cores = 2 cells' TPS at the same clients; the
   error, whether the binding resource on 2 cores is the one the model names, and where
   the wait bounds miss, the part of the commit that changed.

With ``--regime RUN...`` instead (no run of its own): the regime's cells of stored runs
(`run --preset regime`, a run with a CPU quota, a release delay or a link), each
predicted from its twin without it and by the walsender's own bounds at the cell;
the count within ±10 %.

Target: within ±15 %. Counted: the CPU bounds where the binding resource is the same
(and, for cores, reached); the wait bounds and the lowest of both wherever the cells
have an anatomy.

    .venv/bin/python bench/model_accuracy.py [--out /tmp/model-acc] [--duration 3]
        [--repeats 3] [--reuse]
    .venv/bin/python bench/model_accuracy.py --regime RUN [RUN ...]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from syncrep_lab.analysis.anatomy import PART_NAMES
from syncrep_lab.analysis.model import (
    Bound,
    CellModel,
    DelayedFrom,
    HeldFrom,
    Interval,
    LittleBound,
    ReleaseBound,
    bounds,
    cell_demands,
    cell_model,
    fit_usl,
    run_model,
    series_index,
    usl,
)
from syncrep_lab.store import Store, StoredCell
from timed_run import timed_run

CLIENTS = [1, 2, 4, 8, 16, 32, 64]


def spec(duration: int, repeats: int) -> str:
    return f"""\
name = "model-accuracy"

[topology]
standbys = 1

[workload]
kind = "insert"
duration = {duration}
warmup = 1

[matrix]
clients = {CLIENTS}
synchronous_commit = ["local", "on"]
cores = [1, 2]

[run]
repeats_min = {repeats}
repeats_max = {repeats}
seed = 5

[probes]  # one probed repeat, every probe off: the commit anatomy runs in one of its own after it
probed_repeats = 1
perf = false
wait_events_hz = 0
replication_hz = 0
numa = false
flamegraphs = false
sched = false
gprof = false
anatomy = true
"""


def measure(out: Path, duration: int, repeats: int) -> float:
    return timed_run(spec(duration, repeats), out)


def _err(predicted: float, measured: float) -> str:
    return f"{100 * (predicted / measured - 1):+.1f} %"


def _within(predicted: float, measured: float) -> bool:
    return abs(predicted / measured - 1) <= 0.15


def _little(model: CellModel) -> LittleBound | None:
    return next((b for b in model.wait_bounds if isinstance(b, LittleBound)), None)


def _release(model: CellModel) -> ReleaseBound | None:
    return next((b for b in model.wait_bounds if isinstance(b, ReleaseBound)), None)


def wait_prediction(model: CellModel, clients: int) -> tuple[float, str] | None:
    """The wait bounds of ``model``'s cell at ``clients``: Little's law with the commit's
    time in the server as there, the serial release as there; the lower, and which."""
    little, release = _little(model), _release(model)
    if little is None:
        return None
    options = [(little.max_tps.mean * clients / little.clients, "Little's law")]
    if release is not None and release.max_tps.mean:
        options.append((release.max_tps.mean, "serial release"))
    return min(options)


def missed(source: CellModel, target: CellModel, law: str) -> str:
    """Which part of the commit a wait bound from ``source``'s cell missed at
    ``target``'s: the time in the server part by part, the part of a client's time
    outside it, and for the release its cost per waiter."""
    a, b = _little(source), _little(target)
    if a is None or b is None:
        return "the predicted cell has no anatomy"
    if law == "serial release":
        ra, rb = _release(source), _release(target)
        if ra is None or rb is None:
            return "the predicted cell's walsender freed no waiter"
        return (f"the release per waiter {ra.demand_us.mean:,.1f} -> "
                f"{rb.demand_us.mean:,.1f} µs ({ra.waiters_per_release or 0:.1f} "
                f"-> {rb.waiters_per_release or 0:.1f} waiters per release)")
    pa, pb = a.parts_us, b.parts_us
    moved = sorted(((pb.get(k, 0.0) - pa.get(k, 0.0), k) for k in {*pa, *pb}),
                   key=lambda dk: -abs(dk[0]))
    parts = ", ".join(f"{PART_NAMES[k]} {d:+,.0f}" for d, k in moved[:3])
    return (f"in the server {a.demand_us.mean:,.0f} -> "
            f"{b.demand_us.mean:,.0f} µs per commit ({parts} µs); outside it "
            f"{100 * (1 - a.share):.0f} -> {100 * (1 - b.share):.0f} % of a client's "
            "time")


class Tally:
    """Predictions within ±``tolerance`` (15 %) of the measured mean, out of those
    counted."""

    def __init__(self, tolerance: float = 0.15) -> None:
        self.within = 0
        self.total = 0
        self.tolerance = tolerance

    def add(self, predicted: float, measured: float) -> None:
        self.total += 1
        self.within += abs(predicted / measured - 1) <= self.tolerance

    def __str__(self) -> str:
        return f"{self.within} of {self.total}"


def _own_walsender_bound(model: CellModel, walsender: str) -> Bound | None:
    """The lowest of the walsender's own bounds at its cell: its CPU (held: its quota's),
    its serial release under SyncRepLock."""
    own = [b for b in model.bounds if b.resource == walsender and b.max_tps.mean]
    own += [b for b in model.wait_bounds if b.law == "release" and b.max_tps.mean]
    return min(own, key=lambda b: b.max_tps.mean, default=None)


def regime(run_dirs: list[Path]) -> None:
    """The regime's cells of stored runs (`run --preset regime`, or any run with a quota,
    a release delay or a link): each predicted from its twin without it (analysis/model.py
    held_from, delayed_from, linked_from) and, for a walsender made to bind, by the
    walsender's own bounds at the cell; the count within ±10 %."""
    twin, own = Tally(0.10), Tally(0.10)
    for run_dir in run_dirs:
        print(f"\n{run_dir}")
        for m in run_model(run_dir, fits=False):
            pred = m.held_from or m.delayed_from or m.linked_from
            if pred is None:
                continue
            measured = pred.measured_tps
            line = (f"  {m.label:<44} measured {measured:8,.0f}; from cell {pred.cell} "
                    f"{pred.predicted_tps:8,.0f} ({_err(pred.predicted_tps, measured)})")
            twin.add(pred.predicted_tps, measured)
            walsender = (pred.role if isinstance(pred, HeldFrom) else
                         pred.walsender if isinstance(pred, DelayedFrom) else None)
            bound = _own_walsender_bound(m, walsender) if walsender is not None else None
            if walsender is not None and bound is not None:
                name = "serial release" if isinstance(bound, ReleaseBound) else "CPU"
                at = bound.max_tps.mean
                line += f"; at the cell, {walsender}'s {name} {at:8,.0f} ({_err(at, measured)}"
                if isinstance(bound, ReleaseBound) and bound.per_waiter_us_as_traced:
                    # before 2026-11-28 the release's time was taken over the waiters
                    # freed, not the commits: the bound times the waiters freed a commit
                    before = at * (bound.us_per_commit_as_traced
                                   / bound.per_waiter_us_as_traced)
                    line += f"; per waiter, as before: {before:,.0f}, {_err(before, measured)}"
                # counted where it is the lowest bound but Little's law's at this
                # concurrency (which holds at any cause: the clients' time in the server)
                others = [b for b in m.bounds if b.resource != walsender
                          and b.kind != "clients" and b.max_tps.mean]
                lowest = min(others, key=lambda b: b.max_tps.mean, default=None)
                if lowest is None or at <= lowest.max_tps.mean:
                    own.add(at, measured)
                    line += ")"
                else:  # a bound that does not bind predicts nothing
                    line += f"; {lowest.resource} binds first, not counted)"
            print(line)
    print(f"\nwithin ±10 %: from the twin {twin}; the walsender's bound at the cell {own}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("/tmp/model-acc"))
    ap.add_argument("--duration", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--reuse", action="store_true", help="analyse a run already in --out")
    ap.add_argument("--regime", type=Path, nargs="+", metavar="RUN",
                    help="instead: the regime's cells of these stored runs")
    args = ap.parse_args()
    if args.regime:
        regime(args.regime)
        return
    run_dir = args.out / "run"
    if not args.reuse:
        shutil.rmtree(args.out, ignore_errors=True)
        args.out.mkdir(parents=True)
        print(f"run: {measure(run_dir, args.duration, args.repeats) / 60:.1f} min")
    store = Store(run_dir, create=False)
    try:
        run = store.run()
        machine = run.machine
        cells = [c for c in store.cells(run.id) if c.status == "done"]
        index = series_index(cells)
        by_key: dict[tuple[str, int, int], StoredCell] = {}
        for c in cells:
            p = c.params
            by_key[(p["synchronous_commit"], int(p["cores"]), int(p["clients"]))] = c
        tps = {k: [float(r.tps) for r in store.repeats(c.id) if not r.probed]
               for k, c in by_key.items()}
        models = {k: cell_model(store, c, index, machine) for k, c in by_key.items()}
        cpu, wait, both = Tally(), Tally(), Tally()
        print("\n1. clients: fitted on clients <= 8, predicted at 16, 32, 64")
        for level in ("local", "on"):
            for cores in (1, 2):
                fit = fit_usl({float(n): tps[(level, cores, n)] for n in CLIENTS
                               if n <= 8 and (level, cores, n) in tps}, rounds=50)
                eight = models.get((level, cores, 8))
                for n in (16, 32, 64):
                    key = (level, cores, n)
                    if key not in tps or not tps[key]:
                        continue
                    measured = sum(tps[key]) / len(tps[key])
                    line = f"  {level:>5} cores={cores} clients={n:>2}: measured {measured:8,.0f}"
                    if fit.lam is not None and fit.sigma is not None and fit.kappa is not None:
                        predicted = float(usl(n, fit.lam.value, fit.sigma.value,
                                              fit.kappa.value))
                        line += f"; USL {predicted:8,.0f} ({_err(predicted, measured)})"
                    by_cpu = None
                    if eight is not None and eight.bounds:
                        capacity = [b for b in eight.bounds if b.kind != "clients"]
                        clients_b = next((b for b in eight.bounds if b.kind == "clients"), None)
                        cap = capacity[0].max_tps.mean if capacity else float("inf")
                        by_clients = (clients_b.max_tps.mean * n / 8 if clients_b
                                      else float("inf"))
                        by_cpu = min(cap, by_clients)
                        # the CPU bounds' own binding (models[key]["binding"] may be a wait
                        # bound): the lowest of the CPU and clients bounds
                        binds = models[key].bounds[0].resource if models[key].bounds else None
                        same = binds == (capacity[0].resource if cap <= by_clients
                                       else "clients")
                        line += (f"; CPU bounds {by_cpu:8,.0f} ({_err(by_cpu, measured)}, "
                                 f"binding {'same' if same else 'differs'})")
                        if same:
                            cpu.add(by_cpu, measured)
                    by_wait = wait_prediction(eight, n) if eight is not None else None
                    if by_wait is not None:
                        line += (f"; wait {by_wait[0]:8,.0f} ({_err(by_wait[0], measured)}, "
                                 f"{by_wait[1]})")
                        wait.add(by_wait[0], measured)
                        if by_cpu is not None:
                            lowest = min(by_cpu, by_wait[0])
                            line += f"; both {lowest:8,.0f} ({_err(lowest, measured)})"
                            both.add(lowest, measured)
                    print(line)
                    if by_wait is not None and eight is not None and not _within(by_wait[0],
                                                                                  measured):
                        print(f"      the wait bounds missed: "
                              f"{missed(eight, models[key], by_wait[1])}")
        print("\n2. cores: the cores=1 cells' bounds on 2 CPUs against the cores=2 cells")
        for level in ("local", "on"):
            for n in CLIENTS:
                one, two = by_key.get((level, 1, n)), by_key.get((level, 2, n))
                if (one is None or two is None or two.tps_mean is None
                        or not models[(level, 1, n)].bounds):
                    continue
                # the cores=1 cell's demands, recomputed for 2 CPUs
                demands = cell_demands(store, one.id)
                lat = one.lat_mean_ms
                r1 = Interval(float(lat), float(lat), float(lat)) if n == 1 and lat else None
                # the servers on both CPUs, pgbench beside them (as in the cores=2 cells)
                hypo = bounds(demands, cpus=float(machine.get("cpus_usable") or 2),
                              clients=n, threads=1, r1_ms=r1, r1_source="", server_cores=2)
                hypo = [b for b in hypo if b.kind != "clients" or n == 1]
                predicted = hypo[0].max_tps.mean
                measured = float(two.tps_mean)
                own = models[(level, 2, n)]
                own_cpu = own.bounds[0] if own.bounds else None
                same = own_cpu is not None and hypo[0].resource == own_cpu.resource
                # a bound is a ceiling: it predicts throughput only where the cell reached
                # it (80 % of its own binding bound); below, latency limits it
                saturated = own_cpu is not None and measured >= 0.8 * own_cpu.max_tps.mean
                line = (f"  {level:>5} clients={n:>2}: cores=2 measured {measured:8,.0f}; "
                        f"CPU bounds {predicted:8,.0f} ({_err(predicted, measured)}), "
                        f"{hypo[0].resource} binds (measured cell: "
                        f"{own_cpu.resource if own_cpu else None}"
                        f"{'' if saturated else ', not saturated'})")
                if same and saturated:
                    cpu.add(predicted, measured)
                # the wait bounds do not move with cores: the cores=1 cell's, as they are
                by_wait = wait_prediction(models[(level, 1, n)], n)
                if by_wait is not None:
                    lowest = min(predicted, by_wait[0])
                    line += (f"; wait {by_wait[0]:8,.0f} ({_err(by_wait[0], measured)}, "
                             f"{by_wait[1]}); both {lowest:8,.0f} ({_err(lowest, measured)})")
                    wait.add(by_wait[0], measured)
                    both.add(lowest, measured)
                print(line)
                if by_wait is not None and not _within(by_wait[0], measured):
                    print(f"      the wait bounds missed: "
                          f"{missed(models[(level, 1, n)], own, by_wait[1])}")
        print("\nwithin ±15 %:")
        print(f"  CPU bounds, where the binding resource is the same (and, for cores, "
              f"reached): {cpu}")
        print(f"  wait bounds (Little's law as at 8 clients or 1 core, the serial release): "
              f"{wait}")
        print(f"  the lowest of both: {both}")
    finally:
        store.close()


if __name__ == "__main__":
    main()
