"""The clusters a run works on: one per cluster key, built, held and taken down here.

``ActiveCluster`` is one cluster key's cluster (one per instance), built by the tool
or attached. ``ClusterPool`` holds the run's clusters: one at a time by default, and
several at once when the run interleaves the cells of several clusters (``units``
decides which can be held together and says why the others cannot). A cluster that is
not the current one stays up and idle; switching to it costs nothing but a reload when
the cell asks for another ``synchronous_standby_names``.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import psycopg

from syncrep_lab import paths
from syncrep_lab.cluster.build import UpOptions, up
from syncrep_lab.cluster.manifest import load
from syncrep_lab.cluster.ready import manifest_log_tail, wait_replication
from syncrep_lab.cluster.teardown import remove_cluster
from syncrep_lab.errors import UserError
from syncrep_lab.hosts.ssh import HostSpec
from syncrep_lab.pg import replication, sync_names
from syncrep_lab.pg.admin import admin_connection, alter_system
from syncrep_lab.pg.builds import build_at
from syncrep_lab.pg.conninfo import mask_conninfo, mask_text
from syncrep_lab.pg.installations import for_server, resolve
from syncrep_lab.pg.settings import profile_settings
from syncrep_lab.pg.sync_names import check_sync
from syncrep_lab.plan.baselines import baselines
from syncrep_lab.plan.duet import NotPaired, Pair
from syncrep_lab.plan.matrix import (
    NO_PLACEMENT,
    Cell,
    cell_hosts,
    flush_delay_us,
    node_settings,
    settings_for,
    standby_names,
)
from syncrep_lab.plan.spec import GUEST_PREFIX, MAX_INSTANCES, Attach, Spec
from syncrep_lab.probes.session import ProbeNode
from syncrep_lab.run.context import RunContext
from syncrep_lab.run.placement_watch import start_pinners
from syncrep_lab.run.target import Target
from syncrep_lab.runas import server_account
from syncrep_lab.store import cluster_key_text
from syncrep_lab.store.keys import with_defaults

ADMIN_SECONDS = 10.0  # any of the tool's own short statements (pg/admin.py)



def instance_host(spec: Spec, cell: Cell, host: str, instance: int) -> str:
    """The host instance ``instance`` of ``cell`` puts a node on that topology.hosts
    places on ``host``: the same for every instance, but for a guest under
    ``isolation = "guests"``, where instance i has guest i (a kernel of its own); a
    guest is the one booted with the cell's kernel (matrix.kernel)."""
    if not spec.is_guest(host):
        return host
    if cell.isolation == "guests":
        host = f"{GUEST_PREFIX}{instance}"
    return spec.guest_of(host, cell.kernel)


def cell_host(spec: Spec, cell: Cell, host: str, instance: int) -> HostSpec:
    """The SSH host of a node of ``cell``'s instance ``instance`` on ``host``. A guest
    runs this machine's own installations through its share of the root, so there the
    PostgreSQL is the cell's (a ``pg`` axis puts 9.6 and 18 in the same guest), where
    an SSH host keeps its ``bin_dir``."""
    at = spec.ssh_host(instance_host(spec, cell, host, instance))
    if at.guest is None:
        return at
    return replace(at, bin_dir=str(for_server(cell.pg, server_account()).bin_dir))


