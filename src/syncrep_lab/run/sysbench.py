"""sysbench as the client, as the seed also used it: the same workloads against the same
tables, written as sysbench Lua scripts, and one sysbench run read into pgbench's figures
(readers/sysbench_output.py).

Each of sysbench's threads holds one connection, so ``clients`` is its ``--threads``
(pgbench's ``threads``, its own worker threads, has no counterpart and is ignored).
Statements are prepared once per connection, as ``pgbench -M prepared`` does;
``synchronous_commit`` reaches the session through ``PGOPTIONS`` and the session's
name through ``PGAPPNAME`` (libpq reads both), the password through ``PGPASSWORD``.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from psycopg.conninfo import conninfo_to_dict

from syncrep_lab.errors import UserError
from syncrep_lab.plan.spec import Workload
from syncrep_lab.readers.pgbench_log import ProgressSample
from syncrep_lab.run.workload import (
    SEED_TABLES,
    RunningClient,
    StallWatch,
    Tables,
    spawn_client,
)

if TYPE_CHECKING:
    from syncrep_lab.placement.layout import Launch

INSTALL_FIX = "apt-get install sysbench (./run setup installs it)"


def program() -> Path:
    """sysbench's path; a UserError naming the package when it is missing."""
    found = shutil.which("sysbench")
    if found is None:
        raise UserError("workload.driver = 'sysbench' but sysbench is not installed",
                        INSTALL_FIX)
    return Path(found)


def script_text(workload: Workload, batch: int, tables: Tables = SEED_TABLES) -> str:
    """The Lua script of the workload: one event per transaction."""
    if workload.kind == "insert":
        statement = f"insert into {tables.insert}(info) values (null)"
        if batch == 1:
            event = "  stmt:execute()"
        else:
            event = (f'  con:query("begin")\n  for i = 1, {batch} do stmt:execute() end\n'
                     '  con:query("commit")')
        bind = ""
    elif workload.kind == "pk-lookup":
        statement = f"select * from {tables.lookup} where id = ?"
        bind = ("  id = stmt:bind_create(sysbench.sql.type.INT)\n"
                "  stmt:bind_param(id)\n")
        event = (f"  id:set(sysbench.rand.uniform(1, {workload.rows}))\n"
                 "  stmt:execute()")
    else:
        raise UserError("workload.kind = 'script' is a pgbench script; sysbench runs the "
                        "insert and pk-lookup workloads",
                        "use driver = 'pgbench' for a script, or kind insert or pk-lookup")
    return (f"-- written by syncrep-lab: the {workload.kind} workload, one event per "
            "transaction\n"
            "function thread_init()\n"
            "  drv = sysbench.sql.driver()\n"
            "  con = drv:connect()\n"
            f'  stmt = con:prepare("{statement}")\n'
            f"{bind}"
            "end\n\n"
            "function event()\n"
            f"{event}\n"
            "end\n\n"
            "function thread_done()\n"
            "  stmt:close()\n"
            "  con:disconnect()\n"
            "end\n")


def command(sysbench: str, script: str, conninfo: str, *, clients: int, duration: int,
            synchronous_commit: str | None) -> tuple[list[str], dict[str, str]]:
    """sysbench's command line, and the libpq variables of its sessions (password, name,
    synchronous_commit), here or on a host."""
    parts = conninfo_to_dict(conninfo)
    argv = [sysbench, script, "--db-driver=pgsql", f"--threads={clients}",
            f"--time={duration}", "--events=0", "--report-interval=1", "--histogram=on",
            "--percentile=99", "--db-ps-mode=auto"]
    for option, key in (("host", "host"), ("port", "port"), ("user", "user"),
                        ("db", "dbname")):
        if parts.get(key):
            argv.append(f"--pgsql-{option}={parts[key]}")
    argv.append("run")
    env: dict[str, str] = {}
    if parts.get("password"):
        env["PGPASSWORD"] = str(parts["password"])
    if parts.get("application_name"):
        env["PGAPPNAME"] = str(parts["application_name"])
    if synchronous_commit is not None:
        env["PGOPTIONS"] = f"-c synchronous_commit={synchronous_commit}"
    return argv, env


def start_sysbench(
    script: Path,
    conninfo: str,
    *,
    clients: int,
    duration: int,
    synchronous_commit: str | None,
    on_progress: Callable[[ProgressSample], None] | None = None,
    extra_timeout: float = 60.0,
    launch: Launch | None = None,
    watch: StallWatch | None = None,
) -> RunningClient:
    """Start sysbench on ``script`` against ``conninfo`` (from the main thread, as
    pgbench is: the die-with-parent signal is tied to the forking thread)."""
    argv, session = command(str(program()), str(script.resolve()), conninfo,
                            clients=clients, duration=duration,
                            synchronous_commit=synchronous_commit)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")} | session
    started = time.monotonic()
    proc = spawn_client(argv, env, script.parent, launch)
    return RunningClient(proc, argv, started, duration, extra_timeout, None, on_progress,
                          watch, driver="sysbench")
