"""Pinning the processes of one PostgreSQL role to CPUs, including those that start later.

A cpuset places a whole node; pinning places single roles inside it: the
walsender serving standby b on CPU 1, every backend on CPU 0. Backends come and
go with connections and walsenders restart with their standby, so a one-off
``taskset`` is not enough: ``RolePinner`` watches the postmaster's children and
pins each new one as soon as its title tells its role.

A freshly forked child still carries the postmaster's title until it has read
its startup packet; it is left alone until then. A walsender's standby is known
only once it appears in ``pg_stat_replication``, so while a rule names one
standby's walsender ("walsender:b"), unnamed walsenders are retried on later
polls (for ``WALSENDER_GRACE`` seconds, then treated as plain "walsender").

``sched_setaffinity`` cannot leave a process's cpuset: CPUs wholly outside it
fail with EINVAL, CPUs partly outside it are silently dropped. Either way the
result is read back from /proc, and when ``move_to`` offers a group for the
rule the process is moved there first (a move resets its affinity to the
group's CPUs, so pinning comes after it).
"""

from __future__ import annotations

import errno
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from syncrep_lab import procs
from syncrep_lab.errors import UserError
from syncrep_lab.pg.roles import ROLES, role_of_title, title
from syncrep_lab.placement.cgroups import CpusetGroup, placement_of
from syncrep_lab.placement.cpus import format_cpus, machine_cpus, parse_list, require_on_machine
from syncrep_lab.placement.numa import ProcessGone

__all__ = ["GroupRule", "PinRule", "RolePinner", "placement_of"]

WALSENDER_GRACE = 5.0  # seconds an unnamed walsender waits for its standby's name
_MAX_ERRORS = 200


@dataclass(frozen=True)
class PinRule:
    """Pin processes of ``role`` to ``cpus``.

    ``role`` is a role as ``syncrep_lab.pg.roles`` names it ("walwriter",
    "backend", "walsender", ...) or "walsender:NAME" for the walsender serving
    the standby whose application_name is NAME.
    """

    role: str
    cpus: list[int]

    @property
    def base(self) -> str:
        return self.role.split(":", 1)[0]

    def matches(self, label: str) -> bool:
        return _matches(self.role, label)


@dataclass(frozen=True)
class GroupRule:
    """Move processes of ``role`` (as a PinRule names it) into a cgroup: ``add(pid)``
    (a CPU quota's group, placement/quota.py)."""

    role: str
    add: Callable[[int], None]

    def matches(self, label: str) -> bool:
        return _matches(self.role, label)


def _matches(role: str, label: str) -> bool:
    return role == label or (":" not in role and role == label.split(":")[0])


def _check_role(role: str, what: str) -> None:
    base, sep, standby = role.partition(":")
    if base not in ROLES or base == "other" or (sep and (base != "walsender" or not standby)):
        roles = ", ".join(r for r in ROLES if r != "other")
        raise UserError(f"cannot {what} {role!r}: not a process role",
                        f"use one of {roles}, or walsender:NAME for one standby's walsender")


def check_rule(rule: PinRule) -> None:
    """UserError when ``rule`` names no role or CPUs this machine lacks."""
    _check_role(rule.role, "pin")
    if not rule.cpus:
        raise UserError(f"pin {rule.role}: no CPUs given", "give at least one CPU")
    require_on_machine(rule.cpus, machine_cpus(), "CPU", f"pin {rule.role}")


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks: with the pid, a process's identity."""
    start = procs.start_time(pid)
    return int(start) if start is not None else None


def _allowed(pid: int) -> set[int] | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                return set(parse_list(line.split(":", 1)[1]))
    except (OSError, UserError):
        return None
    return None


@dataclass
class _Seen:
    start: int
    first: float
    done: bool = False


