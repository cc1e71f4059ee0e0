"""The commit anatomy in a run (probes/anatomy.py recorded by run/repeat.py, read by
analysis/anatomy.py): a probed repeat times every commit, the parts add up, the whole
stays below what pgbench measured in that repeat (the anatomy has a repeat of its own:
its traps would weigh on the other probes' figures), and `costs`, `diagnose` and the
report show it; each part of a cell against its baseline's (results --json) and against
another run's (compare), B/A over two anatomy repeats a side, checked by hand on the
stored rows. Little's law against the wait-event sampler, which needs both in one
window, is tests/test_anatomy.py's."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from .helpers import cli, cli_here, shared_tmp

SPEC = """\
name = "anatomy"

[topology]
standbys = 2

[workload]
duration = 2
warmup = 0

[matrix]
synchronous_commit = ["on"]
clients = [8, 16]

[run]
repeats_min = 1
repeats_max = 1

[compare]
baseline = { clients = 8 }

[probes]
flamegraphs = false
sched = false
anatomy_repeats = 2
"""


@pytest.fixture(scope="module")
def anatomy_run() -> Iterator[Path]:
    work = shared_tmp("srl-anatomy-run-")
    (work / "spec.toml").write_text(SPEC)
    try:
        res = cli("run", str(work / "spec.toml"), "--out", str(work / "run"), timeout=600)
        assert res.returncode == 0, res.stdout + res.stderr
        yield work / "run"
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_every_commit_of_the_probed_repeat_is_timed_and_the_parts_add_up(
        anatomy_run: Path) -> None:
    import sqlite3

    costs = json.loads(cli_here("costs", str(anatomy_run), "--json").stdout)
    db = sqlite3.connect(anatomy_run / "syncrep-lab.sqlite")
    probed = {idx: (tx, lat) for idx, tx, lat in db.execute(
        "select c.idx, sum(r.transactions), max(r.lat_mean_ms) from repeats r "
        "join cells c on c.id = r.cell_id where r.probed = 2 "  # the anatomy's repeats
        "group by c.idx")}
    for cell in costs:
        a = cell["anatomy"]
        assert a is not None, cell["probes"].get("anatomy")
        transactions, latency_ms = probed[cell["idx"]]
        parts = {c["component"]: c for c in a["components"]}
        wait = parts["commit_wait"]
        # every commit waited once, and was timed once (but those in flight at either end
        # of the trace: at most the clients, 16, at each end of each of the 2 repeats)
        assert abs(wait["events"] - transactions) <= 0.02 * transactions + 2 * 2 * 16, \
            (wait, transactions)
        split = sum(parts[p]["us_per_commit"]["mean"] for p in
                    ("standby_wait", "wakeup_queue", "run_queue", "unsignalled") if p in parts)
        assert split == pytest.approx(wait["us_per_commit"]["mean"], rel=0.01)
        # each part's distribution holds every event, and its median's bin holds p50
        for part in parts.values():
            bins = part["distribution"]
            assert sum(n for _, _, n in bins) == part["events"]
            below = 0
            for low, high, n in bins:
                below += n
                if below >= part["events"] / 2:
                    assert low * 0.98 <= part["p50_us"] <= high * 1.02, (part, low, high)
                    break
        in_server_ms = (parts["local_flush"]["us_per_commit"]["mean"]
                        + wait["us_per_commit"]["mean"]) / 1000.0
        assert 0 < in_server_ms < latency_ms, (in_server_ms, latency_ms)
        # the sync walsender freed the waiters; the potential one none
        by = {r["walsender"]: r for r in a["releases"]}
        assert by["walsender:b"]["waiters_per_release"] > 0
        assert not by["walsender:c"]["waiters_per_release"]


def test_costs_diagnose_and_the_report_show_it(anatomy_run: Path) -> None:
    text = cli_here("costs", str(anatomy_run)).stdout
    assert "where a commit's time goes" in text and "wake-up queue" in text
    assert "walsender:b made" in text
    diagnosed = json.loads(cli_here("diagnose", str(anatomy_run), "--json").stdout)
    many = next(d for d in diagnosed if d["label"].endswith("c=16"))
    assert many["anatomy"] and "% of a commit at 16 clients" in many["anatomy"]
    assert "commit anatomy:" in cli_here("diagnose", str(anatomy_run)).stdout
    page = anatomy_run / "report.html"
    html = page.read_text()
    assert 'id="chart-anatomy"' in html
    # the parts against clients (8 and 16 at `on`), and the chosen cell's distributions
    assert 'id="chart-anatomy-clients-on"' in html
    assert 'id="chart-anatomy-histograms"' in html


def _per_repeat(run: Path, label: str) -> dict[str, list[float]]:
    """A cell's anatomy figures per anatomy repeat, from the stored rows by hand: each
    backend component in µs per commit, walsender:b's µs per freed waiter."""
    import sqlite3

    db = sqlite3.connect(run / "syncrep-lab.sqlite")
    rows = db.execute(
        "select r.n, r.transactions, a.who, a.component, a.total from anatomy a "
        "join repeats r on r.id = a.repeat_id join cells c on c.id = r.cell_id "
        "where c.label = ? order by r.n", (label,)).fetchall()
    out: dict[str, dict[int, float]] = {}
    for n, transactions, who, component, total in rows:
        if who == "backend":
            out.setdefault(component, {})[n] = total / 1000 / transactions
    released = {n: total for n, _, who, component, total in rows
                if who == "walsender:b" and component == "release"}
    freed = {n: total for n, _, who, component, total in rows
             if who == "walsender:b" and component == "waiters_freed"}
    out["per_waiter_us"] = {n: released[n] / 1000 / freed[n] for n in freed if freed[n]}
    return {k: [v[n] for n in sorted(v)] for k, v in out.items()}


