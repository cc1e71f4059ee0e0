"""Clusters held up together: the cells of two clusters interleaved in shared rounds on
real servers (a cross-cluster comparison paired within rounds), and which clusters the
pool refuses to hold together, with the reason."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from syncrep_lab.plan.load import load_spec
from syncrep_lab.plan.matrix import expand
from syncrep_lab.run.clusters import cluster_memory, setting_bytes, slot_dir, units
from syncrep_lab.run.context import Events
from syncrep_lab.run.rounds import round_order
from syncrep_lab.run.runner import ROUND_SPAN, _by_cluster, start_run
from syncrep_lab.store import cluster_key_text

from .helpers import cli_here

SPEC = """\
name = "pooled"

[topology]
standbys = 1

[workload]
clients = 2
duration = 1
warmup = 0

[matrix]
standbys = [1, 0]
synchronous_commit = ["on"]

[settings]
shared_buffers = "16MB"

[run]
repeats_min = 3
repeats_max = 3
seed = 7

[compare]
baseline = { standbys = 1 }

[probes]
probed_repeats = 0
"""


def test_two_clusters_share_rounds(workdir: Path) -> None:
    out = workdir / "run"
    said: list[str] = []
    start_run(load_spec(SPEC), SPEC, workdir, out, Events(message=said.append))
    assert any("2 clusters held up at once" in s for s in said), said
    db = sqlite3.connect(out / "syncrep-lab.sqlite")
    db.row_factory = sqlite3.Row
    cells = db.execute("select * from cells order by idx").fetchall()
    assert [c["status"] for c in cells] == ["done", "done"], [c["error"] for c in cells]
    reps = db.execute("select r.*, c.idx from repeats r join cells c on c.id = r.cell_id "
                      "order by r.started_at").fetchall()
    # one repeat of each cluster's cell in every round, the rounds in time order: the
    # two clusters were up at once and alternated (a rebuild per round would have made
    # every round a cluster build, and the test would not end in this time)
    assert [r["round"] for r in reps] == [1, 1, 2, 2, 3, 3]
    group = " + ".join(cluster_key_text(json.loads(c["params_json"])) for c in cells)
    for k in (1, 2, 3):
        assert [r["idx"] for r in reps if r["round"] == k] == round_order(7, group, k, [0, 1])
    clusters = db.execute("select count(*) from clusters").fetchone()[0]
    assert clusters == 2  # each built once
    res = cli_here("results", str(out), "--json")
    assert res.returncode == 0, res.stderr
    rows = {r["label"]: r for r in json.loads(res.stdout)}
    assert set(rows) == {"standbys=1 sc=on", "standbys=0 sc=on"}, rows.keys()
    ratio = rows["standbys=0 sc=on"]["ratio_to_baseline"]
    assert ratio["baseline"] == "standbys=1 sc=on" and ratio["rounds"] == 3, ratio
    assert ratio.get("paired", True) is True
    report = cli_here("report", str(out))
    assert report.returncode == 0, report.stderr
    html = (out / "report.html").read_text()
    assert "2 clusters held up at once" in html  # the Method section says how it ran
    # nothing left: neither slot holds a cluster
    assert not any((slot_dir(out, s) / "syncrep-lab.json").exists() for s in (0, 1))


def _spec(extra: str = "", order: str = "interleaved") -> str:
    return SPEC.replace("seed = 7", f"seed = 7\norder = \"{order}\"") + extra


def test_units_hold_plain_clusters_together() -> None:
    spec = load_spec(_spec())
    groups = _by_cluster(expand(spec).cells)
    plan = units(spec, groups, "interleaved", available=8 * 2**30)
    assert len(plan.units) == 1 and len(plan.units[0].groups) == 2
    assert plan.said is not None and "held up at once" in plan.said


def test_units_fall_back_to_blocks_when_memory_is_short() -> None:
    spec = load_spec(_spec())
    groups = _by_cluster(expand(spec).cells)
    need = sum(cluster_memory(spec, g[0]) for g in groups)
    plan = units(spec, groups, "interleaved", available=need)  # 3/4 of it is too little
    assert [len(u.groups) for u in plan.units] == [1, 1]
    assert plan.said is not None and "one after another" in plan.said
    assert "MiB" in plan.said  # the memory figures, named
    assert all(u.why_alone and "shared memory" in u.why_alone for u in plan.units)


def test_units_keep_a_placed_cluster_alone() -> None:
    spec = load_spec(_spec("""
