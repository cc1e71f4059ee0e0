"""A "remote host" on this machine: sshd inside a network namespace of our own.

Testing the SSH layer against mocks would prove little about host keys,
authentication or processes that outlive a session, so the tests talk to the
real OpenSSH server. To keep that server unreachable from anywhere else and
invisible to anything else on the machine, it runs in a network namespace
made for the purpose, joined to ours by a veth pair (10.214.N.1 here,
10.214.N.2 inside), listening only on the inner address. It has a fresh host
key, accepts one fresh client key for an unprivileged account, and uses no
PAM and no system configuration, so nothing of the machine's own SSH setup
is touched or trusted.

Needs root (namespaces, useradd), /usr/sbin/sshd, ssh-keygen and ip; the
fixture skips the tests when any is missing. Teardown kills every process
left in the namespace (sshd, sessions, servers the tests started through it)
by pid, and deletes the namespace and the veth pair with it.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from syncrep_lab.hosts.ssh import HostSpec

SSHD = "/usr/sbin/sshd"
USER = "srlssh"
PORT = 2222  # not 22, so every known_hosts line and hint carries the [addr]:port form


@dataclass
class SshdHost:
    namespace: str
    address: str  # inside the namespace, where sshd listens
    gateway: str  # our end of the veth pair
    port: int
    user: str
    key: str  # the client's private key, authorised for ``user``
    known_hosts: str  # holds the server's host key
    host_key_line: str  # that line
    data_root: str  # owned by ``user``
    workdir: Path
    log: Path
    process: subprocess.Popen[bytes] | None = None
    links: list[str] = field(default_factory=list)
    own_pids: bool = False  # sshd under `unshare --pid --fork`, in a PID namespace

    def spec(self, **changes: Any) -> HostSpec:
        base = HostSpec(name="remote", address=self.address, port=self.port, user=self.user,
                        key=self.key, known_hosts=self.known_hosts, data_root=self.data_root,
                        connect_timeout=5.0)
        return replace(base, **changes)

    def hosts_table(self, name: str, bin_dir: str, known_hosts: str | None = None) -> str:
        """This host as a spec's ``[hosts.NAME]`` table."""
        return (f'[hosts.{name}]\naddress = "{self.address}"\nport = {self.port}\n'
                f'user = "{self.user}"\nkey = "{self.key}"\n'
                f'known_hosts = "{known_hosts or self.known_hosts}"\nbin_dir = "{bin_dir}"\n'
                f'data_root = "{self.data_root}"\nconnect_timeout = 5\n')

    def running(self, comm: str, wait: float = 10.0) -> list[int]:
        """Pids of the processes named ``comm`` still running in this host's namespace
        (what was started through its sshd), after waiting up to ``wait`` s for them to
        go; zombies do not count. Other runs on this machine, even of the same account,
        are not seen."""
        deadline = time.monotonic() + wait
        while True:
            found = []
            for pid in _namespace_pids(self.namespace):
                try:
                    name = Path(f"/proc/{pid}/comm").read_text().strip()
                    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                except (OSError, IndexError):
                    continue
                if name == comm and state != "Z":
                    found.append(pid)
            if not found or time.monotonic() > deadline:
                return found
            time.sleep(0.2)

    def sshd_log(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return ""


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False,
                            stdin=subprocess.DEVNULL)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr}")
    return result


def make_key(path: Path, comment: str = "syncrep-lab test", kind: str = "ed25519") -> Path:
    """A fresh key pair without passphrase; returns the private key's path."""
    _run("ssh-keygen", "-q", "-t", kind, "-N", "", "-C", comment, "-f", str(path))
    return path


def _test_account() -> pwd.struct_passwd:
    """The unprivileged login account; created once, kept (like the tool's own)."""
    try:
        pwd.getpwnam(USER)
    except KeyError:
        _run("useradd", "--system", "--create-home", "--shell", "/bin/sh", USER)
    # With UsePAM no, sshd refuses an account whose password field is locked
    # ("!"), which is how useradd leaves it; "*" allows no password either.
    _run("usermod", "-p", "*", USER)
    return pwd.getpwnam(USER)


