"""PostgreSQL on a host reached over SSH: the steps the cluster builder takes there.

The server runs as the SSH account, detached from the session that started
it, so a dropped connection never takes a node down in the middle of a run.
Everything is asked of the host in as few commands as possible (each command
is a network round trip) and each one is bounded.

What the host needs: a POSIX ``sh`` with ``cat``, ``kill``, ``rm`` and
``readlink`` (any Linux has them), ``setsid`` (util-linux; without it the
server still starts, just without a session of its own), Linux ``/proc`` for
the CPU counters, and ``python3`` only to make :func:`proc_snapshot` faster (and to
read the server binary's symbols there for the commit anatomy, probes/host_anatomy.py,
which otherwise copies the binary).
"""

from __future__ import annotations

import posixpath
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from syncrep_lab import procs
from syncrep_lab.errors import ClusterFailure, UserError
from syncrep_lab.hosts.ssh import ALIVE_SH, SshHost
from syncrep_lab.measure.io_counters import (
    DiskCounters,
    NetCounters,
    disk_devices,
    parse_diskstats,
    parse_net_dev,
)

# How long a server may take to write postmaster.pid after it was started. It
# does so before any recovery, so this is about a busy host, not a big database.
START_TIMEOUT = 60.0


# --- per-process CPU counters --------------------------------------------------------------

# Both variants print the same lines: "T<tab>CLK_TCK" once, then for each
# process whose working directory is the data directory
# "P<tab>pid<tab>ppid<tab>utime<tab>stime<tab>cutime<tab>cstime<tab>voluntary
# <tab>involuntary<tab>Cpus_allowed_list<tab>title". The title comes last, so
# whatever it holds cannot shift the other fields.
#
# Where each figure is in /proc/PID/stat comes from procs.py's table, the one the local
# readers use: ``@NAME@`` in the script text is procs.NAME, written as the script's
# language reaches that field (after the command name, from 0).
SNAPSHOT_FIELDS = ("PPID", "UTIME", "STIME", "CUTIME", "CSTIME")


def _with_fields(script: str, reach: Callable[[int], str]) -> str:
    """``script`` with every ``@NAME@`` replaced by ``reach(procs.NAME)``."""
    def field(match: re.Match[str]) -> str:
        assert match.group(1) in SNAPSHOT_FIELDS, match.group(1)
        return reach(int(getattr(procs, match.group(1))))

    return re.sub(r"@([A-Z]+)@", field, script)


_SNAPSHOT_PY = _with_fields(r"""
import os, sys
want = os.path.realpath(sys.argv[1])
out = ["T\t%d" % os.sysconf("SC_CLK_TCK")]
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        if os.readlink("/proc/%s/cwd" % p) != want:
            continue
        with open("/proc/%s/stat" % p) as f:
            stat = f.read()
        with open("/proc/%s/status" % p) as f:
            status = f.read()
        with open("/proc/%s/cmdline" % p, "rb") as f:
            cmd = f.read()
    except OSError:
        continue
    s = stat.rsplit(")", 1)[1].split()
    st = {}
    for line in status.splitlines():
        k, _, v = line.partition(":")
        st[k] = v.strip()
    title = cmd.replace(b"\0", b" ").decode("utf-8", "replace")
    title = " ".join(title.split())
    out.append("\t".join(["P", p, s[@PPID@], s[@UTIME@], s[@STIME@],
                          s[@CUTIME@], s[@CSTIME@],
                          st.get("voluntary_ctxt_switches", "0"),
                          st.get("nonvoluntary_ctxt_switches", "0"),
                          st.get("Cpus_allowed_list", ""), title]))
    try:
        with open("/proc/%s/io" % p) as f:
            io = dict(line.split(": ", 1) for line in f.read().splitlines() if ": " in line)
        out.append("\t".join(["I", p, io.get("read_bytes", ""), io.get("write_bytes", "")]))
    except OSError:
        pass
print("\n".join(out))
""", str)

