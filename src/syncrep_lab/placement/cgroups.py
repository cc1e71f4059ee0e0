"""cpuset cgroups (v1 and v2): CPU and memory node sets that every descendant inherits.

A postmaster started inside a cpuset keeps all the processes it forks later
(backends, walsenders, the walwriter) on the cpuset's CPUs, with no race: the
kernel puts each child in its parent's cgroup at fork. That is why servers are
started *inside* a group (a ``JoinFn`` as ``preexec_fn``: ``CpusetGroup.join_fn``,
or ``Launch.join`` for a group a manifest names) rather than moved there afterwards.

Layout: ``<hierarchy root>/syncrep-lab/<run key>/<name>``. One directory per run
lets ``remove_run`` clean up everything of one run, and ``leftover_runs`` find
what a crashed run left behind. All changes to the tree are made under an
``flock`` on the hierarchy root, so two syncrep-lab processes never interleave
their checks and writes.

The two cgroup versions differ in ways that matter here:

- v1: a new cpuset starts with *empty* ``cpuset.cpus`` and ``cpuset.mems``, and
  no process can join it until both are set; so every intermediate directory
  gets a copy of its parent's sets. ``cpuset.cpu_exclusive`` is allowed only if
  the parent is exclusive too, and an exclusive cpuset may share no CPU with any
  sibling. Exclusivity in v1 is only a promise between cpusets: processes left in
  the root cpuset still run on those CPUs.
- v2: an empty ``cpuset.cpus`` means "the parent's", the controller must be
  enabled in each parent's ``cgroup.subtree_control``, and exclusivity is a
  *partition* (``cpuset.cpus.partition = root``): the CPUs are taken away from
  every other cgroup. Making one several levels down (a "remote" partition)
  needs ``cpuset.cpus.exclusive`` on every level in between, which exists from
  Linux 6.7 on; older kernels are refused with that reason.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from syncrep_lab.errors import UserError
from syncrep_lab.placement.cpus import format_cpus, numa_nodes, parse_list
from syncrep_lab.placement.numa import ProcessGone, numa_policy_of

TOP = "syncrep-lab"
MOUNTINFO = Path("/proc/self/mountinfo")
_KEY_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_OCTAL_RE = re.compile(r"\\([0-7]{3})")
# The first kernel with cpuset.cpus.exclusive (remote partitions).
_REMOTE_PARTITION_KERNEL = (6, 7)


# --- mounts and detection ---------------------------------------------------------------


@dataclass(frozen=True)
class CgroupMount:
    """One cgroup filesystem mount, as /proc/self/mountinfo lists it."""

    mount_point: Path
    fstype: str  # "cgroup" (v1) or "cgroup2"
    options: tuple[str, ...]  # per-mount options: "rw"/"ro", ...
    super_options: tuple[str, ...]  # v1: the controllers bound to the hierarchy

    @property
    def read_only(self) -> bool:
        return "ro" in self.options or "ro" in self.super_options


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo octal.
    return _OCTAL_RE.sub(lambda m: chr(int(m.group(1), 8)), field)


def cgroup_mounts(mountinfo: Path = MOUNTINFO) -> list[CgroupMount]:
    """Every cgroup (v1) and cgroup2 mount seen by this process, in mount order."""
    try:
        text = mountinfo.read_text()
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 6 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        found.append(CgroupMount(Path(_unescape(fields[4])), tail[0],
                                 tuple(fields[5].split(",")), tuple(tail[2].split(","))))
    return found


@dataclass(frozen=True)
class CpusetSupport:
    """Whether cpusets can be made here, in which hierarchy, and if not, why.

    ``reason`` (None when usable) says why not *and* what to do; ``fix`` repeats
    just the what-to-do part, for error messages that print cause and fix apart.
    """

    version: int | None  # 1, 2, or None
    root: Path | None  # the cpuset hierarchy's mount (v1) or the cgroup2 mount
    reason: str | None
    fix: str | None = None

    @property
    def usable(self) -> bool:
        return self.reason is None and self.root is not None and self.version in (1, 2)

    def require(self) -> Path:
        """The hierarchy root; UserError with the reason when cpusets cannot be made."""
        if self.usable and self.root is not None:
            return self.root
        why = self.reason or "no cpuset hierarchy"
        if self.fix:
            why = why.removesuffix(f"; {self.fix}")
        raise UserError(f"cpusets cannot be made here: {why}",
                        self.fix or "run without cpuset placements")


def _unusable(version: int | None, root: Path | None, why: str, fix: str) -> CpusetSupport:
    return CpusetSupport(version, root, f"{why}; {fix}", fix)


def _proc_cgroups() -> dict[str, tuple[int, bool]]:
    """/proc/cgroups: controller -> (v1 hierarchy id, 0 when on v2 or unbound; enabled)."""
    found: dict[str, tuple[int, bool]] = {}
    try:
        lines = Path("/proc/cgroups").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        parts = line.split()
        if len(parts) >= 4 and not line.startswith("#") and parts[1].isdigit():
            found[parts[0]] = (int(parts[1]), parts[3] == "1")
    return found


def _mount_of(path: Path, fstype: str) -> CgroupMount | None:
    resolved = path.resolve()
    for mount in cgroup_mounts():
        if mount.fstype == fstype and mount.mount_point == resolved:
            return mount
    return None


def _writable(version: int, root: Path, mount: CgroupMount | None) -> CpusetSupport | None:
    """An unusable CpusetSupport when ``root`` cannot be written, else None."""
    if mount is not None and mount.read_only:
        return _unusable(version, root, f"{root} is mounted read-only (as inside most "
                         "containers)", "run syncrep-lab on the host, or in a privileged "
                         "container with a writable cgroup mount, or without cpuset placements")
    if not os.access(root, os.W_OK):
        return _unusable(version, root, f"making cpusets in {root} needs root "
                         f"(this process runs as uid {os.geteuid()})",
                         "run syncrep-lab as root (sudo), or without cpuset placements")
    return None


def probe_v1(root: Path) -> CpusetSupport:
    """Whether cpusets can be made in the v1 cpuset hierarchy mounted at ``root``."""
    mount = _mount_of(root, "cgroup")
    if mount is None or "cpuset" not in mount.super_options:
        return _unusable(1, root, f"{root} is not a cgroup v1 hierarchy with the cpuset "
                         "controller", "give the mount point of the cpuset hierarchy")
    if not (root / "cpuset.cpus").exists():
        return _unusable(1, root, f"{root} has no cpuset.cpus (mounted with noprefix?)",
                         "remount the cpuset hierarchy without the noprefix option")
    return _writable(1, root, mount) or CpusetSupport(1, root, None)


def probe_v2(root: Path) -> CpusetSupport:
    """Whether cpusets can be made in the cgroup2 hierarchy mounted at ``root``.

    The cpuset controller is absent from a cgroup2 hierarchy when it is bound to
    a v1 hierarchy (hybrid set-ups), disabled on the kernel command line, not
    built in, or not delegated to the cgroup mounted here (a container).
    """
    mount = _mount_of(root, "cgroup2")
    if mount is None:
        return _unusable(2, root, f"{root} is not a cgroup2 mount",
                         "give the mount point of the cgroup2 hierarchy")
    try:
        controllers = (root / "cgroup.controllers").read_text().split()
    except OSError as exc:
        return _unusable(2, root, f"cannot read {root}/cgroup.controllers: {exc.strerror}",
                         "check the cgroup2 mount")
    if "cpuset" not in controllers:
        known = _proc_cgroups()
        hierarchy, enabled = known.get("cpuset", (0, False))
        v1_mounts = [m.mount_point for m in cgroup_mounts()
                     if m.fstype == "cgroup" and "cpuset" in m.super_options]
        if "cpuset" not in known:
            why, fix = "this kernel has no cpuset controller", "use a kernel with CONFIG_CPUSETS"
        elif not enabled:
            why, fix = ("the cpuset controller is disabled (cgroup_disable=cpuset on the kernel "
                        "command line)", "remove cgroup_disable=cpuset and reboot")
        elif hierarchy != 0:
            where = f", mounted at {v1_mounts[0]}" if v1_mounts else ""
            why = (f"cpuset controller not available in this cgroup2 hierarchy (bound to v1): "
                   f"/proc/cgroups puts cpuset on v1 hierarchy {hierarchy}{where}")
            fix = ("use that v1 hierarchy (syncrep-lab picks it when it is mounted), or boot "
                   "with cgroup_no_v1=cpuset (or systemd.unified_cgroup_hierarchy=1) so that "
                   "cgroup2 gets it")
        else:
            why = (f"cpuset controller not available in this cgroup2 hierarchy: {root} was "
                   f"not given it (its cgroup.controllers: {' '.join(controllers) or 'none'})")
            fix = ("enable it from the parent cgroup (echo +cpuset > PARENT/cgroup.subtree_"
                   "control), or run where the cgroup tree is delegated with cpuset")
        return _unusable(2, root, why, fix)
    return _writable(2, root, mount) or CpusetSupport(2, root, None)


def cpuset_support(version: int | None = None) -> CpusetSupport:
    """Where cpusets can be made on this machine, from /proc/self/mountinfo.

    A mounted v1 cpuset hierarchy wins (the controller cannot then be in cgroup2
    anyway); otherwise the cgroup2 mount that offers cpuset, preferring
    /sys/fs/cgroup. ``version`` restricts the search to one cgroup version.
    """
    if version not in (None, 1, 2):
        raise UserError(f"cgroup version {version!r}", "use 1, 2 or leave it out")
    mounts = cgroup_mounts()
    v1 = [m for m in mounts if m.fstype == "cgroup" and "cpuset" in m.super_options]
    v2 = [m for m in mounts if m.fstype == "cgroup2"]
    if version in (None, 1) and v1:
        return probe_v1(v1[0].mount_point)
    if version in (None, 2) and v2:
        probes = [probe_v2(m.mount_point) for m in v2]
        usable = [p for p in probes if p.usable]
        preferred = [p for p in usable or probes if p.root == Path("/sys/fs/cgroup")]
        return (preferred or usable or probes)[0]
    if version == 1:
        return _unusable(1, None, "no cgroup v1 hierarchy has the cpuset controller",
                         "mount one (mount -t cgroup -o cpuset cpuset /sys/fs/cgroup/cpuset) "
                         "or use cgroup v2")
    return _unusable(version, None, "no cgroup filesystem is mounted",
                     "mount cgroup2 (mount -t cgroup2 none /sys/fs/cgroup) and run as root")


# --- small file helpers -----------------------------------------------------------------


class _WriteFailed(Exception):
    def __init__(self, path: Path, value: str, err: OSError) -> None:
        super().__init__(f"{path}: {err}")
        self.path, self.value, self.err = path, value, err

    def describe(self) -> str:
        return (f"writing {self.value!r} to {self.path} failed: "
                f"{self.err.strerror or self.err}")


def _write(path: Path, value: str) -> None:
    """One write(2) of ``value``: cgroup files act on each write, not on the file's text."""
    try:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)
    except OSError as exc:
        raise _WriteFailed(path, value, exc) from exc


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _read_list(path: Path) -> list[int]:
    text = _read(path)
    if not text:
        return []
    try:
        return parse_list(text)
    except UserError:
        return []


