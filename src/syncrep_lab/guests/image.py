"""The other root a guest can boot: an ext4 image built once from Debian packages.

``mmdebstrap --variant=minbase`` with sshd and iproute2, from this machine's own apt
sources (``/etc/apt/sources.list.d/debian.sources``, or the suite's default mirror), into a
directory, then ``mkfs.ext4 -d`` of it; cached by suite as
``cache/guests/images/SUITE.ext4`` and booted with ``snapshot=on``, so no boot changes
it. It was measured against the host's root (docs/decisions.md, "Guests"); the host's
root is the default, and this stays for a machine that cannot share its root (no
virtiofsd) or a guest that must not see it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from syncrep_lab import paths
from syncrep_lab.errors import UserError

PACKAGES = ("openssh-server", "iproute2", "procps")
SOURCES = Path("/etc/apt/sources.list.d/debian.sources")


def image_path(suite: str) -> Path:
    return paths.cache_dir() / "guests" / "images" / f"{suite}.ext4"


def build(suite: str = "bookworm", size_mb: int = 1024) -> Path:
    """The cached image of ``suite``, built on first use (about a minute, 100 MB of
    packages) in a folder of its own and renamed into place whole."""
    target = image_path(suite)
    if target.is_file():
        return target
    for tool in ("mmdebstrap", "mkfs.ext4"):
        if shutil.which(tool) is None:
            raise UserError(f"{tool} is not installed: a guest image is built with it",
                            "apt-get install mmdebstrap e2fsprogs")
    building = target.with_name(f"{suite}.building.{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    (building / "root").mkdir(parents=True)
    try:
        argv = ["mmdebstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}",
                suite, str(building / "root")]
        if SOURCES.is_file():
            argv.append(str(SOURCES))
        _run(argv, f"build the {suite} guest image", 900)
        image = building / "image.ext4"
        _run(["mkfs.ext4", "-q", "-L", "srl-guest", "-d", str(building / "root"),
              str(image), f"{size_mb}M"], "make the image's file system", 300)
        target.parent.mkdir(parents=True, exist_ok=True)
        image.replace(target)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return target


def _run(argv: list[str], what: str, timeout: float) -> None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired as exc:
        raise UserError(f"cannot {what}: it took over {timeout:g} s",
                        "check the network and apt's sources") from exc
    if proc.returncode != 0:
        detail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise UserError(f"cannot {what}: {detail[-1] if detail else proc.returncode}",
                        "check apt's sources; run it again with the command above")