class ActiveCluster:
    """The cluster the current cells run on.

    A cluster syncrep-lab builds is rebuilt when the cells' cluster key changes
    and removed at the end. An attached cluster (``topology.attach``) is never
    provisioned, restarted or stopped: the workload's own tables are dropped at
    the end and, with ``allow_alter``, synchronous_standby_names is put back.
    """

    def __init__(self, ctx: RunContext, *, slot: int = 0,
                 generations: Iterator[int] | None = None) -> None:
        self.ctx = ctx
        self.slot = slot  # its place in the pool: its directories' names
        self.key: tuple[Any, ...] | None = None
        self.target: Target | None = None
        self.targets: list[Target] = []  # one per instance; target is the first
        self.sync: str | None = None
        self.original_sync: str | None = None
        # a number no other cluster of this run (made or attached) had: what the runner
        # keys the tables and warm-ups it did on a cluster by
        self.generation = 0
        self._generations = generations or itertools.count(1)
        self.dir = slot_dir(ctx.store.folder, slot)
        # a duet's side: the CPUs its nodes and client are confined to (run/duet.py)
        self.cpus: list[int] | None = None
        # the ports the other clusters held beside this one have on hosts (ClusterPool)
        self.pool_ports: Callable[[], set[int]] = set

    def host_ports(self) -> set[int]:
        """The ports this cluster's nodes on SSH hosts and in guests listen on there."""
        return {n.port for t in self.targets if t.manifest
                for n in t.manifest.nodes if n.host is not None}

    @property
    def attach(self) -> Attach | None:
        return self.ctx.spec.topology.attach

    def for_cell(self, cell: Cell) -> Target:
        if self.target is not None and self.key == cell.cluster_key:
            return self.target
        self.down()
        self.ctx.events.phase(cell, "cluster up" if self.attach is None else "attach")
        self.key = cell.cluster_key  # recorded with the cluster by _build/_attach
        self.target = self._attach() if self.attach is not None else self._build(cell)
        if self.attach is not None:
            self.targets = [self.target]
        self.generation = next(self._generations)
        return self.target

    def instance_dir(self, instance: int) -> Path:
        return instance_dir(self.dir, instance)

    def _build(self, cell: Cell) -> Target:
        """The cell's clusters: one per instance, each in its own layout."""
        from syncrep_lab.plan.placement import layout_for

        spec = self.ctx.spec
        topo = spec.topology
        self._remove_leftovers()
        self.targets = []
        hosts = cell_hosts(spec, cell)
        if spec.run.drop_caches:
            from syncrep_lab.cluster.caches import drop

            at = (cell_host(spec, cell, host, i) for host in hosts.values()
                  for i in range(1, cell.instances + 1))
            took = drop(list({h.name: h for h in at}.values()))  # each host once
            self.ctx.events.message(f"{cell.label}: page cache dropped before its cluster ("
                                    + ", ".join(f"{h} {s:.1f} s" for h, s in took.items())
                                    + ")")
        for instance in range(1, cell.instances + 1):
            manifest = up(UpOptions(
                dir=self.instance_dir(instance), pg=cell.pg, standbys=cell.standbys,
                names=topo.names[: cell.standbys] if topo.names else None, sync=cell.sync,
                tcp=topo.tcp, settings=settings_for(spec, cell.settings_set),
                node_settings={node: node_settings(spec, cell.settings_set, node)
                               for node in spec.nodes},
                flush_delay_us={node: flush_delay_us(spec, cell.settings_set, node)
                                for node in spec.nodes},
                profile=topo.profile, clone=topo.clone, timeout=spec.run.ready_timeout,
                layout=layout_for(spec, cell, instance, self.dir.name[4:], self.cpus),
                hosts={node: asdict(cell_host(spec, cell, host, instance))
                       for node, host in hosts.items()
                       if node in ("primary", *standby_names(spec, cell.standbys))},
                client_host=(asdict(cell_host(spec, cell, hosts["client"], instance))
                             if "client" in hosts else None),
                # ports are picked free here; a host's are its own, so none that a node
                # of this cluster or of another held beside it has on a host
                taken_ports=frozenset(self.host_ports() | self.pool_ports()),
            ))
            inst = resolve(manifest.bin_dir)
            self._record(cell, manifest.version, manifest.bin_dir,
                         {n.name: manifest.admin_conninfo(n) for n in manifest.nodes},
                         [{"name": n.name, "role": n.role, "port": n.port,
                           # where it ran: an SSH host's or guest's name (none: here)
                           **({"host": n.host["name"]} if n.host is not None else {}),
                           **({"instance": instance} if cell.instances > 1 else {}),
                           **({"flush_delay_us": n.flush_delay_us}
                              if n.flush_delay_us else {})}
                          for n in manifest.nodes])
            # a node on an SSH host has no local processes: its CPU comes over SSH
            named = self.ctx.named
            nodes = [ProbeNode(n.name, named(manifest.admin_conninfo(n)),
                               n.data_dir(manifest.dir) if n.host is None else None,
                               n.role == "primary")
                     for n in manifest.nodes]
            target = Target(named(manifest.conninfo(manifest.primary), "pgbench"),
                            named(manifest.admin_conninfo(manifest.primary)),
                            [n.name for n in manifest.standbys], inst.version.num,
                            inst.program("pgbench"), manifest_log_tail(manifest), nodes,
                            manifest, instance=instance)
            self.targets.append(target)
            target.pinners = start_pinners(manifest)
        self.sync = cell.sync
        return self.targets[0]

    def _remove_leftovers(self) -> None:
        remove_leftovers(self.dir)

    def _attach(self) -> Target:
        attach, visit = self.attach, self.ctx.visit
        assert attach is not None and visit is not None
        visit.record()  # before the first session: a killed run's are found by clean
        primary = self.ctx.named(attach.primary)
        try:
            with admin_connection(primary, seconds=ADMIN_SECONDS,
                                  what="the attached primary") as conn:
                version = conn.execute("select current_setting('server_version'), "
                                       "current_setting('server_version_num')::int, "
                                       "current_setting('synchronous_standby_names')").fetchone()
                names = [str(r[0]) for r in conn.execute(
                    "select application_name from pg_stat_replication")]
        except psycopg.Error as exc:
            raise UserError(f"cannot connect to the attached primary: "
                            f"{mask_text(str(exc).strip())}",
                            "check topology.attach.primary (and that the server runs)") from None
        assert version is not None
        self.sync = self.original_sync = str(version[2])
        client = resolve(None)
        standbys = {k: self.ctx.named(v) for k, v in attach.standbys.items()}
        nodes = {"primary": primary, **standbys}
        self._record(None, str(version[0]), "attached", nodes,
                     [{"name": k, "role": "primary" if k == "primary" else "standby"}
                      for k in nodes])
        probe_nodes = [ProbeNode("primary", primary, None, True)]
        probe_nodes += [ProbeNode(k, v, None, False) for k, v in sorted(standbys.items())]
        return Target(self.ctx.named(attach.primary, "pgbench"), primary,
                      sorted(set(names) | set(attach.standbys)), int(version[1]),
                      client.program("pgbench"), None, probe_nodes)

    def _record(self, cell: Cell | None, version: str, bin_dir: str, nodes: dict[str, str],
                described: list[dict[str, Any]]) -> None:
        settings: dict[str, Any] = {}
        for name, conninfo in nodes.items():
            try:
                with admin_connection(conninfo, seconds=ADMIN_SECONDS, what=name) as conn:
                    rows = conn.execute(
                        "select name, setting, unit, source from pg_settings "
                        "where source not in ('default', 'override', 'client') "
                        "order by name").fetchall()
            except psycopg.Error as exc:
                settings[name] = {"error": mask_text(str(exc).strip())}
                continue
            # 'client': this session's own (its timeouts, its name), not the server's.
            # A standby's primary_conninfo may carry its password: never stored.
            settings[name] = {
                r[0]: {"setting": mask_conninfo(r[1]) if "conninfo" in r[0] and r[1] else r[1],
                       "unit": r[2], "source": r[3]} for r in rows}
        key = cluster_key_text(cell.params()) if cell is not None else json.dumps(
            list(self.key or ())[:3])
        built = build_at(bin_dir) if cell is not None else None
        self.ctx.store.add_cluster(self.ctx.run_id, key, version, bin_dir, described,
                                      settings, built.describe() if built else None)

    def confine(self, cpus: list[int]) -> None:
        """A duet's side moved to ``cpus`` (run/duet.py): its nodes' and client's cpusets
        rewritten under the running servers, and its manifest saying so (what `costs`,
        the read-back and a rebuilt cluster read)."""
        if self.cpus == cpus:
            return
        from syncrep_lab.placement.layout import reconfine

        for target in self.targets:
            manifest = target.manifest
            layout = manifest.placed() if manifest is not None else None
            if manifest is None or layout is None:
                continue
            reconfine(layout, cpus)
            manifest.layout = layout.to_json()
            manifest.save()
        self.cpus = list(cpus)

    def set_sync(self, cell: Cell) -> None:
        """synchronous_standby_names by reload, then wait for the states it implies."""
        target = self.target
        assert target is not None
        if cell.sync is None or cell.sync == self.sync:
            return
        self.ctx.events.phase(cell, "reload")
        for each in self.targets or [target]:
            self._alter_sync(each, cell.sync)

    def _alter_sync(self, target: Target, text: str) -> None:
        _, rendered = check_sync(text, target.standbys, target.version_num)
        if self.ctx.visit is not None and self.original_sync is not None:
            self.ctx.visit.will_alter_sync(self.original_sync)  # recorded before it changes
        with admin_connection(target.admin, seconds=ADMIN_SECONDS, what="the primary") as conn:
            alter_system(conn, {"synchronous_standby_names": rendered})
        self.wait_streaming(target, text)
        self.sync = text

    def wait_streaming(self, target: Target, text: str | None = None) -> None:
        """Return once every standby of ``target`` streams in the sync state the sync
        text (default: the one in force) gives it."""
        text = self.sync if text is None else text
        spec = check_sync(text, target.standbys, target.version_num)[0] if text else None
        wait_replication(target.admin, sync_names.expect(spec, target.standbys),
                         time.monotonic() + self.ctx.spec.run.ready_timeout, target.log_of)

    def down(self) -> None:
        if self.attach is not None:
            if self.target is not None:
                self._leave_attached()
        else:
            for target in self.targets:
                for pinner in target.pinners:
                    pinner.stop()
            self._remove_leftovers()
        self.target = None
        self.targets = []
        self.key = None

    def _leave_attached(self) -> None:
        """The run's sessions ended, its tables dropped, the setting put back (bounded;
        run/attached.py); what could not be done is said, with how to finish."""
        visit = self.ctx.visit
        assert visit is not None
        report = visit.leave(self.sync)
        if report.sync_restored is not None:
            self.sync = report.sync_restored
        for line in report.lines():
            self.ctx.events.message(line)

    def require_acknowledging(self, cell: Cell) -> None:
        """A cell whose commits wait for a standby starts only when the primary can
        acknowledge them: otherwise it fails at once with the cause, instead of waiting."""
        if cell.synchronous_commit not in replication.WAITING_LEVELS:
            return
        if self.attach is None and not (self.sync or "").strip():
            return  # a built cluster without synchronous standbys: `on` is `local` there
        for target in self.targets or ([self.target] if self.target is not None else []):
            with admin_connection(target.admin, seconds=ADMIN_SECONDS,
                                  what="the primary") as conn:
                row = conn.execute("select current_setting('synchronous_standby_names')"
                                   ).fetchone()
                seen = replication.walsenders(conn)
            assert row is not None
            problem = replication.shortfall(str(row[0]), seen, target.version_num)
            if problem is not None:
                raise UserError(f"cell {cell.label} not started: {problem[0]}", problem[1])


