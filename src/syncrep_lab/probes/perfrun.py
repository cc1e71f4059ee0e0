"""Running perf in the background for a probe: the checks before, the start, the stop.

Every perf-based probe (``perf stat``, the on-CPU and the scheduler
recordings) starts perf before pgbench and stops it with SIGINT after, as a
user at a terminal would with Ctrl-C; perf then writes its output and exits.

perf runs in a process group of its own, so that killing the group also ends
the ``sleep`` a recording runs as its workload, and with PR_SET_PDEATHSIG
(SIGTERM), so that it never outlives the tool, even one killed with SIGKILL:
on SIGTERM perf ends its workload itself. Its stderr is a file, not a pipe: with
the tool gone, a pipe would kill perf (SIGPIPE) before it ends its workload.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from syncrep_lab import shutdown


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


# How long perf is given to open its events before it is taken to have started.
SETTLE_SECONDS = 0.15


class PerfProcess:
    """One perf command in the background, stopped by SIGINT."""

    def __init__(self, argv: Sequence[str], name: str) -> None:
        self.argv = list(argv)
        self.name = name
        self.proc: subprocess.Popen[bytes] | None = None
        self.err: IO[bytes] | None = None
        self.interrupted = False

    def start(self, settle: float = SETTLE_SECONDS) -> None:
        """Start; raise if perf fails at once (it needs a moment to open its events,
        and what it misses then is not commits)."""
        self.launch()
        time.sleep(settle)
        self.confirm()

    def launch(self) -> None:
        """Start without waiting for perf to settle: several perfs launched together
        settle in one pause, then ``confirm`` each."""
        # stderr goes to an unnamed file, not a pipe: a perf whose reader is gone (the
        # tool killed) would die of SIGPIPE on its last message, before it ends its
        # workload, and a pipe inherited by that workload keeps reads waiting.
        self.err = tempfile.TemporaryFile()  # noqa: SIM115 - read and closed by _stderr
        self.interrupted = False
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self.err, process_group=0,
            preexec_fn=shutdown.die_with_parent(signal.SIGTERM))
        shutdown.track(self.proc)

    def confirm(self) -> None:
        """Raise if perf, launched a moment ago, has failed already."""
        if self.proc is None:
            raise RuntimeError(f"{self.name} was not started")
        if self.proc.poll() is not None and self.proc.returncode != 0:
            self.kill()
            err = self._stderr()
            self.proc = None
            raise RuntimeError(f"{self.name} exited at once: {excerpt(err)}")

    def _stderr(self) -> bytes:
        if self.err is None:
            return b""
        self.err.seek(0)
        text = self.err.read()
        self.err.close()
        self.err = None
        return text

    def interrupt(self) -> None:
        """SIGINT without waiting: several perfs told at once end together (each takes
        a few tenths of a second to close its events and write), then ``stop`` each."""
        if self.proc is not None and not self.interrupted and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            self.interrupted = True  # once: perf is closing, a second SIGINT adds nothing

    def stop(self, timeout: float = 30) -> bytes:
        """SIGINT (unless ``interrupt`` sent it), then wait; returns what perf wrote on
        stderr."""
        if self.proc is None:
            raise RuntimeError(f"{self.name} was not started")
        self.interrupt()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"{self.name} did not stop within {timeout:g} s") from None
        shutdown.untrack(self.proc)
        return self._stderr()

    def kill(self) -> None:
        """SIGKILL perf and its workload at once (an interrupted run, an overrun);
        waits at most a few seconds."""
        proc = self.proc
        if proc is None:
            return
        if proc.returncode is None:  # not reaped yet: the group is still perf's
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        shutdown.untrack(proc)


def require_output(path: Path, name: str, stderr: bytes) -> None:
    """Interrupted, perf exits through the signal after writing a valid file;
    what matters is that the file is there."""
    if not path.is_file() or path.stat().st_size == 0:
        raise RuntimeError(f"{name} wrote nothing: {excerpt(stderr)}")


class PerfRecording:
    """A probe that is one perf process (``self.perf``): started on its own (``start``),
    or launched with others and confirmed after one pause for them all (the session's
    probed repeat: three perfs, one pause instead of three)."""

    perf: PerfProcess

    def start(self) -> None:
        self.launch()
        time.sleep(SETTLE_SECONDS)
        self.confirm()

    def launch(self) -> None:
        self.perf.launch()

    def confirm(self) -> None:
        self.perf.confirm()
