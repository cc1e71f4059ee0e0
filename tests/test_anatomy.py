"""The commit anatomy probe (probes/anatomy.py) on real servers, real pgbench and real
bpftrace: its counts against pgbench's, its components adding up, only its own cluster
counted, the bucket scheme computed in the kernel against stats/histogram.py, the
reasons it skips, and nothing left attached after a stop, an abort or a kill -9."""

from __future__ import annotations

import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from syncrep_lab import procs
from syncrep_lab.cluster import server
from syncrep_lab.cluster.build import UpOptions, up
from syncrep_lab.cluster.manifest import Manifest
from syncrep_lab.cluster.teardown import remove_cluster
from syncrep_lab.pg.installations import resolve
from syncrep_lab.plan.spec import Workload
from syncrep_lab.probes import anatomy, uprobe_points
from syncrep_lab.probes.activity import ActivitySampler
from syncrep_lab.probes.anatomy import CommitAnatomy
from syncrep_lab.probes.uprobe_points import file_offsets, probe_offsets
from syncrep_lab.run.workload import (
    ClientRun,
    prepare_tables,
    run_pgbench,
    script_text,
    start_pgbench,
)
from syncrep_lab.stats.histogram import LatencyHistogram
from syncrep_lab.store import AnatomyRow, ProbeRow, ProbeRows, Store

from .helpers import as_nobody, cli, machine_wide, shared_tmp, wait_traced

UPROBE_EVENTS = Path("/sys/kernel/tracing/uprobe_events")


# --- pure ---------------------------------------------------------------------------


# What bpftrace 0.17 printed (-f json) around pgbench -c 2 -t 3 under synchronous_commit
# = on (PostgreSQL 18; walsender 25667 served b, 25664 c): six commits, four woken by a
# kill, two freed before they slept.
CAPTURED = (Path(__file__).parent / "data" / "anatomy-bpftrace-0.17.json").read_text()


def test_parse_output_of_captured_text() -> None:
    found = anatomy.parse_output(CAPTURED)
    assert len(found) == 12
    wait = found[("commit_wait", 0)]
    assert (wait.count, wait.total, wait.min, wait.max) == (6, 3718475, 64896, 1065330)
    parts = [found[(c, 0)] for c in ("standby_wait", "wakeup_queue", "run_queue",
                                     "unsignalled")]
    assert sum(p.total for p in parts) == wait.total
    assert found[("waiters_freed", 25667)].total == 4 == found[("run_queue", 0)].count
    rows = anatomy.anatomy_rows(found, {25667: "b"})
    assert [(r.who, r.component, r.count) for r in rows][:6] == [
        ("backend", c, n) for c, n in (("local_flush", 6), ("commit_wait", 6),
                                       ("standby_wait", 4), ("wakeup_queue", 4),
                                       ("run_queue", 4), ("unsignalled", 2))]
    assert [(r.who, r.component, r.count, r.total) for r in rows[6:]] == [
        ("walsender:pid 25664", "release", 17, 286834), ("walsender:pid 25664", "release_gap",
                                                         16, 4029307),
        ("walsender:pid 25664", "waiters_freed", 17, 0),
        ("walsender:b", "release", 14, 281376), ("walsender:b", "release_gap", 13, 4599002),
        ("walsender:b", "waiters_freed", 14, 4)]
    assert LatencyHistogram.from_bytes(rows[1].histogram) == wait


def test_buckets_that_do_not_fit_are_refused() -> None:
    with pytest.raises(ValueError, match="do not fit"):
        LatencyHistogram.from_buckets({5: 1}, total=5, low=5, high=900)
    with pytest.raises(ValueError, match="not of this scheme"):
        LatencyHistogram.from_buckets({2496: 1}, total=5, low=5, high=5)


# --- skipped, with the reason -------------------------------------------------------


def _renamed(source: Path, target: Path, symbol: str) -> Path:
    """A copy of ``source`` whose symbol tables call ``symbol`` something else (same
    length, last letter changed): an ELF file still, without that function."""
    data = source.read_bytes()
    name = symbol.encode()
    other = name[:-1] + (b"X" if name[-1:] != b"X" else b"Y")
    assert b"\0" + name + b"\0" in data
    target.write_bytes(data.replace(b"\0" + name + b"\0", b"\0" + other + b"\0"))
    return target


