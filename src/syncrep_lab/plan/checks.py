"""Every check of a spec on its own, in one place: :func:`check_spec`, pure: what the
spec says and what its cells say together (impossible combinations), each problem with
the key it is reported at, so ``load_spec`` (plan/load.py) can name the line. It reads
nothing of this machine and is what ``syncrep-lab run --check`` and every command that
loads a spec run first. What this machine must have for a spec is checked by
run/preflight.py before anything is created.

The rules a standby name and a ``synchronous_standby_names`` text follow are
PostgreSQL's and live in ``pg/sync_names.py``, where ``cluster up`` calls them too.
"""

from __future__ import annotations

import math
from typing import Any

from syncrep_lab.errors import UserError
from syncrep_lab.pg.builds import check_name, custom_flags
from syncrep_lab.pg.sync_names import check_standby_names, check_sync
from syncrep_lab.placement.layout import CLIENT
from syncrep_lab.plan.duet import duet_problem
from syncrep_lab.plan.matrix import (
    AXES,
    DEFAULT_SETTINGS_SET,
    MAX_CELLS,
    MAX_POINTS,
    NO_FAULTS,
    NO_LINK,
    NO_PLACEMENT,
    SOCKET,
    axis_values,
    expand,
    flush_delay_us,
    link_profiles,
    node_settings,
    settings_for,
    settings_set_names,
    standby_names,
    uses_namespaces,
)
from syncrep_lab.plan.spec import GUEST_PREFIX, HOST_KERNEL, MAX_GUESTS, Spec

Problem = tuple[tuple[str | int, ...], str]


def _build_problems(spec: Spec) -> list[Problem]:
    """[builds.NAME]: a usable build name, used by the matrix, and no attached cluster."""
    problems: list[Problem] = []
    used = {*(spec.matrix.pg or []), spec.topology.pg}
    for name in spec.builds:
        try:
            check_name(name)
        except UserError as exc:
            problems.append((("builds", name), exc.cause.replace("--name", "the build name")))
        if name not in used:
            problems.append((("builds", name), f"build {name!r} is not used: name it in "
                             f"matrix.pg or topology.pg, or leave [builds.{name}] out"))
        declared = spec.builds[name]
        try:
            custom_flags(declared.cflags, declared.configure)
        except UserError as exc:
            problems.append((("builds", name), exc.cause.replace("--configure", "configure")
                             .replace("--cflags", "cflags")))
    if spec.builds and spec.topology.attach is not None:
        problems.append((("builds",), "an attached cluster runs the server it has: builds "
                         "apply to clusters syncrep-lab makes"))
    return problems


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
        if name != DEFAULT_SETTINGS_SET and name not in settings_set_names(spec):
            problems.append((("matrix", "settings"),
                             f"no settings set {name!r} (define [settings_sets.{name}], or "
                             f"[nodes.NODE.sets.{name}] for one node)"))
    problems += _node_problems(spec)
    problems += _fault_problems(spec)
    problems += placement_problems(spec)
    problems += _build_problems(spec)
    if wl.kind == "script" and not wl.script:
        problems.append((("workload", "script"), "kind = 'script' needs script = 'file.sql'"))
    if wl.kind == "script" and "sysbench" in (m.driver or [wl.driver]):
        problems.append(((("matrix", "driver") if m.driver else ("workload", "driver")),
                         "sysbench runs the insert and pk-lookup workloads; a script is "
                         "pgbench's (use driver 'pgbench' for kind 'script')"))
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
    points = math.prod(len(v) for v in axis_values(spec).values())
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
    duet = duet_problem(spec, plan.cells)
    if duet is not None:
        problems.append((("run", "order"), duet))
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


OFF = ("off", "false", "no", "0", "f", "n")  # how PostgreSQL's booleans say off
NO_FLUSH_CALL = ("open_datasync", "open_sync")  # WAL made durable by its writes alone


