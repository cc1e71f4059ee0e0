"""Duets (``[run] order = "duet"``, ``ab --duet``): each cell and its baseline at the same
moment, each a cluster of its own on CPUs of its own, the CPU sets swapped every round.

The pairing rules and the CPU sets are checked without a server; the A/A runs ``ab
--duet`` on the suite's cached stock 18 with an empty patch (its copy, no build), the
small spec tests/test_ab.py uses, three crossover units (six rounds: each side on each
CPU set three times); the interrupt runs two clusters of one build that differ by a settings set
alike in every value.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
import tomllib
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from syncrep_lab.analysis.ratios import BaselineRatio
from syncrep_lab.errors import UserError
from syncrep_lab.patch_ab.answer import (
    Compared,
    CpuFigure,
    Figure,
    RoleCosts,
    SideFigure,
    has_pmu,
    tightest,
)
from syncrep_lab.patch_ab.spec import default_spec, with_builds
from syncrep_lab.placement.cgroups import TOP, cpuset_support
from syncrep_lab.plan.duet import NotPaired, duet_pairs
from syncrep_lab.plan.load import load_spec, with_order
from syncrep_lab.plan.matrix import expand
from syncrep_lab.plan.spec import preset_text
from syncrep_lab.run.clusters import POOL_MEMORY_SHARE, cluster_memory, duet_units, slot_dir
from syncrep_lab.run.duet import Sides, baseline_first, cannot, sides
from syncrep_lab.run.rounds import Member, Rounds
from syncrep_lab.terminal.ab import WIDTH

from .helpers import (
    cli,
    cli_here,
    descendants,
    machine_wide,
    run_postmasters,
    still_alive,
    wait_until,
)

SMALL = (Path(__file__).parent / "data" / "ab-small.toml").read_text()
EMPTY = Path(__file__).parent / "data" / "patches" / "empty.patch"

TWINS = """\
name = "twins"

[topology]
standbys = 1

[workload]
clients = 2
duration = {duration}
warmup = 0

[matrix]
settings = {sets}
synchronous_commit = ["on"]

[settings]
shared_buffers = "16MB"
fsync = "off"

[settings_sets.twin]
shared_buffers = "16MB"

[settings_sets.third]
shared_buffers = "16MB"

[run]
repeats_min = {rounds}
repeats_max = {rounds}
seed = 7
order = "duet"

[compare]
baseline = {{ settings = "default" }}

