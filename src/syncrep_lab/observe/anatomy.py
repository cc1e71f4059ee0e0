"""``observe --anatomy``: the commit anatomy probe (probes/anatomy.py) on the observed
primary, attached for the window only and cut at the window's slices.

- **Where it can run.** The uprobes go on the primary's own processes, so the primary
  must run on this machine (its postmaster found through the observer's backend, as
  observe/cpu.py finds it), this process must be allowed to load BPF programs, the
  server binary (``/proc/PID/exe``) must have the functions' symbols
  (:func:`~syncrep_lab.probes.anatomy.unavailable_reason`). All of it is checked before
  the first sample, and what fails is refused with the fix; nothing is attached or
  written then.
- **What it costs, said before it attaches.** A uprobe is a breakpoint in the binary:
  while it is attached every commit of every server of that binary on this machine pays
  its traps, the observed one's and the others' (:func:`warning` names them). The
  window's own rates and CPU figures carry them, and the window's notes say so.
- **Which processes are the backends.** On a cluster the tool did not start, the
  workload's backends are often older than the window (a connection pool), so the run's
  rule (every child the postmaster already has is no backend) would leave out the very
  commits to time. Left out here are the postmaster's children that are *not* client
  backends when the probe attaches, by the server's own word (``pg_stat_activity``:
  ``backend_type``, and the walsenders of ``pg_stat_replication``) and the observer's own
  backend; what is born later counts, as in a run (docs/decisions.md).
- **Cut at the slices.** A numbered snapshot of the aggregates is taken where each slice
  begins and ends (observe/watch.py), and a slice's anatomy is the difference of its two
  (:func:`~syncrep_lab.probes.anatomy.between`): stored as the slice's ``anatomy`` rows,
  per-commit figures get an interval over slices, like every other figure of the window.
- **Nothing left attached.** bpftrace dies with this process (PR_SET_PDEATHSIG), is
  stopped when the window ends, killed at once on a signal or an error, and recorded in
  the state dir so that ``syncrep-lab clean`` ends one whose observer is gone.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from syncrep_lab import procs
from syncrep_lab.errors import UserError
from syncrep_lab.observe.cpu import local_postmaster
from syncrep_lab.observe.session import ObserverSession
from syncrep_lab.observe.watch import Watched
from syncrep_lab.probes import standby_anatomy
from syncrep_lab.probes.anatomy import (
    PROBE,
    SNAPSHOT_SECONDS,
    CommitAnatomy,
    between,
    slice_rows,
    snapshots,
    unavailable_reason,
    work_dir,
)
from syncrep_lab.store import ProbeRow

# The longest window the probe is attached for: it is a diagnosis, not monitoring (its
# traps weigh on every commit of the server), and each slice's print (~100 KB) is kept
# on disk until the window ends.
MAX_SECONDS = 3600.0


def _refusal(reason: str) -> UserError:
    """The probe's reason (its fix in it, "(fix: ...)" or "; fix: ...") as cause and fix.

    >>> str(_refusal("bpftrace is not installed (fix: apt-get install bpftrace)"))
    '--anatomy: bpftrace is not installed\\n  fix: apt-get install bpftrace'
    >>> _refusal("a binary X has no symbol Y (a stripped build; fix: another build)").cause
    '--anatomy: a binary X has no symbol Y (a stripped build)'
    """
    at = reason.find("fix: ")
    if at < 0:
        return UserError(f"--anatomy: {reason}", "observe without --anatomy")
    cause, fix = reason[:at].rstrip(" (;"), reason[at + len("fix: "):].removesuffix(")")
    if cause.count("(") > cause.count(")"):
        cause += ")"
    return UserError(f"--anatomy: {cause}", fix)


NOT_HERE_FIX = ("the commit anatomy needs the primary's machine: run observe --anatomy there, "
                "as root")


def prerequisites(session: ObserverSession) -> tuple[int, Path]:
    """The primary's postmaster and binary once everything the probe needs is there;
    else UserError with what is missing and the fix."""
    (started,) = session.one("select extract(epoch from backend_start)::float8 "
                             "from pg_stat_activity where pid = pg_backend_pid()")
    postmaster, why = local_postmaster(session.backend_pid, float(started))
    if postmaster is None:
        raise UserError(f"--anatomy: {why.split(': give')[0]}; the commit anatomy puts "
                        "uprobes on the primary's own processes", NOT_HERE_FIX)
    binary = Path(f"/proc/{postmaster}/exe")
    reason = unavailable_reason(binary)
    if reason is not None:
        raise _refusal(reason)
    return postmaster, binary


def other_servers(binary: Path, postmaster: int) -> list[int]:
    """The postmasters of the other servers of that binary running here (a process of it
    whose parent runs something else)."""
    try:
        target = os.stat(binary)
    except OSError:
        return []
    same = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                st = os.stat(f"/proc/{entry}/exe")
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
                same.add(int(entry))
    return sorted(p for p in same if p != postmaster and procs.parent(p) not in same)


def warning(binary: Path, postmaster: int, seconds: float) -> str:
    """What attaching costs, said before it is attached."""
    try:
        shown = os.readlink(binary)
    except OSError:
        shown = str(binary)
    others = other_servers(binary, postmaster)
    there = (f"{len(others)} run here now (postmaster{'s' if len(others) > 1 else ''} "
             f"{', '.join(map(str, others))})" if others else "none runs here now")
    return (f"commit anatomy: uprobes go on {shown} for this window only ({seconds:g} s). "
            "While they are attached every commit of this server pays their traps (about "
            "10 µs of CPU per commit, more where a probe is stepped; in this window's figures "
            "too), and so does every "
            f"other server of the same binary on this machine: {there}. The probe only "
            "reads.")


def not_backends(session: ObserverSession, postmaster: int) -> list[int]:
    """The postmaster's children now that are no client backends (see the module's
    text), the observer's own backend among them."""
    # /proc first: a backend born after this read is in neither list, and counts
    children = procs.children(postmaster)
    client = ("backend_type = 'client backend'" if session.version_num >= 100000
              else "true")  # 9.6 lists client backends only (walsenders: below)
    rows = session.query(f"select pid from pg_stat_activity where {client} "
                         "and pid <> pg_backend_pid() "
                         "and pid not in (select pid from pg_stat_replication)")
    backends = {int(r[0]) for r in rows}
    return sorted(set(children) - backends)


