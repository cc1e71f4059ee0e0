"""The shared memory a postmaster killed with SIGKILL leaves behind, removed with its data dir.

A postmaster that exits (any shutdown mode, ``immediate`` too) removes its shared
memory itself. One that is killed cannot: its System V segment (a 56-byte header since
PostgreSQL 9.3, the rest being anonymous memory) and its dynamic shared memory control
segment, a file ``/dev/shm/PostgreSQL.<handle>`` of some 70 KB to 1 MB, stay until the
machine restarts. PostgreSQL removes them when a postmaster starts again in the same data
dir; a cluster that is removed instead (``clean`` after its servers were killed, a second
Ctrl-C, a run's cluster whose postmaster the OOM killer took) never gets that start. On
the machine this tool was built on, 158 such files held 160 MB of RAM after a day of
tests.

So before a data dir is removed, :func:`release` does what that start would: the
postmaster.pid a killed postmaster leaves names its System V segment (line 7: key and
id); where no process is attached to it any more, its header (``PGShmemHeader``) says
whose it is and which control segment was its. Only a segment whose header carries
PostgreSQL's magic number and the data dir's device and inode is touched, and only the
control segment it names (the segments the control segment lists, made for parallel
queries and the like, are not read: their layout changes between versions, and a
benchmark's sessions seldom leave any).
"""

from __future__ import annotations

import ctypes
import os
import struct
from pathlib import Path

SHM_MAGIC = 679834894  # PGShmemMagic, the same from 9.6 to 18
# PGShmemHeader on a 64-bit machine: int32 magic, pid_t creatorPID, Size totalsize,
# Size freeoffset, dsm_handle dsm_control (then padding), void *index, dev_t device,
# ino_t inode
HEADER = struct.Struct("=iiQQI4xQQQ")
SHM_RDONLY = 0o10000
IPC_RMID = 0
DSM_DIR = Path("/dev/shm")


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)  # this process's own, as shutdown.py's prctl
    libc.shmat.restype = ctypes.c_void_p
    libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    libc.shmdt.argtypes = [ctypes.c_void_p]
    libc.shmctl.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    return libc


def segment_of(data_dir: Path) -> int | None:
    """The System V segment id postmaster.pid names (None: no file, or no segment)."""
    try:
        lines = (data_dir / "postmaster.pid").read_text().splitlines()
        return int(lines[6].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def attached(shmid: int, table: Path = Path("/proc/sysvipc/shm")) -> int | None:
    """How many processes are attached to segment ``shmid`` (None: there is none)."""
    try:
        rows = table.read_text().splitlines()[1:]
    except OSError:
        return None
    for row in rows:
        fields = row.split()
        if len(fields) > 6 and fields[1] == str(shmid):
            return int(fields[6])
    return None


def release(data_dir: Path) -> list[str]:
    """Remove the shared memory the killed postmaster of ``data_dir`` left, where nothing
    is attached to it any more and its header says it is that data dir's. Returns what
    was removed (``/dev/shm/...`` paths and ``SysV segment N``)."""
    shmid = segment_of(data_dir)
    if shmid is None or attached(shmid) != 0:
        return []  # a clean exit removed it, or a process still holds it
    try:
        where = os.stat(data_dir)
    except OSError:
        return []
    libc = _libc()
    address = libc.shmat(shmid, None, SHM_RDONLY)
    if address in (None, ctypes.c_void_p(-1).value):
        return []  # gone meanwhile, or not ours to read
    try:
        header = HEADER.unpack(ctypes.string_at(address, HEADER.size))
    finally:
        libc.shmdt(address)
    magic, _, _, _, control, _, device, inode = header
    if magic != SHM_MAGIC or (device, inode) != (where.st_dev, where.st_ino):
        return []  # another server's: the id was reused
    removed = []
    if control:
        dsm = DSM_DIR / f"PostgreSQL.{control}"
        try:
            dsm.unlink()
            removed.append(str(dsm))
        except OSError:
            pass  # gone already, or not this account's to remove
    if libc.shmctl(shmid, IPC_RMID, None) == 0:
        removed.append(f"SysV segment {shmid}")
    return removed
