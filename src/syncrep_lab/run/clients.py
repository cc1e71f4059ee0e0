"""The cell's client against every instance of its cluster: pgbench here, sysbench
here, or either on the client's SSH host; started together from the main thread, waited
for together, and all stopped when one fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from syncrep_lab.readers.pgbench_log import ProgressSample
from syncrep_lab.run import sysbench
from syncrep_lab.run.remote_client import RemoteRunningClient, start_remote_client
from syncrep_lab.run.target import Target
from syncrep_lab.run.workload import ClientRun, RunningClient, StallWatch, start_pgbench
from syncrep_lab.store import ProcCostRow


@dataclass(frozen=True)
class ClientOptions:
    """How a cell's client runs: which program, its sessions and threads, and the
    sessions' own ``synchronous_commit`` (None: the server's, which a fault scenario
    that changes it mid-cell needs, since a session's setting outranks a reload)."""

    driver: str  # pgbench or sysbench
    clients: int
    threads: int
    synchronous_commit: str | None


def start_clients(targets: list[Target], options: ClientOptions, pgbench: Path,
                  script: Path, log_dir: Path | None, duration: int, *,
                  live: Callable[[ProgressSample], None],
                  stall_watch: Callable[[Target], StallWatch | None]
                  ) -> list[RunningClient]:
    """The client against every instance at once (from this, the main thread): ``live``
    hears the first instance's progress, ``stall_watch`` gives each instance's watch;
    pgbench's per-transaction logs go to ``log_dir`` (None: no logs, a warm-up)."""
    running: list[RunningClient] = []
    try:
        for t in targets:
            suffix = "" if t.instance == 1 else f"_i{t.instance}"
            log_prefix = log_dir / f"pgbench_log{suffix}" if log_dir else None
            layout = t.manifest.placed() if t.manifest is not None else None
            on_progress = live if t.instance == 1 else None
            launch = layout.client if layout is not None else None
            watch = stall_watch(t)
            if t.manifest is not None and t.manifest.client is not None:
                running.append(start_remote_client(
                    t.manifest.client, t.manifest.dir, script.read_text(), t.conninfo,
                    clients=options.clients, threads=options.threads,
                    synchronous_commit=options.synchronous_commit, duration=duration,
                    on_progress=on_progress, watch=watch, driver=options.driver,
                    log_prefix=log_prefix, prefix=t.manifest.on_host("client")))
            elif options.driver == "sysbench":  # no per-transaction logs: its histogram
                running.append(sysbench.start_sysbench(
                    script, t.conninfo, clients=options.clients, duration=duration,
                    synchronous_commit=options.synchronous_commit, on_progress=on_progress,
                    launch=launch, watch=watch))
            else:
                running.append(start_pgbench(
                    pgbench, t.conninfo, script, clients=options.clients,
                    threads=options.threads, synchronous_commit=options.synchronous_commit,
                    duration=duration, log_prefix=log_prefix, on_progress=on_progress,
                    launch=launch, watch=watch))
    except BaseException:
        for r in running:
            r.kill()
        raise
    return running


def finish_all(running: list[RunningClient]) -> list[ClientRun]:
    """Wait for every client; if one fails, the others are stopped too."""
    runs = []
    try:
        for r in running:
            runs.append(r.finish())
    except BaseException:
        for r in running:
            r.kill()
        raise
    return runs


def remote_client_costs(running: list[RunningClient], driver: str) -> list[ProcCostRow]:
    """The client on its SSH host: its CPU there, from the shell that waited for it (a
    ``proc_costs`` row; none when it is here, or a figure is missing)."""
    cpu = [r.cpu_ms for r in running if isinstance(r, RemoteRunningClient)]
    if not cpu or not all(cpu):
        return []
    return [ProcCostRow("client", driver, len(cpu), sum(c[0] for c in cpu if c),
                        sum(c[1] for c in cpu if c), 0, 0)]
