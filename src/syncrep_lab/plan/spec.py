"""Experiment specs: the TOML a user writes, validated with the line of every error.

A spec names a topology (as ``cluster up`` takes it, or ``attach`` to a running
cluster), server settings, a workload, the axes of the matrix and the run
controls. Validation is pydantic's; what this module adds is the mapping from
an error's key path back to the line of the TOML it came from, because
"matrix.clients: value must be positive" is much less useful than
"spec.toml:14: matrix.clients[2]: ...".
"""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from syncrep_lab.errors import UserError
from syncrep_lab.pg.replication import LEVELS, SyncCommit

if TYPE_CHECKING:
    from syncrep_lab.hosts.ssh import HostSpec

SYNC_COMMIT_LEVELS = LEVELS
Scalar = str | int | float | bool
PRESETS = ("quick", "seed", "regime", "seed-guests")
Driver = Literal["pgbench", "sysbench"]  # the client program
MAX_INSTANCES = 16  # independent primaries on one machine, at most
MAX_FLUSH_DELAY_US = 1_000_000  # a second a flush: beyond it a node is down, not slow


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Attach(_Strict):
    """A cluster the user already runs: nothing is provisioned or restarted."""

    primary: str
    standbys: dict[str, str] = Field(default_factory=dict)
    allow_alter: bool = False


GUEST_PREFIX = "guest"  # the guests' host names: guest1, guest2, ...
MAX_GUESTS = 8
# matrix.kernel's value for the kernel this machine runs: the nodes topology.hosts puts
# in a guest run here instead, as plain processes
HOST_KERNEL = "host"


class Guests(_Strict):
    """topology.guests: virtual machines the run boots and drives as SSH hosts
    (guests/, docs/decisions.md "Guests"). Named guest1 ... guestN."""

    count: Annotated[int, Field(ge=1, le=MAX_GUESTS)] = 1
    vcpus: Annotated[int, Field(ge=1, le=64)] = 1
    memory_mb: Annotated[int, Field(ge=256, le=262144)] = 1024
    # "debian-6.1": Debian 12's cloud kernel from its package (fetched once, cached);
    # a linux-image-* package name; or the path of a bzImage (with modules beside it)
    kernel: str = "debian-6.1"
    modules: str | None = None  # with a bzImage: the lib/modules/RELEASE it was built with
    boot_timeout: Annotated[float, Field(gt=0, le=1800)] = 180.0
    # virtual NUMA nodes (QEMU -numa): the memory split evenly among them, the vCPUs in
    # contiguous blocks (a node past the vCPUs has memory only), so that the placements'
    # NUMA policies act on a machine of one node
    numa_nodes: Annotated[int, Field(ge=1, le=8)] = 1
    # the CPUs of this machine every guest's vCPU threads run on ("1", "0-3"); QEMU's
    # other threads and virtiofsd (the guest's file I/O) are not pinned; None: anywhere
    vcpu_cpus: str | None = None

    def names(self) -> list[str]:
        return [f"{GUEST_PREFIX}{i}" for i in range(1, self.count + 1)]


class Topology(_Strict):
    pg: str | None = None
    standbys: Annotated[int, Field(ge=0, le=24)] = 2
    names: list[str] | None = None
    sync: str | None = None
    tcp: bool = False
    profile: Literal["benchmark", "seed"] = "benchmark"
    clone: Literal["copy", "basebackup"] = "copy"
    attach: Attach | None = None
    # K independent primaries (each with its own standbys) on this host, driven at once
    instances: Annotated[int, Field(ge=1, le=MAX_INSTANCES)] = 1
    # A node on an SSH host of [hosts], or on a guest: {c = "far", primary = "guest1"}
    hosts: dict[str, str] = Field(default_factory=dict)
    # Virtual machines the run boots (guest1 ... guestN), hosts that topology.hosts names
    guests: Guests | None = None
    # with instances > 1 and guests: "guests" puts instance i's guest nodes in guest i
    isolation: Literal["processes", "guests"] = "processes"