[probes]
probed_repeats = 0
"""


def _twins(sets: str = '["default", "twin"]', rounds: int = 4, duration: int = 1) -> str:
    return TWINS.format(sets=sets, rounds=rounds, duration=duration)


# --- without a server -------------------------------------------------------------------


def test_a_duet_whose_cells_have_no_partner_is_refused_with_the_fix() -> None:
    """A baseline rule that no cell meets: each cell is compared with none."""
    with pytest.raises(UserError) as caught:
        load_spec(_twins('["twin", "third"]'), "alone.toml")
    text = str(caught.value)
    for needle in ["set=twin sc=on, set=third sc=on are compared with none",
                   "run.order", "[compare] baseline", 'order = "interleaved"',
                   "alone.toml:"]:
        assert needle in text, text


def test_a_baseline_shared_by_two_cells_runs_beside_each() -> None:
    spec = load_spec(_twins('["default", "twin", "third"]'), "three.toml")
    pairs = duet_pairs(spec, expand(spec).cells)
    assert [(p.base.settings_set, p.cell.settings_set, p.twin) for p in pairs] == [
        ("default", "twin", False), ("default", "third", False)]


def test_a_pair_on_one_cluster_runs_its_cell_on_a_twin() -> None:
    one = _twins().replace('settings = ["default", "twin"]', "clients = [2, 4]").replace(
        'baseline = { settings = "default" }', "baseline = { clients = 2 }")
    spec = load_spec(one, "one.toml")
    (pair,) = duet_pairs(spec, expand(spec).cells)
    assert (pair.base.clients, pair.cell.clients, pair.twin) == (2, 4, True)


def test_the_seed_preset_in_duet_pairs_each_comparison() -> None:
    """run --preset seed --duet: every comparison of the seed a pair, local beside each
    level, group 1's on the baseline of batch 10 and of the link (and a cell beside
    local itself), twins where the two share a cluster; --check lists them."""
    spec = load_spec(with_order(preset_text("seed"), "duet"), "seed")
    assert spec.run.order == "duet"
    cells = expand(spec).cells
    pairs = {(p.base.label, p.cell.label): p.twin for p in duet_pairs(spec, cells)}
    g1 = "standbys=2 sc={} batch=1 link=socket"
    assert pairs == {
        (g1.format("local"), g1.format("off")): True,
        (g1.format("local"), g1.format("remote_write")): True,
        (g1.format("local"), g1.format("on")): True,
        (g1.format("on"), "standbys=2 sc=on batch=10 link=socket"): True,
        (g1.format("on"), "standbys=2 sc=on batch=1 link=seed-lan"): False,
        ("standbys=0 sc=off batch=1 link=socket", "standbys=0 sc=on batch=1 link=socket"):
            True,
    }
    res = cli_here("run", "--preset", "seed", "--duet", "--check")
    assert res.returncode == 0, res.stderr
    assert "duet: 6 pairs a round" in res.stdout and "on a twin of its cluster" in res.stdout


def test_a_duet_whose_clusters_do_not_fit_together_runs_in_units_of_pairs() -> None:
    """The seed in duet on a machine that can hold two of its clusters at once: the
    four pairs on group 1's cluster and its twin in one unit, the link's pair (group
    1's cluster and the link's) in a second, group 7's pair and its twin in a third;
    with room for all, one unit; without room for one pair, refused with the figures
    (the run is then interleaved)."""
    spec = load_spec(with_order(preset_text("seed"), "duet"), "seed")
    pairs = duet_pairs(spec, expand(spec).cells)
    one = cluster_memory(spec, pairs[0].base)
    made, said = duet_units(spec, pairs, available=int(2.1 * one / POOL_MEMORY_SHARE))
    assert [[n for n, _ in u.pairs] for u in made] == [[0, 1, 2, 3], [4], [5]]
    assert [len(u.keys) for u in made] == [2, 2, 2]
    assert said is not None and "6 pairs in 3 units of 4, 1, 1 pairs" in said, said
    made, said = duet_units(spec, pairs, available=100 * one)
    assert [len(u.pairs) for u in made] == [6] and len(made[0].keys) == 5 and said is None
    with pytest.raises(NotPaired, match="both clusters of a pair at once"):
        duet_units(spec, pairs, available=one)


def test_run_duet_sets_the_order_in_the_stored_text_or_says_why_not() -> None:
    assert 'order = "duet"' in with_order(preset_text("quick"), "duet")
    with pytest.raises(UserError, match="write \\[run\\] as a table of its own"):
        with_order('name = "x"\nrun = { repeats_min = 2 }\n', "duet")
    res = cli_here("run", "--resume", "--out", "nowhere", "--duet")
    assert res.returncode == 2 and "leave out SPEC, --preset, --check and --duet" in \
        res.stderr, res.stderr


def test_a_duet_cell_is_judged_against_the_baseline_beside_it() -> None:
    """The stop rule's series: a cell's ratio to the baseline's value of its own pair
    (``partner``), not the baseline's first of the round (which ran beside another)."""
    base = Member(0, "local", None, {1: 100.0, 2: 100.0})
    cell = Member(1, "on", 0, {1: 50.0, 2: 50.0}, partner={1: 80.0, 2: 60.0})
    other = Member(2, "rw", 0, {1: 90.0, 2: 90.0})
    rounds = Rounds([base, cell, other], seed=1, group="g", repeats_min=1, repeats_max=4,
                    ci_target=0.02, confidence=0.95, crossover=True)
    assert rounds.series(cell) == pytest.approx([math.log(50 / math.sqrt(80 * 60))])
    assert rounds.series(other) == pytest.approx([math.log(0.9)])


def test_ab_duet_pairs_each_patched_cell_with_its_stock_twin() -> None:
    spec, text = with_builds(default_spec("ab", "x", [8, 64], "8m"), "stock", "patched",
                             duet=True)
    assert spec.run.order == "duet" and 'order = "duet"' in text
    pairs = duet_pairs(spec, expand(spec).cells)
    assert len(pairs) == 6  # three levels at two client counts
    for pair in pairs:
        assert (pair.base.pg, pair.cell.pg) == ("stock", "patched")
        assert pair.base.synchronous_commit == pair.cell.synchronous_commit
        assert pair.base.clients == pair.cell.clients