def _subdirs(path: Path) -> list[Path]:
    try:
        return sorted(p for p in path.iterdir() if p.is_dir())
    except OSError:
        return []


def _check_key(value: str, what: str) -> None:
    if not isinstance(value, str) or not _KEY_RE.fullmatch(value):
        raise UserError(f"{what} {value!r} cannot name a cgroup directory",
                        "use 1 to 64 letters, digits, '_', '.', '-' (not starting with . or -)")


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """Serialise tree changes between syncrep-lab processes (flock on the root dir)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


@dataclass(frozen=True)
class _Files:
    """The control file names of one cgroup version."""

    cpus: str
    mems: str
    effective_cpus: str
    effective_mems: str


_V1 = _Files("cpuset.cpus", "cpuset.mems", "cpuset.effective_cpus", "cpuset.effective_mems")
_V2 = _Files("cpuset.cpus", "cpuset.mems", "cpuset.cpus.effective", "cpuset.mems.effective")


def _files(version: int | None) -> _Files:
    return _V1 if version == 1 else _V2


def _kernel_version() -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


# --- groups -----------------------------------------------------------------------------


class JoinFn:
    """``preexec_fn`` that puts the child in a cpuset before it execs.

    The control file is opened *now*, in the parent: subprocess runs preexec_fn
    after it has switched to ``user=``/``group=``, and an unprivileged child may
    not open ``cgroup.procs`` itself. The kernel checks a migration against the
    credentials the file was opened with (v1 always; v2 from Linux 5.16), so the
    root-opened descriptor works after the switch. The call itself only formats
    a number and makes one write(2), which is as close to async-signal-safe as a
    Python preexec_fn gets. The descriptor is close-on-exec, so the server never
    sees it; close this object (or use it as a context manager) once the child
    has started.
    """

    def __init__(self, procs: Path) -> None:
        self.procs = procs
        self._path = os.fsencode(procs)
        self._fd = -1
        try:
            self._fd = os.open(procs, os.O_WRONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise UserError(f"cannot open {procs} to start a process in that cpuset: "
                            f"{exc.strerror}",
                            "create the group first, as root") from None

    def __call__(self) -> None:
        fd = self._fd
        if fd < 0:  # closed already: open it ourselves (works while still root)
            fd = os.open(self._path, os.O_WRONLY)
        try:
            os.write(fd, b"%d" % os.getpid())
        finally:
            if fd != self._fd:
                os.close(fd)

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> JoinFn:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


class CpusetGroup:
    """One cpuset cgroup at ``<root>/syncrep-lab/<run_key>/<name>``."""

    def __init__(self, support: CpusetSupport, run_key: str, name: str) -> None:
        root = support.require()
        _check_key(run_key, "run key")
        _check_key(name, "cpuset name")
        self.support = support
        self.run_key = run_key
        self.name = name
        self.path: Path = root / TOP / run_key / name

    def __repr__(self) -> str:
        return f"CpusetGroup({self.path})"

    @classmethod
    def open(cls, support: CpusetSupport, run_key: str, name: str) -> CpusetGroup:
        """An existing group (e.g. one made by an earlier call); UserError if there is none."""
        group = cls(support, run_key, name)
        if not group.path.is_dir():
            raise UserError(f"no cpuset {group.path}", "create it first")
        return group

    @classmethod
    def create(cls, support: CpusetSupport, run_key: str, name: str, cpus: list[int],
               mems: list[int] | None = None, exclusive: bool = False) -> CpusetGroup:
        """Make (or re-set) the group with these CPUs and memory nodes.

        Everything that can be refused is checked before the first directory is
        made; a kernel refusal half-way undoes what this call made. ``mems``
        None means the parent's nodes. A group that exists already gets the new
        sets written (growing or shrinking it under running processes).
        """
        group = cls(support, run_key, name)
        root = group.path.parents[2]
        want_cpus = _id_list(cpus, "CPU")
        want_mems = _id_list(mems, "NUMA node") if mems is not None else None
        with _locked(root):
            if support.version == 1:
                _make_v1(group, root, want_cpus, want_mems, exclusive)
            else:
                _make_v2(group, root, want_cpus, want_mems, exclusive)
        return group

    # -- membership

    def add_pid(self, pid: int) -> None:
        """Move process ``pid`` (all its threads) into this group.

        Its CPU affinity becomes the group's CPUs: the kernel resets it on a move.
        Children it forked before stay where they are; only later ones follow it,
        which is why servers are started inside a group with ``join_fn``.
        """
        try:
            _write(self.path / "cgroup.procs", str(int(pid)))
        except _WriteFailed as exc:
            code = exc.err.errno
            if code == errno.ESRCH:
                raise ProcessGone(pid) from None
            if code == errno.ENOENT:
                raise UserError(f"cpuset {self.path} does not exist (removed?)",
                                "create the group again") from None
            if code in (errno.EACCES, errno.EPERM):
                raise UserError(f"moving process {pid} into {self.path} was refused: "
                                f"{exc.err.strerror}", "run syncrep-lab as root") from None
            raise UserError(f"moving process {pid} into {self.path}: {exc.describe()}",
                            "a kernel thread or an exiting process cannot be moved; check "
                            "that the group has CPUs and memory nodes") from None

    def join_fn(self) -> JoinFn:
        """A ``preexec_fn`` that starts the child (and all it forks later) in this group."""
        return JoinFn(self.path / "cgroup.procs")

    def pids(self) -> list[int]:
        """Processes in the group now (thread-group ids)."""
        text = _read(self.path / "cgroup.procs")
        return sorted({int(x) for x in text.split() if x.isdigit()})

    # -- read-back

    def cpus(self) -> list[int]:
        """The CPUs written to the group (v2: empty means "the parent's")."""
        return _read_list(self.path / "cpuset.cpus")

    def effective_cpus(self) -> list[int]:
        """The CPUs the group's processes may really use, as the kernel computes them."""
        return _read_list(self.path / _files(self.support.version).effective_cpus)

    def effective_mems(self) -> list[int]:
        return _read_list(self.path / _files(self.support.version).effective_mems)

    def exclusive(self) -> bool:
        """v1: cpuset.cpu_exclusive is set; v2: the group is a valid partition root."""
        if self.support.version == 1:
            return _read(self.path / "cpuset.cpu_exclusive") == "1"
        return _read(self.path / "cpuset.cpus.partition") == "root"


