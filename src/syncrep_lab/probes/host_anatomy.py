"""The commit anatomy of a primary on an SSH host: probes/anatomy.py's probe, run there.

The same program (:func:`anatomy.program`) is written to the host and run by bpftrace
there, as root or through ``sudo -n`` (``sudo = true`` in the host's table, as for perf,
with a grant such as ``postgres ALL=(root) NOPASSWD:SETENV: /usr/bin/bpftrace``: SETENV
because bpftrace 0.17 takes its map size and its attach marker from the environment,
which sudo otherwise drops). What it prints is fetched when it stops and read here by
the same :func:`anatomy.parse_output` and :func:`anatomy.anatomy_rows`.

Whether it can run there (:func:`check`) is asked of the host in one command: the
account (root, or sudo), bpftrace on its PATH, the uprobe PMU, BTF and lockdown, then a
one-line program run through the same sudo with the same environment, which proves the
grant, that BPF programs load, that the ``kill`` tracepoint is there, and that the
kernel's pids are the host's: the program filters on the kernel's view of a process's
parent against the postmaster's pid as the host sees it (its postmaster.pid), and a
host in a PID namespace of its own (a container) would count nothing. The server
binary's symbols are read there by :func:`uprobe_points.elf_symbols` itself, its source run
by the host's python3, or, where the host has none, from a copy of the binary.

bpftrace is started by a watchdog, a sh script that lives in an SSH channel: it starts
bpftrace in the background, says when every probe is attached, then reads its stdin.
``stop``: SIGINT (sudo passes it on), then SIGTERM each second until bpftrace has ended
(anatomy.NUDGE_SIGNAL), bpftrace prints its maps and exits, the watchdog says its exit
status. Anything else (``abort``, or the end of stdin, which is what the
watchdog reads when the tool is killed or its connection is gone: sshd closes the
channel's pipes) removes the files and ends bpftrace with SIGTERM. A guard the watchdog
forks ends it too, within a second, when the watchdog is gone, when the primary's
postmaster is gone (``clean`` stopping the node), or at a deadline well past the
repeat. Its uprobes are perf events held by its process, as here: nothing stays
attached once it has exited.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import platform
import posixpath
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from syncrep_lab import shutdown
from syncrep_lab.errors import UserError
from syncrep_lab.hosts import postmaster, snapshots
from syncrep_lab.hosts.ssh import ALIVE_SH, HostSpec, RemoteProcess, SshHost
from syncrep_lab.probes import uprobe_points
from syncrep_lab.probes.anatomy import (
    ATTACH_SECONDS,
    ATTACHED,
    LEVEL,
    PROBE,
    STOP_SECONDS,
    SYMBOLS,
    _excerpt,
    anatomy_rows,
    level_read,
    map_keys,
    parse_output,
    program,
)
from syncrep_lab.probes.recorder import Ending
from syncrep_lab.probes.session import walsenders
from syncrep_lab.probes.standby_anatomy import PERF_PAGES, Standby, host_program
from syncrep_lab.probes.uprobe_points import elf_symbols
from syncrep_lab.store import AnatomyRow, ProbeRow, ProbeRows

BINARY_LIMIT = 512 << 20  # a copy of the server binary (no python3 there): ~10 MB
OUTPUT_LIMIT = 256 << 20  # what bpftrace printed: a few hundred KB
DEADLINE_MARGIN = 300.0  # the guard's deadline: this far past attach, repeat and stop

# Run by bpftrace in the check: loads a BPF program, reads the kill tracepoint's format
# (so that it must exist) and prints the kernel's pid of bpftrace and of its parent.
_TRIAL = ('tracepoint:syscalls:sys_enter_kill { @k = args->pid; } '
          'BEGIN { printf("pids %d %d\\n", pid, curtask->real_parent->tgid); exit(); }')

# $1: "sudo" when the account may use sudo -n; $2: BPFTRACE_MAP_KEYS_MAX; $3: the trial.
# The first line says what failed ("no WHAT") or the host's machine and how bpftrace
# runs ("arch MACHINE root|sudo"); then the trial's shell pid as the host sees it
# (bpftrace's, or sudo's, which forks it), what the trial printed, and its exit status.
_CHECK_SH = r"""
say() { echo "no $*"; exit 0; }
if [ "$(id -u)" = 0 ]; then via=
elif [ "$1" = sudo ]; then via=sudo
else say account; fi
command -v bpftrace >/dev/null 2>&1 || say bpftrace
[ -e /sys/bus/event_source/devices/uprobe/type ] || say pmu
[ -e /sys/kernel/btf/vmlinux ] || say btf
grep -q '\[confidentiality\]' /sys/kernel/security/lockdown 2>/dev/null && say lockdown
echo "arch $(uname -m) ${via:-root}"
set -- "$2" "$3"
if [ -n "$via" ]; then
  sh -c 'echo "shell $$"; exec sudo -n "$@"' sh @ENV@ bpftrace -e "$2" </dev/null 2>&1
