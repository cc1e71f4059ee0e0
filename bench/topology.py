"""The seed's placement remedies on this machine, side by side in one run.

Runs one spec (real servers, real pgbench) whose cells differ in one placement
axis each from a baseline (64 clients would swamp 2 cores; 16 are used), then
prints each variant's TPS and mean latency as a ratio to the baseline's, with
the 95 % CI of the ratio over repeats:

- cores 1 vs all:             the servers confined to one CPU (the core sweep's knee)
- walsender pinned vs not:    the sync walsender alone on the last CPU
- LAN / WAN link vs none:     0.2 ms and 2 ms one way on the replication links
- 2 instances vs 1:           two primaries (each with its standby) driven at once

    .venv/bin/python bench/topology.py [--duration 5] [--repeats 3] [--out DIR]

Needs root (cpusets, namespaces). Takes about (cells x repeats x duration) plus
a cluster build per cell: some 4 minutes with the defaults.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from syncrep_lab.stats.intervals import ratio_ci

SPEC = """\
name = "bench-topology"

[topology]
standbys = 1
sync = "b"

[workload]
clients = 16
duration = {duration}
warmup = 1
synchronous_commit = "on"

[run]
repeats_min = {repeats}
repeats_max = {repeats}

[probes]
probed_repeats = 0

[network]
namespaces = true

[links.lan]
delay_ms = 0.2
rate = "1gbit"

[links.wan]
delay_ms = 2

[placements.walsender-alone]
pin = {{ "walsender:b" = "{last}" }}

[matrix]
link = ["none", "lan", "wan"]
placement = ["none", "walsender-alone"]
cores = [1, {cpus}]
instances = [1, 2]
only = [
  {{ link = "none", placement = "none", cores = {cpus}, instances = 1 }},
  {{ link = "none", placement = "none", cores = 1, instances = 1 }},
  {{ link = "none", placement = "walsender-alone", cores = {cpus}, instances = 1 }},
  {{ link = "lan", placement = "none", cores = {cpus}, instances = 1 }},
  {{ link = "wan", placement = "none", cores = {cpus}, instances = 1 }},
  {{ link = "none", placement = "none", cores = {cpus}, instances = 2 }},
]
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    from syncrep_lab.placement.cpus import machine_cpus

    cpus = len(machine_cpus())
    folder = args.out or Path(tempfile.mkdtemp(prefix="bench-topology-"))
    spec = folder / "spec.toml"
    folder.mkdir(parents=True, exist_ok=True)
    spec.write_text(SPEC.format(duration=args.duration, repeats=args.repeats, cpus=cpus,
                                last=cpus - 1))
    run = folder / "run"
    done = subprocess.run([sys.executable, "-m", "syncrep_lab", "run", str(spec), "--out",
                           str(run)], check=False)
    if done.returncode != 0:
        return done.returncode
    db = sqlite3.connect(run / "syncrep-lab.sqlite")
    db.row_factory = sqlite3.Row
    cells = {}
    for c in db.execute("select id, axes_json, lat_mean_ms from cells where status = 'done'"):
        axes = json.loads(c["axes_json"])
        key = (axes["link"], axes["placement"], int(axes["cores"]), int(axes["instances"]))
        tps = [float(r[0]) for r in db.execute(
            "select tps from repeats where cell_id = ? and probed = 0", (c["id"],))]
        cells[key] = (tps, float(c["lat_mean_ms"]))
    base_key = ("none", "none", cpus, 1)
    base_tps, base_lat = cells[base_key]
    print(f"baseline (all {cpus} CPUs, no pin, no link, 1 instance): "
          f"{sum(base_tps) / len(base_tps):,.0f} tps, mean {base_lat:.2f} ms")
    print(f"{'variant':<34} {'TPS ratio [95% CI]':>26} {'mean ms':>9}")
    names = {("none", "none", 1, 1): "servers on 1 CPU",
             ("none", "walsender-alone", cpus, 1): "sync walsender alone on a CPU",
             ("lan", "none", cpus, 1): "LAN link (0.2 ms one way)",
             ("wan", "none", cpus, 1): "WAN link (2 ms one way)",
             ("none", "none", cpus, 2): "2 instances (summed)"}
    for key, name in names.items():
        if key not in cells:
            print(f"{name:<34} (cell failed)")
            continue
        tps, lat = cells[key]
        r = ratio_ci(tps, base_tps)
        ci = f"[{r.low:.2f}, {r.high:.2f}]" if r.low is not None and r.high is not None else ""
        print(f"{name:<34} {r.ratio:>8.2f} {ci:<16} {lat:>9.2f}")
    print(f"run folder: {run}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
