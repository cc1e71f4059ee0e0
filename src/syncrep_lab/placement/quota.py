"""CPU quotas per role: the CFS bandwidth controller, as a placement.

``quota = { "walsender:b" = 0.05 }`` gives the processes of one role (and those born
later: ``RolePinner`` moves them as they appear) 5 % of one CPU between them: a cgroup
of the cgroup v1 ``cpu`` controller with ``cpu.cfs_quota_us`` = share x
``cpu.cfs_period_us``. When the group has used its quota within a period, its
processes wait, off every CPU, until the next period begins; ``cpu.stat`` counts the
periods that ended so (``nr_throttled``) and the time waited (``throttled_time``).

The period: the shortest the kernel allows at the share, since the quota can be no less
than 1 ms: a 5 % share runs 1 ms in every 20 ms, a 50 % share 1 ms in every 2 ms, two
CPUs 2 ms in every 1 ms (the kernel's shortest period). The shorter the period, the
shorter a throttled process's stalls, and the closer the quota comes to taking away
capacity alone. Still, a small share binds in two ways at once, which
``docs/decisions.md`` ("CPU quotas per role") weighs with measurements: the role's
capacity (share x 1 s of CPU a second) and the latency of its bursts (a throttled
walsender answers nothing until its next period).

Layout: ``<cpu hierarchy>/syncrep-lab/<run key>/<name>``, the cpusets' layout and lock
(``cgroups.remove_run`` and ``cgroups.leftover_runs`` serve any v1 hierarchy), so that
``clean`` finds what a killed run left here as it does its cpusets.

Only cgroup v1's ``cpu`` controller is used. On a cgroup2-only machine a process sits
in one cgroup for every controller, so a walsender moved into a quota group would leave
its node's cpuset: the group would have to be made inside the node's cpuset group, with
``cpu`` enabled in each parent's ``cgroup.subtree_control``. That is not built; such a
machine is told so before anything is made.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
from dataclasses import dataclass
from pathlib import Path

from syncrep_lab.errors import UserError
from syncrep_lab.placement.cgroups import (
    TOP,
    CpusetSupport,
    _check_key,
    _locked,
    _read,
    _write,
    _WriteFailed,
    cgroup_mounts,
    leftover_runs,
    remove_run,
)
from syncrep_lab.placement.numa import ProcessGone

MIN_QUOTA_US = 1_000  # the kernel's smallest cfs_quota_us
MIN_PERIOD_US = 1_000  # the kernel's shortest cfs_period_us
MAX_PERIOD_US = 1_000_000  # the kernel's longest
SMALLEST_SHARE = MIN_QUOTA_US / MAX_PERIOD_US  # 0.001 of a CPU


def period_for(share: float) -> int:
    """The period (µs) a quota of ``share`` CPUs runs in: the shortest in which the
    quota is at least the kernel's 1 ms."""
    if not (isinstance(share, (int, float)) and SMALLEST_SHARE <= share < math.inf):
        raise UserError(f"a CPU quota of {share!r}",
                        f"give a share of CPUs of at least {SMALLEST_SHARE} (0.05 is 5 % "
                        "of one CPU, 2 is two CPUs)")
    return max(MIN_PERIOD_US, min(MAX_PERIOD_US, math.ceil(MIN_QUOTA_US / share)))


def quota_for(share: float) -> int:
    """cfs_quota_us for ``share`` CPUs in :func:`period_for`'s period."""
    return max(MIN_QUOTA_US, round(share * period_for(share)))


@dataclass(frozen=True)
class QuotaSupport:
    """Where quota groups can be made: the v1 ``cpu`` hierarchy's mount, or why not
    (``reason`` says why and what to do)."""

    root: Path | None
    reason: str | None

    @property
    def usable(self) -> bool:
        return self.reason is None and self.root is not None

    def require(self) -> Path:
        if self.root is not None and self.reason is None:
            return self.root
        why = self.reason or "no cgroup v1 cpu hierarchy"
        cause, _, fix = why.partition("; ")
        raise UserError(f"CPU quotas cannot be set here: {cause}",
                        fix or "leave quota out of the spec's placements")

    def as_tree(self) -> CpusetSupport:
        """The same hierarchy for cgroups.remove_run / leftover_runs, which act on the
        tree alone (its layout, its lock), whatever the controller."""
        return CpusetSupport(1, self.root, self.reason)


def quota_support() -> QuotaSupport:
    """The v1 hierarchy that carries the ``cpu`` controller, from /proc/self/mountinfo."""
    mounts = [m for m in cgroup_mounts() if m.fstype == "cgroup" and "cpu" in m.super_options]
    if not mounts:
        v2 = any(m.fstype == "cgroup2" for m in cgroup_mounts())
        why = ("this machine has only cgroup2, and a quota group there would take the "
               "process out of its node's cpuset (docs/decisions.md, \"CPU quotas per "
               "role\")" if v2 else "no cgroup v1 hierarchy has the cpu controller")
        return QuotaSupport(None, f"{why}; leave quota out of the spec's placements, or run "
                            "where cgroup v1's cpu controller is mounted "
                            "(mount -t cgroup -o cpu cpu /sys/fs/cgroup/cpu)")
    mount = mounts[0]
    root = mount.mount_point
    if mount.read_only or not os.access(root, os.W_OK):
        return QuotaSupport(root, f"{root} cannot be written by this process (uid "
                            f"{os.geteuid()}); run syncrep-lab as root, or leave quota out")
    if not (root / "cpu.cfs_quota_us").exists():
        return QuotaSupport(root, f"this kernel has no CFS bandwidth control ({root} has no "
                            "cpu.cfs_quota_us); use a kernel with CONFIG_CFS_BANDWIDTH, or "
                            "leave quota out")
    return QuotaSupport(root, None)