else
  sh -c 'echo "shell $$"; exec env "$@"' sh @ENV@ bpftrace -e "$2" </dev/null 2>&1
fi
echo "ran $?"
""".replace("@ENV@", f'{ATTACHED}=1 BPFTRACE_MAP_KEYS_MAX="$1"')

# The watchdog (see the module's text). $1: the files' base ($1.bt the program, .json
# and .err what bpftrace prints), $2: "sudo" or "", $3: BPFTRACE_MAP_KEYS_MAX, $4: the
# postmaster's pid, $5: the guard's deadline, $6: attach and $7: stop bounds, in s, $8:
# bpftrace's perf buffer pages per CPU (BPFTRACE_PERF_RB_PAGES).
_WATCHDOG_SH = ALIVE_SH + r"""
trap '' HUP PIPE
base=$1 via=$2 keys=$3 pm=$4 limit=$5 attach=$6 stop=$7 pages=$8 me=$$
prog=$base.bt out=$base.json err=$base.err
set -- @ATTACHED@=1 BPFTRACE_MAP_KEYS_MAX="$keys" BPFTRACE_PERF_RB_PAGES="$pages" \
  bpftrace -f json "$prog"
if [ "$via" = sudo ]; then
  sudo -n "$@" >"$out" 2>"$err" </dev/null &
else
  env "$@" >"$out" 2>"$err" </dev/null &
fi
bt=$!
finish() {
  kill -"$1" "$bt" 2>/dev/null
  i=0
  while alive "$bt" && [ "$i" -lt $((stop * 10)) ]; do
    sleep 0.1 2>/dev/null || sleep 1
    i=$((i + 1))
    # again every second, as TERM: bpftrace misses a stop signal that comes while it is
    # out of its epoll_wait (anatomy.NUDGE_SIGNAL says why, and why not INT again)
    if [ $((i % 10)) -eq 0 ]; then kill -TERM "$bt" 2>/dev/null; fi
  done
  # through sudo the pid is sudo's, which passes every signal on but SIGKILL: killing
  # it would leave bpftrace running
  if alive "$bt" && [ "$via" != sudo ]; then kill -KILL "$bt" 2>/dev/null; fi
}
(
  i=0
  while alive "$bt"; do
    if ! alive "$me" || ! alive "$pm" || [ "$i" -ge "$limit" ]; then
      rm -f -- "$prog" "$out" "$err"
      finish TERM
      exit 0
    fi
    sleep 1
    i=$((i + 1))
  done
) </dev/null >/dev/null 2>&1 &
guard=$!
i=0
while ! grep -q @ATTACHED@ -- "$err" "$out" 2>/dev/null; do
  if ! alive "$bt"; then
    wait "$bt"
    echo "exited $?"
    kill "$guard" 2>/dev/null
    exit 0
  fi
  if [ "$i" -ge $((attach * 20)) ]; then
    echo timeout
    finish TERM
    kill "$guard" 2>/dev/null
    exit 0
  fi
  sleep 0.05 2>/dev/null || sleep 1
  i=$((i + 1))
done
rm -f -- "$prog"
echo attached
if read -r word && [ "$word" = stop ]; then
  finish INT
  if alive "$bt"; then echo stuck; exit 0; fi
  kill "$guard" 2>/dev/null
  wait "$bt"
  echo "exit $?"
  exit 0
