"""``syncrep-lab observe``: check the input, open the read-only sessions, find the servers'
processes, watch, store. Everything a user can get wrong is refused before the first
sample, and nothing is written before the window has something to store."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syncrep_lab.errors import UserError
from syncrep_lab.json_form import JSON
from syncrep_lab.observe.anatomy import MAX_SECONDS as ANATOMY_SECONDS
from syncrep_lab.observe.anatomy import (
    NOT_HERE_FIX,
    WindowAnatomy,
    prerequisites,
    warning,
)
from syncrep_lab.observe.cpu import LocalCpu, NodeCpu, RemoteCpu, local_postmaster
from syncrep_lab.observe.disks import WalDisk, wal_disk
from syncrep_lab.observe.lags import StandbyLags
from syncrep_lab.observe.session import ObserverSession, ServerGone, open_session
from syncrep_lab.observe.watch import Watch, Watched
from syncrep_lab.pg.conninfo import mask_conninfo, mask_text, require_parses
from syncrep_lab.run.machine import machine_metadata

# Settings stored with the window (cell parameters), so that ``compare`` of two windows
# names the ones that changed between them.
WATCHED_SETTINGS = ("synchronous_commit", "synchronous_standby_names", "commit_delay",
                    "commit_siblings", "wal_writer_delay", "wal_writer_flush_after",
                    "wal_buffers", "wal_sync_method", "full_page_writes", "wal_compression",
                    "max_connections", "shared_buffers")
MAX_HZ = 50.0
MAX_SECONDS = 86400


@dataclass
class ObserveOptions:
    primary: str
    standbys: dict[str, str] = field(default_factory=dict)
    seconds: float = 60.0
    hz: float = 10.0
    slice_seconds: int = 10
    host: str | None = None
    hosts_file: Path | None = None
    out: Path = Path("observe")
    label: str | None = None
    anatomy: bool = False  # the commit anatomy probe on the primary (observe/anatomy.py)
    # the standbys whose half of each commit --anatomy splits, where the sync one runs
    # here (probes/standby_anatomy.py): those --standby names and those --dir adds
    named: tuple[str, ...] = ()


def parse_standby(text: str) -> tuple[str, str]:
    name, sep, conninfo = text.partition("=")
    name = name.strip()
    if not sep or not name or not conninfo.strip() or not name.replace("_", "").isalnum():
        raise UserError(f"--standby {mask_text(text)!r} is not NAME=CONNINFO",
                        "give the standby's application_name, '=', then its connection "
                        "string, e.g. --standby b='host=10.0.0.2 dbname=postgres'")
    return name, conninfo.strip()


def check(opts: ObserveOptions) -> None:
    """Refuse bad input before any connection is opened."""
    if not 0 < opts.seconds <= MAX_SECONDS:
        raise UserError(f"--seconds {opts.seconds:g} is out of range",
                        f"give 1 to {MAX_SECONDS} seconds")
    if not 0 < opts.hz <= MAX_HZ:
        raise UserError(f"--hz {opts.hz:g} is out of range",
                        f"give a sampling rate above 0 and at most {MAX_HZ:g} per second "
                        "(10 is the default: each sample is two short queries)")
    if opts.slice_seconds < 1:
        raise UserError(f"--slice {opts.slice_seconds} is below a second",
                        "give the slice length in whole seconds (10 by default)")
    for where, conninfo in [("the primary", opts.primary),
                            *((f"--standby {k}", v) for k, v in opts.standbys.items())]:
        require_parses(where, conninfo)
    for name in opts.standbys:
        if name in ("primary", "client"):
            raise UserError(f"--standby {name}: that name is taken by the tool's own roles",
                            "name the standby as its application_name")
    if opts.out.exists() and not opts.out.is_dir():
        raise UserError(f"--out {opts.out} is a file", "give a folder for the observation")
    if opts.anatomy and opts.host is not None:
        raise UserError(f"--anatomy with --host {opts.host}: the primary runs on another "
                        "machine, and the commit anatomy puts uprobes on the primary's own "
                        "processes", NOT_HERE_FIX)
    if opts.anatomy and opts.seconds > ANATOMY_SECONDS:
        raise UserError(f"--anatomy for {opts.seconds:g} s: the commit anatomy is attached "
                        f"for at most {ANATOMY_SECONDS:g} s (its traps weigh on every commit "
                        "of the server while it is)",
                        f"give --seconds {ANATOMY_SECONDS:g} or less with --anatomy")
    if opts.host is not None and opts.hosts_file is None:
        raise UserError(f"--host {opts.host} needs the file that describes it",
                        "add --hosts FILE: a TOML file (a spec will do) with [hosts."
                        f"{opts.host}] address, user, key, ...")


def host_of(opts: ObserveOptions) -> Any:
    """The SSH host ``--host`` names in ``--hosts``, connected (UserError if it cannot be)."""
    from syncrep_lab.hosts.ssh import HostSpec, SshHost
    from syncrep_lab.plan.spec import Host

    assert opts.host is not None and opts.hosts_file is not None
    try:
        data = tomllib.loads(opts.hosts_file.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"--hosts {opts.hosts_file}: {exc}",
                        "give a readable TOML file with [hosts.NAME] tables") from None
    entry = (data.get("hosts") or {}).get(opts.host)
    if not isinstance(entry, dict):
        raise UserError(f"--hosts {opts.hosts_file} has no [hosts.{opts.host}]",
                        "add it (address, user, key, known_hosts) or name a host it has: "
                        + (", ".join(data.get("hosts") or {}) or "none"))
    try:
        # bin_dir is the only field observe does not need
        h = Host.model_validate({"bin_dir": "", **entry})
    except ValueError as exc:
        raise UserError(f"[hosts.{opts.host}] in {opts.hosts_file}: "
                        f"{str(exc).splitlines()[-1].strip()}",
                        "fix that field (docs/spec.md lists them)") from None
    host = SshHost(HostSpec(name=opts.host, address=h.address, port=h.port, user=h.user,
                            key=h.key, known_hosts=h.known_hosts, accept_new=h.accept_new,
                            connect_timeout=h.connect_timeout))
    host.connect()
    return host


def _cpu_reader(session: ObserverSession, opts: ObserveOptions, watch_names: Any,
                remote: bool) -> tuple[NodeCpu | None, str | None, dict[str, Any]]:
    """A CPU reader for a node, or why there is none, and the machine facts it gives."""
    (started,) = session.one("select extract(epoch from backend_start)::float8 "
                             "from pg_stat_activity where pid = pg_backend_pid()")
    if remote:
        (data_dir,) = session.one("select current_setting('data_directory')")
        host = host_of(opts)
        try:
            reader = RemoteCpu(session.node, host, str(data_dir), session.backend_pid,
                               watch_names)
        except BaseException:
            host.close()
            raise
        return reader, None, {"hostname": opts.host, "cpus_usable": reader.cpus,
                              "cpu_count": reader.cpus, "reached": "ssh"}
    postmaster, why = local_postmaster(session.backend_pid, float(started))
    if postmaster is None:
        return None, why, {"hostname": None, "cpus_usable": None, "reached": "no"}
    reader_local = LocalCpu(session.node, postmaster, session.backend_pid, watch_names)
    return reader_local, None, {**machine_metadata(), "cpus_usable": reader_local.cpus,
                                "reached": "here"}


@dataclass
class ServerFacts:
    version: str  # server_version, e.g. "18.6"
    version_num: int
    watched: dict[str, Any]  # WATCHED_SETTINGS as the server has them
    settings: dict[str, Any]  # every setting not at its default: setting, unit, source
    streaming: int  # standbys in pg_stat_replication


def _server_facts(primary: ObserverSession) -> ServerFacts:
    (version,) = primary.one("select current_setting('server_version')")
    # the server's settings, not the observer's session's (its start-up options are
    # source 'client'; a SET would be 'session', though it makes none)
    rows = primary.query("select name, setting, unit, source from pg_settings "
                         "where source not in ('default', 'override', 'client', 'session') "
                         "or name = any(%s)", (list(WATCHED_SETTINGS),))
    watched = {name: setting for name, setting, _, _ in rows if name in WATCHED_SETTINGS}
    non_default = {name: {"setting": setting, "unit": unit, "source": source}
                   for name, setting, unit, source in rows
                   if source not in ("default", "override", "client", "session")}
    (standbys,) = primary.one("select count(*) from pg_stat_replication")
    return ServerFacts(str(version), primary.version_num, watched, non_default, int(standbys))


@dataclass(frozen=True)
class Observed:
    """What an ``observe`` did (``observe --json`` prints it with its window): the folder
    the window is stored in, its cell there, the slices stored, why it ended before its
    time (None: it ran it), the signal that ended it, what was noted, and each standby's
    positions and lags from positions (observe/lags.py)."""

    out: Path
    cell: int
    slices: int
    ended: str | None
    signum: int | None
    notes: tuple[str, ...]
    lags: tuple[StandbyLags, ...] = ()

    def to_json(self) -> dict[str, JSON]:
        return {"out": str(self.out), "cell": self.cell, "slices": self.slices,
                "ended": self.ended, "signum": self.signum, "notes": list(self.notes),
                "lags": [lag.to_json() for lag in self.lags]}


def _require_streaming(standby: ObserverSession) -> None:
    """Refuse a standby whose WAL receiver is not streaming: nothing of the primary's
    commits passes through it, so its figures would answer nothing."""
    rows = standby.query("select status from pg_stat_wal_receiver")
    status = str(rows[0][0]) if rows and rows[0][0] is not None else None
    if status != "streaming":
        said = f"its WAL receiver is {status}" if status else "it has no WAL receiver"
        raise UserError(f"--standby {standby.node}: {mask_conninfo(standby.conninfo)} is in "
                        f"recovery but not streaming from a primary ({said})",
                        "check its primary_conninfo and the primary's log, or leave "
                        f"--standby {standby.node} out")


class Observer:
    """The read-only sessions, CPU readers and sampling of one observed cluster, open
    from :meth:`open` to :meth:`close`, watched one window at a time (:meth:`window`):
    ``observe`` watches one, ``observe --serve`` one after another."""

    def __init__(self, opts: ObserveOptions, say: Callable[[str], None]) -> None:
        check(opts)
        self.opts, self.say = opts, say
        self.sessions: list[ObserverSession] = []
        self.readers: dict[str, NodeCpu] = {}
        self.anatomy: WindowAnatomy | None = None
        self.prepared: tuple[int, Path] | None = None
        self.warned = False
        self.notes: list[str] = []  # said of every window
        self.wal_disks: list[WalDisk] = []

    def open(self) -> None:
        opts = self.opts
        try:
            primary = open_session("primary", opts.primary, primary=True)
            self.sessions.append(primary)
            # checked first, so that what it lacks is said before anything else is done
            self.prepared = prerequisites(primary) if opts.anatomy else None
            standbys = []
            for name, conninfo in opts.standbys.items():
                standbys.append(open_session(name, conninfo, primary=False))
                self.sessions.append(standbys[-1])
                _require_streaming(standbys[-1])
            self.facts = _server_facts(primary)
            self.watch = Watch(primary, standbys, hz=opts.hz,
                               slice_seconds=opts.slice_seconds, cpu=self.readers)
            self.watch.replication(None, 0.0)
            reader, self.cpu_note, self.machine = _cpu_reader(
                primary, opts, self.watch.names, opts.host is not None)
            if reader is not None:
                self.readers["primary"] = reader
            for standby in standbys:
                local, why, _ = _cpu_reader(standby, opts, self.watch.names, False)
                if local is not None:
                    self.readers[standby.node] = local
                else:
                    self.notes.append(f"standby {standby.node}'s CPU was not read: {why}")
            self.wal_disks = self._wal_disks([primary, *standbys])
            self.watch.disks = {d.device for d in self.wal_disks if d.device is not None}
            unknown = sorted(set(opts.standbys) - set(self.watch.walsenders.values()))
            if unknown:
                self.notes.append(
                    f"not in pg_stat_replication as application_name: {', '.join(unknown)} "
                    "(their walsenders are not named after them)")
        except ServerGone as exc:
            raise UserError(f"the server stopped answering before the observation began: "
                            f"{exc}", "check that it is up, then observe again") from None

    def _wal_disks(self, sessions: list[ObserverSession]) -> list[WalDisk]:
        """The block device under each server's WAL whose processes run here (the CPU
        reader found its postmaster); why none for the others."""
        found = []
        for session in sessions:
            reader = self.readers.get(session.node)
            if reader is None or not isinstance(reader, LocalCpu):
                found.append(WalDisk(session.node, None, "its server is not on this "
                                     "machine"))
                continue
            (data_dir,) = session.one("select current_setting('data_directory')")
            found.append(wal_disk(session.node, str(data_dir)))
        return found

    def window(self, seconds: float, warn_seconds: float | None = None
               ) -> tuple[Watched, list[str], list[StandbyLags]]:
        """Watch one window: what was gathered, its notes, and each standby's lags from
        positions. ``warn_seconds``: the attachment the anatomy's warning names."""
        for reader in self.readers.values():
            reader.cut()  # the CPU since the last window is no slice's
        self.watch.notes = []
        notes = list(self.notes)
        try:
            if self.prepared is not None:
                postmaster, binary = self.prepared
                if not self.warned:
                    self.say(warning(binary, postmaster, warn_seconds or seconds))
                    self.warned = True
                split = {n: c for n, c in self.opts.standbys.items() if n in self.opts.named}
                self.anatomy = WindowAnatomy(self.sessions[0], postmaster, binary,
                                             lambda: self.watch.seen,
                                             (self.opts.primary, split) if split else None)
                self.anatomy.start()
                self.watch.mark = self.anatomy.mark
            began = time.monotonic()
            watched = self.watch.run(seconds)
            if self.anatomy is not None:
                notes += self.anatomy.end(watched, self.watch.seen)
        except ServerGone as exc:
            raise UserError(f"the server stopped answering before the observation began: "
                            f"{exc}", "check that it is up, then observe again") from None
        finally:
            if self.anatomy is not None:
                self.program = self.anatomy.program
                self.anatomy.close()  # killed if it still runs: nothing stays attached
                self.anatomy = None
        lags = self.watch.positions.window(began, time.monotonic(), self.facts.version_num)
        for lag in lags:
            if lag.stale:
                notes.append(f"standby {lag.standby}: {lag.reason}; its lags from "
                             "positions are given instead")
        return watched, notes + watched.notes, lags

    def close(self) -> None:
        if self.anatomy is not None:
            self.anatomy.close()
        for reader_ in self.readers.values():
            with contextlib.suppress(Exception):
                reader_.close()
        for session in self.sessions:
            session.close()

    def store(self, watched: Watched, notes: list[str], lags: list[StandbyLags],
              out: Path | None = None) -> Observed:
        """Store the window in ``out`` (``--out`` by default)."""
        opts = self.opts if out is None else dataclasses.replace(self.opts, out=out)
        done = _store(opts, watched, self.facts, self.machine, notes, self.cpu_note,
                      getattr(self, "program", None) if self.prepared else None,
                      self.wal_disks)
        return dataclasses.replace(done, lags=tuple(lags))


