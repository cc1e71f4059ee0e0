"""The block device under each watched server's WAL, and its counters per slice
(``/proc/diskstats``): a slow standby's disk, busy or not, beside its walreceiver's time
in a sync.

A server's WAL is ``pg_wal`` in its ``data_directory`` (a symlink where initdb -X or a
DBA moved it): its file system's device number names the device (``/sys/dev/block``),
a partition counted as its whole disk. Only servers whose processes are on this machine
are read (the observer's backend is one of their children: observe/cpu.py); a WAL on
tmpfs or another device-less file system has no disk to read, and that is said.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from syncrep_lab.readers.io_counters import DiskCounters, parse_diskstats

SYS_BLOCK = Path("/sys/dev/block")


@dataclass(frozen=True)
class WalDisk:
    """The device a node's WAL is on, or why none (``device`` None)."""

    node: str
    device: str | None
    why: str | None = None


def wal_disk(node: str, data_directory: str, sys_block: Path = SYS_BLOCK) -> WalDisk:
    """The whole block device under ``data_directory``'s WAL."""
    wal = Path(data_directory) / "pg_wal"
    try:
        st = os.stat(wal if wal.exists() else data_directory)
    except OSError as exc:
        return WalDisk(node, None, f"its WAL ({wal}) could not be read: {exc.strerror}")
    numbers = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    if os.major(st.st_dev) == 0:
        return WalDisk(node, None, f"its WAL is on a file system with no block device "
                                   f"(tmpfs or alike, device {numbers})")
    here = sys_block / numbers
    try:
        resolved = here.resolve(strict=True)
    except OSError:
        return WalDisk(node, None, f"no block device {numbers} in {sys_block}")
    whole = resolved.parent if (resolved / "partition").exists() else resolved
    return WalDisk(node, whole.name)


def read(devices: set[str]) -> dict[str, DiskCounters]:
    """The counters of ``devices`` now ({} where /proc/diskstats cannot be read)."""
    if not devices:
        return {}
    try:
        return parse_diskstats(Path("/proc/diskstats").read_text(), devices)
    except OSError:
        return {}