# The same in POSIX sh, for hosts without python3: slower (a few forks per
# process on the host), same output. `set -- $rest` makes the fields after the command
# name the positional parameters: field N (from 0) is ${N+1}.
_SNAPSHOT_SH = _with_fields(r"""
tick=$(getconf CLK_TCK 2>/dev/null) || tick=100
printf 'T\t%s\n' "$tick"
want=$(cd -P -- "$1" 2>/dev/null && pwd -P) || exit 0
for d in /proc/[0-9]*; do
  cwd=$(readlink "$d/cwd" 2>/dev/null) || continue
  [ "$cwd" = "$want" ] || continue
  stat=$(cat "$d/stat" 2>/dev/null) || continue
  status=$(cat "$d/status" 2>/dev/null) || continue
  title=$(tr '\000\n\t' '   ' < "$d/cmdline" 2>/dev/null | tr -s ' ')
  rest=${stat##*) }
  set -f  # the glob of the for list above is already expanded
  set -- $rest
  vol=0; invol=0; cpus=
  while IFS=: read -r k v; do
    case $k in
      voluntary_ctxt_switches) vol=$(echo $v);;
      nonvoluntary_ctxt_switches) invol=$(echo $v);;
      Cpus_allowed_list) cpus=$(echo $v);;
    esac
  done <<EOF
$status
EOF
  printf 'P\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "${d#/proc/}" "@PPID@" "@UTIME@" \
    "@STIME@" "@CUTIME@" "@CSTIME@" "$vol" "$invol" "$cpus" "$title"
  io=$(cat "$d/io" 2>/dev/null) || continue
  rb=; wb=
  while IFS=': ' read -r k v; do
    case $k in
      read_bytes) rb=$v;;
      write_bytes) wb=$v;;
    esac
  done <<EOF
$io
EOF
  printf 'I\t%s\t%s\t%s\n' "${d#/proc/}" "$rb" "$wb"
done
""", lambda field: f"${{{field + 1}}}")

_SNAPSHOT_DISPATCH = r"""
if [ "$2" = python ] && command -v python3 >/dev/null 2>&1; then
  exec python3 -c "$3" "$1"
fi
exec sh -c "$4" sh "$1"
"""


def proc_snapshot(host: SshHost, data_dir: str, *,
                  prefer_python: bool = True) -> list[dict[str, Any]]:
    """CPU and scheduling counters of every process of the node in ``data_dir``.

    A PostgreSQL server and all its children work in their data directory,
    so "every process whose /proc/PID/cwd is the data directory" is exactly
    the node, found in one command. Each entry has pid, ppid, title, utime,
    stime, cutime, cstime (clock ticks), voluntary and involuntary context
    switches, cpus_allowed_list, clk_tck, the host's ticks per second, and read_bytes
    and write_bytes (/proc/PID/io, None where unreadable): taken before and after a
    repeat, the differences are the node's CPU cost and its disk bytes.
    Only processes of the SSH account are visible, which is the account the
    server runs as.
    """
    result = host.sh(*snapshot_command(data_dir, prefer_python=prefer_python),
                     what=f"reading the processes of {data_dir}", timeout=60)
    return parse_snapshot(result.stdout)


def snapshot_command(data_dir: str, *, prefer_python: bool = True) -> tuple[str, ...]:
    """The script of :func:`proc_snapshot` and its arguments, for ``sh -c``."""
    mode = "python" if prefer_python else "sh"
    return _SNAPSHOT_DISPATCH, data_dir, mode, _SNAPSHOT_PY, _SNAPSHOT_SH