def test_ab_duet_aims_at_2_percent_unless_the_spec_sets_a_target() -> None:
    own = tomllib.loads(SMALL.format(probes="", rounds=3, confidence=0.95))
    assert "ci_target" not in own["run"]
    assert with_builds(own, "s", "p", duet=True)[0].run.ci_target == 0.02
    assert with_builds(own, "s", "p")[0].run.ci_target == 0.03  # interleaved: as it was
    own["run"]["ci_target"] = 0.05
    assert with_builds(own, "s", "p", duet=True)[0].run.ci_target == 0.05


def _fig(ratio: float, low: float, high: float, significant: bool = True) -> Figure:
    side = SideFigure(3, 1.0, 0.9, 1.1)
    return Figure(side, side, ratio, low, high, significant)


def test_the_tightest_measure_that_moved_is_named_with_how_it_was_paired() -> None:
    """TPS's interval excludes 1 at ±5 %; the walsender's CPU per commit moved at
    ±2 % over crossover units, a backend's CPU at ±1 % but not marked moved, a system
    call at ±1.5 % from the probed repeats: the call is the tightest and says it is not
    paired; without it, the walsender's CPU."""
    ratio = BaselineRatio("stock", 0, 0.93, 0.885, 0.977, 8, True, 4.0,
                          crossover_units=4)
    side = SideFigure(8, 10.0, 9.0, 11.0)
    cpu = CpuFigure(side, side, 1.05, 1.03, 1.071, True, paired_rounds=8,
                    crossover_units=4)
    quiet = CpuFigure(side, side, 1.0, 0.99, 1.01, False)
    call = _fig(1.2, 1.182, 1.218)
    roles = (RoleCosts("primary", "walsender:b", "untraced", cpu, {"sendto": call}),
             RoleCosts("primary", "backend", "untraced", quiet, {}))
    compared = Compared(roles, (), (), 10, None, None, None, (), None)
    found = tightest(ratio, compared)
    assert found is not None and found.measure == "primary walsender:b sendto per commit"
    assert found.how == "probed repeats, not paired"
    alone = dataclasses.replace(compared, roles=(dataclasses.replace(roles[0], syscalls={}),
                                                 roles[1]))
    found = tightest(ratio, alone)
    assert found is not None and found.how == "crossover units"
    assert found.measure == "primary walsender:b CPU µs per commit"
    assert found.half_width_rel == pytest.approx(0.02, abs=1e-3)
    held = dataclasses.replace(ratio, low=0.9, high=1.1)
    assert tightest(held, None) is None


def test_a_pmu_is_its_instructions_event(tmp_path: Path) -> None:
    assert not has_pmu(tmp_path)
    (tmp_path / "software" / "events").mkdir(parents=True)
    assert not has_pmu(tmp_path)
    (tmp_path / "cpu" / "events").mkdir(parents=True)
    (tmp_path / "cpu" / "events" / "instructions").write_text("event=0xc0\n")
    assert has_pmu(tmp_path)


def test_the_sides_swap_cpus_every_round_and_one_cpu_is_no_duet() -> None:
    split = sides([0, 1, 2])  # the odd one out left idle: the sides are alike
    assert split == Sides([0], [1])
    for k in range(1, 5):
        assert {tuple(split.of(k, True)), tuple(split.of(k, False))} == {(0,), (1,)}
        assert split.of(k, True) == split.of(k + 1, False)
    assert sides([3]) is None and cannot([0, 1]) is None
    why = cannot([3])
    assert why is not None and "1 CPU (3)" in why and "interleaved instead" in why
    firsts = [baseline_first(7, "g", k, 0) for k in range(1, 41)]
    assert 5 < sum(firsts) < 35  # a coin, not a constant
    assert firsts == [baseline_first(7, "g", k, 0) for k in range(1, 41)]  # reproducible


# --- on real servers --------------------------------------------------------------------


UNITS = 5  # the A/A's crossover units (two rounds each)