HALF_SNAPSHOT_SECONDS = 8.0  # a snapshot's longest wait with the standby's half on


class WindowAnatomy:
    """The probe for one window: attached by :meth:`start`, a numbered snapshot at each
    :meth:`mark`, ended and cut into the slices' rows by :meth:`end`; :meth:`close`
    kills what still runs and removes its working folder, on every path."""

    def __init__(self, session: ObserverSession, postmaster: int, binary: Path,
                 names: Callable[[], Mapping[int, str]],
                 standbys: tuple[str, Mapping[str, str]] | None = None) -> None:
        """``standbys``: the primary's connection and the standbys' by name (``--standby``
        or ``--dir``): the sync one's half of each commit is split too, where it runs here.
        Its lines come in before a snapshot's print in bpftrace's one stream, so a
        snapshot is waited for longer then (HALF_SNAPSHOT_SECONDS: on a loaded 2-core
        machine a print came more than 2 s after it was asked for)."""
        self.work = work_dir()
        self.snapshot_seconds = (SNAPSHOT_SECONDS if standbys is None
                                 else HALF_SNAPSHOT_SECONDS)
        self.probe = CommitAnatomy(binary, [postmaster], self.work, names=names,
                                   exclude=lambda: not_backends(session, postmaster),
                                   snapshots=True,
                                   standbys=standbys[1] if standbys is not None else None,
                                   primary_admin=standbys[0] if standbys is not None else None)
        self.program = ""  # what was attached, kept with the window
        self.waited: list[float] = []  # seconds from each snapshot asked to its print
        self.missed: list[str] = []  # snapshots that did not come, and why

    def start(self) -> None:
        self.probe.start()
        status, reason = self.probe.status
        if status != "ran":
            raise UserError(f"--anatomy: bpftrace could not attach the commit anatomy: "
                            f"{reason}", "observe without --anatomy, or fix what bpftrace "
                            "said above")
        self.program = self.probe.program_path.read_text()

    def mark(self) -> int | None:
        """A snapshot, waited for (:meth:`CommitAnatomy.snapshot`)."""
        asked = time.monotonic()
        number = self.probe.snapshot(self.snapshot_seconds)
        if number is not None:
            self.waited.append(time.monotonic() - asked)
        else:
            gone = self.probe.running is None or self.probe.running.proc.poll() is not None
            self.missed.append(
                f"snapshot {self.probe.marks}: "
                + ("bpftrace had exited: " + (self.probe.said_excerpt() or "it said nothing")
                   if gone else f"no print within {self.snapshot_seconds:g} s"))
        return number

    def end(self, watched: Watched, names: Mapping[int, str]) -> list[str]:
        """Stop bpftrace (killed at once when a signal ended the window) and give each
        slice its anatomy rows; the notes the window keeps about it."""
        marks = [s.anatomy_to for s in watched.slices if s.anatomy_to is not None]
        used = self.probe.cpu_seconds()
        ready = self.probe.ready_cpu_s
        text = self.probe.end(None if watched.signum is not None else max(marks, default=None))
        prints = snapshots(text)
        notes = [f"the commit anatomy was attached for the whole window "
                 f"({len(self.probe.excluded)} processes that were no client backends left "
                 "out): its traps weigh on this window's rates and CPU per commit"]
        if used is not None and ready is not None:
            notes.append(f"bpftrace's own CPU in the window: {used - ready:.2f} s (its "
                         "prints at each slice's end)")
        if self.waited:
            notes.append(f"the commit anatomy's {len(self.waited)} snapshots each came "
                         f"{1000 * min(self.waited):.0f} to {1000 * max(self.waited):.0f} ms "
                         "after they were asked for (the sampling waited for them)")
        notes += [f"the commit anatomy's {what}" for what in self.missed]
        missing = []
        for n, s in enumerate(watched.slices, start=1):
            if s.anatomy_from not in prints or s.anatomy_to not in prints:
                why = ("the window ended before the slice did" if s.anatomy_to is None
                       else "bpftrace printed no snapshot for it")
                s.anatomy_probe = ProbeRow(PROBE, "failed", why)
                missing.append((n, why))
                continue
            try:
                found = between(prints[s.anatomy_from], prints[s.anatomy_to])
            except ValueError as exc:  # a print that does not describe one set of values
                s.anatomy_probe = ProbeRow(PROBE, "failed", str(exc))
                missing.append((n, str(exc)))
                continue
            s.anatomy = slice_rows(found, names)
            s.anatomy_probe = ProbeRow(PROBE, "ran", None)
        notes += [f"slice {n} has no commit anatomy: {why}" for n, why in missing]
        return notes + self._standby(text, watched)

    def _standby(self, text: str, watched: Watched) -> list[str]:
        """The sync standby's half of each slice's commits (probes/standby_anatomy.py):
        the window's events joined once (a chain crosses the slices' edges), each commit
        given to the slice its wait began in; what the window keeps about it."""
        standby = self.probe.standby
        if self.probe.standbys is None:
            return []
        if standby is None:
            return [f"the wait for the standby was not split: {self.probe.standby_status[1]}"]
        try:
            lost = standby_anatomy.lost(
                self.probe.stderr_path.read_text(errors="replace") + text)
        except OSError:
            lost = 0
        if lost:
            return [f"the wait for the standby was not split: bpftrace lost {lost} events"]
        moments = standby_anatomy.marks(text)
        joined = standby_anatomy.join(standby_anatomy.since(
            standby_anatomy.events(text), self.probe.attached_ns))
        for s in watched.slices:
            low, high = moments.get(s.anatomy_from or -1), moments.get(s.anatomy_to or -1)
            if s.anatomy and low is not None and high is not None:
                s.anatomy = s.anatomy + standby_anatomy.rows(joined.between(low, high),
                                                             standby.name)
        return [f"the wait for standby {standby.name} split for {len(joined.chains):,} "
                f"commits ({joined.unmatched:,} without their whole chain"
                + (f", {joined.elsewhere:,} whose chain led to another release than their "
                   "own" if joined.elsewhere else "")
                + (f", {joined.applied:,} under remote_apply, whose replay is not split"
                   if joined.applied else "") + ")"]

    def close(self) -> None:
        self.probe.abort()
        shutil.rmtree(self.work, ignore_errors=True)