def test_a_binary_without_the_symbols_is_skipped_naming_them(tmp_path: Path) -> None:
    postgres = resolve("18").program("postgres")
    assert anatomy.unavailable_reason(postgres) is None
    reason = anatomy.unavailable_reason(Path("/bin/true"))
    assert reason is not None and "no symbol SyncRepWaitForLSN, SyncRepReleaseWaiters, " \
        "XLogFlush" in reason and "syncrep-lab pg build" in reason, reason
    patched = _renamed(postgres, tmp_path / "postgres", "SyncRepReleaseWaiters")
    reason = anatomy.unavailable_reason(patched)
    assert reason is not None and "no symbol SyncRepReleaseWaiters (" in reason, reason
    # the recorder itself: a probes row saying so, and no anatomy rows
    recorder = CommitAnatomy(patched, [os.getpid()], tmp_path / "out")
    recorder.start()
    assert recorder.pid is None
    rows = recorder.stop()
    assert rows.probes[0].probe == "anatomy" and rows.probes[0].status == "skipped"
    assert rows.probes[0].reason == reason and rows.anatomy == []
    reason = anatomy.unavailable_reason(tmp_path / "missing")
    assert reason is not None and "cannot read" in reason, reason


def test_without_bpftrace_it_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    reason = anatomy.unavailable_reason(Path("/bin/true"))
    assert reason is not None and "apt-get install bpftrace" in reason, reason


def _reason_as_nobody(binary: Path) -> str:
    """unavailable_reason in a child that gave up root."""
    return as_nobody(lambda: anatomy.unavailable_reason(binary) or "available")


def test_without_root_it_is_skipped_naming_the_privileges() -> None:
    reason = _reason_as_nobody(resolve("18").program("postgres"))
    assert "needs root (or CAP_BPF and CAP_PERFMON)" in reason, reason
    assert "fix: run syncrep-lab as root" in reason, reason


# --- the bucket scheme, computed in the kernel ---------------------------------------


VALUES = (0, 1, 2, 63, 127, 128, 129, 255, 256, 1000, 4095, 4096, 123_456, 2**32 - 1, 2**32,
          2**32 + 12_345, 2**43 + 5, 2**44 - 1, 2**44, 2**50)


