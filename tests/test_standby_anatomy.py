"""The standby's half of a commit (probes/standby_anatomy.py) on real servers, real
pgbench and real bpftrace: each part measured, their sum against the anatomy's
standby_wait of the same commits (18 and 9.6), and a longer link moving only the
transits."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from syncrep_lab.cluster.build import UpOptions, up
from syncrep_lab.cluster.manifest import Manifest
from syncrep_lab.cluster.teardown import remove_cluster
from syncrep_lab.pg.installations import resolve
from syncrep_lab.plan.spec import Workload
from syncrep_lab.probes import standby_anatomy
from syncrep_lab.run.workload import ClientRun, prepare_tables, run_pgbench, script_text
from syncrep_lab.store import AnatomyRow, ProbeRow

from .helpers import cli, load_beside, shared_tmp
from .test_anatomy import _recorder

SUM_WITHIN = 0.15  # the parts' sum against the whole
FLUSHED = tuple(p for p in standby_anatomy.PARTS if p != "replay")  # under `on`


@pytest.fixture(scope="module")
def cluster() -> Iterator[Manifest]:
    """The seed's shape on the embedded PostgreSQL 18 (a primary, standbys b and c, b
    the sync one), durable: its standby syncs its WAL."""
    where = shared_tmp("srl-standby-")
    manifest = _made(up(UpOptions(dir=where / "c")))
    yield manifest
    remove_cluster(manifest.dir)
    shutil.rmtree(where, ignore_errors=True)


def _made(manifest: Manifest) -> Manifest:
    prepare_tables(manifest.admin_conninfo(manifest.primary), Workload())
    (manifest.dir / "insert.sql").write_text(script_text(Workload(), 1, manifest.dir))
    return manifest


def _recorded(manifest: Manifest, out: Path, level: str = "on", clients: int = 4,
              ) -> tuple[dict[str, AnatomyRow], dict[str, AnatomyRow], list[ProbeRow],
                         ClientRun]:
    """The standby's rows and the backends' by component, the probes' rows, the run."""
    recorder = _recorder(manifest, out, standbys=True)
    recorder.start()
    assert recorder.status == ("ran", None), recorder.status
    assert recorder.standby is not None, recorder.standby_status
    run = run_pgbench(resolve(manifest.bin_dir).program("pgbench"),
                      manifest.conninfo(manifest.primary), manifest.dir / "insert.sql",
                      clients=clients, threads=2, duration=2, synchronous_commit=level)
    rows = recorder.stop()
    standby = {r.component: r for r in rows.anatomy if r.who.startswith("standby:")}
    backend = {r.component: r for r in rows.anatomy if r.who == "backend"}
    return standby, backend, rows.probes, run


def _sum_check(standby: dict[str, AnatomyRow], backend: dict[str, AnatomyRow],
               parts: tuple[str, ...]) -> None:
    whole = standby[standby_anatomy.WHOLE]
    # most commits that slept to their release are joined to the standby's events
    assert whole.count >= 0.8 * backend["standby_wait"].count, (whole, backend)
    # the joined commits' whole is the anatomy's standby_wait of those commits
    assert whole.total <= backend["standby_wait"].total
    assert set(standby) - {standby_anatomy.SYNC} == {*parts, standby_anatomy.WHOLE}, sorted(
        standby)
    for part in parts:
        assert standby[part].count == whole.count, (part, standby[part])
    summed = sum(standby[p].total for p in parts)
    assert abs(summed - whole.total) <= SUM_WITHIN * whole.total, (
        summed, whole.total, {p: standby[p].total / whole.count for p in parts})


