"""What the tests share: running the command line (in a child process, or in this one
for commands that start no server), short shared directories, and looking for
processes a test expects gone.

Test files import these from here, never from one another or from conftest.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from syncrep_lab.run.clusters import MAX_SLOTS, slot_dir


def shared_tmp(prefix: str, root: str = "/tmp") -> Path:
    """A directory under ``root`` that the unprivileged server account can reach."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    path.chmod(0o755)
    return path


# A session's clusters on a RAM file system, where there is one with room: a data dir is
# about 1,000 files, and creating a file on this machine's disk takes some 0.3 ms, so a
# run of two cells took 8 % longer on /tmp (wall ratio 1.08, 1.04 to 1.10 over 4 pairs).
# Nothing the tests check depends on the file system under the data dirs: the disks
# read are the machine's, the slow flush is a preloaded sleep, the full-disk tests mount
# their own. A small /dev/shm (a container's 64 MB) is not used.
RAM_ROOT_MIN_BYTES = 4 << 30


def clusters_root() -> str:
    """Where the session's tool home goes: /dev/shm when it is a tmpfs with at least
    RAM_ROOT_MIN_BYTES free, else /tmp."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
        tmpfs = any(line.split()[1:3] == ["/dev/shm", "tmpfs"] for line in mounts)
        st = os.statvfs("/dev/shm")
    except OSError:
        return "/tmp"
    return "/dev/shm" if tmpfs and st.f_bavail * st.f_frsize >= RAM_ROOT_MIN_BYTES else "/tmp"


def cli(*args: str, timeout: float = 180, env: dict[str, str] | None = None,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real command line, as a user would (in ``cwd``, default this one)."""
    return subprocess.run(
        [sys.executable, "-m", "syncrep_lab", *args],
        capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "200", **(env or {})}, cwd=cwd,
    )


def postmasters_in(*paths: Path) -> list[int]:
    """Pids of postgres processes whose working directory is under one of ``paths``."""
    found = []
    roots = [str(path.resolve()) for path in paths]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if comm in ("postgres", "postmaster") and any(
                cwd == root or cwd.startswith(root + "/") for root in roots):
            found.append(int(entry.name))
    return found


def clean_list() -> str:
    """What ``clean --list`` prints for the session's tool home."""
    res = cli_here("clean", "--list")
    assert res.returncode == 0, res.stderr
    return res.stdout


