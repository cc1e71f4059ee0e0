"""What this machine (and the hosts it reaches) must have for a spec, checked before
anything is created: the PostgreSQL installations and the sync specs for their
versions, CPUs, NUMA nodes, writable cpusets, numactl, network namespaces, SSH hosts,
gcc for a slow flush's preload library, an attached cluster's ability to acknowledge the
cells' commits, and a run folder that can be made. The spec's own checks, which read
nothing of the machine, are plan/checks.py.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from syncrep_lab.errors import UserError
from syncrep_lab.pg.conninfo import require_parses
from syncrep_lab.pg.sync_names import check_sync
from syncrep_lab.plan.matrix import (
    DEFAULT_SETTINGS_SET,
    NO_PLACEMENT,
    Plan,
    cell_hosts,
    expand,
    flush_delay_us,
    standby_names,
    uses_namespaces,
)
from syncrep_lab.plan.spec import Attach, Spec


def check_machine(spec: Spec) -> dict[str, Any]:
    """What can only be checked on this machine, before anything is created: every
    PostgreSQL the spec names is installed, and each sync spec suits its version. What
    the guests' check found (run/guests.check: ``run --check`` prints it), else {}."""
    from syncrep_lab.pg.installations import resolve
    from syncrep_lab.placement.cpus import machine_cpus
    from syncrep_lab.plan.least_time import check_budget

    # a budget the run's floor cannot fit: refused before anything starts, here, where
    # both `run` and `ab` pass before their first cluster (the cells as they will run)
    check_budget(spec, without_unlinkable(spec, expand(spec, len(machine_cpus()) or 2)).cells)
    if "sysbench" in (spec.matrix.driver or [spec.workload.driver]):
        from syncrep_lab.run import sysbench

        sysbench.program()  # installed, or a UserError naming the package
    if spec.topology.attach is not None:
        _check_conninfos(spec.topology.attach)
        resolve(None).program("pgbench")
        from syncrep_lab.run.attached import check_serves

        check_serves(spec)  # a cell that would wait for ever is refused now
        return {}
    _check_placement(spec)
    if spec.run.drop_caches:
        from syncrep_lab.cluster.caches import check_here

        check_here()
    if any(flush_delay_us(spec, name, node) for node in spec.nodes
           for name in spec.matrix.settings or [DEFAULT_SETTINGS_SET]):
        from syncrep_lab.cluster import slow_flush

        slow_flush.library()  # compiled now, or a UserError naming what is missing
    found: dict[str, Any] = {}
    if spec.topology.guests is not None:
        from syncrep_lab.run import guests

        found = guests.check(spec)  # what a guest needs here: refused before a boot
    if spec.topology.hosts:
        check_hosts(spec)
    check_installations(spec, unbuilt_ok=True)
    return found


def check_installations(spec: Spec, *, unbuilt_ok: bool = False) -> None:
    """Every PostgreSQL the spec names is installed, with the programs a cluster needs,
    and each cell's sync spec suits its version. ``unbuilt_ok``: a build the spec
    declares ([builds.NAME]) that is not made yet is passed over (start_run makes it);
    its patch files must exist."""
    from syncrep_lab.pg.builds import find_build
    from syncrep_lab.pg.installations import resolve

    declared_patches(spec, None)
    plan = expand(spec)
    versions = {}
    for pg in sorted({c.pg for c in plan.cells}, key=str):
        made = find_build(pg) if unbuilt_ok and pg in spec.builds else None
        if unbuilt_ok and pg in spec.builds and (
                made is None or not made.installed):
            continue  # start_run makes it (again, where its installation is gone)
        inst = resolve(pg)
        for program in ("postgres", "initdb", "pgbench"):
            inst.program(program)
        versions[pg] = inst.version.num
    for cell in plan.cells:
        if cell.sync is not None and cell.pg in versions:
            try:
                check_sync(cell.sync, standby_names(spec, cell.standbys), versions[cell.pg])
            except UserError as exc:
                raise UserError(f"cell {cell.label} (pg {cell.pg or 'default'}): {exc.cause}",
                                exc.fix) from None


