"""The plan: a spec's matrix expanded into ordered cells, and the checks that need
the whole spec (impossible combinations) rather than one key.

An axis has a *scope*, which decides what changing it costs:

- ``cluster``: a different cluster (installation, standbys, named settings);
  cells are grouped so each cluster is built once;
- ``reload``: a setting changed with a reload (``synchronous_standby_names``);
- ``session``: per pgbench run (``synchronous_commit`` through PGOPTIONS,
  clients, threads, batch).

Placement axes (``placement``: cpusets, pinning and numactl policies;
``cores``: the servers' CPU count; ``link``: the replication links' emulated
profile; ``instances``: primaries on the host at once; ``isolation`` and ``kernel``:
which kernel the guest nodes run on) are ``cluster``-scoped:
numactl and a network namespace are given to a postmaster when it starts, so a
cell that changes them gets a fresh cluster.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from syncrep_lab.plan.spec import HOST_KERNEL, Scalar, Spec
from syncrep_lab.store.keys import PARAM_DEFAULTS

if TYPE_CHECKING:
    from syncrep_lab.network.links import LinkProfile

AXES: dict[str, str] = {
    "pg": "cluster",
    "standbys": "cluster",
    "settings": "cluster",
    "sync": "reload",
    "synchronous_commit": "session",
    "clients": "session",
    "threads": "session",
    "batch": "session",
    "faults": "session",
    "placement": "cluster",
    "cores": "cluster",
    "link": "cluster",
    "instances": "cluster",
    "isolation": "cluster",
    "kernel": "cluster",
    "driver": "session",
}
NO_FAULTS = "none"
NO_PLACEMENT = "none"
NO_LINK = "none"
# no link at all: the standby (or the client) beside the primary, over its unix socket
# (in the primary's namespace when the cell has namespaces): the seed's group 4, whose
# sync standby shared the primary's host
SOCKET = "socket"
MAX_CELLS = 5000
MAX_POINTS = 100_000  # combinations before exclude/only
DEFAULT_SETTINGS_SET = "default"
# where a cell's instances run apart from each other: "processes", every instance's
# nodes on the hosts topology.hosts names (one OS each); "guests", instance i's nodes that
# topology.hosts puts in a guest in guest i (a kernel each: the seed's group 5)
ISOLATIONS = ("processes", "guests")


@dataclass(frozen=True)
class Cell:
    index: int
    axes: dict[str, Scalar]  # only the axes the matrix varies
    pg: str | None
    standbys: int
    sync: str | None  # None: an attached cluster's, left as it is
    settings_set: str
    synchronous_commit: str
    clients: int
    threads: int
    batch: int
    faults: str = NO_FAULTS  # a [faults.NAME] scenario, or none
    placement: str = NO_PLACEMENT  # a [placements.NAME], or none
    cores: int | None = None  # the servers confined to the machine's first N CPUs
    link: str = NO_LINK  # the replication links' [links.NAME] profile, or none
    instances: int = 1
    driver: str = "pgbench"  # the client program: pgbench or sysbench
    isolation: str = "processes"  # ISOLATIONS
    # the guest nodes' kernel: "host" (they run here), a guest kernel (they run in the
    # guests booted with it), or None, topology.guests.kernel's (no matrix.kernel)
    kernel: str | None = None

    @property
    def key(self) -> str:
        """Stable identity of a cell within a spec (used to resume)."""
        return ",".join(f"{k}={v}" for k, v in sorted(self.axes.items())) or "single"

    @property
    def cluster_key(self) -> tuple[Any, ...]:
        return (self.pg, self.standbys, self.settings_set, self.placement, self.cores,
                self.link, self.instances, self.isolation, self.kernel)

    def params(self) -> dict[str, Any]:
        """The cell's parameters as stored (cells.params_json). Axes left at their
        default are left out, so runs without them keep the parameters they always had."""
        params: dict[str, Any] = {
            "pg": self.pg, "standbys": self.standbys, "sync": self.sync,
            "settings": self.settings_set, "synchronous_commit": self.synchronous_commit,
            "clients": self.clients, "threads": self.threads, "batch": self.batch}
        for name, default in PARAM_DEFAULTS.items():
            if getattr(self, name) != default:
                params[name] = getattr(self, name)
        return params

    @property
    def label(self) -> str:
        short = {"synchronous_commit": "sc", "clients": "c", "threads": "j", "batch": "batch",
                 "standbys": "standbys", "settings": "set", "sync": "sync", "pg": "pg",
                 "faults": "faults", "placement": "place", "cores": "cores", "link": "link",
                 "instances": "inst", "driver": "driver", "isolation": "iso",
                 "kernel": "kernel"}
        return " ".join(f"{short[k]}={v}" for k, v in self.axes.items()) or "single cell"


@dataclass
class Plan:
    cells: list[Cell]
    dropped: list[str] = field(default_factory=list)  # cells left out, and why


def _default_sync(spec: Spec, standbys: int) -> str | None:
    if spec.topology.sync is not None:
        return spec.topology.sync
    if spec.topology.attach is not None:
        return None
    return "1(b,c)" if standbys else ""


def standby_names(spec: Spec, standbys: int) -> list[str]:
    """The names a cell's standbys get: the spec's, else b, c, d, ..."""
    from syncrep_lab.pg.sync_names import default_standby_names

    if spec.topology.names:
        return spec.topology.names[:standbys]
    return default_standby_names(standbys)


def cell_hosts(spec: Spec, cell: Cell) -> dict[str, str]:
    """topology.hosts as ``cell`` has it: without the nodes it puts in a guest where the
    cell's kernel is this machine's ("host": they run here)."""
    hosts = spec.topology.hosts
    if cell.kernel != HOST_KERNEL:
        return dict(hosts)
    return {node: host for node, host in hosts.items() if not spec.is_guest(host)}


def axis_values(spec: Spec) -> dict[str, list[Scalar]]:
    m = spec.matrix
    values: dict[str, list[Scalar]] = {}
    for axis in AXES:
        given = getattr(m, axis)
        if given is not None:
            values[axis] = list(given)
    return values


def _matches(filter_: dict[str, Scalar], point: dict[str, Scalar]) -> bool:
    return all(str(point.get(k)) == str(v) for k, v in filter_.items())


def expand(spec: Spec, cpu_count: int = 2) -> Plan:
    values = axis_values(spec)
    names = list(values)
    wl = spec.workload
    cells: list[Cell] = []
    dropped: list[str] = []
    points = [dict(zip(names, combo, strict=True))
              for combo in itertools.product(*(values[n] for n in names))]
    for point in points:
        if spec.matrix.only and not any(_matches(f, point) for f in spec.matrix.only):
            continue
        if any(_matches(f, point) for f in spec.matrix.exclude):
            continue
        standbys = int(point.get("standbys", spec.topology.standbys))
        clients = int(point.get("clients", wl.clients))
        threads = int(point.get("threads", wl.threads or min(clients, cpu_count)))
        if (point.get("kernel") == HOST_KERNEL
                and point.get("isolation", spec.topology.isolation) == "guests"):
            # no guest in the cell: each instance in a kernel of its own cannot be
            dropped.append(f"{point}: kernel host runs no guest for isolation guests")
            continue
        if threads > clients:
            if "threads" in point:
                dropped.append(f"{point}: threads {threads} > clients {clients}")
                continue
            threads = clients
        cells.append(Cell(
            index=len(cells),
            axes=point,
            pg=str(point["pg"]) if "pg" in point else spec.topology.pg,
            standbys=standbys,
            sync=str(point["sync"]) if "sync" in point else _default_sync(spec, standbys),
            settings_set=str(point.get("settings", DEFAULT_SETTINGS_SET)),
            synchronous_commit=str(point.get("synchronous_commit", wl.synchronous_commit)),
            clients=clients,
            threads=threads,
            batch=int(point.get("batch", wl.batch)),
            faults=str(point.get("faults", NO_FAULTS)),
            placement=str(point.get("placement", NO_PLACEMENT)),
            cores=int(point["cores"]) if "cores" in point else None,
            link=str(point.get("link", spec.network.replication)),
            instances=int(point.get("instances", spec.topology.instances)),
            driver=str(point.get("driver", wl.driver)),
            isolation=str(point.get("isolation", spec.topology.isolation)),
            kernel=str(point["kernel"]) if "kernel" in point else None,
        ))
    # Build each cluster once: cells sharing a cluster run together, in the order
    # their first cell appears in the matrix.
    order: dict[tuple[Any, ...], int] = {}
    for cell in cells:
        order.setdefault(cell.cluster_key, len(order))
    cells.sort(key=lambda c: (order[c.cluster_key], c.index))
    cells = [Cell(**{**c.__dict__, "index": i}) for i, c in enumerate(cells)]
    return Plan(cells, dropped)


def settings_for(spec: Spec, settings_set: str) -> dict[str, str]:
    """Every node's settings in the cells of ``settings_set``: [settings], then the set's
    (a set may be defined by nodes' sets alone: nothing then for every node)."""
    merged = {k: _setting_text(v) for k, v in spec.settings.items()}
    if settings_set != DEFAULT_SETTINGS_SET:
        merged.update({k: _setting_text(v)
                       for k, v in spec.settings_sets.get(settings_set, {}).items()})
    return merged


def node_settings(spec: Spec, settings_set: str, node: str) -> dict[str, str]:
    """What ``node`` gets over :func:`settings_for`'s in the cells of ``settings_set``:
    [nodes.NODE] settings, then [nodes.NODE.sets.SET]'s."""
    own = spec.nodes.get(node)
    if own is None:
        return {}
    merged = {k: _setting_text(v) for k, v in own.settings.items()}
    in_set = own.sets.get(settings_set)
    if in_set is not None:
        merged.update({k: _setting_text(v) for k, v in in_set.settings.items()})
    return merged


def flush_delay_us(spec: Spec, settings_set: str, node: str) -> int:
    """The µs each WAL flush of ``node`` is made slower in the cells of ``settings_set``
    (cluster/slow_flush.py): its set's, else [nodes.NODE]'s, else 0."""
    own = spec.nodes.get(node)
    if own is None:
        return 0
    in_set = own.sets.get(settings_set)
    if in_set is not None and in_set.flush_delay_us is not None:
        return in_set.flush_delay_us
    return own.flush_delay_us


def settings_set_names(spec: Spec) -> set[str]:
    """The settings sets the ``settings`` axis may name: [settings_sets.SET] and every
    [nodes.NODE.sets.SET]."""
    return {*spec.settings_sets, *(name for n in spec.nodes.values() for name in n.sets)}


def _setting_text(value: Scalar) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def link_profiles(spec: Spec) -> dict[str, LinkProfile]:
    """Every ``[links.NAME]`` as the network layer takes it, and ``none``: no delay."""
    from syncrep_lab.network.links import LinkProfile

    profiles = {name: LinkProfile(p.delay_ms, p.jitter_ms, p.loss_pct, p.rate)
                for name, p in spec.links.items()}
    profiles[NO_LINK] = LinkProfile()
    return profiles


def uses_namespaces(spec: Spec, cell: Cell | None = None) -> bool:
    """Whether the spec's nodes run in network namespaces of their own: any link other
    than ``none`` or ``socket`` somewhere in the spec, or ``[network] namespaces``. With
    ``cell``: whether that cell's do, which they do not when every link of the cell is
    ``socket`` (its nodes are then plain processes, as in a spec without links)."""
    net = spec.network
    named = [*(spec.matrix.link or []), net.replication, net.client,
             *net.standby_links.values()]
    if not (net.namespaces or any(n not in (NO_LINK, SOCKET) for n in named)):
        return False
    return cell is None or not all(n == SOCKET for n in cell_links(spec, cell).values())


def cell_links(spec: Spec, cell: Cell) -> dict[str, str]:
    """Each standby's link (``[links.NAME]``, ``none`` or ``socket``) in ``cell``, and
    the client's."""
    net = spec.network
    return {**{s: net.standby_links.get(s, cell.link)
               for s in standby_names(spec, cell.standbys)}, CLIENT_LINK: net.client}


CLIENT_LINK = "client"