def parse_snapshot(text: str) -> list[dict[str, Any]]:
    """The rows of :func:`proc_snapshot` from its script's output."""
    tick = 100
    rows: list[dict[str, Any]] = []
    io: dict[int, tuple[int, int]] = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if fields[0] == "T" and len(fields) == 2 and fields[1].strip().isdigit():
            tick = int(fields[1])
        elif fields[0] == "I" and len(fields) == 4 and all(f.strip().isdigit()
                                                           for f in fields[1:]):
            io[int(fields[1])] = (int(fields[2]), int(fields[3]))
        elif fields[0] == "P" and len(fields) >= 11:
            try:
                numbers = [int(f) for f in fields[1:9]]
            except ValueError:
                continue  # a process caught half-gone: skip it, as a local read would
            pid, ppid, utime, stime, cutime, cstime, voluntary, involuntary = numbers
            rows.append({
                "pid": pid, "ppid": ppid, "title": "\t".join(fields[10:]).strip(),
                "utime": utime, "stime": stime, "cutime": cutime, "cstime": cstime,
                "voluntary": voluntary, "involuntary": involuntary,
                "cpus_allowed_list": fields[9],
            })
    for row in rows:
        row["clk_tck"] = tick
        # /proc/PID/io's block-layer bytes; None where it could not be read there
        row["read_bytes"], row["write_bytes"] = io.get(int(row["pid"]), (None, None))
    rows.sort(key=lambda row: int(row["pid"]))
    return rows


# --- starting and stopping a server ------------------------------------------------------


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


# What the kernel applied to each pid, as placement/cgroups.placement_of reads it here: one
# line a live process, pid, Cpus_allowed_list, Mems_allowed_list, the memory policy (the
# first non-default one among its own memory's mappings in numa_maps; "unknown" when
# numa_maps cannot be read) and its cpuset cgroup.
_PLACEMENT_SH = r"""
for pid; do
  s=/proc/$pid/status
  [ -r "$s" ] || continue
  cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "$s")
  mems=$(sed -n 's/^Mems_allowed_list:[[:space:]]*//p' "$s")
  if [ -r "/proc/$pid/numa_maps" ]; then
    policy=$(awk '$2 != "default" && (!/file=/ || /heap|stack|SYSV|memfd|zero/) {
                    print $2; exit }' "/proc/$pid/numa_maps" 2>/dev/null)
  else
    policy=unknown
  fi
  group=$(sed -n 's/^[0-9]*:[^:]*cpuset[^:]*://p; s/^0::\(.*\)/\1/p' "/proc/$pid/cgroup" |
          head -n 1)
  printf '%s\t%s\t%s\t%s\t%s\n' "$pid" "$cpus" "$mems" "${policy:-default}" "$group"
done
exit 0
"""


def placement_of(host: SshHost, pids: Sequence[int]) -> dict[int, dict[str, str]]:
    """What the host's kernel applied to each of ``pids`` still alive there: cpus, mems,
    numa_policy and cgroup, as placement_of reads a process here."""
    if not pids:
        return {}
    out = host.sh(_PLACEMENT_SH, *(str(int(p)) for p in pids),
                  what="reading the placement of processes", timeout=60).stdout
    found = {}
    for line in out.splitlines():
        fields = line.split("\t")
        if len(fields) == 5 and fields[0].isdigit():
            found[int(fields[0])] = dict(zip(("cpus", "mems", "numa_policy", "cgroup"),
                                             fields[1:], strict=True))
    return found


# Pages of each pid per NUMA node, summed over its numa_maps (as probes/tracker.numa_pages
# reads them here): one line a pid and node, pid, N<k>, pages.
_NUMA_PAGES_SH = r"""
for pid; do
  awk -v pid="$pid" '{ for (i = 3; i <= NF; i++) if ($i ~ /^N[0-9]+=[0-9]+$/) {
                         split($i, kv, "="); pages[kv[1]] += kv[2] } }
                     END { for (k in pages) printf "%s\t%s\t%s\n", pid, k, pages[k] }' \
      "/proc/$pid/numa_maps" 2>/dev/null
done
exit 0
"""


def numa_pages(host: SshHost, pids: Sequence[int]) -> dict[int, Counter[str]]:
    """Pages of each of ``pids`` per NUMA node (``N0``, ``N1`` ...), read on the host;
    a process gone, or whose numa_maps cannot be read, has none."""
    found: dict[int, Counter[str]] = {}
    if not pids:
        return found
    out = host.sh(_NUMA_PAGES_SH, *(str(int(p)) for p in pids),
                  what="reading numa_maps", timeout=120).stdout
    for line in out.splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and fields[0].isdigit() and fields[2].isdigit():
            found.setdefault(int(fields[0]), Counter())[fields[1]] += int(fields[2])
    return found


