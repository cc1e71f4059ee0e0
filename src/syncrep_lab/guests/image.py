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
from pathlib import Path

from syncrep_lab import paths
from syncrep_lab.errors import UserError
from syncrep_lab.guests.kernel import run_tool

PACKAGES = ("openssh-server", "iproute2", "procps")
SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
FIX = "check apt's sources and the free space in the cache"


def image_path(suite: str) -> Path:
    return paths.builds_dir() / "guests" / "images" / f"{suite}.ext4"


def build(suite: str = "bookworm", size_mb: int = 1024) -> Path:
    """The cached image of ``suite``, built on first use (34 s here, 239 MB on disk of
    a sparse 1 GiB file) in a folder of its own and renamed into place whole."""
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
        run_tool(argv, f"build the {suite} guest image", timeout=900, fix=FIX)
        image = building / "image.ext4"
        run_tool(["mkfs.ext4", "-q", "-L", "srl-guest", "-d", str(building / "root"),
                  str(image), f"{size_mb}M"], "make the image's file system", timeout=300,
                 fix=FIX)
        target.parent.mkdir(parents=True, exist_ok=True)
        image.replace(target)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return target