def _id_list(ids: list[int] | None, what: str) -> list[int]:
    values = list(ids or [])
    if not values:
        raise UserError(f"a cpuset needs at least one {what}", f"give the {what}s to use")
    if any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in values):
        raise UserError(f"{what} list {values!r} holds something other than {what} numbers",
                        f"give {what} numbers, e.g. [0, 1]")
    return sorted(set(values))


def _rel(path: Path, root: Path) -> str:
    try:
        return "/" + str(path.relative_to(root))
    except ValueError:
        return str(path)


def _check_within(group: CpusetGroup, root: Path, cpus: list[int], mems: list[int] | None,
                  files: _Files) -> tuple[list[int], list[int]]:
    """Refuse sets outside what the group's parent offers; return the parent's sets.

    New intermediate directories get their parent's sets (v1 copies them, v2
    inherits them), so the deepest existing ancestor is what the group's parent
    will offer.
    """
    run = group.path.parent
    ancestor, have_cpus, have_mems = root, [], []
    for ancestor in (d for d in (run, run.parent, root) if d.is_dir()):
        # Both roots have the effective files; a v2 cgroup without the controller
        # has none, and its parent's sets are what it passes on.
        have_cpus = _read_list(ancestor / files.effective_cpus)
        have_mems = _read_list(ancestor / files.effective_mems)
        if have_cpus:
            break
    outside = sorted(set(cpus) - set(have_cpus))
    if outside:
        raise UserError(
            f"cpuset {group.name}: CPU{'s' if len(outside) > 1 else ''} {format_cpus(outside)} "
            f"outside the parent cgroup's CPUs {format_cpus(have_cpus) or 'none'} "
            f"({ancestor})",
            f"choose among CPUs {format_cpus(have_cpus)}",
        )
    if mems is not None:
        missing = sorted(set(mems) - set(have_mems))
        if missing:
            nodes = format_cpus(have_mems) or format_cpus(numa_nodes())
            raise UserError(
                f"cpuset {group.name}: NUMA node{'s' if len(missing) > 1 else ''} "
                f"{format_cpus(missing)} outside the parent cgroup's nodes {nodes} ({ancestor})",
                f"choose among nodes {nodes}",
            )
    return have_cpus, have_mems


