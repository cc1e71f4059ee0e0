"""Processes as /proc tells them: is this pid still the process we mean (a pid alone can
be reused once its process has gone; a pid with the start time the kernel gave it,
``/proc/PID/stat`` field 22, names one process for ever), and CPU time, a process's and
the whole machine's."""

from __future__ import annotations

import os
from pathlib import Path


def start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (None when there is no such process)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its end
    return stat.rsplit(")", 1)[1].split()[19]


def is_running(pid: int, start: str | None) -> bool:
    """Whether the process that had ``pid`` and ``start`` still runs (not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0] not in ("Z", "X", "x") and (start is None or fields[19] == start)


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
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(entry)] = (int(fields[1]), fields[19],
                           (int(fields[11]) + int(fields[12])) / _CLK_TCK)
    return out


_CLK_TCK = os.sysconf("SC_CLK_TCK")
