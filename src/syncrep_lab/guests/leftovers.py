"""What a guest leaves when the tool is killed with SIGKILL: its files.

QEMU and virtiofsd die with the tool (PR_SET_PDEATHSIG) and its namespace is removed by
``clean`` as any namespace of a dead run (network/netns.ours: the owner record is gone
or dead). Its folder (keys, initramfs, console) is found here by the same test: a
guest's folder is named after its namespace, and one whose namespace is gone or has no
live owner is a leftover.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from syncrep_lab import paths
from syncrep_lab.network.commands import NETNS_DIR
from syncrep_lab.network.owners import owner


def guests_dir() -> Path:
    return paths.state_dir() / "guests"


def leftover_dirs(remove: bool = True) -> list[Path]:
    """The folders of guests no live process owns; removed unless ``remove`` is False."""
    try:
        dirs = sorted(p for p in guests_dir().iterdir() if p.is_dir())
    except OSError:
        return []
    found = [d for d in dirs if not (NETNS_DIR / d.name).exists() or owner(d.name) is None]
    if remove:
        for folder in found:
            shutil.rmtree(folder, ignore_errors=True)
    return found
