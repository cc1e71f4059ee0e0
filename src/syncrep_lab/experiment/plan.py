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
profile; ``instances``: primaries on the host at once) are ``cluster``-scoped:
numactl and a network namespace are given to a postmaster when it starts, so a
cell that changes them gets a fresh cluster.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from syncrep_lab.cluster.layout import CLIENT
from syncrep_lab.errors import UserError
from syncrep_lab.experiment.spec import Scalar, Spec

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
}
NO_FAULTS = "none"
NO_PLACEMENT = "none"
NO_LINK = "none"
MAX_CELLS = 5000
MAX_POINTS = 100_000  # combinations before exclude/only
DEFAULT_SETTINGS_SET = "default"


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

    @property
    def key(self) -> str:
        """Stable identity of a cell within a spec (used to resume)."""
        return ",".join(f"{k}={v}" for k, v in sorted(self.axes.items())) or "single"

    @property
    def cluster_key(self) -> tuple[Any, ...]:
        return (self.pg, self.standbys, self.settings_set, self.placement, self.cores,
                self.link, self.instances)

    def params(self) -> dict[str, Any]:
        """The cell's parameters as stored (cells.params_json). Axes left at their
        default are left out, so runs without them keep the parameters they always had."""
        params: dict[str, Any] = {
            "pg": self.pg, "standbys": self.standbys, "sync": self.sync,
            "settings": self.settings_set, "synchronous_commit": self.synchronous_commit,
            "clients": self.clients, "threads": self.threads, "batch": self.batch}
        if self.faults != NO_FAULTS:
            params["faults"] = self.faults
        if self.placement != NO_PLACEMENT:
            params["placement"] = self.placement
        if self.cores is not None:
            params["cores"] = self.cores
        if self.link != NO_LINK:
            params["link"] = self.link
        if self.instances != 1:
            params["instances"] = self.instances
        return params

    @property
    def label(self) -> str:
        short = {"synchronous_commit": "sc", "clients": "c", "threads": "j", "batch": "batch",
                 "standbys": "standbys", "settings": "set", "sync": "sync", "pg": "pg",
                 "faults": "faults", "placement": "place", "cores": "cores", "link": "link",
                 "instances": "inst"}
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
    from syncrep_lab.cluster.build import default_standby_names

    if spec.topology.names:
        return spec.topology.names[:standbys]
    return default_standby_names(standbys)


def _axis_values(spec: Spec) -> dict[str, list[Scalar]]:
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
    values = _axis_values(spec)
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
    merged = {k: _setting_text(v) for k, v in spec.settings.items()}
    if settings_set != DEFAULT_SETTINGS_SET:
        merged.update({k: _setting_text(v) for k, v in spec.settings_sets[settings_set].items()})
    return merged


def _setting_text(value: Scalar) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


Problem = tuple[tuple[str | int, ...], str]


