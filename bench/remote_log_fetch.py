"""What bringing a client host's pgbench logs back costs, against parsing them there.

A client on an SSH host writes pgbench's per-transaction logs there; the tool fetches
them over SFTP and parses them here (run/remote_client.py). This times, on the
tests' SSH host (sshd in a network namespace of this machine, tests/sshd.py; run as
root), the fetch of a log of --transactions lines and its parse, interleaved over
--times rounds; parsing on the host instead would cost the same parse on the host's CPU
and need Python and numpy there, saving only the fetch.

    sudo .venv/bin/python bench/remote_log_fetch.py [--transactions 100000] [--times 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.sshd import running_sshd

from syncrep_lab.hosts.ssh import SshHost
from syncrep_lab.readers.pgbench_log import parse_transaction_logs

# client id, transaction no, latency µs, script no, epoch s, µs: pgbench -l's line
LINE = "{} {} {} 0 1764000000 {}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transactions", type=int, default=100_000)
    parser.add_argument("--times", type=int, default=7)
    args = parser.parse_args()
    text = "".join(LINE.format(i % 32, i // 32, 900 + i % 700, i % 1_000_000)
                   for i in range(args.transactions))
    with running_sshd() as host, tempfile.TemporaryDirectory() as here:
        log = Path(host.data_root) / "pgbench_log.1"
        log.write_text(text)
        st = os.stat(host.data_root)
        os.chown(log, st.st_uid, st.st_gid)
        fetch, parse = [], []
        with SshHost(host.spec()) as ssh:
            for _ in range(args.times):
                started = time.perf_counter()
                data = ssh.get_bytes(str(log), 1 << 30)
                fetch.append(time.perf_counter() - started)
                local = Path(here) / "pgbench_log.1"
                local.write_bytes(data)
                started = time.perf_counter()
                stats = parse_transaction_logs([local])
                parse.append(time.perf_counter() - started)
        assert stats.transactions == args.transactions
    print(f"{args.transactions:,} transactions, {len(data) / 2**20:.1f} MiB; over {args.times} "
          f"rounds, median (min-max): fetch {statistics.median(fetch) * 1e3:.0f} ms "
          f"({min(fetch) * 1e3:.0f}-{max(fetch) * 1e3:.0f}), parse "
          f"{statistics.median(parse) * 1e3:.0f} ms ({min(parse) * 1e3:.0f}-"
          f"{max(parse) * 1e3:.0f}); fetch / parse "
          f"{statistics.median(fetch) / statistics.median(parse):.2f}")


if __name__ == "__main__":
    main()
