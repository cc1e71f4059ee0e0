"""Scaling analysis: the knee, and each level's price as a ratio to local, from a
real run's store."""

from __future__ import annotations

import doctest
import json
import math
import sqlite3
import statistics
from pathlib import Path

from syncrep_lab.analysis import scaling as scaling_module
from syncrep_lab.analysis.scaling import knee, scaling
from syncrep_lab.plan.load import load_spec
from syncrep_lab.run.runner import start_run

from .helpers import cli_here


def test_knee() -> None:
    assert doctest.testmod(scaling_module).failed == 0
    assert knee([(1, 100.0), (4, 400.0), (16, 420.0)]) == {
        "clients": 4, "tps": 400.0, "gain_after": 0.05}
    assert knee([(4, 400.0), (1, 100.0)]) is None  # order does not matter; still growing
    assert knee([]) is None


SPEC = """\
name = "scale"

[topology]
standbys = 1
sync = "b"

[workload]
duration = 1
warmup = 0

[matrix]
synchronous_commit = ["local", "on"]
clients = [1, 2]

[run]
repeats_min = 2
repeats_max = 2

[probes]
probed_repeats = 0
"""


def test_scaling_of_a_real_run(workdir: Path) -> None:
    out = workdir / "run"
    start_run(load_spec(SPEC), SPEC, workdir, out)
    [series] = scaling(out)
    assert set(series["levels"]) == {"local", "on"}
    assert [p["clients"] for p in series["levels"]["on"]["points"]] == [1, 2]
    db = sqlite3.connect(out / "syncrep-lab.sqlite")
    db.row_factory = sqlite3.Row
    assert db.execute("select count(*) from repeats where probed = 1").fetchone()[0] == 0
    tps: dict[tuple[str, int], dict[int, float]] = {}
    for cell in db.execute("select * from cells"):
        params = json.loads(cell["params_json"])
        tps[(params["synchronous_commit"], params["clients"])] = {
            r["round"]: r["tps"] for r in db.execute(
                "select round, tps from repeats where cell_id = ?", (cell["id"],))}
    for r in series["ratios_to_local"]["on"]:
        # the cells of one cluster ran in rounds: the ratio is paired within each round
        on, local = tps[("on", r["clients"])], tps[("local", r["clients"])]
        assert sorted(on) == sorted(local) == [1, 2] and r["paired"] and r["rounds"] == 2
        expected = math.exp(statistics.fmean(math.log(on[k] / local[k]) for k in on))
        assert abs(r["ratio"] - expected) < 1e-9
        assert r["low"] is not None and r["high"] is not None
        assert r["low"] <= r["ratio"] <= r["high"]
    res = cli_here("scaling", str(out))
    assert res.returncode == 0, res.stderr
    assert "on / local" in res.stdout
