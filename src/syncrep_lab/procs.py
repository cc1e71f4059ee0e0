"""Processes as /proc tells them: is this pid still the process we mean (a pid alone can
be reused once its process has gone; a pid with the start time the kernel gave it,
``/proc/PID/stat`` field 22, names one process for ever), and CPU time, a process's and
the whole machine's."""

from __future__ import annotations

import os
from pathlib import Path

# Fields of /proc/PID/stat counted after the command name, from 0 (proc(5) numbers them
# from 1, the command name being 2: these are its numbers less 3).
STATE, PPID, UTIME, STIME, CUTIME, CSTIME, STARTTIME = 0, 1, 11, 12, 13, 14, 19


def read(path: str) -> str:
    """A file of /proc, whole (OSError when it cannot be read). A bare open and read: the
    process tracker reads a few files of every backend each poll during measured repeats,
    and ``Path.read_text`` takes five times as long (docs/benchmarks.md)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 8192):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode(errors="replace")


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (None: no such process). The
    name (field 2) may hold spaces and parentheses, so the split starts after its end."""
    try:
        return read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def parent(pid: int) -> int | None:
    fields = stat_fields(pid)
    return int(fields[PPID]) if fields else None


def started_at(pid: int) -> float | None:
    """When process ``pid`` started, in seconds since the epoch."""
    fields = stat_fields(pid)
    if fields is None:
        return None
    return _boot_time() + int(fields[STARTTIME]) / _CLK_TCK


def _boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return 0.0


def start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (None when there is no such process)."""
    fields = stat_fields(pid)
    return fields[STARTTIME] if fields else None


def is_running(pid: int, start: str | None) -> bool:
    """Whether the process that had ``pid`` and ``start`` still runs. A zombie (or a
    dead process not yet gone from /proc) does not: it has ended, only its parent has not
    reaped it, and a process re-parented to an init that never reaps stays so for ever."""
    fields = stat_fields(pid)
    if fields is None:
        return False
    return fields[STATE] not in ("Z", "X", "x") and (start is None or fields[STARTTIME] == start)


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (see :func:`is_running` for what does not count)."""
    return is_running(pid, None)


def children(pid: int) -> list[int]:
    """The children of ``pid``, born of any of its threads: the kernel's per-thread
    ``children`` lists, or on kernels without them (no CONFIG_PROC_CHILDREN) a scan of
    /proc for that parent.

    Paths as strings, not pathlib's: a Path interns each part of its name (3.11), and the
    pids and thread ids, interned and freed at every poll, each used up a slot of the
    interpreter's table of interned strings until it was remade twice as large (0.9 MiB
    more, once, after minutes: docs/benchmarks.md, "observe --serve soaked")."""
    if os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children"):
        found: set[int] = set()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return []
        for tid in tids:
            try:
                found.update(int(x) for x in read(f"/proc/{pid}/task/{tid}/children").split())
            except (OSError, ValueError):
                continue
        return sorted(found)
    return sorted(int(entry) for entry in os.listdir("/proc")
                  if entry.isdigit() and parent(int(entry)) == pid)


def machine_steal_seconds() -> float:
    """CPU time the hypervisor gave to other guests while this one wanted it, since boot."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()
    return int(fields[8]) / _CLK_TCK if len(fields) > 8 else 0.0


def table() -> dict[int, tuple[int, str, float]]:
    """pid -> (parent pid, start time, CPU seconds) of every process there is now."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = stat_fields(int(entry))
        if fields is None:
            continue
        out[int(entry)] = (int(fields[PPID]), fields[STARTTIME],
                           (int(fields[UTIME]) + int(fields[STIME])) / _CLK_TCK)
    return out


_CLK_TCK = os.sysconf("SC_CLK_TCK")
