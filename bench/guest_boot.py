"""Boot-to-ready of a guest, for each root a guest can have, and PostgreSQL inside.

Boots --boots guests per root, one at a time, interleaved (hostfs, image, hostfs, ...),
each in a network namespace of its own, and prints per boot: the seconds from QEMU's
start to its root mounted (console), to sshd started (console) and to a command answered
over SSH (ready), and the median of ten commands on an open SSH connection; then per
root the median and the spread (min to max) of ready. With --postgres, every host's-root
guest also starts this machine's PostgreSQL 18 (the embedded installation, a directory
the guest sees through the shared root) as the server account, and psql here connects
to it over the guest's network; the seconds that took are printed.

    sudo .venv/bin/python bench/guest_boot.py [--boots 5] [--roots hostfs,image] [--postgres]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from syncrep_lab import shutdown
from syncrep_lab.errors import UserError
from syncrep_lab.guests import accel, image, kernel
from syncrep_lab.guests.qemu import Guest, GuestConfig
from syncrep_lab.hosts.ssh import SshHost
from syncrep_lab.pg.installations import resolve
from syncrep_lab.runas import server_account


def start_postgres(guest: Guest) -> float:
    """initdb, postgres and a psql query from here; the seconds they took."""
    inst = resolve(None)
    bin_dir = str(inst.bin_dir)
    data = "/var/tmp/syncrep-lab/data"
    started = time.monotonic()
    with SshHost(guest.host_spec()) as host:
        host.sh('mkdir -p "$(dirname "$2")"'
                ' && "$1/initdb" -N -A trust -U postgres -D "$2" >/dev/null'
                ' && echo "host all all 10.215.0.0/16 trust" >> "$2/pg_hba.conf"',
                bin_dir, data, what="initdb in the guest", timeout=300)
        host.spawn_detached([f"{bin_dir}/postgres", "-D", data, "-p", "5432",
                             "-c", f"listen_addresses={guest.address}",
                             "-c", "unix_socket_directories=/tmp"],
                            "/var/tmp/syncrep-lab/postgres.log")
    psql = str(inst.program("psql"))
    deadline = time.monotonic() + 120
    while True:
        proc = subprocess.run([psql, "-h", guest.address, "-p", "5432", "-U", "postgres",
                               "-d", "postgres", "-Atc", "select version()"],
                              capture_output=True, text=True, timeout=30, check=False)
        if proc.returncode == 0:
            print(f"    psql: {proc.stdout.strip()[:60]}")
            return time.monotonic() - started
        if time.monotonic() > deadline:
            raise UserError(f"psql could not connect to the guest: {proc.stderr.strip()}")
        time.sleep(0.2)


def command_ms(guest: Guest, times: int = 10) -> float:
    """The median milliseconds of ``true`` run over SSH on a connection kept open: what
    every command the hosts machinery sends the guest costs."""
    took = []
    with SshHost(guest.host_spec()) as host:
        host.run(["true"])
        for _ in range(times):
            started = time.perf_counter()
            host.run(["true"])
            took.append((time.perf_counter() - started) * 1000)
    return statistics.median(took)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--boots", type=int, default=5, help="boots per root")
    parser.add_argument("--roots", default="hostfs,image")
    parser.add_argument("--vcpus", type=int, default=1)
    parser.add_argument("--memory", type=int, default=1024, help="MiB")
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    shutdown.install()  # SIGTERM or Ctrl-C: the guest is stopped and its namespace removed
    kern = kernel.fetch()
    roots = args.roots.split(",")
    img = image.build() if "image" in roots else None
    acc = accel.choose(kern)
    print(f"kernel {kern.release}, accelerator {acc.name} ({acc.reason})")
    user = server_account().name
    ready: dict[str, list[float]] = {r: [] for r in roots}
    for n in range(args.boots):
        for root in roots:
            cfg = GuestConfig(kernel=kern, root=root, image=img, vcpus=args.vcpus,
                              memory_mb=args.memory, user=user, accel=acc)
            with Guest(cfg) as guest:
                t = guest.times
                line = (f"boot {n + 1} {root:6}: root mounted {t.root_mounted or 0:5.2f} s, "
                        f"sshd {t.sshd_started or 0:5.2f} s, ready (ssh) "
                        f"{t.ssh_ready or 0:5.2f} s")
                assert t.ssh_ready is not None
                ready[root].append(t.ssh_ready)
                line += f", a command over SSH {command_ms(guest):.0f} ms"
                if args.postgres and root == "hostfs":
                    took = start_postgres(guest)
                    line += f", PostgreSQL up and queried from here in {took:.1f} s"
                elif args.postgres:
                    line += ", PostgreSQL: not in the image"
                print(line, flush=True)
    for root, values in ready.items():
        print(f"{root:6} ({acc.name}): boot-to-ready median {statistics.median(values):.2f} s, "
              f"{min(values):.2f} to {max(values):.2f} s over {len(values)} boots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