def test_on_18_the_parts_add_up_to_the_wait_for_the_standby(
        cluster: Manifest, tmp_path: Path) -> None:
    standby, backend, probes, run = _recorded(cluster, tmp_path / "out")
    assert ProbeRow("standby_anatomy", "ran", None) in probes, probes
    assert run.summary.transactions is not None and run.summary.transactions > 300
    assert {r.who for r in standby.values()} == {"standby:b"}
    _sum_check(standby, backend, FLUSHED)
    # a durable standby's flush is a real fdatasync: tens of µs at least; each call
    # covers a batch of commits, and a commit's flush part is at least a call's time on
    # average (it may also wait for the call before its own to end)
    flush, syncs = standby["flush"], standby[standby_anatomy.SYNC]
    assert flush.total / flush.count > 10_000, flush
    assert 0 < syncs.count < flush.count, (syncs, flush)
    assert flush.total / flush.count >= 0.8 * syncs.total / syncs.count, (syncs, flush)


def test_under_remote_write_the_flush_is_no_part(cluster: Manifest, tmp_path: Path) -> None:
    standby, backend, _, _ = _recorded(cluster, tmp_path / "out", "remote_write")
    _sum_check(standby, backend, tuple(p for p in FLUSHED if p != "flush"))


def test_under_remote_apply_the_replay_is_a_part(cluster: Manifest, tmp_path: Path) -> None:
    """The reply whose apply position covers the commit ends its replay (from the flush:
    the startup process's replay and its request for a reply, the reply not apart)."""
    standby, backend, _, _ = _recorded(cluster, tmp_path / "out", "remote_apply")
    _sum_check(standby, backend, tuple(p for p in standby_anatomy.PARTS if p != "reply"))
    assert standby["replay"].total > 0, standby["replay"]