def instance_dir(base: Path, instance: int) -> Path:
    """Where instance ``instance`` (from 1) of the cluster in ``base`` lives."""
    return base if instance == 1 else base.with_name(f"{base.name}-i{instance}")


def remove_leftovers(base: Path) -> None:
    """Clusters of this run left in ``base`` (every instance) by a killed process:
    ours, removed."""
    for instance in range(1, MAX_INSTANCES + 1):
        if load(instance_dir(base, instance)) is not None:
            remove_cluster(instance_dir(base, instance))


def slot_dir(run_folder: Path, slot: int) -> Path:
    """Where the run in ``run_folder`` builds the cluster of pool slot ``slot``."""
    digest = hashlib.sha256(str(run_folder.resolve()).encode()).hexdigest()[:10]
    return paths.state_dir() / "clusters" / (f"run-{digest}" if slot == 0
                                             else f"run-{digest}-k{slot}")


MAX_SLOTS = 16  # clusters one run may hold up at once


TWIN = ("twin",)  # a pool key's tail for the second cluster of one key (a duet's twin)


def pool_key(cell: Cell, twin: bool = False) -> tuple[Any, ...]:
    """Which of the pool's clusters a cell runs on: its cluster key, or in a duet whose
    pair shares a cluster its twin's (plan/duet.py ``Pair.twin``): a second cluster
    made like the first, so that each side has one to confine to its CPUs."""
    return cell.cluster_key + TWIN if twin else cell.cluster_key


