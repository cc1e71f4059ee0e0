"""CPU per process role of an observed node, slice by slice, read from /proc: on this
machine when the server runs here, or on its host over SSH (``--host``).

Which processes are the server's is never guessed from a port or a name. The observer's
own backend is a child of the postmaster: here, the process with that backend's pid must
be a PostgreSQL process started when the server says the session started (else the
server is in another pid namespace or on another machine, and CPU is not read); over
SSH, the backend's pid must be among the processes working in the server's data
directory. The observer's own backend is left out of every role and its CPU is reported
apart: the cost of observing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from syncrep_lab import procs
from syncrep_lab.errors import UserError
from syncrep_lab.pg.roles import role_of_title, title
from syncrep_lab.placement.cpus import parse_cpus
from syncrep_lab.probes.remote import postmaster_of, role_costs
from syncrep_lab.probes.tracker import TICK_S, ProcessTracker, read_sample
from syncrep_lab.store import ProcCostRow

if TYPE_CHECKING:  # asyncssh is imported only when a host is reached
    from syncrep_lab.hosts.ssh import SshHost

# The backend's process must have started within this of the session's backend_start.
START_SLACK_S = 2.0

Rows = list[ProcCostRow]


class NodeCpu(Protocol):
    def cut(self) -> tuple[Rows, float | None]:
        """proc_costs rows since the previous cut (or the start), and the observer's
        own backend's CPU ms in that time."""

    def close(self) -> None: ...


def local_postmaster(backend_pid: int, backend_start: float) -> tuple[int | None, str]:
    """The postmaster of the server whose backend ``backend_pid`` started at
    ``backend_start`` (epoch seconds), if that server runs on this machine; else None
    and why not."""
    started = procs.started_at(backend_pid)
    text = title(backend_pid)
    if (started is None or abs(started - backend_start) > START_SLACK_S
            or role_of_title(text) != "backend"):
        return None, (f"the server is not on this machine (its backend {backend_pid} is "
                      "not a process here): give --host NAME --hosts FILE to read its /proc "
                      "over SSH")
    parent = procs.parent(backend_pid)
    if parent is None:
        return None, f"the parent of backend {backend_pid} could not be read from /proc"
    return parent, ""


class LocalCpu:
    """The node's processes on this machine: a process tracker per slice (it also counts
    the backends born and gone within the slice, through the postmaster)."""

    def __init__(self, node: str, postmaster: int, own_pid: int,
                 walsenders: Callable[[], dict[int, str]]) -> None:
        self.node, self.postmaster, self.own_pid = node, postmaster, own_pid
        self.walsenders = walsenders
        self.cpus = len(os.sched_getaffinity(postmaster))
        self.tracker = self._begin()
        self.own = read_sample(own_pid)

    def _begin(self) -> ProcessTracker:
        tracker = ProcessTracker({self.node: self.postmaster}, self.walsenders(), hz=1.0,
                                 numa=False)
        tracker.ignore({self.own_pid})
        tracker.begin()
        return tracker

    def cut(self) -> tuple[Rows, float | None]:
        result = self.tracker.finish(reap_timeout=0.0)
        self.tracker = self._begin()
        own = read_sample(self.own_pid)
        own_ms = None
        if own is not None and self.own is not None:
            own_ms = (own.utime + own.stime - self.own.utime - self.own.stime) * TICK_S * 1e3
        self.own = own
        return result.cost_rows(), own_ms

    def close(self) -> None:
        self.tracker.stopping.set()


class RemoteCpu:
    """The node's processes on an SSH host: one /proc snapshot per cut."""

    def __init__(self, node: str, host: SshHost, data_dir: str, own_pid: int,
                 walsenders: Callable[[], dict[int, str]]) -> None:
        self.node, self.host, self.data_dir, self.own_pid = node, host, data_dir, own_pid
        self.walsenders = walsenders
        self.last = self.snapshot()
        mine = [p for p in self.last if int(p["pid"]) == own_pid]
        if not mine:
            raise UserError(
                f"host {host.spec.name} runs no process {own_pid} in {data_dir}, the "
                "observer's backend: the server given is not the one on that host",
                "give the --host where the primary runs (its data directory is read from "
                "the server itself)")
        postmaster = postmaster_of(self.last)
        self.cpus = _count_cpus(str(postmaster["cpus_allowed_list"])) if postmaster else None

    def snapshot(self) -> list[dict[str, Any]]:
        from syncrep_lab.hosts.snapshots import proc_snapshot

        return proc_snapshot(self.host, self.data_dir)

    def cut(self) -> tuple[Rows, float | None]:
        now = self.snapshot()
        rows = role_costs(self.node, self.last, now, walsenders=self.walsenders(),
                          ignore={self.own_pid})
        own_ms = None
        before = next((p for p in self.last if int(p["pid"]) == self.own_pid), None)
        after = next((p for p in now if int(p["pid"]) == self.own_pid), None)
        if before is not None and after is not None:
            tick_ms = 1000.0 / int(after.get("clk_tck") or 100)
            own_ms = (int(after["utime"]) + int(after["stime"]) - int(before["utime"])
                      - int(before["stime"])) * tick_ms
        self.last = now
        return rows, own_ms

    def close(self) -> None:
        self.host.close()


def _count_cpus(cpu_list: str) -> int | None:
    """CPUs in a kernel list such as ``0-3,8`` (None when it does not parse)."""
    try:
        return len(parse_cpus(cpu_list))
    except UserError:
        return None
