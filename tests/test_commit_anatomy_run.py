"""The commit anatomy in a run (probes/anatomy.py recorded by run/repeat.py, read by
analysis/anatomy.py): a probed repeat times every commit, the parts add up, the whole
stays below what pgbench measured in that repeat (the anatomy has a repeat of its own:
its traps would weigh on the other probes' figures), and `costs`, `diagnose` and the
report show it. Little's law against the wait-event sampler, which needs both in one
window, is tests/test_anatomy.py's."""

from __future__ import annotations

import json
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
clients = [4, 16]

[run]
repeats_min = 1
repeats_max = 1

[probes]
flamegraphs = false
sched = false
"""


@pytest.fixture(scope="module")
def anatomy_run() -> Path:
    work = shared_tmp("srl-anatomy-run-")
    (work / "spec.toml").write_text(SPEC)
    res = cli("run", str(work / "spec.toml"), "--out", str(work / "run"), timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    return work / "run"


def test_every_commit_of_the_probed_repeat_is_timed_and_the_parts_add_up(
        anatomy_run: Path) -> None:
    import sqlite3

    costs = json.loads(cli_here("costs", str(anatomy_run), "--json").stdout)
    db = sqlite3.connect(anatomy_run / "syncrep-lab.sqlite")
    probed = {idx: (tx, lat, dur) for idx, tx, lat, dur in db.execute(
        "select c.idx, r.transactions, r.lat_mean_ms, r.duration_s from repeats r "
        "join cells c on c.id = r.cell_id where r.probed = 2")}  # the anatomy's repeat
    for cell in costs:
        a = cell["anatomy"]
        assert a is not None, cell["probes"].get("anatomy")
        transactions, latency_ms, _ = probed[cell["idx"]]
        parts = {c["component"]: c for c in a["components"]}
        wait = parts["commit_wait"]
        # every commit waited once, and was timed once
        assert abs(wait["events"] - transactions) <= 0.02 * transactions, (wait, transactions)
        split = sum(parts[p]["us_per_commit"]["mean"] for p in
                    ("standby_wait", "wakeup_queue", "run_queue", "unsignalled") if p in parts)
        assert split == pytest.approx(wait["us_per_commit"]["mean"], rel=0.01)
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
    assert 'id="chart-anatomy"' in page.read_text()


def test_the_model_s_wait_bounds_are_the_anatomy_s_ceilings_at_the_measured_pace(
        anatomy_run: Path) -> None:
    """`model --json`: Little's law and the serial release by hand from the stored anatomy
    (the traced repeat's shares of time, carried to the measured repeats' TPS), what binds
    is the lowest of every bound and the headline names it, and on 64 cores with 64
    clients the release stays while Little's law scales with the clients."""
    import sqlite3

    costs = {c["idx"]: c["anatomy"] for c in json.loads(
        cli_here("costs", str(anatomy_run), "--json").stdout)}
    res = cli_here("model", str(anatomy_run), "--json", "--cores", "64", "--clients", "64")
    assert res.returncode == 0, res.stderr
    models = {m["idx"]: m for m in json.loads(res.stdout)}
    db = sqlite3.connect(anatomy_run / "syncrep-lab.sqlite")
    traced_tps = dict(db.execute(
        "select c.idx, r.tps from repeats r join cells c on c.id = r.cell_id "
        "where r.probed = 2"))
    measured = {idx: (tps, clients) for idx, tps, clients in db.execute(
        "select idx, tps_mean, json_extract(params_json, '$.clients') from cells")}
    ceilings = {d["idx"]: d["ceiling"] for d in json.loads(
        cli_here("diagnose", str(anatomy_run), "--json").stdout)}
    for idx, m in models.items():
        a, (x, n) = costs[idx], measured[idx]
        parts = {c["component"]: c["us_per_commit"]["mean"] for c in a["components"]}
        in_server_us = parts["local_flush"] + parts["commit_wait"]
        share = in_server_us * traced_tps[idx] / n / 1e6  # of a client's time, traced
        busiest = max((r for r in a["releases"] if r["per_waiter_us"]),
                      key=lambda r: r["releases"])
        releasing = busiest["per_waiter_us"] * traced_tps[idx] / 1e6  # of a second
        waits = {b["law"]: b for b in m["wait_bounds"]}
        assert set(waits) == {"little", "release"} and m["wait_missing"] is None
        little, release = waits["little"], waits["release"]
        assert 0 < share < 1 and little["share"] == pytest.approx(share, rel=1e-6)
        assert little["max_tps"] == pytest.approx(x / share, rel=1e-6)
        assert little["demand_us_per_commit"] == pytest.approx(share * n * 1e6 / x, rel=1e-6)
        assert release["max_tps"] == pytest.approx(x / releasing, rel=1e-6)
        assert release["walsender"] == busiest["walsender"] == "walsender:b"
        # one traced repeat, one measured: the anatomy's own ceilings, as `costs` has them
        assert little["as_traced_tps"] == pytest.approx(a["little_bound_tps"], rel=1e-6)
        assert release["as_traced_tps"] == pytest.approx(a["release_bound_tps"], rel=1e-6)
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
        assert there["little"]["max_tps"] == pytest.approx(little["max_tps"] * 64 / n)
    text = cli_here("model", str(anatomy_run), "--cores", "64").stdout
    assert "flush and wait" in text and "wait bounds from the commit anatomy" in text
    assert "does not shrink with cores" in text
    assert 'id="wait-bounds"' in (anatomy_run / "report.html").read_text()
