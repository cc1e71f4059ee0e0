"""A cached, freshly initialised data dir per installation, copied for every node.

``initdb`` costs about a second; copying its result costs a few tens of
milliseconds. The template is initdb'd once per installation and then run
once in single-user mode with ``wal_level=replica``, so that its shutdown
checkpoint records a WAL level a hot standby accepts (9.6's default is
``minimal``). Every node of a new cluster is a copy of it: a cleanly shut down
cluster copied before its first start is a valid base backup, so the standbys
need no ``pg_basebackup`` and share the primary's system identifier.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

from syncrep_lab import paths, shutdown
from syncrep_lab.errors import UserError
from syncrep_lab.pg.installations import Installation, reachable_by
from syncrep_lab.runas import Account, as_account, make_dir_for, run_as

TEMPLATE_FORMAT = "2"

# The shutdown checkpoint records these in pg_control, and a hot standby refuses
# to start with a setting lower than its primary's recorded one: record the
# smallest values, so any settings a cluster is given are at least as large.
SINGLE_USER_SETTINGS = [
    "-c", "wal_level=replica", "-c", "max_wal_senders=0", "-c", "max_connections=1",
    "-c", "superuser_reserved_connections=0", "-c", "max_worker_processes=0",
    "-c", "max_prepared_transactions=0", "-c", "max_locks_per_transaction=10",
]


def initdb_args(inst: Installation) -> list[str]:
    args = ["-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "-N"]
    if inst.version.parts[0] >= 18:
        # 18 turns data checksums on by default; off keeps versions comparable.
        args.append("--no-data-checksums")
    return args


def _key(inst: Installation, account: Account) -> str:
    text = "|".join([TEMPLATE_FORMAT, str(inst.bin_dir), str(inst.version), account.name,
                     *initdb_args(inst)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def template_for(inst: Installation, account: Account) -> Path:
    """The template data dir for ``inst``, made on first use by ``account`` with the
    installation as that account can run it (installations.reachable_by: a bin dir it
    cannot search is mirrored, so the template is keyed by the programs that made it)."""
    inst = reachable_by(inst, account)
    root = paths.cache_dir() / "templates"
    target = root / f"{inst.version}-f{TEMPLATE_FORMAT}-{_key(inst, account)}"
    if (target / "PG_VERSION").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(f"{inst.version}-*"):
        if not stale.name.startswith(f"{inst.version}-f{TEMPLATE_FORMAT}-"):
            shutil.rmtree(stale, ignore_errors=True)  # made by an older syncrep-lab
    root.chmod(0o755)
    tmp = root / f".{target.name}.{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        make_dir_for(account, tmp)
        result = run_as(account, [inst.program("initdb"), "-D", tmp, *initdb_args(inst)],
                        timeout=300)
        if result.returncode != 0:
            raise UserError(
                f"initdb of PostgreSQL {inst.version} failed:\n{result.stderr.strip()[-2000:]}",
                "check the installation with: syncrep-lab pg list",
            )
        single = subprocess.run(
            [str(inst.program("postgres")), "--single", "-D", str(tmp), *SINGLE_USER_SETTINGS,
             "postgres"],
            input="", capture_output=True, text=True, timeout=300, check=False,
            **as_account(account),
        )
        if single.returncode != 0:
            raise UserError(
                f"single-user start of the template failed:\n{single.stderr.strip()[-2000:]}",
                "check the installation with: syncrep-lab pg list",
            )
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


Copying = list[tuple[Path, "subprocess.Popen[bytes]"]]


def start_copies(account: Account, template: Path, dests: list[Path]) -> Copying:
    """Start copying the template into each destination (``cp -a`` as ``account``). A
    copy dies with the process that started it: a ``cluster up`` killed mid-copy would
    otherwise leave ``cp`` writing into a folder that ``clean`` is removing."""
    return [
        (dest, subprocess.Popen(
            ["cp", "-a", f"{template}/.", str(dest)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=shutdown.die_with_parent(signal.SIGKILL), **as_account(account),
        ))
        for dest in dests
    ]


def finish_copies(copying: Copying) -> None:
    """Wait for copies started by start_copies; UserError naming any that failed."""
    errors = []
    try:
        for dest, proc in copying:
            _, err = proc.communicate(timeout=300)
            if proc.returncode != 0:
                errors.append(f"{dest}: {err.decode(errors='replace').strip()}")
    finally:
        for _, proc in copying:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if errors:
        raise UserError("copying the template data dir failed:\n" + "\n".join(errors),
                        "check free disk space in the cluster dir")
    # cp -a gives each copy the template folder's own mode: a template opened up (a
    # chmod -R over the cache) would make every node refuse to start ("data directory
    # has group or world access"), so the copies are closed as initdb leaves them
    for dest, _ in copying:
        dest.chmod(0o700)
