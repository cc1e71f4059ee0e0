"""Folding and rendering a long on-CPU recording: a busy 3-node cluster (primary,
standbys b and c, synchronous), pgbench inserting for --seconds while
``perf record -a --call-graph dwarf`` samples every CPU at 99 Hz, exactly as a
probed repeat records it. Then the recording is turned into per-role flame
graphs (perf script, inferno-collapse-perf, regrouping by role, one
inferno-flamegraph per role and one of everything) --times times.
Target: under 30 s for a 60-second recording.

    .venv/bin/python bench/flamegraph_speed.py [--seconds 60] [--times 3] [--clients 16]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from syncrep_lab.cluster import server
from syncrep_lab.cluster.build import UpOptions, up
from syncrep_lab.cluster.teardown import remove_cluster
from syncrep_lab.pg.installations import resolve
from syncrep_lab.plan.spec import Workload
from syncrep_lab.probes import flamegraph
from syncrep_lab.probes.session import walsenders
from syncrep_lab.probes.tracker import ProcessTracker
from syncrep_lab.run.workload import prepare_tables, run_pgbench, script_text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--times", type=int, default=3)
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    reason = flamegraph.unavailable_reason()
    if reason is not None:
        raise SystemExit(f"cannot record stacks here: {reason}")

    base = Path(tempfile.mkdtemp(prefix="srl-flame-", dir="/tmp"))
    base.chmod(0o755)
    manifest = up(UpOptions(dir=base / "c"))
    try:
        pgbench = resolve(manifest.bin_dir).program("pgbench")
        workload = Workload(clients=args.clients, duration=args.seconds)
        script = base / "insert.sql"
        script.write_text(script_text(workload, 1, base))
        admin = manifest.admin_conninfo(manifest.primary)
        prepare_tables(admin, workload)
        postmasters = {n.name: pid for n in manifest.nodes
                       if (pid := server.postmaster_pid(n.data_dir(manifest.dir))) is not None}
        tracker = ProcessTracker(postmasters, walsenders(admin))
        tracker.begin()
        data = base / "oncpu.perf.data"
        recorder = flamegraph.OnCpuRecorder(data, 99, args.seconds + 60)
        recorder.start()
        try:
            run = run_pgbench(pgbench, manifest.conninfo(manifest.primary), script,
                              clients=args.clients, threads=min(args.clients, 2),
                              duration=args.seconds, synchronous_commit="on",
                              log_prefix=base / "log")
        finally:
            recorder.stop()
            tracker.finish()
        for log in run.log_files:
            log.unlink()
        timings = []
        graphs = 0
        for i in range(args.times):
            out = base / f"flame-{i}"
            started = time.perf_counter()
            result = flamegraph.flame_graphs(data, out / "flame", tracker.role_of, "bench")
            timings.append(time.perf_counter() - started)
            graphs = len(result.graphs)
            print(f"fold and render {i + 1}: {timings[-1]:.2f} s, {graphs} graphs", flush=True)
        print(json.dumps({
            "recorded_seconds": args.seconds, "clients": args.clients,
            "tps": run.summary.tps, "perf_data_mib": round(os.path.getsize(data) / 2**20, 1),
            "graphs": graphs, "fold_and_render_s": [round(t, 2) for t in timings],
            "median_s": round(statistics.median(timings), 2),
            "under_30_s": statistics.median(timings) < 30,
        }, indent=2))
    finally:
        remove_cluster(manifest.dir)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