[placements.p]
cpus = { primary = "0" }
""").replace('standbys = [1, 0]', 'standbys = [1, 0]\nplacement = ["none", "p"]'))
    groups = _by_cluster(expand(spec).cells)
    assert len(groups) == 4
    plan = units(spec, groups, "interleaved", available=64 * 2**30)
    assert [len(u.groups) for u in plan.units] == [2, 1, 1]
    assert {u.why_alone for u in plan.units[1:]} == {"placement p"}
    assert plan.said is not None and "placement p" in plan.said


def test_units_hold_a_linked_cluster_with_plain_ones() -> None:
    """A cluster behind emulated links is held up beside plain ones (the seed's group 4
    with group 1), its namespaces named by its pool slot, so two linked clusters of one
    run never share a name."""
    from syncrep_lab.plan.placement import layout_for

    spec = load_spec(_spec("""
[links.lan]
delay_ms = 1
""").replace('standbys = [1, 0]', 'standbys = [1, 0]\nlink = ["socket", "lan"]'))
    groups = _by_cluster(expand(spec).cells)
    assert len(groups) == 4
    plan = units(spec, groups, "interleaved", available=64 * 2**30)
    assert [len(u.groups) for u in plan.units] == [4], plan.said
    linked = next(g[0] for g in groups if g[0].link == "lan")
    prefixes = set()
    for slot in (0, 1, 2):
        layout = layout_for(spec, linked, 1, slot_dir(Path("/tmp/run"), slot).name[4:])
        assert layout is not None and layout.network is not None
        prefixes.add(layout.network["prefix"])
    assert len(prefixes) == 3, prefixes


def test_units_short_of_memory_hold_the_clusters_compared() -> None:
    """The seed preset's three clusters where two fit: held together are group 4's and
    group 1's (group 4 is compared with group 1's on), not the first two; group 7's
    cluster runs alone, saying memory was short."""
    from syncrep_lab.plan.load import load_preset

    spec, _ = load_preset("seed")
    groups = _by_cluster(expand(spec).cells)
    assert len(groups) == 3
    memory = {g[0].cluster_key: cluster_memory(spec, g[0]) for g in groups}
    linked = next(g[0] for g in groups if g[0].link == "seed-lan")
    beside = next(g[0] for g in groups if g[0].standbys == 2 and g[0].link == "socket")
    two = memory[linked.cluster_key] + memory[beside.cluster_key]
    assert two < sum(memory.values())
    plan = units(spec, groups, "interleaved", available=int(two / 0.75) + 1)
    assert [len(u.groups) for u in plan.units] == [2, 1], plan.said
    assert {g[0].cluster_key for g in plan.units[0].groups} == {
        linked.cluster_key, beside.cluster_key}
    assert plan.units[1].why_alone and "shared memory" in plan.units[1].why_alone
    assert plan.said is not None and plan.said.startswith("2 clusters held up at once")


def test_units_short_of_memory_rank_sets_by_the_comparisons_they_pair() -> None:
    """Where the first two clusters would fit but pair no comparison, the two that pair
    one are held together instead."""
    spec = load_spec(_spec("""
[links.lan]
delay_ms = 1
""").replace('standbys = [1, 0]', 'standbys = [0, 1]\nlink = ["socket", "lan"]\n'
             'only = [{ link = "socket" }, { standbys = 1, link = "lan" }]')
        .replace("baseline = { standbys = 1 }", 'baseline = { link = "socket" }'))
    groups = _by_cluster(expand(spec).cells)
    keys = [(g[0].standbys, g[0].link) for g in groups]
    assert len(groups) == 3 and keys.index((1, "lan")) == 2, keys
    memory = [cluster_memory(spec, g[0]) for g in groups]
    pair = memory[keys.index((1, "socket"))] + memory[2]
    assert pair < sum(memory)
    plan = units(spec, groups, "interleaved", available=int(pair / 0.75) + 1)
    held = [(g[0].standbys, g[0].link) for g in plan.units[0].groups]
    assert sorted(held) == [(1, "lan"), (1, "socket")], plan.said


def test_blocked_order_holds_one_cluster_at_a_time() -> None:
    spec = load_spec(_spec(order="blocked"))
    groups = _by_cluster(expand(spec).cells)
    assert [len(u.groups) for u in units(spec, groups, "blocked").units] == [1, 1]


def test_setting_sizes() -> None:
    assert setting_bytes("256MB", 0) == 256 * 2**20
    assert setting_bytes("1GB", 0) == 2**30
    assert setting_bytes("16384", 0) == 16384 * 8192  # 8 kB pages
    assert setting_bytes("-1", 5) == 5 and setting_bytes("lots", 5) == 5


def test_round_numbers_of_later_units_start_apart() -> None:
    assert ROUND_SPAN > 1000  # repeats_max's limit: no unit's rounds reach the next's