class Placement(_Strict):
    """Where a cell's processes run: [placements.NAME], varied by matrix.placement."""

    # cpusets: a node's name, "nodes" (every server), "standbys", or "client" -> CPUs
    cpus: dict[str, str] = Field(default_factory=dict)
    exclusive: bool = False
    # a role of the primary's processes (as `costs` names them: "walsender:b",
    # "walwriter", "backend"), or "NODE/role" for another node's -> CPUs; applied to
    # processes that start later too
    pin: dict[str, str] = Field(default_factory=dict)
    # the same keys -> a share of CPUs (0.05: 5 % of one CPU) the role's processes get
    # between them: a CFS bandwidth quota (placement/quota.py), those born later too
    quota: dict[str, float] = Field(default_factory=dict)
    # numactl policy per node ("nodes", "standbys" or a name): default,
    # interleave=all, interleave=0,1, localalloc, bind=N, preferred=N
    numa: dict[str, str] = Field(default_factory=dict)
    # with instances > 1: "shared" puts every instance in the same cpusets,
    # "separate" splits each cpuset's CPUs evenly among the instances
    instances: Literal["shared", "separate"] = "shared"


class LinkProfileSpec(_Strict):
    """[links.NAME]: an emulated link (one way delay on each end, so the round trip is
    twice ``delay_ms``)."""

    delay_ms: Annotated[float, Field(ge=0, le=10_000)] = 0.0
    jitter_ms: Annotated[float, Field(ge=0, le=10_000)] = 0.0
    loss_pct: Annotated[float, Field(ge=0, lt=100)] = 0.0
    rate: str | None = None  # "1gbit", "100mbit"


class Network(_Strict):
    """Nodes in network namespaces joined by emulated links ([network])."""

    namespaces: bool = False  # implied by any link other than "none"
    replication: str = "none"  # the primary <-> standby links' profile (matrix.link varies it)
    client: str = "none"  # the client <-> primary link's profile
    standby_links: dict[str, str] = Field(default_factory=dict)  # {c = "wan"}: per standby


class Host(_Strict):
    """[hosts.NAME]: a machine reached over SSH. Its host key is always verified."""

    address: str
    port: Annotated[int, Field(ge=1, le=65535)] = 22
    user: str = "postgres"
    key: str | None = None
    known_hosts: str | None = None  # default ~/.ssh/known_hosts
    accept_new: bool = False  # trust a host key seen for the first time, and record it
    bin_dir: str
    data_root: str = "/var/tmp/syncrep-lab"
    connect_timeout: Annotated[float, Field(gt=0, le=300)] = 10.0
    # the account may run perf and bpftrace (the commit anatomy) through `sudo -n` (no
    # password): the probes run there
    sudo: bool = False
    # set by the run for the guests it boots (their network namespace); never in a spec
    guest: str | None = None


class Workload(_Strict):
    kind: Literal["insert", "pk-lookup", "script"] = "insert"
    batch: Annotated[int, Field(ge=1, le=10000)] = 1
    rows: Annotated[int, Field(ge=1, le=1_000_000_000)] = 1_000_000
    script: str | None = None
    clients: Annotated[int, Field(ge=1, le=10000)] = 16
    threads: Annotated[int, Field(ge=1, le=10000)] | None = None
    duration: Annotated[int, Field(ge=1, le=86400)] = 10  # seconds (pgbench -T)
    warmup: Annotated[int, Field(ge=0, le=3600)] = 2
    synchronous_commit: SyncCommit = "on"
    keep_logs: bool = False
    # the client: pgbench, or sysbench running the same workload (run/sysbench.py)
    driver: Driver = "pgbench"


FaultAction = Literal["stop", "kill", "restart", "start", "pause", "set", "link"]


