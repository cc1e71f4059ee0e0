"""What the commit anatomy probe costs the commits it times: pgbench's TPS with and
without the probe (probes/anatomy.py) around it, on the seed's shape (a primary and
standbys b and c, '1(b,c)', synchronous_commit = on, insert-only), paired and
interleaved.

Each round runs pgbench once bare and once per probe placement asked (``--places``:
``emulated``, the probes where the tool puts them, on each function's first instruction
the kernel emulates, probes/uprobe_points.py; ``entry``, all on the functions' first
instructions, as before; ``standby``, where ``emulated`` puts them, and the sync
standby's half split too, probes/standby_anatomy.py: its system-call probes and the
lines it prints), each with the recorder started before it and stopped after it
(a probed repeat's window), in an order drawn per round; the ratio probed / bare of each
round is one paired value. Printed per placement: where the probes went, the median of
those ratios with a distribution-free 95 % interval (order statistics of the rounds:
with 6 rounds, their smallest and largest), the geometric mean with a Student-t interval
(log scale); the servers' CPU per commit (every node's postmaster, its reaped and its
live children, from /proc, around each pgbench run: the traps and the BPF programs are
charged to the traced processes), probed less bare per round, and that as a share of a
bare commit's CPU (the servers' and pgbench's): what the probe takes from a machine
whose cores are all busy, and a steadier figure than TPS on a shared one; bpftrace's
own CPU (utime + stime from /proc: its start-up, compiling the program, and the window,
per commit); and, with kernel.bpf_stats_enabled turned on for the run and put back
after, the time the BPF programs themselves ran per commit (the rest of the cost is the
breakpoints: trapping, and stepping over the probed instruction where it is not
emulated). With both placements, their paired ratio too.

    .venv/bin/python bench/anatomy_cost.py [--rounds 6] [--duration 4] [--clients 32]
        [--pg 18] [--seed 1] [--places emulated,entry,standby]
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import random
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from scipy import stats as scipy_stats

from syncrep_lab import procs, shutdown
from syncrep_lab.cluster import server
from syncrep_lab.cluster.build import UpOptions, up
from syncrep_lab.cluster.teardown import remove_cluster
from syncrep_lab.pg.installations import resolve
from syncrep_lab.plan.spec import Workload
from syncrep_lab.probes import anatomy
from syncrep_lab.run.workload import prepare_tables, run_pgbench, script_text
from syncrep_lab.stats.intervals import paired_ratio

BPF_STATS = Path("/proc/sys/kernel/bpf_stats_enabled")


def median_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """A distribution-free interval for the median: the order statistics (k, n + 1 - k),
    k as large as keeps the binomial coverage P(k <= B <= n - k), B ~ Bin(n, 1/2), at
    least ``confidence`` (k = 1, the extremes, when no k does: fewer than 6 values)."""
    ordered = sorted(values)
    n = len(ordered)

    def coverage(k: int) -> float:
        return float(scipy_stats.binom.cdf(n - k, n, 0.5) - scipy_stats.binom.cdf(k - 1, n, 0.5))

    k = 1
    while k + 1 <= (n + 1) // 2 and coverage(k + 1) >= confidence:
        k += 1
    return ordered[k - 1], ordered[n - k]


def bpf_run_ns(pid: int) -> int:
    """The run time the kernel counted for the BPF programs bpftrace ``pid`` holds (0 when
    kernel.bpf_stats_enabled is off)."""
    total = 0
    fds = Path(f"/proc/{pid}/fd")
    for fd in fds.iterdir():
        try:
            if os.readlink(fd) != "anon_inode:bpf-prog":
                continue
            for line in Path(f"/proc/{pid}/fdinfo/{fd.name}").read_text().splitlines():
                if line.startswith("run_time_ns:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


def servers_cpu_s(postmasters: Sequence[int]) -> float:
    """CPU seconds the servers have used so far: each postmaster's own and its reaped
    children's (cutime, cstime: the backends of the runs before), and its live
    children's. Uprobe traps and the BPF programs count here, in the traced process."""
    ticks = 0
    for pm in postmasters:
        fields = procs.stat_fields(pm)
        assert fields is not None, pm
        ticks += sum(int(fields[i]) for i in (procs.UTIME, procs.STIME, procs.CUTIME,
                                              procs.CSTIME))
        for child in procs.children(pm):
            got = procs.stat_fields(child)
            ticks += int(got[procs.UTIME]) + int(got[procs.STIME]) if got else 0
    return ticks / os.sysconf("SC_CLK_TCK")


