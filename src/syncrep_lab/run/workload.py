"""Workloads: the tables they need, the pgbench script they run, and one pgbench run.

Every workload is a real ``pgbench -M prepared -n -P 1`` run:

- ``insert``: the seed's ``insert into test(info) values (null)`` on
  ``test(id serial primary key, info text, crt_time timestamp)``; with
  ``batch = N``, N such inserts per transaction (``begin; ... end;``);
- ``pk-lookup``: the NUMA seed's primary-key lookup on ``user_info`` of
  ``rows`` rows, prewarmed (pg_prewarm where the server has it);
- ``script``: the user's own pgbench script file.

``synchronous_commit`` is set per pgbench session through ``PGOPTIONS``, so
changing it between cells needs no reload and touches nothing else.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import psycopg

from syncrep_lab import shutdown
from syncrep_lab.errors import UserError
from syncrep_lab.pg.admin import admin_connection
from syncrep_lab.pg.conninfo import split_password
from syncrep_lab.plan.spec import Workload
from syncrep_lab.readers import sysbench_output
from syncrep_lab.readers.pgbench_log import (
    PgbenchSummary,
    ProgressSample,
    TransactionLogStats,
    parse_progress_line,
    parse_summary,
)
from syncrep_lab.store import folder_error

if TYPE_CHECKING:
    from syncrep_lab.placement.layout import Launch

@dataclass(frozen=True)
class Tables:
    """The workload's tables. On a cluster syncrep-lab builds they are the seed's
    (``test``, ``user_info``); on an attached cluster they get names of their own,
    carry a comment that marks them as the tool's, and a table of that name that is
    not marked is never dropped or written."""

    insert: str = "test"
    lookup: str = "user_info"
    owned: bool = False  # attached: check the mark before touching a table


SEED_TABLES = Tables()
ATTACHED_TABLES = Tables("syncrep_lab_insert", "syncrep_lab_lookup", owned=True)
MARK = "made by syncrep-lab for its workload; dropped when the run ends"
PREPARE_SECONDS = 900.0


def script_text(workload: Workload, batch: int, spec_dir: Path,
                tables: Tables = SEED_TABLES) -> str:
    if workload.kind == "insert":
        insert = f"insert into {tables.insert}(info) values (null);\n"
        if batch == 1:
            return insert
        return "begin;\n" + insert * batch + "end;\n"
    if workload.kind == "pk-lookup":
        return (f"\\set id random(1, {workload.rows})\n"
                f"select * from {tables.lookup} where id = :id;\n")
    assert workload.script is not None
    path = (spec_dir / workload.script).expanduser()
    try:
        return path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read the workload script {path}: {exc}",
                        "workload.script is relative to the spec file") from None


def table_is_ours(conn: psycopg.Connection[Any], table: str) -> bool:
    """Whether ``table`` exists; refuses a table of that name the tool did not make."""
    row = conn.execute("select obj_description(to_regclass(%s), 'pg_class'), "
                       "to_regclass(%s) is not null", (table, table)).fetchone()
    if row is None or not row[1]:
        return False
    if row[0] != MARK:
        raise UserError(f"the attached database already has a table {table} that "
                        "syncrep-lab did not make; it is left alone",
                        f"rename or drop {table} yourself, or attach to another database")
    return True


def prepare_tables(conninfo: str, workload: Workload, tables: Tables = SEED_TABLES) -> None:
    """Create what the workload needs, fresh for every cell (insert) or once (lookup)."""
    # Bounded (pg/admin.py): commits local, so a standby that stopped confirming cannot
    # hang the tables' creation (pgbench, bounded, then finds it out), and a lock held by
    # someone else's session makes it fail instead of queueing for ever. Filling a
    # lookup table of many rows is what may take long.
    with admin_connection(conninfo, seconds=PREPARE_SECONDS, lock_timeout_s=10.0,
                          what="the primary") as conn:
        mark = tables.owned
        if workload.kind == "insert":
            if not mark or table_is_ours(conn, tables.insert):
                conn.execute(f"drop table if exists {tables.insert}")
            # Autovacuum off on this table only: it is emptied before every repeat
            # (run/reset.py), so a vacuum has nothing to reclaim, and the analyze
            # or insert-triggered vacuum that ~100k rows in seconds would set off in
            # some repeats and not others would only add noise to the comparison.
            conn.execute(f"create table {tables.insert}(id serial primary key, info text, "
                         "crt_time timestamp) with (autovacuum_enabled = off)")
            if mark:
                conn.execute(f"comment on table {tables.insert} is '{MARK}'")
        elif workload.kind == "pk-lookup":
            table = tables.lookup
            if mark:
                table_is_ours(conn, table)
            conn.execute(f"create table if not exists {table}(id int primary key, info text, "
                         "crt_time timestamp)")
            if mark:
                conn.execute(f"comment on table {table} is '{MARK}'")
            row = conn.execute(f"select count(*) from {table}").fetchone()
            if row is None or int(row[0]) != workload.rows:
                conn.execute(f"truncate {table}")
                conn.execute(f"insert into {table} select g, md5(g::text), now() "
                             "from generate_series(1, %s) g", (workload.rows,))
                conn.execute(f"vacuum analyze {table}")
            try:
                conn.execute("create extension if not exists pg_prewarm")
                conn.execute(f"select pg_prewarm('{table}'), pg_prewarm('{table}_pkey')")
            except psycopg.Error:
                # No pg_prewarm in this installation: read the table and index instead.
                conn.execute("set enable_seqscan = off")
                conn.execute(f"select count(*) from {table} where id > 0")
                conn.execute("reset enable_seqscan")
                conn.execute(f"select count(*) from {table}")


# Asked with the seconds since pgbench last completed a transaction: (cause, fix) when
# it has stalled and should be stopped, else None.
StallWatch = Callable[[float], tuple[str, str] | None]
WATCH_PERIOD_S = 1.0


@dataclass
class ClientRun:
    """What one run of the client left once it ended (``RunningClient.finish``): pgbench's
    figures, or sysbench's read into pgbench's."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    summary: PgbenchSummary
    progress: list[ProgressSample] = field(default_factory=list)
    log_files: list[Path] = field(default_factory=list)
    seconds: float = 0.0
    driver: str = "pgbench"
    # sysbench: what its printed histogram holds (pgbench: read from log_files instead)
    stats: TransactionLogStats | None = None
    # when it started, in seconds since the epoch on the clock of the machine it ran on:
    # this one, or the SSH host ``host`` (readers/timeline.py puts it on this one's)
    launched_epoch: float = 0.0
    host: str | None = None


