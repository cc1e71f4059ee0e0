"""Processes inside namespaces: which ones (by the namespace's inode, as ``ip netns pids``
finds them), which of them are delay lines (by their command line), and killing them,
bounded in time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from syncrep_lab import procs
from syncrep_lab.network.commands import NETNS_DIR
from syncrep_lab.network.delayer_handle import DELAYER_MODULE, reap_children


def ns_id(ns: str) -> tuple[int, int] | None:
    try:
        st = os.stat(NETNS_DIR / ns)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def pids_in(ns: str) -> list[int]:
    """Processes inside namespace ``ns`` (what ``ip netns pids`` prints)."""
    ident = ns_id(ns)
    if ident is None:
        return []
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{entry.name}/ns/net")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == ident:
            out.append(int(entry.name))
    return out


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def delayer_pids(ns: str) -> dict[int, list[str]]:
    """Delayer processes inside ``ns``, with their command lines."""
    out = {}
    for pid in pids_in(ns):
        cmd = _cmdline(pid)
        if DELAYER_MODULE in cmd:
            out[pid] = cmd
    return out


def option(cmd: list[str], name: str) -> str | None:
    with contextlib.suppress(ValueError, IndexError):
        return cmd[cmd.index(name) + 1]
    return None


def kill_all(pids: list[int], timeout: float) -> None:
    """SIGTERM, then SIGKILL what is left after ``timeout``; waits (bounded) for them."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 2.0)):
        alive = []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
                alive.append(pid)
        deadline = time.monotonic() + wait
        while alive and time.monotonic() < deadline:
            reap_children()
            alive = [p for p in alive if procs.alive(p)]
            if alive:
                time.sleep(0.02)
        pids = alive
        if not pids:
            return
