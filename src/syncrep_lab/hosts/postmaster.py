"""PostgreSQL on a host reached over SSH: starting and stopping a server there, and
acting on a running one (the fault scenarios' signals, a kill -9).

The server runs as the SSH account, detached from the session that started
it, so a dropped connection never takes a node down in the middle of a run.
Everything is asked of the host in as few commands as possible (each command
is a network round trip) and each one is bounded.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from syncrep_lab.errors import ClusterFailure, UserError
from syncrep_lab.hosts.ssh import ALIVE_SH, SshHost

# How long a server may take to write postmaster.pid after it was started. It
# does so before any recovery, so this is about a busy host, not a big database.
START_TIMEOUT = 60.0


def _postmaster_pid(host: SshHost, data_dir: str) -> int | None:
    """The pid on the first line of postmaster.pid, if the file is there."""
    result = host.sh('head -n 1 -- "$1/postmaster.pid" 2>/dev/null || true', data_dir,
                     what=f"reading {data_dir}/postmaster.pid", timeout=30)
    first = result.stdout.strip()
    return int(first) if first.isdigit() else None


def _log_tail(host: SshHost, log: str) -> str:
    result = host.sh('tail -n 15 -- "$1" 2>/dev/null', log, what=f"reading {log}",
                     timeout=30, check=False)
    return result.stdout.strip() or "(the log is empty)"


def start_postgres(host: SshHost, bin_dir: str, data_dir: str, log: str,
                   timeout: float = START_TIMEOUT, prefix: Sequence[str] = ()) -> int:
    """Start ``postgres -D data_dir`` detached, under ``prefix`` (numactl, taskset: each
    execs the next, so the pid is the postmaster's); its pid once postmaster.pid names it.

    The wait runs on the host (one command that polls), so it costs one
    round trip however slow the start. A server that exits instead, or does
    not get that far in time, is a ClusterFailure with the end of its log.
    """
    spec = host.spec
    running = _postmaster_pid(host, data_dir)
    if running is not None and host.alive(running):
        raise ClusterFailure(
            f"a server already runs in {data_dir} on {spec.name} (pid {running})",
            "stop it first, or use another data directory")
    if running is not None:
        _clear_zombie_lock(host, data_dir)
    postgres = posixpath.join(bin_dir, "postgres")
    pid = host.spawn_detached([*prefix, postgres, "-D", data_dir], log, cwd=data_dir)
    wait = ALIVE_SH + (
        'pid=$1; file=$2/postmaster.pid; n=$3; i=0\n'
        'while [ "$i" -lt "$n" ]; do\n'
        '  first=$(head -n 1 -- "$file" 2>/dev/null) && [ "$first" = "$pid" ] && exit 0\n'
        '  alive "$pid" || exit 3\n'
        '  sleep 0.1 2>/dev/null || sleep 1\n'
        '  i=$((i + 1))\n'
        'done\n'
        'exit 4\n'
    )
    steps = max(1, int(timeout * 10))
    result = host.sh(wait, str(pid), data_dir, str(steps), what="waiting for postgres",
                     timeout=timeout + 15, check=False)
    if result.returncode == 0:
        return pid
    if result.returncode == 4:
        host.kill(pid, 15)
        raise ClusterFailure(
            f"postgres in {data_dir} on {spec.name} did not write postmaster.pid within "
            f"{timeout:g} s; it was stopped. Its log ({log}) ends:\n{_log_tail(host, log)}",
            "check the host's load and disk")
    raise ClusterFailure(
        f"postgres in {data_dir} on {spec.name} exited while starting. "
        f"Its log ({log}) ends:\n{_log_tail(host, log)}",
        "fix what the log names (a port in use, a bad setting, permissions)")


# A postmaster killed with SIGKILL was started detached, so its parent is the host's init
# (or a subreaper), which reaps it when it gets to it: until then it is a zombie whose
# pid, still in postmaster.pid, passes PostgreSQL's kill(pid, 0), and a new postmaster
# refuses to start ("Is another postmaster running?"). Wait for the reaping; a zombie
# that outlives the wait (an init that never reaps) holds nothing, and every process
# of the node is gone by then (wait_node_gone), so its lock file is removed.
_ZOMBIE_LOCK_SH = r"""
f=$1/postmaster.pid; n=$2; i=0
pid=$(head -n 1 -- "$f" 2>/dev/null) || exit 0
case $pid in ''|*[!0-9]*) exit 0;; esac
while [ "$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$pid/status" 2>/dev/null)" = Z ]
do
  if [ "$i" -ge "$n" ]; then rm -f -- "$f"; echo removed; exit 0; fi
  sleep 0.1 2>/dev/null || sleep 1
  i=$((i + 1))
