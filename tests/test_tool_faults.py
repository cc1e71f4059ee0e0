"""The tool itself under faults: lose no result, leave nothing behind, hang never.

Signals at every stage of a run, a second Ctrl-C, an overrunning pgbench, a perf that
does not stop, a full disk and a read-only run folder. Real servers, pgbench and perf;
the command line runs as a subprocess, started the way a user starts it. Ctrl-C is sent
to the whole process group, as a terminal does; SIGTERM to the tool alone, as ``kill``.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from syncrep_lab.cluster.manifest import Manifest
from syncrep_lab.store import DB_NAME

from .helpers import (
    cli,
    descendants,
    machine_wide,
    mentioning,
    postmasters_in,
    processes,
    run_cluster_dir,
    still_alive,
    wait_until,
)

# the tool killed or faulted at every stage, and what `clean --list` lists compared
pytestmark = machine_wide

SPEC = """\
name = "faults"

[topology]
standbys = 1
sync = "b"

[workload]
# One second of each stage is time enough to catch it and signal it.
clients = 2
duration = 1
warmup = 1

[run]
repeats_min = 1
repeats_max = 1

[probes]
flamegraphs = false
# the commit anatomy's own repeat is left out (no stage below signals it): a resume
# that runs it is test_run.py's killed run, its abort and kill test_anatomy.py's
anatomy = false
"""

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="mounts need root")


# --- runs -------------------------------------------------------------------------


class Run:
    """``syncrep-lab run`` in a session of its own, its output in files."""

    def __init__(self, workdir: Path, out: Path, spec: str = SPEC, *args: str) -> None:
        self.out = out
        self.stderr_path = workdir / f"stderr-{time.monotonic_ns()}.txt"
        spec_file = workdir / "spec.toml"
        spec_file.write_text(spec)
        cmd = ([sys.executable, "-m", "syncrep_lab", "run", "--resume", "--out", str(out)]
               if "--resume" in args else
               [sys.executable, "-m", "syncrep_lab", "run", str(spec_file), "--out", str(out)])
        with open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err,
                                         start_new_session=True,
                                         env={**os.environ, "COLUMNS": "200"})

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def signal(self, signum: int) -> None:
        if signum == signal.SIGINT:
            os.killpg(self.proc.pid, signum)  # a terminal's Ctrl-C: the whole group
        else:
            os.kill(self.proc.pid, signum)

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"the run did not end within {timeout} s:\n{self.stderr}"
                                 ) from None

    def stored(self, sql: str) -> list[tuple[object, ...]]:
        try:
            db = sqlite3.connect(self.out / DB_NAME, timeout=5)
            try:
                return db.execute(sql).fetchall()
            finally:
                db.close()
        except sqlite3.Error:
            return []

    def reached(self, stage: str, timeout: float = 120) -> None:
        def check() -> bool:
            assert self.proc.poll() is None, f"the run ended before {stage}:\n{self.stderr}"
            return STAGES[stage](self)

        wait_until(check, timeout, stage)

    def running(self, *needles: str, without: str | None = None) -> bool:
        """Whether a process below the tool has all ``needles`` in its command line."""
        assert self.proc.poll() is None, f"the run ended early:\n{self.stderr}"
        return any(all(n in cmd for n in needles) and (without is None or without not in cmd)
                   for cmd in descendants(self.proc.pid).values())


def nothing_left(out: Path, snapshot: dict[int, str],
                 nothing_new_to_clean: Callable[[], None], grace: float = 0.0) -> None:
    """No server of the run, no process the tool started, nothing more for clean to do
    than when the test began (``nothing_new_to_clean``, the fixture)."""
    cluster = run_cluster_dir(out)
    if grace:
        wait_until(lambda: not still_alive(snapshot) and not mentioning(str(out)), grace,
                   "the tool's processes to go")
    assert still_alive(snapshot) == []
    assert mentioning(str(out)) == []
    assert postmasters_in(cluster) == []
    assert not cluster.exists()
    nothing_new_to_clean()


def integrity(out: Path) -> str:
    db = sqlite3.connect(out / DB_NAME)
    try:
        return str(db.execute("pragma integrity_check").fetchone()[0])
    finally:
        db.close()


# --- signals at every stage -------------------------------------------------------

STAGES: dict[str, Callable[[Run], bool]] = {
    # the primary runs, the standby is starting or catching up
    "cluster up": lambda r: bool(postmasters_in(run_cluster_dir(r.out))),
    "warm-up": lambda r: r.running("pgbench", without="--log-prefix"),
    "measured repeat": lambda r: r.running("pgbench", "repeat-01"),
    "probed repeat": lambda r: r.running("perf ") and r.running("pgbench", "repeat-02"),
}
# One signal a stage, SIGINT and SIGTERM in turn, each run resumed after it: the two (and
# SIGHUP) reach the same handler (shutdown.install), only the exit status differs.
SIGNALLED = [("cluster up", signal.SIGINT), ("warm-up", signal.SIGTERM),
             ("measured repeat", signal.SIGINT), ("probed repeat", signal.SIGTERM)]


@pytest.mark.parametrize(("stage", "signum"), SIGNALLED,
                         ids=[f"{s}-{signal.Signals(n).name[3:]}" for s, n in SIGNALLED])
def test_signal_at_every_stage(workdir: Path, stage: str, signum: int,
                               nothing_new_to_clean: Callable[[], None]) -> None:
    out = workdir / "run"
    run = Run(workdir, out)
    run.reached(stage)
    before = run.stored("select id, cell_id, n from repeats")
    snapshot = descendants(run.proc.pid)  # postmasters, pgbench, perf and its sleep
    started = time.monotonic()
    run.signal(signum)
    code = run.wait(60)
    took = time.monotonic() - started
    assert code == 128 + signum, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert "interrupted" in run.stderr
    assert f"run --resume --out {out}" in run.stderr
    assert took < 30, f"{took:.1f} s to stop"
    nothing_left(out, snapshot, nothing_new_to_clean)
    assert run.stored("select status from runs") == [("interrupted",)]
    assert run.stored("select status from cells") == [("pending",)]
    after = run.stored("select id, cell_id, n from repeats")
    assert after == before  # what was complete is kept; the repeat cut short is not stored
    assert integrity(out) == "ok"
    res = cli("run", "--resume", "--out", str(out), timeout=300)
    assert res.returncode == 0, res.stderr
    assert run.stored("select status from runs") == [("done",)]
    assert run.stored("select status from cells") == [("done",)]
    final = run.stored("select id, cell_id, n, probed from repeats order by n")
    # one measured, one probed
    assert [r[3] for r in final] == [0, 1]
    assert set(before) <= {r[:3] for r in final}
    nothing_left(out, {}, nothing_new_to_clean)


def test_second_ctrl_c_does_not_wait(workdir: Path,
                                     nothing_new_to_clean: Callable[[], None]) -> None:
    """The first Ctrl-C's cleanup waits for a standby that cannot stop (SIGSTOP): the
    second Ctrl-C kills what is left and exits at once; clean finishes."""
    out = workdir / "run"
    run = Run(workdir, out)
    run.reached("probed repeat")
    standby = run_cluster_dir(out) / "b"
    pid = int((standby / "postmaster.pid").read_text().split()[0])
    snapshot = descendants(run.proc.pid)
    os.kill(pid, signal.SIGSTOP)
    try:
        run.signal(signal.SIGINT)
        time.sleep(2)
        assert run.proc.poll() is None, "the first cleanup should wait for the standby"
        started = time.monotonic()
        run.signal(signal.SIGINT)
        code = run.wait(10)
        took = time.monotonic() - started
    finally:
        # whatever happened, leave no stopped server behind
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGCONT)
    assert code == 130, run.stderr
    assert took < 10
    assert "Traceback" not in run.stderr, run.stderr
    lines = [ln for ln in run.stderr.splitlines() if "second SIGINT" in ln]
    assert len(lines) == 1, run.stderr
    assert "syncrep-lab clean" in lines[0]
    # everything was killed; only files (and the manifest) may be left for clean
    wait_until(lambda: not still_alive(snapshot), 5, "the killed processes to go")
    assert run.stored("select status from runs") == [("interrupted",)]
    res = cli("clean")
    assert res.returncode == 0, res.stderr
    nothing_left(out, snapshot, nothing_new_to_clean)
    assert integrity(out) == "ok"


FINALIZER_SIGNAL = """
import os, signal
from syncrep_lab import shutdown
from syncrep_lab.errors import Interrupted