class ClusterPool:
    """The run's clusters, by pool key (``pool_key``). ``keep`` names the pool keys that
    may stay up together (the current unit's); a cell whose cluster is not up takes
    down every other cluster outside ``keep`` before its own is built, so outside a unit
    of several clusters at most one is up."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.held: dict[tuple[Any, ...], ActiveCluster] = {}
        self.keep: set[tuple[Any, ...]] = set()
        self._generations = itertools.count(1)
        self.current = ActiveCluster(ctx, slot=0, generations=self._generations)
        # a duet's: the CPUs a pool key's side is confined to, for when it is built
        self.confined: dict[tuple[Any, ...], list[int]] = {}

    def for_cell(self, cell: Cell, twin: bool = False) -> Target:
        """The cell's cluster (its twin's with ``twin``), made the current one (built if
        it is not up)."""
        key = pool_key(cell, twin)
        cluster = self.held.get(key)
        if cluster is None or cluster.target is None:
            for other_key, other in list(self.held.items()):
                if other_key != key and other_key not in self.keep:
                    other.down()
                    del self.held[other_key]
            if cluster is None:
                used = {c.slot for c in self.held.values()}
                slot = next(i for i in range(MAX_SLOTS) if i not in used)
                cluster = ActiveCluster(self.ctx, slot=slot,
                                        generations=self._generations)
                cluster.cpus = self.confined.get(key)
                cluster.pool_ports = functools.partial(self._host_ports, key)
                self.held[key] = cluster
        self.current = cluster
        return cluster.for_cell(cell)

    def _host_ports(self, key: tuple[Any, ...]) -> set[int]:
        """The ports on hosts of every held cluster but ``key``'s."""
        return {p for k, c in self.held.items() if k != key for p in c.host_ports()}

    def down(self) -> None:
        """Every cluster of the run down, and any a killed run of it left in a slot."""
        errors: list[Exception] = []
        for cluster in list(self.held.values()):
            try:
                cluster.down()
            except Exception as exc:  # the others still go down
                errors.append(exc)
        self.held.clear()
        if self.ctx.spec.topology.attach is None:
            for slot in range(MAX_SLOTS):
                remove_leftovers(slot_dir(self.ctx.store.folder, slot))
        else:
            self.current.down()
        if errors:
            raise errors[0]