def run_pgbench(pgbench: Path, conninfo: str, script: Path, **kwargs: Any) -> ClientRun:
    """One pgbench run; raises UserError when pgbench fails or overruns its bound."""
    return start_pgbench(pgbench, conninfo, script, **kwargs).finish()


def start_pgbench(
    pgbench: Path,
    conninfo: str,
    script: Path,
    *,
    clients: int,
    threads: int,
    duration: int,
    synchronous_commit: str | None,
    log_prefix: Path | None = None,
    on_progress: Callable[[ProgressSample], None] | None = None,
    extra_timeout: float = 60.0,
    launch: Launch | None = None,
    watch: StallWatch | None = None,
) -> RunningClient:
    """Start pgbench (from the calling thread, which must be the main one: the kernel
    ties the die-with-parent signal to the thread that forks). ``launch`` places it:
    the client's namespace and cpuset. ``watch`` is asked, about once a second while
    pgbench runs, whether it has stalled (see :data:`StallWatch`)."""
    script = script.resolve()  # pgbench runs in the script's folder
    if log_prefix is not None:
        log_prefix = log_prefix.resolve()
    argv = [str(pgbench), "-M", "prepared", "-n", "-P", "1", "-c", str(clients),
            "-j", str(threads), "-T", str(duration), "-f", str(script)]
    if log_prefix is not None:
        argv += ["-l", f"--log-prefix={log_prefix}"]
    # A password goes to pgbench's environment, never its command line (which every
    # local user can read in /proc, and which is kept as pgbench.argv).
    conninfo, password = split_password(conninfo)
    argv.append(conninfo)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PG") or k in ("PGPASSWORD", "PGPASSFILE")}
    if password is not None:
        env["PGPASSWORD"] = password
    if synchronous_commit is not None:  # None: the server's own setting
        env["PGOPTIONS"] = f"-c synchronous_commit={synchronous_commit}"
    started = time.monotonic()
    proc = spawn_client(argv, env, script.parent, launch)
    return RunningClient(proc, argv, started, duration, extra_timeout, log_prefix,
                          on_progress, watch)


