"""pgbench on an SSH host (``topology.hosts = { client = "d" }``), as the seed ran it on a
machine of its own, so the client's CPU is not taken from the primary's.

pgbench runs in the cluster's folder on that host (below its ``data_root``), started
over the tool's SSH connection with no terminal: its per-second progress (stderr)
arrives line by line while it runs, and it ends by itself after ``-T`` seconds, or with
the channel (hosts/ssh.RemoteProcess). Its per-transaction logs are fetched when it
ends and parsed here, as a local pgbench's are: fetching a hundred thousand
transactions' log (3 MiB) took 29 to 48 ms, about what parsing it takes
(bench/remote_log_fetch.py), and needs nothing on the host but pgbench, where parsing
there would need Python and numpy. Its password is in a file there
(0600, PGPASSFILE), never on a command line. ``cluster down`` and ``clean`` remove the
folder, ending any pgbench still running in it (cluster/remote_node.remove_client).
"""

from __future__ import annotations

import contextlib
import posixpath
import re
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from syncrep_lab.cluster.remote_node import host_spec, password
from syncrep_lab.errors import UserError
from syncrep_lab.hosts import dirs, placement
from syncrep_lab.hosts.ssh import HostSpec, RemoteProcess, SshHost
from syncrep_lab.pg.conninfo import split_password
from syncrep_lab.readers.pgbench_log import ProgressSample
from syncrep_lab.run import sysbench
from syncrep_lab.run.workload import RunningClient, StallWatch

LOG_LIMIT = 1 << 30  # a per-transaction log larger than this is refused
# The host's clock just before the client starts (readers/timeline.py), its pid (for a
# teardown after the tool was killed), and its CPU (`times`: the children's line).
WRAPPER = ('cd -- "$1" || exit 2\nshift\ndate +%s.%N > started.at\n"$@" &\n'
           'echo $! > client.pid\nwait $!\ncode=$?\ntimes > times.out\nexit $code\n')
_TIMES = re.compile(r"(\d+)m([\d.]+)s")


def children_cpu_ms(times_output: str) -> tuple[float, float] | None:
    """User and system ms of a shell's children, from what its ``times`` printed (its
    own line, then its children's).

    >>> children_cpu_ms("0m0.001s 0m0.002s\\n0m1.500000s 0m0.250000s\\n")
    (1500.0, 250.0)
    """
    lines = [ln for ln in times_output.splitlines() if ln.strip()]
    found = _TIMES.findall(lines[1]) if len(lines) >= 2 else []
    if len(found) != 2:
        return None
    user, system = ((int(m) * 60 + float(s)) * 1000 for m, s in found)
    return round(user, 3), round(system, 3)


class RemoteRunningClient(RunningClient):
    """pgbench on a host; once it ends, its logs are fetched into ``log_prefix``'s folder
    here under the names pgbench gave them."""

    def __init__(self, host: SshHost, folder: str, proc: RemoteProcess, argv: list[str],
                 started: float, duration: int, extra_timeout: float,
                 log_prefix: Path | None, on_progress: Callable[[ProgressSample], None] | None,
                 watch: StallWatch | None, driver: str) -> None:
        self.ssh, self.folder = host, folder
        self.cpu_ms: tuple[float, float] | None = None  # user, system: once it has ended
        super().__init__(proc, argv, started, duration, extra_timeout, log_prefix,
                         on_progress, watch, driver)
        self.host = host.spec.name

    def _log_files(self) -> list[Path]:
        # read while the folder is there: its CPU, and its start on the host's clock
        with contextlib.suppress(UserError):
            self.cpu_ms = children_cpu_ms(self._text("times.out"))
        with contextlib.suppress(UserError, ValueError):
            self.launched_epoch = float(self._text("started.at"))
        if self.log_prefix is None:
            return []
        listing = self.ssh.sh('for f in "$1"/pgbench_log.*; do [ -f "$f" ] && echo "$f"; '
                               'done; exit 0', self.folder,
                               what="listing pgbench's logs").stdout.split()
        fetched = []
        for path in sorted(listing):
            local = self.log_prefix.parent / posixpath.basename(path).replace(
                "pgbench_log", self.log_prefix.name, 1)
            local.write_bytes(self.ssh.get_bytes(path, LOG_LIMIT))
            fetched.append(local)
        return fetched

    def placement(self) -> dict[str, str]:
        """What the host's kernel gave the client (run/placement_watch.py reads it mid-repeat);
        UserError while it has no pid yet or once it is gone."""
        pid = self._text("client.pid").strip()
        got = placement.placement_of(self.ssh, [int(pid)]) if pid.isdigit() else {}
        if not got:
            raise UserError(f"the client on {self.host} is not running", "")
        return next(iter(got.values()))

    def _text(self, name: str) -> str:
        return self.ssh.get_bytes(posixpath.join(self.folder, name)).decode(errors="replace")

    def close(self) -> None:
        """Remove this run's folder on the host and close the connection. A host that no
        longer answers keeps it: the cluster's teardown removes the client's whole
        folder, and this must not hide why the run is ending."""
        try:
            with contextlib.suppress(UserError):
                dirs.remove_dir(self.ssh, self.folder)
        finally:
            self.ssh.close()