def check_spec(spec: Spec) -> list[Problem]:
    """Impossible combinations, each with the key it should be reported at."""
    problems: list[Problem] = []
    m, wl, run = spec.matrix, spec.workload, spec.run
    if run.repeats_min > run.repeats_max:
        problems.append((("run", "repeats_min"),
                         f"repeats_min {run.repeats_min} > repeats_max {run.repeats_max}"))
    for i, f in enumerate([*m.exclude, *m.only]):
        kind, idx = ("exclude", i) if i < len(m.exclude) else ("only", i - len(m.exclude))
        for key in f:
            if key not in AXES:
                problems.append((("matrix", kind, idx),
                                 f"{key!r} is not an axis (axes: {', '.join(AXES)})"))
    for name in m.settings or []:
        if name != DEFAULT_SETTINGS_SET and name not in spec.settings_sets:
            problems.append((("matrix", "settings"),
                             f"no settings set {name!r} (define [settings_sets.{name}])"))
    problems += _fault_problems(spec)
    problems += placement_problems(spec)
    if wl.kind == "script" and not wl.script:
        problems.append((("workload", "script"), "kind = 'script' needs script = 'file.sql'"))
    if wl.kind != "insert" and (wl.batch != 1 or m.batch):
        problems.append((("workload", "batch"), f"batch applies to kind 'insert', not {wl.kind!r}"))
    if spec.topology.attach is not None:
        if spec.topology.sync is not None and not spec.topology.attach.allow_alter:
            problems.append((("topology", "sync"), "setting synchronous_standby_names of an "
                             "attached cluster needs permission: run --allow-alter (given "
                             "again with --resume, since it is not stored) or "
                             "topology.attach.allow_alter = true"))
        for axis in ("pg", "standbys", "settings"):
            if getattr(m, axis):
                problems.append((("matrix", axis),
                                 f"cannot vary {axis} of an attached cluster"))
        if m.sync and not spec.topology.attach.allow_alter:
            problems.append((("matrix", "sync"), "changing synchronous_standby_names of an "
                             "attached cluster needs permission: run --allow-alter (given "
                             "again with --resume, since it is not stored) or "
                             "topology.attach.allow_alter = true"))
    problems += _names_problems(spec)
    if problems:
        return problems
    # Counted before anything is expanded: a 10^7-cell matrix is refused at once.
    points = math.prod(len(v) for v in _axis_values(spec).values())
    if points > (MAX_POINTS if m.exclude or m.only else MAX_CELLS):
        before = " before exclude/only" if m.exclude or m.only else ""
        return [(("matrix",), f"{points} cells{before} is more than "
                 f"{MAX_POINTS if before else MAX_CELLS}; split the spec or use exclude/only")]
    plan = expand(spec)
    if not plan.cells:
        return [(("matrix",), "the matrix is empty after exclude/only")]
    if len(plan.cells) > MAX_CELLS:
        return [(("matrix",), f"{len(plan.cells)} cells is more than {MAX_CELLS}; "
                 "split the spec or use exclude/only")]
    seen: set[tuple[Any, ...]] = set()
    for cell in plan.cells:
        where_sync: tuple[str | int, ...] = ("matrix", "sync") if m.sync else ("topology", "sync")
        where_sc: tuple[str | int, ...] = (("matrix", "synchronous_commit")
                                           if m.synchronous_commit
                                           else ("workload", "synchronous_commit"))
        combo = (cell.standbys, cell.sync, cell.synchronous_commit, cell.settings_set,
                 cell.clients)
        if combo in seen:
            continue
        seen.add(combo)
        if spec.topology.attach is None and cell.sync is not None:
            try:
                _check_sync(cell.sync, standby_names(spec, cell.standbys))
            except UserError as exc:
                problems.append((where_sync, f"{cell.label}: {exc.cause}"))
                continue
        remote = cell.synchronous_commit in ("remote_write", "remote_apply")
        if remote and (cell.standbys == 0 or cell.sync == "") and spec.topology.attach is None:
            problems.append((where_sc, f"{cell.label}: synchronous_commit = "
                             f"{cell.synchronous_commit} with no synchronous standby would "
                             "silently mean 'local'"))
        settings = settings_for(spec, cell.settings_set)
        try:
            max_conn = int(settings.get("max_connections", "300"))
        except ValueError:
            in_set = "max_connections" in spec.settings_sets.get(cell.settings_set, {})
            problems.append(((("settings_sets", cell.settings_set) if in_set else ("settings",))
                             + ("max_connections",), f"max_connections = "
                             f"{settings['max_connections']!r} is not a whole number"))
            continue
        if cell.clients + 5 > max_conn:
            problems.append((("matrix", "clients") if m.clients else ("workload", "clients"),
                             f"{cell.clients} clients need max_connections >= "
                             f"{cell.clients + 5}, the server gets {max_conn}"))
    return problems


FAULT_TARGETS = ("sync", "potential")
STANDBY_ACTIONS = ("stop", "kill", "restart", "start", "pause", "link")


