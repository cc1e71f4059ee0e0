"""One SSH connection per host, behind a synchronous interface.

The rest of syncrep-lab is synchronous code (the cluster builder, the runner,
the probes), while asyncssh is asyncio. Rather than spread ``async`` through
everything, each :class:`SshHost` submits its work to one shared event loop
that runs in a daemon thread, and waits for the answer with a deadline. The
caller's thread stays an ordinary thread: signals still reach it, and a
timeout always comes back as an error rather than a hang.

Host keys are always verified against a known_hosts file. The only way to
trust a host not yet in it is to say so (``accept_new``), and that never
overrides a key that differs from the one on record: a changed key is
reported loudly, since it is exactly what a man-in-the-middle looks like.
Nothing here reads ``~/.ssh/config``: the inventory entry is the whole truth
about how to reach a host, so a run can be reproduced from it alone.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import importlib.util
import os
import posixpath
import queue
import secrets
import shlex
import socket
import subprocess
import sys
import threading
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from syncrep_lab.errors import UserError

if TYPE_CHECKING:
    import asyncssh

    from syncrep_lab.hosts import host_keys
else:
    # asyncssh (and the cryptography under it) takes a fifth of a second to import:
    # loaded at its first use, so that a command that never connects to a host (most)
    # does not pay for it; host_keys, which subclasses its client, with it.
    def _lazy(name: str) -> Any:
        module = sys.modules.get(name)
        if module is not None:
            return module
        spec = importlib.util.find_spec(name)
        loader = importlib.util.LazyLoader(spec.loader)
        spec.loader = loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        loader.exec_module(module)
        return module

    asyncssh = _lazy("asyncssh")
    host_keys = _lazy("syncrep_lab.hosts.host_keys")

T = TypeVar("T")

# Bound for file transfers and the small bookkeeping commands (kill, alive).
OP_TIMEOUT = 60.0
# The waiting thread allows the loop this much beyond an operation's own
# deadline, so the loop's (more informative) timeout normally fires first.
GRACE = 5.0
# A dead peer is noticed within about KEEPALIVE * KEEPALIVE_COUNT seconds even
# when no command is running.
KEEPALIVE = 15.0
KEEPALIVE_COUNT = 4
DEFAULT_PROGRAMS = ("postgres", "pg_basebackup", "pg_ctl")
_PACKAGES = {"taskset": "util-linux"}  # Debian's package of a program, where not its name

# A sh function: whether a pid is a live process. Zombies count as gone: a
# detached process is reparented to the host's init, which may be slow to
# reap it (or, in a container, never do), and kill -0 succeeds on a zombie.
ALIVE_SH = """alive() {
  if [ -d /proc/self ]; then
    s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    s=${s##*) }
    case $s in Z*|X*|x*) return 1;; esac
    return 0
  fi
  kill -0 "$1" 2>/dev/null
}
"""


@dataclass(frozen=True)
class HostSpec:
    """How to reach one host of the inventory, and where things live on it."""

    name: str
    address: str
    port: int = 22
    user: str = "postgres"
    key: str | None = None  # private key file; None: the default keys and the ssh-agent
    known_hosts: str | None = None  # None: ~/.ssh/known_hosts
    accept_new: bool = False  # trust on first use, recording the key; never on a mismatch
    bin_dir: str | None = None  # PostgreSQL programs on that host; None: its PATH
    data_root: str = "/var/tmp/syncrep-lab"  # node data directories go under it
    connect_timeout: float = 10.0
    sudo: bool = False  # perf runs through `sudo -n` (the account is not root)
    # a guest the run booted (guests/qemu.py): its network namespace here. Its nodes'
    # files live in its memory and go with it
    guest: str | None = None

    def __post_init__(self) -> None:
        where = f"host {self.name!r}"
        if not self.address:
            raise UserError(f"{where} has no address", "set address to its name or IP address")
        if not 0 < self.port < 65536:
            raise UserError(f"{where}: port {self.port} is not a TCP port",
                            "use a port between 1 and 65535 (sshd listens on 22 by default)")
        if not self.connect_timeout > 0:
            raise UserError(f"{where}: connect_timeout must be positive",
                            "use a few seconds, e.g. 10")
        if not posixpath.isabs(self.data_root) or posixpath.normpath(self.data_root) == "/":
            raise UserError(
                f"{where}: data_root {self.data_root!r} must be an absolute path below /",
                "use a directory of its own, e.g. /var/tmp/syncrep-lab")
        if self.bin_dir is not None and not posixpath.isabs(self.bin_dir):
            raise UserError(f"{where}: bin_dir {self.bin_dir!r} must be an absolute path",
                            "e.g. /usr/lib/postgresql/15/bin on Debian")

    @property
    def endpoint(self) -> str:
        """``address:port`` as people write it (IPv6 in brackets)."""
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{host}:{self.port}"

    @property
    def known_hosts_pattern(self) -> str:
        """The host field OpenSSH uses in known_hosts for this address and port."""
        return self.address if self.port == 22 else f"[{self.address}]:{self.port}"

    def known_hosts_path(self) -> Path:
        if self.known_hosts is not None:
            return Path(self.known_hosts).expanduser()
        return Path.home() / ".ssh" / "known_hosts"


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


# --- the event loop thread -------------------------------------------------------------

_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_pid = 0


def _event_loop() -> asyncio.AbstractEventLoop:
    """The loop every connection lives on, started on first use.

    A forked child does not inherit the thread, so it gets a loop of its own.
    """
    global _loop, _loop_pid
    with _loop_lock:
        if _loop is None or _loop_pid != os.getpid() or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="syncrep-ssh", daemon=True).start()
            _loop, _loop_pid = loop, os.getpid()
        return _loop


def _wait(coro: Coroutine[Any, Any, T], timeout: float) -> T:
    """Run ``coro`` on the loop and wait for it, at most ``timeout`` + GRACE seconds.

    Whatever ends the wait early (an exception, a signal turned into an
    exception in this thread) cancels the coroutine, so nothing keeps running
    on the loop on behalf of a caller that has gone.
    """
    future = asyncio.run_coroutine_threadsafe(coro, _event_loop())
    try:
        return future.result(timeout + GRACE)
    finally:
        future.cancel()


# --- the connection -----------------------------------------------------------------------


def _tail(text: str, lines: int = 12, chars: int = 2000) -> str:
    kept = "\n".join(text.rstrip().splitlines()[-lines:])
    return kept[-chars:]


# While a run keeps its connections (kept_connections), the one SshHost of each host.
_kept: dict[HostSpec, SshHost] | None = None
_kept_lock = threading.Lock()


@contextlib.contextmanager
def kept_connections() -> Iterator[None]:
    """Within it, ``SshHost(spec)`` is one connection per host, shared by every caller
    and closed when it ends (``close()`` leaves it open meanwhile). A fresh connection
    costs about 90 ms against 3 ms for a command on an open one
    (bench/ssh_connections.py), and a probed repeat asks each host a dozen things. A
    connection that breaks is forgotten and the next command connects again."""
    global _kept
    with _kept_lock:
        outer, _kept = _kept, ({} if _kept is None else _kept)
    try:
        yield
    finally:
        if outer is None:
            with _kept_lock:
                hosts, _kept = list((_kept or {}).values()), None
            for host in hosts:
                host._close_now()


class SshHost:
    """A synchronous facade over one asyncssh connection (an event loop in a daemon
    thread, so callers stay synchronous).

    Methods connect on first use; :meth:`connect` is there to fail early with
    a clear message. Several threads may use one host at once: each command
    runs on a channel of its own over the shared connection. Within
    :func:`kept_connections`, constructing one for a host already connected gives that
    one back.
    """

    def __new__(cls, spec: HostSpec) -> SshHost:
        with _kept_lock:
            if _kept is None:
                return super().__new__(cls)
            host = _kept.get(spec)
            if host is None:
                host = _kept[spec] = super().__new__(cls)
                host._setup(spec, kept=True)
            return host

    def __init__(self, spec: HostSpec) -> None:
        if getattr(self, "kept", False):
            return  # the run's connection to this host, set up already
        self._setup(spec, kept=False)

    def _setup(self, spec: HostSpec, *, kept: bool) -> None:
        self.spec = spec
        self.kept = kept
        self._conn: asyncssh.SSHClientConnection | None = None
        self._sftp: asyncssh.SFTPClient | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SshHost({self.spec.name}: {self.spec.user}@{self.spec.endpoint})"

    def __enter__(self) -> SshHost:
        self.connect()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # connecting

    def connect(self) -> None:
        with self._lock:
            if self._conn is not None:
                return
            self._conn = self._connect()

    def _connect(self) -> asyncssh.SSHClientConnection:
        spec = self.spec
        if spec.key is not None:
            key_path = Path(spec.key).expanduser()
            if not os.access(key_path, os.R_OK):
                raise UserError(f"the SSH key {key_path} for host {spec.name} cannot be read",
                                "check the key path in the inventory and its permissions")
        known_path = spec.known_hosts_path()
        known = host_keys.load_known_hosts(known_path)
        check = host_keys.HostKeyCheck(known, spec.accept_new)
        options: dict[str, Any] = {
            "username": spec.user,
            "known_hosts": known,
            "server_host_key_algs": host_keys.host_key_algorithms(spec.address, spec.port, known),
            "client_factory": lambda: check,
            "config": [],
            "connect_timeout": spec.connect_timeout,
            "login_timeout": spec.connect_timeout,
            "keepalive_interval": KEEPALIVE,
            "keepalive_count_max": KEEPALIVE_COUNT,
            "preferred_auth": ["publickey"],
            "password_auth": False,
            "kbdint_auth": False,
            "gss_auth": False,
        }
        if spec.key is not None:
            # Only the named key, as with ssh -o IdentitiesOnly=yes: the error
            # can then say exactly which key the host refused.
            options["client_keys"] = [str(Path(spec.key).expanduser())]
            options["agent_path"] = None

        async def attempt() -> asyncssh.SSHClientConnection:
            async with asyncio.timeout(spec.connect_timeout):
                return await asyncssh.connect(spec.address, spec.port, **options)

        try:
            conn = _wait(attempt(), spec.connect_timeout)
        except asyncssh.HostKeyNotVerifiable as exc:
            raise self._host_key_error(check, known_path, exc) from None
        except asyncssh.PermissionDenied:
            raise self._auth_error() from None
        except (asyncssh.KeyImportError, asyncssh.KeyEncryptionError) as exc:
            if isinstance(exc, asyncssh.KeyEncryptionError) or "assphrase" in str(exc):
                # Nothing here may prompt for a passphrase: runs are unattended.
                raise UserError(
                    f"the SSH key {spec.key} for host {spec.name} is protected by a "
                    "passphrase",
                    "load it into an ssh-agent and leave key unset, or use a key without "
                    "a passphrase") from None
            raise UserError(f"the SSH key {spec.key} for host {spec.name} cannot be used: {exc}",
                            "point key at an OpenSSH private key file (not the .pub)") from None
        except TimeoutError:
            raise UserError(
                f"connecting to {spec.name} at {spec.endpoint} timed out after "
                f"{spec.connect_timeout:g} s",
                "check that the host is up, the address and port are right and no firewall "
                "drops the traffic; raise connect_timeout for a slow network") from None
        except socket.gaierror as exc:
            raise UserError(f"cannot resolve the address of {spec.name}, {spec.address!r}: "
                            f"{exc.strerror}",
                            "check the address in the inventory") from None
        except asyncssh.DisconnectError as exc:
            raise UserError(
                f"{spec.name} at {spec.endpoint} closed the SSH connection: {exc.reason}",
                "check the sshd log on that host; is the port really an SSH server?") from None
        except OSError as exc:
            raise UserError(
                f"cannot reach {spec.name} at {spec.endpoint}: {_os_error_text(exc)}",
                "check the address and port, that sshd runs on the host, and that no "
                "firewall blocks the port") from None
        if check.accepted and check.presented is not None:
            try:
                host_keys.record_host_key(known_path, spec.known_hosts_pattern, spec.name,
                                          check.presented)
            except UserError:
                self._close_conn(conn)
                raise
        return conn

    def _host_key_error(self, check: host_keys.HostKeyCheck, known_path: Path,
                        exc: asyncssh.HostKeyNotVerifiable) -> UserError:
        spec = self.spec
        who = f"{spec.name} ({spec.endpoint})"
        if check.presented is None:
            # asyncssh refused before asking us: a revoked key, or a certificate
            # that does not validate.
            return UserError(f"the host key of {who} was refused: {exc.reason}",
                             f"check the @revoked and @cert-authority lines in {known_path}")
        fingerprint = host_keys.fingerprint(check.presented)
        if check.listed:
            return UserError(
                f"HOST KEY MISMATCH for {who}: it presented {fingerprint}, but {known_path} "
                "holds a different key for it. Someone may be intercepting the connection "
                "(a man-in-the-middle attack), or the host was reinstalled.",
                "do not connect until you know why. If the host's key really changed, check "
                "the new fingerprint on the host itself (ssh-keygen -lf "
                "/etc/ssh/ssh_host_ed25519_key.pub), then replace the old entry: "
                f"ssh-keygen -R '{spec.known_hosts_pattern}' -f {known_path}; "
                f"ssh-keyscan -p {spec.port} {spec.address} >> {known_path}")
        return UserError(
            f"the host key of {who} is not known: {fingerprint} is not in {known_path}",
            "check that fingerprint on the host itself (ssh-keygen -lf "
            "/etc/ssh/ssh_host_ed25519_key.pub), then add the key: "
            f"ssh-keyscan -p {spec.port} {spec.address} >> {known_path}; "
            "or set accept_new for this host to trust it on first connection")

    def _auth_error(self) -> UserError:
        spec = self.spec
        if spec.key is not None:
            tried = f"the key {spec.key}"
            public = f"{spec.key}.pub"
        else:
            tried = "the default keys (~/.ssh/id_*) and the ssh-agent's keys"
            public = "your public key"
        return UserError(
            f"{spec.user}@{spec.endpoint} ({spec.name}) refused authentication with {tried}",
            f"add {public} to ~{spec.user}/.ssh/authorized_keys on {spec.name}, or set user "
            "and key in the inventory to an account and key it accepts")

    def _connection(self) -> asyncssh.SSHClientConnection:
        self.connect()
        assert self._conn is not None
        return self._conn

    def _lost(self, exc: BaseException) -> UserError:
        """The connection broke under us: forget it, so the next call reconnects."""
        with self._lock:
            conn, self._conn, self._sftp = self._conn, None, None
        if conn is not None:
            conn.abort()
        reason = getattr(exc, "reason", None) or _os_error_text(exc)
        return UserError(f"lost the SSH connection to {self.spec.name} "
                         f"({self.spec.endpoint}): {reason}",
                         "check that the host is still up and reachable, then run again")

    # commands

    def run(self, argv: list[str], *, timeout: float = 60, check: bool = True,
            input: str | None = None) -> Result:
        """Run ``argv`` on the host (quoted for its login shell), at most ``timeout`` s.

        With ``check``, a non-zero exit is a UserError naming the host, the
        command and the end of its stderr. A command that runs out of time is
        sent SIGKILL (sshd forwards signals since OpenSSH 7.9) and its channel
        closed.
        """
        if not argv:
            raise ValueError("run() needs a command")
        command = shlex.join(argv)
        conn = self._connection()

        async def go() -> Result:
            process = await conn.create_process(
                command, encoding="utf-8", errors="replace",
                stdin=asyncssh.DEVNULL if input is None else asyncssh.PIPE)
            try:
                async with asyncio.timeout(timeout):
                    stdout, stderr = await process.communicate(input)
            except TimeoutError:
                with contextlib.suppress(OSError, asyncssh.Error):
                    process.send_signal("KILL")
                process.close()
                raise
            code = process.returncode
            return Result(255 if code is None else code, stdout or "", stderr or "")

        try:
            result = _wait(go(), timeout)
        except TimeoutError:
            raise UserError(f"on {self.spec.name}, `{command}` did not finish within "
                            f"{timeout:g} s",
                            "check the host's load and the command's own log; it was "
                            "sent SIGKILL") from None
        except asyncssh.ChannelOpenError as exc:
            raise UserError(f"{self.spec.name} refused to run `{command}`: {exc.reason}",
                            "check the sshd configuration on that host (MaxSessions, "
                            "ForceCommand)") from None
        except (asyncssh.DisconnectError, OSError) as exc:
            raise self._lost(exc) from None
        if check and result.returncode != 0:
            raise self._failed(f"`{command}`", argv[0], result)
        return result

    def _failed(self, what: str, program: str | None, result: Result) -> UserError:
        name = self.spec.name
        detail = _tail(result.stderr) or _tail(result.stdout) or "(no output)"
        if result.returncode == 127:
            return UserError(
                f"on {name}, {what} failed: a program is missing (exit 127): {detail}",
                f"install {program or 'it'} on {name}, or set bin_dir in the inventory to the "
                "directory that holds it")
        return UserError(f"on {name}, {what} failed with exit status "
                         f"{result.returncode}: {detail}",
                         f"run it by hand on {name} as {self.spec.user} to see why")

    def sh(self, script: str, *args: str, what: str, timeout: float = OP_TIMEOUT,
           check: bool = True, program: str | None = None) -> Result:
        """Run a POSIX sh script with arguments as $1..., so nothing is re-quoted.

        Running it under ``sh -c`` means the account's login shell only has to
        start sh, whatever shell it is. ``what`` describes the step in errors,
        which read better than the script itself.
        """
        result = self.run(["sh", "-c", script, "sh", *args], timeout=timeout, check=False)
        if check and result.returncode != 0:
            raise self._failed(what, program, result)
        return result

    def start(self, argv: list[str], *, keep_stdin: bool = False) -> RemoteProcess:
        """Start ``argv`` on the host and return at once: its output arrives line by line
        while it runs (:class:`RemoteProcess`); with ``keep_stdin`` its stdin stays open
        for :meth:`RemoteProcess.send` until the channel closes."""
        if not argv:
            raise ValueError("start() needs a command")
        return RemoteProcess(self, shlex.join(argv), keep_stdin=keep_stdin)

    # files

    def _sftp_client(self) -> asyncssh.SFTPClient:
        conn = self._connection()
        if self._sftp is None:
            async def start() -> asyncssh.SFTPClient:
                async with asyncio.timeout(OP_TIMEOUT):
                    return await conn.start_sftp_client()
            try:
                self._sftp = _wait(start(), OP_TIMEOUT)
            except (asyncssh.ChannelOpenError, asyncssh.SFTPError) as exc:
                raise UserError(f"{self.spec.name} offers no SFTP: {exc.reason}",
                                "enable the sftp subsystem in that host's sshd_config "
                                "(Subsystem sftp internal-sftp)") from None
            except TimeoutError:
                raise UserError(f"starting SFTP on {self.spec.name} timed out",
                                "check the host's load and its sshd") from None
            except (asyncssh.DisconnectError, OSError) as exc:
                raise self._lost(exc) from None
        return self._sftp

    def put_text(self, path: str, text: str, mode: int = 0o600) -> None:
        """:meth:`put_bytes` of ``text`` in UTF-8."""
        self.put_bytes(path, text.encode("utf-8"), mode)

    def put_bytes(self, path: str, data: bytes, mode: int = 0o600) -> None:
        """Write a file on the host atomically: a temporary name, then a rename."""
        sftp = self._sftp_client()
        temporary = f"{path}.tmp-{secrets.token_hex(4)}"

        async def go() -> None:
            async with asyncio.timeout(OP_TIMEOUT):
                try:
                    attrs = asyncssh.SFTPAttrs(permissions=mode)
                    async with sftp.open(temporary, "wb", attrs) as out:
                        await out.write(data)
                    await sftp.chmod(temporary, mode)  # the host's umask applied on create
                    await sftp.posix_rename(temporary, path)
                except BaseException:
                    with contextlib.suppress(asyncssh.SFTPError, OSError):
                        await sftp.remove(temporary)
                    raise

        self._file_op(go(), f"write {path}")

    def get_bytes(self, path: str, limit: int = 64 << 20) -> bytes:
        """A file of the host, refusing one larger than ``limit`` bytes."""
        sftp = self._sftp_client()

        async def go() -> bytes:
            async with asyncio.timeout(OP_TIMEOUT):
                async with sftp.open(path, "rb") as source:
                    data: bytes = await source.read(limit + 1)
                    return data

        data = self._file_op(go(), f"read {path}")
        if len(data) > limit:
            raise UserError(f"{path} on {self.spec.name} is larger than {limit} bytes",
                            "fetch a smaller file, or raise the limit")
        return data

    def _file_op(self, coro: Coroutine[Any, Any, T], what: str) -> T:
        try:
            return _wait(coro, OP_TIMEOUT)
        except asyncssh.SFTPError as exc:
            raise UserError(f"cannot {what} on {self.spec.name}: {exc.reason}",
                            f"check the path and that {self.spec.user} may access it") from None
        except TimeoutError:
            raise UserError(f"could not {what} on {self.spec.name} within {OP_TIMEOUT:g} s",
                            "check the host's load and the network") from None
        except (asyncssh.DisconnectError, OSError) as exc:
            raise self._lost(exc) from None

    # processes

    def spawn_detached(self, argv: list[str], log: str, cwd: str = "/") -> int:
        """Start a long-lived process that survives this SSH session; its pid on the host.

        The process gets a session of its own (setsid, when the host has it)
        and ignores SIGHUP (nohup), its output goes to ``log`` (appended) and
        its stdin is /dev/null, so sshd sees every descriptor closed and ends
        the channel at once. ``$!`` is the process itself: in a non-interactive
        sh the background child is not a group leader, so setsid and nohup
        exec in place instead of forking.
        """
        if not argv:
            raise ValueError("spawn_detached() needs a command")
        script = (
            'cd -- "$1" || exit 2\n'
            'log=$2; shift 2\n'
            'command -v -- "$1" >/dev/null 2>&1 || { echo "$1: not found" >&2; exit 127; }\n'
            'if command -v setsid >/dev/null 2>&1; then\n'
            '  setsid nohup "$@" >>"$log" 2>&1 </dev/null &\n'
            'else\n'
            '  nohup "$@" >>"$log" 2>&1 </dev/null &\n'
            'fi\n'
            'echo $!\n'
        )
        out = self.sh(script, cwd, log, *argv,
                      what=f"starting `{shlex.join(argv)}` in {cwd}",
                      program=argv[0]).stdout.split()
        if len(out) != 1 or not out[0].isdigit():
            raise UserError(f"starting `{shlex.join(argv)}` on {self.spec.name} gave no pid "
                            f"(got {' '.join(out)[:200]!r})",
                            "check that the host's sh is a POSIX shell")
        return int(out[0])

    def kill(self, pid: int, sig: int = 15) -> None:
        """Send ``sig`` to ``pid``; a process already gone is not an error."""
        result = self.sh('kill -"$1" "$2"', str(int(sig)), str(int(pid)), what="kill",
                         check=False)
        if result.returncode != 0 and self.alive(pid):
            raise UserError(f"cannot signal process {pid} on {self.spec.name}: "
                            f"{_tail(result.stderr)}",
                            f"it may belong to another account than {self.spec.user}")

    def alive(self, pid: int) -> bool:
        """Whether ``pid`` exists and has not exited (a zombie counts as exited)."""
        result = self.sh(ALIVE_SH + 'alive "$1"', str(int(pid)), what="alive", check=False)
        return result.returncode == 0

    def wait_exit(self, pid: int, timeout: float = 10.0) -> bool:
        """Wait (polling on the host) until ``pid`` has exited; False if it outlived
        ``timeout``."""
        steps = str(max(1, int(timeout * 10)))
        script = ALIVE_SH + (
            'i=0\n'
            'while alive "$1"; do\n'
            '  [ "$i" -ge "$2" ] && exit 1\n'
            '  sleep 0.1 2>/dev/null || sleep 1\n'
            '  i=$((i + 1))\n'
            'done\n')
        result = self.sh(script, str(int(pid)), steps, what="wait_exit",
                         timeout=timeout + 15, check=False)
        return result.returncode == 0

    # closing

    def close(self) -> None:
        """Close the connection; one the run keeps (kept_connections) stays open."""
        if not self.kept:
            self._close_now()

    def _close_now(self) -> None:
        with self._lock:
            conn, self._conn, self._sftp = self._conn, None, None
        if conn is not None:
            self._close_conn(conn)

    @staticmethod
    def _close_conn(conn: asyncssh.SSHClientConnection) -> None:
        async def go() -> None:
            conn.close()
            try:
                async with asyncio.timeout(5):
                    await conn.wait_closed()
            except TimeoutError:
                conn.abort()

        with contextlib.suppress(TimeoutError, asyncssh.Error, OSError):
            _wait(go(), 5)


def _os_error_text(exc: BaseException) -> str:
    """The errno text of a failed connect, e.g. 'Connection refused (errno 111)'."""
    if isinstance(exc, OSError):
        if exc.errno and exc.strerror:
            name = errno.errorcode.get(exc.errno, str(exc.errno))
            return f"{exc.strerror} ({name})"
        # asyncio reports several failed addresses as one OSError with a message.
        return str(exc) or type(exc).__name__
    return str(exc) or type(exc).__name__


# --- checking a host ----------------------------------------------------------------------


class _Lines:
    """The lines of one output stream of a remote command, for a reader thread: iterating
    yields each line as it arrives and ends when the stream does."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()

    def put(self, line: str | None) -> None:
        self._queue.put(line)

    def __iter__(self) -> Iterator[str]:
        while (line := self._queue.get()) is not None:
            yield line

    def next(self, timeout: float) -> str | None:
        """The next line, or None once the stream has ended; TimeoutError when none came
        within ``timeout`` seconds."""
        try:
            line = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError from None
        if line is None:
            self._queue.put(None)  # ended: so it stays for the next reader
        return line


