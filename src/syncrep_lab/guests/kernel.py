"""A guest's kernel: Debian's cloud kernel, taken from its package, or a user's own.

The package is fetched with ``apt-get download`` and unpacked with ``dpkg-deb -x``: its
maintainer scripts (initramfs-tools, the boot loader, depmod) never run, and nothing of
this machine's /boot or /lib/modules changes. Unpacked once per release into
``guests/kernels/RELEASE`` of the builds folder (about 100 MB; beside the PostgreSQL
builds, which outlive a tool home as they do: ``SYNCREP_LAB_BUILDS``), made in a folder
of its own and renamed into place whole, so a fetch cut short leaves no half kernel.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from syncrep_lab import paths
from syncrep_lab.errors import UserError

DEFAULT_PACKAGE = "linux-image-cloud-amd64"  # Debian's meta package: the newest release
_DEPENDS_RE = re.compile(r"^Depends:.*?\b(linux-image-[0-9][^\s,(]*)", re.MULTILINE)


@dataclass(frozen=True)
class Kernel:
    """A kernel to boot: its image and the modules it was built with (None: a kernel
    with virtio, virtiofs and overlay built in)."""

    release: str
    vmlinuz: Path
    modules_dir: Path | None

    @classmethod
    def own(cls, bzimage: Path, modules: Path | None) -> Kernel:
        """A user's ``bzImage``, with the ``lib/modules/RELEASE`` dir it was built with."""
        if not bzimage.is_file():
            raise UserError(f"kernel image {bzimage} does not exist",
                            "give the bzImage a kernel build made (arch/x86/boot/bzImage)")
        if modules is not None and not modules.is_dir():
            raise UserError(f"kernel modules dir {modules} does not exist",
                            "give lib/modules/RELEASE as `make modules_install` made it")
        return cls(modules.name if modules else bzimage.name, bzimage, modules)


# The kernels a spec names (topology.guests.kernel): a Debian package, and the release
# it must be (a Debian 13 machine's linux-image-cloud-amd64 is 6.12, not the seed's 6.1).
NAMED = {"debian-6.1": ("linux-image-cloud-amd64", "6.1.")}


def package_for(name: str) -> str:
    """The Debian package a spec's kernel name stands for: a name of :data:`NAMED`, or
    a ``linux-image-*`` package itself.

    >>> package_for("debian-6.1"), package_for("linux-image-6.1.0-56-cloud-amd64")
    ('linux-image-cloud-amd64', 'linux-image-6.1.0-56-cloud-amd64')
    """
    if name in NAMED:
        return NAMED[name][0]
    if name.startswith("linux-image-"):
        return name
    raise UserError(f"kernel {name!r} is neither a known name ({', '.join(NAMED)}), a "
                    "linux-image-* package nor a bzImage's path",
                    f"use kernel = {next(iter(NAMED))!r}, a Debian package, or /path/bzImage")


def for_guests(name: str, modules: str | None) -> Kernel:
    """The kernel of topology.guests: a user's bzImage (an absolute path), or a Debian
    package's, fetched on first use."""
    if name.startswith("/"):
        return Kernel.own(Path(name), Path(modules) if modules else None)
    kernel = fetch(package_for(name))
    want = NAMED.get(name, ("", ""))[1]
    if not kernel.release.startswith(want):
        raise UserError(f"kernel {name!r}: apt's {package_for(name)} here is "
                        f"{kernel.release}, not {want}x",
                        "name a versioned package (kernel = 'linux-image-6.1.0-NN-"
                        "cloud-amd64') that apt offers, or give a bzImage")
    return kernel


def cached(name: str) -> Kernel | None:
    """The kernel of ``name`` if it is here already (no download, no apt): what
    ``run --check`` reports."""
    if name.startswith("/"):
        return Kernel.own(Path(name), None) if Path(name).is_file() else None
    try:
        release = concrete_package(package_for(name)).removeprefix("linux-image-")
    except UserError:
        return None
    release = release.removesuffix("-unsigned")
    return _kernel_in(kernels_dir() / release, release)


def kernels_dir() -> Path:
    return paths.builds_dir() / "guests" / "kernels"


def concrete_package(package: str) -> str:
    """The versioned package a meta package such as ``linux-image-cloud-amd64`` stands
    for, from apt's own index; a versioned name is its own answer.

    >>> concrete_package("linux-image-6.1.0-56-cloud-amd64")
    'linux-image-6.1.0-56-cloud-amd64'
    """
    if re.match(r"linux-image-[0-9]", package):
        return package
    text = _apt(["apt-cache", "show", "--no-all-versions", package], f"look up {package}")
    match = _DEPENDS_RE.search(text)
    if not match:
        raise UserError(f"{package} names no kernel package in apt's index",
                        "give a versioned package, e.g. linux-image-6.1.0-56-cloud-amd64")
    return match.group(1)


def fetch(package: str = DEFAULT_PACKAGE) -> Kernel:
    """The kernel of a Debian package, downloaded and unpacked once, then from the cache."""
    name = concrete_package(package)
    release = name.removeprefix("linux-image-")
    if release.endswith("-unsigned"):
        release = release.removesuffix("-unsigned")
    target = kernels_dir() / release
    kernel = _kernel_in(target, release)
    if kernel is not None:
        return kernel
    building = target.with_name(f"{release}.building.{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    try:
        _apt(["apt-get", "download", name], f"download {name}", cwd=building)
        debs = sorted(building.glob("*.deb"))
        if not debs:
            raise UserError(f"apt-get download {name} left no .deb",
                            "check apt's sources (apt-get update)")
        _apt(["dpkg-deb", "-x", str(debs[0]), str(building / "root")], f"unpack {debs[0].name}")
        debs[0].unlink()
        shutil.rmtree(target, ignore_errors=True)
        building.rename(target)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    kernel = _kernel_in(target, release)
    if kernel is None:
        raise UserError(f"{name} holds no boot/vmlinuz-{release}",
                        "give a linux-image-* package of a kernel")
    return kernel


def _kernel_in(target: Path, release: str) -> Kernel | None:
    vmlinuz = target / "root" / "boot" / f"vmlinuz-{release}"
    modules = target / "root" / "lib" / "modules" / release
    if not vmlinuz.is_file():
        return None
    return Kernel(release, vmlinuz, modules if modules.is_dir() else None)


def _apt(argv: list[str], what: str, cwd: Path | None = None) -> str:
    if shutil.which(argv[0]) is None:
        raise UserError(f"cannot {what}: {argv[0]} is not installed",
                        "a guest's Debian kernel is fetched with apt; give your own "
                        "kernel (bzImage and modules) on another system")
    return run_tool(argv, what, timeout=300, cwd=cwd,
                    fix="run apt-get update, and check the package's name")


def run_tool(argv: list[str], what: str, *, timeout: float, fix: str,
             cwd: Path | None = None) -> str:
    """Run a program that fetches or builds a guest's parts; its stdout, or a UserError
    that names what failed with the last line it printed."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                              stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired as exc:
        raise UserError(f"cannot {what}: `{' '.join(argv)}` took over {timeout:g} s",
                        "check the network and apt's sources") from exc
    if proc.returncode != 0:
        detail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise UserError(f"cannot {what}: {detail[-1] if detail else proc.returncode}", fix)
    return proc.stdout
