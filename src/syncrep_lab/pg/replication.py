"""Whether a primary can acknowledge commits that wait for a standby, read from its
``pg_stat_replication``, and if it cannot, why, in terms a DBA can act on.

A commit at ``remote_write``, ``on`` or ``remote_apply`` waits until as many
standbys as ``synchronous_standby_names`` asks for have confirmed it. With fewer
of them streaming in state ``sync`` (or ``quorum``) it waits for ever, and its
backend does not even notice that its client went away. Checking this before a
workload starts turns an endless wait into a refusal that names the cause.

The most common cause on a cluster built by hand: ``pg_basebackup -R`` writes a
``primary_conninfo`` without ``application_name`` into ``postgresql.auto.conf``,
which overrides one set in ``postgresql.conf``, so every standby connects under the
default name ``walreceiver`` (or ``cluster_name``) and matches no name in
``synchronous_standby_names``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

import psycopg

from syncrep_lab.pg import sync_names

# synchronous_commit's levels, weakest first (the one place they are written), and those
# whose commits wait for a standby's confirmation.
SyncCommit = Literal["off", "local", "remote_write", "on", "remote_apply"]
LEVELS: tuple[SyncCommit, ...] = get_args(SyncCommit)
WAITING_LEVELS = LEVELS[2:]  # remote_write, on, remote_apply


def level_rank(level: str) -> int:
    """A level's place, weakest first (anything else after them)."""
    return LEVELS.index(level) if level in LEVELS else len(LEVELS)

IN_SYNC = ("sync", "quorum")
DEFAULT_WALRECEIVER_NAME = "walreceiver"


@dataclass(frozen=True)
class Walsender:
    """One row of the primary's ``pg_stat_replication``."""

    application_name: str
    state: str  # startup | catchup | streaming | backup | stopping
    sync_state: str  # async | potential | sync | quorum

    def describe(self) -> str:
        return f"{self.application_name or '(no name)'} {self.state} {self.sync_state}"


def walsenders(conn: psycopg.Connection[Any]) -> list[Walsender]:
    rows = conn.execute("select coalesce(application_name, ''), coalesce(state, ''), "
                        "coalesce(sync_state, '') from pg_stat_replication "
                        "order by application_name").fetchall()
    return [Walsender(str(r[0]), str(r[1]), str(r[2])) for r in rows]


def seen_text(seen: list[Walsender]) -> str:
    return ", ".join(w.describe() for w in seen) if seen else "no standby connected"


def shortfall(sync_text: str, seen: list[Walsender], version_num: int, *,
              proposed: bool = False) -> tuple[str, str] | None:
    """``(cause, fix)`` when commits that wait for a standby could not be acknowledged
    under ``sync_text`` with the walsenders ``seen``; None when they can.

    ``proposed``: ``sync_text`` is not in force yet (the run is about to set it), so the
    states it would give are worked out from the names instead of read."""
    spec = sync_names.parse(sync_text, version_num=version_num)
    if spec is None:
        return (f"synchronous_standby_names is empty{'' if proposed else ' on the primary'}, "
                "so commits at remote_write, on or remote_apply would not wait for any "
                "standby: such a cell would measure local under another name",
                "set synchronous_standby_names on the primary (or give a sync axis with "
                "allow_alter), or leave those levels out")
    streaming = [w for w in seen if w.state == "streaming"]
    if proposed:
        in_sync = sync_names.expect(spec, [w.application_name for w in streaming]).synchronous
    else:
        in_sync = sum(1 for w in streaming if w.sync_state in IN_SYNC)
    if in_sync >= spec.num_sync:
        return None
    head = (f"synchronous_standby_names {sync_text!r} asks for {spec.num_sync} synchronous "
            f"standby{'s' if spec.num_sync != 1 else ''} and the primary "
            f"{'would have' if proposed else 'has'} {in_sync}, so every commit that "
            "waits for a standby would wait for ever (the primary sees: "
            f"{seen_text(seen)})")
    cause, fix = _why(spec, seen)
    return f"{head}; {cause}", fix


def _why(spec: sync_names.SyncSpec, seen: list[Walsender]) -> tuple[str, str]:
    listed = [n for n in spec.names if n != "*"]
    names = {w.application_name.lower() for w in seen}
    if not seen:
        return ("no standby is connected to it",
                "start the standbys and check that their primary_conninfo points at this "
                "primary (their logs say why they do not connect)")
    if DEFAULT_WALRECEIVER_NAME in names and DEFAULT_WALRECEIVER_NAME not in (
            n.lower() for n in listed):
        return ("standbys connect under the default name 'walreceiver': their "
                "primary_conninfo sets no application_name. pg_basebackup -R writes a "
                "primary_conninfo into postgresql.auto.conf, which overrides one set in "
                "postgresql.conf",
                "on each standby add application_name=NAME to the primary_conninfo in "
                "postgresql.auto.conf (or ALTER SYSTEM SET primary_conninfo = "
                "'... application_name=b'), then reload it (PostgreSQL 13+) or restart it")
    missing = [n for n in listed if n.lower() not in names]
    if missing and len(listed) - len(missing) < spec.num_sync:
        return (f"{', '.join(missing)} named in synchronous_standby_names "
                f"{'is' if len(missing) == 1 else 'are'} not connected",
                "start those standbys (and check the application_name in their "
                "primary_conninfo), or let synchronous_standby_names name the standbys "
                "that are connected")
    pending = [w for w in seen if w.state != "streaming"]
    if pending:
        return (f"{', '.join(w.application_name for w in pending)} "
                f"{'is' if len(pending) == 1 else 'are'} not streaming yet",
                "wait until they have caught up (pg_stat_replication.state = 'streaming'), "
                "then start the run again")
    return ("too few of the connected standbys match its names",
            "let synchronous_standby_names name the standbys that are connected")