def observe(opts: ObserveOptions, say: Callable[[str], None] = lambda _: None
            ) -> Observed:
    """Watch the cluster for ``opts.seconds`` and store the window; what happened.
    ``say``: what the user must read before anything is attached."""
    observer = Observer(opts, say)
    try:
        observer.open()
        watched, notes, lags = observer.window(opts.seconds)
    finally:
        observer.close()
    return observer.store(watched, notes, lags)


def _store(opts: ObserveOptions, watched: Watched, facts: ServerFacts,
           machine: dict[str, Any], notes: list[str], cpu_note: str | None,
           program: str | None = None, wal_disks: Sequence[WalDisk] = ()) -> Observed:
    if not watched.slices:
        raise UserError(f"nothing was gathered: {watched.ended or 'no full second sampled'}",
                        "observe for longer, with the servers up")
    if watched.ended:
        notes = [f"ended early: {watched.ended}", *notes]
    if facts.version_num < 100000:
        notes.append("9.6 shows no wait event while a commit waits for a standby")
    # imported only now: the store's statistics import scipy, a second of CPU that must
    # not land in the sampled window of the machine being watched
    from syncrep_lab.observe.record import store_window

    params = {"kind": "observe", "pg": facts.version.split()[0],
              "standbys": facts.streaming,
              "clients": max(1, max(s.sessions_max for s in watched.slices)),
              **facts.watched, "sync": facts.watched.get("synchronous_standby_names") or "",
              "hz": opts.hz, "slice_seconds": opts.slice_seconds,
              # its traps weigh on the window: compare names it between two windows
              **({"anatomy": "on"} if opts.anatomy else {}),
              # each server's WAL device, its disk_io rows' (observe/disks.py)
              **({"wal_devices": {d.node: d.device for d in wal_disks if d.device}}
                 if any(d.device for d in wal_disks) else {})}
    notes = [*notes, *(f"{d.node}'s WAL disk was not read: {d.why}" for d in wal_disks
                       if d.device is None and d.why)]
    description = "\n".join([
        'name = "observe"', "[observe]",
        f"primary = {json.dumps(mask_conninfo(opts.primary))}",
        f"seconds = {opts.seconds:g}", f"hz = {opts.hz:g}",
        f"slice_seconds = {opts.slice_seconds}",
        *([f"host = {json.dumps(opts.host)}"] if opts.host else []),
        *(["anatomy = true"] if opts.anatomy else []),
        "[observe.standbys]",
        *(f"{name} = {json.dumps(mask_conninfo(c))}" for name, c in opts.standbys.items()),
        ""])
    nodes = [{"name": "primary", "conninfo": mask_conninfo(opts.primary)},
             *({"name": n, "conninfo": mask_conninfo(c)} for n, c in opts.standbys.items())]
    idx, stored = store_window(opts.out, watched, label=opts.label, params=params,
                               description=description, machine=machine,
                               version=facts.version, nodes=nodes,
                               settings={"primary": facts.settings}, notes=notes,
                               cpu_note=cpu_note, program=program)
    return Observed(opts.out, idx, stored, watched.ended, watched.signum, tuple(notes))