shutdown.install()


class Dropped:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10000):  # the handler runs here, inside the finalizer
            pass


try:
    Dropped()
    for _ in range(10**6):
        pass
    print("went on")
except Interrupted as exc:
    print("interrupted", exc.signum, shutdown.requested())
"""


def test_a_first_signal_in_a_finalizer_is_not_lost() -> None:
    """The signal's handler can run inside a finalizer (a __del__, a weak reference's
    callback: seen in a run, a Ctrl-C went by without a word but a traceback), where its
    exception cannot propagate: it is raised once the finalizer is over, as the first
    signal, with nothing printed."""
    res = subprocess.run([sys.executable, "-c", FINALIZER_SIGNAL], capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["interrupted", "15", "15"], res.stdout + res.stderr
    assert res.stderr == ""


def test_clean_kills_what_a_killed_postmaster_left(workdir: Path) -> None:
    """A postmaster killed with SIGKILL (the OOM killer, a forced exit) leaves children
    that can linger (here one that cannot act, stopped): clean kills them too, and
    removes the shared memory the postmaster could not (its System V segment and its
    dynamic shared memory control segment in /dev/shm, which would stay until a
    reboot)."""
    from syncrep_lab.cluster import server, shared_memory
    from syncrep_lab.cluster.manifest import load

    # made by a command that has ended: clean leaves alone the cluster of a maker that
    # still runs (this test process, had it made it itself)
    made = cli("cluster", "up", "--dir", str(workdir / "c"), "--standbys", "0")
    assert made.returncode == 0, made.stderr
    manifest = load(workdir / "c")
    assert manifest is not None
    data = manifest.primary.data_dir(manifest.dir)
    postmaster = server.postmaster_pid(data)
    assert postmaster is not None
    children = [p for p in server.processes_in([data]) if p != postmaster]
    assert children
    maps = Path(f"/proc/{postmaster}/maps").read_text()
    dsm = sorted({Path(line.split()[-1]) for line in maps.splitlines()
                  if "/dev/shm/PostgreSQL." in line})
    shmid = shared_memory.segment_of(data)
    assert dsm and shmid is not None and shared_memory.attached(shmid), (dsm, shmid)
    os.kill(children[0], signal.SIGSTOP)
    os.kill(postmaster, signal.SIGKILL)
    res = cli("clean", "--kept")  # cluster up's: kept by a plain clean
    assert res.returncode == 0 and f"removed {manifest.dir}" in res.stdout, res.stderr
    assert postmasters_in(workdir) == []
    assert [p for p in dsm if p.exists()] == [] and shared_memory.attached(shmid) is None
    assert not manifest.dir.exists()


# --- bounded waits ----------------------------------------------------------------


def test_pgbench_that_overruns_is_killed(workdir: Path,
                                         make_cluster: Callable[..., Manifest]) -> None:
    """Commits that wait for a standby that is gone: the tables are still prepared
    (not a commit that waits), pgbench is killed after its bound, with a clear message."""
    from syncrep_lab.cluster import server
    from syncrep_lab.errors import UserError
    from syncrep_lab.pg.installations import resolve
    from syncrep_lab.plan.spec import Workload
    from syncrep_lab.run.workload import prepare_tables, run_pgbench, script_text

    manifest = make_cluster(dir=workdir / "c", standbys=1, sync="b")
    standby = manifest.node("b").data_dir(manifest.dir)
    pid = server.signal_stop(standby, "immediate")
    assert pid is not None
    server.wait_gone({standby: pid}, 10)
    script = workdir / "insert.sql"
    script.write_text(script_text(Workload(), 1, workdir))
    started = time.monotonic()
    prepare_tables(manifest.admin_conninfo(manifest.primary), Workload())
    assert time.monotonic() - started < 10
    started = time.monotonic()
    with pytest.raises(UserError, match=r"did not finish within 3 s .* was killed"):
        run_pgbench(resolve(manifest.bin_dir).program("pgbench"),
                    manifest.conninfo(manifest.primary), script, clients=2, threads=1,
                    duration=1, synchronous_commit="on", extra_timeout=2)
    assert time.monotonic() - started < 10
    assert mentioning(str(script)) == []


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("perf") is None,
                    reason="needs perf as root")
def test_perf_that_does_not_stop_is_killed_with_its_workload(workdir: Path) -> None:
    from syncrep_lab.probes.perfrun import PerfProcess

    perf = PerfProcess(["perf", "record", "-a", "-e", "sched:sched_switch", "-o",
                        str(workdir / "x.data"), "--", "sleep", "60"], "perf record")
    perf.start()
    assert perf.proc is not None
    group = perf.proc.pid
    os.kill(group, signal.SIGSTOP)  # it will never act on the SIGINT that stops it
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="did not stop within 1 s"):
        perf.stop(timeout=1)
    assert time.monotonic() - started < 8
    left = [pid for pid in processes() if _pgid(pid) == group]
    assert left == []  # perf and its sleep


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


# --- the run folder: full disk, read-only -----------------------------------------


@pytest.fixture
def mounts(workdir: Path) -> Iterator[Callable[..., Path]]:
    """Mount tmpfs (or bind) mounts under the test's dir; all unmounted at the end,
    whatever happened."""
    made: list[Path] = []

    def mount(name: str, *, size: str = "64m", bind: Path | None = None) -> Path:
        path = bind if bind is not None else workdir / name
        path.mkdir(exist_ok=True)
        argv = (["mount", "--bind", str(path), str(path)] if bind is not None
                else ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs",
                      str(path)])
        subprocess.run(argv, check=True, capture_output=True)
        made.append(path)
        return path

    try:
        yield mount
    finally:
        for path in reversed(made):
            subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def remount(path: Path, mode: str, *, bind: bool = False, within: float = 60.0) -> None:
    """Remount `path` read-only or read-write. The kernel refuses to make a mount
    read-only (EBUSY) while a file is open for writing through it, as a pgbench log
    is for a whole repeat, so this tries again until the writers have closed."""
    opts = f"remount,{'bind,' if bind else ''}{mode}"
    deadline = time.monotonic() + within
    while True:
        res = subprocess.run(["mount", "-o", opts, str(path)], capture_output=True, text=True)
        if res.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"mount -o {opts} {path}: exit {res.returncode}: "
                                 f"{res.stderr.strip()}")
        time.sleep(0.02)


def fill(disk: Path) -> Path:
    """Write zeros until the file system is full."""
    filler = disk / "filler"
    block = b"\0" * (1 << 20)
    with open(filler, "wb") as fh:
        try:
            while True:
                fh.write(block)
                fh.flush()
        except OSError:
            pass
    return filler


def refused(res: subprocess.CompletedProcess[str] | str, code: int, *needles: str) -> None:
    text = res if isinstance(res, str) else res.stderr
    if not isinstance(res, str):
        assert res.returncode == code, text
    assert "Traceback" not in text, text
    assert "error:" in text and "fix:" in text, text
    for needle in needles:
        assert needle in text, text


THREE = SPEC.replace("warmup = 1", "warmup = 0").replace("duration = 1", "duration = 2") \
    .replace("repeats_max = 1", "repeats_max = 3").replace("repeats_min = 1", "repeats_min = 3") \
    + "probed_repeats = 0\n"


@root_only
def test_full_disk_then_read_only_then_resume(workdir: Path, mounts: Callable[..., Path],
                                              nothing_new_to_clean: Callable[[], None]) -> None:
    disk = mounts("disk", size="48m")
    out = disk / "run"
    run = Run(workdir, out, THREE)
    wait_until(lambda: len(run.stored("select id from repeats")) >= 1 or run.proc.poll()
               is not None, 120, "the first repeat")
    filler = fill(disk)
    code = run.wait(120)
    kept = run.stored("select id, n from repeats")
    assert code == 2, run.stderr
    refused(run.stderr, 2, "its disk is full", f"run --resume --out {out}")
    assert 1 <= len(kept) < 3
    assert integrity(out) == "ok"
    nothing_left(out, {}, nothing_new_to_clean)
    # Read-only (a mount that turned read-only, a copy on read-only media): refused up
    # front, nothing started.
    remount(disk, "ro")
    res = cli("run", "--resume", "--out", str(out), timeout=120)
    refused(res, 2, "read-only file system", "remount it read-write")
    nothing_left(out, {}, nothing_new_to_clean)
    # Space and write access back: the run completes, nothing stored was lost.
    remount(disk, "rw")
    filler.unlink()
    res = cli("run", "--resume", "--out", str(out), timeout=300)
    assert res.returncode == 0, res.stderr
    assert run.stored("select status from runs") == [("done",)]
    final = run.stored("select id, n from repeats order by n")
    assert len(final) == 3 and set(kept) <= set(final)
    assert integrity(out) == "ok"
    nothing_left(out, {}, nothing_new_to_clean)


@root_only
def test_artifacts_read_only_mid_run(workdir: Path, mounts: Callable[..., Path],
                                     nothing_new_to_clean: Callable[[], None]) -> None:
    """The artifacts turn read-only between two repeats (a bind mount made read-only):
    exit 2 naming the cause, the run marked interrupted, resumed once writable."""
    out = workdir / "run"
    run = Run(workdir, out, THREE)
    wait_until(lambda: len(run.stored("select id from repeats")) >= 1 or run.proc.poll()
               is not None, 120, "the first repeat")
    artifacts = mounts("", bind=out / "artifacts")
    remount(artifacts, "ro", bind=True)
    code = run.wait(120)
    assert code == 2, run.stderr
    refused(run.stderr, 2, "read-only file system", f"run --resume --out {out}")
    assert run.stored("select status from runs") == [("interrupted",)]
    assert run.stored("select status from cells") == [("pending",)]
    kept = run.stored("select id, n from repeats")
    nothing_left(out, {}, nothing_new_to_clean)
    subprocess.run(["umount", str(artifacts)], check=True)
    res = cli("run", "--resume", "--out", str(out), timeout=300)
    assert res.returncode == 0, res.stderr
    final = run.stored("select id, n from repeats order by n")
    assert len(final) == 3 and set(kept) <= set(final)
    assert integrity(out) == "ok"


@root_only
def test_new_run_in_read_only_folder(workdir: Path, mounts: Callable[..., Path],
                                     nothing_new_to_clean: Callable[[], None]) -> None:
    ro = mounts("ro", size="1m")
    remount(ro, "ro")
    (workdir / "spec.toml").write_text(SPEC)
    res = cli("run", str(workdir / "spec.toml"), "--out", str(ro / "run"))
    refused(res, 2, "read-only file system", "choose an --out on a writable file system")
    assert not (ro / "run").exists()
    nothing_left(ro / "run", {}, nothing_new_to_clean)


@root_only
def test_store_write_on_full_disk_is_rolled_back(workdir: Path, mounts: Callable[..., Path]
                                                 ) -> None:
    from syncrep_lab.store import RunFolderUnwritable, Store

    disk = mounts("disk", size="4m")
    store = Store(disk / "run", create=True)
    try:
        run_id = store.create_run("x", "", {}, "0")
        filler = fill(disk)
        with pytest.raises(RunFolderUnwritable, match="its disk is full") as info:
            store.create_run("y" * (1 << 20), "z" * (4 << 20), {}, "0")
        assert info.value.fix is not None and "--resume" in info.value.fix
        filler.unlink()
        assert [r["id"] for r in store.db.execute("select id from runs")] == [run_id]
        store.create_run("y", "", {}, "0")
        assert integrity(disk / "run") == "ok"
    finally:
        store.close()
