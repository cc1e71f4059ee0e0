"""What a fresh SSH connection costs against a command on one already open.

The probes of a node on an SSH host open their own connection each (the /proc
snapshots, numa_maps, perf stat, the recordings, the host's clock), about a dozen per
host in a probed repeat. This times, on the tests' SSH host (sshd in a network
namespace of this machine, tests/sshd.py; run as root), one small command (`true`) on a
connection opened for it and closed after, against the same command on a connection
kept open, interleaved over --rounds rounds of --times each; the difference is what
pooling one connection per host would save per connection opened.

    sudo .venv/bin/python bench/ssh_connections.py [--rounds 7] [--times 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.sshd import running_sshd

from syncrep_lab.hosts.ssh import HostSpec, SshHost
from syncrep_lab.measure.stats import mean_ci


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--times", type=int, default=20)
    args = parser.parse_args()
    fresh, kept = [], []
    with running_sshd() as sshd:
        spec = sshd.spec()
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
    ratios = [f / k for f, k in zip(fresh, kept, strict=True)]
    ci = mean_ci(ratios, 0.95)
    print(f"{args.rounds} rounds of {args.times} commands; median per command: fresh "
          f"connection {statistics.median(fresh) * 1e3:.1f} ms "
          f"({min(fresh) * 1e3:.1f}-{max(fresh) * 1e3:.1f}), kept connection "
          f"{statistics.median(kept) * 1e3:.1f} ms "
          f"({min(kept) * 1e3:.1f}-{max(kept) * 1e3:.1f}); fresh / kept "
          f"{ci.mean:.1f} (95 % CI {ci.low:.1f}-{ci.high:.1f}); a connection costs "
          f"{(statistics.median(fresh) - statistics.median(kept)) * 1e3:.1f} ms more")


if __name__ == "__main__":
    main()
