"""NUMA memory policies: numactl prefixes for server commands, and their read-back.

A postmaster started under ``numactl`` passes its memory policy to every
process it forks, so one prefix on the server command sets the policy of the
whole node, shared buffers included (they are allocated by the postmaster).
What the kernel really applied is read back from /proc/PID/numa_maps, and where
memory ended up from ``numastat``, because a policy naming a node without free
memory falls back silently.

Policy forms (the spec's ``numa`` values)::

    default            no numactl at all
    interleave=all     pages spread over every node (interleave=0,1 for some)
    localalloc         each page on the node of the CPU that touches it first
    bind=N[,M]         CPUs and memory of those nodes only (--cpunodebind --membind)
    preferred=N        memory from node N while it has any, else elsewhere
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from syncrep_lab import procs
from syncrep_lab.errors import UserError
from syncrep_lab.placement.cpus import format_cpus, numa_nodes, parse_list, require_on_machine

NUMA_POLICIES = ("default", "interleave=all", "interleave=0,1", "localalloc", "bind=N[,M]",
                 "preferred=N")
_FORMS = "default, interleave=all, interleave=0,1, localalloc, bind=N[,M] or preferred=N"


class ProcessGone(UserError, ProcessLookupError):
    """A pid that names no process (any more).

    Both a UserError (a pid given by hand) and a ProcessLookupError, so that
    code reading back many processes can skip one that exited meanwhile with a
    plain ``except OSError``.
    """

    def __init__(self, pid: int) -> None:
        super().__init__(f"process {pid} does not exist (it may have exited)",
                         "give the pid of a running process")
        self.pid = pid

# numa_maps: "<address> <policy> <details>"; the policy may hold a space
# ("prefer (many)", "weighted interleave") and flags ("interleave=static:0-1").
_POLICY_RE = re.compile(
    r"^[0-9a-f]+ ((?:prefer \(many\)|weighted interleave|default|prefer|bind|interleave|"
    r"local|unknown)\S*)"
)
# Mappings that hold a process's own data rather than a file's pages.
_SHARED_MARKS = ("file=/dev/zero", "file=/SYSV", "file=/dev/shm/", "file=/memfd:",
                 "file=/anon_hugepage", "file=/dev/hugepages")


def _parse(policy: str) -> tuple[str, list[int] | None]:
    """(kind, nodes) of a policy form; nodes None for "all" or none. UserError if unknown."""
    if not isinstance(policy, str):
        raise UserError(f"NUMA policy {policy!r} is not text", f"use one of {_FORMS}")
    text = policy.strip()
    if text in ("default", "localalloc"):
        return text, None
    kind, sep, arg = text.partition("=")
    if not sep or kind not in ("interleave", "bind", "preferred"):
        raise UserError(f"NUMA policy {policy!r} is not one syncrep-lab knows",
                        f"use one of {_FORMS}")
    if kind == "interleave" and arg.strip() == "all":
        return kind, None
    try:
        nodes = parse_list(arg, "NUMA node")
    except UserError as exc:
        raise UserError(f"NUMA policy {policy!r}: {exc.cause}",
                        f"use one of {_FORMS}") from None
    if kind == "preferred" and len(nodes) != 1:
        raise UserError(f"NUMA policy {policy!r}: preferred takes one node",
                        "give one node, e.g. preferred=0, or use interleave for several")
    return kind, nodes


def _check_machine(policy: str, kind: str, nodes: list[int] | None) -> None:
    if kind == "default":
        return
    require_on_machine(nodes or [], numa_nodes(), "node", f"NUMA policy {policy!r}")
    if kind == "bind":
        for node in nodes or []:
            cpulist = Path(f"/sys/devices/system/node/node{node}/cpulist")
            if cpulist.exists() and not cpulist.read_text().strip():
                raise UserError(
                    f"NUMA policy {policy!r}: node {node} has no CPUs, so bind cannot run "
                    "anything on it (bind=N means --cpunodebind=N --membind=N)",
                    f"use preferred={node} or interleave to put memory there",
                )
    if shutil.which("numactl") is None:
        raise UserError(f"NUMA policy {policy!r} needs numactl, which is not installed",
                        "install the numactl package, or use default")


def check_policy(policy: str, machine: bool = True) -> str | None:
    """What is wrong with ``policy`` (a message), or None when it can be applied.

    With ``machine`` False only the form is checked, not this machine's nodes
    or numactl (for a spec meant for another machine).
    """
    try:
        kind, nodes = _parse(policy)
        if machine:
            _check_machine(policy, kind, nodes)
    except UserError as exc:
        return exc.cause
    return None


def numactl_prefix(policy: str) -> list[str]:
    """The command prefix that runs a program under ``policy``: [] for "default",
    e.g. ["/usr/bin/numactl", "--interleave=all"]. The absolute path keeps the
    prefix working for a server started with another account's PATH."""
    kind, nodes = _parse(policy)
    _check_machine(policy, kind, nodes)
    return numactl_args(policy, shutil.which("numactl") or "numactl")


def policy_nodes(policy: str) -> list[int]:
    """The NUMA nodes a policy names ([] for default, localalloc and "all"); UserError
    when it is not a policy syncrep-lab knows."""
    return _parse(policy)[1] or []


def numactl_args(policy: str, numactl: str = "numactl") -> list[str]:
    """The same prefix, unchecked against this machine (for an SSH host, whose nodes and
    numactl were checked there; ``numactl`` found on its PATH)."""
    kind, nodes = _parse(policy)
    if kind == "default":
        return []
    listed = "all" if nodes is None else format_cpus(nodes)
    if kind == "localalloc":
        return [numactl, "--localalloc"]
    if kind == "interleave":
        return [numactl, f"--interleave={listed}"]
    if kind == "bind":
        return [numactl, f"--cpunodebind={listed}", f"--membind={listed}"]
    return [numactl, f"--preferred={listed}"]