def declared_patches(spec: Spec, spec_dir: Path | None) -> dict[str, list[Path]]:
    """Each [builds.NAME]'s patch files, relative to ``spec_dir`` (None: to the folder
    the run will use, which the caller checks later); a missing one is refused."""
    out: dict[str, list[Path]] = {}
    for name, declared in spec.builds.items():
        files = []
        for i, text in enumerate(declared.patches):
            path = Path(text).expanduser()
            if spec_dir is not None and not path.is_absolute():
                path = spec_dir / path
            if (spec_dir is not None or path.is_absolute()) and not path.is_file():
                raise UserError(f"builds.{name}.patches[{i}]: {path}: no such file",
                                "give a patch file (git diff or diff -u output); a relative "
                                "path is taken from the spec's folder")
            files.append(path)
        out[name] = files
    return out


def make_builds(spec: Spec, spec_dir: Path, progress: Callable[[str], None], *,
                resuming: bool = False) -> float:
    """Every [builds.NAME] built, or found in the cache; the seconds spent. A build of that
    name made from the same patches, flavor and flags is taken as it is, without looking
    for a newer point release (a run's cells all run on one build, and an offline
    machine keeps its builds). One that differs is rebuilt for a new run and refused for
    a resumed one, whose finished cells ran on it. A patch that does not apply or compile
    is refused, and nothing is cached."""
    import hashlib

    from syncrep_lab.pg.builds import build, configure_args, custom_flags, find_build

    started = time.monotonic()
    for name, files in declared_patches(spec, spec_dir).items():
        declared = spec.builds[name]
        made = find_build(name)
        if made is not None and made.installed:
            hashes = [hashlib.sha256(f.read_bytes()).hexdigest() for f in files]
            wanted = configure_args(declared.flavor, declared.cflags,
                                    custom_flags(declared.cflags, declared.configure))
            if (made.flavor == declared.flavor and made.configure == wanted
                    and [p["sha256"] for p in made.patches] == hashes):
                continue
            if resuming:
                raise UserError(
                    f"build {name} is not what [builds.{name}] now declares (its patches, "
                    "flavor or flags changed since the run began), and the run's finished "
                    "cells ran on it",
                    "put the patches and flags back as they were to resume, or start a new "
                    "run (which builds it anew)")
        if made is None:
            progress(f"building {name}: PostgreSQL {declared.version}, {declared.flavor}"
                     + (f", {len(files)} patch{'es' if len(files) != 1 else ''}"
                        if files else "") + " (cached for later runs)")
        # a tarball or a source tree named relative to the spec, as its patches are
        version = declared.version
        if ("/" in version or version.startswith(".")) and not Path(version).is_absolute():
            version = str(spec_dir / Path(version).expanduser())
        build(version, files, declared.flavor, name=name,
              progress=_prefixed(progress, name), cflags=declared.cflags,
              configure_args=declared.configure)
    return time.monotonic() - started


def _prefixed(progress: Callable[[str], None], name: str) -> Callable[[str], None]:
    return lambda line: progress(f"{name}: {line}")


def check_hosts(spec: Spec) -> None:
    """Every SSH host the spec places a node on answers, with the host key on record,
    and has the PostgreSQL programs a standby needs (pgbench, for the client)."""
    from syncrep_lab.hosts.ssh import DEFAULT_PROGRAMS, check_host

    # a guest is not up before its run boots it; it runs this machine's PostgreSQL
    for name in sorted(h for h in set(spec.topology.hosts.values())
                       if not spec.is_guest(h)):
        roles = {node for node, host in spec.topology.hosts.items() if host == name}
        drivers = set(spec.matrix.driver or [spec.workload.driver]) if "client" in roles else set()
        programs = [*(DEFAULT_PROGRAMS if roles - {"client"} else ()),
                    *(["initdb"] if "primary" in roles else []),
                    *(["pgbench"] if "pgbench" in drivers else [])]
        placing = _placements_on(spec, roles)
        tools = sorted({"taskset" if kind == "cpus" else "numactl" for kind, _, _ in placing})
        facts = check_host(spec.ssh_host(name), programs,
                           on_path=(["sysbench"] if "sysbench" in drivers else []) + tools)
        for kind, where, value in placing:
            _check_on_host(name, facts, kind, where, value)


