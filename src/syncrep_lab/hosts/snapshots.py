"""Every process of a node on an SSH host, with its CPU and disk counters, in one
command: those working in the node's data directory, read from /proc there by a python3
script or, where the host has none, a sh one (both print the same lines)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from syncrep_lab import procs
from syncrep_lab.hosts.ssh import SshHost

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
