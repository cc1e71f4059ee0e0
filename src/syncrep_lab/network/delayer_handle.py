"""The parent's side of a delay line (the :mod:`.delayer` program): starting one inside its
namespace, talking to it over its control pipe (ready, set, stats), stopping it; the registry
of the delay lines this process started; and the kernel's view of the NFQUEUE queue one
reads.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from syncrep_lab.errors import UserError
from syncrep_lab.network.commands import exec_prefix
from syncrep_lab.network.links import LinkProfile
from syncrep_lab.network.plan import End

DELAYER_MODULE = "syncrep_lab.network.delayer"


class DelayerHandle:
    """A delayer this process started, with its control pipe."""

    def __init__(self, end: End, profile: LinkProfile) -> None:
        self.end = end
        self.profile = profile
        env = dict(os.environ)
        src = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        cmd = [
            *exec_prefix(end.namespace), sys.executable, "-m", DELAYER_MODULE,
            "--queue", str(end.index), *_delayer_args(profile), "--parent", str(os.getpid()),
            "--tag", f"{end.namespace}/{end.interface}"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, bufsize=0,
                                     start_new_session=True)
        self.buf = b""
        self.ready = False
        self.lock = threading.Lock()  # one question at a time (a fault thread, a probe)

    @property
    def where(self) -> str:
        return f"{self.end.namespace}/{self.end.interface}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _line(self, deadline: float) -> str | None:
        """The next line on its stdout; None on end of file or when the time is up."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode(errors="replace")

    def _failure(self, what: str) -> UserError:
        self.stop(1.0)
        detail = ""
        if self.proc.stderr is not None:
            with contextlib.suppress(OSError, ValueError):
                os.set_blocking(self.proc.stderr.fileno(), False)
                detail = (self.proc.stderr.read() or b"").decode(errors="replace").strip()
        detail = detail.splitlines()[-1] if detail else f"exit status {self.proc.returncode}"
        return UserError(f"the delay line for {self.where} {what}: {detail}",
                         "check that NFQUEUE works in network namespaces on this kernel, and "
                         "remove leftovers with `syncrep-lab clean`")

    def wait_ready(self, deadline: float) -> None:
        line = self._line(deadline)
        if line != "ready":
            raise self._failure("did not start" if line is None else f"said {line!r}")
        self.ready = True

    def ask(self, command: str, timeout: float = 5.0) -> str:
        assert self.proc.stdin is not None
        with self.lock:
            try:
                self.proc.stdin.write(command.encode() + b"\n")
            except (BrokenPipeError, ValueError) as exc:
                raise self._failure("is gone") from exc
            answer = self._line(time.monotonic() + timeout)
        if answer is None:
            raise self._failure(f"did not answer {command.split()[0]!r}")
        return answer

    def set(self, profile: LinkProfile) -> None:
        answer = self.ask("set " + " ".join(_delayer_values(profile)))
        if answer != "ok":
            raise UserError(f"the delay line for {self.where} refused the new profile: "
                            f"{answer}", "check the link's profile")
        self.profile = profile

    def stats(self) -> dict[str, Any] | None:
        if not self.alive():
            return None
        try:
            data = json.loads(self.ask("stats", 2.0))
        except (UserError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def terminate(self) -> None:
        """Ask it to stop (it releases the packets it holds, then exits)."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()

    def stop(self, timeout: float = 3.0) -> None:
        self.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(2.0)
        self.close()

    def close(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


DELAYERS: dict[tuple[str, str], DelayerHandle] = {}  # (namespace, interface) -> handle


def _delayer_values(p: LinkProfile) -> list[str]:
    return [f"{p.delay_ms:g}", f"{p.jitter_ms:g}", f"{p.loss_pct:g}"]


def _delayer_args(p: LinkProfile) -> list[str]:
    delay, jitter, loss = _delayer_values(p)
    return ["--delay-ms", delay, "--jitter-ms", jitter, "--loss-pct", loss]


def kernel_queue(pid: int, queue: int) -> dict[str, int] | None:
    """The kernel's view of a bound NFQUEUE queue, read through the delayer's /proc."""
    try:
        lines = Path(f"/proc/{pid}/net/netfilter/nfnetlink_queue").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) >= 8 and fields[0] == str(queue):
            return {"held": int(fields[2]), "dropped_queue_full": int(fields[5]),
                    "dropped_user": int(fields[6]), "packets": int(fields[7])}
    return None


def reap_children() -> None:
    """Forget delay lines of ours that have exited (one that never got ready is kept, so that
    waiting for it reports why it failed)."""
    for key, handle in list(DELAYERS.items()):
        if handle.ready and handle.proc.poll() is not None:
            handle.close()
            del DELAYERS[key]