def cli_here(*args: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    """The command line run in this process, for commands that start no server and no
    child that outlives them: what ``cli`` gives, without a Python start-up per call.
    It goes through the same error mapping as the installed command (``run_command``)."""
    import contextlib
    import io

    from syncrep_lab.cli import run_command

    stdout, stderr = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    code: int | str | None = 0
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                run_command(list(args))
            except SystemExit as exc:
                code = exc.code
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if isinstance(code, str):  # sys.exit("message"): printed, status 1
        print(code, file=stderr)
        code = 1
    return subprocess.CompletedProcess(["syncrep-lab", *args], code or 0, stdout.getvalue(),
                                       stderr.getvalue())


def as_nobody(what: Callable[[], str],
              answers: tuple[type[BaseException], ...] = ()) -> str:
    """What ``what`` returns when run in a child that gave up root (uid and gid 65534,
    no groups); an exception of ``answers`` comes back as its text, any other as
    "crashed: ..."."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest from here on, only os._exit
        os.close(read_end)
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            message = what()
        except answers as exc:
            message = str(exc)
        except BaseException as exc:
            message = f"crashed: {exc!r}"
        os.write(write_end, message.encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        message = fh.read().decode()
    os.waitpid(pid, 0)
    return message


# --- processes a run started ---------------------------------------------------


def processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except (OSError, UnicodeDecodeError):
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            continue
        table[int(entry.name)] = (int(fields[1]), cmdline)
    return table


def descendants(root: int) -> dict[int, str]:
    """Every process below ``root``: pid -> command line."""
    table = processes()
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, cmdline) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = cmdline
                frontier.append(pid)
    return found


def still_alive(snapshot: dict[int, str]) -> list[str]:
    """Processes of the snapshot that still run (same pid, same command line)."""
    table = processes()
    return [f"{pid} {cmd}" for pid, cmd in snapshot.items()
            if pid in table and table[pid][1] == cmd]


def mentioning(text: str) -> list[str]:
    """Processes whose command line names ``text`` (pgbench and perf name the run folder)."""
    me = os.getpid()
    return [f"{pid} {cmd}" for pid, (_, cmd) in processes().items()
            if text in cmd and pid != me and "pytest" not in cmd]


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def wait_traced(pid: int, tracer: subprocess.Popen[bytes]) -> None:
    """Until the kernel shows ``tracer`` (strace -p) attached to ``pid`` (a sleep alone
    is too short on a loaded machine); fails if the tracer ended first."""

    def traced_by() -> int:
        status = Path(f"/proc/{pid}/status").read_text()
        return int(status.split("TracerPid:")[1].split()[0])

    wait_until(lambda: traced_by() == tracer.pid or tracer.poll() is not None, 20,
               "strace to attach")
    assert tracer.poll() is None, "strace ended without attaching"


def run_cluster_dir(out: Path) -> Path:
    """Where a run builds its (first) cluster."""
    return slot_dir(out.absolute(), 0)


def run_postmasters(out: Path) -> list[int]:
    """Postgres processes of any cluster the run in ``out`` built (every pool slot): not
    those of another test's cluster in the session's state dir."""
    return postmasters_in(*(slot_dir(out.absolute(), slot) for slot in range(MAX_SLOTS)))


def spec_run(prefix: str, spec: str, timeout: float = 600) -> Iterator[Path]:
    """A module fixture's body: ``spec`` run in a shared folder of its own (the run
    must succeed), its run folder given, the folder removed afterwards."""
    work = shared_tmp(prefix)
    (work / "spec.toml").write_text(spec)
    res = cli("run", str(work / "spec.toml"), "--out", str(work / "run"), timeout=timeout)
    assert res.returncode == 0, res.stdout + res.stderr
    yield work / "run"
    shutil.rmtree(work, ignore_errors=True)


# The tests that boot guests (topology.guests): root for the namespaces and taps, and
# QEMU, which ./run setup installs.
needs_guests = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("qemu-system-x86_64") is None,
    reason="guests need root and QEMU (./run setup installs it)")


# Tests that act on what the whole machine holds, beyond their session's tool home: they
# kill the tool and run `clean` after it (network namespaces, cgroups and guests are the
# machine's, and `clean` removes any whose maker is gone, whichever session made them),
# compare what `clean --list` lists, or boot guests and look for any. ./run test runs
# the suite on several workers (pytest-xdist, --dist loadgroup): these all go to one of
# them, one after another, so that one's leftovers are never another's to see or clean.
machine_wide = pytest.mark.xdist_group("machine")


def load_beside(pgbench: Path, conninfo: str, seconds: int, script: Path, workload: str, *,
                level: str = "on", clients: int = 4, log: Path | None = None,
                timeout: float = 90) -> subprocess.Popen[str]:
    """pgbench writing ``workload`` beside a tool that watches the server (observe starts
    no load of its own), returned once the load runs: its ``clients`` sessions seen on the
    server and the commit counter moving. A fixed sleep before the window opened lost the
    load on a machine busy with guests (a window that saw no session, a pgbench whose -T
    ended before the window began). ``log``: the prefix of its per-transaction logs."""
    import psycopg

    script.write_text(workload)
    logs = ["-l", f"--log-prefix={log}"] if log is not None else []
    bench = subprocess.Popen(
        [str(pgbench), "-n", "-c", str(clients), "-j", "2", "-T", str(seconds), "-P", "1",
         "--progress-timestamp", *logs, "-f", str(script), conninfo],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PGOPTIONS": f"-c synchronous_commit={level}"})

    with psycopg.connect(conninfo, autocommit=True) as conn:
        def commits() -> int:
            row = conn.execute("select xact_commit from pg_stat_database "
                               "where datname = current_database()").fetchone()
            conn.execute("select pg_stat_clear_snapshot()")
            return int(row[0]) if row else 0

        def running() -> bool:
            assert bench.poll() is None, f"pgbench ended first: {bench.communicate()[0]}"
            (sessions,) = conn.execute(
                "select count(*) from pg_stat_activity where application_name = 'pgbench'"
            ).fetchone() or (0,)
            if sessions < clients:
                return False
            before = commits()
            time.sleep(0.3)
            return commits() > before + 1

        try:
            wait_until(running, timeout, f"{clients} pgbench sessions committing")
        except BaseException:
            bench.kill()
            bench.communicate()
            raise
    return bench
