"""Is this pid still the process we mean? A pid alone can be reused once its process
has gone; a pid with the start time the kernel gave it (``/proc/PID/stat``, field 22,
in clock ticks since boot) names one process for ever."""

from __future__ import annotations

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