def _fault_problems(spec: Spec) -> list[Problem]:
    """Fault scenarios that name what is not there, or ask what cannot be done."""
    problems: list[Problem] = []
    for name in spec.matrix.faults or []:
        if name != NO_FAULTS and name not in spec.faults:
            problems.append((("matrix", "faults"),
                             f"no fault scenario {name!r} (define [faults.{name}])"))
    if spec.faults and spec.topology.attach is not None:
        problems.append((("faults",), "faults stop and start standbys, which an attached "
                         "cluster's owner does; run them on a cluster syncrep-lab builds"))
    standby_counts = spec.matrix.standbys or [spec.topology.standbys]
    names = set(standby_names(spec, max(standby_counts)))
    for name, scenario in spec.faults.items():
        for i, event in enumerate(scenario.events):
            where: tuple[str | int, ...] = ("faults", name, "events", i)
            if event.action in STANDBY_ACTIONS:
                if event.target is None:
                    problems.append((where, f"{event.action} needs a target: a standby's "
                                     f"name, or {' or '.join(FAULT_TARGETS)}"))
                elif event.target not in FAULT_TARGETS and event.target not in names:
                    problems.append((where, f"target {event.target!r} is not a standby "
                                     f"(standbys: {', '.join(sorted(names)) or 'none'}; or "
                                     f"{' or '.join(FAULT_TARGETS)})"))
                if event.for_ is not None and event.action in ("restart", "start"):
                    problems.append((where, f"'for' applies to stop, kill and pause, "
                                     f"not {event.action}"))
                if event.name is not None or event.value is not None:
                    problems.append((where, "name and value belong to action 'set'"))
                if event.action == "link":
                    if event.profile is None or event.profile not in spec.links:
                        problems.append((where, "link needs profile = the name of a "
                                         "[links.NAME] (defined: "
                                         f"{', '.join(sorted(spec.links)) or 'none'})"))
                    elif not uses_namespaces(spec):
                        problems.append((where, "link changes an emulated link: give the "
                                         "spec [network] namespaces = true or matrix.link"))
                elif event.profile is not None:
                    problems.append((where, "profile belongs to action 'link'"))
            else:
                if not event.name or event.value is None:
                    problems.append((where, "set needs name and value, e.g. name = "
                                     "'synchronous_standby_names', value = 'c'"))
                if event.target is not None or event.for_ is not None:
                    problems.append((where, "set changes the primary's setting: no target "
                                     "or 'for'"))
                if event.name == "synchronous_commit" and spec.topology.attach is not None:
                    problems.append((where, "cannot reload an attached cluster's settings"))
        if spec.faults and min(standby_counts) == 0 and any(
                e.action in STANDBY_ACTIONS for e in scenario.events):
            problems.append((("faults", name), "a standby fault needs standbys; a cell "
                             "with standbys = 0 cannot run it (exclude that combination)"))
    return problems


def _names_problems(spec: Spec) -> list[Problem]:
    """topology.names as cluster up takes them: usable, distinct, one per standby."""
    names = spec.topology.names
    if not names or spec.topology.attach is not None:
        return []
    from syncrep_lab.cluster.build import check_standby_names

    most = max(spec.matrix.standbys or [spec.topology.standbys])
    try:
        check_standby_names(names, len(names), "names")
    except UserError as exc:
        return [(("topology", "names"), exc.cause)]
    if len(names) < most:
        return [(("topology", "names"), f"{len(names)} names for {most} standbys")]
    return []


def _check_sync(text: str, standbys: list[str]) -> None:
    from syncrep_lab.cluster.build import check_sync

    check_sync(text, standbys, 180000)


CPU_GROUPS = ("nodes", "standbys", CLIENT)  # besides node names, in placement cpus/numa


