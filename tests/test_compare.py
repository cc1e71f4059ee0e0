"""`syncrep-lab compare` on stored real runs (tests/data/runs): cells matched by
their axes, ratios and Welch's test on the measured repeats, the per-commit costs
that changed most, and the machine check, through the library and the real CLI."""

from __future__ import annotations

import json
import math
import sqlite3
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from syncrep_lab.analysis.compare import compare_runs, cost_changes
from syncrep_lab.analysis.costs import RoleValues
from syncrep_lab.store import DB_NAME

from .data.runs.refresh import load
from .helpers import cli_here


def _compared(a: Path, b: Path, **kwargs: Any) -> Any:
    """compare_runs's JSON form, as compare --json prints it."""
    return compare_runs(a, b, **kwargs).to_json()


def _cost_changes(a: list[RoleValues], b: list[RoleValues], top: int) -> Any:
    return cost_changes(a, b, top).to_json()


def _change(pair: Mapping[str, Any], node: str, role: str, figure: str
            ) -> tuple[int, dict[str, Any]]:
    """The rank and entry of one cost change among a pair's top changes."""
    for rank, c in enumerate(pair["costs"]["top"]):
        if (c["node"], c["role"], c["figure"]) == (node, role, figure):
            return rank, c
    raise AssertionError(f"{node} {role} {figure} not among the top changes: "
                         + ", ".join(f"{c['node']} {c['role']} {c['figure']}"
                                     for c in pair["costs"]["top"]))


def _measured_tps(run: Path, label: str) -> list[float]:
    db = sqlite3.connect(run / DB_NAME)
    try:
        return [r[0] for r in db.execute(
            "select r.tps from repeats r join cells c on c.id = r.cell_id "
            "where c.label = ? and r.probed = 0 order by r.n", (label,))]
    finally:
        db.close()


def test_96_against_18(workdir: Path) -> None:
    a, b = load("pg96-on", workdir), load("pg18-local-on", workdir)
    data: Mapping[str, Any] = _compared(a, b)
    assert (data["a"]["run"], data["b"]["run"]) == ("pg96-on", "pg18-local-on")
    assert data["a"]["spec"] == "pg96-on" and data["a"]["status"] == "done"
    assert data["a"]["folder"] == str(a) and data["a"]["started_at"].startswith("2026-")
    # The one thing that differs is the server that ran; pg96-on names 9.6 as an
    # axis, pg18-local-on leaves pg to the default installation.
    assert data["dimensions"] == [{"name": "pg", "label": "server version",
                                   "a": "9.6.24", "b": "18.6"}]
    assert (data["a"]["versions"], data["b"]["versions"]) == (["9.6.24"], ["18.6"])
    assert data["matched_on"] == ["synchronous_commit"]
    assert data["machine_differences"] == []
    [pair] = data["pairs"]
    assert pair["key"] == {"synchronous_commit": "on"}
    assert (pair["a"]["label"], pair["b"]["label"]) == ("pg=9.6 sc=on", "sc=on")
    assert data["unmatched"] == {"a": [], "b": [{"idx": 0, "label": "sc=local",
                                                 "key": {"synchronous_commit": "local"}}]}

    tps = pair["figures"][0]
    assert tps["figure"] == "TPS"
    ta, tb = _measured_tps(a, "pg=9.6 sc=on"), _measured_tps(b, "sc=on")
    assert len(ta) == len(tb) == 2  # the probed third repeat of each is left out
    assert tps["a"]["values"] == ta and tps["b"]["values"] == tb
    assert math.isclose(tps["ratio"], statistics.fmean(tb) / statistics.fmean(ta))
    assert tps["ratio_low"] < tps["ratio"] < tps["ratio_high"]
    assert 0 < tps["test"]["p_value"] <= 1
    assert tps["verdict"] == ("no significant difference" if not tps["significant"] else
                              "B faster, significant" if tps["ratio"] > 1 else
                              "B slower, significant")
    assert pair["summary"].startswith(f"B is {tps['ratio']:.2f} ± ")
    assert [f["figure"] for f in pair["figures"]] == ["TPS", "mean latency", "p99 latency"]
    assert all(f["test"] is not None for f in pair["figures"])

    # 9.6 builds an epoll set for every wait: ~1 epoll_create1 per commit in the
    # primary's backends, ~0 on 18. Ranked among the top changes, not divided by 0.
    rank, epoll = _change(pair, "primary", "backend", "epoll_create1")
    assert rank < 10
    assert epoll["a"]["mean"] > 0.9 and epoll["b"]["mean"] < 0.01
    assert epoll["ratio"] < 0.01 and epoll["difference"] < -0.9
    # One probed repeat per cell in these runs: no test can be made, and none is claimed.
    assert epoll["a"]["n"] == epoll["b"]["n"] == 1
    assert epoll["test"] is None and epoll["significant"] is None
    assert epoll["verdict"] == "too few repeats (1 vs 1)"
    # A call that stops altogether (the walsenders' epoll sets) ranks too.
    _, gone = _change(pair, "primary", "walsender:b", "epoll_create1")
    assert gone["b"]["mean"] == 0 and gone["ratio"] == 0 and math.isfinite(gone["score"])
    scores = [c["score"] for c in pair["costs"]["top"]]
    assert scores == sorted(scores, reverse=True)
    assert pair["costs"]["compared"] > len(pair["costs"]["top"]) == 10