def _when(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_an_a_a_in_duet_holds_1_and_its_pairs_ran_at_once_on_swapped_cpus(workdir: Path
                                                                          ) -> None:
    """ab --duet of the same bytes on both sides: every ratio's interval holds 1, the
    crossover's (three units of two rounds: repeats_min and repeats_max count units in
    a duet) and the per-round one of the same rounds kept beside it; the two repeats of
    every pair overlap in time, each side had one CPU and the other side the other, and
    each cell's CPU changed every round.

    The test reads four intervals (two cells, crossover and per round): each at 99.8 %,
    so that an A/A that is as it should be fails it less than once in a hundred suites
    (at 99 % over three units, one CI run in the suite's first dozen had an `on` interval
    of low 1.227 beside another test's load: the 1 % each interval is allowed, four
    times over). Five units keep them narrow enough to catch a side whose CPU set was
    not the one the crossover cancels: with a busy loop pinned to CPU 0, the rounds'
    ratios here were 0.57 to 0.71 and 1.53 to 1.74 by the side's set, the units' 0.96
    to 1.05."""
    spec = workdir / "aa.toml"
    spec.write_text(SMALL.format(probes="probed_repeats = 0", rounds=UNITS, confidence=0.998))
    out = workdir / "aa"
    res = cli("ab", "18", "--patch", str(EMPTY), "--spec", str(spec), "--out", str(out),
              "--duet", timeout=1800, cwd=workdir)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    # within the width, but for a word longer than a line (a path), kept whole on its own
    assert lines and all(len(ln) <= WIDTH or len(ln.split()) == 1 for ln in lines), [
        ln for ln in lines if len(ln) > WIDTH]
    answer: dict[str, Any] = json.loads((out / "ab.json").read_text())
    assert "--duet" in answer["command"]
    ab = answer["bases"][0]["answer"]
    note = ab["order_note"]
    assert ab["order"] == "duet" and "CPUs 0 and 1" in note, note
    assert "crossover of two rounds" in note, note
    for cell in ab["cells"]:
        r = cell["ratio"]
        assert r["paired"] and r["rounds"] == 2 * UNITS and r["crossover_units"] == UNITS, r
        assert r["unpaired_rounds"] == 0, r
        assert r["low"] <= 1 <= r["high"], cell
        each = r["per_round"]
        assert each["paired"] and each["rounds"] == 2 * UNITS and "per_round" not in each, each
        assert each["low"] <= 1 <= each["high"], cell
    assert any("no hardware PMU" in n for n in ab["work_notes"]) == (
        not Path("/sys/bus/event_source/devices/cpu").exists())
    summary = " ".join(res.stdout.split())
    assert "duet rounds" in summary and "simultaneous pairs, a crossover of two rounds" \
        in summary, summary
    assert "The same rounds paired one by one" in summary
    assert "Measures that moved" in summary
    db = sqlite3.connect(out / answer["bases"][0]["run"] / "syncrep-lab.sqlite")
    db.row_factory = sqlite3.Row
    reps = db.execute("select r.*, c.idx from repeats r join cells c on c.id = r.cell_id "
                      "where r.probed = 0").fetchall()
    pairs: dict[tuple[int, int], list[sqlite3.Row]] = {}
    for r in reps:
        pairs.setdefault((r["round"], r["pair"]), []).append(r)
    assert len(pairs) == 4 * UNITS and all(len(p) == 2 for p in pairs.values()), pairs.keys()
    for (_, _), (a, b) in pairs.items():
        assert {a["cpus"], b["cpus"]} == {"0", "1"}
        assert {a["position"], b["position"]} == {0, 1}
        a0, b0 = _when(a["started_at"]), _when(b["started_at"])
        assert a0 < b0 + b["duration_s"] and b0 < a0 + a["duration_s"], (a0, b0)
        assert abs(a0 - b0) < 0.5  # launched back to back
    for idx in {r["idx"] for r in reps}:
        cpus = [r["cpus"] for r in sorted(reps, key=lambda r: r["round"])
                if r["idx"] == idx]
        assert all(x != y for x, y in pairwise(cpus)), cpus
    # what the kernel gave the side's processes, read back mid-repeat
    placed = db.execute("select r.cpus, p.cpus as seen from placement p join repeats r "
                        "on r.id = p.repeat_id where p.role in ('backend', 'pgbench')"
                        ).fetchall()
    assert placed and all(p["cpus"] == p["seen"] for p in placed)


def test_a_duet_ends_within_its_budget_and_a_minute(workdir: Path) -> None:
    """A duet with a budget of 20 s, a target it cannot meet and a probed repeat a cell
    after the rounds: the rounds stop in whole crossover units (an even number, at least
    2 units), the budget said so, and the command ends within the budget and a minute
    (10.3 s here, 4 rounds: the floor, since a unit is started only with the time for
    both its rounds and the probed repeats). The budget is the runner's, the same for
    ``run`` and ``ab`` (whose builds it leaves out): the twins' two cells are half of
    ab's four."""
    budget = 20
    text = _twins(rounds=50).replace("repeats_min = 50", "repeats_min = 2").replace(
        "repeats_max = 50", f'repeats_max = 50\nci_target = 0.0001\nbudget = "{budget}s"')
    text = text.replace("probed_repeats = 0", "probed_repeats = 1\nflamegraphs = false\n"
                        "anatomy = false\nsched = false")
    assert "ci_target = 0.0001" in text and "probed_repeats = 1" in text
    (workdir / "budget.toml").write_text(text)
    out = workdir / "budget"
    started = time.monotonic()
    res = cli("run", str(workdir / "budget.toml"), "--out", str(out), timeout=900)
    took = time.monotonic() - started
    assert res.returncode == 0, res.stdout + res.stderr
    db = sqlite3.connect(out / "syncrep-lab.sqlite")
    assert db.execute("select order_mode from runs").fetchone()[0] == "duet"
    assert [r[0] for r in db.execute("select stop_reason from cells")] == ["budget"] * 2
    rounds = dict(db.execute("select cell_id, count(*) from repeats where probed = 0 "
                             "group by cell_id").fetchall())
    probed = dict(db.execute("select cell_id, count(*) from repeats where probed = 1 "
                             "group by cell_id").fetchall())
    assert len(set(rounds.values())) == 1 and all(n % 2 == 0 and n >= 4
                                                  for n in rounds.values()), rounds
    assert set(probed.values()) == {1}, probed
    rows = json.loads(cli_here("results", str(out), "--json").stdout)
    ratio = next(r["ratio_to_baseline"] for r in rows if r["ratio_to_baseline"])
    assert ratio["crossover_units"] >= 2 and ratio["unpaired_rounds"] == 0, ratio
    assert took <= budget + 60, f"{took:.0f} s for a {budget} s budget"


@machine_wide
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_an_interrupted_duet_leaves_nothing_behind(workdir: Path, signum: int) -> None:
    """SIGTERM while both sides' clients run: the run ends with 128 + SIGTERM and
    leaves no server, client, cluster folder or cpuset of either side; after kill -9,
    ``clean`` removes them."""
    work = workdir / f"sig{signum}"
    work.mkdir()
    (work / "spec.toml").write_text(_twins(rounds=5, duration=4))
    out = work / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "syncrep_lab", "run", str(work / "spec.toml"), "--out",
         str(out)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        def both_clients() -> bool:
            return sum("pgbench" in c.split(" ", 1)[0] for c in
                       descendants(proc.pid).values()) >= 2

        wait_until(both_clients, 180, "both sides' pgbench")
        seen = descendants(proc.pid)
        assert len(run_postmasters(out)) >= 4  # two clusters of a primary and a standby
        assert _cpusets(out)
        os.kill(proc.pid, signum)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == (128 + signum if signum == signal.SIGTERM else -signum), err
    assert "Traceback" not in err
    if signum == signal.SIGKILL:
        res = cli("clean")
        assert res.returncode == 0, res.stdout + res.stderr
    wait_until(lambda: not still_alive(seen), 30, "the run's processes to end")
    assert run_postmasters(out) == []
    assert not any((slot_dir(out, s) / "syncrep-lab.json").exists() for s in range(4))
    assert _cpusets(out) == []


def _cpusets(out: Path) -> list[str]:
    """The cpuset groups of the run in ``out`` (both sides'), by name."""
    support = cpuset_support()
    if support.root is None:
        return []
    digest = slot_dir(out, 0).name[4:]
    groups = support.root / TOP
    return sorted(p.name for p in groups.iterdir() if p.name.startswith(digest)) \
        if groups.is_dir() else []


def test_one_cpu_is_no_duet_the_run_is_interleaved_and_says_why(workdir: Path) -> None:
    """Held to one CPU (taskset, which every child inherits): the duet falls back to
    interleaved rounds, and the output, the store's order and its note say why."""
    work = workdir / "one-cpu"
    work.mkdir()
    (work / "spec.toml").write_text(_twins(rounds=2))
    out = work / "run"
    res = subprocess.run(
        ["taskset", "-c", "0", sys.executable, "-m", "syncrep_lab", "run",
         str(work / "spec.toml"), "--out", str(out)], capture_output=True, text=True,
        timeout=300, check=False, stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "200"})
    assert res.returncode == 0, res.stdout + res.stderr
    said = " ".join((res.stdout + res.stderr).split())
    assert "gives the run 1 CPU (0) and a duet needs one a side" in said, said
    db = sqlite3.connect(out / "syncrep-lab.sqlite")
    mode, note = db.execute("select order_mode, order_note from runs").fetchone()
    assert mode == "interleaved" and "interleaved instead" in note, note
    rows = db.execute("select round, pair, cpus from repeats").fetchall()
    assert len(rows) == 4 and {r[0] for r in rows} == {1, 2}
    assert all(r[1] is None and r[2] is None for r in rows), rows


