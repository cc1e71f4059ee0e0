"""sysbench as the second client: the same insert workload on the same cluster as pgbench,
its figures read into the same store fields and checked against what sysbench itself
printed."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncrep_lab.stats.histogram import LatencyHistogram

from .helpers import cli, cli_here, shared_tmp

SPEC = """\
name = "drivers"

[topology]
standbys = 2

[workload]
clients = 6
duration = 3
warmup = 0

[matrix]
driver = ["pgbench", "sysbench"]

[compare]
baseline = { driver = "pgbench" }

[run]
repeats_min = 2
repeats_max = 2

[probes]
probed_repeats = 0
"""


@pytest.fixture(scope="module")
def run_dir() -> Iterator[Path]:
    root = shared_tmp("srl-sysbench-")
    (root / "spec.toml").write_text(SPEC)
    res = cli("run", str(root / "spec.toml"), "--out", str(root / "run"), timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    yield root / "run"
    shutil.rmtree(root, ignore_errors=True)


def _printed(stdout: str, pattern: str) -> float:
    found = re.search(pattern, stdout, re.M)
    assert found is not None, pattern
    return float(found[1])


def test_sysbench_figures_are_what_it_printed(run_dir: Path) -> None:
    db = sqlite3.connect(run_dir / "syncrep-lab.sqlite")
    repeats = db.execute(
        "select r.transactions, r.tps, r.pgbench_transactions, r.pgbench_latency_avg_ms, "
        "r.lat_mean_ms, r.lat_p99_ms, r.histogram, r.stdout_path, r.id from repeats r "
        "join cells c on c.id = r.cell_id where c.label = 'driver=sysbench'").fetchall()
    assert len(repeats) == 2
    for tx, tps, printed_tx, avg_ms, mean_ms, p99_ms, blob, stdout_path, repeat_id in repeats:
        stdout = (run_dir / stdout_path).read_text()
        assert stdout_path.endswith("sysbench.stdout")
        assert tx == printed_tx == int(_printed(stdout, r"^\s*transactions:\s+(\d+)")) > 0
        assert tx == int(_printed(stdout, r"^\s*total number of events:\s+(\d+)"))
        assert tps == pytest.approx(_printed(stdout, r"^\s*transactions:\s+\d+\s+\(([\d.]+)"))
        assert avg_ms == pytest.approx(_printed(stdout, r"^\s*avg:\s+([\d.]+)"))
        # The histogram holds every transaction sysbench counted, each at its bucket's
        # value: the mean and the 99th percentile agree with sysbench's own within its
        # buckets' width (about 1.8 %) and the 0.01 ms it prints them to.
        histogram = LatencyHistogram.from_bytes(blob)
        assert histogram.count == tx
        assert mean_ms == pytest.approx(avg_ms, rel=0.03, abs=0.01)
        printed_p99 = _printed(stdout, r"^\s*99th percentile:\s+([\d.]+)")
        assert p99_ms == pytest.approx(printed_p99, rel=0.04, abs=0.01)
        seconds = db.execute("select count(*), sum(tps) from samples where repeat_id = ?",
                             (repeat_id,)).fetchone()
        assert seconds[0] >= 2 and seconds[1] > 0  # its per-second reports, stored
    workload = next(run_dir.glob("artifacts/cell-*/workload.lua")).read_text()
    assert "insert into test(info) values (null)" in workload


def test_both_drivers_land_in_the_same_fields(run_dir: Path) -> None:
    res = cli_here("results", str(run_dir), "--json")
    assert res.returncode == 0, res.stderr
    cells = {c["params"].get("driver", "pgbench"): c for c in json.loads(res.stdout)}
    assert set(cells) == {"pgbench", "sysbench"}
    for cell in cells.values():
        assert cell["status"] == "done" and cell["tps_mean"] > 0
        assert cell["lat_p50_ms"] is not None and cell["lat_p99_ms"] >= cell["lat_p50_ms"]
    ratio = cells["sysbench"]["ratio_to_baseline"]
    assert ratio is not None and ratio["mean"] > 0  # the same insert, the same cluster
    assert (run_dir / "artifacts" / "cell-001" / "repeat-01" / "sysbench.argv").exists()


def test_sysbench_refuses_a_pgbench_script(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text('name = "x"\n[workload]\nkind = "script"\nscript = "x.sql"\n'
                    'driver = "sysbench"\n')
    (tmp_path / "x.sql").write_text("select 1;\n")
    res = cli_here("run", str(spec), "--out", str(tmp_path / "out"))
    assert res.returncode == 2
    assert "workload.driver" in res.stderr and "sysbench runs the insert" in res.stderr
    assert not (tmp_path / "out").exists()