def _second_probed_repeat(run: Path, scale: float) -> None:
    """Give each cell a second probed repeat: a copy of its probed one with every
    perf count scaled, as a spec with probed_repeats = 2 would store."""
    db = sqlite3.connect(run / DB_NAME)
    try:
        cols = [r[1] for r in db.execute("pragma table_info(repeats)") if r[1] != "id"]
        with db:
            for (rid,) in db.execute("select id from repeats where probed = 1").fetchall():
                copy = ", ".join("n + 10" if c == "n" else c for c in cols)
                new = db.execute(f"insert into repeats ({', '.join(cols)}) select {copy} "
                                 f"from repeats where id = ?", (rid,)).lastrowid
                for node, role, procs, cpu_ms, switches, calls in db.execute(
                        "select node, role, processes, cpu_ms, context_switches, "
                        "syscalls_json from costs where repeat_id = ?", (rid,)).fetchall():
                    scaled = {k: round(v * scale) for k, v in json.loads(calls).items()}
                    db.execute("insert into costs (repeat_id, node, role, processes, cpu_ms, "
                               "context_switches, syscalls_json) values (?, ?, ?, ?, ?, ?, ?)",
                               (new, node, role, procs, cpu_ms * scale,
                                round(switches * scale), json.dumps(scaled)))
    finally:
        db.close()


def test_costs_tested_with_two_probed_repeats(workdir: Path) -> None:
    a, b = load("pg96-on", workdir), load("pg18-local-on", workdir)
    _second_probed_repeat(a, 1.04)
    _second_probed_repeat(b, 0.97)
    [pair] = _compared(a, b)["pairs"]
    _, epoll = _change(pair, "primary", "backend", "epoll_create1")
    assert epoll["a"]["n"] == epoll["b"]["n"] == 2
    assert epoll["significant"] is True and epoll["test"]["p_value"] < 0.05
    assert epoll["verdict"] == "B lower, significant"
    # Probed repeats still stay out of TPS: two measured repeats a side, as before.
    assert pair["figures"][0]["a"]["n"] == pair["figures"][0]["b"]["n"] == 2