fi
rm -f -- "$out" "$err"
finish TERM
kill "$guard" 2>/dev/null
echo ended
""".replace("@ATTACHED@", ATTACHED)

# The module elf_symbols lives in (the standard library only), then a call of it, run by
# the host's python3: the same reading of the binary.
_SYMBOLS_PY = ("{source}\n"
               "import json as _json, sys as _sys\n"
               "try:\n"
               "    found = elf_symbols(Path(_sys.argv[1]), _sys.argv[2:])\n"
               "except (OSError, ValueError) as exc:\n"
               "    print(_json.dumps({{'error': str(exc)}}))\n"
               "else:\n"
               "    print(_json.dumps({{'found': found}}))\n")

_SYMBOLS_SH = ('script=$1; shift\n'
               'command -v python3 >/dev/null 2>&1 && exec python3 -c "$script" "$@"\n'
               'echo nopython\n')


def grant(spec: HostSpec) -> str:
    """The sudoers line that lets the host's account run bpftrace as the probe does."""
    return f"{spec.user} ALL=(root) NOPASSWD:SETENV: /usr/bin/bpftrace"


@dataclass(frozen=True)
class HostCheck:
    """What the check found on a host for one postmaster: why the probe cannot run
    (None: it can), how bpftrace runs there, and the binary's symbols."""

    reason: str | None
    via: str = ""  # "sudo" or "" (root)
    same_machine: bool = True  # the host's architecture is this machine's
    symbols: dict[str, tuple[int, int]] = field(default_factory=dict)


# (host, postmaster pid) -> its check: asked before the anatomy's repeat is spent and
# again when it starts; the answer holds as long as that postmaster runs.
_checked: dict[tuple[HostSpec, int], HostCheck] = {}


def _account_reason(spec: HostSpec, what: str) -> str:
    name, user = spec.name, spec.user
    reasons = {
        "account": (f"the account {user} on {name} is not root and [hosts.{name}] has no "
                    f"sudo = true: bpftrace needs root there (fix: sudo = true with the "
                    f"grant `{grant(spec)}` on {name}, or log in as root)"),
        "bpftrace": (f"bpftrace is not installed on {name} (fix: apt-get install bpftrace "
                     "there)"),
        "pmu": (f"the kernel of {name} has no uprobe perf events (/sys/bus/event_source/"
                "devices/uprobe: Linux 4.17 or later): bpftrace would fall back to tracefs "
                "uprobe_events, which a killed bpftrace leaves behind"),
        "btf": (f"the kernel of {name} has no BTF type information (/sys/kernel/btf/"
                "vmlinux, CONFIG_DEBUG_INFO_BTF): bpftrace needs it to read a process's "
                "parent"),
        "lockdown": (f"the kernel of {name} is locked down (confidentiality): BPF programs "
                     "may not read kernel memory (fix: boot it without "
                     "lockdown=confidentiality)"),
    }
    return reasons.get(what, f"{name}: the commit anatomy's check failed ({what})")


