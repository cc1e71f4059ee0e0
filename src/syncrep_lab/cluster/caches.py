"""The page cache dropped before a cluster is built (``[run] drop_caches``), here and on
the hosts its nodes run on: what the NUMA article did between policies, so that a
policy places the pages its cluster reads rather than finding them where the last one
left them. Dirty pages are written first (``sync``); then ``3`` to
``/proc/sys/vm/drop_caches`` frees the clean page cache, dentries and inodes. It needs
root here and root or ``sudo`` on a host; it slows whatever else runs on those machines
until their caches are warm again, so it is off unless asked for.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterable

from syncrep_lab.errors import UserError
from syncrep_lab.hosts.ssh import HostSpec, SshHost

DROP = "/proc/sys/vm/drop_caches"
# sync, then drop, as root or through sudo -n (a host's account); prints the cache left
_DROP_SH = r"""
sync
if [ "$(id -u)" = 0 ]; then echo 3 > /proc/sys/vm/drop_caches || exit 3
else echo 3 | sudo -n tee /proc/sys/vm/drop_caches >/dev/null || exit 4; fi
awk '/^Cached:/ { print $2 }' /proc/meminfo
"""


def cached_kb() -> int:
    """This machine's page cache, in kB (/proc/meminfo's Cached)."""
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("Cached:"):
                return int(line.split()[1])
    return 0


def check_here() -> None:
    """Refused unless this process may drop this machine's caches."""
    if os.geteuid() != 0:
        raise UserError("[run] drop_caches needs root here (it writes " + DROP + ")",
                        "run syncrep-lab as root, or leave drop_caches out")


def drop(hosts: Iterable[HostSpec]) -> dict[str, float]:
    """Drop the caches here and on ``hosts``; the seconds each took, by host ("here"
    for this machine)."""
    took: dict[str, float] = {}
    started = time.monotonic()
    check_here()
    try:
        subprocess.run(["sync"], check=False, timeout=600)
    except subprocess.TimeoutExpired:
        raise UserError("sync did not finish within 600 s here",
                        "see what writes so much on this machine; or leave drop_caches "
                        "out") from None
    try:
        with open(DROP, "w") as knob:
            knob.write("3\n")
    except OSError as exc:
        raise UserError(f"cannot write {DROP}: {exc.strerror}",
                        "run as root on a kernel that lets it, or leave drop_caches "
                        "out") from None
    took["here"] = time.monotonic() - started
    for spec in hosts:
        started = time.monotonic()
        with SshHost(spec) as host:
            done = host.sh(_DROP_SH, what="dropping the page cache", check=False,
                           timeout=600)
        if done.returncode != 0:
            raise UserError(f"cannot drop the page cache on {spec.name} (exit "
                            f"{done.returncode}: {done.stderr.strip()[:200]})",
                            f"give {spec.user} root there, or sudo for `tee {DROP}`; or "
                            "leave drop_caches out")
        took[spec.name] = time.monotonic() - started
    return took