# --- removing a node's files -------------------------------------------------------------


def remove_dir(host: SshHost, path: str) -> None:
    """Delete ``path`` on the host, only if it lies below the host's data_root.

    The check is made twice: on the text of the path here, and on the host
    after resolving symlinks of its parent, so neither ``..`` nor a link out
    of data_root can turn this into a deletion elsewhere. A path already
    gone is fine.
    """
    root = posixpath.normpath(host.spec.data_root)
    target = posixpath.normpath(path) if path else ""
    if (not posixpath.isabs(target) or target == root
            or not target.startswith(root.rstrip("/") + "/") or root == "/"):
        raise UserError(
            f"refusing to remove {path!r} on {host.spec.name}: it is not below the "
            f"host's data_root {host.spec.data_root}",
            "only directories syncrep-lab made under data_root are removed")
    script = (
        'root=$(cd -P -- "$1" 2>/dev/null && pwd -P) || exit 0\n'
        'target=$2\n'
        '[ -e "$target" ] || [ -L "$target" ] || exit 0\n'
        'parent=$(cd -P -- "$(dirname -- "$target")" && pwd -P) || exit 4\n'
        'case "$parent/" in\n'
        '  "$root"/*) ;;\n'
        '  *) echo "$target resolves to $parent, outside $root" >&2; exit 5;;\n'
        'esac\n'
        'rm -rf -- "$parent/$(basename -- "$target")"\n'
    )
    result = host.sh(script, root, target, what=f"removing {target}", timeout=300,
                     check=False)
    if result.returncode == 5:
        raise UserError(f"refusing to remove {path} on {host.spec.name}: "
                        f"{result.stderr.strip()}",
                        "a symlink leads out of data_root; remove it by hand after checking")
    if result.returncode != 0:
        raise UserError(f"could not remove {path} on {host.spec.name}: "
                        f"{result.stderr.strip()[-1500:] or 'exit ' + str(result.returncode)}",
                        f"check that {host.spec.user} owns everything under it")


# --- what a host is, its clock and its CPUs ------------------------------------------------

_FACTS_SH = r"""
echo "hostname=$(uname -n)"
echo "kernel=$(uname -sr)"
echo "arch=$(uname -m)"
echo "cpus=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"
echo "cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)"
echo "numa_nodes=$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)"
echo "memory_kb=$(sed -n 's/^MemTotal:[[:space:]]*\([0-9]*\).*/\1/p' /proc/meminfo 2>/dev/null)"
if grep -q '^sch_netem ' /proc/modules 2>/dev/null ||
   [ -n "$(find "/lib/modules/$(uname -r)" -name 'sch_netem*' 2>/dev/null | head -n 1)" ]; then
  echo netem=yes
else
  echo netem=no
fi
"""


def machine_facts(host: SshHost) -> dict[str, Any]:
    """What the host is, as the run's ``machine`` says of this one: its name, kernel,
    architecture, CPUs (usable by the account), CPU model, NUMA nodes, memory, and
    whether its kernel has netem."""
    out = host.sh(_FACTS_SH, what="reading what the host is").stdout
    facts: dict[str, Any] = {}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        facts[key.strip()] = value.strip()
    for key in ("cpus", "numa_nodes", "memory_kb"):
        facts[key] = int(facts[key]) if str(facts.get(key, "")).isdigit() else None
    facts["netem"] = facts.get("netem") == "yes"
    return facts


