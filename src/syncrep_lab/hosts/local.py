"""This machine behind the interface of an SSH host (hosts/ssh.py), for the probes
written for hosts that a node here can use as they are: the lock probe's check, its
bpftrace under the watchdog (probes/host_anatomy.HostTracer) and its files.

Commands run as this process's own user, here. A command started with ``start`` runs in
a session of its own (a Ctrl-C at the terminal is the tool's to handle, not the
command's) and keeps its stdin on a pipe from this process: when the tool ends, however
it ends (a ``kill -9`` included), the pipe closes and a watchdog that reads it ends what
it runs, as it does when an SSH channel closes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import IO

from syncrep_lab.errors import UserError
from syncrep_lab.hosts.ssh import HostSpec, RemoteProcess, Result, SshHost, _Lines

NAME = "this machine"


class LocalHost(SshHost):
    """The commands and files of an :class:`SshHost`, run and read here."""

    def __new__(cls) -> LocalHost:  # never one of the run's kept SSH connections
        return object.__new__(cls)

    def __init__(self) -> None:
        self._setup(HostSpec(name=NAME, address="localhost",
                             user=os.environ.get("USER", "root")), kept=False)

    def connect(self) -> None:
        pass

    def run(self, argv: list[str], *, timeout: float = 60, check: bool = True,
            input: str | None = None) -> Result:
        if not argv:
            raise ValueError("run() needs a command")
        try:
            done = subprocess.run(argv, input=input, capture_output=True, text=True,
                                  errors="replace", timeout=timeout, check=False,
                                  stdin=None if input is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise UserError(f"`{' '.join(argv)}` did not finish within {timeout:g} s here",
                            "check this machine's load") from None
        except OSError as exc:
            raise UserError(f"cannot run {argv[0]} here: {exc.strerror}",
                            f"install {argv[0]}") from None
        result = Result(done.returncode, done.stdout, done.stderr)
        if check and result.returncode != 0:
            raise self._failed(f"`{' '.join(argv)}`", argv[0], result)
        return result

    def start(self, argv: list[str], *, keep_stdin: bool = False) -> RemoteProcess:
        if not argv:
            raise ValueError("start() needs a command")
        return LocalProcess(argv, keep_stdin=keep_stdin)

    def put_bytes(self, path: str, data: bytes, mode: int = 0o600) -> None:
        target = Path(path)
        temporary = target.with_name(f"{target.name}.tmp-{os.getpid()}")
        try:
            temporary.write_bytes(data)
            temporary.chmod(mode)
            temporary.replace(target)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            raise UserError(f"cannot write {path}: {exc.strerror}",
                            "check the folder and its space") from None

    def get_bytes(self, path: str, limit: int = 64 << 20) -> bytes:
        try:
            with open(path, "rb") as source:
                data = source.read(limit + 1)
        except OSError as exc:
            raise UserError(f"cannot read {path}: {exc.strerror}",
                            "check the path") from None
        if len(data) > limit:
            raise UserError(f"{path} is larger than {limit} bytes",
                            "read a smaller file, or raise the limit")
        return data

    def close(self) -> None:
        pass


class LocalProcess(RemoteProcess):
    """A command running here, read as a :class:`RemoteProcess` is: its lines as they
    come, ``send`` to its stdin, ``close`` its stdin without a signal."""

    def __init__(self, argv: list[str], *, keep_stdin: bool = False) -> None:
        self.args = " ".join(argv)
        self.host_name = NAME
        self.stdout, self.stderr = _Lines(), _Lines()
        self.returncode = None
        self._lock = threading.Lock()
        self._popen = subprocess.Popen(
            argv, stdin=subprocess.PIPE if keep_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
            start_new_session=True)
        self.pid = self._popen.pid
        self._readers = [threading.Thread(target=self._pump, args=(stream, lines),
                                          daemon=True)
                         for stream, lines in ((self._popen.stdout, self.stdout),
                                               (self._popen.stderr, self.stderr))]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _pump(stream: IO[str] | None, lines: _Lines) -> None:
        if stream is not None:
            for line in stream:
                lines.put(line)
        lines.put(None)

    def wait(self, timeout: float | None = None) -> int:
        self.returncode = self._popen.wait(timeout)
        return self.returncode

    def poll(self) -> int | None:
        self.returncode = self._popen.poll()
        return self.returncode

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._popen.kill()

    def send(self, text: str) -> None:
        stdin = self._popen.stdin
        if stdin is None:
            return
        with self._lock, contextlib.suppress(OSError, ValueError):
            stdin.write(text)
            stdin.flush()

    def close(self) -> None:
        stdin = self._popen.stdin
        if stdin is not None:
            with self._lock, contextlib.suppress(OSError, ValueError):
                stdin.close()
        # reaped once its stdin has ended it (the watchdog's last word comes first);
        # one that does not end so is ended, with its session
        try:
            self._popen.wait(timeout=30)
        except subprocess.TimeoutExpired:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._popen.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._popen.wait(timeout=5)
                    break
        for stream in (self._popen.stdout, self._popen.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