# --- read-back --------------------------------------------------------------------------


def _own_memory(line: str) -> bool:
    """A heap, stack, anonymous or shared-memory mapping (not a file's pages)."""
    return (" heap" in line or " stack" in line or "file=" not in line
            or any(mark in line for mark in _SHARED_MARKS))


def numa_policy_of(pid: int) -> str:
    """The memory policy the kernel applies to ``pid``, from /proc/PID/numa_maps.

    A mapping without a policy of its own shows the process's policy, so the
    first non-default policy among the heap and shared-memory mappings is the
    process's (e.g. "interleave:0-1", "bind:0", "prefer:1", "local"); "default"
    when there is none, "unknown" when numa_maps cannot be read (a kernel
    without NUMA support, or another user's process without root).
    """
    try:
        text: str | None = Path(f"/proc/{pid}/numa_maps").read_text()
    except OSError:
        text = None
    # Asked after the read: a zombie's numa_maps reads empty, which would say "default".
    if not procs.alive(pid):
        raise ProcessGone(pid)
    if text is None:
        return "unknown"
    if not text.strip():
        # A process has no mappings only while it exits (its memory is released before
        # it is a zombie): what it was given is gone with it, and "default" would be a lie
        # (an interleaved backend leaving at the read-back was shown so once).
        raise ProcessGone(pid)
    for line in text.splitlines():
        match = _POLICY_RE.match(line)
        if match and match.group(1) != "default" and _own_memory(line):
            return match.group(1)
    return "default"


_HEADER_RE = re.compile(r"Node (\d+)|Total")


def _table(text: str) -> dict[str, dict[str, float]]:
    """numastat's per-node tables: {row: {"0": MB, ..., "total": MB}}."""
    columns: list[str] = []
    rows: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        if "Node " in line and "Total" in line and not line.lstrip().startswith("Per-node"):
            columns = [m.group(1) if m.group(1) is not None else "total"
                       for m in _HEADER_RE.finditer(line)]
            continue
        parts = line.split()
        if not columns or len(parts) != len(columns) + 1 or parts[0].startswith("-"):
            continue
        try:
            values = [float(v) for v in parts[1:]]
        except ValueError:
            continue
        rows.setdefault(parts[0], {}).update(zip(columns, values, strict=True))
    return rows


def _by_node(rows: dict[str, dict[str, float]], keep: tuple[str, ...] | None
             ) -> dict[str, dict[str, float]]:
    """Turn {row: {node: MB}} into {node: {row: MB}} (node "total" for the sums)."""
    nodes: dict[str, dict[str, float]] = {}
    for row, cells in rows.items():
        if keep is not None and row not in keep:
            continue
        for node, value in cells.items():
            nodes.setdefault(node, {})[row] = value
    return nodes


def numastat(pids: list[int]) -> dict[str, Any]:
    """Where the memory of ``pids`` and of the system sits, per NUMA node, in MB.

    Returns::

        {"available": bool, "reason": str | None,
         "processes": {pid: {"0": MB, ...}},     # each process's total per node
         "total": {"0": MB, ...},                # the same summed over the pids
         "detail": {pid: {"command": str,        # numastat -p's rows per node
                          "nodes": {"0": {"Huge", "Heap", "Stack", "Private", "Total"}},
                          "total": {"Huge", ...}}},
         "errors": {pid: str},                   # pids gone or unreadable
         "system": {"0": {"MemTotal", "MemFree", "MemUsed"}, "total": {...}}}

    Node keys are strings ("0"), as numastat names them. Without numastat,
    ``available`` is False and ``reason`` says so; nothing raises.
    """
    numastat_bin = shutil.which("numastat")
    result: dict[str, Any] = {"available": numastat_bin is not None, "reason": None,
                              "processes": {}, "total": {}, "detail": {}, "errors": {},
                              "system": {}}
    if numastat_bin is None:
        result["reason"] = "numastat is not installed (it comes with the numactl package)"
        return result
    total: dict[str, float] = {}
    for pid in pids:
        try:
            proc = subprocess.run([numastat_bin, "-p", str(int(pid))], capture_output=True,
                                  text=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            result["errors"][pid] = f"numastat -p {pid} failed: {exc}"
            continue
        head = re.search(r"for PID \d+ \((.*)\)\s*$", proc.stdout, re.MULTILINE)
        command = head.group(1) if head else ""
        rows = _table(proc.stdout)
        if command == "(null)" or "Can't read" in proc.stderr or "Total" not in rows:
            stderr = proc.stderr.strip()
            result["errors"][pid] = (f"process {pid} is gone or unreadable"
                                     + (f" ({stderr})" if stderr else ""))
            continue
        by_node = _by_node(rows, None)
        nodes = {k: v for k, v in by_node.items() if k != "total"}
        result["detail"][pid] = {"command": command, "nodes": nodes,
                                 "total": by_node.get("total", {})}
        result["processes"][pid] = {k: v["Total"] for k, v in nodes.items() if "Total" in v}
        for node, mb in result["processes"][pid].items():
            total[node] = round(total.get(node, 0.0) + mb, 2)
    result["total"] = total
    try:
        proc = subprocess.run([numastat_bin, "-m"], capture_output=True, text=True,
                              timeout=10, check=False)
        result["system"] = _by_node(_table(proc.stdout), ("MemTotal", "MemFree", "MemUsed"))
    except (OSError, subprocess.TimeoutExpired) as exc:
        result["reason"] = f"numastat -m failed: {exc}"
    return result
