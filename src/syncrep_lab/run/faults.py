"""Faults inside a cell: timed events against standbys, here or on their SSH hosts
(stop, kill -9, restart, start, SIGSTOP/SIGCONT), or the primary's settings (ALTER
SYSTEM and a reload), fired while pgbench runs, and what the cluster did about them.

A :class:`FaultDriver` thread runs beside pgbench in every repeat of a cell whose
``faults`` axis names a scenario. It fires the events at their times, polls
``pg_stat_replication`` ten times a second to record when each standby's
``sync_state`` moved (the time to detect), and watches for the one state that
can never end by itself: commits needing a synchronous standby while none is
connected. After ``stall_seconds`` of that it terminates the workload's backends
so pgbench ends, and the cell ends with that diagnosis instead of hanging.

After the repeat, :func:`restore` brings every standby back (started,
continued) and :func:`check_durability` counts rows on every node: each
acknowledged commit must be on the primary, and each standby must hold what the
primary holds once it has replayed up to the primary's position. A commit that
was acknowledged and then lost is a finding, stored and shown loudly.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from syncrep_lab.cluster import server, slow_flush
from syncrep_lab.cluster.manifest import Manifest
from syncrep_lab.cluster.ready import wait_ready
from syncrep_lab.errors import UserError
from syncrep_lab.hosts import postmaster
from syncrep_lab.hosts.ssh import SshHost
from syncrep_lab.pg.admin import admin_connection, admin_session, alter_system
from syncrep_lab.pg.deadline import query_deadline
from syncrep_lab.pg.replication import WAITING_LEVELS
from syncrep_lab.plan.spec import FaultEvent, FaultScenario
from syncrep_lab.runas import server_account

POLL_S = 0.1
QUERY_SECONDS = 5.0  # the most one of the driver's statements on the primary may take
SYNC_STATES = ("sync", "quorum")
START_TIMEOUT_S = 60.0


@dataclass
class Record:
    t_s: float  # since pgbench started
    kind: str  # fault | state | stall | error | restore
    node: str  # the standby acted on or whose state moved ('primary' for set)
    detail: str


@dataclass
class FaultContext:
    """What the driver acts on: a cluster syncrep-lab built."""

    manifest: Manifest
    admin: str  # the primary's admin conninfo
    synchronous_commit: str
    sync_names: str  # the cell's synchronous_standby_names ('' for none)
    version_num: int
    links: dict[str, Any] = field(default_factory=dict)  # [links.NAME] -> LinkProfile
    pgbench_name: str = "pgbench"  # the application_name of the workload's sessions


class Links:
    """Changing the emulated link between the primary and a standby mid-repeat (the
    ``link`` action), and putting every changed link back afterwards."""

    def __init__(self, ctx: FaultContext) -> None:
        layout = ctx.manifest.placed()
        self.plan = layout.network_plan() if layout is not None else None
        self.original: dict[str, Any] = {}

    def set(self, standby: str, profile: Any) -> None:
        from syncrep_lab.network.shaping import set_profile

        if self.plan is None:
            raise UserError("the link action needs emulated links",
                            "give the spec a [network] or matrix.link")
        link = next((x for x in self.plan.links if {x.a, x.b} == {"primary", standby}), None)
        if link is None:  # "sync" or "potential" found a standby beside the primary
            raise UserError(f"{standby} replicates over the primary's unix socket, with no "
                            "link to change", "target a standby with a link by its name")
        self.original.setdefault(standby, link.profile)
        set_profile(self.plan, "primary", standby, profile)

    def restore(self) -> list[str]:
        from syncrep_lab.network.shaping import set_profile

        done = []
        for standby, profile in sorted(self.original.items()):
            assert self.plan is not None
            set_profile(self.plan, "primary", standby, profile)
            done.append(f"link primary-{standby} back to {profile.describe()}")
        self.original.clear()
        return done


class _Here:
    """A standby on this machine: signals and pg_ctl-free starts, as its postmaster's
    parent."""

    def __init__(self, manifest: Manifest, name: str) -> None:
        node = manifest.node(name)
        self.manifest, self.name = manifest, name
        self.data_dir, self.log_file = node.data_dir(manifest.dir), node.log_file(manifest.dir)

    def signal_all(self, sig: signal.Signals) -> None:
        for pid in server.processes_in([self.data_dir]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def stop(self) -> None:
        pid = server.signal_stop(self.data_dir, "fast")
        if pid is not None:
            server.wait_gone({self.data_dir: pid}, timeout=15)

    def kill(self) -> None:
        pid = server.postmaster_pid(self.data_dir)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            # Reaped by wait_gone (a postmaster this process spawned stays a zombie
            # until then, and a new postmaster takes the zombie's pid, still in
            # postmaster.pid, for a live server and refuses to start).
            server.wait_gone({self.data_dir: pid}, timeout=10)

    def running(self) -> bool:
        return server.postmaster_pid(self.data_dir) is not None

    def start(self, deadline: float) -> None:
        # The children of a killed postmaster hold its shared memory until they
        # notice it is gone; a new postmaster refuses to start before that.
        while server.processes_in([self.data_dir]):
            if time.monotonic() > deadline:
                raise UserError(f"standby {self.name}: processes of the old server did not "
                                "exit", "syncrep-lab clean, then run the cell again")
            time.sleep(0.05)
        m = self.manifest
        # started as the cluster started it: a slow flush stays slow across a restart
        proc = server.spawn(server_account(), Path(m.bin_dir) / "postgres", self.data_dir,
                            self.log_file, m.launch(self.name),
                            slow_flush.environment(m.node(self.name).flush_delay_us))
        wait_ready(m.admin_conninfo(m.node(self.name)), proc, self.log_file, deadline,
                   f"standby {self.name}")

    def close(self) -> None:
        pass


class _OnHost:
    """A standby on an SSH host: the same acts, as commands there (hosts/postmaster.py), over
    one connection kept for the repeat."""

    def __init__(self, manifest: Manifest, name: str) -> None:
        from syncrep_lab.cluster import remote_node

        node = manifest.node(name)
        assert node.host is not None and node.remote_data is not None
        self.manifest, self.name, self.data = manifest, name, node.remote_data
        self.spec = remote_node.host_spec(node.host)
        self.host = SshHost(self.spec)

    def signal_all(self, sig: signal.Signals) -> None:
        postmaster.signal_node(self.host, self.data, sig.name.removeprefix("SIG"))

    def stop(self) -> None:
        postmaster.stop_postgres(self.host, self.spec.bin_dir or "", self.data, timeout=15)

    def kill(self) -> None:
        postmaster.kill_server(self.host, self.data)

    def running(self) -> bool:
        return postmaster.running(self.host, self.data)

    def start(self, deadline: float) -> None:
        from syncrep_lab.cluster import remote_node

        if not postmaster.wait_node_gone(self.host, self.data,
                                         max(1.0, deadline - time.monotonic())):
            raise UserError(f"standby {self.name} on {self.spec.name}: processes of the old "
                            "server did not exit", "syncrep-lab clean, then run the cell again")
        m = self.manifest
        postmaster.start_postgres(self.host, self.spec.bin_dir or "", self.data,
                                  remote_node.log_path(self.data),
                                  max(1.0, deadline - time.monotonic()), m.on_host(self.name))
        wait_ready(m.admin_conninfo(m.node(self.name)), None,
                   lambda: remote_node.log_tail(self.spec, self.data), deadline,
                   f"standby {self.name} on {self.spec.name}")

    def close(self) -> None:
        self.host.close()


class Standbys:
    """Stopping, killing, pausing and starting the standbys of one cluster, here or on
    their SSH hosts; remembers what it did so that :meth:`restore` can undo it."""

    def __init__(self, ctx: FaultContext) -> None:
        self.ctx = ctx
        self.paused: set[str] = set()
        self.down: set[str] = set()
        self._nodes: dict[str, _Here | _OnHost] = {}

    def _node(self, name: str) -> _Here | _OnHost:
        if name not in self._nodes:
            on_host = self.ctx.manifest.node(name).host is not None
            self._nodes[name] = (_OnHost if on_host else _Here)(self.ctx.manifest, name)
        return self._nodes[name]

    def stop(self, name: str) -> None:
        self.resume(name)  # a paused server cannot act on a shutdown signal
        self._node(name).stop()
        self.down.add(name)

    def kill(self, name: str) -> None:
        self.resume(name)
        self._node(name).kill()
        self.down.add(name)

    def pause(self, name: str) -> None:
        self._node(name).signal_all(signal.SIGSTOP)
        self.paused.add(name)

    def resume(self, name: str) -> None:
        if name not in self.paused:
            return
        self._node(name).signal_all(signal.SIGCONT)
        self.paused.discard(name)

    def start(self, name: str, deadline: float) -> None:
        node = self._node(name)
        if not node.running():
            node.start(deadline)
        self.down.discard(name)

    def restore(self, deadline: float) -> list[str]:
        """Every standby running and unpaused again; returns what had to be done."""
        done = []
        for name in sorted(self.paused):
            self.resume(name)
            done.append(f"continued {name}")
        for name in sorted(self.down):
            self.start(name, deadline)
            done.append(f"started {name}")
        return done

    def close(self) -> None:
        """Close the connections to the standbys' hosts."""
        for node in self._nodes.values():
            node.close()
        self._nodes.clear()