class FaultEvent(_Strict):
    """One timed event inside every repeat of a cell (see run/faults.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    at: Annotated[float, Field(ge=0, le=86400)]  # seconds after pgbench starts
    action: FaultAction
    # A standby's name, or "sync" / "potential": whichever standby is in that
    # state when the event fires. Not for "set".
    target: str | None = None
    # stop, kill, pause: seconds until the standby is started (or continued) again;
    # left out, it stays down until the repeat ends.
    for_: float | None = Field(default=None, gt=0, le=86400, alias="for")
    name: str | None = None  # set: the setting (changed with ALTER SYSTEM and a reload)
    value: str | None = None
    # link: the [links.NAME] profile the primary <-> target link gets (for `for` seconds,
    # or until the repeat ends)
    profile: str | None = None


class FaultScenario(_Strict):
    events: Annotated[list[FaultEvent], Field(min_length=1, max_length=100)]
    # A commit slower than this counts as one that waited too long.
    slow_commit_ms: Annotated[float, Field(gt=0, le=3_600_000)] = 1000.0
    # No synchronous standby for this long while commits need one: the cell ends
    # with that diagnosis instead of waiting for ever.
    stall_seconds: Annotated[float, Field(gt=0, le=3600)] = 5.0


class Matrix(_Strict):
    synchronous_commit: list[SyncCommit] | None = None
    sync: list[str] | None = None
    standbys: list[Annotated[int, Field(ge=0, le=24)]] | None = None
    clients: list[Annotated[int, Field(ge=1, le=10000)]] | None = None
    threads: list[Annotated[int, Field(ge=1, le=10000)]] | None = None
    batch: list[Annotated[int, Field(ge=1, le=10000)]] | None = None
    pg: list[str] | None = None
    settings: list[str] | None = None
    faults: list[str] | None = None
    placement: list[str] | None = None
    cores: list[Annotated[int, Field(ge=1, le=4096)]] | None = None
    link: list[str] | None = None
    instances: list[Annotated[int, Field(ge=1, le=MAX_INSTANCES)]] | None = None
    driver: list[Driver] | None = None
    isolation: list[Literal["processes", "guests"]] | None = None
    # "host", or a guest kernel as topology.guests.kernel takes it: the kernel the nodes
    # topology.hosts puts in a guest run on (Spec.guest_kernels)
    kernel: list[Annotated[str, Field(min_length=1)]] | None = None
    exclude: list[dict[str, Scalar]] = Field(default_factory=list)
    only: list[dict[str, Scalar]] = Field(default_factory=list)

    @field_validator("*", mode="after")
    @classmethod
    def _not_empty(cls, value: Any) -> Any:
        if isinstance(value, list) and value == []:
            raise ValueError("an axis needs at least one value (leave it out instead)")
        return value


class Probes(_Strict):
    """What is recorded beside pgbench during every measured repeat."""

    probed_repeats: Annotated[int, Field(ge=0, le=100)] = 1  # per cell, after the measured
    perf: bool = True  # CPU, context switches and syscalls per process (root + perf)
    wait_events_hz: Annotated[float, Field(ge=0, le=200)] = 20.0  # 0 turns it off
    replication_hz: Annotated[float, Field(ge=0, le=100)] = 10.0
    proc_hz: Annotated[float, Field(ge=0, le=50)] = 4.0  # /proc CPU and switches; 0: off
    numa: bool = True  # numa_maps of every process before and after
    flamegraphs: bool = True  # perf record on every CPU, folded per role (root + inferno)
    flame_hz: Annotated[int, Field(ge=1, le=10000)] = 99
    # how perf unwinds stacks: auto = fp on a frame-pointers build, dwarf otherwise
    call_graph: Literal["auto", "dwarf", "fp"] = "auto"
    sched: bool = True  # scheduler trace: waiting to be woken, run queue, who wakes whom
    sched_seconds: Annotated[float, Field(gt=0, le=60)] = 3.0  # of each probed repeat
    # calls and time per function per role, on a profiling build (probes/gprof.py)
    gprof: bool = True
    # every synchronous commit timed from uprobes, split into its parts (probes/anatomy.py)
    anatomy: bool = True
    # its repeats per cell, after the probed ones: from 2, its figures and their ratios
    # (compare, results --json) get an interval over repeats; one repeat gives none
    anatomy_repeats: Annotated[int, Field(ge=1, le=20)] = 1
    # the sync standby's half of each commit too, where it runs on this machine
    # (probes/standby_anatomy.py): off by default, its lines cost bpftrace a core's share
    # on a small machine, and the anatomy's own parts would carry it
    standby_anatomy: bool = False
    # the kernel locks the primary's processes take and wait for (probes/kernel_locks.py),
    # in the probed repeat, wherever the primary runs (here: kernel_locks.LocalLocks). Off
    # by default: its kprobes trap every mutex taken there, which adds to that repeat's
    # CPU per role on a host (the figure a host's nodes have)
    locks: bool = False


ResetMode = Literal["full", "no-checkpoint", "none"]


class RunControl(_Strict):
    # before each cluster is built: the page cache, dentries and inodes dropped (sync, then
    # 3 > /proc/sys/vm/drop_caches) here and on every host and guest of its nodes, so that
    # the pages its files are read into are placed under its own NUMA policy, not left
    # where the cluster before put them (root here, sudo on a host; cluster/caches.py)
    drop_caches: bool = False
    repeats_min: Annotated[int, Field(ge=1, le=1000)] = 3
    repeats_max: Annotated[int, Field(ge=1, le=1000)] = 10
    ci_target: Annotated[float, Field(gt=0, lt=1)] = 0.03
    confidence: Annotated[float, Field(gt=0.5, lt=1)] = 0.95
    ready_timeout: Annotated[float, Field(gt=0, le=3600)] = 60.0
    # no transaction for this long while pgbench's commits wait for a standby that cannot
    # confirm them: the repeat stops and the cell fails with the cause (run/stall.py)
    stall_seconds: Annotated[float, Field(gt=0, le=3600)] = 15.0
    # before each repeat (run/reset.py): "full" empties the insert table and checkpoints
    # every node; "no-checkpoint" only empties the table; "none" does neither. All three
    # wait for the standbys to replay what the last repeat wrote.
    reset: ResetMode = "full"
    # interleaved: the cells of one cluster run one repeat each per round, in an order
    # shuffled per round (run/rounds.py); blocked: every repeat of a cell, then
    # the next cell; duet: each cell and its baseline at the same moment, each on a
    # cluster and CPUs of its own (plan/duet.py, run/duet.py), interleaved where the
    # machine cannot give each side a CPU
    order: Literal["interleaved", "blocked", "duet"] = "interleaved"
    seed: Annotated[int, Field(ge=0)] | None = None  # the rounds' shuffles; None: drawn, stored
    budget: str | None = None  # "10m", "90s", "1h": no new round once this much has run

    @field_validator("budget", mode="after")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            parse_duration(value)
        return value

    @property
    def budget_seconds(self) -> float | None:
        return None if self.budget is None else parse_duration(self.budget)


def parse_duration(text: str) -> float:
    """``"90s"``, ``"10m"``, ``"1.5h"`` or a bare number of seconds."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(s|m|h)?\s*", text)
    if m is None or float(m.group(1)) <= 0:
        raise ValueError(f"{text!r} is not a duration (write it as 90s, 10m or 1h)")
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


