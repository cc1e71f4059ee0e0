"""perf on an SSH host: whether the account may run it (as root, or with sudo -n),
and perf stat and perf record runs there, started detached and read back here."""

from __future__ import annotations

import posixpath
import time
from dataclasses import dataclass

from syncrep_lab.hosts.ssh import SshHost

_PERF_SH = r"""
say() { echo "no: $*"; exit 0; }
prefix=
if [ "$(id -u)" != 0 ]; then
  [ "$1" = sudo ] || say "the account is not root and the host's spec has no sudo = true"
  prefix="sudo -n"
fi
command -v perf >/dev/null 2>&1 || say "perf is not installed (apt-get install linux-perf)"
$prefix perf --version >/dev/null 2>&1 || say "the account may not run perf with sudo -n"
events=$($prefix perf list 'syscalls:sys_enter_*' 2>/dev/null |
         sed -n 's/^ *syscalls:sys_enter_\([a-z0-9_]*\).*/\1/p')
[ -n "$events" ] || say "the kernel exposes no syscall tracepoints (mount tracefs there)"
echo "ok $prefix"
echo "$events"
"""


@dataclass(frozen=True)
class PerfAccess:
    prefix: list[str]  # [] (root) or ["sudo", "-n"]
    syscalls: list[str]  # the syscalls whose entry tracepoints the host has


def perf_access(host: SshHost) -> PerfAccess | str:
    """How perf runs on the host, or why it cannot (the probe is then skipped with it)."""
    out = host.sh(_PERF_SH, "sudo" if host.spec.sudo else "", what="checking perf").stdout
    lines = out.splitlines()
    if not lines or not lines[0].startswith("ok"):
        return (lines[0].removeprefix("no: ") if lines else "perf could not be checked")
    return PerfAccess(lines[0].split()[1:], [ln.strip() for ln in lines[1:] if ln.strip()])


class RemotePerfRun:
    """One perf command on a host, as the local probes run theirs (probes/perfrun.py):
    started detached before the repeat, stopped with SIGINT after it (sudo passes the
    signal on), its files below ``base`` removed once read."""

    def __init__(self, host: SshHost, access: PerfAccess, base: str, what: str,
                 args: list[str]) -> None:
        self.host, self.access, self.what = host, access, what
        self.log = f"{base}.{what}.log"
        self.argv = [*access.prefix, "perf", *args]
        self.files = [self.log]
        self.pid: int | None = None

    def start(self) -> None:
        self.pid = self.host.spawn_detached(self.argv, self.log,
                                            cwd=posixpath.dirname(self.log))
        time.sleep(0.3)  # perf opens its events; one that fails at once exits
        if not self.host.alive(self.pid):
            said = self.host.run(["cat", "--", self.log], timeout=30, check=False).stdout
            raise RuntimeError(f"perf {self.what} on {self.host.spec.name} exited at once: "
                               f"{said.strip()[-300:]}")

    def interrupt(self) -> None:
        """SIGINT, and wait until perf has written its output and exited."""
        if self.pid is None:
            raise RuntimeError(f"perf {self.what} was not started")
        self.host.kill(self.pid, 2)
        if not self.host.wait_exit(self.pid, 60):
            self.host.kill(self.pid, 9)
            raise RuntimeError(f"perf {self.what} on {self.host.spec.name} did not stop "
                               "within 60 s")

    def remove(self) -> None:
        self.host.run(["rm", "-f", "--", *self.files], timeout=30, check=False)


class RemotePerfStat(RemotePerfRun):
    """``perf stat --per-thread`` of a node's processes on its host."""

    def __init__(self, host: SshHost, access: PerfAccess, base: str, events: list[str],
                 pids: list[int]) -> None:
        """``base``: where its files go, ``BASE.perf-stat.csv`` and ``.log``."""
        self.out = f"{base}.perf-stat.csv"
        super().__init__(host, access, base, "perf-stat",
                         ["stat", "--per-thread", "-x", ",", "-o", self.out,
                          "-e", ",".join(events), "-p", ",".join(map(str, pids))])
        self.files.append(self.out)

    def stop(self) -> str:
        """perf's output (``perf stat -x ,``); its files removed."""
        try:
            self.interrupt()
            return self.host.get_bytes(self.out).decode(errors="replace")
        finally:
            self.remove()


class RemoteRecording(RemotePerfRun):
    """``perf record -a`` of every CPU of a host (``args``: what it samples or traces),
    ``perf script`` run there on it with ``script_args``; ``what`` names its files
    (``BASE.WHAT.data``)."""

    def __init__(self, host: SshHost, access: PerfAccess, base: str, what: str,
                 args: list[str], seconds: float, script_args: list[str]) -> None:
        self.data, self.script = f"{base}.{what}.data", f"{base}.{what}.txt"
        self.script_log = f"{base}.{what}.script.log"
        self.script_args = script_args
        super().__init__(host, access, base, what,
                         ["record", "-a", *args, "-o", self.data, "--", "sleep",
                          f"{seconds:g}"])
        self.files += [self.data, self.script, self.script_log]

    def stop(self, limit: int = 1 << 30) -> bytes:
        """The recording as ``perf script`` prints it; its files removed. A recording
        that prints nothing is an error that says what perf record and perf script said
        (a whole host's CPUs over a repeat always have samples: an empty text is a
        recording cut short or unreadable, never an idle host)."""
        try:
            self.interrupt()
            prefix = " ".join(self.access.prefix)
            done = self.host.sh(f'data="$1" text="$2" log="$3"; shift 3; '
                                f'{prefix} perf script -i "$data" "$@" > "$text" 2> "$log"',
                                self.data, self.script, self.script_log, *self.script_args,
                                what="perf script", timeout=600, check=False)
            text = self.host.get_bytes(self.script, limit) if done.returncode == 0 else b""
            if not text.strip():
                raise RuntimeError(
                    f"perf {self.what} on {self.host.spec.name} gave no samples (perf script "
                    f"exited {done.returncode}): perf script said "
                    f"{self._tail(self.script_log)!r}; perf record said {self._tail(self.log)!r}")
            return text
        finally:
            self.remove()

    def _tail(self, path: str) -> str:
        said = self.host.run(["tail", "-c", "400", "--", path], timeout=30, check=False)
        return " ".join(said.stdout.split()) or "nothing"