class _Undo:
    """What one create call changed, to put back if a later step fails."""

    def __init__(self) -> None:
        self.made: list[Path] = []
        self.writes: list[tuple[Path, str]] = []  # (file, old value)

    def wrote(self, path: Path, old: str) -> None:
        self.writes.append((path, old))

    def run(self) -> None:
        # Flags first (a v1 parent cannot drop exclusivity while a child has it;
        # a v2 partition must end before its exclusive CPUs are taken back).
        for path, old in reversed(self.writes):
            with contextlib.suppress(_WriteFailed):
                _write(path, old or "\n")
        for path in reversed(self.made):
            with contextlib.suppress(OSError):
                path.rmdir()


@contextlib.contextmanager
def _all_or_nothing(group: CpusetGroup) -> Iterator[_Undo]:
    """The steps of one create call: if one fails, what the earlier ones changed is put
    back and the failure is told as the user's to act on."""
    undo = _Undo()
    try:
        yield undo
    except _WriteFailed as exc:
        undo.run()
        raise UserError(f"the kernel refused cpuset {group.path}: {exc.describe()}; "
                        "nothing of it was left behind",
                        "check the CPUs and nodes against the parent cgroup's, and that no "
                        "other cpuset claims them exclusively") from None
    except OSError as exc:
        undo.run()
        raise UserError(f"cannot make cpuset {group.path}: {exc.strerror}",
                        "run as root on a writable cgroup mount") from None


