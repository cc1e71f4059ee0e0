"""Shared fixtures: an isolated tool home, short cluster dirs, real installations.

Every test runs real PostgreSQL servers. The tool's state and caches go to a
per-session home (SYNCREP_LAB_HOME) so tests never see or clean a user's own
clusters. Dirs are made under /tmp with mode 0755 and short names: when the
suite runs as root, servers run as an unprivileged account that must reach
them, and unix socket paths are limited to 107 bytes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncrep_lab.pg.fetch import fetch
from syncrep_lab.pg.installations import Installation, resolve

OLD_VERSION = "9.6.24"


def _shared_tmp(prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o755)
    return path


@pytest.fixture(scope="session", autouse=True)
def lab_home() -> Iterator[Path]:
    home = _shared_tmp("srl-home-")
    old = os.environ.get("SYNCREP_LAB_HOME")
    os.environ["SYNCREP_LAB_HOME"] = str(home)
    yield home
    from syncrep_lab.cluster.teardown import clean

    clean()
    if old is None:
        del os.environ["SYNCREP_LAB_HOME"]
    else:
        os.environ["SYNCREP_LAB_HOME"] = old
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = _shared_tmp("srl-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def cluster_dir(workdir: Path) -> Path:
    return workdir / "c"


@pytest.fixture(scope="session")
def pg18() -> Installation:
    return resolve("18")


@pytest.fixture(scope="session")
def pg15() -> Installation:
    return resolve("15")


@pytest.fixture(scope="session")
def pg96(lab_home: Path) -> Installation:
    return fetch(OLD_VERSION)


def cli(*args: str, timeout: float = 180, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    """Run the real command line, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "syncrep_lab", *args],
        capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )


def postmasters_in(path: Path) -> list[int]:
    """Pids of postgres processes whose working directory is under ``path``."""
    found = []
    root = str(path.resolve())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if comm in ("postgres", "postmaster") and (cwd == root or cwd.startswith(root + "/")):
            found.append(int(entry.name))
    return found


def live_processes(comm: str, user: str | None = None, wait: float = 10.0) -> list[str]:
    """``ps`` lines of processes named ``comm`` (of ``user``) still running, after waiting
    up to ``wait`` s for them to go. A killed process whose parent died waits a moment
    for init to reap it; such zombies are not counted."""
    import time

    deadline = time.monotonic() + wait
    who = ["-u", user] if user else ["-e"]
    while True:
        ps = subprocess.run(["ps", *who, "-o", "pid=,stat=,comm="], capture_output=True,
                            text=True, check=False)
        live = [ln for ln in ps.stdout.splitlines()
                if ln.split()[-1] == comm and not ln.split()[1].startswith("Z")]
        if not live or time.monotonic() > deadline:
            return live
        time.sleep(0.2)