def test_each_part_against_the_baseline_cell_is_b_over_a_with_welch_on_the_logs(
        anatomy_run: Path) -> None:
    import math
    import statistics

    from scipy import stats

    rows = json.loads(cli_here("results", str(anatomy_run), "--json").stdout)
    few, many = (next(r for r in rows if r["label"].endswith(f"c={c}")) for c in (8, 16))
    assert few["anatomy_to_baseline"] is None  # the baseline itself
    cmp = many["anatomy_to_baseline"]
    assert cmp["baseline"] == few["label"] and cmp["repeats"] == {"a": 2, "b": 2}
    # one measured repeat a cell: the run has no drift to add
    assert "drift" not in cmp["interval"] and "geometric means" in cmp["interval"]
    base, cell = _per_repeat(anatomy_run, few["label"]), _per_repeat(anatomy_run, many["label"])
    by = {(f["who"], f["key"]): f for f in cmp["figures"]}
    checked = 0
    for (who, key), hand_key in ([(("backend", c), c) for c in ("local_flush", "commit_wait",
                                                                 "standby_wait",
                                                                 "wakeup_queue", "run_queue")]
                                 + [(("walsender:b", "per_waiter_us"), "per_waiter_us")]):
        va, vb = base[hand_key], cell[hand_key]
        assert len(va) == len(vb) == 2
        fig = by[(who, key)]
        # B is the cell, A its baseline: a swapped direction fails here
        assert fig["a"]["mean"] == pytest.approx(statistics.fmean(va))
        assert fig["b"]["mean"] == pytest.approx(statistics.fmean(vb))
        la, lb = [math.log(v) for v in va], [math.log(v) for v in vb]
        assert fig["ratio"] == pytest.approx(math.exp(statistics.fmean(lb)
                                                      - statistics.fmean(la)))
        welch = stats.ttest_ind(lb, la, equal_var=False)
        ci = welch.confidence_interval(0.95)
        assert fig["ratio_low"] == pytest.approx(math.exp(ci.low), rel=1e-6)
        assert fig["ratio_high"] == pytest.approx(math.exp(ci.high), rel=1e-6)
        assert fig["test"]["p_value"] == pytest.approx(welch.pvalue, rel=1e-6)
        assert fig["significant"] == (welch.pvalue < 0.05)
        assert (fig["figure"] in " ".join(cmp["changed"])) == fig["significant"]
        checked += 1
    assert checked == 6
    # the results text has a line for the cell only where a part moved beyond its interval
    text = cli_here("results", str(anatomy_run)).stdout
    assert (f"÷ {few['label']}, commit anatomy:" in text) == bool(cmp["changed"])


def test_one_repeat_a_side_gives_the_ratio_alone(anatomy_run: Path) -> None:
    from syncrep_lab.analysis.anatomy import AnatomyValues, anatomy_values
    from syncrep_lab.analysis.compare import ONE_REPEAT, anatomy_comparison
    from syncrep_lab.store import Store

    store = Store(anatomy_run, create=False)
    try:
        a, b = (anatomy_values(store, c.id) for c in store.cells(store.run().id))
    finally:
        store.close()
    assert a is not None and b is not None

    def first(v: AnatomyValues) -> AnatomyValues:
        return AnatomyValues(1, {k: x[:1] for k, x in v.backend.items()},
                             {w: {k: x[:1] for k, x in f.items()}
                              for w, f in v.walsenders.items()})

    cmp = anatomy_comparison(first(a), first(b), None)
    assert cmp is not None and cmp.figures and not cmp.changed
    for fig in cmp.figures:
        assert fig.verdict == ONE_REPEAT and fig.ratio_low is None
        if fig.who == "backend":
            key = fig.key
            assert fig.ratio == pytest.approx(b.backend[key][0] / a.backend[key][0])
    assert "no interval" in cmp.interval and "anatomy_repeats" in cmp.interval
    assert ONE_REPEAT in cmp.summary
    # one side without an anatomy: said, nothing compared
    missing = anatomy_comparison(None, b, None, missing_a="skipped: no bpftrace")
    assert missing is not None and missing.figures == ()
    assert missing.missing == "A has no commit anatomy (skipped: no bpftrace)"