COMPARABLE = ("synchronous_commit", "sync", "standbys", "clients", "threads", "batch", "pg",
              "settings", "faults", "placement", "cores", "link", "instances", "driver",
              "isolation", "kernel")


class Compare(_Strict):
    """What each cell is compared with (stats/pairing.py): a table of parameters, or a
    list of them tried in order. Left out: synchronous_commit = "local" when the matrix
    has that level."""

    baseline: dict[str, Scalar] | list[dict[str, Scalar]] | None = None

    @field_validator("baseline", mode="after")
    @classmethod
    def _known(cls, value: Any) -> Any:
        for rule in value if isinstance(value, list) else [value] if value else []:
            if not rule:
                raise ValueError("a baseline names at least one parameter")
            unknown = sorted(set(rule) - set(COMPARABLE))
            if unknown:
                raise ValueError(f"{', '.join(unknown)}: not a cell parameter (one of "
                                 f"{', '.join(COMPARABLE)})")
        return value

    def rules(self, matrix: Matrix) -> list[dict[str, Scalar]]:
        if self.baseline is None:
            levels = matrix.synchronous_commit or []
            return [{"synchronous_commit": "local"}] if "local" in levels else []
        return self.baseline if isinstance(self.baseline, list) else [self.baseline]


class NodeSet(_Strict):
    """[nodes.NAME.sets.SET]: the node in the cells whose ``settings`` axis is SET, over
    what [nodes.NAME] gives it."""

    settings: dict[str, Scalar] = Field(default_factory=dict)
    flush_delay_us: Annotated[int, Field(ge=0, le=MAX_FLUSH_DELAY_US)] | None = None