def _trial_reason(spec: HostSpec, via: str, lines: list[str]) -> str | None:
    """Why the trial program did not run as the probe needs (None: it did)."""
    name = spec.name
    said = "\n".join(lines)
    status = next((int(ln.split()[1]) for ln in reversed(lines)
                   if re.fullmatch(r"ran \d+", ln)), None)
    shell = next((int(ln.split()[1]) for ln in lines if re.fullmatch(r"shell \d+", ln)),
                 None)
    pids = next((m for ln in lines if (m := re.fullmatch(r"pids (\d+) (\d+)", ln))), None)
    body = [ln for ln in lines if not re.fullmatch(r"(ran|shell|arch) .*", ln)]
    if via and "not allowed to set the following environment variables" in said:
        return (f"sudo -n on {name} runs bpftrace but will not pass it its settings "
                f"(BPFTRACE_MAP_KEYS_MAX, {ATTACHED}): the grant needs SETENV (fix: "
                f"`{grant(spec)}` on {name})")
    if via and ("password is required" in said or "not allowed to execute" in said
                or "may not run sudo" in said or "is not in the sudoers" in said):
        return (f"the account {spec.user} may not run bpftrace with sudo -n on {name} "
                f"(fix: the grant `{grant(spec)}` there)")
    if via and status == 127:
        return (f"sudo is not installed on {name} (fix: apt-get install sudo there, with "
                f"the grant `{grant(spec)}`)")
    if "tracepoint not found" in said:
        return (f"bpftrace on {name} finds no syscalls:sys_enter_kill tracepoint: tracefs is "
                "not mounted there or the kernel has no syscall tracepoints "
                "(CONFIG_FTRACE_SYSCALLS) (fix: as root there, mount -t tracefs nodev "
                "/sys/kernel/tracing)")
    if status != 0 or pids is None:
        return (f"bpftrace on {name} could not run a BPF program"
                + (f" (exit status {status})" if status else "") + ": "
                + (_excerpt("\n".join(body)) or "it said nothing")
                + " (fix: the account needs root there, with CAP_BPF and CAP_PERFMON in a "
                  "container)")
    if shell is None or shell not in (int(pids.group(1)), int(pids.group(2))):
        return (f"{name} runs in a PID namespace of its own (a container): the kernel's "
                f"pids (bpftrace {pids.group(1)}) are not the ones the host shows (shell "
                f"{shell}), and the probe, which finds the primary's processes by its "
                "postmaster's pid, would count nothing (fix: run the primary on a host "
                "that sees the kernel's pids)")
    return None


def host_symbols(host: SshHost, binary: str, *, python: bool = True
                 ) -> dict[str, tuple[int, int]]:
    """The symbols of :data:`SYMBOLS` and :data:`LEVEL` in the ELF file ``binary`` on the
    host, as :func:`uprobe_points.elf_symbols` reads them: run there by the host's python3
    (unless ``python`` is false), or, without it, on a copy of the file fetched here.
    OSError or ValueError, as elf_symbols', when the file cannot be read."""
    wanted = (*SYMBOLS, LEVEL)
    try:
        source = inspect.getsource(uprobe_points) if python else None
    except (OSError, TypeError):  # no source to send (an installation without it)
        source = None
    if source is not None:
        script = _SYMBOLS_PY.format(source=source)
        out = host.sh(_SYMBOLS_SH, script, binary, *wanted,
                      what="reading the server binary's symbols", timeout=120).stdout
        last = out.strip().splitlines()[-1:] or [""]
        if last[0] != "nopython":
            try:
                answer = json.loads(last[0])
            except ValueError:
                raise ValueError(f"python3 printed no symbols: {out.strip()[-300:]!r}") \
                    from None
            if "error" in answer:
                raise ValueError(str(answer["error"]))
            return {str(k): (int(v[0]), int(v[1])) for k, v in answer["found"].items()}
    with tempfile.NamedTemporaryFile(prefix="srl-server-") as copy:
        copy.write(host.get_bytes(binary, BINARY_LIMIT))
        copy.flush()
        return elf_symbols(Path(copy.name), wanted)


def check(host: SshHost, pid: int) -> HostCheck:
    """Whether the probe can run on the host for the postmaster ``pid`` (its pid there);
    asked of the host once while that postmaster runs."""
    key = (host.spec, pid)
    if key not in _checked:
        _checked[key] = _check(host, pid)
    return _checked[key]


def _check(host: SshHost, pid: int) -> HostCheck:
    spec = host.spec
    out = host.sh(_CHECK_SH, "sudo" if spec.sudo else "", str(map_keys(2)), _TRIAL,
                  what="checking bpftrace", timeout=120).stdout
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    first = next((ln for ln in lines if ln.startswith(("no ", "arch "))),
                 "no answer").split(None, 1)
    if first[0] == "no":
        return HostCheck(_account_reason(spec, first[1] if len(first) > 1 else ""))
    arch, _, who = (first[1] if len(first) > 1 else "").partition(" ")
    via = "sudo" if who == "sudo" else ""
    reason = _trial_reason(spec, via, lines)
    if reason is not None:
        return HostCheck(reason, via)
    try:
        found = host_symbols(host, f"/proc/{pid}/exe")
    except (OSError, ValueError) as exc:
        return HostCheck(f"cannot read the server binary's symbols on {spec.name}: {exc}",
                         via)
    missing = [s for s in SYMBOLS if found.get(s, (0, 0))[1] != 2]
    if missing:
        return HostCheck(f"the server binary of the primary on {spec.name} has no symbol "
                         f"{', '.join(missing)} (a stripped or unusual build; fix: Debian's "
                         "packages and a build from source keep them)", via)
    return HostCheck(None, via, arch == platform.machine(), found)