def test_compare_sets_each_part_of_b_against_a(anatomy_run: Path, workdir: Path) -> None:
    from .data.runs.refresh import load

    same = json.loads(cli_here("compare", str(anatomy_run), str(anatomy_run),
                               "--json").stdout)
    assert len(same["pairs"]) == 2
    for pair in same["pairs"]:
        figures = pair["anatomy"]["figures"]
        assert {f["key"] for f in figures} >= {"commit_wait", "wakeup_queue",
                                               "per_waiter_us", "waiters_per_release"}
        for f in figures:
            assert f["ratio"] == pytest.approx(1.0)
            assert f["ratio_low"] <= 1 <= f["ratio_high"], f
            assert f["verdict"] == "no significant difference"
    text = cli_here("compare", str(anatomy_run), str(anatomy_run)).stdout
    assert "where a commit's time moved (A: 2, B: 2 anatomy repeats)" in text
    assert "wake-up queue" in text and "walsender:b µs per freed waiter" in text
    # a stored run from before the probe: A has none, said, and no traceback
    old = load("pg18-proc-only", workdir)
    res = cli_here("compare", str(old), str(anatomy_run), "--force")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "A has no commit anatomy (not recorded in its probed repeats): nothing to " \
           "compare" in res.stdout
    data = json.loads(cli_here("compare", str(old), str(anatomy_run), "--force",
                               "--json").stdout)
    [pair] = data["pairs"]
    assert pair["anatomy"]["missing"].startswith("A has no commit anatomy")
    assert pair["anatomy"]["repeats"] == {"a": 0, "b": 2}


