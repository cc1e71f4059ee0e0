"""PostgreSQL built from a Debian source package: cached, patched, refused cleanly.

The builds live in ``SYNCREP_LAB_BUILDS`` (set by conftest.py to a folder outside the
checkout and the test run's tool home), so the first run on a machine builds PostgreSQL
18 once (about five minutes on two cores) and later runs find it in the cache.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import time
from pathlib import Path

import psycopg
import pytest

from syncrep_lab import paths
from syncrep_lab.cluster.build import UpOptions, up
from syncrep_lab.cluster.teardown import remove_cluster
from syncrep_lab.pg.builds import list_builds, tree_dir
from syncrep_lab.pg.installations import resolve
from syncrep_lab.pg.source import resolve_source

from .helpers import cli, cli_here, shared_tmp

PATCHES = Path(__file__).parent / "data" / "patches"
GUC_FILE = "src/backend/utils/misc/guc_tables.c"


@pytest.fixture(scope="module")
def stock() -> dict[str, str]:
    """PostgreSQL 18 from Debian's source package, release flavor, as `pg build` made it."""
    res = cli("pg", "build", "18", "--name", "pg18-stock", "--json", timeout=3600)
    assert res.returncode == 0, res.stdout + res.stderr
    built: dict[str, str] = json.loads(res.stdout)
    return built


def _show(cluster_dir: Path, pg: str, setting: str) -> str:
    manifest = up(UpOptions(dir=cluster_dir, pg=pg, standbys=0))
    try:
        with psycopg.connect(manifest.admin_conninfo(manifest.primary), autocommit=True) as c:
            row = c.execute(f"show {setting}").fetchone()
        assert row is not None
        return str(row[0])
    finally:
        remove_cluster(cluster_dir)