class NodeSpec(_Strict):
    """[nodes.NAME]: one node (a standby's name, or ``primary``) apart from the others:
    server settings of its own, and its WAL flushes made slow (cluster/slow_flush.py)."""

    settings: dict[str, Scalar] = Field(default_factory=dict)
    # each fsync and fdatasync of the node's processes waits this long first
    flush_delay_us: Annotated[int, Field(ge=0, le=MAX_FLUSH_DELAY_US)] = 0
    sets: dict[str, NodeSet] = Field(default_factory=dict)


class BuildSpec(_Strict):
    """[builds.NAME]: PostgreSQL built from source before the run (pg/builds.py, cached
    like `syncrep-lab pg build`), named NAME for matrix.pg or topology.pg."""

    # as `pg build` takes it: a major version (Debian's source package), a tarball or a
    # source tree (a relative path is the spec's folder's, as the patches are)
    version: Annotated[str, Field(min_length=1)]
    # patch files, relative to the spec's folder (a preset's: the presets' folder)
    patches: list[str] = Field(default_factory=list)
    flavor: Literal["release", "frame-pointers", "profiling", "debug"] = "release"
    cflags: str | None = None  # in place of the flavor's (the seed's: "-O3 -flto")
    configure: list[str] = Field(default_factory=list)  # --enable-X, VAR=value ...