done
"""


def _clear_zombie_lock(host: SshHost, data_dir: str, timeout: float = 5.0) -> None:
    host.sh(_ZOMBIE_LOCK_SH, data_dir, str(max(1, int(timeout * 10))),
            what=f"waiting for the old postmaster of {data_dir} to be reaped",
            timeout=timeout + 15)


def stop_postgres(host: SshHost, bin_dir: str, data_dir: str, timeout: float = 30) -> None:
    """Stop the server in ``data_dir``: fast shutdown, then immediate, then SIGKILL.

    Doing nothing when no server runs there makes teardown safe to repeat.
    """
    pid = _postmaster_pid(host, data_dir)
    if pid is None or not host.alive(pid):
        return
    pg_ctl = posixpath.join(bin_dir, "pg_ctl")
    seconds = str(max(1, int(timeout)))
    # pg_ctl returns once postmaster.pid is gone, a moment before the process
    # itself: wait_exit covers that moment instead of escalating over it.
    host.run([pg_ctl, "stop", "-D", data_dir, "-m", "fast", "-t", seconds, "-s"],
             timeout=timeout + 15, check=False)
    if host.wait_exit(pid, 5):
        return
    host.run([pg_ctl, "stop", "-D", data_dir, "-m", "immediate", "-t", "10", "-s"],
             timeout=25, check=False)
    if host.wait_exit(pid, 5):
        return
    host.kill(pid, 9)
    if not host.wait_exit(pid, 10):
        raise ClusterFailure(f"the server in {data_dir} on {host.spec.name} (pid {pid}) "
                             "survived fast and immediate shutdown and SIGKILL",
                             "check the host: the process may be stuck in the kernel (I/O)")


# --- acting on a running server (fault scenarios) ---------------------------------------

# The pids of every process of the node: those working in its data directory (as in
# proc_snapshot), one a line.
_NODE_PIDS_SH = ('node_pids() {\n'
                 '  for p in /proc/[0-9]*; do\n'
                 '    [ "$(readlink "$p/cwd" 2>/dev/null)" = "$1" ] && echo "${p#/proc/}"\n'
                 '  done\n'
                 '}\n')


def signal_node(host: SshHost, data_dir: str, sig: str) -> int:
    """Send ``sig`` (a name: STOP, CONT) to every process of the node in ``data_dir``, in
    one command; how many were signalled."""
    script = _NODE_PIDS_SH + ('for pid in $(node_pids "$1"); do\n'
                              '  kill -"$2" "$pid" 2>/dev/null && echo "$pid"\n'
                              'done; exit 0\n')
    result = host.sh(script, data_dir, sig, what=f"sending SIG{sig} to {data_dir}",
                     timeout=30)
    return len(result.stdout.split())


def kill_server(host: SshHost, data_dir: str, timeout: float = 10.0) -> None:
    """SIGKILL the postmaster of ``data_dir`` (kill -9, as an operator's mistake or the
    OOM killer would) and wait until it is gone; its children notice by themselves."""
    pid = _postmaster_pid(host, data_dir)
    if pid is None:
        return
    host.kill(pid, 9)
    if not host.wait_exit(pid, timeout):
        raise UserError(f"the server in {data_dir} on {host.spec.name} (pid {pid}) outlived "
                        "SIGKILL", "check the host: the process may be stuck in the kernel")


def wait_node_gone(host: SshHost, data_dir: str, timeout: float) -> bool:
    """Wait (polling on the host) until no process works in ``data_dir`` any more: the
    children of a killed postmaster hold its shared memory until they notice, and a new
    postmaster refuses to start before that. False if some outlived ``timeout``."""
    steps = str(max(1, int(timeout * 10)))
    script = _NODE_PIDS_SH + ('i=0\n'
                              'while [ -n "$(node_pids "$1")" ]; do\n'
                              '  [ "$i" -ge "$2" ] && exit 1\n'
                              '  sleep 0.1 2>/dev/null || sleep 1\n'
                              '  i=$((i + 1))\n'
                              'done\n')
    result = host.sh(script, data_dir, steps, what=f"waiting for {data_dir} to be free",
                     timeout=timeout + 15, check=False)
    return result.returncode == 0


def postmaster_pid(host: SshHost, data_dir: str) -> int | None:
    """The pid of the postmaster running in ``data_dir``, as the host sees it (its
    postmaster.pid there); None when none runs."""
    pid = _postmaster_pid(host, data_dir)
    return pid if pid is not None and host.alive(pid) else None


def running(host: SshHost, data_dir: str) -> bool:
    """Whether a postmaster runs in ``data_dir`` (its pid file names a live process)."""
    pid = _postmaster_pid(host, data_dir)
    return pid is not None and host.alive(pid)