# --- which clusters a run can hold up at once ---------------------------------------------

POOL_MEMORY_SHARE = 0.75  # of MemAvailable: what the held clusters' configured memory may take
NODE_OVERHEAD = 48 * 1024 * 1024  # a node's own processes beyond its shared memory


@dataclass
class Unit:
    """Cells whose clusters are held up together and whose rounds interleave."""

    groups: list[list[Cell]]
    why_alone: str | None = None  # a cluster run on its own (not pooled): why

    @property
    def cells(self) -> list[Cell]:
        return [c for g in self.groups for c in g]


@dataclass
class PoolPlan:
    units: list[Unit]
    said: str | None = None  # the decision in one line, when there was one to make
    estimate: dict[str, Any] = field(default_factory=dict)


def units(spec: Spec, groups: list[list[Cell]], order: str, available: int | None = None
          ) -> PoolPlan:
    """The plan's cluster groups as units: every group that can be held up beside the
    others in one unit, each other group alone. Held together are clusters the tool
    builds on this machine, in network namespaces too (each slot's are its own, and an
    idle cluster's links carry nothing), several instances among them; a placement,
    cores or a standby on an SSH host take a cluster out (their cpusets and remote
    standbys are made for one cluster at a time, and one cluster's CPUs would be
    another's),
    and so does memory: the held clusters' shared_buffers and wal_buffers, with
    ``NODE_OVERHEAD`` per node, must fit in three quarters of MemAvailable (configured,
    not resident: the tables are emptied before every repeat, so little of it is touched)."""
    if len(groups) <= 1 or spec.topology.attach is not None:
        return PoolPlan([Unit(groups)] if groups else [])
    if order == "blocked":
        return PoolPlan([Unit([g]) for g in groups])
    alone: dict[int, str] = {}
    for i, group in enumerate(groups):
        why = _why_alone(spec, group[0])
        if why is not None:
            alone[i] = why
    pooled = [i for i in range(len(groups)) if i not in alone]
    memory = {i: cluster_memory(spec, groups[i][0]) for i in pooled}
    need = sum(memory.values())
    available = meminfo_available() if available is None else available
    estimate = {"clusters": len(pooled), "memory_needed": need, "memory_available": available}
    limit = None if available is None else POOL_MEMORY_SHARE * available
    held = _held_together(spec, groups, pooled, memory, limit)
    # a cluster left out of every set: the only one that could be pooled, or memory
    short = (f"{len(pooled)} clusters need about {_mib(need)} of shared memory, more "
             f"than 3/4 of the {_mib(available or 0)} available")
    in_held = {i for unit in held for i in unit}
    for i in pooled:
        if i not in in_held:
            alone[i] = (short if len(pooled) > 1
                        else "the only cluster that could be held with others")
    out = [Unit([groups[i] for i in unit]) for unit in held]
    for i, group in enumerate(groups):
        if i in alone:
            out.append(Unit([group], why_alone=alone[i]))
    sizes = " and ".join(str(len(u)) for u in held)
    together = (f"{sizes} clusters held up at once, their cells interleaved" if len(held) == 1
                else f"{sizes} clusters held up at once in turn, the cells of each set "
                     "interleaved")
    if held and len(held[0]) == len(groups):
        said = f"{len(groups)} clusters held up at once, the cells of all interleaved"
    elif held:
        said = (f"{together}; {len(alone)} more one after another ({_reasons(alone)})"
                if alone else f"{together} ({short}: those that pair the most comparisons "
                              "held together)")
    else:
        said = (f"{len(groups)} clusters one after another, the cells of each interleaved "
                f"(comparisons across clusters are not paired in time: {_reasons(alone)})")
    return PoolPlan(out, said, estimate)


