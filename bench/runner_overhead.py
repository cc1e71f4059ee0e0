"""The runner's own overhead: the same cell driven by syncrep-lab and by hand.

A: what the runner runs for a measured repeat (pgbench with -P 1 and
   per-transaction logs, synchronous_commit through PGOPTIONS), followed by the
   log parse, without the probes.
P: the same with the default probes running (perf counting every process's
   CPU, context switches and traced system calls; 20 Hz pg_stat_activity on
   each node; 10 Hz pg_stat_replication).
B: pgbench run by hand with the same options but no logs.
All against the same cluster, interleaved A P B A P B, so drift and noise hit
each alike. Target: median TPS of A within 2 % of B; P's cost is reported.

    .venv/bin/python bench/runner_overhead.py [--rounds 8] [--duration 5] [--clients 8]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from syncrep_lab.cluster.build import UpOptions, up
from syncrep_lab.cluster.teardown import remove_cluster
from syncrep_lab.experiment.spec import Probes, Workload
from syncrep_lab.experiment.workload import prepare_tables, run_pgbench, script_text
from syncrep_lab.measure.pgbench_log import parse_transaction_logs
from syncrep_lab.measure.stats import mean_ci
from syncrep_lab.pg.installations import resolve
from syncrep_lab.probes.session import ProbeNode, RepeatProbes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--sync-commit", default="on")
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="srl-ovh-", dir="/tmp"))
    base.chmod(0o755)
    manifest = up(UpOptions(dir=base / "c"))
    try:
        inst = resolve(manifest.bin_dir)
        pgbench = inst.program("pgbench")
        conninfo = manifest.conninfo(manifest.primary)
        workload = Workload(clients=args.clients, duration=args.duration)
        script = base / "insert.sql"
        script.write_text(script_text(workload, 1, base))
        prepare_tables(manifest.admin_conninfo(manifest.primary), workload)
        threads = min(args.clients, os.cpu_count() or 2)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["PGOPTIONS"] = f"-c synchronous_commit={args.sync_commit}"
        hand = [str(pgbench), "-M", "prepared", "-n", "-P", "1", "-c", str(args.clients),
                "-j", str(threads), "-T", str(args.duration), "-f", str(script), conninfo]
        tool_tps: list[float] = []
        probed_tps: list[float] = []
        hand_tps: list[float] = []
        probe_nodes = [ProbeNode(n.name, manifest.admin_conninfo(n), n.data_dir(manifest.dir),
                                 n.role == "primary") for n in manifest.nodes]
        def tool() -> float:
            logs = base / "logs"
            logs.mkdir()
            run = run_pgbench(pgbench, conninfo, script, clients=args.clients,
                              threads=threads, duration=args.duration,
                              synchronous_commit=args.sync_commit,
                              log_prefix=logs / "pgbench_log")
            parse_transaction_logs(run.log_files)
            shutil.rmtree(logs)
            assert run.summary.tps is not None
            return run.summary.tps

        def probed() -> float:
            logs = base / "logs"
            logs.mkdir()
            probes = RepeatProbes(Probes(), probe_nodes, inst.version.num, logs)
            probes.start()
            try:
                run = run_pgbench(pgbench, conninfo, script, clients=args.clients,
                                  threads=threads, duration=args.duration,
                                  synchronous_commit=args.sync_commit,
                                  log_prefix=logs / "pgbench_log")
            finally:
                data = probes.stop()
            assert data.status.get("activity", ("",))[0] == "ran", data.status
            parse_transaction_logs(run.log_files)
            shutil.rmtree(logs)
            assert run.summary.tps is not None
            return run.summary.tps

        def by_hand() -> float:
            out = subprocess.run(hand, capture_output=True, text=True, env=env, check=True)
            m = re.search(r"tps = ([\d.]+)", out.stdout)
            assert m
            return float(m.group(1))

        kinds = [("tool", tool, tool_tps), ("probed", probed, probed_tps),
                 ("hand", by_hand, hand_tps)]
        for i in range(args.rounds + 1):  # round 0 warms up, not counted
            # Rotate the order each round so that no variant always follows another.
            order = kinds[i % 3:] + kinds[: i % 3]
            got = {name: fn() for name, fn, _ in order}
            if i == 0:
                continue
            for name, _, values in kinds:
                values.append(got[name])
            print(f"round {i}: syncrep-lab {got['tool']:,.0f} tps | with probes "
                  f"{got['probed']:,.0f} tps | by hand {got['hand']:,.0f} tps", flush=True)
    finally:
        remove_cluster(manifest.dir)
        shutil.rmtree(base, ignore_errors=True)
    # Each round's variants ran back to back, so the per-round ratio is the paired
    # figure; its median and the t-interval of its mean are what the verdict uses.
    paired = [a / b for a, b in zip(tool_tps, hand_tps, strict=True)]
    paired_ci = mean_ci(paired)
    probed_paired = mean_ci([a / b for a, b in zip(probed_tps, hand_tps, strict=True)])
    ratio = statistics.median(tool_tps) / statistics.median(hand_tps)
    probed_ratio = statistics.median(probed_tps) / statistics.median(hand_tps)
    print(json.dumps({
        "rounds": args.rounds, "duration_s": args.duration, "clients": args.clients,
        "synchronous_commit": args.sync_commit,
        "median_tps_syncrep_lab": round(statistics.median(tool_tps), 1),
        "median_tps_by_hand": round(statistics.median(hand_tps), 1),
        "ratio_of_medians": round(ratio, 4),
        "median_paired_ratio": round(statistics.median(paired), 4),
        "mean_paired_ratio_ci95": [round(paired_ci.low or 0, 4), round(paired_ci.high or 0, 4)],
        "probes_mean_paired_ratio_ci95": [round(probed_paired.low or 0, 4),
                                          round(probed_paired.high or 0, 4)],
        "median_tps_with_probes": round(statistics.median(probed_tps), 1),
        "probes_ratio_of_medians": round(probed_ratio, 4),
        "median_paired_within_2_percent": abs(statistics.median(paired) - 1) <= 0.02,
    }, indent=2))


if __name__ == "__main__":
    main()