def _free_subnet() -> int:
    """N for a 10.214.N.0/30 no interface here uses yet."""
    used = _run("ip", "-o", "-4", "addr", "show").stdout
    start = os.getpid() % 200
    for i in range(250):
        n = (start + i) % 250 + 1
        if f" 10.214.{n}." not in used:
            return n
    raise RuntimeError("no free 10.214.N.0/30 subnet")


def _wait_for_banner(host: SshdHost, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        assert host.process is not None
        if host.process.poll() is not None:
            raise RuntimeError(f"sshd exited ({host.process.returncode}):\n{host.sshd_log()}")
        try:
            with socket.create_connection((host.address, host.port), timeout=1) as sock:
                sock.settimeout(2)
                if sock.recv(64).startswith(b"SSH-2.0"):
                    return
        except OSError as exc:
            last = str(exc)
        time.sleep(0.1)
    raise RuntimeError(f"sshd did not answer on {host.address}:{host.port}: {last}\n"
                       f"{host.sshd_log()}")


def _namespace_pids(namespace: str) -> list[int]:
    result = _run("ip", "netns", "pids", namespace, check=False)
    return [int(word) for word in result.stdout.split() if word.isdigit()]


def stop(host: SshdHost) -> None:
    """Kill sshd and everything else in the namespace, then remove it. Safe to repeat."""
    if host.process is not None and host.process.poll() is None:
        if host.own_pids:  # unshare ignores SIGTERM while it waits: sshd is in its group
            with contextlib.suppress(ProcessLookupError):
                os.killpg(host.process.pid, signal.SIGTERM)
        else:
            host.process.terminate()
        try:
            host.process.wait(5)
        except subprocess.TimeoutExpired:
            host.process.kill()
            host.process.wait(5)
    deadline = time.monotonic() + 10
    while (pids := _namespace_pids(host.namespace)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    _run("ip", "netns", "delete", host.namespace, check=False)
    for link in host.links:
        _run("ip", "link", "delete", link, check=False)
    shutil.rmtree(host.workdir, ignore_errors=True)
    if pids:  # stuck in the kernel even after SIGKILL: say so rather than pass silently
        raise RuntimeError(f"processes survived in {host.namespace}: {pids}")


def _mount_tracefs(host: SshdHost) -> None:
    """tracefs at /sys/kernel/tracing in sshd's mount namespace, as a machine's init mounts
    it: `ip netns exec` gives sshd a fresh /sys without it (bpftrace would find no
    tracepoints there; perf mounts it itself). That namespace goes with sshd."""
    assert host.process is not None
    pid = host.process.pid  # ip netns exec execs sshd (or unshare): its mount namespace
    if _run("nsenter", "-t", str(pid), "-m", "sh", "-c",
            "grep -q ' /sys/kernel/tracing tracefs ' /proc/self/mounts", check=False
            ).returncode != 0:
        _run("nsenter", "-t", str(pid), "-m", "mount", "-t", "tracefs", "nodev",
             "/sys/kernel/tracing")


@contextlib.contextmanager
def _through_sudo(program: str, tags: str = "NOPASSWD:") -> Iterator[None]:
    """The test account may run ``program`` (and nothing else) as root with ``sudo -n``,
    as a host's admin would grant it; the grant is removed afterwards."""
    if shutil.which("sudo") is None or shutil.which("visudo") is None:
        pytest.skip(f"{program} through sudo needs sudo (./run setup installs it for the "
                    "tests)")
    path = shutil.which(program)
    if path is None:
        pytest.skip(f"{program} through sudo needs {program}")
    grant = Path(f"/etc/sudoers.d/srl-tests-{program}-{os.getpid()}")
    grant.write_text(f"{USER} ALL=(root) {tags} {path}\n")
    grant.chmod(0o440)
    try:
        _run("visudo", "-c", "-f", str(grant))
        yield
    finally:
        grant.unlink(missing_ok=True)


def perf_through_sudo() -> contextlib.AbstractContextManager[None]:
    """perf as root with ``sudo -n`` for the test account (the probes on a host)."""
    return _through_sudo("perf")


def bpftrace_through_sudo(setenv: bool = True) -> contextlib.AbstractContextManager[None]:
    """bpftrace as root with ``sudo -n`` for the test account (the commit anatomy on a
    host), with the SETENV the probe's grant needs, or (``setenv=False``) without."""
    return _through_sudo("bpftrace", "NOPASSWD:SETENV:" if setenv else "NOPASSWD:")


@dataclass(frozen=True)
class Bridge:
    """A bridge here that several hosts' namespaces are joined to, so that they reach each
    other (and this machine) directly, as machines on one switch do, without routing."""

    name: str
    subnet: int  # 10.215.N.0/24; this machine is .1, host i is .i+2

    @property
    def gateway(self) -> str:
        return f"10.215.{self.subnet}.1"


@contextlib.contextmanager
def running_hosts(count: int, session_env: dict[int, dict[str, str]] | None = None
                  ) -> Iterator[list[SshdHost]]:
    """``count`` hosts, each sshd in a namespace of its own, all on one bridge;
    ``session_env``: host index -> variables every session on that host gets (sshd's
    SetEnv), such as a clock shifted by libfaketime (:func:`clock_ahead`)."""
    used = _run("ip", "-o", "-4", "addr", "show").stdout
    subnet = next(n for n in range(1, 250) if f" 10.215.{n}." not in used)
    bridge = Bridge(f"srlbr{os.getpid()}"[:15], subnet)
    _run("ip", "link", "add", bridge.name, "type", "bridge")
    try:
        _run("ip", "addr", "add", f"{bridge.gateway}/24", "dev", bridge.name)
        _run("ip", "link", "set", bridge.name, "up")
        with contextlib.ExitStack() as stack:
            yield [stack.enter_context(running_sshd(bridge, i, (session_env or {}).get(i)))
                   for i in range(count)]
    finally:
        _run("ip", "link", "delete", bridge.name, check=False)
        if session_env:
            _faketime_leftovers()


def _faketime_leftovers() -> None:
    """libfaketime opens a named semaphore and a shared memory object per process
    (/dev/shm/sem.faketime_sem_PID, faketime_shm_PID) and unlinks them at exit; a process
    killed with its host leaves them. Those of processes gone are removed."""
    for path in [*Path("/dev/shm").glob("sem.faketime_sem_*"),
                 *Path("/dev/shm").glob("faketime_shm_*")]:
        pid = path.name.rsplit("_", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            path.unlink(missing_ok=True)


FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"


def clock_ahead(seconds: int) -> dict[str, str]:
    """Session variables that put a host's clock ``seconds`` ahead of this machine's
    for everything started over SSH there (libfaketime: a namespace shares the kernel's
    clock, so this is how a host whose clock is off is made here)."""
    if not Path(FAKETIME_LIB).exists():
        raise RuntimeError(f"{FAKETIME_LIB} is missing: ./run setup installs libfaketime")
    return {"LD_PRELOAD": FAKETIME_LIB, "FAKETIME": f"+{seconds}"}


@contextlib.contextmanager
def running_sshd(bridge: Bridge | None = None, index: int = 0,
                 session_env: dict[str, str] | None = None,
                 own_pids: bool = False) -> Iterator[SshdHost]:
    """sshd in a network namespace of its own; ``own_pids``: in a PID namespace of its
    own too, as in a container (its /proc shows that namespace's pids)."""
    if os.geteuid() != 0:
        pytest.skip("the sshd harness needs root (network namespaces, a test account)")
    for program in (SSHD, "ssh-keygen", "ip", "useradd"):
        if shutil.which(program) is None:
            pytest.skip(f"the sshd harness needs {program}")
    account = _test_account()
    workdir = Path(tempfile.mkdtemp(prefix="srl-sshd-", dir="/tmp"))
    workdir.chmod(0o755)  # the test account must reach its data_root below
    tag = (f"{os.getpid()}" + (f"x{index}" if bridge is not None else "")
           + ("p" if own_pids else ""))
    if bridge is None:
        n = _free_subnet()
        address, gateway = f"10.214.{n}.2", f"10.214.{n}.1"
    else:
        address, gateway = f"10.215.{bridge.subnet}.{index + 2}", bridge.gateway
    host = SshdHost(
        namespace=f"srlssh-{tag}", address=address, gateway=gateway,
        port=PORT, user=USER, key=str(workdir / "client_key"),
        known_hosts=str(workdir / "known_hosts"), host_key_line="",
        data_root=str(workdir / "data"), workdir=workdir, log=workdir / "sshd.log",
        own_pids=own_pids,
    )
    outer, inner = f"srlo{tag}"[:15], f"srli{tag}"[:15]
    try:
        host_key = make_key(workdir / "host_key", "srl test host")
        make_key(Path(host.key), "srl test client")
        authorized = workdir / "authorized_keys"
        authorized.write_text(Path(host.key + ".pub").read_text())
        authorized.chmod(0o644)  # sshd reads it as the account
        algorithm, blob = Path(f"{host_key}.pub").read_text().split()[:2]
        host.host_key_line = f"[{host.address}]:{host.port} {algorithm} {blob}"
        Path(host.known_hosts).write_text(host.host_key_line + "\n")

        data_root = Path(host.data_root)
        data_root.mkdir(mode=0o755)
        os.chown(data_root, account.pw_uid, account.pw_gid)

        _run("ip", "netns", "add", host.namespace)
        _run("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
        host.links.append(outer)
        _run("ip", "link", "set", inner, "netns", host.namespace)
        if bridge is None:
            _run("ip", "addr", "add", f"{host.gateway}/30", "dev", outer)
        else:
            _run("ip", "link", "set", outer, "master", bridge.name)
        _run("ip", "link", "set", outer, "up")
        _run("ip", "-n", host.namespace, "addr", "add",
             f"{host.address}/{30 if bridge is None else 24}", "dev", inner)
        _run("ip", "-n", host.namespace, "link", "set", inner, "up")
        _run("ip", "-n", host.namespace, "link", "set", "lo", "up")

        config = workdir / "sshd_config"
        config.write_text("\n".join([
            f"ListenAddress {host.address}:{host.port}",
            f"HostKey {host_key}",
            f"PidFile {workdir / 'sshd.pid'}",
            f"AuthorizedKeysFile {authorized}",
            "StrictModes no",
            "UsePAM no",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin no",
            f"AllowUsers {USER}",
            "X11Forwarding no",
            "AllowTcpForwarding no",
            "PrintMotd no",
            "MaxStartups 50",
            "MaxSessions 50",
            "LogLevel VERBOSE",
            "Subsystem sftp internal-sftp",
            *([f"SetEnv {' '.join(f'{k}={v}' for k, v in session_env.items())}"]
              if session_env else []),
            "",
        ]))
        # The privilege separation directory Debian's service would make.
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        _run(SSHD, "-t", "-f", str(config))
        with host.log.open("wb") as log:
            host.process = subprocess.Popen(
                ["ip", "netns", "exec", host.namespace,
                 *(["unshare", "--pid", "--fork", "--mount-proc"] if own_pids else []),
                 SSHD, "-D", "-e", "-f", str(config)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        _wait_for_banner(host)
        _mount_tracefs(host)
        yield host
    finally:
        stop(host)


@pytest.fixture(scope="module")
def sshd_host() -> Iterator[SshdHost]:
    """sshd in a network namespace of the tests' own, for the module's tests."""
    with running_sshd() as host:
        yield host