def settle(postmasters: Sequence[int], resident: dict[int, set[int]]) -> None:
    """Wait (up to 5 s) until each postmaster has reaped the backends of the last run:
    a child's CPU moves into its parent's cutime only then."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(
            set(procs.children(pm)) - resident[pm] for pm in postmasters):
        time.sleep(0.02)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--duration", type=int, default=4)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--pg", default=None, help="installation (default: the embedded 18)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--places", default="emulated",
                    help="probe placements to measure, comma-separated: emulated, entry, "
                         "standby (emulated with the standby's half)")
    args = ap.parse_args()
    places = args.places.split(",")
    if (not places or set(places) - {"emulated", "entry", "standby"}
            or len(set(places)) < len(places)):
        raise SystemExit(f"--places {args.places}: give emulated, entry, standby or "
                         "several, comma-separated")
    shutdown.install()
    root = Path(tempfile.mkdtemp(prefix="srl-anatomy-cost-", dir="/tmp"))
    root.chmod(0o755)
    stats_before = BPF_STATS.read_text().strip() if BPF_STATS.exists() else None
    manifest = None
    try:
        manifest = up(UpOptions(dir=root / "c", pg=args.pg))
        primary = manifest.primary
        prepare_tables(manifest.admin_conninfo(primary), Workload())
        script = root / "insert.sql"
        script.write_text(script_text(Workload(), 1, root))
        postmaster = server.postmaster_pid(primary.data_dir(manifest.dir))
        assert postmaster is not None
        binary = Path(f"/proc/{postmaster}/exe")
        reason = anatomy.unavailable_reason(binary)
        if reason is not None:
            raise SystemExit(f"the probe cannot run here: {reason}")
        if stats_before is not None:
            BPF_STATS.write_text("1")
        pgbench = resolve(manifest.bin_dir).program("pgbench")
        servers = [server.postmaster_pid(n.data_dir(manifest.dir)) for n in manifest.nodes]
        postmasters = [pm for pm in servers if pm is not None]
        resident = {pm: set(procs.children(pm)) for pm in postmasters}
        # CPU per commit, µs: the servers' (all nodes), and the servers' and pgbench's
        server_cpu: dict[str, list[float]] = {k: [] for k in ("bare", *places)}
        cpu_all: dict[str, list[float]] = {k: [] for k in ("bare", *places)}
        rng = random.Random(args.seed)
        tps: dict[str, list[float]] = {k: [] for k in ("bare", *places)}
        startup_cpu: dict[str, list[float]] = {k: [] for k in places}
        window_cpu_per_commit: dict[str, list[float]] = {k: [] for k in places}
        bpf_per_commit: dict[str, list[float]] = {k: [] for k in places}
        timed: dict[str, list[float]] = {k: [] for k in places}
        where: dict[str, dict[str, int]] = {}
        fallbacks: dict[str, list[str]] = {k: [] for k in places}
        joined: list[float] = []  # the standby's half: commits joined / those that slept
        for n in range(1, args.rounds + 1):
            order = ["bare", *places]
            rng.shuffle(order)
            for kind in order:
                recorder = None
                if kind != "bare":
                    recorder = anatomy.CommitAnatomy(
                        binary, [postmaster], root / f"a{n}-{kind}",
                        [manifest.admin_conninfo(primary)], at_entry=kind == "entry",
                        standbys=({n.name: manifest.admin_conninfo(n)
                                   for n in manifest.standbys} if kind == "standby" else None))
                    recorder.start()
                    if recorder.status[0] != "ran" or (kind == "standby"
                                                       and recorder.standby is None):
                        raise SystemExit(f"the probe did not start: {recorder.status} "
                                         f"{recorder.standby_status}")
                    if recorder.fallback is None:
                        where[kind] = recorder.offsets
                    else:  # the recorder fell back to the first instructions
                        fallbacks[kind].append(recorder.fallback)
                settle(postmasters, resident)
                cpu_before = servers_cpu_s(postmasters)
                client_before = resource.getrusage(resource.RUSAGE_CHILDREN)
                run = run_pgbench(pgbench, manifest.conninfo(primary), script,
                                  clients=args.clients, threads=2, duration=args.duration,
                                  synchronous_commit="on")
                assert run.summary.tps is not None and run.summary.transactions
                tps[kind].append(run.summary.tps)
                client_after = resource.getrusage(resource.RUSAGE_CHILDREN)
                settle(postmasters, resident)
                used = servers_cpu_s(postmasters) - cpu_before
                client = (client_after.ru_utime + client_after.ru_stime
                          - client_before.ru_utime - client_before.ru_stime)
                server_cpu[kind].append(1e6 * used / run.summary.transactions)
                cpu_all[kind].append(1e6 * (used + client) / run.summary.transactions)
                if recorder is not None:
                    assert recorder.pid is not None and recorder.ready_cpu_s is not None
                    cpu = recorder.cpu_seconds() or 0.0
                    bpf_ns = bpf_run_ns(recorder.pid)
                    rows = recorder.stop()
                    commits = next((r.count for r in rows.anatomy
                                    if (r.who, r.component) == ("backend", "commit_wait")), 0)
                    timed[kind].append(commits / run.summary.transactions)
                    if kind == "standby":  # of the waits that slept to their release
                        slept = next((r.count for r in rows.anatomy if (r.who, r.component)
                                      == ("backend", "standby_wait")), 0)
                        joined.append(next((r.count for r in rows.anatomy
                                            if r.component == "whole"), 0) / max(slept, 1))
                    startup_cpu[kind].append(recorder.ready_cpu_s)
                    window_cpu_per_commit[kind].append((cpu - recorder.ready_cpu_s)
                                                       / run.summary.transactions)
                    bpf_per_commit[kind].append(bpf_ns / run.summary.transactions)
            print(f"round {n}: " + ", ".join(f"{k} {tps[k][-1]:,.0f} tps" for k in order),
                  flush=True)
        version = resolve(manifest.bin_dir).version
        print(f"\nPostgreSQL {version}, {args.clients} clients, {args.duration} s a run, "
              f"{args.rounds} rounds; median TPS bare {statistics.median(tps['bare']):,.0f}")
        for kind in places:
            ratios = [p / b for p, b in zip(tps[kind], tps["bare"], strict=True)]
            low, high = median_interval(ratios)
            geo = paired_ratio(tps[kind], tps["bare"])
            at = ", ".join(f"{f}+{k}" for f, k in where.get(kind, {}).items())
            print(f"\n{kind}: probes at {at or 'the first instructions'}")
            if fallbacks[kind]:
                print(f"  {len(fallbacks[kind])} of {args.rounds} windows fell back to the "
                      f"first instructions: {fallbacks[kind][0][:200]}")
            print(f"  median TPS probed {statistics.median(tps[kind]):,.0f}")
            print(f"  probed / bare: median {statistics.median(ratios):.3f} (95 % interval "
                  f"{low:.3f} - {high:.3f}); geometric mean {geo.mean:.3f} (95 % CI "
                  f"{geo.low or math.nan:.3f} - {geo.high or math.nan:.3f})")
            print(f"  commits timed / pgbench's transactions: median "
                  f"{statistics.median(timed[kind]):.3f}")
            if kind == "standby":
                print(f"  commits joined to the standby's events / those that slept to "
                      f"their release: median "
                      f"{statistics.median(joined):.3f}")
            extra = [p - b for p, b in zip(server_cpu[kind], server_cpu["bare"], strict=True)]
            low, high = median_interval(extra)
            share = [e / b for e, b in zip(extra, cpu_all["bare"], strict=True)]
            s_low, s_high = median_interval(share)
            print(f"  CPU per commit, servers (µs): bare median "
                  f"{statistics.median(server_cpu['bare']):.1f}, probed "
                  f"{statistics.median(server_cpu[kind]):.1f}; probed - bare median "
                  f"{statistics.median(extra):.1f} (95 % interval {low:.1f} - {high:.1f})")
            print(f"  that as a share of a bare commit's CPU (servers and pgbench, "
                  f"{statistics.median(cpu_all['bare']):.1f} µs): median "
                  f"{100 * statistics.median(share):.1f} % (95 % interval "
                  f"{100 * s_low:.1f} - {100 * s_high:.1f} %)")
            print(f"  bpftrace's CPU: start-up (compile, attach) median "
                  f"{statistics.median(startup_cpu[kind]):.2f} s; during the window "
                  f"{1e6 * statistics.median(window_cpu_per_commit[kind]):.3f} µs per commit")
            if stats_before is not None:
                print(f"  the BPF programs' own run time: median "
                      f"{statistics.median(bpf_per_commit[kind]) / 1e3:.2f} µs per commit")
        for first, second in itertools.pairwise(places):
            ratios = [a / b for a, b in zip(tps[first], tps[second], strict=True)]
            low, high = median_interval(ratios)
            geo = paired_ratio(tps[first], tps[second])
            print(f"\n{first} / {second}: median {statistics.median(ratios):.3f} (95 % "
                  f"interval {low:.3f} - {high:.3f}); geometric mean {geo.mean:.3f} (95 % CI "
                  f"{geo.low or math.nan:.3f} - {geo.high or math.nan:.3f})")
    finally:
        if stats_before is not None:
            BPF_STATS.write_text(stats_before)
        if manifest is not None:
            remove_cluster(manifest.dir)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