@dataclass(frozen=True)
class QuotaFigures:
    """A quota group's settings and cpu.stat counters at one moment."""

    quota_us: int  # -1: none
    period_us: int
    periods: int  # nr_periods: periods in which the group's processes ran
    throttled: int  # nr_throttled: of those, the periods that used the quota up
    # throttled_time: the time the group's run queues spent throttled, summed over the
    # CPUs (for one process, the time it waited for its next period)
    throttled_ns: int

    def since(self, before: QuotaFigures) -> QuotaFigures:
        """The counters' growth since ``before`` (the settings are these)."""
        return QuotaFigures(self.quota_us, self.period_us, self.periods - before.periods,
                            self.throttled - before.throttled,
                            self.throttled_ns - before.throttled_ns)


class QuotaGroup:
    """One quota group at ``<cpu root>/syncrep-lab/<run_key>/<name>``."""

    def __init__(self, support: QuotaSupport, run_key: str, name: str) -> None:
        root = support.require()
        _check_key(run_key, "run key")
        _check_key(name, "quota group name")
        self.root, self.run_key, self.name = root, run_key, name
        self.path: Path = root / TOP / run_key / name

    def __repr__(self) -> str:
        return f"QuotaGroup({self.path})"

    @classmethod
    def open(cls, support: QuotaSupport, run_key: str, name: str) -> QuotaGroup:
        group = cls(support, run_key, name)
        if not group.path.is_dir():
            raise UserError(f"no quota group {group.path}", "create it first")
        return group

    @classmethod
    def create(cls, support: QuotaSupport, run_key: str, name: str,
               share: float) -> QuotaGroup:
        """Make the group with ``share`` CPUs a period; a refusal leaves nothing made."""
        group = cls(support, run_key, name)
        period, quota = period_for(share), quota_for(share)
        made: list[Path] = []
        with _locked(group.root):
            try:
                for path in reversed([group.path, *group.path.parents[:2]]):
                    if not path.is_dir():
                        path.mkdir()
                        made.append(path)
                # the period first: a quota is checked against the period in force
                _write(group.path / "cpu.cfs_period_us", str(period))
                _write(group.path / "cpu.cfs_quota_us", str(quota))
            except (_WriteFailed, OSError) as exc:
                for path in reversed(made):
                    with contextlib.suppress(OSError):
                        path.rmdir()
                what = exc.describe() if isinstance(exc, _WriteFailed) else str(exc)
                raise UserError(f"the kernel refused quota group {group.path}: {what}; "
                                "nothing of it was left behind",
                                "run as root on a writable cgroup v1 cpu mount") from None
        return group

    def add_pid(self, pid: int) -> None:
        """Move process ``pid`` (all its threads) into this group."""
        try:
            _write(self.path / "cgroup.procs", str(int(pid)))
        except _WriteFailed as exc:
            if exc.err.errno == errno.ESRCH:
                raise ProcessGone(pid) from None
            raise UserError(f"moving process {pid} into {self.path}: {exc.describe()}",
                            "run syncrep-lab as root; a process that is exiting cannot be "
                            "moved") from None

    def pids(self) -> list[int]:
        return sorted({int(x) for x in _read(self.path / "cgroup.procs").split()
                       if x.isdigit()})

    def figures(self) -> QuotaFigures | None:
        """The quota in force and cpu.stat's counters; None once the group is gone."""
        quota, period = _read(self.path / "cpu.cfs_quota_us"), _read(
            self.path / "cpu.cfs_period_us")
        stat: dict[str, int] = {}
        for line in _read(self.path / "cpu.stat").splitlines():
            key, _, value = line.partition(" ")
            if value.strip().lstrip("-").isdigit():
                stat[key] = int(value)
        if not quota or not period or "nr_periods" not in stat:
            return None
        return QuotaFigures(int(quota), int(period), stat["nr_periods"],
                            stat.get("nr_throttled", 0), stat.get("throttled_time", 0))


def remove_quotas(run_key: str, support: QuotaSupport | None = None) -> None:
    """Remove every quota group of one run, its processes moved back to the root group
    (no quota). Idempotent."""
    support = support or quota_support()
    if support.root is not None:
        remove_run(support.as_tree(), run_key)


def leftover_quota_runs(support: QuotaSupport | None = None) -> list[str]:
    """Run keys with quota groups still under ``<cpu root>/syncrep-lab``."""
    support = support or quota_support()
    return leftover_runs(support.as_tree()) if support.root is not None else []