def _node_problems(spec: Spec) -> list[Problem]:
    """[nodes.NAME]: a node the cells have, sets the matrix names, and a slow flush that
    can be paid: a node of this machine's that flushes its WAL with a call."""
    if not spec.nodes:
        return []
    if spec.topology.attach is not None:
        return [(("nodes",), "an attached cluster's nodes are set up by its owner: [nodes] "
                 "applies to clusters syncrep-lab makes")]
    problems: list[Problem] = []
    standby_counts = spec.matrix.standbys or [spec.topology.standbys]
    known = ["primary", *standby_names(spec, max(standby_counts))]
    sets = spec.matrix.settings or [DEFAULT_SETTINGS_SET]
    for name, node in spec.nodes.items():
        if name not in known:
            problems.append((("nodes", name), f"{name!r} is not a node of any cell (nodes: "
                             f"{', '.join(known)}): name one of them"))
            continue
        for set_name in node.sets:
            if set_name not in sets:
                problems.append((("nodes", name, "sets", set_name),
                                 f"settings set {set_name!r} is not in matrix.settings, so "
                                 "it never applies: add it there, or leave "
                                 f"[nodes.{name}.sets.{set_name}] out"))
        for set_name in sets:
            delay = flush_delay_us(spec, set_name, name)
            if delay == 0:
                continue
            in_set = node.sets.get(set_name)
            where: tuple[str | int, ...] = (
                ("nodes", name, "sets", set_name, "flush_delay_us")
                if in_set is not None and in_set.flush_delay_us is not None
                else ("nodes", name, "flush_delay_us"))
            problems += _slow_flush_problems(spec, set_name, name, where)
    return problems


def _slow_flush_problems(spec: Spec, set_name: str, node: str,
                         where: tuple[str | int, ...]) -> list[Problem]:
    """A node made to flush slowly that never flushes, or not here. The seed profile's
    fsync = off is the tool's and is overridden on that node (cluster/build.py); the
    user's own is refused, since overriding it would change what they asked for."""
    if node in spec.topology.hosts:
        return [(where, f"{node} runs on the SSH host {spec.topology.hosts[node]!r}, and a "
                 "slow flush is made on this machine: leave flush_delay_us out for it, or "
                 "run it here")]
    values = {**settings_for(spec, set_name), **node_settings(spec, set_name, node)}
    label = "" if set_name == DEFAULT_SETTINGS_SET else f" in settings set {set_name!r}"
    if values.get("fsync", "on").lower() in OFF:
        return [(where, f"{node}'s fsync is off{label}, so its WAL is never flushed and a "
                 "flush delay would never be paid: set fsync = true in "
                 f"[nodes.{node}.settings], or leave flush_delay_us out")]
    if values.get("wal_sync_method", "fdatasync").lower() in NO_FLUSH_CALL:
        return [(where, f"{node}'s wal_sync_method is {values['wal_sync_method']}{label}: "
                 "its WAL is made durable by its writes, with no flush to slow down; use "
                 "fdatasync or fsync there, or leave flush_delay_us out")]
    return []


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
                    elif spec.network.standby_links.get(event.target or "") == SOCKET:
                        problems.append((where, f"{event.target} replicates over the "
                                         "primary's unix socket (standby_links), with no "
                                         "link to change: target a standby with a link"))
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
    most = max(spec.matrix.standbys or [spec.topology.standbys])
    try:
        check_standby_names(names, len(names), "names")
    except UserError as exc:
        return [(("topology", "names"), exc.cause)]
    if len(names) < most:
        return [(("topology", "names"), f"{len(names)} names for {most} standbys")]
    return []


def _check_sync(text: str, standbys: list[str]) -> None:
    check_sync(text, standbys, 180000)


CPU_GROUPS = ("nodes", "standbys", CLIENT)  # besides node names, in placement cpus/numa