class RolePinner:
    """A daemon thread that pins the postmaster's children by role, as they appear, and
    moves those that ``groups`` name into their cgroups (a move is one write of the pid:
    a CPU quota group of the cpu hierarchy leaves the process's cpuset and affinity
    alone).

    ``walsender_of(pid)`` returns the standby a walsender serves (its
    application_name in pg_stat_replication) or None when not known yet; it is
    called from the pinner's thread. ``move_to(rule)`` may return a cpuset
    group to move a process into when the rule's CPUs lie outside its cgroup.
    """

    def __init__(self, postmaster_pid: int, rules: list[PinRule],
                 walsender_of: Callable[[int], str | None], interval: float = 0.05,
                 move_to: Callable[[PinRule], CpusetGroup | None] | None = None,
                 groups: list[GroupRule] | None = None) -> None:
        for rule in rules:
            check_rule(rule)
        for group in groups or []:
            _check_role(group.role, "hold")
        if not (isinstance(interval, (int, float)) and 0 < interval < math.inf):
            raise UserError(f"pinning interval {interval!r}", "give a positive number of seconds")
        start = _start_time(postmaster_pid)
        if start is None:
            raise UserError(f"postmaster {postmaster_pid} is not running",
                            "start the node first")
        self.postmaster_pid = postmaster_pid
        self.rules = list(rules)
        self.interval = float(interval)
        self._walsender_of = walsender_of
        self._move_to = move_to
        self._pm_start = start
        self._pm_title = title(postmaster_pid)
        self._pm_done = False
        self.groups = list(groups or [])
        self._named_walsenders = any(role.startswith("walsender:") for role in
                                     [*(r.role for r in rules), *(g.role for g in self.groups)])
        self._seen: dict[int, _Seen] = {}
        self._applied: dict[int, tuple[str, list[int]]] = {}
        self._errors: list[str] = []
        self._lock = threading.Lock()  # guards the results
        self._pass = threading.Lock()  # one pass at a time (the thread, or a caller's poll)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- results (copies: the thread keeps changing the originals)

    @property
    def applied(self) -> dict[int, tuple[str, list[int]]]:
        """Live processes pinned so far: pid -> (role label, CPUs read back after pinning)."""
        with self._lock:
            return dict(self._applied)

    @property
    def errors(self) -> list[str]:
        with self._lock:
            return list(self._errors)

    def _error(self, message: str) -> None:
        with self._lock:
            if message not in self._errors and len(self._errors) < _MAX_ERRORS:
                self._errors.append(message)

    # -- thread

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"pin-{self.postmaster_pid}")
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> RolePinner:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _run(self) -> None:
        while True:
            try:
                self.poll()
            except Exception as exc:  # a bug must not end pinning silently
                self._error(f"pinning pass failed: {exc!r}")
            if self._stop.wait(self.interval):
                return

    # -- one pass

    def poll(self) -> None:
        """One pass over the postmaster's children (the thread calls this every interval;
        callers may call it to pin at once, e.g. right after a node restart)."""
        with self._pass:
            self._poll()

    def _poll(self) -> None:
        pm = self.postmaster_pid
        if _start_time(pm) != self._pm_start:
            self._error(f"postmaster {pm} has exited; nothing more is pinned")
            return
        now = time.monotonic()
        if not self._pm_done:
            rule = next((r for r in self.rules if r.matches("postmaster")), None)
            if rule is not None:
                self._apply(pm, "postmaster", rule)
            self._pm_done = True
        live = procs.children(pm)
        for pid in live:
            seen = self._seen.get(pid)
            if seen is not None and seen.done:
                continue  # a pid cannot be reused while it stays our child
            if seen is None:
                start = _start_time(pid)
                if start is None:
                    continue
                seen = self._seen[pid] = _Seen(start, now)
            label = self._label(pid, seen, now)
            if label is None:
                continue
            rule = next((r for r in self.rules if r.matches(label)), None)
            if rule is not None:
                self._apply(pid, label, rule)
            group = next((g for g in self.groups if g.matches(label)), None)
            if group is not None:
                self._join(pid, label, group)
            seen.done = True
        gone = set(self._seen) - set(live)
        for pid in gone:
            del self._seen[pid]
        if gone:
            with self._lock:
                for pid in gone:
                    self._applied.pop(pid, None)

    def _label(self, pid: int, seen: _Seen, now: float) -> str | None:
        """The role label of ``pid``, or None while it cannot be told yet."""
        text = title(pid)
        if not text or text == self._pm_title:
            return None  # gone, or forked but not yet retitled
        role = role_of_title(text)
        if role != "walsender":
            return role
        try:
            standby = self._walsender_of(pid)
        except Exception as exc:  # a failed query: try again next pass
            self._error(f"walsender {pid}: could not tell its standby: {exc}")
            standby = None
        if standby:
            return f"walsender:{standby}"
        if self._named_walsenders and now - seen.first < WALSENDER_GRACE:
            return None
        return "walsender"

    def _join(self, pid: int, label: str, group: GroupRule) -> None:
        try:
            group.add(pid)
        except ProcessGone:
            return
        except UserError as exc:
            self._error(f"pid {pid} ({label}): {exc.cause}")

    def _move(self, pid: int, label: str, rule: PinRule) -> bool:
        if self._move_to is None:
            return False
        try:
            group = self._move_to(rule)
            if group is None:
                return False
            group.add_pid(pid)
        except UserError as exc:
            self._error(f"pid {pid} ({label}): could not move it to a cpuset for CPUs "
                        f"{format_cpus(rule.cpus)}: {exc.cause}")
            return False
        return True

    def _set(self, pid: int, cpus: set[int]) -> OSError | None:
        """Set the affinity of every thread of ``pid``; the error of the main thread."""
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError as exc:
            return exc
        for tid in sorted(tids, key=lambda t: t != pid):
            try:
                os.sched_setaffinity(tid, cpus)
            except OSError as exc:
                if tid == pid or exc.errno != errno.ESRCH:
                    return exc
        return None

    def _apply(self, pid: int, label: str, rule: PinRule) -> None:
        want = set(rule.cpus)
        moved = False
        while True:
            err = self._set(pid, want)
            if err is not None:
                if isinstance(err, (ProcessLookupError, FileNotFoundError)):
                    return  # exited meanwhile
                if err.errno == errno.EINVAL and not moved and self._move(pid, label, rule):
                    moved = True
                    continue
                allowed = _allowed(pid)
                hint = (f" (its cpuset allows CPUs {format_cpus(allowed)})"
                        if err.errno == errno.EINVAL and allowed is not None else "")
                self._error(f"pid {pid} ({label}): could not pin to CPUs "
                            f"{format_cpus(want)}: {err.strerror}{hint}")
                return
            got = _allowed(pid)
            if got is None:
                return
            if got != want and not moved and self._move(pid, label, rule):
                moved = True
                continue
            if got != want:
                self._error(f"pid {pid} ({label}): asked for CPUs {format_cpus(want)}, the "
                            f"kernel applied {format_cpus(got)} (its cpuset is narrower)")
            with self._lock:
                self._applied[pid] = (label, sorted(got))
            return
