"""What a fresh SSH connection costs against a command on one already open.

The probes of a node on an SSH host open their own connection each (the /proc
snapshots, numa_maps, perf stat, the recordings, the host's clock), about a dozen per
host in a probed repeat. This times, on the tests' SSH host (sshd in a network
namespace of this machine, tests/sshd.py; run as root), one small command (`true`) on a
connection opened for it and closed after, against the same command on a connection
kept open, interleaved over --rounds rounds of --times each; the difference is what
pooling one connection per host would save per connection opened.

Then, with --runs N, the same small run (a standby on the host, 2 measured repeats and
a probed one) N times each way, interleaved: with the run's connections kept
(hosts/ssh.kept_connections) and with a connection per use, counting the connections
sshd accepted and the run's wall time.

    sudo .venv/bin/python bench/ssh_connections.py [--rounds 7] [--times 20] [--runs 3]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.sshd import SshdHost, running_sshd

from syncrep_lab.hosts.ssh import HostSpec, SshHost
from syncrep_lab.stats.intervals import mean_ci


def _fresh(spec: HostSpec, times: int) -> float:
    started = time.perf_counter()
    for _ in range(times):
        with SshHost(spec) as host:
            host.run(["true"], timeout=30)
    return (time.perf_counter() - started) / times


def _kept(host: SshHost, times: int) -> float:
    started = time.perf_counter()
    for _ in range(times):
        host.run(["true"], timeout=30)
    return (time.perf_counter() - started) / times


SPEC = """name = "ssh-connections"
[topology]
pg = "15"
standbys = 2
sync = "c"
clone = "basebackup"
hosts = {{ c = "far" }}
{table}
[workload]
clients = 2
duration = 3
warmup = 0
[run]
repeats_min = 2
repeats_max = 2
[probes]
sched = false
"""


def _runs(sshd: SshdHost, runs: int) -> None:
    """The run of SPEC ``runs`` times each way, interleaved: connections and seconds."""
    from tests.helpers import cli_here

    from syncrep_lab.run import runner

    seen: dict[str, list[tuple[int, float]]] = {"kept": [], "fresh": []}
    for n in range(runs):
        for way in ("kept", "fresh") if n % 2 == 0 else ("fresh", "kept"):
            # fresh: the run without kept_connections, a connection per use
            fresh = (mock.patch.object(runner, "kept_connections", contextlib.nullcontext)
                     if way == "fresh" else contextlib.nullcontext())
            folder = Path(tempfile.mkdtemp(prefix="srl-bench-", dir="/tmp"))
            folder.chmod(0o755)
            try:
                (folder / "spec.toml").write_text(SPEC.format(
                    table=sshd.hosts_table("far", "/usr/lib/postgresql/15/bin")))
                accepted = sshd.log.read_text().count("Accepted publickey")
                started = time.perf_counter()
                with fresh:
                    res = cli_here("run", str(folder / "spec.toml"), "--out",
                                   str(folder / "run"))
                took = time.perf_counter() - started
                if res.returncode != 0:
                    raise SystemExit(res.stdout + res.stderr)
                seen[way].append((sshd.log.read_text().count("Accepted publickey") - accepted,
                                  took))
            finally:
                shutil.rmtree(folder, ignore_errors=True)
    for way, got in seen.items():
        print(f"{way}: SSH connections per run {sorted(c for c, _ in got)}, wall median "
              f"{statistics.median(t for _, t in got):.1f} s "
              f"({min(t for _, t in got):.1f}-{max(t for _, t in got):.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--times", type=int, default=20)
    parser.add_argument("--runs", type=int, default=0)
    args = parser.parse_args()
    with running_sshd() as sshd:
        spec = sshd.spec()
        fresh, kept = [], []
        with SshHost(spec) as host:
            host.run(["true"], timeout=30)  # connected before the first round
            for n in range(args.rounds):
                # interleaved, the order alternating, so drift hits both alike
                order = ("fresh", "kept") if n % 2 == 0 else ("kept", "fresh")
                for name in order:
                    if name == "fresh":
                        fresh.append(_fresh(spec, args.times))
                    else:
                        kept.append(_kept(host, args.times))
        ci = mean_ci([f / k for f, k in zip(fresh, kept, strict=True)], 0.95)
        print(f"{args.rounds} rounds of {args.times} commands; median per command: fresh "
              f"connection {statistics.median(fresh) * 1e3:.1f} ms "
              f"({min(fresh) * 1e3:.1f}-{max(fresh) * 1e3:.1f}), kept connection "
              f"{statistics.median(kept) * 1e3:.1f} ms "
              f"({min(kept) * 1e3:.1f}-{max(kept) * 1e3:.1f}); fresh / kept "
              f"{ci.mean:.1f} (95 % CI {ci.low:.1f}-{ci.high:.1f}); a connection costs "
              f"{(statistics.median(fresh) - statistics.median(kept)) * 1e3:.1f} ms more")
        if args.runs:
            _runs(sshd, args.runs)

if __name__ == "__main__":
    main()