def test_appearing_and_vanishing_costs_rank() -> None:
    def role(calls: dict[str, list[float]]) -> list[RoleValues]:
        return [{"node": "primary", "role": "backend", "cpu_source": "perf",
                 "cpu_us_per_commit": [200.0, 204.0], "context_switches_per_commit": [3.0, 3.1],
                 "syscalls_per_commit": calls}]

    out = _cost_changes(role({"epoll_create1": [0.98, 0.97], "futex": [0.0, 0.0],
                             "kill": [1.0, 1.02], "poll": [0.0, 0.0]}),
                       role({"epoll_create1": [0.0, 0.0], "futex": [2.7, 2.8],
                             "kill": [1.01, 0.99], "poll": [0.0, 0.0]}), top=10)
    figures = [c["figure"] for c in out["top"]]
    assert figures[:2] == ["futex", "epoll_create1"]  # the larger appearance first
    futex, epoll = out["top"][0], out["top"][1]
    assert futex["ratio"] is None and futex["difference"] > 2.6 and futex["significant"]
    assert epoll["ratio"] == 0 and epoll["significant"]
    assert "poll" not in figures  # never called on either side: no change to rank
    assert out["top"][-1]["figure"] in ("kill", "CPU µs", "context switches")
    assert not any(c["significant"] for c in out["top"] if c["figure"] == "kill")
    assert _cost_changes(role({}), role({}), top=10)["top"] == []  # nothing moved
    one = _cost_changes(role({"futex": [0.0, 0.0]}), role({"futex": [2.7, 2.8]}), top=1)
    assert [c["figure"] for c in one["top"]] == ["futex"] and one["compared"] == 3


def test_run_against_itself(workdir: Path) -> None:
    run = load("pg18-local-on", workdir)
    data: Mapping[str, Any] = _compared(run, run)
    assert data["dimensions"] == [] and data["machine_differences"] == []
    assert data["unmatched"] == {"a": [], "b": []}
    assert [(p["a"]["label"], p["b"]["label"]) for p in data["pairs"]] == [
        ("sc=local", "sc=local"), ("sc=on", "sc=on")]
    for pair in data["pairs"]:
        for fig in pair["figures"]:
            assert fig["ratio"] == 1.0
            assert fig["significant"] is False and fig["test"]["p_value"] == 1.0
            assert fig["verdict"] == "no significant difference"
        assert pair["costs"]["compared"] > 0 and pair["costs"]["top"] == []
    res = cli_here("compare", str(run), str(run))
    assert res.returncode == 0, res.stderr
    assert "nothing differs between the runs" in res.stdout
    assert "B is 1.00 ± " in res.stdout and "significant," not in res.stdout
    assert "no per-commit cost changed" in res.stdout


def test_default_pg_and_named_18_are_one_server(workdir: Path) -> None:
    """pg left to the default in one run and named "18" in the other: the same
    server, so not a compared dimension; perf's CPU is not set against /proc's."""
    a, b = load("pg18-local-on", workdir), load("pg18-proc-only", workdir)
    db = sqlite3.connect(b / DB_NAME)
    try:
        with db:
            params = json.loads(db.execute("select params_json from cells").fetchone()[0])
            db.execute("update cells set params_json = ?", (json.dumps({**params, "pg": "18"}),))
            db.execute("update clusters set cluster_key = ?",
                       (json.dumps(["18", params["standbys"], params["settings"]]),))
    finally:
        db.close()
    data = _compared(a, b)
    assert data["dimensions"] == []
    assert [p["key"] for p in data["pairs"]] == [{"synchronous_commit": "on"}]
    assert [c["label"] for c in data["unmatched"]["a"]] == ["sc=local"]
    [pair] = data["pairs"]
    # B traced no system calls and took CPU from /proc: nothing comparable per call,
    # and CPU per commit under perf's tracing is not set against untraced CPU. Only
    # roles whose CPU comes from /proc on both sides (the postmaster) are compared.
    costs = pair["costs"]
    assert costs["compared"] > 0
    assert {(c["role"], c["kind"]) for c in costs["top"]} <= {
        ("postmaster", "cpu_us"), ("postmaster", "context_switches")}
    assert ("primary backend: CPU and context switches not compared (from perf in A, "
            "proc in B)") in costs["notes"]