# One round trip: the host's clock (seconds since the epoch, to the nanosecond), then its
# CPUs' time since boot (/proc/stat's first line, in clock ticks) and its CPU count.
_CLOCK_SH = "date +%s.%N; head -n 1 /proc/stat; grep -c '^cpu[0-9]' /proc/stat"
# the disks and the host's network (measure/io_counters.py), apart from the clock: their
# output would lengthen the round trip the clock's offset is read in
_IO_SH = "ls /sys/block; echo @@; cat /proc/diskstats; echo @@; cat /proc/net/dev"


@dataclass(frozen=True)
class HostReading:
    offset_s: float  # the host's clock minus this machine's
    uncertainty_s: float  # half the round trip it was read in
    busy_ticks: int  # CPU time spent not idle, over every CPU, since boot
    total_ticks: int
    cpus: int
    disks: dict[str, DiskCounters] = field(default_factory=dict)
    network: dict[str, NetCounters] = field(default_factory=dict)
    io_at: float = 0.0  # when the disks and network were read (time.monotonic())


def read_host(host: SshHost, tries: int = 5) -> HostReading:
    """The host's clock against this machine's, and its CPU counters. The clock is read
    ``tries`` times; the reading of the shortest round trip is kept (its midpoint is
    then closest to the moment the host read its clock), and half that round trip is its
    uncertainty."""
    best: tuple[float, float, str] | None = None
    for _ in range(tries):
        sent = time.time()
        out = host.sh(_CLOCK_SH, what="reading the host's clock and CPUs").stdout
        got = time.time()
        if best is None or got - sent < best[0]:
            best = (got - sent, (sent + got) / 2, out)
    assert best is not None
    rtt, middle, out = best
    lines = out.splitlines()
    try:
        clock = float(lines[0])
        ticks = [int(v) for v in lines[1].split()[1:]]
        cpus = int(lines[2])
    except (IndexError, ValueError):
        raise UserError(f"{host.spec.name} gave no clock or CPU counters ({out[:200]!r})",
                        "the host needs date with %N and Linux /proc/stat") from None
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle, iowait
    total = sum(ticks[:8])  # user .. steal; guest time is already counted in user
    io = host.sh(_IO_SH, what="reading the host's disks and network").stdout
    io_at = time.monotonic()
    parts = io.split("@@\n")
    disks = net = {}
    if len(parts) == 3:
        disks = parse_diskstats(parts[1], disk_devices(parts[0].split()))
        net = parse_net_dev(parts[2])
    return HostReading(clock - middle, rtt / 2, total - idle, total, cpus, disks, net,
                       io_at)


def busy_cpus(before: HostReading, after: HostReading) -> float | None:
    """CPUs the host kept busy between two readings, on average (of ``after.cpus``)."""
    elapsed = (after.total_ticks - before.total_ticks) / max(1, after.cpus)
    if elapsed <= 0:
        return None
    return (after.busy_ticks - before.busy_ticks) / elapsed


# --- perf on a host ----------------------------------------------------------------------

_PERF_SH = r"""
say() { echo "no: $*"; exit 0; }
prefix=
if [ "$(id -u)" != 0 ]; then
  [ "$1" = sudo ] || say "the account is not root and the host's spec has no sudo = true"
  prefix="sudo -n"
fi
command -v perf >/dev/null 2>&1 || say "perf is not installed (apt-get install linux-perf)"
$prefix perf --version >/dev/null 2>&1 || say "the account may not run perf with sudo -n"
events=$($prefix perf list 'syscalls:sys_enter_*' 2>/dev/null |
         sed -n 's/^ *syscalls:sys_enter_\([a-z0-9_]*\).*/\1/p')
[ -n "$events" ] || say "the kernel exposes no syscall tracepoints (mount tracefs there)"
echo "ok $prefix"
echo "$events"
"""


@dataclass(frozen=True)
class PerfAccess:
    prefix: list[str]  # [] (root) or ["sudo", "-n"]
    syscalls: list[str]  # the syscalls whose entry tracepoints the host has