@dataclass(frozen=True)
class DuetUnit:
    """Pairs of a duet whose clusters are held up together (pool keys, ``pool_key``),
    their rounds run as one; the pairs by their number in plan/duet.py's list."""

    pairs: list[tuple[int, Pair]]
    keys: frozenset[tuple[Any, ...]]


def pair_keys(pair: Pair) -> frozenset[tuple[Any, ...]]:
    """The pool keys of a pair's two sides: the baseline's cluster and the cell's (a
    twin of the baseline's where they share one)."""
    return frozenset({pool_key(pair.base), pool_key(pair.cell, pair.twin)})


def duet_units(spec: Spec, pairs: list[Pair], available: int | None = None
               ) -> tuple[list[DuetUnit], str | None]:
    """A duet's pairs in units whose clusters fit in memory together (the rule
    ``units`` applies: configured shared memory within 3/4 of MemAvailable), each pair
    in the first unit it fits, in the plan's order; and a line saying so where there is
    more than one. A pair always runs its two sides at the same moment: only pairs of
    two units run at other times, and no ratio is taken across them. A pair whose own
    two clusters do not fit raises NotPaired with the figures."""
    memory: dict[tuple[Any, ...], int] = {}
    for pair in pairs:
        for cell, twin in ((pair.base, False), (pair.cell, pair.twin)):
            memory.setdefault(pool_key(cell, twin), cluster_memory(spec, cell))
    available = meminfo_available() if available is None else available
    limit = None if available is None else POOL_MEMORY_SHARE * available
    made: list[tuple[list[tuple[int, Pair]], set[tuple[Any, ...]]]] = []
    for number, pair in enumerate(pairs):
        keys = pair_keys(pair)
        if limit is not None and sum(memory[k] for k in keys) > limit:
            raise NotPaired(
                f"a duet holds up both clusters of a pair at once, and those of "
                f"{pair.cell.label} and its baseline need about "
                f"{_mib(sum(memory[k] for k in keys))} of shared memory, more than 3/4 "
                f"of the {_mib(available or 0)} available")
        home = next((u for u in made if limit is None
                     or sum(memory[k] for k in u[1] | keys) <= limit), None)
        if home is None:
            made.append(([(number, pair)], set(keys)))
        else:
            home[0].append((number, pair))
            home[1].update(keys)
    out = [DuetUnit(ps, frozenset(ks)) for ps, ks in made]
    said = None
    if len(out) > 1:
        sizes = ", ".join(str(len(u.pairs)) for u in out)
        said = (f"the duet's {len(pairs)} pairs in {len(out)} units of {sizes} pairs, "
                f"one unit after another: their {sum(len(u.keys) for u in out)} clusters "
                f"need about {_mib(sum(memory.values()))} of shared memory together, "
                f"more than 3/4 of the {_mib(available or 0)} available (each pair's "
                "two sides still at the same moment)")
    return out, said


