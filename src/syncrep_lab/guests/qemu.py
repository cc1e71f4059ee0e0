"""Starting a guest: QEMU in a network namespace of its own, reachable over SSH.

A guest is three processes and a namespace, all made by :meth:`Guest.start` and all gone
after :meth:`Guest.stop`, which every exit path reaches (the ``with`` block, an error
during boot, SIGTERM through the tool's shutdown handler):

- **The namespace** ``srl-guestN`` (owner record first, as network/netns.py makes them,
  so ``clean`` leaves a live one alone and removes a dead run's, killing what is inside).
  A veth pair joins it to this machine (10.215.N.1 here); inside, a bridge holds the
  veth's other end and QEMU's tap, so the guest's 10.215.N.2 is one hop away, on a
  network that reaches nothing else.
- **QEMU**, started inside the namespace with PR_SET_PDEATHSIG (SIGKILL): it never
  outlives the tool, even one killed with SIGKILL.
- **virtiofsd** for the host's-root variant, inside the namespace too (so ``clean`` finds
  it), in a mount namespace of its own where the shared tree is a read-only bind of /;
  the guest lays a tmpfs over it (overlayfs), so whatever it writes stays in its memory.

Ready means sshd answered a command: the console says when the guest's init started
sshd, then :class:`~syncrep_lab.hosts.ssh.SshHost` runs ``true`` there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from syncrep_lab import shutdown
from syncrep_lab.errors import ClusterFailure, UserError
from syncrep_lab.guests import accel as accel_mod
from syncrep_lab.guests import initramfs
from syncrep_lab.guests.kernel import Kernel
from syncrep_lab.guests.leftovers import guests_dir
from syncrep_lab.hosts.ssh import HostSpec, SshHost
from syncrep_lab.network import netns
from syncrep_lab.network.commands import NETNS_DIR, exec_prefix, run
from syncrep_lab.network.owners import claim, unclaim

PREFIX = "srl-guest"
SUBNET = "10.215"  # 10.214 is the tests' sshd hosts'
READY_MARK = "srl-guest: ready"
FAILED_MARK = "srl-guest: FAILED"
VIRTIOFSD = ("/usr/libexec/virtiofsd", "/usr/lib/qemu/virtiofsd")
POLL_CONNECT = 5.0  # s, each attempt at SSH while the guest comes up
# s, a run's connections to a guest: under TCG the guest's sshd does its key exchange in
# emulation, and beside the rest of the suite a first connection just after the guest
# answered took over 5 s (a run refused at its start)
RUN_CONNECT = {"tcg": 30.0, "kvm": 10.0}


@dataclass
class GuestConfig:
    kernel: Kernel
    root: str = "hostfs"  # "hostfs" (virtiofs + tmpfs overlay) or "image"
    image: Path | None = None  # the ext4 image for root = "image"
    vcpus: int = 1
    memory_mb: int = 1024
    user: str = "postgres"  # the SSH account (the server account)
    boot_timeout: float = 120.0
    accel: accel_mod.Accel | None = None  # None: probed (and cached)
    numa_nodes: int = 1  # virtual NUMA nodes (numa_args)


@dataclass
class BootTimes:
    """Seconds from QEMU's start: its root mounted (console), sshd started (console),
    a command answered over SSH."""

    root_mounted: float | None = None
    sshd_started: float | None = None
    ssh_ready: float | None = None


@dataclass
class Guest:
    config: GuestConfig
    index: int = 0
    workdir: Path = Path()
    accel: accel_mod.Accel | None = None
    times: BootTimes = field(default_factory=BootTimes)
    _qemu: subprocess.Popen[bytes] | None = None
    _virtiofsd: subprocess.Popen[bytes] | None = None
    _claimed: bool = False
    name: str = ""  # the run's name for it (guest1, guest1-k2: run/guests.py)
    # vCPU thread -> the CPUs here it may run on, where the run pinned them
    vcpu_pinning: dict[str, str] = field(default_factory=dict)

    # -- the names of what a guest makes -------------------------------------------------

    @property
    def namespace(self) -> str:
        return f"{PREFIX}{self.index}"

    @property
    def address(self) -> str:
        return f"{SUBNET}.{self.index}.2"

    @property
    def gateway(self) -> str:
        return f"{SUBNET}.{self.index}.1"

    @property
    def host_interface(self) -> str:
        return f"srlg{self.index}h"

    @property
    def console(self) -> Path:
        return self.workdir / "console.log"

    def host_spec(self, name: str | None = None, connect_timeout: float | None = None
                  ) -> HostSpec:
        """The guest as an SSH host; its connections wait ``connect_timeout`` (None: as
        long as a run's may, :data:`RUN_CONNECT` by accelerator)."""
        if connect_timeout is None:
            connect_timeout = RUN_CONNECT.get(self.accel.name if self.accel else "tcg",
                                              RUN_CONNECT["tcg"])
        return HostSpec(name=name or self.namespace, address=self.address, port=22,
                        user=self.config.user, key=str(self.workdir / "client_key"),
                        known_hosts=str(self.workdir / "known_hosts"),
                        data_root="/var/tmp/syncrep-lab", connect_timeout=connect_timeout)

    # -- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> Guest:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        """Boot the guest and wait until SSH answers; everything made is removed when any
        step fails or the boot deadline passes (with the console's last lines)."""
        binary = shutil.which(accel_mod.qemu_binary())
        if binary is None:
            raise UserError("qemu-system-x86_64 is not installed: guests need it",
                            "apt-get install qemu-system-x86 (./run setup installs it)")
        self.accel = self.config.accel or accel_mod.choose(self.config.kernel, binary)
        # A first SIGTERM raises shutdown.Interrupted here, which the except below turns
        # into a stop; a second one runs the killer registered with shutdown.own.
        shutdown.own(("guest", id(self)), self._kill_processes)
        try:
            self._make_network()
            self._write_files()
            started = time.monotonic()
            if self.config.root == "hostfs":
                self._start_virtiofsd()
            self._start_qemu(binary)
            self._wait_console(started)
            self._wait_ssh(started)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Kill QEMU and virtiofsd, delete the namespace and the guest's files. Idempotent."""
        self._kill_processes()
        shutdown.disown(("guest", id(self)))
        if self._claimed:
            # Deleted here, at once: a namespace's devices go with it only when the kernel
            # gets round to it, and the next guest may want the same name before that.
            run(["ip", "link", "del", self.host_interface], "delete the guest's veth",
                check=False)
            if (NETNS_DIR / self.namespace).exists():
                netns.destroy_namespaces([self.namespace])  # kills anything left inside
            else:
                unclaim(self.namespace)
            self._claimed = False
        if self.workdir != Path() and self.workdir.exists():
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _kill_processes(self) -> None:
        # SIGKILL: the guest's disk is a tmpfs or a snapshot, nothing to flush.
        for proc in (self._qemu, self._virtiofsd):
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5)
        self._qemu = self._virtiofsd = None

    # -- steps ---------------------------------------------------------------------------

    def _make_network(self) -> None:
        for index in range(1, 250):
            ns = f"{PREFIX}{index}"
            if (NETNS_DIR / ns).exists() or Path(f"/sys/class/net/srlg{index}h").exists():
                continue
            try:
                if not claim(ns):
                    continue
            except UserError:  # a live run's
                continue
            proc = run(["ip", "netns", "add", ns], f"create network namespace {ns}",
                       check=False)
            if proc.returncode != 0:
                unclaim(ns)
                continue
            self.index, self._claimed = index, True
            break
        else:
            raise UserError("no free guest network namespace (srl-guest1 to 249)",
                            "remove leftovers with `syncrep-lab clean`")
        ns, host_if, tap = self.namespace, self.host_interface, f"tap{self.index}"
        self.workdir = guests_dir() / ns
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.workdir.mkdir(parents=True)
        steps = [
            ["ip", "-n", ns, "link", "set", "lo", "up"],
            ["ip", "link", "add", host_if, "type", "veth", "peer", "name", "eth0", "netns", ns],
            ["ip", "addr", "add", f"{self.gateway}/24", "dev", host_if],
            ["ip", "link", "set", host_if, "up"],
            ["ip", "-n", ns, "link", "add", "br0", "type", "bridge"],
            ["ip", "-n", ns, "tuntap", "add", "dev", tap, "mode", "tap"],
            ["ip", "-n", ns, "link", "set", "eth0", "master", "br0"],
            ["ip", "-n", ns, "link", "set", tap, "master", "br0"],
            ["ip", "-n", ns, "link", "set", "eth0", "up"],
            ["ip", "-n", ns, "link", "set", tap, "up"],
            ["ip", "-n", ns, "link", "set", "br0", "up"],
        ]
        for argv in steps:
            run(argv, f"set up the guest's network ({' '.join(argv[1:])})")

    def _write_files(self) -> None:
        """Keys made here, so this side knows the guest's host key before it boots."""
        host_key, client_key = self.workdir / "host_key", self.workdir / "client_key"
        for key in (host_key, client_key):
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", self.namespace,
                 "-f", str(key)], "make an SSH key for the guest",
                fix="apt-get install openssh-client")
        public = host_key.with_suffix(".pub").read_text().split()
        (self.workdir / "known_hosts").write_text(f"{self.address} {public[0]} {public[1]}\n")
        user = self.config.user
        sshd_config = (
            f"ListenAddress {self.address}\nPort 22\nHostKey /run/srl/host_key\n"
            "AuthorizedKeysFile /run/srl/authorized_keys\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
            f"PermitRootLogin no\nAllowUsers {user}\nPidFile /run/sshd.pid\n"
            "MaxSessions 32\nUseDNS no\n"
            # files to and from the guest (configurations, logs) go over SFTP
            "Subsystem sftp internal-sftp\n")
        env = (f"SRL_HOSTNAME={self.namespace}\nSRL_ADDRESS={self.address}/24\n"
               f"SRL_USER={user}\n")
        files = {
            "host_key": (host_key.read_bytes(), 0o600),
            "authorized_keys": (client_key.with_suffix(".pub").read_bytes(), 0o644),
            "sshd_config": (sshd_config.encode(), 0o644),
            "env": (env.encode(), 0o644),
        }
        (self.workdir / "initrd").write_bytes(
            initramfs.build(self.config.kernel.modules_dir, files))

    def _start_virtiofsd(self) -> None:
        daemon = next((p for p in VIRTIOFSD if os.access(p, os.X_OK)), None)
        if daemon is None:
            raise UserError("virtiofsd is not installed: the host's-root guest needs it",
                            "apt-get install qemu-system-x86 (Debian 12 ships it there) "
                            "or virtiofsd")
        shared = self.workdir / "hostroot"
        shared.mkdir()
        socket = self.workdir / "virtiofs.sock"
        if daemon.startswith("/usr/libexec"):  # the Rust daemon (Debian 13's package)
            serve = (f"exec {daemon} --socket-path={socket} --shared-dir={shared} "
                     "--readonly --cache=always --sandbox=chroot")
        else:
            serve = f"exec {daemon} --socket-path={socket} -o source={shared} -o cache=always"
        # Every file system below / (a /home or /usr of its own), but not this machine's
        # /proc, /sys, /dev and /run: the guest mounts its own there, and before it has,
        # a /proc/self/exe read through the share would be virtiofsd's.
        script = (f"mount --make-rprivate / && mount --rbind / {shared} && "
                  f"for d in proc sys dev run; do umount -R -l {shared}/$d 2>/dev/null; "
                  f"done; mount -o remount,bind,ro {shared} && {serve}")
        log = (self.workdir / "virtiofsd.log").open("wb")
        self._virtiofsd = subprocess.Popen(
            [*exec_prefix(self.namespace), "unshare", "--mount", "sh", "-c", script],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            preexec_fn=shutdown.die_with_parent(signal.SIGKILL))
        deadline = time.monotonic() + 10
        while not socket.exists():
            if self._virtiofsd.poll() is not None or time.monotonic() > deadline:
                raise ClusterFailure("virtiofsd did not start: " + _tail(
                    self.workdir / "virtiofsd.log"), "see the message above")
            time.sleep(0.02)

    def qemu_argv(self, binary: str) -> list[str]:
        cfg = self.config
        assert self.accel is not None
        mac = f"52:54:00:d5:{self.index // 256:02x}:{self.index % 256:02x}"
        argv = [
            # debug-threads: QEMU names its threads ("CPU 0/TCG"), so a vCPU's CPU and run
            # delay are read from this machine (guests/costs.py)
            binary, "-name", f"{self.namespace},debug-threads=on", "-machine", "q35",
            *self.accel.qemu_args(),
            "-smp", str(cfg.vcpus), "-m", f"{cfg.memory_mb}M",
            "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-chardev", f"file,id=con,path={self.console}", "-serial", "chardev:con",
            "-kernel", str(cfg.kernel.vmlinuz), "-initrd", str(self.workdir / "initrd"),
            "-append", f"console=ttyS0 panic=-1 loglevel=4 srl.root="
                       f"{'virtiofs' if cfg.root == 'hostfs' else 'blk'}",
            "-netdev", f"tap,id=n0,ifname=tap{self.index},script=no,downscript=no",
            "-device", f"virtio-net-pci,netdev=n0,mac={mac}",
        ]
        if cfg.numa_nodes > 1:
            argv[argv.index("-m") + 1] = f"{cfg.memory_mb // cfg.numa_nodes * cfg.numa_nodes}M"
            argv += numa_args(cfg.vcpus, cfg.memory_mb, cfg.numa_nodes)
        if cfg.root == "hostfs":
            if cfg.numa_nodes == 1:
                argv += ["-object",
                         f"memory-backend-memfd,id=mem,size={cfg.memory_mb}M,share=on",
                         "-numa", "node,memdev=mem"]
            argv += ["-chardev", f"socket,id=fs,path={self.workdir / 'virtiofs.sock'}",
                     "-device", "vhost-user-fs-pci,chardev=fs,tag=hostroot"]
        else:
            if cfg.image is None or not cfg.image.is_file():
                raise UserError(f"guest image {cfg.image} does not exist",
                                "build it first (guests.image.build)")
            # snapshot=on: the guest's writes go to a temporary file, the image stays.
            argv += ["-drive", f"file={cfg.image},format=raw,if=virtio,snapshot=on"]
        return argv

    def _start_qemu(self, binary: str) -> None:
        log = (self.workdir / "qemu.log").open("wb")
        self._qemu = subprocess.Popen(
            [*exec_prefix(self.namespace), *self.qemu_argv(binary)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            env={**os.environ, "TMPDIR": str(self.workdir)},
            preexec_fn=shutdown.die_with_parent(signal.SIGKILL))

    def _wait_console(self, started: float) -> None:
        deadline = started + self.config.boot_timeout
        while True:
            text = self.console.read_text(errors="replace") if self.console.exists() else ""
            if self.times.root_mounted is None and "srl-guest: root mounted" in text:
                self.times.root_mounted = time.monotonic() - started
            if READY_MARK in text:
                self.times.sshd_started = time.monotonic() - started
                return
            failed = FAILED_MARK in text or "Kernel panic" in text
            assert self._qemu is not None
            if failed or self._qemu.poll() is not None or time.monotonic() > deadline:
                why = ("it failed" if failed else "QEMU exited" if self._qemu.poll()
                       is not None else f"not ready within {self.config.boot_timeout:g} s")
                raise ClusterFailure(
                    f"guest {self.namespace} did not boot ({why}); its console's last "
                    f"lines:\n{_tail(self.console)}\nQEMU: {_tail(self.workdir / 'qemu.log')}",
                    "see the console above; under TCG a slow machine may need a longer "
                    "boot_timeout")
            time.sleep(0.05)

    def _wait_ssh(self, started: float) -> None:
        deadline = started + self.config.boot_timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                with SshHost(self.host_spec(connect_timeout=POLL_CONNECT)) as host:
                    host.run(["true"], timeout=10)
                self.times.ssh_ready = time.monotonic() - started
                return
            except UserError as exc:
                last = exc
                time.sleep(0.2)
        raise ClusterFailure(f"guest {self.namespace} booted but SSH did not answer: {last}"
                             f"\nits console's last lines:\n{_tail(self.console)}",
                             "see the console above")


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(none)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty)"


