"""Disk and network counters, read before and after a measured repeat: the seed's
"the disks and the network sit idle", measured rather than assumed.

- disks: ``/proc/diskstats`` of every whole device (``/sys/block``): I/Os completed,
  sectors (512 bytes, whatever the device's own sector size) and the milliseconds the
  device had I/O in flight (``io_ticks``: over the repeat's time, its busy share);
- network: ``/proc/net/dev`` of a network namespace (``/proc/PID/net/dev`` of a
  process inside it): bytes and packets each way per interface. Where each node lives
  in a namespace of its own, the primary's ``to-b`` is its link to standby b.

The same files are read on SSH hosts (hosts/machine.py) and parsed here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

SECTOR = 512  # /proc/diskstats counts sectors of 512 bytes on every device


@dataclass(frozen=True)
class DiskCounters:
    reads: int
    writes: int
    read_bytes: int
    write_bytes: int
    busy_ms: int  # io_ticks: time with at least one I/O in flight

    def since(self, before: DiskCounters) -> DiskCounters:
        """The growth since ``before``; a counter that went back (io_ticks wraps at 2³²
        ms, a device made again starts from 0) grew by nothing that can be told."""
        return DiskCounters(*(max(0, a - b) for a, b in zip(
            (self.reads, self.writes, self.read_bytes, self.write_bytes, self.busy_ms),
            (before.reads, before.writes, before.read_bytes, before.write_bytes,
             before.busy_ms), strict=True)))

    @property
    def idle(self) -> bool:
        return not (self.reads or self.writes or self.busy_ms)


@dataclass(frozen=True)
class NetCounters:
    rx_bytes: int
    rx_packets: int
    tx_bytes: int
    tx_packets: int

    def since(self, before: NetCounters) -> NetCounters:
        """The growth since ``before`` (an interface made again: nothing told)."""
        return NetCounters(*(max(0, a - b) for a, b in zip(
            (self.rx_bytes, self.rx_packets, self.tx_bytes, self.tx_packets),
            (before.rx_bytes, before.rx_packets, before.tx_bytes, before.tx_packets),
            strict=True)))


def parse_diskstats(text: str, devices: set[str]) -> dict[str, DiskCounters]:
    """The counters of ``devices`` (whole devices: partitions would count twice)."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) < 14 or f[2] not in devices:
            continue
        try:
            out[f[2]] = DiskCounters(int(f[3]), int(f[7]), int(f[5]) * SECTOR,
                                     int(f[9]) * SECTOR, int(f[12]))
        except ValueError:
            continue
    return out


def parse_net_dev(text: str) -> dict[str, NetCounters]:
    """Every interface of one namespace's ``/proc/net/dev``."""
    out = {}
    for line in text.splitlines()[2:]:
        name, sep, rest = line.partition(":")
        f = rest.split()
        if not sep or len(f) < 10:
            continue
        try:
            out[name.strip()] = NetCounters(int(f[0]), int(f[1]), int(f[8]), int(f[9]))
        except ValueError:
            continue
    return out


def disk_devices(names: Iterable[str]) -> set[str]:
    """Of ``/sys/block``'s whole block devices, those that can hold a server's files
    (not loop and ram disks, nor zram swap)."""
    return {n for n in names if not n.startswith(("loop", "ram", "zram"))}


def block_devices(root: Path = Path("/sys/block")) -> set[str]:
    """This machine's :func:`disk_devices`."""
    try:
        return disk_devices(os.listdir(root))
    except OSError:
        return set()


def disks_here() -> dict[str, DiskCounters]:
    try:
        text = Path("/proc/diskstats").read_text()
    except OSError:
        return {}
    return parse_diskstats(text, block_devices())


def network_of(pid: int | None = None) -> dict[str, NetCounters]:
    """The interfaces of ``pid``'s network namespace (this process's when None); {} once
    the process is gone."""
    try:
        return parse_net_dev(Path(f"/proc/{pid or 'self'}/net/dev").read_text())
    except OSError:
        return {}
