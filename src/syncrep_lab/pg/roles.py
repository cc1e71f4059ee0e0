"""Process roles: every process of a node, classified from its title.

Process titles name the role on every version (``postgres: walsender ...`` from
10 on, ``postgres: wal sender process ...`` on 9.6), so one classifier serves
9.6 to 18 without ``backend_type``. A walsender is further named by the
standby it serves (``walsender:b``), from ``pg_stat_replication``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from syncrep_lab import procs

# The client programs a run drives: node "client", role the program's name.
CLIENT_PROGRAMS = ("pgbench", "sysbench")

ROLES = ("postmaster", "backend", "walsender", "walreceiver", "startup", "walwriter",
         "checkpointer", "bgwriter", "autovacuum", "other")

# (pattern on the title after "postgres: ", role); first match wins.
_TITLE_ROLES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^wal ?sender"), "walsender"),
    (re.compile(r"^wal ?receiver"), "walreceiver"),
    (re.compile(r"^startup"), "startup"),
    (re.compile(r"^wal ?writer"), "walwriter"),
    (re.compile(r"^checkpointer"), "checkpointer"),
    (re.compile(r"^(background )?writer( process)?\b"), "bgwriter"),
    (re.compile(r"^autovacuum"), "autovacuum"),
    # The logger's title is the bare word; a backend's starts with its user name,
    # which may be "logger" too, so only the whole title counts.
    (re.compile(r"^logger( process)?\s*$"), "other"),
    (re.compile(r"^(stats collector|logical replication|archiver|io worker|walsummarizer|"
                r"wal summarizer|parallel worker|background worker|slotsync|checksum)"),
     "other"),
]


def role_of_title(title: str) -> str:
    """The role a process title names; anything else under ``postgres:`` is a backend."""
    rest = title.strip()
    for prefix in ("postgres: ", "postmaster: "):
        if rest.startswith(prefix):
            rest = rest[len(prefix):]
            break
    else:
        return "other"
    # Titles may carry the cluster name first: "postgres: main: walwriter".
    for candidate in (rest, rest.split(": ", 1)[-1]):
        for pattern, role in _TITLE_ROLES:
            if pattern.search(candidate):
                return role
    return "backend"


def titled(title: str) -> bool:
    """Whether PostgreSQL has written the process's title: a child it has just forked
    still shows the postmaster's command line (role "other") until it does, which under
    load or emulation can outlast a look at the processes.

    >>> titled("postgres: u db [local] idle"), titled("/usr/lib/postgresql/18/bin/postgres -D x")
    (True, False)
    """
    return title.strip().startswith(("postgres: ", "postmaster: "))


def title(pid: int) -> str:
    """A process's title (its command line, as PostgreSQL rewrites it)."""
    try:  # not pathlib's Path: it interns the pid (procs.children says why that matters)
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


@dataclass(frozen=True)
class NodeProcess:
    node: str
    pid: int
    role: str
    detail: str = ""  # the standby a walsender serves

    @property
    def label(self) -> str:
        return f"{self.role}:{self.detail}" if self.detail else self.role


def node_processes(node: str, postmaster: int, walsenders: dict[int, str] | None = None
                   ) -> list[NodeProcess]:
    """The postmaster and its children now, each with its role."""
    found = [NodeProcess(node, postmaster, "postmaster")]
    walsenders = walsenders or {}
    for pid in procs.children(postmaster):
        role = role_of_title(title(pid))
        found.append(NodeProcess(node, pid, role, walsenders.get(pid, "")
                                 if role == "walsender" else ""))
    return found