# -- v1


def _v1_sets(path: Path) -> tuple[list[int], bool]:
    return _read_list(path / "cpuset.cpus"), _read(path / "cpuset.cpu_exclusive") == "1"


def _check_v1_siblings(group: CpusetGroup, root: Path, cpus: list[int], parent_cpus: list[int],
                       exclusive: bool) -> None:
    """Refuse what v1's exclusivity rule would reject: an exclusive cpuset may share no
    CPU with a sibling, at every level from the hierarchy root down to the group."""
    top, run, leaf = group.path.parents[1], group.path.parent, group.path
    levels = []
    for parent, child in ((root, top), (top, run), (run, leaf)):
        if child == leaf:
            child_cpus, excl = cpus, exclusive
        elif child.is_dir():
            child_cpus, was = _v1_sets(child)
            excl = exclusive or was
        else:
            child_cpus, excl = parent_cpus, exclusive
        levels.append((parent, child, child_cpus, excl))
    for parent, child, child_cpus, excl in levels:
        for sibling in _subdirs(parent):
            if sibling == child:
                continue
            sib_cpus, sib_excl = _v1_sets(sibling)
            shared = sorted(set(child_cpus) & set(sib_cpus))
            if shared and (excl or sib_excl):
                mine = "this exclusive cpuset" if excl else "this cpuset"
                theirs = "the exclusive cpuset " if sib_excl else "cpuset "
                if parent == top:
                    fix = (f"wait for run {sibling.name} to end or remove it (syncrep-lab "
                           "clean), or run without exclusive")
                elif parent == root:
                    fix = (f"{_rel(sibling, root)} belongs to something else on this machine; "
                           "run without exclusive cpusets")
                else:
                    fix = "give the groups of one run CPUs that do not overlap"
                raise UserError(
                    f"cgroup v1 allows no CPU of an exclusive cpuset in a sibling: {mine} "
                    f"{_rel(child, root)} would share CPU{'s' if len(shared) > 1 else ''} "
                    f"{format_cpus(shared)} with {theirs}{_rel(sibling, root)}; nothing was made",
                    fix,
                )