def _postmaster_checked(host: SshHost, data_dir: str, role: str) -> tuple[int, HostCheck]:
    """The pid there of the postmaster in ``data_dir``, and the check for it (its
    reason says so where none runs)."""
    pid = postmaster.postmaster_pid(host, data_dir)
    if pid is None:
        return 0, HostCheck(f"the {role}'s postmaster is not running on {host.spec.name}")
    return pid, check(host, pid)


def unavailable_on_host(spec: HostSpec, data_dir: str) -> str | None:
    """Why the commit anatomy cannot run on the primary in ``data_dir`` on that host
    (with the fix), or None: asked before its repeat is spent."""
    host = SshHost(spec)
    try:
        return _postmaster_checked(host, data_dir, "primary")[1].reason
    except UserError as exc:
        return f"{spec.name} could not be asked: {exc.cause}"
    finally:
        host.close()


# A guest's bpftrace compiles and attaches on the guest's own vCPUs: under TCG those are
# emulated, and on a machine loaded by other work the lock probe's program (kprobes on
# three mutex functions besides the tracepoints) once did not attach within 60 s, in two
# suites on a fresh machine, losing the cell's counts. The bound is there to refuse a
# hang, not to time the attach, so a guest gets more.
GUEST_ATTACH_SECONDS = 4 * ATTACH_SECONDS


def attach_seconds(spec: HostSpec) -> float:
    """How long bpftrace on the host of ``spec`` may take to attach.

    >>> attach_seconds(HostSpec("a", "10.0.0.1")), attach_seconds(
    ...     HostSpec("g", "10.215.1.2", guest="srl-g1"))
    (60.0, 240.0)
    """
    return GUEST_ATTACH_SECONDS if spec.guest is not None else ATTACH_SECONDS