def test_machines_that_differ(workdir: Path) -> None:
    a, b = load("pg96-on", workdir), load("pg18-local-on", workdir)
    db = sqlite3.connect(b / DB_NAME)
    try:
        machine = json.loads(db.execute("select machine_json from runs").fetchone()[0])
        with db:
            db.execute("update runs set machine_json = ?",
                       (json.dumps({**machine, "cpu_count": 64, "cpus_usable": 64}),))
    finally:
        db.close()
    res = cli_here("compare", str(a), str(b))
    assert res.returncode == 2, res.stdout
    assert res.stdout == ""
    assert "error:" in res.stderr and "different machines" in res.stderr
    assert "cpu_count: 2 vs 64" in res.stderr and "cpus_usable: 2 vs 64" in res.stderr
    assert "fix:" in res.stderr and "--force" in res.stderr
    assert "Traceback" not in res.stderr
    res = cli_here("compare", str(a), str(b), "--force")
    assert res.returncode == 0, res.stderr
    assert "warning: the machines differ (cpu_count: 2 vs 64)" in res.stdout
    assert "B is " in res.stdout and "epoll_create1" in res.stdout
    data = _compared(a, b, force=True)
    assert data["machine_differences"] == ["cpu_count: 2 vs 64", "cpus_usable: 2 vs 64"]


def test_json_is_the_library_data(workdir: Path) -> None:
    a, b = load("pg96-on", workdir), load("pg18-local-on", workdir)
    res = cli_here("compare", str(a), str(b), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == _compared(a, b)
    res = cli_here("compare", str(a), str(b), "--json", "--top", "3")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data == _compared(a, b, top=3)
    assert len(data["pairs"][0]["costs"]["top"]) == 3


def test_not_a_run(workdir: Path) -> None:
    run = load("pg96-on", workdir)
    empty = workdir / "empty"
    empty.mkdir()
    for args in ((str(empty), str(run)), (str(run), str(workdir / "missing"))):
        res = cli_here("compare", *args)
        assert res.returncode == 2, res.stdout
        assert "error:" in res.stderr and "is not a syncrep-lab run folder" in res.stderr
        assert "fix:" in res.stderr and "Traceback" not in res.stderr
    res = cli_here("compare", str(run), str(run), "--top", "0")
    assert res.returncode == 2 and "--top must be at least 1" in res.stderr


def _update(run: Path, statement: str) -> None:
    """One statement on a stored run's repeats, committed."""
    db = sqlite3.connect(run / DB_NAME)
    try:
        with db:
            db.execute(statement)
    finally:
        db.close()


def test_a_significant_difference_with_disturbed_repeats_says_so(workdir: Path) -> None:
    a, b = load("pg96-on", workdir), load("pg18-local-on", workdir)
    [calm] = _compared(a, b)["pairs"]
    _update(a, "update repeats set disturbed = 'other processes took 0.80 CPUs' "
               "where probed = 0")
    [pair] = _compared(a, b)["pairs"]
    assert pair["disturbed"]["a"]["repeats"] == pair["disturbed"]["a"]["of"] > 0
    assert pair["disturbed"]["b"]["repeats"] == 0
    # no difference found: nothing to doubt, no caveat
    assert not any(f["significant"] for f in pair["figures"])
    assert pair["summary"] == calm["summary"]
    # B twice as fast: significant, and the disturbed side is named
    _update(b, "update repeats set tps = 2 * tps, lat_mean_ms = lat_mean_ms / 2, "
               "lat_p99_ms = lat_p99_ms / 2 where probed = 0")
    [faster] = _compared(a, b)["pairs"]
    assert any(f["significant"] for f in faster["figures"])
    n = faster["disturbed"]["a"]["of"]
    assert f"A: {n} of {n} repeats disturbed" in faster["summary"]
    assert "B: " not in faster["summary"]