def perf_access(host: SshHost) -> PerfAccess | str:
    """How perf runs on the host, or why it cannot (the probe is then skipped with it)."""
    out = host.sh(_PERF_SH, "sudo" if host.spec.sudo else "", what="checking perf").stdout
    lines = out.splitlines()
    if not lines or not lines[0].startswith("ok"):
        return (lines[0].removeprefix("no: ") if lines else "perf could not be checked")
    return PerfAccess(lines[0].split()[1:], [ln.strip() for ln in lines[1:] if ln.strip()])


class RemotePerfRun:
    """One perf command on a host, as the local probes run theirs (probes/perfrun.py):
    started detached before the repeat, stopped with SIGINT after it (sudo passes the
    signal on), its files below ``base`` removed once read."""

    def __init__(self, host: SshHost, access: PerfAccess, base: str, what: str,
                 args: list[str]) -> None:
        self.host, self.access, self.what = host, access, what
        self.log = f"{base}.{what}.log"
        self.argv = [*access.prefix, "perf", *args]
        self.files = [self.log]
        self.pid: int | None = None

    def start(self) -> None:
        self.pid = self.host.spawn_detached(self.argv, self.log,
                                            cwd=posixpath.dirname(self.log))
        time.sleep(0.3)  # perf opens its events; one that fails at once exits
        if not self.host.alive(self.pid):
            said = self.host.run(["cat", "--", self.log], timeout=30, check=False).stdout
            raise RuntimeError(f"perf {self.what} on {self.host.spec.name} exited at once: "
                               f"{said.strip()[-300:]}")

    def interrupt(self) -> None:
        """SIGINT, and wait until perf has written its output and exited."""
        if self.pid is None:
            raise RuntimeError(f"perf {self.what} was not started")
        self.host.kill(self.pid, 2)
        if not self.host.wait_exit(self.pid, 60):
            self.host.kill(self.pid, 9)
            raise RuntimeError(f"perf {self.what} on {self.host.spec.name} did not stop "
                               "within 60 s")

    def remove(self) -> None:
        self.host.run(["rm", "-f", "--", *self.files], timeout=30, check=False)


class RemotePerfStat(RemotePerfRun):
    """``perf stat --per-thread`` of a node's processes on its host."""

    def __init__(self, host: SshHost, access: PerfAccess, base: str, events: list[str],
                 pids: list[int]) -> None:
        """``base``: where its files go, ``BASE.perf-stat.csv`` and ``.log``."""
        self.out = f"{base}.perf-stat.csv"
        super().__init__(host, access, base, "perf-stat",
                         ["stat", "--per-thread", "-x", ",", "-o", self.out,
                          "-e", ",".join(events), "-p", ",".join(map(str, pids))])
        self.files.append(self.out)

    def stop(self) -> str:
        """perf's output (``perf stat -x ,``); its files removed."""
        try:
            self.interrupt()
            return self.host.get_bytes(self.out).decode(errors="replace")
        finally:
            self.remove()


class RemoteRecording(RemotePerfRun):
    """``perf record -a`` of every CPU of a host (``args``: what it samples or traces),
    ``perf script`` run there on it with ``script_args``; ``what`` names its files
    (``BASE.WHAT.data``)."""

    def __init__(self, host: SshHost, access: PerfAccess, base: str, what: str,
                 args: list[str], seconds: float, script_args: list[str]) -> None:
        self.data, self.script = f"{base}.{what}.data", f"{base}.{what}.txt"
        self.script_args = script_args
        super().__init__(host, access, base, what,
                         ["record", "-a", *args, "-o", self.data, "--", "sleep",
                          f"{seconds:g}"])
        self.files += [self.data, self.script]

    def stop(self, limit: int = 1 << 30) -> bytes:
        """The recording as ``perf script`` prints it; its files removed."""
        try:
            self.interrupt()
            prefix = " ".join(self.access.prefix)
            self.host.sh(f'data="$1" text="$2"; shift 2; '
                         f'{prefix} perf script -i "$data" "$@" > "$text" 2>/dev/null',
                         self.data, self.script, *self.script_args, what="perf script",
                         timeout=600)
            return self.host.get_bytes(self.script, limit)
        finally:
            self.remove()