def test_a_build_from_debian_source_runs_and_is_cached(stock: dict[str, str],
                                                       cluster_dir: Path) -> None:
    assert stock["version"].startswith("18.")
    assert stock["source"].startswith("Debian postgresql-18 ")
    assert stock["flavor"] == "release" and stock["unfit"] is None
    assert "CFLAGS=-O2" in stock["configure"]
    assert Path(stock["bin_dir"]).is_relative_to(paths.builds_dir())
    # The second time, nothing is built: the same installation comes back.
    again = cli_here("pg", "build", "18", "--name", "pg18-stock", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["created_at"] == stock["created_at"]
    listed = cli_here("pg", "list", "--json")
    builds = [i for i in json.loads(listed.stdout) if i["source"] == "build"]
    assert any(i.get("build", {}).get("name") == "pg18-stock" for i in builds)
    assert any(i["bin_dir"] == stock["bin_dir"] for i in builds)
    # A build is used by name, never by its version: --pg 18 stays what it was.
    assert resolve("18").source != "build"
    assert _show(cluster_dir, "pg18-stock", "server_version") == stock["version"]
    assert _show(cluster_dir, "pg18-stock", "commit_siblings") == "5"


def test_a_patch_changes_what_the_server_does(stock: dict[str, str],
                                              cluster_dir: Path) -> None:
    res = cli("pg", "build", "18", "--patch", str(PATCHES / "commit_siblings_7.patch"),
              "--name", "pg18-siblings7", "--json", timeout=3600)
    assert res.returncode == 0, res.stdout + res.stderr
    patched = json.loads(res.stdout)
    assert [p["name"] for p in patched["patches"]] == ["commit_siblings_7.patch"]
    assert patched["bin_dir"] != stock["bin_dir"]
    assert _show(cluster_dir, "pg18-siblings7", "commit_siblings") == "7"
    # The stock build is untouched by the patched one built from the same tree.
    assert _show(cluster_dir, "pg18-stock", "commit_siblings") == "5"


def test_a_patch_that_does_not_apply_builds_and_caches_nothing(stock: dict[str, str]
                                                               ) -> None:
    before = {b.name for b in list_builds()}
    # this source's tree by name: a cache that outlived a Debian revision holds others
    tree = tree_dir(resolve_source("18"), "release")
    res = cli_here("pg", "build", "18", "--patch", str(PATCHES / "commit_siblings_7.patch"),
                   "--patch", str(PATCHES / "does_not_apply.patch"), "--name", "pg18-broken")
    assert res.returncode == 2
    assert "does_not_apply.patch does not apply" in res.stderr
    assert "Hunk #1 FAILED" in res.stderr
    assert "fix:" in res.stderr and "Traceback" not in res.stderr
    assert {b.name for b in list_builds()} == before
    # The first patch, which did apply, was undone with the second's failure: the tree
    # holds the source as it came, whatever the build before this one had applied.
    guc = (tree / GUC_FILE).read_text()
    assert "&CommitSiblings,\n\t\t5, 0, 1000," in guc
    assert "&CommitSiblings,\n\t\t7, 0, 1000," not in guc


@pytest.mark.parametrize(("args", "needles"), [
    (["pg", "build", "18", "--flavor", "fast"], ["--flavor 'fast' is not a build flavor",
                                                 "release, frame-pointers, profiling, debug"]),
    (["pg", "build", "/nonexistent/pg.tar.bz2"], ["no such file or directory"]),
    (["pg", "build", "9.6"], ["no Debian source package of PostgreSQL 9.6",
                              "a tarball from postgresql.org's archive, or a source tree"]),
    (["pg", "build", "18", "--patch", "/nonexistent.patch"], ["--patch /nonexistent.patch"]),
    (["pg", "build", "18", "--name", "18"], ["--name '18' is not a usable build name"]),
    (["pg", "build", "18", "--configure", "named semaphores"],
     ["--configure 'named semaphores' is not a configure argument",
      "PREFERRED_SEMAPHORES=NAMED_POSIX"]),
    (["pg", "build", "18", "--configure", "CFLAGS=-O3"], ["the build sets that itself",
                                                          "--cflags"]),
    (["pg", "build", "18", "--configure", "--prefix=/opt"], ["the build sets that itself"]),
    (["pg", "build", "18", "--cflags", " "], ["--cflags is empty", "-O3 -flto"]),
    (["cluster", "up", "--pg", "nosuchbuild"], ["no PostgreSQL build has that name"]),
])
def test_bad_input_is_a_clean_error(args: list[str], needles: list[str], workdir: Path
                                    ) -> None:
    res = cli_here(*args, "--dir", str(workdir / "c")) if args[0] == "cluster" else \
        cli_here(*args)
    assert res.returncode == 2, res.stdout + res.stderr
    for needle in needles:
        assert needle in res.stderr
    assert "fix:" in res.stderr and "Traceback" not in res.stderr


GPROF_SPEC = """\
name = "gprof"

[topology]
standbys = 2

[workload]
clients = 8
duration = 3
warmup = 1

[matrix]
pg = ["pg18-prof"]

[run]
repeats_min = 1
repeats_max = 1

[probes]
flamegraphs = false
sched = false
anatomy = false
"""


def test_a_profiling_build_gives_gprof_calls_per_commit_per_role() -> None:
    """The seed's gprof table: SetLatch calls per commit in the sync walsender, which
    wakes every waiting backend, near the kill() calls perf counts (a SetLatch is a
    kill() when the backend sleeps); none in the potential standby's walsender."""
    res = cli("pg", "build", "18", "--flavor", "profiling", "--name", "pg18-prof", "--json",
              timeout=3600)
    assert res.returncode == 0, res.stdout + res.stderr
    built = json.loads(res.stdout)
    assert "--enable-profiling" in built["configure"] and built["unfit"]
    root = shared_tmp("srl-gprof-")
    try:
        (root / "spec.toml").write_text(GPROF_SPEC)
        run = cli("run", "spec.toml", "--out", "run", timeout=600, cwd=root)
        assert run.returncode == 0, run.stdout + run.stderr
        # pgbench, initdb and the rest of the build are compiled with -pg too: their
        # profiles go to a folder of the tool's, never into the user's folder
        assert not list(root.glob("gmon.out*")), sorted(root.iterdir())
        costs = cli_here("costs", str(root / "run"), "--json")
        assert costs.returncode == 0, costs.stderr
        cell = json.loads(costs.stdout)[0]
        assert "ran" in cell["probes"]["gprof"]
        profiles = {(g["node"], g["role"]): g for g in cell["gprof"]}
        sync, potential = profiles[("primary", "walsender:b")], profiles[("primary",
                                                                          "walsender:c")]
        assert sync["processes"] == 1 and potential["processes"] == 1
        latch = sync["setlatch_per_commit"]["mean"]
        kills = sync["kill_per_commit"]["mean"]
        assert 0.7 <= latch <= 1.3, latch
        assert kills is not None and kills <= latch * 1.05 + 0.02
        assert abs(latch - kills) <= 0.35 * latch, (latch, kills)
        assert (potential["setlatch_per_commit"]["mean"] or 0.0) < 0.05
        # the release of the waiters runs once per standby reply, in the sync walsender
        called = {f["function"]: f["calls_per_commit"] for f in sync["functions"]}
        text = Path(sync["profile"]).read_text()
        assert "SyncRepReleaseWaiters" in text and "Flat profile" in text
        assert any(v for v in called.values())
        assert ("primary", "backend") in profiles
        assert profiles[("primary", "backend")]["processes"] >= 8  # pgbench's, each exited
        shown = cli_here("costs", str(root / "run"))
        assert "gprof primary walsender:b" in shown.stdout and "SetLatch" in shown.stdout
        report = (root / "run" / "report.html").read_text()
        assert "gprof in cell 0" in report
        assert "Not a performance figure" in report and "pg18-prof" in report
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def source_tree(stock: dict[str, str]) -> Path:
    """PostgreSQL 18's source as a user's own tree: the Debian source package's tarball
    unpacked once into the tests' cache, at a fixed place, so its build tree is reused
    by later runs (a tree is always synced and made again, which then changes nothing).
    The file the test edits is put back from the tarball where it differs: a run killed
    during the edited build leaves the edit in the tree."""
    tarball = resolve_source("18").path  # the Debian source stock was built from
    where = paths.builds_dir().parent / "source-trees" / tarball.name.split(".orig")[0]
    if (where / "configure").exists():
        with tarfile.open(tarball) as tar:
            member = next(m for m in tar if m.name.endswith("/" + GUC_FILE))
            handle = tar.extractfile(member)
            assert handle is not None
            shipped = handle.read()
        if (where / GUC_FILE).read_bytes() != shipped:
            (where / GUC_FILE).write_bytes(shipped)
    else:
        tmp = where.with_name(where.name + ".unpacking")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        with tarfile.open(tarball) as tar:
            tar.extractall(tmp, filter="data")
        shutil.rmtree(where, ignore_errors=True)
        next(tmp.iterdir()).rename(where)
        shutil.rmtree(tmp)
    return where


def test_a_source_tree_builds_and_an_edit_rebuilds_what_it_touches(
        source_tree: Path, cluster_dir: Path) -> None:
    first = cli("pg", "build", str(source_tree), "--name", "pg18-tree", "--json",
                timeout=3600)
    assert first.returncode == 0, first.stdout + first.stderr
    built = json.loads(first.stdout)
    assert built["source"] == f"source tree {source_tree}"
    guc = source_tree / GUC_FILE
    original = guc.read_text()
    assert "&CommitSiblings,\n\t\t5, 0, 1000," in original
    objects = tree_dir(resolve_source(str(source_tree)), "release")
    edited_at = time.time()
    try:
        guc.write_text(original.replace("&CommitSiblings,\n\t\t5, 0, 1000,",
                                        "&CommitSiblings,\n\t\t9, 0, 1000,"))
        edited = cli("pg", "build", str(source_tree), "--name", "pg18-tree9", "--json",
                     timeout=3600)
        assert edited.returncode == 0, edited.stdout + edited.stderr
    finally:
        guc.write_text(original)
    # make recompiled the one file (and relinked): which objects are newer says so, where
    # a time would say it only on a quiet machine
    rebuilt = sorted(str(o.relative_to(objects)) for o in objects.rglob("*.o")
                     if o.stat().st_mtime >= edited_at)
    assert rebuilt == [GUC_FILE.replace(".c", ".o")], rebuilt
    assert _show(cluster_dir, "pg18-tree9", "commit_siblings") == "9"
    assert _show(cluster_dir, "pg18-tree", "commit_siblings") == "5"


def test_flags_of_its_own_make_another_build_in_a_tree_of_its_own() -> None:
    """--cflags and --configure are in the cache key and pick a tree of their own (make
    would not rebuild objects whose flags alone changed): the seed's -O3 -flto and named
    semaphores never come back as the stock build, nor share its objects."""
    from syncrep_lab.pg.builds import build_key, custom_flags

    source = resolve_source("18")
    seed = custom_flags("-O3 -flto", ["PREFERRED_SEMAPHORES=NAMED_POSIX"])
    stock_args, stock_key, stock_tree = build_key(source, "release", [], None, [])
    args, key, custom = build_key(source, "release", [], "-O3 -flto", seed)
    assert stock_tree == "" and stock_args[-1] == "CFLAGS=-O2"
    assert args[-2:] == ["PREFERRED_SEMAPHORES=NAMED_POSIX", "CFLAGS=-O3 -flto"]
    assert key != stock_key and len(custom) == 8
    assert build_key(source, "release", [], "-O3 -flto", seed) == (args, key, custom)
    # the flavor's own flags given again are still flags of their own: another tree
    assert build_key(source, "release", [], "-O2", [])[2] not in ("", custom)
    assert tree_dir(source, "release", custom) != tree_dir(source, "release")
    assert tree_dir(source, "release", custom).name.endswith(f"-release-{custom}")


def test_a_tarball_is_named_by_its_content(tmp_path: Path) -> None:
    """A tarball is cached by its sha256, not its name: the same bytes under another name
    are the same source, other bytes the same name are not."""
    a = tmp_path / "postgresql-18.6.tar.gz"
    with tarfile.open(a, "w:gz") as tar:
        tar.add(Path(__file__), arcname="postgresql-18.6/configure")
    copy = tmp_path / "renamed.tar.gz"
    copy.write_bytes(a.read_bytes())
    assert resolve_source(str(a)).ident == resolve_source(str(copy)).ident
    assert resolve_source(str(a)).kind == "tarball"
    with tarfile.open(copy, "w:gz") as tar:
        tar.add(PATCHES / "commit_siblings_7.patch", arcname="postgresql-18.6/configure")
    assert resolve_source(str(a)).ident != resolve_source(str(copy)).ident
    bad = tmp_path / "notes.txt"
    bad.write_text("x")
    res = cli_here("pg", "build", str(bad))
    assert res.returncode == 2 and "is not a tarball" in res.stderr