class HostTracer:
    """bpftrace running one program on a host under the watchdog (see the module's
    text): the program written to ``base``.bt there, what it prints to ``base``.json and
    ``base``.err, all removed on every way out. ``via``: "sudo" or "" (root). It owns
    ``host`` from here on: closed when it ends."""

    def __init__(self, host: SshHost, base: str, via: str) -> None:
        self.host, self.base, self.via = host, base, via
        self.proc: RemoteProcess | None = None

    @property
    def files(self) -> list[str]:
        return [f"{self.base}.{ext}" for ext in ("bt", "json", "err")]

    def start(self, text: str, *, keys: int, postmaster: int, duration: float,
              pages: int = 64) -> None:
        """Run ``text`` there until :meth:`finish` or :meth:`abort`, its guard tied to
        the ``postmaster`` (its pid there) and a deadline well past ``duration``;
        returns once every probe is attached. RuntimeError (everything removed) when it
        did not attach."""
        name = self.host.spec.name
        self.host.put_text(f"{self.base}.bt", text)
        attach = attach_seconds(self.host.spec)
        limit = attach + duration + STOP_SECONDS + DEADLINE_MARGIN
        self.proc = self.host.start(
            ["sh", "-c", _WATCHDOG_SH, "sh", self.base, self.via, str(keys),
             str(postmaster), f"{limit:.0f}", f"{attach:.0f}",
             f"{STOP_SECONDS:.0f}", str(pages)], keep_stdin=True)
        try:
            said = self._line(attach + 60)
        except TimeoutError:
            said = "timeout"
        if said == "attached":
            return
        why = self._stderr()
        self.remove()
        if said is not None and said.startswith("exited"):
            raise RuntimeError(f"bpftrace on {name} exited before attaching: "
                               + (_excerpt(why) or "it said nothing"))
        if said != "timeout":
            raise RuntimeError(f"the watchdog of bpftrace on {name} ended before "
                               "bpftrace attached (the connection lost, or it was killed "
                               "there)")
        raise RuntimeError(f"bpftrace on {name} did not attach within "
                           f"{attach:g} s: " + (_excerpt(why) or "it said nothing"))

    def _line(self, timeout: float) -> str | None:
        """The watchdog's next word (None: its channel has ended)."""
        assert self.proc is not None
        while True:
            line = self.proc.stdout.next(timeout)
            if line is None or line.strip():
                return None if line is None else line.strip()

    def _stderr(self) -> str:
        with contextlib.suppress(UserError):
            return self.host.get_bytes(f"{self.base}.err", 1 << 20).decode(errors="replace")
        return ""

    def remove(self) -> None:
        with contextlib.suppress(UserError):
            self.host.run(["rm", "-f", "--", *self.files], timeout=30, check=False)

    def finish(self) -> tuple[bytes, str]:
        """``stop`` to the watchdog: bpftrace prints its maps and exits there; what it
        printed on stdout and on stderr, the files removed."""
        assert self.proc is not None
        name = self.host.spec.name
        self.proc.send("stop\n")
        try:
            said = self._line(STOP_SECONDS + 60)
        except TimeoutError:
            said = "stuck"
        if said is None or not said.startswith("exit "):
            raise RuntimeError(f"bpftrace on {name} did not stop within {STOP_SECONDS:g} s "
                               "of SIGINT" if said == "stuck" else
                               f"the watchdog of bpftrace on {name} ended without its exit "
                               "status (the connection lost?)")
        status = int(said.split()[1])
        try:
            err = self._stderr()
            if status != 0:
                raise RuntimeError(f"bpftrace on {name} failed (exit status {status}): "
                                   + (_excerpt(err) or "it said nothing"))
            return self.host.get_bytes(f"{self.base}.json", OUTPUT_LIMIT), err
        finally:
            self.remove()
            self.close()

    def abort(self) -> None:
        """End bpftrace there at once (its probes go with it); keep nothing."""
        proc = self.proc
        if proc is not None:
            proc.send("abort\n")
            # the watchdog ends bpftrace, waits until it has gone (detached), says so
            with contextlib.suppress(TimeoutError):
                while (line := self._line(30)) is not None and line != "ended":
                    pass
        self.remove()  # also a program written before the watchdog started
        self.close()

    def close(self) -> None:
        if self.proc is not None:
            self.proc.close()  # no signal: the watchdog reads the end of its stdin
            self.proc = None
        self.host.close()