class Spec(_Strict):
    name: Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")]
    description: str = ""
    topology: Topology = Field(default_factory=Topology)
    settings: dict[str, Scalar] = Field(default_factory=dict)
    settings_sets: dict[str, dict[str, Scalar]] = Field(default_factory=dict)
    nodes: dict[str, NodeSpec] = Field(default_factory=dict)
    workload: Workload = Field(default_factory=Workload)
    matrix: Matrix = Field(default_factory=Matrix)
    run: RunControl = Field(default_factory=RunControl)
    compare: Compare = Field(default_factory=Compare)
    probes: Probes = Field(default_factory=Probes)
    reference: dict[str, Any] = Field(default_factory=dict)
    faults: dict[str, FaultScenario] = Field(default_factory=dict)
    placements: dict[str, Placement] = Field(default_factory=dict)
    links: dict[str, LinkProfileSpec] = Field(default_factory=dict)
    network: Network = Field(default_factory=Network)
    hosts: dict[str, Host] = Field(default_factory=dict)
    builds: dict[str, BuildSpec] = Field(default_factory=dict)

    def ssh_host(self, name: str) -> HostSpec:
        """``[hosts.NAME]`` as the SSH layer takes it."""
        from syncrep_lab.hosts.ssh import HostSpec

        h = self.hosts[name]
        return HostSpec(name=name, address=h.address, port=h.port, user=h.user, key=h.key,
                        known_hosts=h.known_hosts, accept_new=h.accept_new,
                        bin_dir=h.bin_dir, data_root=h.data_root,
                        connect_timeout=h.connect_timeout, sudo=h.sudo, guest=h.guest)

    def is_guest(self, host: str) -> bool:
        """Whether ``host`` names one of the guests the run boots."""
        return host in self.guest_names()

    def guest_kernels(self) -> list[str]:
        """The kernels the run boots guests with, a set of topology.guests.count guests
        each: topology.guests.kernel alone, or, with matrix.kernel, its values other than
        "host" (topology.guests.kernel first where it is among them)."""
        guests = self.topology.guests
        if guests is None:
            return []
        if self.matrix.kernel is None:
            return [guests.kernel]
        named = list(dict.fromkeys(k for k in self.matrix.kernel if k != HOST_KERNEL))
        if guests.kernel in named:
            named.remove(guests.kernel)
            named.insert(0, guests.kernel)
        return named

    def guest_names(self, kernel: str | None = None) -> list[str]:
        """The guests booted with ``kernel`` (None: every guest of every kernel). The
        first kernel's are guest1 ... guestN, as topology.hosts names them; the k-th's
        are guest1-kK ... guestN-kK, the same guests with another kernel."""
        guests = self.topology.guests
        if guests is None:
            return []
        kernels = self.guest_kernels()
        out = []
        for k, name in enumerate(kernels, 1):
            if kernel is None or name == kernel:
                out += [g if k == 1 else f"{g}-k{k}" for g in guests.names()]
        return out

    def guest_of(self, host: str, kernel: str | None) -> str:
        """The guest that stands for ``host`` (a name of topology.guests.names()) in a
        cell whose kernel is ``kernel`` (None: topology.guests.kernel's; "host" has no
        guest, its nodes run here: ``host`` itself)."""
        kernels = self.guest_kernels()
        if kernel is None or kernel == HOST_KERNEL or kernel == kernels[0]:
            return host
        return f"{host}-k{kernels.index(kernel) + 1}"


MAX_SHOWN = 20  # problems listed in one message


class SpecError(UserError):
    """Spec problems, each with its line."""

    def __init__(self, source: str, problems: list[tuple[int | None, str]]) -> None:
        lines = [f"{source}:{line}: {msg}" if line else f"{source}: {msg}"
                 for line, msg in problems[:MAX_SHOWN]]
        if len(problems) > MAX_SHOWN:
            lines.append(f"... and {len(problems) - MAX_SHOWN} more")
        super().__init__(
            "the spec is not valid:\n  " + "\n  ".join(lines),
            "correct the lines named above (docs/spec.md lists every key)",
        )
        self.problems = problems

    @classmethod
    def at_keys(cls, source: str, text: str,
                problems: list[tuple[tuple[str | int, ...], str]]) -> SpecError:
        """Problems found at key paths (plan/checks.py's), each put on its line of
        ``text``."""
        lines = key_lines(text)
        return cls(source, [(line_of(lines, loc), f"{_loc_text(loc)}: {msg}")
                            for loc, msg in problems])


# --- mapping key paths to lines ----------------------------------------------------

# Linear: no lazy group next to optional white space (a long line of blanks inside a
# multi-line string took minutes with `\s*([^\]]+?)\s*`).
_HEADER = re.compile(r"^\s*(\[\[?)([^\]]*)\]\]?\s*(#.*)?$")
_PART = r"""(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')"""
_KEY = re.compile(rf"^\s*({_PART}(?:\s*\.\s*{_PART})*)\s*=")