MAX_SUBSETS = 12  # clusters beyond which the sets held together are chosen in order


def _held_together(spec: Spec, groups: list[list[Cell]], candidates: list[int],
                   memory: dict[int, int], limit: float | None) -> list[list[int]]:
    """The sets of clusters held up at once (indexes into ``groups``), in turn: all the
    candidates where their memory fits; else the set that fits and pairs the most
    comparisons across its clusters (a cell and its baseline in two of them), then the
    one with the most clusters, then the earliest; the rest again, while two of them
    fit together. A cluster in no set runs alone."""
    group_of = {c.index: gi for gi, g in enumerate(groups) for c in g}
    base_of = baselines([(c.index, with_defaults(c.params())) for g in groups for c in g],
                        spec.compare.rules(spec.matrix))
    crossing = Counter(frozenset((group_of[c], group_of[b])) for c, b in base_of.items()
                       if b is not None and group_of[c] != group_of[b])

    def fits(ids: tuple[int, ...]) -> bool:
        return limit is None or sum(memory[i] for i in ids) <= limit

    def rank(ids: tuple[int, ...]) -> tuple[int, int, tuple[int, ...]]:
        paired = sum(n for pair, n in crossing.items() if pair <= set(ids))
        return paired, len(ids), tuple(-i for i in ids)

    held: list[list[int]] = []
    left = list(candidates)
    while len(left) > 1:
        if fits(tuple(left)):
            held.append(left)
            break
        if len(left) > MAX_SUBSETS:  # in order: as many as fit
            ids: tuple[int, ...] = ()
            for i in left:
                if fits((*ids, i)):
                    ids = (*ids, i)
            best = ids if len(ids) > 1 else None
        else:
            best = max((ids for k in range(len(left) - 1, 1, -1)
                        for ids in itertools.combinations(left, k) if fits(ids)),
                       key=rank, default=None)
        if best is None:
            break
        held.append(list(best))
        left = [i for i in left if i not in best]
    return held


def _why_alone(spec: Spec, cell: Cell) -> str | None:
    if cell.placement != NO_PLACEMENT:
        return f"placement {cell.placement}"
    if cell.cores is not None:
        return "cores"
    # several instances are held beside other clusters: their folders on hosts are named
    # after their slot's, and their ports there are kept apart across the pool
    # (ActiveCluster.pool_ports)
    if set(cell_hosts(spec, cell)) & set(standby_names(spec, cell.standbys)):
        return "standbys on SSH hosts"
    return None


def _reasons(alone: dict[int, str]) -> str:
    return "; ".join(dict.fromkeys(alone.values()))


def _mib(n: int | float) -> str:
    return f"{n / 2**20:,.0f} MiB"


_SIZE = re.compile(r"^\s*(-?\d+)\s*([kMGT]?B)?\s*$", re.IGNORECASE)
_UNITS = {None: 8192, "kb": 1024, "mb": 2**20, "gb": 2**30, "tb": 2**40}


def setting_bytes(text: str | None, default: int) -> int:
    """A memory setting's size in bytes (a bare number counts 8 kB pages, as
    shared_buffers and wal_buffers do); ``default`` when it cannot be read (-1 too)."""
    m = _SIZE.match(text or "")
    if m is None or int(m.group(1)) < 0:
        return default
    unit = m.group(2).lower() if m.group(2) else None
    return int(m.group(1)) * _UNITS[unit]


def cluster_memory(spec: Spec, cell: Cell) -> int:
    """What a cell's cluster holds in memory, as far as its settings tell: every
    instance's nodes (those in a guest are in the guest's memory, which is this
    machine's too)."""
    nodes = (1 + cell.standbys) * cell.instances
    values = {**profile_settings(spec.topology.profile, nodes),
              **settings_for(spec, cell.settings_set)}
    shared = setting_bytes(values.get("shared_buffers"), 128 * 2**20)
    wal = setting_bytes(values.get("wal_buffers"), max(shared // 32, 64 * 1024))
    return nodes * (shared + wal + NODE_OVERHEAD)


def meminfo_available() -> int | None:
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    m = re.search(r"^MemAvailable:\s+(\d+) kB", text, re.MULTILINE)
    return int(m.group(1)) * 1024 if m else None