def placement_problems(spec: Spec) -> list[Problem]:
    """Placements, links, instances and hosts that name what is not there, or combine
    what cannot be combined. What depends on this machine (its CPUs, NUMA nodes,
    cgroups, root) is checked by the runner's preflight, before anything is made."""
    from syncrep_lab.network.links import check_profile
    from syncrep_lab.placement.numa import check_policy

    problems: list[Problem] = []
    m, topo = spec.matrix, spec.topology
    most = max(m.standbys or [topo.standbys])
    nodes = {"primary", *standby_names(spec, most)}
    for name in m.placement or []:
        if name != NO_PLACEMENT and name not in spec.placements:
            problems.append((("matrix", "placement"),
                             f"no placement {name!r} (define [placements.{name}])"))
    for name, place in spec.placements.items():
        where: tuple[str | int, ...] = ("placements", name)
        for key, cpus in place.cpus.items():
            if key not in nodes and key not in CPU_GROUPS:
                problems.append(((*where, "cpus", key), f"{key!r} is not a node "
                                 f"({', '.join(sorted(nodes))}) or one of "
                                 f"{', '.join(CPU_GROUPS)}"))
            problems += _cpus_problems(cpus, (*where, "cpus", key))
        for key, cpus in place.pin.items():
            node, _, role = key.rpartition("/")
            if node and node not in nodes:
                problems.append(((*where, "pin", key), f"{node!r} is not a node "
                                 f"({', '.join(sorted(nodes))})"))
            base = role.split(":", 1)[0]
            if base not in PIN_ROLES:
                problems.append(((*where, "pin", key), f"{role!r} is not a role "
                                 f"({', '.join(PIN_ROLES)}; walsender:NAME for one standby's)"))
            problems += _cpus_problems(cpus, (*where, "pin", key))
        for key, policy in place.numa.items():
            if key not in nodes and key not in ("nodes", "standbys"):
                problems.append(((*where, "numa", key), f"{key!r} is not a node "
                                 f"({', '.join(sorted(nodes))}), nodes or standbys"))
            reason = check_policy(policy)
            if reason is not None:
                problems.append(((*where, "numa", key), reason))
        if m.cores and any(k != CLIENT for k in place.cpus):
            problems.append(((*where, "cpus"), "matrix.cores sets the servers' CPUs; give "
                             "only client here, or leave cores out"))
    if topo.attach is not None and (m.placement or m.cores or spec.placements):
        problems.append((("placements",) if spec.placements else ("matrix",),
                         "placement starts servers in cpusets and under numactl, which an "
                         "attached cluster's owner does; run it on a cluster syncrep-lab "
                         "builds"))
    # links
    link_names = [*(m.link or []), spec.network.replication, spec.network.client,
                  *spec.network.standby_links.values()]
    for name in link_names:
        if name != NO_LINK and name not in spec.links:
            where_l: tuple[str | int, ...] = ("matrix", "link") if name in (m.link or []) \
                else ("network",)
            problems.append((where_l, f"no link profile {name!r} (define [links.{name}])"))
    for standby in spec.network.standby_links:
        if standby not in nodes - {"primary"}:
            problems.append((("network", "standby_links", standby),
                             f"{standby!r} is not a standby"))
    for name, profile in link_profiles(spec).items():
        if name != NO_LINK:
            problems += [(("links", name), msg) for msg in check_profile(profile)]
    if uses_namespaces(spec) and topo.attach is not None:
        problems.append((("network",), "an attached cluster's network is its own; "
                         "emulated links need a cluster syncrep-lab builds"))
    # instances
    many = max(m.instances or [topo.instances]) > 1
    if many and topo.attach is not None:
        problems.append((("topology", "instances"), "an attached cluster is one instance"))
    if many and spec.faults:
        problems.append((("topology", "instances"), "fault scenarios act on one instance; "
                         "run them with instances = 1"))
    # hosts
    for node, host in topo.hosts.items():
        where_h: tuple[str | int, ...] = ("topology", "hosts", node)
        if host not in spec.hosts:
            problems.append((where_h, f"no host {host!r} (define [hosts.{host}])"))
        if node not in nodes - {"primary"}:
            problems.append((where_h, f"{node!r} is not a standby: only standbys can be "
                             "placed on SSH hosts"))
    if topo.hosts:
        for clash, what in ((topo.attach is not None, "an attached cluster"),
                            (many, "instances > 1"), (uses_namespaces(spec), "network links"),
                            (bool(spec.faults), "fault scenarios"),
                            (topo.clone != "basebackup", "clone = 'copy'")):
            if clash:
                fix = ("a standby on another host is made with pg_basebackup: set "
                       "topology.clone = 'basebackup'" if what == "clone = 'copy'"
                       else f"SSH hosts cannot be combined with {what}")
                problems.append((("topology", "hosts"), fix))
    return problems


PIN_ROLES = ("postmaster", "backend", "walsender", "walreceiver", "startup", "walwriter",
             "checkpointer", "bgwriter", "autovacuum")


def _cpus_problems(text: str, where: tuple[str | int, ...]) -> list[Problem]:
    from syncrep_lab.placement.cpus import parse_cpus

    try:
        parse_cpus(text)
    except UserError as exc:
        return [(where, exc.cause)]
    return []


def link_profiles(spec: Spec) -> dict[str, LinkProfile]:
    """Every ``[links.NAME]`` as the network layer takes it, and ``none``: no delay."""
    from syncrep_lab.network.links import LinkProfile

    profiles = {name: LinkProfile(p.delay_ms, p.jitter_ms, p.loss_pct, p.rate)
                for name, p in spec.links.items()}
    profiles[NO_LINK] = LinkProfile()
    return profiles


def uses_namespaces(spec: Spec) -> bool:
    """Whether the spec's nodes run in network namespaces of their own."""
    net = spec.network
    named = [*(spec.matrix.link or []), net.replication, net.client,
             *net.standby_links.values()]
    return net.namespaces or any(n != NO_LINK for n in named)