def test_the_kernels_buckets_are_the_histograms(tmp_path: Path) -> None:
    """The statements the probe aggregates with, run in a BEGIN block on known values,
    give exactly the histogram LatencyHistogram.record makes of them (clamped alike)."""
    body = "".join(anatomy.aggregate("commit_wait", f"(uint64){v}") for v in VALUES)
    script = tmp_path / "buckets.bt"
    script.write_text(f"BEGIN {{ {body}\n exit(); }}\n")
    done = subprocess.run(["bpftrace", "-f", "json", str(script)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    found = anatomy.parse_output(done.stdout)
    expected = LatencyHistogram()
    for v in VALUES:
        expected.record(v)
    assert found == {("commit_wait", 0): expected}


# --- on real clusters -----------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir_module() -> Iterator[Path]:
    path = shared_tmp("srl-anatomy-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _cluster(where: Path, pg: str | None = None) -> Manifest:
    manifest = up(UpOptions(dir=where, pg=pg))
    prepare_tables(manifest.admin_conninfo(manifest.primary), Workload())
    (where / "insert.sql").write_text(script_text(Workload(), 1, where))
    return manifest


@pytest.fixture(scope="module")
def cluster(workdir_module: Path) -> Iterator[Manifest]:
    """The seed's shape on the embedded PostgreSQL 18: a primary, standbys b and c,
    synchronous_standby_names '1(b,c)'."""
    manifest = _cluster(workdir_module / "c")
    yield manifest
    remove_cluster(manifest.dir)


def _postmaster(manifest: Manifest) -> int:
    pid = server.postmaster_pid(manifest.primary.data_dir(manifest.dir))
    assert pid is not None
    return pid


def _recorder(manifest: Manifest, out: Path, standbys: bool = False) -> CommitAnatomy:
    """The anatomy of the primary; with ``standbys``, the standbys' half asked for too."""
    pid = _postmaster(manifest)
    return CommitAnatomy(Path(f"/proc/{pid}/exe"), [pid], out,
                         [manifest.admin_conninfo(manifest.primary)],
                         standbys={n.name: manifest.admin_conninfo(n)
                                   for n in manifest.standbys} if standbys else None)


def _pgbench(manifest: Manifest, level: str, clients: int = 12,
             duration: int = 3) -> ClientRun:
    return run_pgbench(resolve(manifest.bin_dir).program("pgbench"),
                       manifest.conninfo(manifest.primary), manifest.dir / "insert.sql",
                       clients=clients, threads=2, duration=duration,
                       synchronous_commit=level)


def _probes_at(places: dict[str, int]) -> list[tuple[bool, int]]:
    """(return probe?, file offset) of every probe the program asks for at ``places``."""
    return sorted([(False, at) for at in places.values()]
                  + [(True, places[f]) for f in anatomy.RETURNED])


def _by_component(rows: list[AnatomyRow], who: str = "backend") -> dict[str, AnatomyRow]:
    return {r.component: r for r in rows if r.who == who}


def _tracers_of_mine() -> list[int]:
    """bpftrace processes that are children of this one."""
    return [p for p in procs.children(os.getpid())
            if Path(f"/proc/{p}/comm").read_text().strip() == "bpftrace"
            and procs.alive(p)]


def _uprobe_events() -> str:
    return UPROBE_EVENTS.read_text() if UPROBE_EVENTS.exists() else ""


def _recorded(manifest: Manifest, out: Path, level: str, clients: int = 12,
              duration: int = 3) -> tuple[ProbeRows, ClientRun, CommitAnatomy]:
    events = _uprobe_events()
    recorder = _recorder(manifest, out)
    recorder.start()
    assert recorder.status == ("ran", None), recorder.status
    assert recorder.pid in _tracers_of_mine()
    # each function's entry probe, and the waits' return probes, where the decoder put
    # them (on the embedded 18, past its first loads), as the kernel has them: no
    # return probe on XLogFlush, whose time runs to the wait's entry
    assert recorder.offsets == probe_offsets(recorder.binary, anatomy.SYMBOLS)
    places = file_offsets(recorder.binary, recorder.offsets)
    assert uprobe_points.attached_uprobes(recorder.pid) == _probes_at(places)
    run = _pgbench(manifest, level, clients, duration)
    rows = recorder.stop()
    assert rows.probes == [ProbeRow("anatomy", "ran", None)], rows.probes
    assert _tracers_of_mine() == [] and recorder.pid is None
    assert _uprobe_events() == events  # perf-event uprobes: none in tracefs, ever
    assert not any(anatomy.tracers_dir().glob("*.json"))
    return rows, run, recorder


def test_every_synchronous_commit_is_timed_and_its_wait_split(
        cluster: Manifest, tmp_path: Path) -> None:
    rows, run, _ = _recorded(cluster, tmp_path / "out", "on")
    transactions = run.summary.transactions
    assert transactions is not None and transactions > 1000, run.stdout
    backend = _by_component(rows.anatomy)
    wait = backend["commit_wait"]
    # every commit waited once; pgbench does not count those in flight at its end
    assert abs(wait.count - transactions) <= 0.03 * transactions, (wait.count, transactions)
    assert abs(backend["local_flush"].count - transactions) <= 0.05 * transactions
    # the four parts of the wait partition it: each wait is in the last or the first three
    signalled = backend["standby_wait"]
    assert backend["wakeup_queue"].count == backend["run_queue"].count == signalled.count
    unsignalled = backend.get("unsignalled")
    parts = [signalled, backend["wakeup_queue"], backend["run_queue"]]
    parts += [unsignalled] if unsignalled is not None else []
    assert signalled.count + (unsignalled.count if unsignalled else 0) == wait.count
    assert abs(sum(p.total for p in parts) - wait.total) <= 0.01 * wait.total
    assert signalled.count > 0.5 * wait.count  # most commits sleep until a kill
    for row in rows.anatomy:
        assert row.min >= 0 and row.min <= row.total / row.count <= row.max, row[:6]
        h = LatencyHistogram.from_bytes(row.histogram)
        assert (h.count, h.total, h.min, h.max) == (row.count, row.total, row.min, row.max)
    # the walsenders: named by their standbys; the sync one (b) signalled the waiters
    assert {r.who for r in rows.anatomy} == {"backend", "walsender:b", "walsender:c"}
    freed = sum(r.total for r in rows.anatomy if r.component == "waiters_freed")
    assert abs(freed - signalled.count) <= 0.02 * signalled.count + 5, (freed, signalled)
    b = _by_component(rows.anatomy, "walsender:b")
    assert b["release"].count > 100 and b["waiters_freed"].total > 0
    assert abs(b["release_gap"].count - b["release"].count) <= 1
    # stored and read back
    store = Store(tmp_path / "run", create=True)
    try:
        run_id = store.create_run("r", "", {}, "0")
        cell = store.ensure_cell(run_id, 0, "k", "sc=on", {}, {})
        repeat = store.add_repeat(cell.id, {"n": 1, "started_at": "t", "duration_s": 3.0,
                                            "transactions": transactions, "failed": 0,
                                            "tps": 1.0, "histogram": b""}, [], rows)
        stored = [AnatomyRow(*r) for r in store.db.execute(
            "select who, component, count, total, min, max, histogram from anatomy "
            "where repeat_id = ?", (repeat,))]
        assert stored == rows.anatomy
    finally:
        store.close()


def test_the_wait_agrees_with_the_wait_event_sampler(cluster: Manifest,
                                                    tmp_path: Path) -> None:
    """Little's law in one window: commits a second times the mean commit wait is the
    mean number of backends waiting at once, so over the window the backends' summed
    commit waits compare with what the wait-event sampler saw of them in SyncRep: the
    latch (IPC) and SyncRepLock (LWLock), both inside SyncRepWaitForLSN. Each sample
    stands for the time around its tick (half the gaps to its neighbours: under load the
    sampler's ticks come late and unevenly). Within 15 %, give or take twice the
    sampler's own error: over 44 such windows in four sittings here (12 clients,
    embedded 18, nothing else running) the sampler saw 0.99 of the probe's total (sd
    0.08, 0.83 to 1.20; 40 within 15 %), and the spread is the sampler's: the number
    waiting moves slower than its ticks, so its error, from blocks of ticks, is 7 to 11 %
    of a 4 s window at 20 Hz (50 Hz did not narrow it)."""
    admin = cluster.admin_conninfo(cluster.primary)
    sampler = ActivitySampler([("primary", admin, True)], {}, hz=20.0, replication_hz=0.0,
                              version_num=180000)
    recorder = _recorder(cluster, tmp_path / "out")
    recorder.start()
    sampler.start()
    # its ticks from before the first commit: a sampler late to connect (a loaded
    # machine) would miss commits the probe timed
    assert sampler.connected.wait(timeout=15)
    try:
        _pgbench(cluster, "on", clients=12, duration=4)
    finally:
        sampled = sampler.stop()["primary"]
        rows = recorder.stop()
    waited_s = _by_component(rows.anatomy)["commit_wait"].total / 1e9
    ticks = sampled.tick_times
    assert len(ticks) > 40
    around = [(ticks[min(k + 1, len(ticks) - 1)] - ticks[max(k - 1, 0)]) / 2
              for k in range(len(ticks))]
    latch = dict.fromkeys(ticks, 0.0)
    for (t, role, wtype), n in sampled.timeline.items():
        if role == "backend" and wtype == "IPC":  # in insert-only, the SyncRep latch
            latch[t] += n
    per_tick = [latch[t] * s for t, s in zip(ticks, around, strict=True)]
    # the lock's samples have no timeline of their own (it is kept per wait type): at
    # the ticks' mean spacing, a few % of the latch's
    locked = sum(n for (role, wtype, event), n in sampled.waits.items()
                 if role == "backend" and wtype == "LWLock" and event == "SyncRep")
    seen_s = sum(per_tick) + locked * statistics.mean(around)
    # the sampler's error over the window, from blocks of 8 ticks (0.4 s)
    blocks = [sum(per_tick[k:k + 8]) for k in range(0, len(per_tick) - 7, 8)]
    error = math.sqrt(len(blocks)) * statistics.stdev(blocks)
    assert abs(seen_s - waited_s) <= 0.15 * waited_s + 2 * error, \
        (waited_s, seen_s, error)


def test_aliases_bcc_does_not_take_leave_the_probes_on_the_first_instructions(
        cluster: Manifest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A debug file bcc ignores (its build ID not the binary's): bpftrace attaches no
    probe at the aliases, the recorder sees it from the kernel's list and starts again
    with every probe on its function's first instruction."""
    real = uprobe_points.alias_elf

    def foreign(binary: Path, offsets: dict[str, int]) -> bytes:
        data = bytearray(real(binary, offsets))
        note = uprobe_points.ElfFile(binary).section(".note.gnu.build-id")
        assert note is not None
        at = bytes(data).index(note)
        data[at + 16:at + len(note)] = bytes(len(note) - 16)  # another build ID
        return bytes(data)

    monkeypatch.setattr(anatomy, "alias_elf", foreign)
    recorder = _recorder(cluster, tmp_path / "out")
    assert any(probe_offsets(recorder.binary, anatomy.SYMBOLS).values())
    recorder.start()
    try:
        assert recorder.status == ("ran", None), recorder.status
        assert recorder.offsets == dict.fromkeys(anatomy.SYMBOLS, 0)
        assert recorder.fallback is not None and recorder.pid is not None
        entries = file_offsets(recorder.binary, recorder.offsets)
        assert uprobe_points.attached_uprobes(recorder.pid) == _probes_at(entries)
    finally:
        rows = recorder.stop()
    assert rows.probes == [ProbeRow("anatomy", "ran", None)]


def test_local_commits_do_not_wait(cluster: Manifest, tmp_path: Path) -> None:
    """Under synchronous_commit = local PostgreSQL still calls SyncRepWaitForLSN, which
    returns at once: the probe reads the session's level and counts no wait."""
    rows, run, _ = _recorded(cluster, tmp_path / "out", "local")
    transactions = run.summary.transactions
    assert transactions is not None and transactions > 1000
    backend = _by_component(rows.anatomy)
    assert "commit_wait" not in backend, backend["commit_wait"][:3]
    assert abs(backend["local_flush"].count - transactions) <= 0.05 * transactions


def test_another_cluster_of_the_same_binary_is_not_counted(
        cluster: Manifest, workdir_module: Path, tmp_path: Path) -> None:
    other = _cluster(workdir_module / "other")
    try:
        assert resolve(other.bin_dir).program("postgres") == \
            resolve(cluster.bin_dir).program("postgres")
        recorder = _recorder(cluster, tmp_path / "out")
        recorder.start()
        assert recorder.status == ("ran", None), recorder.status
        running = [start_pgbench(resolve(m.bin_dir).program("pgbench"),
                                 m.conninfo(m.primary), m.dir / "insert.sql", clients=8,
                                 threads=1, duration=3, synchronous_commit="on")
                   for m in (cluster, other)]
        ours, theirs = (r.finish().summary.transactions for r in running)
        rows = recorder.stop()
    finally:
        remove_cluster(other.dir)
    assert ours and theirs and theirs > 0.3 * ours, (ours, theirs)
    wait = _by_component(rows.anatomy)["commit_wait"]
    assert abs(wait.count - ours) <= 0.03 * ours, (wait.count, ours, theirs)


SLOW_FLUSH_MS = 40  # each fdatasync of the sync standby's walreceiver, made this long


def _slowed_flushes(manifest: Manifest, standby: str) -> subprocess.Popen[bytes]:
    """strace on ``standby``'s walreceiver, each of its fdatasync (its WAL flush: the
    benchmark profile keeps fsync on) delayed SLOW_FLUSH_MS on its way out; attached
    when this returns."""
    from syncrep_lab.pg.roles import node_processes

    node = next(n for n in manifest.nodes if n.name == standby)
    postmaster = server.postmaster_pid(node.data_dir(manifest.dir))
    assert postmaster is not None
    receiver = next(p for p in node_processes(standby, postmaster) if p.label == "walreceiver")
    tracer = subprocess.Popen(
        ["strace", "-qq", "-e", "trace=fdatasync",
         "-e", f"inject=fdatasync:delay_exit={SLOW_FLUSH_MS * 1000}", "-o", "/dev/null",
         "-p", str(receiver.pid)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_traced(receiver.pid, tracer)
    return tracer


PACE_MS = 80  # each client's pause after a commit: longer than b's flush, so that each
# commit finds b's walreceiver idle, not busy flushing the one before (it reads nothing
# while it flushes, and a commit that came meanwhile waits for that flush at any level)


def test_each_level_waits_for_what_it_must(cluster: Manifest, tmp_path: Path) -> None:
    """Real servers, each level's commits timed: ``off`` neither flushes nor waits for a
    standby; ``local`` flushes and does not wait; ``remote_write`` waits for the sync
    standby's write, not its flush; ``on`` for its flush too. The sync standby's (b's)
    flushes slowed by 40 ms each, ``on``'s wait for the standby takes them and
    ``remote_write``'s does not: b replies with what it has written before it flushes."""
    timed: dict[str, tuple[dict[str, AnatomyRow], int]] = {}
    for level in ("off", "local"):
        rows, run, _ = _recorded(cluster, tmp_path / level, level, clients=4, duration=2)
        assert run.summary.transactions is not None
        timed[level] = (_by_component(rows.anatomy), run.summary.transactions)
    paced = cluster.dir / "insert-paced.sql"
    paced.write_text((cluster.dir / "insert.sql").read_text() + f"\n\\sleep {PACE_MS} ms\n")
    tracer = _slowed_flushes(cluster, "b")
    try:
        for level in ("remote_write", "on"):
            recorder = _recorder(cluster, tmp_path / level)
            recorder.start()
            assert recorder.status == ("ran", None), recorder.status
            run = run_pgbench(resolve(cluster.bin_dir).program("pgbench"),
                              cluster.conninfo(cluster.primary), paced, clients=2,
                              threads=2, duration=3, synchronous_commit=level)
            rows = recorder.stop()
            assert rows.probes == [ProbeRow("anatomy", "ran", None)], rows.probes
            assert run.summary.transactions is not None
            timed[level] = (_by_component(rows.anatomy), run.summary.transactions)
    finally:
        tracer.terminate()
        tracer.wait(timeout=20)
    for level in ("off", "local"):
        parts, commits = timed[level]
        assert commits > 100, (level, commits)
        assert "commit_wait" not in parts or parts["commit_wait"].count == 0, (level, parts)
    off, off_commits = timed["off"]
    local, local_commits = timed["local"]
    # an off commit does not flush its WAL (the walwriter does, later); a local one does
    assert off.get("local_flush") is None or off["local_flush"].count < 0.05 * off_commits
    assert abs(local["local_flush"].count - local_commits) <= 0.05 * local_commits
    waited = {}
    for level in ("remote_write", "on"):
        parts, commits = timed[level]
        wait = parts["commit_wait"]
        assert commits >= 20 and abs(wait.count - commits) <= 2, (level, wait.count, commits)
        standby = parts["standby_wait"]
        waited[level] = standby.total / standby.count / 1e6  # ms until the release began
    # on waits for b's flush, remote_write only for its write
    assert waited["on"] >= 0.8 * SLOW_FLUSH_MS, waited
    assert waited["remote_write"] <= 0.4 * SLOW_FLUSH_MS, waited


def test_without_standbys_no_level_waits_and_off_does_not_flush(
        make_cluster: Callable[..., Manifest], tmp_path: Path) -> None:
    """The seed's group 7 (no standby): ``off`` and ``on`` commits never wait for a
    standby (none is named: the wait returns at once, signalled by nobody), and only
    ``on`` flushes its WAL at commit."""
    manifest = make_cluster(standbys=0)
    prepare_tables(manifest.admin_conninfo(manifest.primary), Workload())
    (manifest.dir / "insert.sql").write_text(script_text(Workload(), 1, manifest.dir))
    timed = {}
    for level in ("off", "on"):
        rows, run, _ = _recorded(manifest, tmp_path / level, level, clients=4, duration=2)
        assert run.summary.transactions is not None and run.summary.transactions > 100
        timed[level] = (_by_component(rows.anatomy), run.summary.transactions)
        assert not any(r.who.startswith("walsender") for r in rows.anatomy), rows.anatomy
    off, off_commits = timed["off"]
    on, on_commits = timed["on"]
    assert "commit_wait" not in off or off["commit_wait"].count == 0, off
    assert off.get("local_flush") is None or off["local_flush"].count < 0.05 * off_commits
    assert abs(on["local_flush"].count - on_commits) <= 0.05 * on_commits
    # each on commit enters the wait and leaves it at once, signalled by nobody (4 µs
    # on average here)
    wait = on["commit_wait"]
    assert abs(wait.count - on_commits) <= 0.05 * on_commits, (wait, on_commits)
    assert on["unsignalled"].count == wait.count and "standby_wait" not in on, on
    assert wait.total / wait.count < 1e6, wait  # under a millisecond on average


def _hog(cpu: int, seconds: float) -> int:
    """A child that keeps ``cpu`` for ``seconds`` at real-time priority: nothing else of
    normal priority runs there meanwhile (the kernel's real-time share, 95 % of each
    second by default, is more than it asks)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.sched_setaffinity(0, {cpu})
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                pass
        finally:
            os._exit(0)
    return pid


def test_a_stop_bpftrace_missed_is_sent_again(cluster: Manifest, tmp_path: Path) -> None:
    """bpftrace heeds a stop signal only when it interrupts its epoll_wait: one that comes
    after the wait's 100 ms timeout expired, while bpftrace waits for its CPU, is missed
    (as happens on a busy machine). Made to happen here (bpftrace's CPU taken by a
    real-time spinner, the stop sent meanwhile), the stop still ends in a second or two
    with its maps, as the signal is sent again."""
    cpus = sorted(os.sched_getaffinity(0))
    assert len(cpus) >= 2, f"this test needs two CPUs to run on, it has {cpus}"
    recorder = _recorder(cluster, tmp_path / "out")
    recorder.start()
    assert recorder.status == ("ran", None), recorder.status
    run = _pgbench(cluster, "on", clients=4, duration=1)
    assert recorder.pid is not None
    os.sched_setaffinity(recorder.pid, {cpus[-1]})  # its main thread, the one that polls
    os.sched_setaffinity(0, set(cpus[:-1]))
    try:
        hog = _hog(cpus[-1], 0.6)
        time.sleep(0.3)  # bpftrace's timeout expired: runnable, not running
        started = time.monotonic()
        rows = recorder.stop()
        took = time.monotonic() - started
        os.waitpid(hog, 0)
    finally:
        os.sched_setaffinity(0, set(cpus))
    assert rows.probes == [ProbeRow("anatomy", "ran", None)], rows.probes
    assert recorder.nudges >= 1, "the first signal was heeded: the race did not happen"
    assert took < 10, took
    wait = _by_component(rows.anatomy)["commit_wait"]
    assert run.summary.transactions is not None
    assert abs(wait.count - run.summary.transactions) <= 0.03 * run.summary.transactions + 4


# --- nothing left behind ------------------------------------------------------------


def test_an_abort_leaves_nothing_attached(cluster: Manifest, tmp_path: Path) -> None:
    events = _uprobe_events()
    recorder = _recorder(cluster, tmp_path / "out")
    recorder.start()
    pid = recorder.pid
    assert pid is not None and pid in _tracers_of_mine()
    assert any(anatomy.tracers_dir().glob(f"{pid}.json"))
    recorder.abort()
    assert not procs.alive(pid) and _tracers_of_mine() == []
    assert _uprobe_events() == events
    assert not any(anatomy.tracers_dir().glob("*.json"))


CHILD = """
import sys, time
from pathlib import Path
from syncrep_lab.probes.activity import ActivitySampler
from syncrep_lab.probes.anatomy import CommitAnatomy
from syncrep_lab.probes.uprobe_points import file_offsets, probe_offsets
recorder = CommitAnatomy(Path(sys.argv[1]), [int(sys.argv[2])], Path(sys.argv[3]))
recorder.start()
print(recorder.pid, recorder.status[0], flush=True)
time.sleep(600)
"""


def _gone(pid: int, start: str | None, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while procs.is_running(pid, start):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@machine_wide
def test_a_killed_tool_takes_bpftrace_with_it_and_clean_ends_a_leftover(
        cluster: Manifest, tmp_path: Path) -> None:
    """kill -9 of the process that started the recorder: PR_SET_PDEATHSIG ends bpftrace,
    and ``clean`` drops its record. A bpftrace still running with its owner gone (one
    started without the death signal, recorded as ours) is ended by ``clean``."""
    home = shared_tmp("srl-anatomy-home-")
    env = {**os.environ, "SYNCREP_LAB_HOME": str(home)}
    events = _uprobe_events()
    started: list[tuple[int, str | None]] = []  # the bpftraces, ended whatever happens
    try:
        pid = _postmaster(cluster)
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, f"/proc/{pid}/exe", str(pid), str(tmp_path / "o")],
            stdout=subprocess.PIPE, text=True, env=env)
        assert child.stdout is not None
        line = child.stdout.readline().split()
        assert line[1:] == ["ran"], line
        tracer = int(line[0])
        started.append((tracer, procs.start_time(tracer)))
        records = home / "state" / "tracers"
        assert (records / f"{tracer}.json").is_file()
        child.kill()
        child.wait(timeout=10)
        assert _gone(*started[0]), "bpftrace outlived the tool killed with SIGKILL"
        assert _uprobe_events() == events
        # a leftover: bpftrace without the death signal, its owner a process now gone
        program = tmp_path / "leftover.bt"
        program.write_text(anatomy.program(f"/proc/{pid}/exe", [pid]))
        leftover = subprocess.Popen(["bpftrace", str(program)], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, process_group=0)
        started.append((leftover.pid, procs.start_time(leftover.pid)))
        owner = child.pid  # reaped above; and a start time no process of that pid has
        (records / f"{leftover.pid}.json").write_text(
            f'{{"pid": {leftover.pid}, "start": "{started[1][1]}", '
            f'"owner": {{"pid": {owner}, "start": "1"}}}}')
        done = cli("clean", env=env)
        assert done.returncode == 0, done.stderr
        assert f"ended bpftrace (pid {leftover.pid})" in done.stdout, done.stdout
        assert leftover.wait(timeout=10) == -signal.SIGKILL
        assert list(records.glob("*.json")) == []
        assert _uprobe_events() == events
        again = cli("clean", env=env)
        assert "nothing to clean" in again.stdout, again.stdout
    finally:
        for tracer_pid, start in started:
            if procs.is_running(tracer_pid, start):
                os.kill(tracer_pid, signal.SIGKILL)
        shutil.rmtree(home, ignore_errors=True)


# --- PostgreSQL 9.6: latches signalled with SIGUSR1 -----------------------------------


@pytest.mark.slow
def test_on_96_the_walsenders_sigusr1_is_seen(
        pg96: object, make_cluster: Callable[..., Manifest], tmp_path: Path) -> None:
    manifest = make_cluster(pg="9.6")
    prepare_tables(manifest.admin_conninfo(manifest.primary), Workload())
    (manifest.dir / "insert.sql").write_text(script_text(Workload(), 1, manifest.dir))
    reason = anatomy.unavailable_reason(resolve(manifest.bin_dir).program("postgres"))
    assert reason is None, reason
    rows, run, _ = _recorded(manifest, tmp_path / "out", "on", clients=8)
    transactions = run.summary.transactions
    assert transactions is not None and transactions > 500
    backend = _by_component(rows.anatomy)
    assert abs(backend["commit_wait"].count - transactions) <= 0.03 * transactions
    assert backend["run_queue"].count > 0.5 * transactions  # woken by a SIGUSR1 kill
    freed = sum(r.total for r in rows.anatomy if r.component == "waiters_freed")
    assert freed >= backend["run_queue"].count