def placement_problems(spec: Spec) -> list[Problem]:
    """Placements, links, instances and hosts that name what is not there, or combine
    what cannot be combined. What depends on this machine (its CPUs, NUMA nodes,
    cgroups, root) is checked by check_machine, before anything is made."""
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
        for key, share in place.quota.items():
            problems += _quota_problems(spec, key, share, nodes, (*where, "quota", key))
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
        if name not in (NO_LINK, SOCKET) and name not in spec.links:
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
    if SOCKET in spec.links:
        problems.append((("links", SOCKET), f"{SOCKET!r} names no link (a standby beside the "
                         "primary, on its unix socket): give the profile another name"))
    problems += _socket_problems(spec, sorted(nodes - {"primary"}))
    if uses_namespaces(spec) and topo.attach is not None:
        problems.append((("network",), "an attached cluster's network is its own; "
                         "emulated links need a cluster syncrep-lab builds"))
    # instances
    many = max(m.instances or [topo.instances]) > 1
    if many and topo.attach is not None:
        problems.append((("topology", "instances"), "an attached cluster is one instance"))
    if spec.run.drop_caches and topo.attach is not None:
        problems.append((("run", "drop_caches"), "the page cache is dropped before a cluster "
                         "syncrep-lab builds; an attached cluster is built by its owner: "
                         "leave drop_caches out"))
    if many and spec.faults:
        problems.append((("topology", "instances"), "fault scenarios act on one instance; "
                         "run them with instances = 1"))
    # hosts
    guests = topo.guests.names() if topo.guests is not None else []
    for node, host in topo.hosts.items():
        where_h: tuple[str | int, ...] = ("topology", "hosts", node)
        if host not in spec.hosts and host not in guests:
            problems.append((where_h, f"no host {host!r} (define [hosts.{host}]"
                             + (f", or a guest: {', '.join(guests)})" if guests else
                                (", or topology.guests for a guest)"
                                 if host.startswith(GUEST_PREFIX) else ")"))))
        if node not in nodes | {"client"}:
            problems.append((where_h, f"{node!r} is not a node ({', '.join(sorted(nodes))}) "
                             "or the client"))
    problems += _guest_problems(spec, guests)
    problems += _kernel_problems(spec)
    problems += _placed_on_hosts(spec)
    # instances > 1 place each instance's nodes on the same hosts, each with its own data
    # dir (named after the instance's cluster dir) and port there
    if topo.hosts:
        standbys_there = bool(set(topo.hosts) - {"client"})
        for clash, fix in (
                (topo.attach is not None,
                 "an attached cluster's nodes run where their owner started them, and "
                 "topology.hosts places nodes syncrep-lab builds: leave out hosts, or "
                 "attach"),
                (uses_namespaces(spec),
                 "emulated links are veth pairs between this machine's network namespaces, "
                 "which an SSH host is not in (its own network is the link): leave out "
                 "[network] and matrix.link, or the hosts"),
                (topo.clone != "basebackup" and standbys_there,
                 "with a node on another host, the standbys are made with "
                 "pg_basebackup: set topology.clone = 'basebackup'")):
            if clash:
                problems.append((("topology", "hosts"), fix))
    return problems


def _guest_problems(spec: Spec, guests: list[str]) -> list[Problem]:
    """topology.guests: each guest holds a node (a guest nothing runs in is a boot for
    nothing), no [hosts.NAME] takes a guest's name, and a guest's nodes are built by
    the run (an attached cluster's are not)."""
    problems: list[Problem] = [
        (("hosts", name, "guest"), "guest is set by the run for the guests it boots: "
         "leave it out (topology.guests boots guests)")
        for name, host in spec.hosts.items() if host.guest is not None]
    if not guests:
        return problems
    topo = spec.topology
    where: tuple[str | int, ...] = ("topology", "guests")
    for name in spec.guest_names():
        if name in spec.hosts:
            problems.append((("hosts", name), f"{name!r} is a guest's name "
                             f"(topology.guests boots {', '.join(guests)}): name the "
                             "SSH host otherwise"))
    used = set(topo.hosts.values())
    if "guests" in (spec.matrix.isolation or [topo.isolation]) and used & set(guests):
        # instance i's guest nodes in guest i
        used |= set(guests[:max(spec.matrix.instances or [topo.instances])])
    empty = [g for g in guests if g not in used]
    if empty:
        problems.append((where, f"nothing runs in {', '.join(empty)}: place a node there "
                         f"(topology.hosts = {{ primary = {empty[0]!r} }}) or lower "
                         "topology.guests.count"))
    if topo.attach is not None:
        problems.append((where, "an attached cluster runs where its owner started it: "
                         "leave out topology.guests, or attach"))
    problems += _isolation_problems(spec, guests)
    if topo.guests is not None and topo.guests.vcpu_cpus is not None:
        problems += _cpus_problems(topo.guests.vcpu_cpus, ("topology", "guests", "vcpu_cpus"))
    if topo.guests is not None and topo.guests.memory_mb < MIN_NODE_MB * topo.guests.numa_nodes:
        problems.append((("topology", "guests", "numa_nodes"), f"{topo.guests.numa_nodes} "
                         f"NUMA nodes of {topo.guests.memory_mb // topo.guests.numa_nodes} "
                         f"MB each: a node needs {MIN_NODE_MB} MB at least (raise memory_mb "
                         "or lower numa_nodes)"))
    if (topo.guests is not None and topo.guests.modules is not None
            and not topo.guests.kernel.startswith("/")):
        problems.append((("topology", "guests", "modules"), "modules go with a kernel "
                         "given as a bzImage's path: set kernel to it, or leave modules out"))
    return problems


