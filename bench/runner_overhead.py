"""The cost of measuring: the runner's own repeat and each class of probe, against
pgbench run by hand on the same cluster.

Variants (pick with --variants; all run interleaved, order rotated each round,
so drift and noise hit each alike):
  hand      pgbench by hand, same options, no logs (the reference)
  tool      what the runner runs for a measured repeat: pgbench with -P 1 and
            per-transaction logs, then the log parse
  sampling  tool + the sampling probes: pg_stat_activity at 20 Hz on every node,
            pg_stat_replication at 10 Hz, /proc at 4 Hz, numa_maps before/after
  perf      tool + perf stat counting every process's CPU, switches and traced
            system calls (a tracer, not a sampler)
  flame     tool + perf record -a --call-graph dwarf at 99 Hz, folded and rendered
  sched     tool + the scheduler trace (sched_switch/sched_wakeup, first 3 s)
  all       tool + every probe (what a probed repeat runs)
Targets: tool and sampling within 2 % of hand. On a shared 2-core machine
back-to-back TPS moves by tens of percent, so beside the paired TPS ratios the
bench counts what measuring costs directly: the CPU seconds of this process
while pgbench runs (samplers and tracker are its threads) above the plain
tool's, plus those of the probes' own processes (the samplers' backends,
perf), as a share of the machine's CPU over the run. Work before pgbench
starts (snapshots, connections) and after it ends (analysis) cannot cost it
throughput and is not counted. That figure is stable
and is what the 2 % target is checked on; the tracers' costs are reported,
which is why they run only in probed repeats.

    .venv/bin/python bench/runner_overhead.py [--rounds 8] [--duration 5] [--clients 8]
        [--variants hand,tool,sampling,perf,flame,sched]
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
import time
from collections.abc import Callable
from pathlib import Path

from syncrep_lab.cluster.build import UpOptions, up
from syncrep_lab.cluster.teardown import remove_cluster
from syncrep_lab.pg.installations import resolve
from syncrep_lab.plan.spec import Probes, Workload
from syncrep_lab.probes.session import ProbeNode, RepeatProbes
from syncrep_lab.readers.pgbench_log import parse_transaction_logs
from syncrep_lab.run.workload import prepare_tables, run_pgbench, script_text
from syncrep_lab.stats.intervals import mean_ci


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--sync-commit", default="on")
    parser.add_argument("--variants", default="hand,tool,sampling,perf,flame,sched")
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
        probe_nodes = [ProbeNode(n.name, manifest.admin_conninfo(n), n.data_dir(manifest.dir),
                                 n.role == "primary") for n in manifest.nodes]
        off: dict[str, object] = {"perf": False, "wait_events_hz": 0.0, "proc_hz": 0.0,
                                  "numa": False, "flamegraphs": False, "sched": False}
        configs = {
            "sampling": Probes.model_validate({**off, "wait_events_hz": 20.0, "proc_hz": 4.0,
                                               "numa": True}),
            "perf": Probes.model_validate({**off, "perf": True}),
            "flame": Probes.model_validate({**off, "flamegraphs": True}),
            "sched": Probes.model_validate({**off, "sched": True}),
            "all": Probes(),
        }

        # CPU the measuring itself takes while pgbench runs, per variant and round:
        # this process's (the samplers and the tracker are threads here), plus
        # the probes' own processes' (the samplers' backends, perf).
        probe_cpu: dict[str, list[float]] = {}

        def tool(config: Probes | None = None, name: str = "tool") -> float:
            logs = base / "logs"
            logs.mkdir()
            probes = (RepeatProbes(config, probe_nodes, inst.version.num, logs, args.duration)
                      if config is not None else None)
            # Only the CPU spent while pgbench runs can cost it throughput: the
            # snapshots and connections made before it starts and the analysis
            # after it ends are not counted.
            helpers: list[int] = []
            helpers_before = 0.0
            if probes is not None:
                probes.start()
                helpers = _probe_processes(probes)
                helpers_before = sum(_cpu_seconds(pid) for pid in helpers)
            cpu_before = time.process_time()
            try:
                run = run_pgbench(pgbench, conninfo, script, clients=args.clients,
                                  threads=threads, duration=args.duration,
                                  synchronous_commit=args.sync_commit,
                                  log_prefix=logs / "pgbench_log")
            finally:
                own_cpu = time.process_time() - cpu_before
                helpers_cpu = sum(_cpu_seconds(pid) for pid in helpers) - helpers_before
                data = probes.collect() if probes is not None else None
            probe_cpu.setdefault(name, []).append(own_cpu + helpers_cpu)
            if data is not None:
                failed = {k: v for k, v in data.status.items() if v[0] == "failed"}
                assert not failed, failed
            parse_transaction_logs(run.log_files)
            shutil.rmtree(logs)
            assert run.summary.tps is not None
            return run.summary.tps

        def by_hand() -> float:
            out = subprocess.run(hand, capture_output=True, text=True, env=env, check=True)
            m = re.search(r"tps = ([\d.]+)", out.stdout)
            assert m
            return float(m.group(1))

        def variant(name: str) -> Callable[[], float]:
            if name == "hand":
                return by_hand
            if name == "tool":
                return tool
            return lambda: tool(configs[name], name)

        names = [v for v in args.variants.split(",") if v]
        unknown = [v for v in names if v not in ("hand", "tool", *configs)]
        if unknown or "hand" not in names:
            raise SystemExit(f"unknown variants {unknown}; 'hand' is needed as the reference")
        tps: dict[str, list[float]] = {n: [] for n in names}
        for i in range(args.rounds + 1):  # round 0 warms up, not counted
            # Rotate the order each round so that no variant always follows another.
            k = i % len(names)
            got = {name: variant(name)() for name in names[k:] + names[:k]}
            if i == 0:
                continue
            for name in names:
                tps[name].append(got[name])
            print(f"round {i}: " + " | ".join(f"{n} {got[n]:,.0f}" for n in names), flush=True)
    finally:
        remove_cluster(manifest.dir)
        shutil.rmtree(base, ignore_errors=True)
    # Each round's variants ran back to back, so the per-round ratio is the paired
    # figure; its median and the t-interval of its mean are what the verdict uses.
    report: dict[str, object] = {"rounds": args.rounds, "duration_s": args.duration,
                                 "clients": args.clients,
                                 "synchronous_commit": args.sync_commit,
                                 "median_tps_hand": round(statistics.median(tps["hand"]), 1)}
    # The tool's own repeat is the floor every probe variant's CPU is counted from.
    floor = statistics.median(probe_cpu["tool"][1:]) if "tool" in probe_cpu else 0.0
    machine = args.duration * (os.cpu_count() or 1)
    for name in names:
        if name == "hand":
            continue
        paired = [a / b for a, b in zip(tps[name], tps["hand"], strict=True)]
        ci = mean_ci(paired)
        entry: dict[str, object] = {
            "median_tps": round(statistics.median(tps[name]), 1),
            "median_paired_ratio": round(statistics.median(paired), 4),
            "mean_paired_ratio_ci95": [round(ci.low or 0, 4), round(ci.high or 0, 4)],
        }
        if name != "tool":
            cpu = statistics.median(probe_cpu[name][1:]) - floor
            entry["probe_cpu_s_per_repeat"] = round(cpu, 3)
            entry["probe_share_of_machine_cpu"] = round(cpu / machine, 4)
            entry["cpu_within_2_percent"] = cpu / machine <= 0.02
        report[name] = entry
    print(json.dumps(report, indent=2))


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _probe_processes(probes: RepeatProbes) -> list[int]:
    """The samplers' server backends and the perf processes of one repeat."""
    pids = sorted(probes.sampler.backend_pids) if probes.sampler is not None else []
    for recorder in (probes.perf, probes.oncpu, probes.sched):
        proc = recorder.perf.proc if recorder is not None and recorder.perf else None
        if proc is not None:
            pids.append(proc.pid)
    return pids


if __name__ == "__main__":
    main()