def _make_v1(group: CpusetGroup, root: Path, cpus: list[int], mems: list[int] | None,
             exclusive: bool) -> None:
    parent_cpus, parent_mems = _check_within(group, root, cpus, mems, _V1)
    _check_v1_siblings(group, root, cpus, parent_cpus, exclusive)
    leaf = group.path
    if leaf.is_dir() and not exclusive and _v1_sets(leaf)[1]:
        raise UserError(f"cpuset {leaf} exists and is exclusive", "remove the run first, or "
                        "ask for an exclusive group")
    with _all_or_nothing(group) as undo:
        for path in (leaf.parents[1], leaf.parent, leaf):
            is_leaf = path == leaf
            if not path.is_dir():
                path.mkdir()
                undo.made.append(path)
                # Empty sets would keep every process out: copy the parent's.
                _write(path / "cpuset.cpus", format_cpus(cpus if is_leaf else parent_cpus))
                _write(path / "cpuset.mems", format_cpus(mems or parent_mems) if is_leaf
                       else format_cpus(parent_mems))
            elif is_leaf:
                old = _read(path / "cpuset.cpus")
                _write(path / "cpuset.cpus", format_cpus(cpus))
                undo.wrote(path / "cpuset.cpus", old)
                if mems is not None:
                    old = _read(path / "cpuset.mems")
                    _write(path / "cpuset.mems", format_cpus(mems))
                    undo.wrote(path / "cpuset.mems", old)
            # Exclusive must run top-down: a child may be exclusive only under an
            # exclusive parent.
            if exclusive and not _v1_sets(path)[1]:
                _write(path / "cpuset.cpu_exclusive", "1")
                undo.wrote(path / "cpuset.cpu_exclusive", "0")


# -- v2


def _v2_exclusive_cpus(path: Path) -> list[int]:
    """CPUs a v2 cgroup holds exclusively: what it asks (cpuset.cpus.exclusive) and
    what it has as a valid partition."""
    held = set(_read_list(path / "cpuset.cpus.exclusive"))
    if _read(path / "cpuset.cpus.partition") in ("root", "isolated"):
        held |= set(_read_list(path / "cpuset.cpus.exclusive.effective"))
    return sorted(held)


def _v2_has_remote_partitions(root: Path) -> bool:
    for child in _subdirs(root):
        if (child / "cpuset.cpus.partition").exists():
            return (child / "cpuset.cpus.exclusive").exists()
    return _kernel_version() >= _REMOTE_PARTITION_KERNEL


