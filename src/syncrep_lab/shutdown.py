"""How the tool stops: signals, the processes it started, and a second Ctrl-C.

- The first SIGINT, SIGTERM or SIGHUP raises :class:`Interrupted` in the main
  thread (Python runs signal handlers there). The ``finally`` blocks on the
  way up undo what was started: pgbench and perf are killed, the run is
  marked ``interrupted``, the cluster is stopped (immediate shutdown) and
  removed. Code that must not be cut short by a first signal runs in
  :func:`critical`; the signal is raised when it ends. Stop paths that would
  otherwise wait for a graceful end (the probes' analysis) check
  :func:`requested` and skip it.
- A second signal while that cleanup runs does not wait for anything: it
  runs every killer registered with :func:`own` (cluster/manifest.py
  registers one per cluster this process made: SIGKILL to each of its
  servers, which are not this process's children), kills every child of this
  process with its process group, marks the run interrupted if the store is
  free within half a second, prints one line and exits with 128+N at once.
  What can be left is files: the manifest is still there, so ``syncrep-lab
  clean`` finishes. This module is a registry: it knows nothing of what it
  kills, so the layers above it (clusters, runs) import it and not the
  reverse.
- pgbench and perf are started with PR_SET_PDEATHSIG, so they die with the
  tool even when it is killed with SIGKILL, which no handler sees. perf gets
  SIGTERM (it then ends its ``sleep`` workload itself), pgbench SIGKILL.
- Python runs a signal's handler in the main thread wherever it is, a
  finalizer too (an object's ``__del__``, a weak reference's callback, run
  by the garbage collector at any allocation). An exception raised there
  cannot propagate: Python prints "Exception ignored in ..." with a
  traceback and goes on, and the first Ctrl-C would be lost (the run going
  on, the next Ctrl-C taken for the second). So the hook for such
  exceptions takes an :class:`Interrupted` back without a word and has the
  signal sent again 10 ms later, to be raised as the first once the finalizer
  has returned.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Hashable
from types import FrameType, TracebackType

from syncrep_lab import procs
from syncrep_lab.errors import Interrupted

_signum: int | None = None  # the first signal, once one arrived
_pending = False  # it arrived inside critical() and is still to be raised
_depth = 0  # nesting of critical()
_tracked: dict[int, subprocess.Popen[bytes] | subprocess.Popen[str]] = {}
# what kills, on a forced exit, processes this process made that are not its children
_owned: dict[Hashable, Callable[[], None]] = {}
_at_force: list[Callable[[], None]] = []
RESEND_SECONDS = 0.01
_resent = False  # the first signal's Interrupted was lost in a finalizer and sent again
_resend: threading.Timer | None = None  # that signal, on its way
_other_unraisable: Callable[[sys.UnraisableHookArgs], object] | None = None

_PR_SET_PDEATHSIG = 1
_prctl: Callable[..., int] | None
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _prctl = None


def install() -> None:
    """Route SIGINT, SIGTERM and SIGHUP (unless ignored, as under nohup) to the handler."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
            continue
        signal.signal(sig, _handler)
    global _other_unraisable
    if sys.unraisablehook is not _unraisable:
        _other_unraisable = sys.unraisablehook
        sys.unraisablehook = _unraisable


def _unraisable(args: sys.UnraisableHookArgs) -> None:
    """An exception Python could not raise (in a finalizer): an :class:`Interrupted` is
    sent again as the same signal; anything else goes to the hook there was before."""
    global _resent, _resend
    if isinstance(args.exc_value, Interrupted):
        _resent = True
        # from another thread, a moment later: sent from here, the handler would run
        # at once, in this hook, and be lost again (printed by Python itself); if the
        # finalizer still runs when it comes, it comes back here and is sent again
        _resend = threading.Timer(RESEND_SECONDS, os.kill,
                                  (os.getpid(), args.exc_value.signum))
        _resend.start()
        return
    (_other_unraisable or sys.__unraisablehook__)(args)


def _handler(signum: int, _frame: FrameType | None) -> None:
    global _signum, _pending, _resent, _resend
    if _signum is not None and not _resent:
        _force(signum)
    if _resend is not None:  # a signal of the user's came first: it stands for the lost one
        _resend.cancel()
        _resend = None
    _resent = False
    _signum = signum
    if _depth > 0:
        _pending = True
        return
    raise Interrupted(signum)


def requested() -> int | None:
    """The signal that asked the tool to stop, if one did."""
    return _signum


class critical:  # lower case: used as ``with shutdown.critical():``
    """A block a first signal must not cut short (cleanup, the last store writes):
    the signal is raised when the outermost such block ends. A second signal
    still forces the exit."""

    def __enter__(self) -> None:
        global _depth
        _depth += 1

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        global _depth, _pending
        _depth -= 1
        if _depth == 0 and _pending:
            _pending = False
            assert _signum is not None
            raise Interrupted(_signum)


def die_with_parent(sig: int) -> Callable[[], None]:
    """A ``preexec_fn`` that makes the child receive ``sig`` when this process dies.

    The kernel ties the signal to the thread that forks: pgbench and perf are
    started from the main thread, which lives as long as the process."""
    parent = os.getpid()

    def preexec() -> None:
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # the tool died before the prctl took effect
            os.kill(os.getpid(), sig)

    return preexec


def track(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    """A child to kill (with its process group, if it leads one) if the tool stops."""
    _tracked[proc.pid] = proc


def untrack(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    _tracked.pop(proc.pid, None)


def kill_tracked(wait: float = 5.0) -> None:
    """SIGKILL every tracked child still running (and its group), then reap them."""
    procs = list(_tracked.values())
    for proc in procs:
        if proc.returncode is None:  # not reaped: its pid (and group) is still its own
            _kill_group_or_process(proc.pid)
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait)
        untrack(proc)


def _kill_group_or_process(pid: int) -> None:
    with contextlib.suppress(OSError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
            return
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def own(key: Hashable, kill: Callable[[], None]) -> None:
    """Something this process made whose processes are not its children (a cluster's
    servers: cluster/manifest.register): ``kill`` kills them at once on a forced exit,
    first of all, without waiting. Owning ``key`` again replaces its killer."""
    _owned[key] = kill


def disown(key: Hashable) -> None:
    _owned.pop(key, None)


def at_force(action: Callable[[], None]) -> Callable[[], None]:
    """Something quick to do on a forced exit (mark the run interrupted); returns
    the function that takes it back."""
    _at_force.append(action)
    return lambda: _at_force.remove(action) if action in _at_force else None


def _say(text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, f"\n{text}\n".encode())


def _force(signum: int) -> None:
    """The second signal: kill what is left, without waiting for anything, and exit."""
    _say(f"second {signal.Signals(signum).name}: not waiting for clean shutdowns; what is "
         "left was killed; run `syncrep-lab clean` to remove any cluster left behind")
    for kill in list(_owned.values()):
        with contextlib.suppress(Exception):
            kill()
    for pid in list(_tracked) + procs.children(os.getpid()):
        _kill_group_or_process(pid)
    for action in list(_at_force):
        with contextlib.suppress(Exception):
            action()
    os._exit(128 + signum)