class FaultDriver(threading.Thread):
    """Fires a scenario's events beside one pgbench run and records what followed."""

    def __init__(self, scenario: FaultScenario, ctx: FaultContext, standbys: Standbys) -> None:
        super().__init__(daemon=True, name="syncrep-lab faults")
        self.scenario = scenario
        self.ctx = ctx
        self.standbys = standbys
        self.records: list[Record] = []
        self.stalled: str | None = None
        self.changed_settings: set[str] = set()
        self.stopping = threading.Event()
        self.t0 = time.monotonic()
        # set when the client has started: the scenario's times count from there
        self.client_started: threading.Event | None = None
        # (due time, event, follow-up action): follow-ups bring a standby back
        self.pending: list[tuple[float, FaultEvent, str | None]] = sorted(
            ((e.at, e, None) for e in scenario.events), key=lambda p: p[0])
        self.synchronous_commit = ctx.synchronous_commit
        self.sync_names = ctx.sync_names
        self.links = Links(ctx)

    @property
    def needs_standby(self) -> bool:
        """Whether commits wait for a standby now (a ``set`` event may change it)."""
        return self.synchronous_commit in WAITING_LEVELS and self.sync_names.strip() != ""

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    def _note(self, kind: str, node: str, detail: str) -> None:
        self.records.append(Record(self.now(), kind, node, detail))

    def run(self) -> None:
        if not self._client_started():
            return
        try:
            # Open for the whole repeat, so each statement is bounded instead of the block
            # (a primary frozen or gone ends the driver instead of hanging it).
            with admin_session(self.ctx.admin, statement_timeout_s=QUERY_SECONDS) as conn:
                self._loop(conn)
        except psycopg.Error as exc:
            self._note("error", "primary", f"lost the primary: {str(exc).strip()}")

    def _client_started(self) -> bool:
        """Wait until the client has started and count from there; False when told to
        stop first."""
        if self.client_started is not None:
            while not self.client_started.wait(0.05):
                if self.stopping.is_set():
                    return False
            self.t0 = time.monotonic()
        return True

    def _loop(self, conn: psycopg.Connection[Any]) -> None:
        states: dict[str, str] = self._states(conn)
        no_sync_since: float | None = None
        while not self.stopping.is_set():
            while self.pending and self.pending[0][0] <= self.now():
                _, event, follow_up = self.pending.pop(0)
                self._fire(conn, event, follow_up, states)
            current = self._states(conn)
            for name in sorted(set(states) | set(current)):
                before, after = states.get(name, "gone"), current.get(name, "gone")
                if before != after:
                    self._note("state", name, f"{before} -> {after}")
            states = current
            if self.needs_standby and not any(s in SYNC_STATES for s in states.values()):
                no_sync_since = no_sync_since if no_sync_since is not None else self.now()
                if self.now() - no_sync_since >= self.scenario.stall_seconds:
                    self._stall(conn, states)
                    return
            else:
                no_sync_since = None
            self.stopping.wait(POLL_S)

    def _states(self, conn: psycopg.Connection[Any]) -> dict[str, str]:
        with query_deadline(conn, QUERY_SECONDS, "the primary"):
            rows = conn.execute("select application_name, sync_state from pg_stat_replication "
                                "where state = 'streaming'").fetchall()
        return {str(r[0]): str(r[1]) for r in rows}

    def _resolve(self, target: str, states: dict[str, str]) -> str | None:
        if target in ("sync", "potential"):
            wanted = SYNC_STATES if target == "sync" else ("potential",)
            return next((n for n, s in sorted(states.items()) if s in wanted), None)
        return target

    def _fire(self, conn: psycopg.Connection[Any], event: FaultEvent, follow_up: str | None,
              states: dict[str, str]) -> None:
        if event.action == "set":
            assert event.name is not None and event.value is not None
            try:
                with query_deadline(conn, QUERY_SECONDS, "the primary"):
                    alter_system(conn, {event.name: event.value})
                self.changed_settings.add(event.name)
                if event.name == "synchronous_standby_names":
                    self.sync_names = event.value
                elif event.name == "synchronous_commit":
                    self.synchronous_commit = event.value
                self._note("fault", "primary", f"set {event.name} = '{event.value}' (reload)")
            except psycopg.Error as exc:
                self._note("error", "primary", f"set {event.name}: {str(exc).strip()}")
            return
        assert event.target is not None
        name = event.target if follow_up else self._resolve(event.target, states)
        if name is None:
            self._note("error", "-", f"{event.action}: no standby is {event.target} now")
            return
        action = follow_up or event.action
        try:
            if action == "stop":
                self.standbys.stop(name)
            elif action == "kill":
                self.standbys.kill(name)
            elif action == "restart":
                self.standbys.stop(name)
                self.standbys.start(name, time.monotonic() + START_TIMEOUT_S)
            elif action == "start":
                self.standbys.start(name, time.monotonic() + START_TIMEOUT_S)
            elif action == "pause":
                self.standbys.pause(name)
            elif action == "continue":
                self.standbys.resume(name)
            elif action == "link":
                assert event.profile is not None
                self.links.set(name, self.ctx.links[event.profile])
            elif action == "unlink":
                self.links.set(name, self.links.original[name])
        except UserError as exc:
            self._note("error", name, f"{action}: {exc.cause}")
            return
        shown = (f"link {event.profile} ({self.ctx.links[event.profile].describe()})"
                 if action == "link" and event.profile is not None else
                 "link back" if action == "unlink" else action)
        self._note("fault", name, shown + (f" (for {event.for_:g} s)"
                                           if event.for_ and not follow_up else ""))
        if event.for_ is not None and follow_up is None:
            back = {"pause": "continue", "link": "unlink"}.get(action, "start")
            resolved = FaultEvent(at=event.at, action=event.action, target=name,
                                  profile=event.profile)
            # `for` counts from when the fault took effect (its record's stamp), not from
            # `at`: on a loaded machine a pause through SSH took effect 1.1 s late, and a
            # follow-up at `at + for` then left b paused for 0.9 s of its 2
            self.pending.append((self.records[-1].t_s + event.for_, resolved, back))
            self.pending.sort(key=lambda p: p[0])

    def _stall(self, conn: psycopg.Connection[Any], states: dict[str, str]) -> None:
        seen = ", ".join(f"{n} {s}" for n, s in sorted(states.items())) or "none streaming"
        self.stalled = (f"commits could not be acknowledged: no synchronous standby for "
                        f"{self.scenario.stall_seconds:g} s with synchronous_commit = "
                        f"{self.ctx.synchronous_commit} (standbys: {seen})")
        self._note("stall", "primary", self.stalled)
        # Terminated while waiting, a backend's commit stays local and its client gets
        # an error: nothing is acknowledged that the standbys did not confirm.
        with query_deadline(conn, QUERY_SECONDS, "the primary"):
            conn.execute("select pg_terminate_backend(pid) from pg_stat_activity "
                         "where application_name = %s and pid <> pg_backend_pid()",
                         (self.ctx.pgbench_name,))

    def stop(self) -> list[Record]:
        self.stopping.set()
        self.join(timeout=30)
        return self.records