def test_observe_splits_the_wait_for_a_standby_named(cluster: Manifest, tmp_path: Path
                                                      ) -> None:
    """observe --anatomy --standby b=...: each slice's commits get the standby's half,
    which adds up to their wait for it; costs shows it."""
    b = cluster.node("b")
    script = cluster.dir / "insert.sql"
    # once its sessions commit: a fixed second before the window was not always enough
    # on a loaded machine
    bench = load_beside(resolve(cluster.bin_dir).program("pgbench"),
                        cluster.conninfo(cluster.primary), 60, tmp_path / "w.sql",
                        script.read_text())
    try:
        res = cli("observe", "--dir", str(cluster.dir), "--standby",
                  f"b={cluster.conninfo(b)}", "--seconds", "4", "--slice", "2", "--anatomy",
                  "--out", str(tmp_path / "obs"), "--json", timeout=120)
    finally:
        bench.terminate()
        bench.communicate(timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    notes = json.loads(res.stdout)["windows"][0]["notes"]
    assert any(n.startswith("the wait for standby b split for") for n in notes), notes
    [costs] = json.loads(cli("costs", str(tmp_path / "obs"), "--json").stdout)
    [half] = costs["anatomy"]["standby"]
    # a 4 s window at 4 clients: about 8,000 commits idle, 841 under the suite's load;
    # a join gone wrong gave 1
    assert half["commits"] > 400 and abs(half["sum_ratio"] - 1) <= SUM_WITHIN, half
    parts = {p["component"]: p for p in half["parts"]}
    assert set(parts) == set(FLUSHED), sorted(parts)
    # per commit with an interval over the two slices
    assert all(p["us_per_commit"]["low"] is not None for p in parts.values()), parts
    assert "the wait for standby b (" in cli("costs", str(tmp_path / "obs")).stdout


@pytest.mark.slow
def test_on_96_the_parts_add_up_to_the_wait_for_the_standby(
        pg96: object, make_cluster: Callable[..., Manifest], tmp_path: Path) -> None:
    manifest = _made(make_cluster(pg="9.6"))
    standby, backend, probes, _ = _recorded(manifest, tmp_path / "out")
    assert ProbeRow("standby_anatomy", "ran", None) in probes, probes
    _sum_check(standby, backend, FLUSHED)
    # 9.6's status messages read as 18's: the replay found by its apply position
    standby, backend, _, _ = _recorded(manifest, tmp_path / "applied", "remote_apply")
    _sum_check(standby, backend, tuple(p for p in standby_anatomy.PARTS if p != "reply"))


def test_join_takes_the_send_by_lsn_and_the_rest_by_bytes_and_order() -> None:
    def events(*commits: standby_anatomy.Commit) -> standby_anatomy.Events:
        # two batches: the second's WAL (LSN 9000) sent at 160 while the first's reply
        # is on its way; each reply read alone
        return standby_anatomy.Events(
            commits=list(commits), sends=[(90, 80, 4000), (150, 80, 5000), (160, 40, 9000)],
            received=[(95, 80), (170, 60), (175, 60)], writes=[96, 200, 260],
            flushes=[97, 300, 400], replies=[(98, 39), (205, 39), (310, 39), (410, 39)],
            read_back=[(99, 39), (320, 39), (330, 39), (500, 39)],
            releases=[99, 325, 340, 505])

    joined = standby_anatomy.join(events(standby_anatomy.Commit(100, 5000, 340, 3)))
    # the second send's last byte came in the receive at 175, not the one at 170
    assert [joined.parts[p] for p in standby_anatomy.PARTS] == [
        [50], [25], [0], [25], [100], [], [10], [20], [10]]  # no sync timed: no queue
    assert joined.whole == [240]
    # a send before the wait began counts from the wait: 0, and so does its transit
    early = standby_anatomy.join(events(standby_anatomy.Commit(160, 4500, 340, 3)))
    assert early.parts["send"] == [0] and early.parts["transit_out"] == [15]
    # under remote_write the reply after the write, no flush
    written = standby_anatomy.join(events(standby_anatomy.Commit(100, 5000, 325, 2)))
    assert written.parts["flush"] == [] and written.parts["reply"] == [5]
    # a chain without its end is left out, not cut short; remote_apply is not split
    cut = standby_anatomy.join(events(standby_anatomy.Commit(100, 9900, 990, 3),
                                      standby_anatomy.Commit(100, 5000, 340, 4)))
    assert (cut.whole, cut.unmatched, cut.applied) == ([], 1, 1)
    assert json.dumps(standby_anatomy.rows(joined, "b")[0].who) == '"standby:b"'


def test_two_clocks_are_joined_on_the_offset_of_the_fastest_round_trips() -> None:
    """The walreceiver's events on a clock 3 h ahead: the offset comes from the fastest
    trips (30 µs each way), not the slow ones (90 out, 30 back), and the parts are
    those of the same events on one clock; out and back split as the fast trips are."""
    def events(ahead: int) -> standby_anatomy.Events:
        e = standby_anatomy.Events([], [], [], [], [], [], [], [], [], [])
        for i in range(20):
            start, lsn, out = 10_000 * (i + 1), 1000 * (i + 1), 30 if i % 2 else 90
            got = start + 10 + out
            e.commits.append(standby_anatomy.Commit(start, lsn, got + 25 + 30 + 3, 3))
            e.sends.append((start + 10, 80, lsn))
            e.received.append((got + ahead, 80))
            e.writes.append(got + 5 + ahead)
            e.flushes.append(got + 20 + ahead)
            e.syncs.append((got + 20 + ahead, 15))
            e.replies.append((got + 25 + ahead, 39))
            e.positions.append((lsn, lsn, 0))
            e.read_back.append((got + 25 + 30, 39))
            e.releases.append(got + 25 + 30 + 3)
        return e

    one = standby_anatomy.join(events(0))
    ahead = 3 * 3600 * 10**9
    two, clock = standby_anatomy.split(events(ahead), 0)
    assert clock is not None and clock.offset == ahead and clock.spread == 0, clock
    assert clock.trips == 20 and clock.delay == 60, clock
    assert two.parts == one.parts and two.whole == one.whole
    assert sorted(set(two.parts["transit_out"])) == [30, 90]
    assert set(two.parts["transit_back"]) == {30}
