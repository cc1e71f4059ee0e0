"""``syncrep-lab ab``: a patch judged against its stock build in one command.

The bad-input tests run in this process and build nothing. The runs use the builds
the suite keeps in its cache, and make them where it holds none (a machine's first run:
stock 18 from Debian's source, 3 to 4 minutes; the 5 ms patch is built on the same tree,
under a minute, then found in the cache; whichever of ``pg build 18`` and ``ab 18`` comes
first builds stock, the other finds it), on a
matrix cut to what the assertions read: ``on`` and the control ``local`` at 4 clients,
3 rounds of 2 s repeats without fsync (a commit is then a fraction of a millisecond,
and the disk's noise, which other tenants of a shared machine make, is out of it). The
intervals are at 99 %: every interval asserted to hold 1 fails 1 run in 100 by design,
not 1 in 20; the known cost is large enough (5 ms a commit) to be seen through them on a
machine whose rounds swing twofold.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from syncrep_lab import paths
from syncrep_lab.errors import UserError
from syncrep_lab.patch_ab import sources
from syncrep_lab.patch_ab.spec import Table, with_builds
from syncrep_lab.pg.builds import build, list_builds
from syncrep_lab.terminal.ab import WIDTH

from .helpers import cli, cli_here, shared_tmp

PATCHES = Path(__file__).parent / "data" / "patches"
EMPTY = PATCHES / "empty.patch"
SLEEP = PATCHES / "syncrep_sleep_5ms.patch"


def _spec(tmp: Path, text: str, name: str = "spec.toml") -> Path:
    path = tmp / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(("args", "needles"), [
    (["18", "--patch", "/nonexistent.patch"],
     ["--patch /nonexistent.patch: no such file", "git diff or diff -u"]),
    (["18", "--patch", f"15={EMPTY}"],
     ["15 is not one of the bases (18)", "syncrep-lab ab 18 15", "without '15='"]),
    (["18", "--patch", f"={EMPTY}"], ["a version and a file are needed", "--patch 15="]),
    (["18", "--patch", "18="], ["a version and a file are needed", "VERSION=FILE"]),
    (["18", "--patch", str(PATCHES)], ["a directory, not a patch file"]),
    (["18"], ["no patch for 18: there is nothing to judge", "--base COMMIT"]),
    (["18", "18", "--patch", str(EMPTY)], ["a base is given twice"]),
    (["18", "--base", "master"], ["18 is not a git tree", "git checkout"]),
    (["15", "18", "--base", "master"], ["--base COMMIT takes one base"]),
    (["18", "--patch", str(EMPTY), "--clients", "0"], ["--clients '0'", "--clients 8,64"]),
    (["18", "--patch", str(EMPTY), "--clients", "a,b"], ["is not a list of client counts"]),
    (["18", "--patch", str(EMPTY), "--budget", "soon"], ["--budget", "90s, 10m or 1h"]),
    (["18", "--patch", str(EMPTY), "--flavor", "fast"], ["--flavor 'fast' is not a build"]),
    (["18", "--patch", str(EMPTY), "--spec", "/nonexistent.toml"], ["no spec file"]),
])
def test_bad_input_is_refused_before_anything_is_built(args: list[str], needles: list[str]
                                                       ) -> None:
    before = {b.name for b in list_builds()}
    res = cli_here("ab", *args)
    assert res.returncode == 2, res.stdout + res.stderr
    for needle in needles:
        assert needle in res.stderr, res.stderr
    assert "fix:" in res.stderr and "Traceback" not in res.stderr
    assert {b.name for b in list_builds()} == before


def test_a_spec_is_checked_with_its_lines_and_may_not_name_a_pg(workdir: Path) -> None:
    bad = _spec(workdir, "name = 'x'\n[workload]\nclients = 0\n")
    res = cli_here("ab", "18", "--patch", str(EMPTY), "--spec", str(bad))
    assert res.returncode == 2 and "spec.toml:3: workload.clients" in res.stderr
    own = _spec(workdir, "name = 'x'\n[matrix]\npg = ['18']\n", "own.toml")
    res = cli_here("ab", "18", "--patch", str(EMPTY), "--spec", str(own))
    assert res.returncode == 2 and "ab sets the pg axis" in res.stderr
    assert "Traceback" not in res.stderr


def test_standby_anatomy_is_turned_on_unless_the_spec_says_whether() -> None:
    """--standby-anatomy sets [probes] standby_anatomy for the anatomy repeats; a spec
    that says whether keeps its word (no server: the spec ab would run)."""
    base: Table = {"name": "x", "probes": {"sched": False}}
    on, text = with_builds(base, "stock", "patched", standby_anatomy=True)
    assert on.probes.standby_anatomy and on.probes.anatomy and "standby_anatomy" in text
    assert base == {"name": "x", "probes": {"sched": False}}  # not changed in place
    assert not with_builds(base, "stock", "patched")[0].probes.standby_anatomy
    own: Table = {"name": "x", "probes": {"standby_anatomy": False}}
    assert not with_builds(own, "stock", "patched", standby_anatomy=True)[0] \
        .probes.standby_anatomy


def test_an_output_folder_holding_a_run_is_not_overwritten(workdir: Path) -> None:
    (workdir / "run-18.6").mkdir()
    (workdir / "run-18.6" / "syncrep-lab.sqlite").write_text("")
    res = cli_here("ab", "18", "--patch", str(EMPTY), "--out", str(workdir))
    assert res.returncode == 2 and "already holds an ab run" in res.stderr
    assert "--resume" in res.stderr
    res = cli_here("ab", "18", "--patch", str(EMPTY), "--out", str(workdir / "new"),
                   "--resume")
    assert res.returncode == 2 and "holds no ab run to finish" in res.stderr


@pytest.fixture(scope="module")
def stock_18() -> str:
    """Stock 18 as ``ab 18`` takes it, found in the suite's cache or built into it now
    (a machine's first run, or this module run alone): what a test pictures of the cache
    is then taken with it there, as it is once ``ab`` has run."""
    return build("18", [], "release").name


@pytest.mark.parametrize(("patch", "needles"), [
    ("does_not_apply.patch", ["does_not_apply.patch does not apply", "Hunk #1 FAILED"]),
    ("does_not_compile.patch", ["make failed", "the compiler's errors:",
                                "syncrep.c:184:24: error: expected"]),
])
def test_a_patch_that_does_not_apply_or_compile_is_refused_and_nothing_is_cached(
        patch: str, needles: list[str], workdir: Path, stock_18: str) -> None:
    """Stock is in the cache (the fixture); the patched build fails at once (the patch)
    or in a few seconds (make recompiles the one file), and leaves no build and no run."""
    before = {b.name for b in list_builds()}
    assert stock_18 in before
    res = cli_here("ab", "18", "--patch", str(PATCHES / patch), "--out",
                   str(workdir / "ab"))
    assert res.returncode == 2, res.stdout + res.stderr
    for needle in needles:
        assert needle in res.stderr, res.stderr
    assert "nothing was" in res.stderr and "Traceback" not in res.stderr
    assert {b.name for b in list_builds()} == before
    assert not (workdir / "ab").exists()


SMALL = (Path(__file__).parent / "data" / "ab-small.toml").read_text()


def _ab(root: Path, patch: Path, probes: str, name: str, rounds: int, *more: str
        ) -> dict[str, Any]:
    spec = _spec(root, SMALL.format(probes=probes, rounds=rounds, confidence=0.99),
                 f"{name}.toml")
    res = cli("ab", "18", "--patch", str(patch), "--spec", str(spec), "--out",
              str(root / name), *more, timeout=1800, cwd=root)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    # within the width, but for a word longer than a line (a path), kept whole on its own
    assert lines and all(len(ln) <= WIDTH or len(ln.split()) == 1 for ln in lines), [
        ln for ln in lines if len(ln) > WIDTH]
    assert (root / name / "summary.txt").read_text().splitlines() == lines
    answer: dict[str, Any] = json.loads((root / name / "ab.json").read_text())
    return answer


def _probe_states(out: Path, probe: str) -> list[tuple[str, str, str]]:
    """What a probe's rows say in every run an ``ab`` wrote under ``out``: its status and
    reason per repeat, the cause where a figure is missing."""
    found = []
    for db in sorted(out.glob("run-*/syncrep-lab.sqlite")):
        with sqlite3.connect(db) as con:
            found += [(db.parent.name, status, reason or "") for status, reason in con.execute(
                "select status, reason from probes where probe = ?", (probe,))]
    return found


def _flame_rows(out: Path) -> list[tuple[str, int, str, str, int, bool]]:
    """Every stored flame graph an ``ab`` wrote under ``out``: its run, repeat, node,
    role, µs on CPU and whether its folded stacks are there (a missing graph's cause)."""
    found = []
    for db in sorted(out.glob("run-*/syncrep-lab.sqlite")):
        with sqlite3.connect(db) as con:
            found += [(db.parent.name, repeat, node, role, cpu_us,
                       (db.parent / folded).is_file())
                      for repeat, node, role, cpu_us, folded in con.execute(
                          "select repeat_id, node, role, cpu_us, folded_path "
                          "from flamegraphs")]
    return found


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    path = shared_tmp("srl-ab-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_patch_that_changes_nothing_is_an_a_a(root: Path) -> None:
    """The same bytes on both sides (an empty patch: stock's installation copied, no
    build): every ratio's interval holds 1, the control holds, the differential flame
    graphs show no frame beyond the sampling noise. With --standby-anatomy the wait for
    standby b is split on both sides, each part's ratio given and none marked (one
    anatomy repeat a cell, the default: no interval, so none can be; the anatomy
    repeats add some 20 s here, two a cell would add as much again)."""
    answer = _ab(root, EMPTY, "", "aa", 3, "--standby-anatomy")
    side = answer["bases"][0]
    assert side["patched"]["copy_of"] == side["stock"]["name"]
    assert side["patched"]["seconds"] == 0.0 and "A/A" in side["note"]
    assert side["patches"][0]["changes_files"] is False
    ab = side["answer"]
    assert [(c["level"], c["control"]) for c in ab["cells"]] == [("on", False),
                                                               ("local", True)]
    for cell in ab["cells"]:
        r = cell["ratio"]
        assert r["paired"] and r["rounds"] == 3
        assert r["low"] <= 1 <= r["high"], cell
        assert cell["verdict"] == "no change" and r["detectable_pct"] > 0
        assert {"primary", "b", "c"} <= {role["node"] for role in cell["roles"]}
        backend = next(x for x in cell["roles"] if x["role"] == "backend"
                       and x["node"] == "primary")
        # CPU per commit paired by round, like the ratio (its interval is not asserted:
        # with a dozen roles a cell, one of them misses 1 by chance in most A/As)
        # every measured repeat's backends seen, however short (a 1 s repeat polled
        # once a second lost them in 7 of 12)
        assert backend["cpu_us"]["stock"]["n"] == backend["cpu_us"]["patched"]["n"] == 3
        assert backend["cpu_us"]["paired_rounds"] == 3
        assert backend["cpu_us"]["low"] < backend["cpu_us"]["ratio"] < backend["cpu_us"]["high"]
        if not cell["control"]:
            # b is the sync standby of 1(b,c): the server said so in the probed repeat,
            # whatever c's walsender does in SyncRepReleaseWaiters
            assert cell["model"]["walsender"] == "walsender:b", cell["model"]
        graphs = {(g["node"], g["role"]): g for g in cell["flame"]}
        # the walsender's graph where it works for every commit: under `local` it may
        # take no sample in a 1 s probed repeat on a loaded machine (seen: a suite beside
        # three others), and a role without samples on one side has no graph
        assert ("primary", "backend") in graphs and (
            cell["control"] or ("primary", "walsender:b") in graphs), (
            sorted(graphs), _probe_states(root / "aa", "flamegraphs"), _flame_rows(root / "aa"))
        assert all(Path(g["svg"]).stat().st_size > 1000 for g in graphs.values())
    assert ab["control"]["held"] is True
    assert ab["sync_walsender"] == "walsender:b"
    # a cost is marked as moved over all the cell compares (Bonferroni: marked at the
    # level each, A/As marked 0 to 6 of a cell's 50-odd figures, bench/ab_false_marks.py)
    marked = [(c["level"], r["node"], r["role"], name) for c in ab["cells"]
              for r in c["roles"]
              for name, fig in [("cpu", r["cpu_us"]), *r["syscalls"].items()]
              if fig is not None and fig["significant"]]
    assert all(c["figures_tested"] >= 20 for c in ab["cells"]), \
        [c["figures_tested"] for c in ab["cells"]]
    assert len(marked) <= 1 and sum(len(c["moved"]) for c in ab["cells"]) <= 1, marked
    # Bonferroni over every frame: one chance frame would be 1 run in 20 or less; two
    # in one A/A would be a differential that reads noise as change
    assert sum(g["moved_count"] for c in ab["cells"] for g in c["flame"]) <= 1
    on = ab["cells"][0]
    for which in ("stock", "patched"):
        halves = {h["standby"]: h for h in on["anatomy"][which]["standby"]}
        b = halves["standby:b"]  # the sync standby's; fsync off: no flush in it
        assert {"send", "transit_out", "write", "reply", "transit_back",
                "reply_handling"} <= b["parts"].keys() and "flush" not in b["parts"], b
        # (the probe's rows say what the join did where the sum check failed:
        # probes/standby_anatomy.misjoined; the repeat's events are kept beside them)
        assert b["commits"] > 100 and 0.8 < b["sum_ratio"] < 1.2, (
            b, _probe_states(root / "aa", "standby_anatomy"))
    parts = [f for f in on["standby_half"] if f["standby"] == "standby:b"]
    assert len(parts) >= 6 and all(f["ratio"] > 0 and f["low"] is None
                                   and f["stock"]["n"] == f["patched"]["n"] == 1
                                   for f in parts), parts
    assert not [f["part"] for c in ab["cells"] for f in c["standby_half"]
                if f["significant"]]
    summary = " ".join((root / "aa" / "summary.txt").read_text().split())
    assert "the control held" in summary and "a copy of the stock build" in summary
    assert f"--patch {EMPTY}" in summary and "--standby-anatomy" in summary
    assert "the wait for standby b, µs per commit joined" in summary
    assert "transit out" in summary and "the parts sum to" in summary
    # the run's report shows the answer too
    page = (root / "aa" / side["report"]).read_text()
    assert "The patch's verdict (syncrep-lab ab)" in page and 'href="#ab"' in page
    assert "the control held" in " ".join(page.split())


def test_a_known_cost_in_the_wait_is_found_and_the_control_holds(root: Path) -> None:
    """5 ms asleep at the start of every commit's wait for a standby (after the return
    of a level that does not wait): on is clearly slower, local is not. No probed
    repeats: the ratios are what is asserted. Four rounds: at 99 % over three, one
    round far from the other two (a mean of 0.080 where rounds give about 0.047) once
    stretched the interval past 1 (t = 9.9 on 2 degrees, 5.8 on 3)."""
    answer = _ab(root, SLEEP, "probed_repeats = 0", "sleep", rounds=4)
    side = answer["bases"][0]
    assert side["patched"]["patches"][0]["name"] == SLEEP.name
    assert side["patched"]["name"] != side["stock"]["name"]
    cells = {c["level"]: c for c in side["answer"]["cells"]}
    on, local = cells["on"], cells["local"]
    assert on["verdict"] == "slower" and on["ratio"]["high"] < 0.8, on["ratio"]
    assert local["ratio"]["low"] <= 1 <= local["ratio"]["high"], local["ratio"]
    assert side["answer"]["control"]["held"] is True
    assert on["anatomy"] == {"stock": None, "patched": None} and on["flame"] == []
    summary = " ".join((root / "sleep" / "summary.txt").read_text().split())
    assert "slower" in summary and "flame graphs: none on one side" in summary


def test_a_git_base_is_its_commit_exported_once(tmp_path: Path) -> None:
    """--base COMMIT: the commit's files as a tarball in the builds cache (what pg build
    then builds as stock), made once per commit; a name git does not know is refused."""
    import subprocess
    import tarfile

    tree = tmp_path / "postgresql"
    (tree / "src" / "backend").mkdir(parents=True)
    (tree / "configure").write_text("# stock\n")

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tree), "-c", "user.name=t", "-c",
                               "user.email=t@t", *args], check=True, capture_output=True,
                              text=True).stdout.strip()

    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "stock")
    (tree / "configure").write_text("# patched, not committed\n")
    said: list[str] = []
    tarball, sha = sources.export_commit(tree, "HEAD", said.append)
    assert sha == git("rev-parse", "HEAD") and tarball.is_relative_to(paths.builds_dir())
    with tarfile.open(tarball) as tar:
        member = tar.extractfile(f"postgresql-{sha[:12]}/configure")
        assert member is not None and member.read() == b"# stock\n"
    assert said == [f"exporting commit {sha[:12]} of {tree}"]
    again, _ = sources.export_commit(tree, sha[:8], said.append)
    assert again == tarball and len(said) == 1  # found, not made again
    tarball.unlink()
    with pytest.raises(UserError, match="--base nosuch: not a commit of"):
        sources.export_commit(tree, "nosuch", said.append)
    res = cli_here("ab", str(tree), "--base", "nosuch")
    assert res.returncode == 2 and "git -C" in res.stderr and "Traceback" not in res.stderr


def test_patches_go_to_the_bases_they_name(tmp_path: Path) -> None:
    """--patch VERSION=FILE to that base (a release of that major too), a bare FILE to
    every base, each base's patches in the order given."""
    one, two = tmp_path / "one.patch", tmp_path / "a=b.patch"
    one.write_text("")
    two.write_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    request = sources.parse_request(["15.18", "18"], [f"15={one}", str(two), f"18={one}"],
                                    None)
    assert [p.name for p in request.patches["15.18"]] == ["one.patch", "a=b.patch"]
    assert [p.name for p in request.patches["18"]] == ["a=b.patch", "one.patch"]
    assert [p.changes for p in request.patches["18"]] == [True, False]
    with pytest.raises(UserError, match="no patch for 18"):
        sources.parse_request(["15", "18"], [f"15={one}"], None)
