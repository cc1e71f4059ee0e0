"""gprof per process role, on a profiling build (``pg build --flavor profiling``).

A server built with ``--enable-profiling`` counts every call of every function it
compiled, exactly, and samples where its time goes (100 times a second). Each process
writes its counts to ``gmon.out`` when it exits, into ``DATA/gprof/PID/`` (PostgreSQL's
PROFILE_PID_DIR; autovacuum workers share ``gprof/avworker``). So a profile covers a
process's whole life, and only processes that exit leave one.

To make those lives the repeat's, the probe restarts the primary's walsenders just
before the repeat (``pg_terminate_backend``: each standby reconnects at once, and
their walreceivers, which lose the connection, are restarted too), waits until every
standby streams again in its sync state, and clears the profiles left so far. After
pgbench has ended (its backends exit with it), it ends the walsenders again, which
writes theirs and their walreceivers', and waits for replication to be back before
the next repeat. What it collects then covers the repeat and a second or two around
it, when no commit happens: calls divided by the repeat's commits are per commit.

A child process starts with a copy of its postmaster's counts (fork copies the
profiling buffers), so every profile also holds the postmaster's start-up: tens of
thousands of calls of shared-memory set-up code, which per commit would read as real
work. After the repeat the probe opens and closes one connection to each node; that
backend's profile is the inherited part plus a connection's own start, and it is
taken off each profile of the node (calls and time, never below zero).

The processes that live on (checkpointer, walwriter, startup) write a profile only at
shutdown, so they are not in the table; their CPU is in the other probes. Each role's
``gmon.out`` files are read together, as their sum, into a flat profile, which is kept
as text beside the repeat (as gprof printed it, the baseline not taken off) and stored,
less the baseline (the functions with calls or time left). gprof's own ``-s`` (a
``gmon.sum`` written first) printed the same profile 14 times slower: 21 s for a
role of 9 processes, against 1.5 s read together.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from syncrep_lab import procs
from syncrep_lab.pg.admin import admin_connection
from syncrep_lab.store import GprofFunctionRow, GprofRoleRow

GPROF_TIMEOUT = 120.0  # one role's flat profile
EXIT_TIMEOUT = 15.0  # for a terminated walsender to exit and write its profile


@dataclass(frozen=True)
class GprofSetup:
    """What the probe needs of a cluster on a profiling build."""

    postgres: Path  # the binary whose symbols gprof reads
    settle: Callable[[], None]  # returns once every standby streams in its sync state


@dataclass(frozen=True)
class GprofNode:
    name: str
    data_dir: Path
    admin: str  # the tool's connection
    primary: bool


@dataclass
class GprofResult:
    roles: list[GprofRoleRow] = field(default_factory=list)
    functions: list[GprofFunctionRow] = field(default_factory=list)
    unknown: int = 0  # gmon.out files of processes no role was known for (not counted)


def unavailable_reason() -> str | None:
    if shutil.which("gprof") is None:
        return "gprof is not installed (Debian package binutils)"
    return None


def _end_walsenders(admin: str) -> list[int]:
    """Terminate the primary's walsenders; their pids."""
    with admin_connection(admin, seconds=10, what="the primary") as conn:
        pids = [int(str(r[0])) for r in conn.execute("select pid from pg_stat_replication")]
        for pid in pids:
            conn.execute("select pg_terminate_backend(%s)", (pid,))
    return pids


def _wait_gone(pids: list[int], timeout: float = EXIT_TIMEOUT) -> None:
    """Wait until every one of ``pids`` has ended (a zombie has: see procs.alive)."""
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive:
        alive = [p for p in alive if procs.alive(p)]
        if alive and time.monotonic() > deadline:
            raise RuntimeError(f"walsenders {alive} did not exit within {timeout:g} s "
                               "of pg_terminate_backend: their profiles are missing")
        time.sleep(0.02)


