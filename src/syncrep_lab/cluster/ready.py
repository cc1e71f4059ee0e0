"""Readiness: when a server accepts connections, and when replication is as expected.

Both are polled every 10 ms against a deadline; neither ever waits unbounded.
When time runs out the error says what was seen, with the tail of the log.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

from syncrep_lab.cluster import server
from syncrep_lab.cluster.manifest import Manifest
from syncrep_lab.errors import ClusterFailure
from syncrep_lab.pg.deadline import query_deadline
from syncrep_lab.pg.sync_names import Expected, state_ok


def wait_ready(
    conninfo: str, proc: subprocess.Popen[bytes] | None, log: Path | Callable[[], str],
    deadline: float, what: str,
) -> None:
    """Return once a connection succeeds; ClusterFailure if the server dies or time runs out.

    ``log`` is the server's log file here, or a function that fetches the end of
    it from wherever the server runs (a standby on an SSH host). ``proc`` is None
    where the server is not our child.
    """
    def tail() -> str:
        return server.log_tail(log) if isinstance(log, Path) else log()

    last = ""
    while True:
        if proc is not None and proc.poll() is not None:
            raise ClusterFailure(
                f"{what} exited during start-up (exit code {proc.returncode}); its log:\n"
                + tail(),
                "read the log above; a setting it rejects can be changed with --set",
            )
        try:
            with (psycopg.connect(conninfo, connect_timeout=2, autocommit=True) as conn,
                  query_deadline(conn, 5, what)):
                conn.execute("select 1")
            return
        except psycopg.OperationalError as exc:
            last = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        if time.monotonic() > deadline:
            raise ClusterFailure(
                f"{what} did not accept connections in time (last error: {last}); its log:\n"
                + tail(),
                "raise --timeout if the machine is very loaded",
            )
        time.sleep(0.01)


def replication_rows(primary_conninfo: str) -> dict[str, dict[str, str]]:
    with (psycopg.connect(primary_conninfo, autocommit=True, connect_timeout=5) as conn,
          query_deadline(conn, 10, "the primary")):
        rows = conn.execute(
            "select application_name, state, sync_state from pg_stat_replication"
        ).fetchall()
    return {str(r[0]): {"state": str(r[1]), "sync_state": str(r[2])} for r in rows}


def wait_replication(
    primary_conninfo: str,
    expected: Expected,
    deadline: float,
    log_of: Callable[[str], str] | None = None,
) -> None:
    """Wait until the primary shows each standby streaming in its expected sync_state
    (and, where the names leave PostgreSQL the choice, the expected number of them sync).

    ``log_of`` gives the tail of a standby's log for the error, where we have it.
    """
    seen: dict[str, dict[str, str]] = {}

    def states() -> dict[str, str]:
        return {name: row["sync_state"] for name, row in seen.items()
                if row["state"] == "streaming"}

    while True:
        try:
            seen = replication_rows(primary_conninfo)
        except psycopg.Error:
            seen = {}
        if expected.met(states()):  # a standby not streaming is missing: not met
            return
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    lines = []
    for name, state in expected.states.items():
        row = seen.get(name)
        got = (f"state={row['state']} sync_state={row['sync_state']}" if row
               else "not connected")
        if row is None or row["state"] != "streaming" or not state_ok(state,
                                                                       row["sync_state"]):
            line = f"standby {name}: expected streaming/{state}, the primary sees {got}"
            if log_of is not None:
                line += f"; its log:\n{log_of(name)}"
            lines.append(line)
    if not lines and expected.sync is not None:
        lines.append(f"{expected.sync} of them should be sync; the primary sees "
                     + ", ".join(f"{n} {s}" for n, s in sorted(states().items())))
    raise ClusterFailure(
        "standbys did not reach the expected replication state in time:\n" + "\n".join(lines),
        "raise the timeout if the machine is very loaded, or read the standbys' logs",
    )


def manifest_log_tail(manifest: Manifest) -> Callable[[str], str]:
    return lambda name: server.log_tail(manifest.node(name).log_file(manifest.dir), 5)