MIN_NODE_MB = 128  # a guest's virtual NUMA node's memory, at least


def _kernel_problems(spec: Spec) -> list[Problem]:
    """matrix.kernel: "host" or a kernel topology.guests.kernel could be, each once, in
    a spec with a node in a guest (else the axis would change nothing)."""
    from syncrep_lab.guests.kernel import package_for

    kernels = spec.matrix.kernel
    if kernels is None:
        return []
    where: tuple[str | int, ...] = ("matrix", "kernel")
    topo = spec.topology
    if topo.guests is not None and not spec.guest_kernels():
        return [(where, "a kernel axis of 'host' alone boots no guest: add a guest kernel "
                 "(kernel = ['host', 'debian-6.1']), or leave out the axis")]
    if topo.guests is None or not any(spec.is_guest(h) for h in topo.hosts.values()):
        return [(where, "the kernel axis is the kernel of the nodes placed in a guest: set "
                 "topology.guests and place a node in guest1 (topology.hosts = "
                 "{ primary = 'guest1' })")]
    problems: list[Problem] = []
    for i, name in enumerate(kernels):
        if name in kernels[:i]:
            problems.append(((*where, i), f"{name!r} is on the axis twice"))
        elif name != HOST_KERNEL and not name.startswith("/"):
            try:
                package_for(name)
            except UserError as exc:
                problems.append(((*where, i), f"{exc.cause}; or {HOST_KERNEL!r}, this "
                                 "machine's own"))
    guests = len(spec.guest_kernels()) * topo.guests.count
    if guests > MAX_GUESTS:
        problems.append((where, f"{len(spec.guest_kernels())} guest kernels of "
                         f"{topo.guests.count} guests each would boot {guests} guests, "
                         f"more than {MAX_GUESTS}: fewer kernels, or fewer guests"))
    return problems


def _isolation_problems(spec: Spec, guests: list[str]) -> list[Problem]:
    """``isolation = "guests"`` puts instance i's guest nodes in guest i: there must be
    guests, a node placed in one, and a guest for every instance."""
    topo, m = spec.topology, spec.matrix
    isolations = m.isolation or [topo.isolation]
    if "guests" not in isolations:
        return []
    where: tuple[str | int, ...] = (("matrix", "isolation") if m.isolation
                                    else ("topology", "isolation"))
    if not guests or not any(spec.is_guest(h) for h in topo.hosts.values()):
        return [(where, "isolation 'guests' puts each instance's nodes in a guest of its "
                 "own: set topology.guests and place a node in guest1 (topology.hosts = "
                 "{ primary = 'guest1' })")]
    most = max(m.instances or [topo.instances])
    if most > len(guests):
        return [(where, f"isolation 'guests' gives each of {most} instances a guest of its "
                 f"own, and topology.guests boots {len(guests)}: set topology.guests.count "
                 f"= {most}")]
    return []


def _socket_problems(spec: Spec, standbys: list[str]) -> list[Problem]:
    """A ``socket`` link puts a standby (or the client) on the primary's unix socket:
    not one on an SSH host, nor any beside a primary on one."""
    net, hosts = spec.network, spec.topology.hosts
    axis = [*(spec.matrix.link or []), net.replication]
    beside = [s for s in standbys if net.standby_links.get(s) == SOCKET
              or (s not in net.standby_links and SOCKET in axis)]
    if net.client == SOCKET:
        beside.append("client")
    problems: list[Problem] = []
    for node in beside:
        if node in hosts:
            problems.append((("network", "standby_links", node) if node in net.standby_links
                             else ("network",),
                             f"{node} runs on SSH host {hosts[node]}, which the primary's "
                             f"unix socket does not reach: give {node} a link, or leave it "
                             "out of topology.hosts"))
        elif "primary" in hosts:
            problems.append((("network",), f"the primary runs on SSH host {hosts['primary']}"
                             f" and {node} here, so {node} cannot use its unix socket: give "
                             f"{node} a link, or place {node} on that host"))
    return problems