class HostAnatomy:
    """The commit anatomy probe of one repeat on the primary on an SSH host; a recorder
    (probes/recorder.py), the host side of :class:`anatomy.CommitAnatomy`.

    ``data_dir``: the primary's data dir on the host; ``admin``: the tool's connection
    to the primary, to name each walsender by its standby; ``out_dir``: where the
    program and what bpftrace printed are kept here; ``duration``: the repeat's, for the
    guard's deadline. It never fails the repeat: what it could not do is its ``probes``
    row (skipped, with the reason and fix, or failed, with what bpftrace said)."""

    def __init__(self, spec: HostSpec, data_dir: str, admin: str, out_dir: Path,
                 duration: float) -> None:
        self.spec, self.data_dir, self.admin = spec, data_dir, admin
        self.out_dir, self.duration = out_dir, duration
        self.base = posixpath.normpath(data_dir) + ".anatomy"  # beside the data dir there
        self.status: tuple[str, str | None] = ("skipped", "not started")
        self.tracer: HostTracer | None = None
        self.names: dict[int, str] = {}

    def start(self) -> None:
        host = SshHost(self.spec)
        try:
            pid, found = _postmaster_checked(host, self.data_dir, "primary")
            if found.reason is not None:
                self.status = ("skipped", found.reason)
                host.close()
                return
            self.tracer = HostTracer(host, self.base, found.via)
            self._spawn(self.tracer, pid, found)
            self.status = ("ran", None)
        except (UserError, RuntimeError, OSError, ValueError) as exc:
            self.abort()  # what was started there ended, its files removed
            host.close()
            self.status = ("failed", _said(self.spec, exc))

    def _spawn(self, tracer: HostTracer, pid: int, found: HostCheck) -> None:
        self.names = walsenders(self.admin)
        # the postmaster's children now (checkpointer, walwriter, the tool's sessions):
        # no backends of the workload, which connects after the probe has started
        exclude = sorted(int(p["pid"]) for p in snapshots.proc_snapshot(tracer.host,
                                                                         self.data_dir)
                         if int(p["ppid"]) == pid)
        level = level_read(found.symbols) if found.same_machine else None
        text = program(f"/proc/{pid}/exe", [pid], exclude, level)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir / "anatomy.bt").write_text(text)
        tracer.start(text, keys=map_keys(len(self.names) or 2), postmaster=pid,
                     duration=self.duration)

    def stop(self, ending: Ending | None = None) -> ProbeRows:
        """``stop`` to the watchdog: bpftrace prints its maps and exits there; the
        ``anatomy`` rows and the ``probes`` row. Interrupted: ended, nothing kept."""
        rows = ProbeRows()
        if self.tracer is not None and self.tracer.proc is not None:
            if shutdown.requested() is not None:
                self.abort()
                self.status = ("failed", "interrupted")
            else:
                try:
                    rows.anatomy = self._finish(self.tracer)
                except (UserError, RuntimeError, OSError, ValueError) as exc:
                    self.abort()
                    self.status = ("failed", _said(self.spec, exc))
        self.tracer = None  # ended: by its finish, or by abort
        rows.probes.append(ProbeRow(PROBE, *self.status))
        return rows

    def _finish(self, tracer: HostTracer) -> list[AnatomyRow]:
        data, _ = tracer.finish()
        (self.out_dir / "anatomy.json").write_bytes(data)
        names = {**self.names, **walsenders(self.admin)}
        return anatomy_rows(parse_output(data.decode(errors="replace")), names)

    def abort(self) -> None:
        """End bpftrace there at once (its probes go with it); keep nothing."""
        if self.tracer is not None:
            self.tracer.abort()
            self.tracer = None


class HostHalf:
    """The walreceiver's probes of the standby's half of a commit
    (probes/standby_anatomy.py) on the sync standby's SSH host, run there as the
    primary's program is (:class:`HostTracer`, the same check, sudo and cleanup); the
    walsender's stay in the anatomy's program here. Started before that program, so
    that its events cover the window the program's do, and stopped after it."""

    def __init__(self, standby: Standby, duration: float) -> None:
        assert standby.host is not None and standby.data_dir is not None
        self.spec, self.data_dir = standby.host, standby.data_dir
        self.walreceiver, self.duration = standby.walreceiver, duration
        # beside the data dir there, as the anatomy's
        self.base = posixpath.normpath(self.data_dir) + ".standby-anatomy"
        self.tracer: HostTracer | None = None

    def start(self) -> tuple[str, str | None]:
        """Its probes attached there: ("ran", None); else ("skipped", why, with the fix
        where there is one) or ("failed", what went wrong)."""
        host = SshHost(self.spec)
        try:
            pid, found = _postmaster_checked(host, self.data_dir, "standby")
            if found.reason is not None:
                host.close()
                return "skipped", found.reason
            self.tracer = HostTracer(host, self.base, found.via)
            self.tracer.start(host_program(self.walreceiver), keys=map_keys(2),
                              postmaster=pid, duration=self.duration, pages=PERF_PAGES)
            return "ran", None
        except (UserError, RuntimeError, OSError, ValueError) as exc:
            self.abort()
            host.close()
            return "failed", _said(self.spec, exc)

    def finish(self) -> tuple[str, str]:
        """What bpftrace printed there on stdout and on stderr, once it has stopped."""
        assert self.tracer is not None
        try:
            data, err = self.tracer.finish()
        except BaseException:
            self.abort()  # it did not stop as asked: ended, nothing kept
            raise
        self.tracer = None
        return data.decode(errors="replace"), err

    def abort(self) -> None:
        """End bpftrace there at once; keep nothing."""
        if self.tracer is not None:
            self.tracer.abort()
            self.tracer = None


def _said(spec: HostSpec, exc: BaseException) -> str:
    text = exc.cause if isinstance(exc, UserError) else str(exc)
    return text if spec.name in text else f"{spec.name}: {text}"
