"""What the machine is, stored with every run so that two runs can be judged
comparable (or not) later (analysis/compare.comparable): kernel, CPU model and count,
memory, Python, tool."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from syncrep_lab import __version__
from syncrep_lab.placement.cpus import numa_nodes


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_metadata() -> dict[str, Any]:
    uname = os.uname()
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        mem = 0
    try:
        affinity = len(os.sched_getaffinity(0))
    except OSError:
        affinity = os.cpu_count() or 0
    return {
        "hostname": uname.nodename,
        "kernel": f"{uname.sysname} {uname.release}",
        "kernel_version": uname.version,
        "arch": uname.machine,
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "memory_bytes": mem,
        "python": platform.python_version(),
        "syncrep_lab": __version__,
        "euid": os.geteuid(),
        "numa_nodes": len(numa_nodes()),
    }