# local the baseline of on and remote_write, all three on one cluster key
SHARED = _twins(rounds=2).replace(
    'settings = ["default", "twin"]\nsynchronous_commit = ["on"]',
    'synchronous_commit = ["local", "on", "remote_write"]').replace(
    'baseline = { settings = "default" }', 'baseline = { synchronous_commit = "local" }')


def test_a_shared_baseline_runs_beside_each_cell_and_its_pairs_on_twins(workdir: Path
                                                                       ) -> None:
    """local the baseline of on and remote_write, all three on one cluster key: each
    round runs local beside on and beside remote_write (two pairs), the other side on
    a twin of the cluster (two clusters of one key recorded), the two repeats of a pair
    at the same moment on the two CPUs; each ratio is taken to the local repeats of its
    own pair, over two crossover units."""
    assert 'synchronous_commit = ["local", "on", "remote_write"]' in SHARED
    (workdir / "shared.toml").write_text(SHARED)
    out = workdir / "shared"
    res = cli("run", str(workdir / "shared.toml"), "--out", str(out), timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    db = sqlite3.connect(out / "syncrep-lab.sqlite")
    db.row_factory = sqlite3.Row
    assert db.execute("select order_mode from runs").fetchone()[0] == "duet"
    keys = [r[0] for r in db.execute("select cluster_key from clusters")]
    assert len(keys) == 2 and len(set(keys)) == 1, keys  # the cluster and its twin
    reps = db.execute("select r.*, c.params_json from repeats r join cells c "
                      "on c.id = r.cell_id where r.probed = 0").fetchall()
    level = {r["id"]: json.loads(r["params_json"])["synchronous_commit"] for r in reps}
    by_pair: dict[tuple[int, int], list[sqlite3.Row]] = {}
    for r in reps:
        by_pair.setdefault((r["round"], r["pair"]), []).append(r)
    assert len(by_pair) == 8, sorted(by_pair)  # 4 rounds of 2 pairs
    partner: dict[int, str] = {}
    for (_, number), (a, b) in by_pair.items():
        levels = {level[a["id"]], level[b["id"]]}
        assert "local" in levels and len(levels) == 2, levels
        other = (levels - {"local"}).pop()
        assert partner.setdefault(number, other) == other  # a pair is one comparison
        assert {a["cpus"], b["cpus"]} == {"0", "1"}
        a0, b0 = _when(a["started_at"]), _when(b["started_at"])
        assert a0 < b0 + b["duration_s"] and b0 < a0 + a["duration_s"], (a0, b0)
    assert sorted(partner.values()) == ["on", "remote_write"]
    rows = {r["params"]["synchronous_commit"]: r for r in
            json.loads(cli_here("results", str(out), "--json").stdout)}
    assert rows["local"]["ratio_to_baseline"] is None
    for name in ("on", "remote_write"):
        ratio = rows[name]["ratio_to_baseline"]
        assert ratio["paired"] and ratio["crossover_units"] == 2, ratio
        assert ratio["rounds"] == 4 and ratio["unpaired_rounds"] == 0, ratio
    assert run_postmasters(out) == []
