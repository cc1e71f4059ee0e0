"""Starting, watching and stopping one postmaster.

Servers are spawned directly (not through ``pg_ctl -w``): 9.6's pg_ctl polls
once a second, which alone would cost a second per node (readiness is checked
in ready.py). Stopping is a signal to the postmaster (SIGINT fast, SIGQUIT
immediate) and a bounded wait for it to go. This module does not import
psycopg, so that ``cluster down`` starts fast.
A postmaster is only ever signalled after checking, through /proc, that its
working directory is the data dir we expect: a recycled pid is never hit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from syncrep_lab import procs
from syncrep_lab.runas import PROFILE_PREFIX, Account, account_env, as_account

if TYPE_CHECKING:
    from syncrep_lab.placement.layout import Launch

STOP_SIGNALS = {"smart": signal.SIGTERM, "fast": signal.SIGINT, "immediate": signal.SIGQUIT}


def spawn(
    account: Account, postgres: Path, data_dir: Path, log_file: Path,
    launch: Launch | None = None, env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start a postmaster in its placement (``launch``: namespace, numactl, cpuset), with
    ``env`` added to its environment (a slow flush's preload, cluster/slow_flush.py).

    ``ip netns exec`` needs root and the server must not have it, so when the tool is
    root the chain is ``ip netns exec NS numactl ... setpriv --reuid ... postgres``:
    each execs the next, and the pid returned is the postmaster's. The child joins its
    cpuset before the first exec, while it may still write the cgroup's files.
    """
    argv = [str(postgres), "-D", str(data_dir)]
    prefix = launch.prefix() if launch is not None else []
    join = launch.join() if launch is not None else None
    kwargs: dict[str, Any] = as_account(account, data_dir)
    if (prefix or join) and not account.is_self:
        argv = [*prefix, "setpriv", f"--reuid={account.uid}", f"--regid={account.gid}",
                "--clear-groups", "--", *argv]
        kwargs = {"env": account_env(account), "cwd": str(data_dir)}
    else:
        argv = [*prefix, *argv]
    # a profiling build's server writes DATA/gprof/PID/gmon.out (runas.divert_profiles)
    kwargs["env"].pop(PROFILE_PREFIX, None)
    kwargs["env"].update(env or {})
    log = open(log_file, "ab")  # noqa: SIM115 - handed to the child, closed below
    try:
        if not account.is_self:
            os.chown(log_file, account.uid, account.gid)
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=join,  # one write(2) on a descriptor opened here
            **kwargs,
        )
    finally:
        log.close()
        if join is not None:
            join.close()


def log_tail(log_file: Path, lines: int = 8) -> str:
    try:
        text = log_file.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join("    " + line for line in text.strip().splitlines()[-lines:])


def stop_children(spawned: list[subprocess.Popen[bytes]], timeout: float = 15) -> None:
    """Immediate shutdown of postmasters we spawned ourselves, whatever their state."""
    for proc in spawned:
        if proc.poll() is None:
            proc.send_signal(signal.SIGQUIT)
    deadline = time.monotonic() + timeout
    for proc in spawned:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)  # bounded even for a process stuck in the kernel


def postmaster_pid(data_dir: Path) -> int | None:
    """The live postmaster of ``data_dir``, verified through /proc, or None."""
    try:
        first = (data_dir / "postmaster.pid").read_text().split("\n", 1)[0].strip()
        pid = int(first)
    except (OSError, ValueError):
        return None
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None
    if Path(cwd) != data_dir.resolve():
        return None
    return pid if procs.alive(pid) else None


def processes_in(data_dirs: list[Path]) -> list[int]:
    """Pids of PostgreSQL processes (postmasters and their children) whose working
    directory is one of ``data_dirs``: every server process runs in its data dir."""
    wanted = {str(d.resolve()) for d in data_dirs}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
            with open(f"/proc/{entry}/comm") as fh:
                comm = fh.read().strip()
        except OSError:
            continue
        if cwd in wanted and comm in ("postgres", "postmaster"):
            found.append(int(entry))
    return found


def signal_stop(data_dir: Path, mode: str) -> int | None:
    pid = postmaster_pid(data_dir)
    if pid is not None:
        try:
            os.kill(pid, STOP_SIGNALS[mode])
        except ProcessLookupError:
            return None
    return pid


def _alive(pid: int, data_dir: Path) -> bool:
    """Whether the postmaster ``pid`` of ``data_dir`` still runs. For a child of this
    process, waitpid is the answer, and it reaps it: /proc loses an exiting process's
    working directory before it is a zombie, so /proc alone would call it gone too
    early and leave a zombie whose pid, still in postmaster.pid, makes the next
    postmaster of that data dir refuse to start."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not ours: /proc tells
        return postmaster_pid(data_dir) == pid
    return done != pid


def wait_gone(pids: dict[Path, int], timeout: float) -> list[Path]:
    """Wait for the given postmasters to exit; escalate to SIGQUIT then SIGKILL.

    Returns the data dirs whose postmaster had to be killed.
    """
    deadline = time.monotonic() + timeout
    give_up = deadline + 15
    escalated: set[Path] = set()
    killed: list[Path] = []
    pending = dict(pids)
    while pending:
        pending = {d: p for d, p in pending.items() if _alive(p, d)}
        if not pending:
            break
        now = time.monotonic()
        if now > give_up:
            break  # unkillable (e.g. stuck in the kernel): report rather than hang
        if now > deadline:
            for data_dir, pid in pending.items():
                # suppress: it may have exited since it was last seen
                if data_dir not in escalated:
                    escalated.add(data_dir)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGQUIT)
                else:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    killed.append(data_dir)
            deadline = now + 5
        time.sleep(0.005)
    return killed