def _check_v2_exclusive(group: CpusetGroup, root: Path, cpus: list[int]) -> None:
    if not _v2_has_remote_partitions(root):
        raise UserError(
            f"an exclusive cpuset under cgroup v2 here needs cpuset.cpus.exclusive (Linux "
            f"6.7 or later; this is {os.uname().release}): older kernels only make "
            "partitions whose every ancestor is one, which would take the CPUs from the "
            "whole machine's cgroup tree",
            "run without exclusive, or on a newer kernel",
        )
    top, run, leaf = group.path.parents[1], group.path.parent, group.path
    for parent, child in ((root, top), (top, run), (run, leaf)):
        for sibling in _subdirs(parent):
            if sibling == child:
                continue
            shared = sorted(set(cpus) & set(_v2_exclusive_cpus(sibling)))
            if shared:
                raise UserError(
                    f"CPU{'s' if len(shared) > 1 else ''} {format_cpus(shared)} of exclusive "
                    f"cpuset {_rel(leaf, root)} are held exclusively by "
                    f"{_rel(sibling, root)}; nothing was made",
                    "choose other CPUs, end that run (syncrep-lab clean), or run without "
                    "exclusive",
                )


def _enable_cpuset(path: Path) -> None:
    """Give ``path``'s children the cpuset controller (cgroup.subtree_control).

    Enabling it at the hierarchy root is never undone: systemd enables it there
    too, and taking it away would drop every other cgroup's cpuset settings.
    """
    control = path / "cgroup.subtree_control"
    if "cpuset" not in _read(control).split():
        _write(control, "+cpuset")


def _make_v2(group: CpusetGroup, root: Path, cpus: list[int], mems: list[int] | None,
             exclusive: bool) -> None:
    _check_within(group, root, cpus, mems, _V2)
    if exclusive:
        _check_v2_exclusive(group, root, cpus)
    leaf = group.path
    top, run = leaf.parents[1], leaf.parent
    if (leaf.is_dir() and not exclusive
            and _read(leaf / "cpuset.cpus.partition") not in ("", "member")):
        raise UserError(f"cpuset {leaf} exists and is a partition", "remove the run "
                        "first, or ask for an exclusive group")
    with _all_or_nothing(group) as undo:
        _enable_cpuset(root)
        for path in (top, run):
            if not path.is_dir():
                path.mkdir()
                undo.made.append(path)
            # No process ever sits in these two, so the no-internal-process rule
            # does not stop their children from getting the controller.
            _enable_cpuset(path)
        if not leaf.is_dir():
            leaf.mkdir()
            undo.made.append(leaf)
        for name, values in (("cpuset.cpus", cpus), ("cpuset.mems", mems)):
            if values is None:
                continue  # empty: the parent's
            old = _read(leaf / name)
            _write(leaf / name, format_cpus(values))
            undo.wrote(leaf / name, old)
        if exclusive:
            # A remote partition: each level between the root partition and the
            # group must hand the CPUs down through cpuset.cpus.exclusive, top-down.
            # Kernels before 6.11 also cap cpuset.cpus.exclusive by the level's own
            # cpuset.cpus, so empty ones ("the parent's") are written out first.
            for path in (top, run):
                if not _read(path / "cpuset.cpus"):
                    _write(path / "cpuset.cpus",
                           format_cpus(_read_list(path / "cpuset.cpus.effective")))
                    undo.wrote(path / "cpuset.cpus", "")
            for path in (top, run):
                old = _read(path / "cpuset.cpus.exclusive")
                new = sorted(set(_read_list(path / "cpuset.cpus.exclusive")) | set(cpus))
                _write(path / "cpuset.cpus.exclusive", format_cpus(new))
                undo.wrote(path / "cpuset.cpus.exclusive", old)
            old = _read(leaf / "cpuset.cpus.exclusive")
            _write(leaf / "cpuset.cpus.exclusive", format_cpus(cpus))
            undo.wrote(leaf / "cpuset.cpus.exclusive", old)
            _write(leaf / "cpuset.cpus.partition", "root")
            undo.wrote(leaf / "cpuset.cpus.partition", "member")
            # The write succeeds even when the kernel cannot honour it; the state
            # then reads "root invalid (reason)".
            state = _read(leaf / "cpuset.cpus.partition")
            if state != "root":
                undo.run()
                raise UserError(f"the kernel did not make {leaf} an exclusive partition: "
                                f"it reads {state!r}; nothing of it was left behind",
                                "choose CPUs no other cgroup holds exclusively, leave at least "
                                "one CPU to the rest of the machine, or run without exclusive")


# --- removal ----------------------------------------------------------------------------


