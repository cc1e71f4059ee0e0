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
    # the parts against clients (4 and 16 at `on`), and the chosen cell's distributions
    assert 'id="chart-anatomy-clients-on"' in html
    assert 'id="chart-anatomy-histograms"' in html
