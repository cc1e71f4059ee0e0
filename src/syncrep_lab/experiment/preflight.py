"""What is checked before a run creates anything: the PostgreSQL installations and sync
specs the cells need, the machine's placement facilities, the SSH hosts, an attached
cluster's ability to acknowledge the cells' commits, and the run folder.

``spec.py`` checks what the spec says on its own, ``plan.py`` what its cells say
together; this module is what only this machine (or the hosts it reaches) can answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from syncrep_lab.cluster.build import check_sync
from syncrep_lab.errors import UserError
from syncrep_lab.experiment.attached import check_serves
from syncrep_lab.experiment.plan import expand, standby_names
from syncrep_lab.experiment.spec import Attach, Spec
from syncrep_lab.pg.conninfo import require_parses
from syncrep_lab.pg.installations import resolve


def preflight(spec: Spec) -> None:
    """What can only be checked on this machine, before anything is created: every
    PostgreSQL the spec names is installed, and each sync spec suits its version."""
    if spec.topology.attach is not None:
        _check_conninfos(spec.topology.attach)
        resolve(None).program("pgbench")
        check_serves(spec)  # a cell that would wait for ever is refused now
        return
    from syncrep_lab.experiment.layouts import check_machine

    check_machine(spec)
    if spec.topology.hosts:
        check_hosts(spec)
    plan = expand(spec)
    versions = {}
    for pg in sorted({c.pg for c in plan.cells}, key=str):
        inst = resolve(pg)
        for program in ("postgres", "initdb", "pgbench"):
            inst.program(program)
        versions[pg] = inst.version.num
    for cell in plan.cells:
        if cell.sync is not None:
            try:
                check_sync(cell.sync, standby_names(spec, cell.standbys), versions[cell.pg])
            except UserError as exc:
                raise UserError(f"cell {cell.label} (pg {cell.pg or 'default'}): {exc.cause}",
                                exc.fix) from None


def check_hosts(spec: Spec) -> None:
    """Every SSH host the spec places a node on answers, with the host key on record,
    and has the PostgreSQL programs a standby needs."""
    from syncrep_lab.hosts.ssh import check_host

    for name in sorted(set(spec.topology.hosts.values())):
        check_host(host_spec(spec, name))


def host_spec(spec: Spec, name: str) -> Any:
    from syncrep_lab.hosts.ssh import HostSpec

    h = spec.hosts[name]
    return HostSpec(name=name, address=h.address, port=h.port, user=h.user, key=h.key,
                    known_hosts=h.known_hosts, accept_new=h.accept_new, bin_dir=h.bin_dir,
                    data_root=h.data_root, connect_timeout=h.connect_timeout)


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