class RemoteProcess:
    """A command running on a host, with what a reader of a local ``subprocess.Popen``
    uses: ``stdout`` and ``stderr`` iterate over lines as they arrive, ``wait``, ``poll``
    and ``kill`` behave as a Popen's, ``returncode`` is its exit status (255 when the
    connection was lost; the reason is then the last line of ``stderr``).

    The command has no terminal and lives in the SSH channel: when the channel goes (the
    tool killed, the connection lost), sshd closes its pipes and its next write ends it
    (SIGPIPE), so a client that reports every second does not outlive the tool by more
    than a second or so."""

    pid = -1  # not a local process: nothing here may signal or reap it by pid

    def __init__(self, host: SshHost, command: str, *, keep_stdin: bool = False) -> None:
        self.args = command
        self.host_name = host.spec.name
        self.stdout, self.stderr = _Lines(), _Lines()
        self.returncode: int | None = None
        self._process: asyncssh.SSHClientProcess[str] | None = None
        self._keep_stdin = keep_stdin
        self._closed = False  # close() was asked, maybe before the channel opened
        conn = host._connection()
        self._loop = _event_loop()
        self._future = asyncio.run_coroutine_threadsafe(self._run(conn), self._loop)

    async def _run(self, conn: asyncssh.SSHClientConnection) -> None:
        code = 255
        try:
            process = await conn.create_process(
                self.args, encoding="utf-8", errors="replace",
                stdin=asyncssh.PIPE if self._keep_stdin else asyncssh.DEVNULL)
            self._process = process
            if self._closed:
                process.close()

            async def pump(stream: asyncssh.SSHReader[str], lines: _Lines) -> None:
                async for line in stream:
                    lines.put(line)

            await asyncio.gather(pump(process.stdout, self.stdout),
                                 pump(process.stderr, self.stderr))
            await process.wait()
            code = 255 if process.returncode is None else process.returncode
        except (asyncssh.Error, OSError) as exc:
            self.stderr.put(f"syncrep-lab: the connection to {self.host_name} was lost: "
                            f"{_os_error_text(exc)}\n")
        finally:
            self.returncode = code
            self.stdout.put(None)
            self.stderr.put(None)

    def wait(self, timeout: float | None = None) -> int:
        try:
            self._future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0) from None
        assert self.returncode is not None
        return self.returncode

    def poll(self) -> int | None:
        return self.returncode if self._future.done() else None

    def kill(self) -> None:
        """SIGKILL the command and close its channel (which ends it if the signal did
        not reach it: sshd forwards signals since OpenSSH 7.9)."""
        def go() -> None:
            process = self._process
            if process is not None:
                with contextlib.suppress(OSError, asyncssh.Error):
                    process.send_signal("KILL")
                process.close()

        if not self._future.done():
            self._loop.call_soon_threadsafe(go)

    def send(self, text: str) -> None:
        """Write ``text`` to the command's stdin (started with ``keep_stdin``); nothing
        when the channel has gone."""
        def go() -> None:
            process = self._process
            if process is not None:
                with contextlib.suppress(OSError, asyncssh.Error):
                    process.stdin.write(text)

        if not self._future.done():
            self._loop.call_soon_threadsafe(go)

    def close(self) -> None:
        """Close the channel without a signal: the command reads the end of its stdin,
        as it does when the tool or its connection is gone."""
        self._closed = True

        def go() -> None:
            if self._process is not None:
                self._process.close()

        if not self._future.done():
            self._loop.call_soon_threadsafe(go)