def _pinned(key: str) -> str:
    """The node a pin key names: ``NODE/role``, or a role of the primary."""
    return key.rpartition("/")[0] or "primary"


def _placements_on(spec: Spec, roles: set[str]) -> list[tuple[str, str, str]]:
    """(cpus | numa, where in the spec, value) of every placement key naming one of
    ``roles`` (what runs on one host), but a default NUMA policy (nothing to apply);
    role pins are CPU lists too."""
    out = []
    for name, place in spec.placements.items():
        for kind, keys in (("cpus", place.cpus), ("numa", place.numa)):
            out += [(kind, f"placements.{name}.{kind}.{key}", value)
                    for key, value in keys.items()
                    if key in roles and not (kind == "numa" and value.strip() == "default")]
        out += [("cpus", f"placements.{name}.pin.{key}", value)
                for key, value in place.pin.items() if _pinned(key) in roles]
    return out


def _check_on_host(host: str, facts: dict[str, Any], kind: str, where: str,
                   value: str) -> None:
    """A CPU list or NUMA policy against what the host has (check_host's facts)."""
    from syncrep_lab.placement.cpus import format_cpus, parse_cpus, parse_list
    from syncrep_lab.placement.numa import policy_nodes

    noun = "CPU" if kind == "cpus" else "NUMA node"
    said = facts["cpus_allowed"] if kind == "cpus" else facts["numa_nodes"]
    if not said:
        raise UserError(f"{where}: {host} did not say which {noun}s its account may use",
                        f"{host} needs Linux /proc and /sys (Cpus_allowed_list, "
                        "/sys/devices/system/node)")
    try:
        wanted = parse_cpus(value) if kind == "cpus" else policy_nodes(value)
        have = parse_list(said, noun)
    except UserError as exc:
        raise UserError(f"{where}: {exc.cause}", exc.fix) from None
    missing = sorted(set(wanted) - set(have))
    if missing:
        raise UserError(f"{where}: {noun} {format_cpus(missing)} not on {host} (the account "
                        f"may use {noun}s {format_cpus(have)} there)",
                        f"choose among {noun}s {format_cpus(have)} of {host}")


def _check_conninfos(attach: Attach) -> None:
    """Each attached node's conninfo parses as libpq reads it."""
    for where, conninfo in [("primary", attach.primary),
                            *((f"standbys.{k}", v) for k, v in attach.standbys.items())]:
        require_parses(f"topology.attach.{where}", conninfo)


def check_out(out_dir: Path) -> None:
    """A folder a new run can be written to: not a file, not under one, not a run
    already."""
    if (out_dir / "syncrep-lab.sqlite").exists():
        raise UserError(f"{out_dir} already holds a run",
                        f"continue it with: syncrep-lab run --resume --out {out_dir}, "
                        "or choose another --out")
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir} is not a directory", "choose a folder for the run")
    parent = next(p for p in out_dir.absolute().parents if p.exists())
    if not parent.is_dir():
        raise UserError(f"--out {out_dir}: {parent} is a file, not a directory",
                        "choose a folder for the run")


