"""What an SSH host is (its kernel, CPUs, memory, netem), and a reading of its clock
against this machine's, its CPUs' busy time, its disks and its network."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from syncrep_lab.errors import UserError
from syncrep_lab.hosts.ssh import SshHost
from syncrep_lab.readers.io_counters import (
    DiskCounters,
    NetCounters,
    disk_devices,
    parse_diskstats,
    parse_net_dev,
)

_FACTS_SH = r"""
echo "hostname=$(uname -n)"
echo "kernel=$(uname -sr)"
echo "arch=$(uname -m)"
echo "cpus=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"
echo "cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)"
echo "numa_nodes=$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)"
echo "memory_kb=$(sed -n 's/^MemTotal:[[:space:]]*\([0-9]*\).*/\1/p' /proc/meminfo 2>/dev/null)"
if grep -q '^sch_netem ' /proc/modules 2>/dev/null ||
   [ -n "$(find "/lib/modules/$(uname -r)" -name 'sch_netem*' 2>/dev/null | head -n 1)" ]; then
  echo netem=yes
else
  echo netem=no
fi
"""


def machine_facts(host: SshHost) -> dict[str, Any]:
    """What the host is, as the run's ``machine`` says of this one: its name, kernel,
    architecture, CPUs (usable by the account), CPU model, NUMA nodes, memory, and
    whether its kernel has netem."""
    out = host.sh(_FACTS_SH, what="reading what the host is").stdout
    facts: dict[str, Any] = {}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        facts[key.strip()] = value.strip()
    for key in ("cpus", "numa_nodes", "memory_kb"):
        facts[key] = int(facts[key]) if str(facts.get(key, "")).isdigit() else None
    facts["netem"] = facts.get("netem") == "yes"
    return facts


# One round trip: the host's clock (seconds since the epoch, to the nanosecond), then its
# CPUs' time since boot (/proc/stat's first line, in clock ticks) and its CPU count.
_CLOCK_SH = "date +%s.%N; head -n 1 /proc/stat; grep -c '^cpu[0-9]' /proc/stat"
# the disks and the host's network (readers/io_counters.py), apart from the clock: their
# output would lengthen the round trip the clock's offset is read in
_IO_SH = ("ls /sys/block; echo @@; cat /proc/diskstats; echo @@; cat /proc/net/dev; "
          # each NUMA node's allocation counters, a line a node: "N numa_hit 12 ..."
          "echo @@; for n in /sys/devices/system/node/node[0-9]*; do "
          '[ -r "$n/numastat" ] && echo "${n##*node}" $(cat "$n/numastat"); done; true')
NUMASTAT = ("numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node",
            "other_node")  # /sys/devices/system/node/nodeN/numastat, in pages


@dataclass(frozen=True)
class HostReading:
    offset_s: float  # the host's clock minus this machine's
    uncertainty_s: float  # half the round trip it was read in
    busy_ticks: int  # CPU time spent not idle, over every CPU, since boot
    total_ticks: int
    cpus: int
    disks: dict[str, DiskCounters] = field(default_factory=dict)
    network: dict[str, NetCounters] = field(default_factory=dict)
    io_at: float = 0.0  # when the disks and network were read (time.monotonic())
    # time its hypervisor ran something else while a vCPU of it wanted a CPU (0 on bare
    # metal, and on a guest whose kernel has no steal clock: a TCG guest's)
    steal_ticks: int = 0
    # NUMA node -> its numastat counters (NUMASTAT), since boot
    numa: dict[int, dict[str, int]] = field(default_factory=dict)


def parse_node_numastat(text: str) -> dict[int, dict[str, int]]:
    """The lines _IO_SH prints of each node's numastat.

    >>> parse_node_numastat("0 numa_hit 10 numa_miss 0 interleave_hit 3\\n1 numa_hit 4\\n")
    {0: {'numa_hit': 10, 'numa_miss': 0, 'interleave_hit': 3}, 1: {'numa_hit': 4}}
    """
    out: dict[int, dict[str, int]] = {}
    for line in text.splitlines():
        node, *pairs = line.split() or [""]
        if not node.isdigit() or len(pairs) % 2:
            continue
        out[int(node)] = {k: int(v) for k, v in zip(pairs[::2], pairs[1::2], strict=True)
                          if v.isdigit()}
    return out


def read_host(host: SshHost, tries: int = 5) -> HostReading:
    """The host's clock against this machine's, and its CPU counters. The clock is read
    ``tries`` times; the reading of the shortest round trip is kept (its midpoint is
    then closest to the moment the host read its clock), and half that round trip is its
    uncertainty."""
    best: tuple[float, float, str] | None = None
    for _ in range(tries):
        sent = time.time()
        out = host.sh(_CLOCK_SH, what="reading the host's clock and CPUs").stdout
        got = time.time()
        if best is None or got - sent < best[0]:
            best = (got - sent, (sent + got) / 2, out)
    assert best is not None
    rtt, middle, out = best
    lines = out.splitlines()
    try:
        clock = float(lines[0])
        ticks = [int(v) for v in lines[1].split()[1:]]
        cpus = int(lines[2])
    except (IndexError, ValueError):
        raise UserError(f"{host.spec.name} gave no clock or CPU counters ({out[:200]!r})",
                        "the host needs date with %N and Linux /proc/stat") from None
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle, iowait
    total = sum(ticks[:8])  # user .. steal; guest time is already counted in user
    io = host.sh(_IO_SH, what="reading the host's disks and network").stdout
    io_at = time.monotonic()
    parts = io.split("@@\n")
    disks = net = {}
    if len(parts) >= 3:
        disks = parse_diskstats(parts[1], disk_devices(parts[0].split()))
        net = parse_net_dev(parts[2])
    numa = parse_node_numastat(parts[3]) if len(parts) >= 4 else {}
    steal = ticks[7] if len(ticks) > 7 else 0
    return HostReading(clock - middle, rtt / 2, total - idle, total, cpus, disks, net,
                       io_at, steal, numa)


def steal_cpus(before: HostReading, after: HostReading) -> float | None:
    """CPUs' worth of time the host's hypervisor took from it between two readings."""
    elapsed = (after.total_ticks - before.total_ticks) / max(1, after.cpus)
    if elapsed <= 0:
        return None
    return (after.steal_ticks - before.steal_ticks) / elapsed


def busy_cpus(before: HostReading, after: HostReading) -> float | None:
    """CPUs the host kept busy between two readings, on average (of ``after.cpus``)."""
    elapsed = (after.total_ticks - before.total_ticks) / max(1, after.cpus)
    if elapsed <= 0:
        return None
    return (after.busy_ticks - before.busy_ticks) / elapsed