def test_the_model_s_wait_bounds_are_the_anatomy_s_ceilings_at_the_measured_pace(
        anatomy_run: Path) -> None:
    """`model --json`: Little's law and the serial release by hand from the stored anatomy
    (the traced repeat's shares of time, carried to the measured repeats' TPS), what binds
    is the lowest of every bound and the headline names it, and on 64 cores with 64
    clients the release stays while Little's law scales with the clients, without the
    time a woken backend waited here for a core."""
    import sqlite3

    costs = {c["idx"]: c["anatomy"] for c in json.loads(
        cli_here("costs", str(anatomy_run), "--json").stdout)}
    res = cli_here("model", str(anatomy_run), "--json", "--cores", "64", "--clients", "64")
    assert res.returncode == 0, res.stderr
    models = {m["idx"]: m for m in json.loads(res.stdout)}
    db = sqlite3.connect(anatomy_run / "syncrep-lab.sqlite")
    traced_tps = dict(db.execute(  # the mean over the anatomy's repeats
        "select c.idx, avg(r.tps) from repeats r join cells c on c.id = r.cell_id "
        "where r.probed = 2 group by c.idx"))
    measured = {idx: (tps, clients) for idx, tps, clients in db.execute(
        "select idx, tps_mean, json_extract(params_json, '$.clients') from cells")}
    ceilings = {d["idx"]: d["ceiling"] for d in json.loads(
        cli_here("diagnose", str(anatomy_run), "--json").stdout)}
    traced_commits: dict[int, dict[int, int]] = {}  # cell -> repeat -> its commits
    in_flush_and_wait: dict[int, float] = {}  # ns, over the anatomy's repeats
    released_by: dict[int, dict[str, tuple[float, float]]] = {}  # ns releasing, waiters
    for idx, repeat, who, component, transactions, total in db.execute(
            "select c.idx, r.id, a.who, a.component, r.transactions, a.total from anatomy a "
            "join repeats r on r.id = a.repeat_id join cells c on c.id = r.cell_id "
            "where r.probed = 2"):
        traced_commits.setdefault(idx, {})[repeat] = transactions
        if who == "backend" and component in ("local_flush", "commit_wait"):
            in_flush_and_wait[idx] = in_flush_and_wait.get(idx, 0.0) + total
        elif component in ("release", "waiters_freed"):
            ns, waiters = released_by.setdefault(idx, {}).get(who, (0.0, 0.0))
            released_by[idx][who] = ((ns + total, waiters) if component == "release"
                                     else (ns, waiters + total))
    for idx, m in models.items():
        a, (x, n) = costs[idx], measured[idx]
        parts = {c["component"]: c["us_per_commit"]["mean"] for c in a["components"]}
        in_server_us = parts["local_flush"] + parts["commit_wait"]
        share = in_server_us * traced_tps[idx] / n / 1e6  # of a client's time, traced
        busiest = max((r for r in a["releases"] if r["per_waiter_us"]),
                      key=lambda r: r["releases"])
        freed = released_by[idx]["walsender:b"]
        commits = sum(traced_commits[idx].values())
        # its release time over the commits (not the waiters: some commits never queue)
        releasing = freed[0] / commits / 1000 * traced_tps[idx] / 1e6  # of a second
        waits = {b["law"]: b for b in m["wait_bounds"]}
        assert set(waits) == {"little", "release"} and m["wait_missing"] is None
        little, release = waits["little"], waits["release"]
        assert 0 < share < 1 and little["share"] == pytest.approx(share, rel=1e-6)
        assert little["max_tps"] == pytest.approx(x / share, rel=1e-6)
        assert little["demand_us_per_commit"] == pytest.approx(share * n * 1e6 / x, rel=1e-6)
        assert release["max_tps"] == pytest.approx(x / releasing, rel=1e-6)
        assert release["walsender"] == busiest["walsender"] == "walsender:b"
        # At the traced pace, each by its own definition from the stored rows. The model
        # takes the mean over the anatomy's repeats of µs per commit (its interval stands
        # on them); `costs` pools the repeats' nanoseconds over their commits. The two
        # differ by as much as the repeats do, so neither is checked against the other.
        assert little["as_traced_tps"] == pytest.approx(n * 1e6 / in_server_us, rel=1e-6)
        assert a["little_bound_tps"] == pytest.approx(
            n * commits * 1e9 / in_flush_and_wait[idx], rel=1e-6)
        assert release["as_traced_tps"] == pytest.approx(1e9 * commits / freed[0], rel=1e-6)
        assert 0 < busiest["freed_per_commit"] == pytest.approx(freed[1] / commits, rel=1e-6)
        assert a["release_bound_tps"] == pytest.approx(release["as_traced_tps"], rel=1e-6)
        assert x <= little["max_tps"]  # Little's law: the commit's time is more than that
        every = [*m["bounds"], *m["wait_bounds"]]
        lowest = min(every, key=lambda b: b["max_tps"] or float("inf"))
        assert (m["binding"], m["binding_kind"]) == (lowest["resource"], lowest["kind"])
        # the headline's first clause is what binds (the next says what cores would not raise)
        binds = ceilings[idx].split(";")[0]
        named = "Little's law" if lowest.get("law") == "little" else "serial release"
        assert (named in binds) == (lowest["kind"] == "wait"), ceilings[idx]
        there = {b["law"]: b for b in m["what_if"]["wait_bounds"]}
        assert there["release"]["max_tps"] == pytest.approx(release["max_tps"])
        # on 64 cores a woken backend no longer waits for one: the run queue stays here
        kept = 1 - (parts.get("run_queue") or 0.0) / in_server_us
        assert there["little"]["max_tps"] == pytest.approx(little["max_tps"] * 64 / n / kept)
        assert there["little"]["dropped"] == (["run_queue"] if parts.get("run_queue") else [])
        assert "local_flush" in there["little"]["carried"]
    text = cli_here("model", str(anatomy_run), "--cores", "64").stdout
    assert "flush and wait" in text and "wait bounds from the commit anatomy" in text
    assert "does not shrink with cores" in text
    assert 'id="wait-bounds"' in (anatomy_run / "report.html").read_text()


def test_the_releasing_walsender_is_the_one_that_freed_waiters() -> None:
    """A potential standby's walsender enters SyncRepReleaseWaiters on every reply and
    frees nobody; it can make more such calls than the sync one makes releases (15.18,
    8 clients at `on`, counted by the probe: c 32,105 calls, b 31,699 releases freeing
    30,267 waiters). The releases shown, and the release bound, are b's."""
    from syncrep_lab.analysis.anatomy import Releases, releasing

    def of(who: str, n: int, freed: int) -> Releases:
        return Releases(walsender=who, releases=n, waiters_per_release=freed / n,
                        release_us=15.9, per_waiter_us=16.7 if freed else None,
                        freed_per_commit=freed / 30_300,
                        us_per_commit=16.6 if freed else None, gap_us=150.0,
                        gap_p99_us=800.0)

    b, c = of("walsender:b", 31_699, 30_267), of("walsender:c", 32_105, 0)
    assert releasing([b, c]) == b and releasing([c, b]) == b
    assert releasing([c]) is None and releasing([]) is None
