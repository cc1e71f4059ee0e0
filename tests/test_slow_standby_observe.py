"""observe on a cluster whose sync standby b is slow, made slow three ways the tool did
not make itself (tests/slow_disk.py): b's volume held to an IOPS limit, to a throughput
limit, and b's flushes delayed by the tool's preload (the least like a disk); and the same
cluster unslowed. Each answer is checked where a DBA reads it: the verdict names b's
flush, the headroom reads about 1x and names its ceiling on the metric an alert watches,
and the standby's half puts the wait in b's queue and flush, not on the wire.

16 clients over a Unix socket on one machine: nothing is on the wire, so a "transit out"
of more than a fraction of a millisecond would be a queue miscounted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from syncrep_lab.analysis.observe import run_figures
from syncrep_lab.cluster.manifest import Manifest
from syncrep_lab.observe.metrics import families
from syncrep_lab.pg.installations import Installation

from .helpers import cli, load_beside, shared_tmp
from .slow_disk import WORKLOAD, Volume, cluster, postmaster_of, throttled, volume

CLIENTS = 16
IOPS = 60  # b's WAL flush tens of ms (bench/slow_standby.py: 32 ms a call)
BPS = 300_000  # 15 ms a call there
FLUSH_DELAY_US = 30_000
SECONDS = 6


@pytest.fixture(scope="module")
def clusters() -> Iterator[tuple[Volume, Manifest, Manifest]]:
    """The cluster on a volume of its own (control, iops, bps) and one whose b sleeps
    before each fdatasync (preload), both removed after."""
    with ExitStack() as stack:
        work = shared_tmp("srl-slowobs-")
        stack.callback(lambda: __import__("shutil").rmtree(work, ignore_errors=True))
        vol = stack.enter_context(volume())
        disk = stack.enter_context(cluster(vol.mount / "c"))
        slept = stack.enter_context(cluster(work / "p", FLUSH_DELAY_US))
        yield vol, disk, slept


def _window(manifest: Manifest, pg18: Installation, tmp: Path) -> tuple[dict[str, Any], Path]:
    """One observe --dir --anatomy window beside pgbench: its answer and its folder."""
    bench = load_beside(pg18.program("pgbench"), manifest.conninfo(manifest.primary), 120,
                        tmp / "w.sql", WORKLOAD, clients=CLIENTS)
    out = tmp / "obs"
    try:
        res = cli("observe", "--dir", str(manifest.dir), "--anatomy", "--seconds",
                  str(SECONDS), "--slice", str(SECONDS // 2), "--out", str(out), "--json",
                  timeout=240)
    finally:
        bench.terminate()
        bench.communicate(timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    (window,) = json.loads(res.stdout)["windows"]
    return window, out


def _headroom_metric(out: Path) -> tuple[float, dict[str, str]]:
    """syncrep_headroom_ratio as an exporter of this window would serve it."""
    metrics = families(run_figures(out, 1), [], 1, 1)
    (family,) = [m for m in metrics if m.name == "syncrep_headroom_ratio"]
    (sample,) = family.samples
    return sample.value, dict(sample.labels)


def _half(window: dict[str, Any]) -> dict[str, float]:
    (half,) = window["anatomy"]["standby"]
    return {p["component"]: p["us_per_commit"]["mean"] for p in half["parts"]}


@pytest.mark.parametrize("how", ["iops", "bps", "preload"])
def test_a_slow_standby_is_named_and_sets_the_ceiling(
        how: str, clusters: tuple[Volume, Manifest, Manifest], pg18: Installation,
        tmp_path: Path) -> None:
    vol, disk, slept = clusters
    if how == "preload":
        window, out = _window(slept, pg18, tmp_path)
    else:
        limit = {"iops": IOPS} if how == "iops" else {"bps": BPS}
        with throttled(postmaster_of(disk, "b"), vol, **limit):
            window, out = _window(disk, pg18, tmp_path)
    first = window["verdicts"][0]
    said = json.dumps(window["verdicts"], indent=1)
    # the verdict: b's flush, from its walreceiver's time in a sync, c beside it
    assert first["mechanism"] == "standby flush", said
    assert "standby b's WAL flush binds" in first["summary"], said
    assert "c's walreceiver" in first["summary"], said
    assert any(step.startswith("quorum ANY 1 (b, c)") for step in first["next_steps"]), said
    b = next(s for s in window["standbys"] if s["standby"] == "b")
    assert b["syncing"] >= 0.8, b
    if how != "preload":  # b's WAL disk read: the volume, writing at its limit
        assert b["disk"]["device"] == Path(vol.device).name, b
        assert b["disk"]["writes_per_s"] > 0, b
        assert f"its disk {b['disk']['device']}" in first["summary"], said
    # the headroom: the cluster is at its ceiling, and the metric names which
    assert 0.8 <= window["headroom"] <= 1.3, (window["headroom"], window["bounds"])
    assert window["lowest_bound"]["kind"] in ("wait", "standby"), window["lowest_bound"]
    value, labels = _headroom_metric(out)
    assert value == pytest.approx(window["headroom"], rel=1e-9)
    assert labels == {"resource": window["lowest_bound"]["resource"],
                      "kind": window["lowest_bound"]["kind"]}
    # the standby's half: the wait is b's (its queue and its flush), not the wire's, and
    # a sync's time per call is a call's: the calls fit in the window
    parts = _half(window)
    assert parts["transit_out"] < 1_000, parts
    assert parts["queue"] + parts["flush"] > 20 * parts["transit_out"], parts
    assert b["sync_call_us"] * b["syncs"] <= 1.05 * window["seconds"] * 1e6, b


def test_the_unslowed_cluster_is_not_called_slow(
        clusters: tuple[Volume, Manifest, Manifest], pg18: Installation,
        tmp_path: Path) -> None:
    _, disk, _ = clusters
    window, out = _window(disk, pg18, tmp_path)
    mechanisms = [v["mechanism"] for v in window["verdicts"]]
    assert "standby flush" not in mechanisms, window["verdicts"]
    b = next(s for s in window["standbys"] if s["standby"] == "b")
    assert b["syncing"] < 0.5, b
    assert not b["lags_disagree"], b
    value, labels = _headroom_metric(out)
    assert value == pytest.approx(window["headroom"], rel=1e-9) and labels["resource"]
    parts = _half(window)
    assert parts["queue"] + parts["flush"] < 5_000, parts  # a flush here: well under 5 ms
