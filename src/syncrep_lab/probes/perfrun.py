"""Running perf in the background for a probe: the checks before, the start, the stop.

Every perf-based probe (``perf stat``, the on-CPU and the scheduler
recordings) starts perf before pgbench and stops it with SIGINT after, as a
user at a terminal would with Ctrl-C; perf then writes its output and exits.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path


def perf_reason(max_paranoid: int, what: str) -> str | None:
    """Why perf cannot do ``what`` here (None: it can). Root always can; others
    need ``kernel.perf_event_paranoid`` at most ``max_paranoid``."""
    if shutil.which("perf") is None:
        return "perf is not installed (apt-get install linux-perf)"
    if os.geteuid() != 0:
        try:
            paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
        except (OSError, ValueError):
            paranoid = 3
        if paranoid > max_paranoid:
            return (f"{what} needs root or kernel.perf_event_paranoid <= {max_paranoid} "
                    f"(it is {paranoid}; sysctl kernel.perf_event_paranoid={max_paranoid})")
    return None


def excerpt(stderr: bytes, limit: int = 300) -> str:
    """What perf said, without its usage text and its notes on fields it ignores."""
    kept = []
    for line in stderr.decode(errors="replace").splitlines():
        line = line.strip()
        if line.startswith("Usage:"):
            break
        if line and not line.endswith("Ignoring."):
            kept.append(line)
    return " / ".join(kept)[:limit]


class PerfProcess:
    """One perf command in the background, stopped by SIGINT."""

    def __init__(self, argv: Sequence[str], name: str) -> None:
        self.argv = list(argv)
        self.name = name
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, settle: float = 0.15) -> None:
        """Start; raise if perf fails at once (it needs a moment to open its events,
        and what it misses then is not commits)."""
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(settle)
        if self.proc.poll() is not None and self.proc.returncode != 0:
            _, err = self.proc.communicate()
            self.proc = None
            raise RuntimeError(f"{self.name} exited at once: {excerpt(err)}")

    def stop(self, timeout: float = 30) -> bytes:
        """SIGINT, then wait; returns what perf wrote on stderr."""
        if self.proc is None:
            raise RuntimeError(f"{self.name} was not started")
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            # communicate, not wait: it drains stderr, which perf must not block on.
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise RuntimeError(f"{self.name} did not stop within {timeout:g} s") from None
        return err


def require_output(path: Path, name: str, stderr: bytes) -> None:
    """Interrupted, perf exits through the signal after writing a valid file;
    what matters is that the file is there."""
    if not path.is_file() or path.stat().st_size == 0:
        raise RuntimeError(f"{name} wrote nothing: {excerpt(stderr)}")
