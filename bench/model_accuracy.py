"""How well the bottleneck model predicts what it did not see.

One interleaved run: clients 1, 2, 4, 8, 16, 32, 64 × synchronous_commit local, on ×
cores 1, 2 (the servers confined to the first N CPUs; pgbench runs beside them), probes
off (the model reads CPU per commit from the measured repeats, nothing traced). Then:

1. Clients: the Universal Scalability Law fitted on clients ≤ 8 of each (level, cores)
   series predicts TPS at 16, 32 and 64; and the bounds of the 8-client cell
   (min of N / R₁ and the lowest capacity bound, with that cell's demands) predict it
   too. Each prediction's error against the measured mean.
2. Cores: the bounds from the cores = 1 cells' demands, recomputed for 2 CPUs, predict
   the cores = 2 cells' TPS at the same clients; the error, and whether the binding
   resource on 2 cores is the one the model names.

Target: within ±15 % where the binding resource is the same.

    .venv/bin/python bench/model_accuracy.py [--out /tmp/model-acc] [--duration 3]
        [--repeats 3] [--reuse]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from syncrep_lab.analysis.model import (
    Interval,
    bounds,
    cell_demands,
    cell_model,
    fit_usl,
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

[probes]
probed_repeats = 0
"""


def measure(out: Path, duration: int, repeats: int) -> float:
    return timed_run(spec(duration, repeats), out)


def _err(predicted: float, measured: float) -> str:
    return f"{100 * (predicted / measured - 1):+.1f} %"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("/tmp/model-acc"))
    ap.add_argument("--duration", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--reuse", action="store_true", help="analyse a run already in --out")
    args = ap.parse_args()
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
        within, total = 0, 0
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
                    if fit.get("fit"):
                        predicted = float(usl(n, fit["lambda"]["value"], fit["sigma"]["value"],
                                              fit["kappa"]["value"]))
                        line += f"; USL {predicted:8,.0f} ({_err(predicted, measured)})"
                    if eight is not None and eight["bounds"]:
                        capacity = [b for b in eight["bounds"] if b["kind"] != "clients"]
                        clients_b = next((b for b in eight["bounds"] if b["kind"] == "clients"),
                                         None)
                        cap = capacity[0]["max_tps"] if capacity else float("inf")
                        by_clients = (clients_b["max_tps"] * n / 8) if clients_b else float("inf")
                        predicted = min(cap, by_clients)
                        same = models[key]["binding"] == (capacity[0]["resource"]
                                                          if cap <= by_clients else "clients")
                        line += (f"; bounds {predicted:8,.0f} ({_err(predicted, measured)}, "
                                 f"binding {'same' if same else 'differs'})")
                        if same:
                            total += 1
                            within += abs(predicted / measured - 1) <= 0.15
                    print(line)
        print("\n2. cores: the cores=1 demands on 2 CPUs against the cores=2 cells")
        for level in ("local", "on"):
            for n in CLIENTS:
                one, two = by_key.get((level, 1, n)), by_key.get((level, 2, n))
                if (one is None or two is None or two.tps_mean is None
                        or not models[(level, 1, n)]["bounds"]):
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
                same = hypo[0].resource == own["binding"]
                # a bound is a ceiling: it predicts throughput only where the cell reached
                # it (80 % of its own binding bound); below, latency limits it
                saturated = bool(own["bounds"]) and measured >= 0.8 * own["bounds"][0]["max_tps"]
                print(f"  {level:>5} clients={n:>2}: cores=2 measured {measured:8,.0f}; "
                      f"predicted {predicted:8,.0f} ({_err(predicted, measured)}), "
                      f"{hypo[0].resource} binds (measured cell: {own['binding']}"
                      f"{'' if saturated else ', not saturated'})")
                if same and saturated:
                    total += 1
                    within += abs(predicted / measured - 1) <= 0.15
        print(f"\nwithin ±15 % where the binding resource is the same (and, for cores, "
              f"reached): {within} of {total}")
    finally:
        store.close()


if __name__ == "__main__":
    main()