def _placed_on_hosts(spec: Spec) -> list[Problem]:
    """Placements of what runs on an SSH host. A node's (or the client's) ``cpus`` and
    ``numa`` named directly are applied there: a CPU affinity and a numactl policy its
    postmaster starts under; its role pins are affinities set there as its processes
    appear (all checked against that host in :func:`check_hosts`). What would act from
    this machine is refused at its key: exclusive cpusets, a group key that takes in a
    node on a host (name each node), and matrix.cores (this machine's CPUs)."""
    remote = set(spec.topology.hosts)
    if not remote:
        return []
    groups = {"nodes", "standbys"} if remote - {"client"} else set()
    problems: list[Problem] = []
    for name, place in spec.placements.items():
        for kind, keys in (("cpus", place.cpus), ("numa", place.numa)):
            for key in keys:
                if key in groups:
                    problems.append((("placements", name, kind, key),
                                     f"{key!r} takes in nodes on SSH hosts "
                                     f"({', '.join(sorted(remote - {'client'}))}): name each "
                                     "node instead (those on hosts are placed there)"))
        on_hosts = sorted(k for k in place.cpus if k in remote)
        if place.exclusive and on_hosts:
            problems.append((("placements", name, "exclusive"),
                             f"exclusive cpusets are made on this machine only, and "
                             f"{', '.join(on_hosts)} run on SSH hosts, where cpus are a CPU "
                             "affinity: set exclusive = false, or place only nodes here"))
    if spec.matrix.cores and remote - {"client"}:
        problems.append((("matrix", "cores"),
                         "cores limits this machine's CPUs, and nodes run on SSH hosts: give "
                         "each node its cpus in a placement instead"))
    return problems


PIN_ROLES = ("postmaster", "backend", "walsender", "walreceiver", "startup", "walwriter",
             "checkpointer", "bgwriter", "autovacuum")


def _quota_problems(spec: Spec, key: str, share: float, nodes: set[str],
                    where: tuple[str | int, ...]) -> list[Problem]:
    """A quota's key names a role as a pin's does; its share is one the kernel can set."""
    from syncrep_lab.placement.quota import SMALLEST_SHARE

    node, _, role = key.rpartition("/")
    node = node or "primary"
    base, sep, standby = role.partition(":")
    if node not in nodes:
        return [(where, f"{node!r} is not a node ({', '.join(sorted(nodes))})")]
    if sep and (base != "walsender" or standby not in nodes - {"primary"}):
        return [(where, f"{role!r}: only a walsender is named by its standby, and "
                 f"{standby!r} is not one ({', '.join(sorted(nodes - {'primary'}))})")]
    if base not in PIN_ROLES or base == "postmaster":
        return [(where, f"{role!r} is not a role a quota can hold "
                 f"({', '.join(r for r in PIN_ROLES if r != 'postmaster')}; walsender:NAME "
                 "for one standby's); the postmaster's children would start in its quota")]
    if node in spec.topology.hosts:
        return [(where, f"{node} runs on SSH host {spec.topology.hosts[node]}, where a quota "
                 "group would need root; give the quota to a node on this machine")]
    if not SMALLEST_SHARE <= share <= 4096:
        return [(where, f"a share of {share} CPUs: give at least {SMALLEST_SHARE} (the "
                 "kernel's 1 ms quota in its longest period, 1 s); 0.05 is 5 % of one CPU")]
    return []


def _cpus_problems(text: str, where: tuple[str | int, ...]) -> list[Problem]:
    from syncrep_lab.placement.cpus import parse_cpus

    try:
        parse_cpus(text)
    except UserError as exc:
        return [(where, exc.cause)]
    return []


# --- this machine ------------------------------------------------------------
