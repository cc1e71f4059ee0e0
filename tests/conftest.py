"""Shared fixtures: an isolated tool home, short cluster dirs, real installations.

Every test runs real PostgreSQL servers. The tool's state and caches go to a
per-session home (SYNCREP_LAB_HOME) so tests never see or clean a user's own
clusters; it is on /dev/shm where that has room (helpers.clusters_root: a run's
clusters are made there). Dirs are made under /tmp with mode 0755 and short names: when the
suite runs as root, servers run as an unprivileged account that must reach
them, and unix socket paths are limited to 107 bytes.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from syncrep_lab.cluster.build import UpOptions, up
from syncrep_lab.cluster.manifest import Manifest, load
from syncrep_lab.cluster.teardown import remove_cluster
from syncrep_lab.pg.fetch import fetch
from syncrep_lab.pg.installations import Installation, resolve

from .helpers import clean_list, clusters_root, shared_tmp

OLD_VERSION = "9.6.24"
# PostgreSQL built from source (tests/test_pg_build.py) outlives the test run's tool home:
# the first run on a machine builds it, later runs find it.
os.environ.setdefault("SYNCREP_LAB_BUILDS", "/var/cache/syncrep-lab-tests/builds")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` (./run test), refused unless pytest-xdist could put
    its group on every test of helpers.machine_wide: a pytest that xdist cannot mark
    would let them run at once on several workers, each cleaning the others' leftovers."""
    if not getattr(config.option, "loadgroup", False):
        return
    lost = [item.nodeid for item in items if item.get_closest_marker("xdist_group")
            and "@" not in item.nodeid]
    if lost:
        raise pytest.UsageError(
            f"pytest-xdist did not group {len(lost)} tests ({lost[0]} …) with pytest "
            f"{pytest.__version__}: install the versions pyproject.toml asks for "
            "(./run setup), or run without -n")


@pytest.fixture(scope="session", autouse=True)
def lab_home() -> Iterator[Path]:
    home = shared_tmp("srl-home-", clusters_root())
    old = os.environ.get("SYNCREP_LAB_HOME")
    os.environ["SYNCREP_LAB_HOME"] = str(home)
    yield home
    from syncrep_lab.cluster.teardown import clean

    # A worker of several (pytest-xdist) leaves the machine's namespaces and groups to
    # the tests that made them: another worker may be between a kill -9 and its `clean`
    clean(with_kept=True, machine=os.environ.get("PYTEST_XDIST_WORKER") is None)
    if old is None:
        del os.environ["SYNCREP_LAB_HOME"]
    else:
        os.environ["SYNCREP_LAB_HOME"] = old
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = shared_tmp("srl-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def nothing_new_to_clean() -> Callable[[], None]:
    """A check that ``clean --list`` lists what it listed when the test began: what
    earlier tests of the session left (a failed one's cluster, say) is theirs, not this
    test's to answer for."""
    before = clean_list()

    def check() -> None:
        assert clean_list() == before

    return check


@pytest.fixture
def cluster_dir(workdir: Path) -> Path:
    return workdir / "c"


@pytest.fixture
def make_cluster(workdir: Path) -> Iterator[Callable[..., Manifest]]:
    """``up`` with these UpOptions fields; the first cluster goes to ``cluster_dir``
    unless ``dir`` is given. Every cluster made is removed at teardown, whatever the
    test did to it (a test that removed one itself leaves nothing to do)."""
    made: list[Path] = []

    def make(**options: Any) -> Manifest:
        options.setdefault("dir", workdir / ("c" if not made else f"c{len(made)}"))
        manifest = up(UpOptions(**options))
        made.append(manifest.dir)
        return manifest

    yield make
    for path in reversed(made):
        if load(path) is not None:
            remove_cluster(path)


@pytest.fixture(scope="session")
def pg18() -> Installation:
    return resolve("18")


@pytest.fixture(scope="session")
def pg15() -> Installation:
    return resolve("15")


@pytest.fixture(scope="session")
def pg96(lab_home: Path) -> Installation:
    return fetch(OLD_VERSION)