def sets_synchronous_commit(scenario: FaultScenario) -> bool:
    return any(e.action == "set" and e.name == "synchronous_commit" for e in scenario.events)


def set_on_primary(admin: str, name: str, value: str) -> None:
    """ALTER SYSTEM SET and a reload, on the primary whose admin conninfo is given."""
    with admin_connection(admin, what="the primary") as conn:
        alter_system(conn, {name: value})


def reset_settings(ctx: FaultContext, names: set[str]) -> None:
    """Undo the scenario's ``set`` events (synchronous_standby_names is the cell's
    own again; other settings go back to their defaults)."""
    if not names:
        return
    with admin_connection(ctx.admin, what="the primary") as conn:
        alter_system(conn, {name: ctx.sync_names if name == "synchronous_standby_names"
                            else None for name in sorted(names)})


@dataclass
class Durability:
    node: str
    rows: int  # rows added during the repeat, as this node sees them
    expected: int  # acknowledged rows (primary) or the primary's rows (standbys)
    ok: bool
    detail: str = ""


def count_rows(conninfo: str) -> int:
    with admin_connection(conninfo, what="a node counting rows") as conn:
        row = conn.execute("select count(*) from test").fetchone()
    return int(row[0]) if row else 0


def _lsn_functions(version_num: int) -> tuple[str, str, str]:
    if version_num >= 100000:
        return "pg_current_wal_lsn()", "pg_last_wal_replay_lsn()", "pg_wal_lsn_diff"
    return "pg_current_xlog_location()", "pg_last_xlog_replay_location()", \
        "pg_xlog_location_diff"


