"""On-CPU stacks unwound by frame pointers against DWARF, on one cell.

Builds PostgreSQL 18 with frame pointers (``pg build 18 --flavor frame-pointers``;
cached after the first run), starts the seed's 3-node cluster on it (primary, standbys b
and c, '1(b,c)'), and runs pgbench inserting for --seconds while ``perf record -a``
samples every CPU at 99 Hz, as a probed repeat records it, with ``--call-graph dwarf``
or ``--call-graph fp``. The two alternate in rounds, in an order shuffled per round, so
both see the same machine; each figure's ratio fp / dwarf is paired by round (geometric
mean and its 95 % interval over the rounds).

Per recording: pgbench's TPS while recorded, perf record's own CPU, the recording's
size and samples, the seconds to fold and render it into per-role flame graphs, and
how whole the stacks are: the share of the sync walsender's (walsender:b) sampled time
whose stack reaches PostmasterMain, and the share inside SyncRepReleaseWaiters.

    .venv/bin/python bench/frame_pointers.py [--rounds 5] [--seconds 10] [--clients 16]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from syncrep_lab import procs
from syncrep_lab.cluster import server
from syncrep_lab.cluster.build import UpOptions, up
from syncrep_lab.cluster.teardown import remove_cluster
from syncrep_lab.pg.installations import resolve
from syncrep_lab.plan.spec import Workload
from syncrep_lab.probes import flamegraph
from syncrep_lab.probes.session import walsenders
from syncrep_lab.probes.tracker import TICK_S, ProcessTracker
from syncrep_lab.run.workload import prepare_tables, run_pgbench, script_text
from syncrep_lab.stats.intervals import paired_ratio

BUILD = "pg18-fp"
MODES = ("dwarf", "fp")
RELEASING = "SyncRepReleaseWaiters"
FIGURES = ("tps", "perf_cpu_s", "data_mib", "fold_s", "whole", "releasing")


def build() -> None:
    res = subprocess.run([sys.executable, "-m", "syncrep_lab", "pg", "build", "18",
                          "--flavor", "frame-pointers", "--name", BUILD, "--json"],
                         capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    if res.returncode != 0:
        raise SystemExit(f"pg build failed:\n{res.stdout}{res.stderr}")
    built = json.loads(res.stdout)
    print(f"{BUILD}: PostgreSQL {built['version']}, configure {' '.join(built['configure'])}")


def perf_cpu_s(pid: int) -> float:
    """perf record's user and system CPU so far (read just before it is stopped)."""
    fields = procs.stat_fields(pid)
    return 0.0 if fields is None else (int(fields[procs.UTIME]) + int(fields[procs.STIME])) * TICK_S


def stack_shares(folded: Path) -> tuple[float, float]:
    """Of a role's sampled time: the share whose stack reaches PostmasterMain (whole to
    the process's root), and the share inside SyncRepReleaseWaiters."""
    total = whole = releasing = 0
    for line in folded.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = set(stack.split(";"))
        us = int(count)
        total += us
        whole += us if "PostmasterMain" in frames else 0
        releasing += us if RELEASING in frames else 0
    return (whole / total, releasing / total) if total else (0.0, 0.0)


def record(mode: str, base: Path, manifest: Any, script: Path, args: argparse.Namespace,
           n: int) -> dict[str, float]:
    admin = manifest.admin_conninfo(manifest.primary)
    postmasters = {nd.name: pid for nd in manifest.nodes
                   if (pid := server.postmaster_pid(nd.data_dir(manifest.dir))) is not None}
    tracker = ProcessTracker(postmasters, walsenders(admin))
    tracker.begin()
    data = base / f"{mode}-{n}.perf.data"
    recorder = flamegraph.OnCpuRecorder(data, 99, args.seconds + 60, mode)
    recorder.start()
    assert recorder.perf.proc is not None
    try:
        run = run_pgbench(resolve(manifest.bin_dir).program("pgbench"),
                          manifest.conninfo(manifest.primary), script, clients=args.clients,
                          threads=min(args.clients, 2), duration=args.seconds,
                          synchronous_commit="on", log_prefix=base / "log")
    finally:
        cpu = perf_cpu_s(recorder.perf.proc.pid)
        recorder.stop()
        tracker.finish()
    for log in run.log_files:
        log.unlink()
    out = base / f"flame-{mode}-{n}"
    started = time.perf_counter()
    result = flamegraph.flame_graphs(data, out / "flame", tracker.role_of, mode)
    fold_s = time.perf_counter() - started
    graph = next(g for g in result.graphs if (g.node, g.role) == ("primary", "walsender:b"))
    whole, releasing = stack_shares(out / graph.folded_path)
    figures = {"tps": float(run.summary.tps or 0.0), "perf_cpu_s": cpu,
               "data_mib": data.stat().st_size / 2**20, "fold_s": fold_s,
               "whole": whole, "releasing": releasing}
    data.unlink()
    print(f"  {mode:<5} " + "  ".join(f"{k} {v:,.3f}" for k, v in figures.items()), flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    reason = flamegraph.unavailable_reason()
    if reason is not None:
        raise SystemExit(f"cannot record stacks here: {reason}")
    build()
    base = Path(tempfile.mkdtemp(prefix="srl-fp-", dir="/tmp"))
    base.chmod(0o755)
    manifest = up(UpOptions(dir=base / "c", pg=BUILD))
    shuffle = random.Random(args.seed)
    seen: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    try:
        workload = Workload(clients=args.clients, duration=args.seconds)
        script = base / "insert.sql"
        script.write_text(script_text(workload, 1, base))
        prepare_tables(manifest.admin_conninfo(manifest.primary), workload)
        for n in range(1, args.rounds + 1):
            order = list(MODES)
            shuffle.shuffle(order)
            print(f"round {n}: {' then '.join(order)}", flush=True)
            for mode in order:
                seen[mode].append(record(mode, base, manifest, script, args, n))
    finally:
        remove_cluster(manifest.dir)
        shutil.rmtree(base, ignore_errors=True)
    print(f"\n{'figure':<12}{'dwarf (median)':>16}{'fp (median)':>14}   fp / dwarf (95 % CI)")
    for figure in FIGURES:
        a = [r[figure] for r in seen["fp"]]
        b = [r[figure] for r in seen["dwarf"]]
        line = (f"{figure:<12}{statistics.median(b):>16,.3f}{statistics.median(a):>14,.3f}")
        if min(a + b) > 0:
            ratio = paired_ratio(a, b)
            interval = (f" ({ratio.low:.3f}–{ratio.high:.3f})" if ratio.low is not None
                        else "")
            line += f"   {ratio.mean:.3f}{interval}"
        print(line)


if __name__ == "__main__":
    main()