def numa_args(vcpus: int, memory_mb: int, nodes: int) -> list[str]:
    """QEMU's arguments for ``nodes`` virtual NUMA nodes: each its share of the memory
    (a memfd, shared: vhost-user's virtiofs maps the guest's memory) and a contiguous
    block of the vCPUs, the first nodes one more where they do not divide evenly; a node
    past the vCPUs has memory only.

    >>> numa_args(3, 1024, 2)[1::2]  # doctest: +NORMALIZE_WHITESPACE
    ['memory-backend-memfd,id=mem0,size=512M,share=on',
     'node,nodeid=0,memdev=mem0,cpus=0-1',
     'memory-backend-memfd,id=mem1,size=512M,share=on',
     'node,nodeid=1,memdev=mem1,cpus=2']
    >>> numa_args(1, 512, 2)[7]
    'node,nodeid=1,memdev=mem1'
    """
    per, out, first = memory_mb // nodes, [], 0
    for node in range(nodes):
        count = vcpus // nodes + (1 if node < vcpus % nodes else 0)
        cpus = (f",cpus={first}" if count == 1 else f",cpus={first}-{first + count - 1}"
                if count else "")
        first += count
        out += ["-object", f"memory-backend-memfd,id=mem{node},size={per}M,share=on",
                "-numa", f"node,nodeid={node},memdev=mem{node}{cpus}"]
    return out
