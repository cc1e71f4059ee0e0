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

from syncrep_lab.cluster import server
from syncrep_lab.cluster.build import UpOptions, up
from syncrep_lab.cluster.manifest import Manifest
from syncrep_lab.cluster.teardown import remove_cluster
from syncrep_lab.pg.installations import resolve
from syncrep_lab.plan.spec import Workload
from syncrep_lab.probes import standby_anatomy
from syncrep_lab.probes.anatomy import CommitAnatomy
from syncrep_lab.run.workload import ClientRun, prepare_tables, run_pgbench, script_text
from syncrep_lab.store import AnatomyRow, ProbeRow

from .helpers import shared_tmp

SUM_WITHIN = 0.15  # the parts' sum against the whole


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
    pid = server.postmaster_pid(manifest.primary.data_dir(manifest.dir))
    assert pid is not None
    recorder = CommitAnatomy(
        Path(f"/proc/{pid}/exe"), [pid], out, [manifest.admin_conninfo(manifest.primary)],
        standbys={n.name: manifest.admin_conninfo(n) for n in manifest.standbys})
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
    assert set(standby) == {*parts, standby_anatomy.WHOLE}, sorted(standby)
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
    _sum_check(standby, backend, standby_anatomy.PARTS)
    # a durable standby's flush is a real fdatasync: tens of µs at least
    flush = standby["flush"]
    assert flush.total / flush.count > 10_000, flush


def test_under_remote_write_the_flush_is_no_part(cluster: Manifest, tmp_path: Path) -> None:
    standby, backend, _, _ = _recorded(cluster, tmp_path / "out", "remote_write")
    _sum_check(standby, backend, tuple(p for p in standby_anatomy.PARTS if p != "flush"))


def test_remote_apply_is_said_not_split(cluster: Manifest, tmp_path: Path) -> None:
    pid = server.postmaster_pid(cluster.primary.data_dir(cluster.dir))
    assert pid is not None
    recorder = CommitAnatomy(
        Path(f"/proc/{pid}/exe"), [pid], tmp_path, [cluster.admin_conninfo(cluster.primary)],
        standbys={n.name: cluster.admin_conninfo(n) for n in cluster.standbys})
    recorder.start()
    run_pgbench(resolve(cluster.bin_dir).program("pgbench"), cluster.conninfo(cluster.primary),
                cluster.dir / "insert.sql", clients=2, threads=1, duration=1,
                synchronous_commit="remote_apply")
    rows = recorder.stop()
    assert not [r for r in rows.anatomy if r.who.startswith("standby:")]
    [said] = [p for p in rows.probes if p.probe == "standby_anatomy"]
    assert said.status == "skipped" and "remote_apply" in str(said.reason), said


@pytest.mark.slow
def test_on_96_the_parts_add_up_to_the_wait_for_the_standby(
        pg96: object, make_cluster: Callable[..., Manifest], tmp_path: Path) -> None:
    manifest = _made(make_cluster(pg="9.6"))
    standby, backend, probes, _ = _recorded(manifest, tmp_path / "out")
    assert ProbeRow("standby_anatomy", "ran", None) in probes, probes
    _sum_check(standby, backend, standby_anatomy.PARTS)


def test_join_takes_the_send_by_lsn_and_the_rest_in_order() -> None:
    e = standby_anatomy.Events(
        commits=[standby_anatomy.Commit(100, 5000, 330, 3)],
        sends=[(90, 4000), (150, 5000), (400, 9000)], received=[95, 170, 405],
        writes=[96, 200], flushes=[97, 300], replies=[98, 205, 310], read_back=[99, 320],
        releases=[99, 330])
    joined = standby_anatomy.join(e)
    assert [joined.parts[p] for p in standby_anatomy.PARTS] == [
        [50], [20], [30], [100], [10], [10], [10]]
    assert joined.whole == [230]
    # a send before the wait began counts from the wait: 0, and so does its transit
    early = standby_anatomy.join(standby_anatomy.Events(
        [standby_anatomy.Commit(160, 4500, 330, 3)], *list(vars(e).values())[1:]))
    assert early.parts["send"] == [0] and early.parts["transit_out"] == [10]
    # a chain without its end is left out, not cut short
    cut = standby_anatomy.join(standby_anatomy.Events(
        [standby_anatomy.Commit(100, 9000, 990, 3)], *list(vars(e).values())[1:]))
    assert cut.whole == [] and cut.unmatched == 1
    assert json.dumps(standby_anatomy.rows(joined, "b")[0].who) == '"standby:b"'