def spawn_client(argv: list[str], env: dict[str, str], cwd: Path, launch: Launch | None
                 ) -> subprocess.Popen[str]:
    """Start a client program (pgbench, sysbench): killed with the tool, even a tool killed
    with SIGKILL; placed by ``launch`` (the client's namespace and cpuset)."""
    die = shutdown.die_with_parent(signal.SIGKILL)
    join = launch.join() if launch is not None else None

    def preexec() -> None:
        die()
        if join is not None:
            join()

    try:
        proc = subprocess.Popen(
            [*(launch.prefix() if launch is not None else []), *argv],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env, cwd=str(cwd), preexec_fn=preexec,
        )
    finally:
        if join is not None:
            join.close()
    shutdown.track(proc)
    return proc


class ClientProcess(Protocol):
    """What a client's reader needs of its process: a local ``subprocess.Popen``, or a
    command on an SSH host (hosts/ssh.RemoteProcess)."""

    @property
    def pid(self) -> int: ...
    @property
    def returncode(self) -> int | None: ...
    @property
    def stdout(self) -> Iterable[str] | None: ...
    @property
    def stderr(self) -> Iterable[str] | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def poll(self) -> int | None: ...
    def kill(self) -> None: ...


class RunningClient:
    """A client process (pgbench, or sysbench with ``driver``) and the threads reading
    its output: pgbench reports its progress on stderr, sysbench on stdout."""

    def __init__(self, proc: ClientProcess, argv: list[str], started: float,
                 duration: int, extra_timeout: float, log_prefix: Path | None,
                 on_progress: Callable[[ProgressSample], None] | None,
                 watch: StallWatch | None = None, driver: str = "pgbench") -> None:
        self.proc, self.argv, self.started = proc, argv, started
        self.launched_epoch = time.time() - (time.monotonic() - started)
        self.host: str | None = None  # the SSH host it runs on; None: here
        self.driver = driver
        self.duration, self.extra_timeout, self.log_prefix = duration, extra_timeout, log_prefix
        self.watch = watch
        self.last_active = started  # when a progress line last showed transactions
        self.progress: list[ProgressSample] = []
        self.err_lines: list[str] = []
        self.out_lines: list[str] = []
        self.on_progress = on_progress
        self.readers = [threading.Thread(target=self._read_stderr, daemon=True),
                        threading.Thread(target=self._read_stdout, daemon=True)]
        for reader in self.readers:
            reader.start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.err_lines.append(line)  # kept whole: pgbench's raw output is an artifact
            if self.driver == "pgbench":
                self._progress(parse_progress_line(line))

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.out_lines.append(line)
            if self.driver == "sysbench":
                self._progress(sysbench_output.parse_progress_line(line))

    def _progress(self, sample: ProgressSample | None) -> None:
        if sample is None:
            return
        self.progress.append(sample)
        if sample.tps > 0:
            self.last_active = time.monotonic()
        if self.on_progress is not None:
            self.on_progress(sample)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self._untrack()
        self.close()

    def _untrack(self) -> None:
        if isinstance(self.proc, subprocess.Popen):  # a remote process has no local pid
            shutdown.untrack(self.proc)

    def _log_files(self) -> list[Path]:
        """pgbench's per-transaction logs of this run, by name, not glob(): a pattern per
        pid would be compiled and kept in fnmatch's cache (32,768 entries) for every
        pgbench a long process runs."""
        if self.log_prefix is None:
            return []
        head = f"{self.log_prefix.name}.{self.proc.pid}"
        return sorted(p for p in self.log_prefix.parent.iterdir()
                      if p.name == head or p.name.startswith(head + "."))

    def close(self) -> None:
        """What the run holds besides the process (a remote one: its folder there)."""

    def placement(self) -> dict[str, Any]:
        """What the kernel gave the client (run/placement_watch.py reads it mid-repeat; a
        remote client reads it on its host); OSError once it is gone."""
        from syncrep_lab.placement.cgroups import placement_of

        return placement_of(self.proc.pid)

    def _wait_watched(self) -> None:
        """Wait for pgbench until its bound (TimeoutExpired then), asking the watch about
        once a second whether it stalled (UserError then, pgbench killed)."""
        end = self.started + self.duration + self.extra_timeout
        while True:
            left = end - time.monotonic()
            period = left if self.watch is None else min(left, WATCH_PERIOD_S)
            try:
                self.proc.wait(timeout=max(0.1, period))
                return
            except subprocess.TimeoutExpired:
                if time.monotonic() >= end:
                    raise
            assert self.watch is not None
            stalled = self.watch(time.monotonic() - self.last_active)
            if stalled is not None:
                self.kill()
                raise UserError(*stalled)

    def finish(self) -> ClientRun:
        """Wait for pgbench (bounded), then its figures; UserError when it failed."""
        proc, duration, extra_timeout = self.proc, self.duration, self.extra_timeout
        try:
            self._wait_watched()
        except subprocess.TimeoutExpired:
            self.kill()
            raise UserError(
                f"{self.driver} did not finish within {duration + extra_timeout:.0f} s "
                f"(-T {duration} plus {extra_timeout:.0f} s) and was killed; its commits were "
                "probably waiting for a synchronous standby that no longer confirms",
                "check the standbys (syncrep-lab cluster status, their logs); the cell is "
                "recorded as failed and the run goes on with a fresh cluster",
            ) from None
        except BaseException:
            self.kill()
            raise
        finally:
            self._untrack()
            for reader in self.readers:
                reader.join(timeout=5)
        seconds = time.monotonic() - self.started
        code = proc.wait(timeout=5)  # it has ended: its status
        stdout = "".join(self.out_lines)
        stderr = "".join(self.err_lines)
        log_prefix = self.log_prefix
        try:
            logs = self._log_files()
        finally:
            self.close()
        if self.driver == "sysbench":
            run = ClientRun(self.argv, code, stdout, stderr,
                             sysbench_output.parse_summary(stdout), self.progress, [], seconds,
                             "sysbench", sysbench_output.parse_histogram(stdout),
                             self.launched_epoch, self.host)
        else:
            run = ClientRun(self.argv, code, stdout, stderr,
                             parse_summary(stdout), self.progress, logs, seconds,
                             launched_epoch=self.launched_epoch, host=self.host)
        if code != 0:
            said = stderr if self.driver == "pgbench" else stderr + stdout  # sysbench: both
            errors = [ln for ln in said.splitlines() if not ln.startswith(("progress:", "[ "))]
            tail = "\n".join(errors[-6:])
            raise UserError(f"{self.driver} exited with code {code}:\n{tail}",
                            f"read {self.driver}'s output in the cell's artifacts")
        if log_prefix is not None and run.summary.transactions is not None:
            _check_logs(logs, run.summary.transactions, log_prefix.parent)
        return run


def _check_logs(logs: list[Path], transactions: int, folder: Path) -> None:
    """pgbench does not check its writes to the per-transaction logs: on a full disk it
    exits 0 with logs cut short, and the figures from them would be silently wrong.
    Every transaction pgbench counted must have its whole line."""
    lines = 0
    whole = True
    for path in logs:
        last = b""
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                lines += chunk.count(b"\n")
                last = chunk[-1:]
        whole = whole and last in (b"", b"\n")
    if lines >= transactions and whole:
        return
    st = os.statvfs(folder)
    free = st.f_bavail * st.f_frsize
    detail = (f"pgbench's per-transaction logs in {folder} hold {lines} of its {transactions} "
              f"transactions; {free // 1024} KiB free there")
    if free < (1 << 20):
        raise folder_error(_run_folder(folder), errno.ENOSPC, detail)
    raise UserError(detail + ": they were cut short",
                    f"check the file system that holds them (df -h {folder})")


def _run_folder(folder: Path) -> Path:
    """The run folder above a repeat's folder (RUN/artifacts/cell-NNN/repeat-NN)."""
    for parent in (folder, *folder.parents):
        if parent.name == "artifacts":
            return parent.parent
    return folder