def _check_placement(spec: Spec) -> None:
    """What the spec's placement needs of this machine, checked before anything is
    made: its CPUs and NUMA nodes, writable cpusets, numactl, namespaces."""
    from syncrep_lab.placement.cpus import check_cpus, machine_cpus, numa_nodes
    from syncrep_lab.placement.numa import numactl_prefix

    plan = expand(spec)
    wants_cpusets = False
    for cell in plan.cells:
        if cell.cores is not None and cell.cores > len(machine_cpus()):
            raise UserError(f"matrix.cores: {cell.cores} cores, but this machine lets "
                            f"syncrep-lab use {len(machine_cpus())} "
                            f"(CPUs {','.join(map(str, machine_cpus()))})",
                            f"sweep cores up to {len(machine_cpus())}")
        wants_cpusets = wants_cpusets or cell.cores is not None
        if cell.instances > 1 and cell.placement != NO_PLACEMENT:
            place = spec.placements[cell.placement]
            if place.instances == "separate":
                for key, text in place.cpus.items():
                    if len(check_cpus(text, key)) < cell.instances:
                        raise UserError(
                            f"placements.{cell.placement}.cpus.{key}: {text} cannot be split "
                            f"among {cell.instances} instances",
                            "give at least one CPU per instance, or instances = 'shared'")
    # keys naming what runs on an SSH host are checked there (check_hosts); a node a
    # kernel = "host" cell runs here (plan/matrix.cell_hosts) is checked here too
    away = set(spec.topology.hosts)
    for cell in plan.cells:
        away &= set(cell_hosts(spec, cell))
    for name, place in spec.placements.items():
        here = {k: v for k, v in place.cpus.items() if k not in away}
        pins = {k: v for k, v in place.pin.items() if _pinned(k) not in away}
        for key, text in [*here.items(), *pins.items()]:
            check_cpus(text, f"placements.{name}: {key}")
        wants_cpusets = wants_cpusets or bool(here) or bool(pins)
        for key, policy in place.numa.items():
            if key in away:
                continue
            try:
                numactl_prefix(policy)
            except UserError as exc:
                raise UserError(f"placements.{name}.numa.{key}: {exc.cause} (this machine's "
                                f"NUMA nodes: {','.join(map(str, numa_nodes()))})",
                                exc.fix) from None
            if policy != "default" and shutil.which("numactl") is None:
                raise UserError(f"placements.{name}.numa.{key} needs numactl, which is not "
                                "installed", "apt-get install numactl (./run setup does)")
    if wants_cpusets:
        from syncrep_lab.placement.cgroups import cpuset_support

        support = cpuset_support()
        if support.reason is not None:
            raise UserError(f"the spec places processes in cpusets, which cannot be done "
                            f"here: {support.reason}",
                            "run as root on a machine with the cpuset controller, or leave "
                            "placement cpus, pin and matrix.cores out")
    if any(place.quota for place in spec.placements.values()):
        from syncrep_lab.placement.quota import quota_support

        quota_support().require()
    if uses_namespaces(spec):
        from syncrep_lab.network.capabilities import check_network_support

        reason = check_network_support()
        # cells with no link but sockets still run (without_unlinkable leaves the others out)
        if reason is not None and all(uses_namespaces(spec, c) for c in plan.cells):
            raise UserError(f"emulated links need network namespaces: {reason}",
                            "run as root with iproute2 installed, or leave [network] and "
                            "matrix.link out")


def without_unlinkable(spec: Spec, plan: Plan) -> Plan:
    """``plan`` without the cells whose links need network namespaces where this machine
    cannot make them, each named with the reason in ``dropped``: the seed preset's group 4
    for a user who is not root, whose other groups run on unix sockets. (A spec whose
    every cell needs them is refused by the check instead.)"""
    if not uses_namespaces(spec):
        return plan
    from syncrep_lab.network.capabilities import check_network_support

    reason = check_network_support()
    if reason is None:
        return plan
    linked = [c for c in plan.cells if uses_namespaces(spec, c)]
    return Plan([c for c in plan.cells if c not in linked],
                [*plan.dropped, *(f"{c.label}: its links need network namespaces ({reason})"
                                  for c in linked)])
