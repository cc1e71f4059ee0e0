"""Owner records of the namespaces made here: one file per namespace in
``/run/syncrep-lab/netns`` holding the creating process's pid and start time, so that
:func:`.netns.ours` can leave alone the namespaces of another run still going.

A namespace's owner record is written *before* the namespace is made, so that a concurrent
``clean`` never sees one of ours without it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from syncrep_lab import procs
from syncrep_lab.errors import UserError

OWNERS_DIR = Path("/run/syncrep-lab/netns")


def owner(ns: str) -> int | None:
    """The pid of the live process that made ``ns``, if it is still running."""
    try:
        pid_text, start = (OWNERS_DIR / ns).read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    return pid if procs.alive(pid) and procs.start_time(pid) == start else None


def claim(ns: str) -> bool:
    """Write this process's owner record for ``ns``. Returns whether a new record was made
    (so that a failure removes only what it made); raises when a live run owns ``ns``."""
    me = f"{os.getpid()} {procs.start_time(os.getpid())}\n"
    path = OWNERS_DIR / ns
    try:
        OWNERS_DIR.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        pid = owner(ns)
        if pid is not None and pid != os.getpid():
            raise UserError(f"network namespace {ns} belongs to another run still going "
                            f"(pid {pid})", "wait for it to end, or use another name "
                            "prefix") from None
        with contextlib.suppress(OSError):
            path.write_text(me)
        return False
    except OSError:  # no place for records: go on without them
        return False
    with os.fdopen(fd, "w") as f:
        f.write(me)
    return True


def unclaim(ns: str) -> None:
    with contextlib.suppress(OSError):
        (OWNERS_DIR / ns).unlink()