def check_durability(ctx: FaultContext, before: int, acknowledged: int,
                     timeout: float = 60.0) -> list[Durability]:
    """After a repeat (every standby back): the primary holds every acknowledged row,
    and each standby, once replayed up to the primary's position, holds what the
    primary holds."""
    current, replayed, diff = _lsn_functions(ctx.version_num)
    m = ctx.manifest
    with admin_connection(ctx.admin, seconds=10, what="the primary") as conn:
        row = conn.execute(f"select {current}::text").fetchone()
    assert row is not None
    target_lsn = str(row[0])
    primary_rows = count_rows(ctx.admin) - before
    out = [Durability("primary", primary_rows, acknowledged, primary_rows >= acknowledged,
                      "" if primary_rows >= acknowledged else
                      f"{acknowledged - primary_rows} acknowledged rows are missing")]
    for node in m.standbys:
        conninfo = m.admin_conninfo(node)
        deadline = time.monotonic() + timeout
        caught_up = False
        while time.monotonic() < deadline:
            with admin_connection(conninfo, seconds=10, what=f"standby {node.name}") as conn:
                lag = conn.execute(f"select {diff}({replayed}, %s::text::pg_lsn)",
                                   (target_lsn,)).fetchone()
            if lag is not None and lag[0] is not None and float(lag[0]) >= 0:
                caught_up = True
                break
            time.sleep(0.05)
        rows = count_rows(conninfo) - before
        ok = caught_up and rows == primary_rows
        detail = ("" if ok else "did not replay up to the primary's position in "
                  f"{timeout:g} s" if not caught_up else
                  f"{primary_rows - rows} rows the primary has are missing")
        out.append(Durability(node.name, rows, primary_rows, ok, detail))
    return out