def check_host(spec: HostSpec, programs: Sequence[str] = DEFAULT_PROGRAMS,
               on_path: Sequence[str] = ()) -> dict[str, Any]:
    """Connect and collect what the builder needs to know about a host.

    Checks that the PostgreSQL programs are there (in ``bin_dir``, or on the
    account's PATH when it is unset) and ``on_path`` on the account's PATH (sysbench)
    and, when a server is among them, asks ``postgres --version``. Returns the facts;
    any problem is a UserError.
    """
    wanted = list(dict.fromkeys(programs))
    with SshHost(spec) as host:
        uname = host.run(["uname", "-a"], timeout=OP_TIMEOUT).stdout.strip()
        nproc_out = host.sh("nproc 2>/dev/null || getconf _NPROCESSORS_ONLN",
                            what="counting CPUs").stdout.strip()
        if spec.bin_dir is not None:
            script = ('dir=$1; shift\n'
                      'for p; do\n'
                      '  if [ -f "$dir/$p" ] && [ -x "$dir/$p" ]; then echo "ok $p $dir/$p"\n'
                      '  else echo "missing $p"; fi\n'
                      'done\n')
            found_out = host.sh(script, spec.bin_dir, *wanted,
                                what="looking for the PostgreSQL programs").stdout
        else:
            script = ('for p; do\n'
                      '  if w=$(command -v -- "$p"); then echo "ok $p $w"\n'
                      '  else echo "missing $p"; fi\n'
                      'done\n')
            found_out = host.sh(script, *wanted,
                                what="looking for the PostgreSQL programs").stdout
        found: dict[str, str] = {}
        missing: list[str] = []
        for line in found_out.splitlines():
            words = line.split(None, 2)
            if len(words) == 3 and words[0] == "ok":
                found[words[1]] = words[2]
            elif len(words) == 2 and words[0] == "missing":
                missing.append(words[1])
        missing += [p for p in wanted if p not in found and p not in missing]
        if missing:
            where = f"in {spec.bin_dir}" if spec.bin_dir else f"on {spec.user}'s PATH"
            raise UserError(
                f"{spec.name} lacks {', '.join(missing)} {where}",
                f"install the PostgreSQL server programs on {spec.name} (pg_basebackup "
                "and pgbench come with them), or set bin_dir to the directory that holds "
                "them (on Debian: /usr/lib/postgresql/<version>/bin)")
        for program in on_path:
            where = host.sh('command -v -- "$1" || true', program,
                            what=f"looking for {program}").stdout.strip()
            if not where:
                raise UserError(f"{spec.name} lacks {program} on {spec.user}'s PATH",
                                f"install it on {spec.name} (Debian: apt-get install "
                                f"{_PACKAGES.get(program, program)})")
            found[program] = where
        some = found.get("postgres") or next(iter(found.values()), None)
        version = (host.run([some, "--version"], timeout=OP_TIMEOUT).stdout.strip()
                   if some else "")
        python3 = host.sh("command -v python3 || true",
                          what="looking for python3").stdout.strip() or None
        # the CPUs the account's processes may use there, and the NUMA nodes: what a
        # placement on the host is checked against
        placing = host.sh("sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status; "
                          "ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | "
                          "sed 's/.*node//' | tr '\\n' ,",
                          what="reading the CPUs and NUMA nodes").stdout.splitlines()
    try:
        nproc: int | None = int(nproc_out)
    except ValueError:
        nproc = None
    words = version.split()
    return {
        "name": spec.name,
        "address": spec.address,
        "port": spec.port,
        "user": spec.user,
        "uname": uname,
        "nproc": nproc,
        "bin_dir": spec.bin_dir or (posixpath.dirname(some) if some else ""),
        "programs": found,
        "postgres_version": version,
        "version": words[2] if len(words) >= 3 else version,
        "python3": python3,
        "cpus_allowed": placing[0].strip() if placing else "",
        "numa_nodes": (placing[1].strip(",") if len(placing) > 1 else "") or "0",
    }