class GprofProbe:
    """Restart the walsenders around a repeat and read every profile written meanwhile."""

    def __init__(self, setup: GprofSetup, nodes: list[GprofNode], out_dir: Path) -> None:
        self.setup = setup
        self.nodes = nodes
        self.out_dir = out_dir
        self.primary = next(n.admin for n in nodes if n.primary)

    def start(self) -> None:
        """Before the repeat (and before the other probes look for processes)."""
        try:
            _wait_gone(_end_walsenders(self.primary))
        except psycopg.Error as exc:
            raise RuntimeError(f"could not restart the walsenders: {exc}") from None
        self.setup.settle()
        for node in self.nodes:
            shutil.rmtree(node.data_dir / "gprof", ignore_errors=True)

    def stop(self, role_of: Callable[[int], tuple[str, str] | None]) -> GprofResult:
        """After the repeat: end the walsenders, wait for replication, read the profiles.
        ``role_of`` names the (node, role) of a pid the other probes saw."""
        try:
            _wait_gone(_end_walsenders(self.primary))
        finally:
            self.setup.settle()  # the next repeat needs its standbys whatever happened
        self.out_dir.mkdir(parents=True, exist_ok=True)
        result = GprofResult()
        try:
            for node in self.nodes:
                self._node(node, role_of, result)
        finally:
            for node in self.nodes:  # large (a histogram of the whole binary each)
                shutil.rmtree(node.data_dir / "gprof", ignore_errors=True)
        return result

    def _node(self, node: GprofNode, role_of: Callable[[int], tuple[str, str] | None],
              result: GprofResult) -> None:
        baseline_pid = _idle_backend(node)
        folder = node.data_dir / "gprof"
        groups: dict[str, list[Path]] = defaultdict(list)
        baseline_gmon: Path | None = None
        for gmon in sorted(folder.glob("*/gmon.out")) if folder.is_dir() else []:
            pid = gmon.parent.name
            if pid == str(baseline_pid):
                baseline_gmon = gmon
                continue
            known = role_of(int(pid)) if pid.isdigit() else None
            if known is None or known[0] != node.name:
                result.unknown += 1
            else:
                groups[known[1]].append(gmon)
        roles = sorted(groups)
        # gprof spends its time reading the binary's symbols, once per call and on one
        # CPU: the roles' profiles are read side by side, as many as there are CPUs.
        jobs = [[baseline_gmon]] if baseline_gmon is not None else []
        jobs += [groups[role] for role in roles]
        with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
            texts = list(pool.map(lambda files: flat_profile(self.setup.postgres, files),
                                  jobs))
        baseline: dict[str, tuple[int | None, float]] = {}
        if baseline_gmon is not None:
            text = texts.pop(0)
            (self.out_dir / f"{node.name}-baseline.txt").write_text(text)
            baseline = {f: (calls, self_s) for f, calls, self_s in parse_flat(text)}
        for role, text in zip(roles, texts, strict=True):
            files = groups[role]
            name = f"{node.name}-{role.replace(':', '-')}.txt"
            (self.out_dir / name).write_text(text)
            functions = less_baseline(parse_flat(text), baseline, len(files))
            result.roles.append(GprofRoleRow(
                node.name, role, len(files), round(sum(f[2] for f in functions), 2), name))
            result.functions += [GprofFunctionRow(node.name, role, *f) for f in functions]


def _idle_backend(node: GprofNode) -> int | None:
    """Connect to ``node`` and leave: the pid of the backend whose profile is what every
    child of that postmaster starts with (None: the node did not answer; nothing is
    then taken off)."""
    try:
        with admin_connection(node.admin, seconds=10, what=node.name) as conn:
            row = conn.execute("select pg_backend_pid()").fetchone()
    except psycopg.Error:
        return None
    pid = int(str(row[0])) if row else None
    if pid is not None:
        deadline = time.monotonic() + EXIT_TIMEOUT
        gmon = node.data_dir / "gprof" / str(pid) / "gmon.out"
        while not gmon.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    return pid


def less_baseline(functions: list[tuple[str, int | None, float]],
                  baseline: dict[str, tuple[int | None, float]], processes: int
                  ) -> list[tuple[str, int | None, float]]:
    """A profile of ``processes`` processes less each one's inherited ``baseline``;
    functions left with neither calls nor time are dropped.

    >>> less_baseline([("SetLatch", 900, 0.02), ("AioShmemInit", 2, 0.01)],
    ...               {"AioShmemInit": (1, 0.005), "SetLatch": (3, 0.0)}, 2)
    [('SetLatch', 894, 0.02)]
    """
    out = []
    for function, calls, self_s in functions:
        base_calls, base_s = baseline.get(function, (None, 0.0))
        if calls is not None and base_calls is not None:
            calls = max(0, calls - processes * base_calls)
        self_s = max(0.0, round(self_s - processes * base_s, 6))
        if calls or self_s > 0:
            out.append((function, calls, self_s))
    return out


def flat_profile(postgres: Path, files: list[Path]) -> str:
    """gprof's flat profile of ``files`` summed (the brief form, no call graph): given
    several profile files, gprof reads them as their sum."""
    with tempfile.TemporaryDirectory(prefix="syncrep-gprof-") as tmp:
        return _gprof(["-b", "-p", str(postgres), *map(str, files)], tmp)


def _gprof(args: list[str], cwd: str) -> str:
    try:
        done = subprocess.run(["gprof", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=GPROF_TIMEOUT, env={**os.environ, "LC_ALL": "C"})
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"gprof took over {GPROF_TIMEOUT:g} s") from None
    if done.returncode != 0:
        raise RuntimeError(f"gprof failed: {done.stderr.strip()[-500:]}")
    return done.stdout


def parse_flat(text: str) -> list[tuple[str, int | None, float]]:
    """(function, calls, self seconds) of each line of a flat profile.

    >>> parse_flat('''Flat profile:
    ...
    ... Each sample counts as 0.01 seconds.
    ...   %   cumulative   self              self     total
    ...  time   seconds   seconds    calls  ms/call  ms/call  name
    ...  40.00      0.02     0.02     1200     0.02     0.02  SetLatch
    ...  20.00      0.03     0.01                             __libc_send
    ...   0.00      0.03     0.00    52000     0.00     0.00  SyncRepWakeQueue
    ... ''')
    [('SetLatch', 1200, 0.02), ('__libc_send', None, 0.01), ('SyncRepWakeQueue', 52000, 0.0)]
    """
    out: list[tuple[str, int | None, float]] = []
    started = False
    for line in text.splitlines():
        words = line.split()
        if not started:
            started = words[:2] == ["time", "seconds"]
            continue
        if not words:
            break  # the brief flat profile ends at its first blank line
        numbers = []
        for word in words:
            try:
                numbers.append(float(word))
            except ValueError:
                break
        name = " ".join(words[len(numbers):])
        if len(numbers) >= 4 and name:  # time, cumulative, self, calls[, per call ...]
            out.append((name, int(numbers[3]), numbers[2]))
        elif len(numbers) == 3 and name:
            out.append((name, None, numbers[2]))
    return out
