"""KVM or TCG: whether a stock kernel boots under this machine's KVM, probed once.

``/dev/kvm`` being there proves little: a machine whose KVM is ``kvm_pvm`` (software
nested virtualization) runs only guest kernels built for it, and Debian's kernel hangs
there after its decompressor, with no error. So the probe boots the very kernel a guest
will run, under KVM, with an initramfs that prints a marker and powers off; a marker
within :data:`PROBE_SECONDS` says KVM, anything else (no /dev/kvm, QEMU's refusal, a
hang) says TCG, with the reason. The answer is kept in the cache by this machine's kernel
release, QEMU's version and the guest kernel's release: a probe costs its timeout on a
machine where KVM hangs, so it is paid once.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syncrep_lab import paths, shutdown
from syncrep_lab.guests import initramfs
from syncrep_lab.guests.kernel import Kernel

PROBE_SECONDS = 15.0  # a stock kernel reaches its initramfs in about 1 s under KVM
PROBE_MARKER = "srl-guest: probe ok"
# The CPU models tried under KVM, in order: the host's, then the host's without the
# ARCH_CAPABILITIES MSR, which a KVM that cannot set it (kvm_pvm here: QEMU asserts on
# MSR 0x10a at once) refuses. The first that boots is the one guests get.
KVM_CPUS = ("host", "host,-arch-capabilities")
TCG_CPU = "max"


@dataclass(frozen=True)
class Accel:
    name: str  # "kvm" or "tcg"
    reason: str  # why, for the run's record
    cpu: str = TCG_CPU

    def qemu_args(self) -> list[str]:
        if self.name == "kvm":
            return ["-accel", "kvm", "-cpu", self.cpu]
        # One TCG thread a vCPU: the emulator uses the host's CPUs as the guest's.
        return ["-accel", "tcg,thread=multi", "-cpu", self.cpu]


def qemu_binary() -> str:
    return "qemu-system-x86_64"


def qemu_version(binary: str) -> str:
    proc = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10,
                          check=False, stdin=subprocess.DEVNULL)
    return proc.stdout.split("\n", 1)[0].strip()


def _cache_file() -> Path:
    return paths.builds_dir() / "guests" / "accel.json"


def _known() -> dict[str, Any]:
    try:
        found = json.loads(_cache_file().read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _key(kernel: Kernel, binary: str) -> str:
    return f"{platform.release()} | {qemu_version(binary)} | {kernel.release}"


def known(kernel: Kernel, binary: str | None = None) -> Accel | None:
    """The cached answer for ``kernel`` on this machine, without probing; None when it
    has not been probed yet (or QEMU is missing)."""
    binary = binary or shutil.which(qemu_binary())
    if binary is None:
        return None
    entry = _known().get(_key(kernel, binary))
    if not isinstance(entry, dict):
        return None
    return Accel(entry["name"], entry["reason"] + " (cached)", entry.get("cpu", TCG_CPU))


def choose(kernel: Kernel, binary: str | None = None) -> Accel:
    """KVM where the kernel boots under it here, else TCG; from the cache after once."""
    binary = binary or qemu_binary()
    cached = known(kernel, binary)
    if cached is not None:
        return cached
    key = _key(kernel, binary)
    accel = probe(kernel, binary)
    known_now = _known()
    known_now[key] = {"name": accel.name, "reason": accel.reason, "cpu": accel.cpu}
    cache = _cache_file()
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(f".{os.getpid()}")
    tmp.write_text(json.dumps(known_now, indent=1) + "\n")
    tmp.replace(cache)
    return accel


def probe(kernel: Kernel, binary: str) -> Accel:
    """Boot ``kernel`` under KVM to its initramfs with each of :data:`KVM_CPUS`; TCG with
    the reasons when none boots."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return Accel("tcg", "no usable /dev/kvm")
    reasons = []
    for cpu in KVM_CPUS:
        took, failure = _boot_under_kvm(kernel, binary, cpu)
        if failure is None:
            return Accel("kvm", f"the kernel reached its initramfs under KVM (-cpu {cpu}) "
                                f"in {took:.1f} s", cpu)
        reasons.append(f"-cpu {cpu}: {failure}")
    return Accel("tcg", "a stock kernel does not boot under this KVM (" + "; ".join(reasons)
                 + ")")


def _boot_under_kvm(kernel: Kernel, binary: str, cpu: str) -> tuple[float, str | None]:
    """Seconds to the probe's marker, and why not when it did not come."""
    with tempfile.TemporaryDirectory(prefix="srl-kvm-probe.") as tmp:
        initrd = Path(tmp) / "initrd"
        # An initramfs of busybox alone, whose init prints the marker and powers off.
        initrd.write_bytes(initramfs.newc([
            initramfs.Entry("dev", 0o040755), initramfs.Entry("bin", 0o040755),
            initramfs.Entry("dev/console", 0o020600, rdev=(5, 1)),
            initramfs.Entry("bin/busybox", 0o100755, initramfs.BUSYBOX.read_bytes()),
            initramfs.Entry("probe", 0o100755,
                            f"#!/bin/busybox sh\n/bin/busybox echo '{PROBE_MARKER}'\n"
                            "/bin/busybox poweroff -f\n".encode())]))
        argv = [binary, "-accel", "kvm", "-cpu", cpu, "-m", "256", "-smp", "1",
                "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
                "-serial", "stdio", "-kernel", str(kernel.vmlinuz), "-initrd", str(initrd),
                "-append", "console=ttyS0 panic=-1 rdinit=/probe"]
        started = time.monotonic()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL,
                                preexec_fn=shutdown.die_with_parent(signal.SIGKILL))
        try:
            out, _ = proc.communicate(timeout=PROBE_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return PROBE_SECONDS, (f"no sign of life within {PROBE_SECONDS:g} s (a KVM "
                                   "such as kvm_pvm runs only kernels built for it)")
        took = time.monotonic() - started
    text = out.decode(errors="replace")
    if PROBE_MARKER in text:
        return took, None
    last = [line for line in text.splitlines() if line.strip()][-1:] or ["no output"]
    return took, f"QEMU stopped: {last[0][:160]}"