def _evacuate(group: Path, root: Path) -> list[int]:
    """Move every process of ``group`` to the hierarchy's root group; the pids seen."""
    pids = sorted({int(x) for x in _read(group / "cgroup.procs").split() if x.isdigit()})
    for pid in pids:
        # ESRCH / EINVAL: the process is exiting; it leaves the group by itself.
        with contextlib.suppress(_WriteFailed):
            _write(root / "cgroup.procs", str(pid))
    return pids


def _tidy_top(support: CpusetSupport, root: Path) -> None:
    """Drop the shared syncrep-lab directory when no run is left in it, else give back
    the exclusivity no remaining run needs (it would block other cpusets)."""
    top = root / TOP
    if not top.is_dir():
        return
    runs = _subdirs(top)
    if not runs:
        with contextlib.suppress(OSError):
            top.rmdir()
        return
    if support.version == 1:
        if _read(top / "cpuset.cpu_exclusive") == "1" and not any(
                _read(r / "cpuset.cpu_exclusive") == "1" for r in runs):
            with contextlib.suppress(_WriteFailed):
                _write(top / "cpuset.cpu_exclusive", "0")
    elif (top / "cpuset.cpus.exclusive").exists():
        needed: set[int] = set()
        for run in runs:
            needed |= set(_read_list(run / "cpuset.cpus.exclusive"))
        if set(_read_list(top / "cpuset.cpus.exclusive")) != needed:
            with contextlib.suppress(_WriteFailed):
                _write(top / "cpuset.cpus.exclusive", format_cpus(needed) or "\n")


def remove_run(support: CpusetSupport, run_key: str, timeout: float = 10) -> None:
    """Remove every group of one run, moving processes still in them to the root group.

    Idempotent: a run that is not there (or cpusets that are not usable) is a
    no-op. Processes forking while being moved can land a child back in a group,
    so each directory is retried until ``timeout``.
    """
    root, version = support.root, support.version
    if root is None or version is None or not support.usable:
        return
    _check_key(run_key, "run key")
    run = root / TOP / run_key
    if not run.is_dir():
        return
    deadline = time.monotonic() + max(0.0, timeout)
    with _locked(root):
        dirs = [Path(d) for d, _, _ in os.walk(run, topdown=False)]
        for path in dirs:
            while True:
                left = _evacuate(path, root)
                if version == 2 and _read(path / "cpuset.cpus.partition") not in ("", "member"):
                    with contextlib.suppress(_WriteFailed):
                        _write(path / "cpuset.cpus.partition", "member")
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if time.monotonic() >= deadline:
                        raise UserError(
                            f"cannot remove cpuset {path}: {exc.strerror} (processes in it: "
                            f"{', '.join(map(str, left)) or 'none listed'})",
                            "stop those processes, then run syncrep-lab clean",
                        ) from None
                    time.sleep(0.02)
        _tidy_top(support, root)


def leftover_runs(support: CpusetSupport) -> list[str]:
    """Run keys with groups still under ``<root>/syncrep-lab`` (e.g. after a crash)."""
    if support.root is None:
        return []
    return [p.name for p in _subdirs(support.root / TOP)]


# --- read-back --------------------------------------------------------------------------


def cpuset_cgroup_of(pid: int) -> str:
    """The cpuset cgroup of ``pid`` from /proc/PID/cgroup: the v1 cpuset line when the
    controller is on v1, else the unified (v2) path; "" when unknown."""
    text = Path(f"/proc/{pid}/cgroup").read_text()
    unified = ""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if "cpuset" in parts[1].split(","):
            return parts[2]
        if parts[0] == "0" and parts[1] == "":
            unified = parts[2]
    return unified


def _status(pid: int) -> dict[str, str]:
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        found[key] = value.strip()
    return found


def placement_of(pid: int) -> dict[str, Any]:
    """What the kernel applied to ``pid``: CPUs and memory nodes it may use, its cpuset
    cgroup and its NUMA memory policy. ProcessGone (a UserError and an OSError) when
    there is no such process."""
    try:
        status = _status(pid)
        cgroup = cpuset_cgroup_of(pid)
    except (FileNotFoundError, ProcessLookupError):
        raise ProcessGone(pid) from None
    return {
        "cpus": status.get("Cpus_allowed_list", ""),
        "mems": status.get("Mems_allowed_list", ""),
        "cgroup": cgroup,
        "numa_policy": numa_policy_of(pid),
    }