def start_remote_client(
    client: dict[str, Any], cluster_dir: Path, script_text: str, conninfo: str, *,
    clients: int, threads: int, duration: int, synchronous_commit: str | None,
    driver: str = "pgbench", log_prefix: Path | None = None,
    on_progress: Callable[[ProgressSample], None] | None = None,
    extra_timeout: float = 60.0, watch: StallWatch | None = None,
    prefix: list[str] | None = None,
) -> RemoteRunningClient:
    """Start the client (pgbench, or sysbench with ``driver``) on its host (the
    manifest's ``client``) against ``conninfo``, running ``script_text``, under
    ``prefix`` (its placement there: taskset); a folder of its own for this run.
    sysbench is the one on the account's PATH there."""
    spec: HostSpec = host_spec(client["host"])
    conninfo, _ = split_password(conninfo)  # the password goes to a file there
    folder = posixpath.join(client["dir"], f"run-{secrets.token_hex(4)}")
    host = SshHost(spec)
    try:
        host.run(["mkdir", "-p", "-m", "0700", folder], timeout=30)
        passfile = posixpath.join(folder, "pgpass")
        host.put_text(passfile, f"*:*:*:postgres:{password(cluster_dir) or ''}\n", 0o600)
        env = {"PGPASSFILE": passfile}
        if driver == "sysbench":
            host.put_text(posixpath.join(folder, "workload.lua"), script_text, 0o600)
            argv, session = sysbench.command("sysbench", "workload.lua", conninfo,
                                             clients=clients, duration=duration,
                                             synchronous_commit=synchronous_commit)
            env |= session
            log_prefix = None  # sysbench writes no per-transaction log
        else:
            host.put_text(posixpath.join(folder, "workload.sql"), script_text, 0o600)
            pgbench = posixpath.join(spec.bin_dir, "pgbench") if spec.bin_dir else "pgbench"
            argv = [pgbench, "-M", "prepared", "-n", "-P", "1", "-c", str(clients),
                    "-j", str(threads), "-T", str(duration), "-f", "workload.sql"]
            if log_prefix is not None:
                argv += ["-l", "--log-prefix=pgbench_log"]
            argv.append(conninfo)
            if synchronous_commit is not None:
                env["PGOPTIONS"] = f"-c synchronous_commit={synchronous_commit}"
        # its pid in a file, so that a teardown after the tool was killed ends it; its
        # CPU there from the shell that waited for it (`times`: the children's line)
        command = ["sh", "-c", WRAPPER, "sh", folder, "env",
                   *(f"{k}={v}" for k, v in env.items()), *(prefix or []), *argv]
        proc = host.start(command)
    except BaseException:
        host.close()
        raise
    return RemoteRunningClient(host, folder, proc, argv, time.monotonic(), duration,
                                extra_timeout, log_prefix, on_progress, watch, driver)