def _split_key(text: str) -> list[str]:
    parts = re.findall(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""", text)
    return [p[1:-1] if p[:1] in "\"'" else p for p in parts]


def key_lines(text: str) -> dict[tuple[str | int, ...], int]:
    """Line (1-based) where each table and key of a TOML document is written.

    Arrays of tables get their index as a path element, as pydantic reports them.
    Keys inside multi-line values are not seen; errors there fall back to the
    line of the enclosing key.
    """
    found: dict[tuple[str | int, ...], int] = {}
    table: tuple[str | int, ...] = ()
    array_counts: dict[tuple[str | int, ...], int] = {}
    for no, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            path: tuple[str | int, ...] = tuple(_split_key(header.group(2)))
            if header.group(1) == "[[":
                index = array_counts.get(path, 0)
                array_counts[path] = index + 1
                found.setdefault(path, no)
                path = (*path, index)
            table = path
            found.setdefault(table, no)
            continue
        key = _KEY.match(line)
        if key:
            found.setdefault((*table, *_split_key(key.group(1))), no)
    return found


def line_of(lines: dict[tuple[str | int, ...], int], loc: tuple[str | int, ...]) -> int | None:
    for end in range(len(loc), 0, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


def _loc_text(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# --- loading -----------------------------------------------------------------------


def parse_spec(text: str, source: str = "spec", *, allow_alter: bool = False) -> Spec:
    """The spec in ``text``, each key valid on its own: the combinations are not checked
    here (plan/load.load_spec does both); ``allow_alter`` (``run --allow-alter``) lets the
    tool change an attached cluster's synchronous_standby_names, as
    topology.attach.allow_alter does."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise SpecError(source, [(int(m.group(1)) if m else None, f"not TOML: {exc}")]) from None
    if allow_alter:
        attach = data.get("topology", {}).get("attach") if isinstance(
            data.get("topology"), dict) else None
        if not isinstance(attach, dict):
            raise UserError(f"{source}: --allow-alter applies to an attached cluster, and the "
                            "spec has no [topology.attach]",
                            "leave --allow-alter out, or attach: [topology.attach] primary = "
                            "'host=... port=...'")
        attach["allow_alter"] = True
    lines = key_lines(text)
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        problems: list[tuple[int | None, str]] = []
        for error in exc.errors():
            loc = tuple(p for p in error["loc"] if not str(p).startswith("function-"))
            msg = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                from syncrep_lab.plan.spec_hints import unknown_key_hint

                msg = "unknown key" + unknown_key_hint(Spec, loc)
            if len(loc) > 1 and loc[-1] in ("str", "int", "float", "bool"):
                # one message for a setting's value, not one per type it could have been
                loc, msg = loc[:-1], "Input should be a string, a number or a boolean"
                if any(p[1].startswith(f"{_loc_text(loc)}: ") for p in problems):
                    continue
            problems.append((line_of(lines, loc), f"{_loc_text(loc)}: {msg}"))
        raise SpecError(source, problems) from None
    return spec


def spec_file_text(path: Path) -> str:
    """The text of the spec file ``path`` (kept with the run)."""
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")  # TOML is UTF-8 whatever the locale
    except FileNotFoundError:
        raise UserError(f"no spec file {path}", "give the path of a TOML spec, or --preset "
                        + "|".join(PRESETS)) from None
    except IsADirectoryError:
        raise UserError(f"{path} is a directory, not a spec file",
                        "give the path of a .toml file, or --preset "
                        + "|".join(PRESETS)) from None
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise UserError(f"{path}:{line}: not UTF-8 (byte 0x{raw[exc.start]:02x} at offset "
                        f"{exc.start})", "save the spec as UTF-8, as TOML requires") from None
    except OSError as exc:
        raise UserError(f"cannot read the spec {path}: {exc.strerror}",
                        "check that the file exists and this user may read it") from None
    return text


# the presets' folder: a preset's relative paths (its builds' patches) are taken from it
PRESETS_DIR = Path(str(resources.files("syncrep_lab.presets")))


def preset_text(name: str) -> str:
    if name not in PRESETS:
        raise UserError(f"no preset {name!r}", f"use one of: {', '.join(PRESETS)}")
    return (resources.files("syncrep_lab.presets") / f"{name}.toml").read_text()
