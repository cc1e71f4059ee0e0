"""On-CPU stacks of every process role, as folded stacks and flame graphs.

``perf record -a --call-graph dwarf`` samples every CPU during the repeat.
PostgreSQL is built without frame pointers, so frame-pointer unwinding stops
at the first PostgreSQL frame; DWARF unwinding (a copy of the top of each
sampled stack) gives whole stacks at a sampling rate low enough to stay cheap
(99 Hz by default). On a build with frame pointers (``pg build --flavor
frame-pointers``) the kernel walks the stack itself (``--call-graph fp``), with
no stack copy per sample (bench/frame_pointers.py measures both on one cell).

``inferno-collapse-perf --pid`` folds ``perf script``'s output; the first frame
(``postgres-PID``) is then replaced by the process's role from the tracker, so one
flame graph per node and role adds up every backend, and one more shows all of them
side by side. ``inferno-flamegraph``
renders each as an interactive SVG (search, zoom); ``inferno-diff-folded`` makes a
differential one of two folded files (``ab``: stock against patched).
"""

from __future__ import annotations

import errno
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from syncrep_lab.pg.roles import CLIENT_PROGRAMS
from syncrep_lab.probes.perfrun import (
    PerfProcess,
    PerfRecording,
    perf_reason,
    require_output,
)
from syncrep_lab.store import FlameGraphRow, StackFrameRow

# Frames every PostgreSQL stack starts with; kept in the graphs, left out of the
# per-role summary of where the time goes.
ROOT_FRAMES = {"_start", "__libc_start_main_impl", "__libc_start_call_main", "main",
                "PostmasterMain", "ServerLoop", "ServerLoop.isra.0", "BackendStartup",
                "postmaster_child_launch", "StartChildProcess", "BackendMain", "BackendRun",
                "[unknown]", "__libc_start_main"}
SUMMARY_SHARE = 0.01  # frames under 1 % of a role's CPU are not stored,
SUMMARY_FRAMES = 40   # nor more than these per role (by inclusive time)


def inferno(tool: str) -> str | None:
    """The path of an inferno program: next to this Python first (./run setup puts
    them into the venv), then on PATH."""
    here = Path(sys.prefix) / "bin" / tool
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return shutil.which(tool)


def unavailable_reason() -> str | None:
    reason = perf_reason(0, "sampling every CPU")
    if reason is not None:
        return reason
    for tool in ("inferno-collapse-perf", "inferno-flamegraph"):
        if inferno(tool) is None:
            return (f"{tool} is not installed: ./run setup installs inferno with cargo "
                    "(or: cargo install inferno)")
    return None


CALL_GRAPHS = {"dwarf": "DWARF-unwound stacks", "fp": "frame-pointer stacks"}


# the longest wait for perf record to say its events are on: it first reads every
# process's memory maps, seconds on a busy machine
ENABLE_SECONDS = 60.0


class OnCpuRecorder(PerfRecording):
    """perf record of every CPU, started with its events off and turned on through its
    control FIFO once it is set up: ``confirm`` returns when perf has acknowledged, so the
    repeat it records is sampled from its start. With a fixed pause instead, a 1 s probed
    repeat on a loaded machine once ended before perf had read every process's maps, and
    its recording held no sample."""

    def __init__(self, out: Path, hz: int, max_seconds: float, call_graph: str = "dwarf"
                 ) -> None:
        self.out = out
        self.call_graph = call_graph  # a key of CALL_GRAPHS
        self.ctl, self.ack = out.with_suffix(".ctl"), out.with_suffix(".ack")
        # The sleep bounds the recording even if nobody stops it.
        self.perf = PerfProcess(
            ["perf", "record", "-a", "--call-graph", call_graph, "-F", str(hz), "-o",
             str(out), "-D", "-1", "--control", f"fifo:{self.ctl},{self.ack}", "--",
             "sleep", str(int(max_seconds) + 1)], "perf record")

    def launch(self) -> None:
        self.out.unlink(missing_ok=True)  # perf would keep an old one as .old
        for fifo in (self.ctl, self.ack):
            fifo.unlink(missing_ok=True)
            os.mkfifo(fifo, 0o600)
        self.perf.launch()

    def confirm(self) -> None:
        self.perf.confirm()
        try:
            self._enable()
        except BaseException:
            self.perf.kill()
            self._unlink()
            raise

    def _enable(self) -> None:
        """'enable' written to perf's control FIFO, and its 'ack' waited for."""
        deadline = time.monotonic() + ENABLE_SECONDS
        proc = self.perf.proc

        def waiting(what: str) -> None:
            if proc is None or proc.poll() is not None:
                raise RuntimeError(f"perf record ended before {what}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"perf record did not {what} within "
                                   f"{ENABLE_SECONDS:g} s")

        while True:  # perf opens its end once it has parsed its options
            try:
                ctl = os.open(self.ctl, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as exc:
                if exc.errno != errno.ENXIO:
                    raise
                waiting("opening its control FIFO")
                time.sleep(0.01)
        ack = os.open(self.ack, os.O_RDONLY | os.O_NONBLOCK)
        try:
            os.write(ctl, b"enable\n")
            said = b""
            while b"ack" not in said:
                waiting("turning its events on")
                ready, _, _ = select.select([ack], [], [], 0.1)
                chunk = os.read(ack, 64) if ready else b""
                if ready and not chunk:
                    time.sleep(0.01)  # its end not open yet
                said += chunk
        finally:
            os.close(ctl)
            os.close(ack)

    def _unlink(self) -> None:
        for fifo in (self.ctl, self.ack):
            fifo.unlink(missing_ok=True)

    def stop(self, timeout: float = 60) -> None:
        try:
            require_output(self.out, "perf record (on-CPU)", self.perf.stop(timeout))
        finally:
            self._unlink()


# what perf script prints of each sample: what folding needs, here or on a host
SCRIPT_FIELDS = "comm,pid,tid,cpu,time,period,event,ip,sym,dso"
# --no-inline: the frames are the functions of the binaries' symbol tables. Asked for
# inlined frames, perf runs addr2line on every address of every library with debug
# information (libc's here): 8 times the time, for frames inside libc's own wrappers
# (``__GI_kill (inlined)`` under ``kill``) and never a PostgreSQL one, whose binaries
# carry no DWARF (docs/decisions.md).
SCRIPT_ARGS = ["-F", SCRIPT_FIELDS, "--no-inline"]


def _collapse_tool() -> str:
    tool = inferno("inferno-collapse-perf")
    if tool is None:
        raise RuntimeError("inferno-collapse-perf is not installed")
    return tool


def _folded(done: subprocess.CompletedProcess[bytes]) -> list[str]:
    if done.returncode != 0:
        raise RuntimeError("inferno-collapse-perf failed: "
                           + done.stderr.decode(errors="replace").strip()[:300])
    return done.stdout.decode(errors="replace").splitlines()


def fold(script_output: Path, timeout: float = 300) -> list[str]:
    """``perf script``'s output (of a recording made on a host) folded with
    ``inferno-collapse-perf --pid``."""
    with script_output.open("rb") as text:
        return _folded(subprocess.run([_collapse_tool(), "--pid", "--all"], stdin=text,
                                      capture_output=True, timeout=timeout, check=False))


def collapse(perf_data: Path, timeout: float = 300) -> list[str]:
    """``perf script`` piped into ``inferno-collapse-perf --pid``: folded lines. None is
    an error that says what perf script said: a recording of every CPU over a repeat
    always has samples, so an empty one was cut short or cannot be read (as a host's,
    hosts/perf.RemoteRecording)."""
    collapse_tool = _collapse_tool()
    with tempfile.TemporaryFile() as said:
        script = subprocess.Popen(
            ["perf", "script", *SCRIPT_ARGS, "-i", str(perf_data)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=said)
        try:
            folded = subprocess.run([collapse_tool, "--pid", "--all"], stdin=script.stdout,
                                    capture_output=True, timeout=timeout, check=False)
        finally:
            if script.stdout is not None:
                script.stdout.close()
            try:
                script.wait(timeout=10)
            except subprocess.TimeoutExpired:
                script.kill()
                script.wait()
        lines = _folded(folded)
        if not lines:
            said.seek(0)
            words = " ".join(said.read()[-400:].decode(errors="replace").split())
            raise RuntimeError(f"perf script printed no samples of {perf_data.name} "
                               f"(exit {script.returncode}): {words or 'nothing'}")
    return lines


def _outsider(comm: str) -> tuple[str, str]:
    if comm in CLIENT_PROGRAMS:
        return ("client", comm)
    if comm.startswith("swapper"):
        return ("-", "idle")
    return ("-", "other")


@dataclass
class RoleStacks:
    node: str
    role: str
    stacks: Counter[str] = field(default_factory=Counter)  # folded stack -> µs

    @property
    def total_us(self) -> int:
        return sum(self.stacks.values())


def by_role(folded: list[str], roles: Callable[[int], tuple[str, str] | None]
            ) -> dict[tuple[str, str], RoleStacks]:
    """Folded lines regrouped by (node, role); counts turned from ns into µs."""
    out: dict[tuple[str, str], RoleStacks] = {}
    for line in folded:
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        first, _, rest = stack.partition(";")
        comm, _, pid_text = first.rpartition("-")
        who = roles(int(pid_text)) if pid_text.isdigit() else None
        node, role = who if who is not None else _outsider(comm or first)
        entry = out.setdefault((node, role), RoleStacks(node, role))
        entry.stacks[rest or first] += int(count) // 1000
    return out


def summarise(stacks: RoleStacks) -> list[tuple[str, int, int]]:
    """(frame, inclusive µs, self µs) of the frames that take a role's CPU."""
    inclusive: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    for stack, us in stacks.stacks.items():
        frames = stack.split(";")
        for frame in set(frames):
            inclusive[frame] += us
        leaf[frames[-1]] += us
    floor = SUMMARY_SHARE * stacks.total_us
    return sorted(((f, inclusive[f], leaf.get(f, 0)) for f in inclusive
                   if f not in ROOT_FRAMES and (inclusive[f] >= floor or leaf[f] >= floor)),
                  key=lambda r: -r[1])[:SUMMARY_FRAMES]


def render(lines: list[str], svg: Path, title: str, subtitle: str, timeout: float = 120
           ) -> None:
    tool = inferno("inferno-flamegraph")
    if tool is None:
        raise RuntimeError("inferno-flamegraph is not installed")
    done = subprocess.run(
        [tool, "--title", title, "--subtitle", subtitle, "--countname", "µs",
         "--hash", "--minwidth", "0.05"],
        input="\n".join(lines).encode(), capture_output=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError("inferno-flamegraph failed: "
                           + done.stderr.decode(errors="replace").strip()[:300])
    svg.write_bytes(done.stdout)


@dataclass
class FlameResult:
    # paths relative to the repeat dir (the store's are relative to the run folder)
    graphs: list[FlameGraphRow] = field(default_factory=list)
    frames: list[StackFrameRow] = field(default_factory=list)

    def graphs_in(self, repeat_dir: str) -> list[FlameGraphRow]:
        """The graphs' rows with their files named relative to the run folder
        (``repeat_dir`` is the repeat's folder in it)."""
        return [g._replace(folded_path=f"{repeat_dir}/{g.folded_path}",
                           svg_path=f"{repeat_dir}/{g.svg_path}") for g in self.graphs]


def flame_graphs(perf_data: Path, out_dir: Path,
                 roles: Callable[[int], tuple[str, str] | None], caption: str
                 ) -> FlameResult:
    """Fold, regroup by role, write one folded file and one SVG per role plus 'all'."""
    return graphs_of(collapse(perf_data), out_dir, roles, caption)


def graphs_of(folded_lines: list[str], out_dir: Path,
              roles: Callable[[int], tuple[str, str] | None], caption: str,
              everything: str = "*") -> FlameResult:
    """Folded stacks regrouped by role: one folded file and one SVG per role, and one of
    every process (its node ``everything``: ``*`` here, ``*HOST`` for a host's)."""
    groups = by_role(folded_lines, roles)
    out_dir.mkdir(parents=True, exist_ok=True)
    result = FlameResult()
    combined: list[str] = []
    per_node: dict[str, int] = defaultdict(int)
    for (node, role), stacks in sorted(groups.items()):
        lines = [f"{role};{s} {us}" for s, us in stacks.stacks.items() if us > 0]
        combined += [f"{node} {line}" if node not in ("-", "client") else line
                     for line in lines]
        if node == "-" or not lines:
            continue  # idle and unrelated processes appear only in the combined graph
        per_node[node] += stacks.total_us
        name = f"{node}-{role}".replace(":", "_").replace("/", "_")
        folded = out_dir / f"{name}.folded"
        folded.write_text("\n".join(lines) + "\n")
        svg = out_dir / f"{name}.svg"
        render(lines, svg, f"{role} on {node}", caption)
        base = out_dir.parent
        result.graphs.append(FlameGraphRow(node, role, stacks.total_us,
                                           str(folded.relative_to(base)),
                                           str(svg.relative_to(base))))
        result.frames += [StackFrameRow(node, role, f, inc, own)
                          for f, inc, own in summarise(stacks)]
    if combined:
        folded = out_dir / "all.folded"
        folded.write_text("\n".join(combined) + "\n")
        svg = out_dir / "all.svg"
        render(combined, svg, "every process on every CPU", caption)
        base = out_dir.parent
        result.graphs.append(FlameGraphRow(everything, "all", sum(per_node.values()),
                                           str(folded.relative_to(base)),
                                           str(svg.relative_to(base))))
    return result


def render_diff(before: Path, after: Path, svg: Path, title: str, subtitle: str,
                countname: str, timeout: float = 120) -> None:
    """A differential flame graph of two folded files (``inferno-diff-folded
    --normalize``: ``before`` scaled to ``after``'s total): frames as wide as in
    ``after``, red where their share grew since ``before``, blue where it shrank."""
    differ, tool = inferno("inferno-diff-folded"), inferno("inferno-flamegraph")
    if differ is None or tool is None:
        raise RuntimeError("inferno-diff-folded or inferno-flamegraph is not installed")
    diffed = subprocess.run([differ, "--normalize", str(before), str(after)],
                            capture_output=True,
                            timeout=timeout, check=False)
    if diffed.returncode != 0:
        raise RuntimeError("inferno-diff-folded failed: "
                           + diffed.stderr.decode(errors="replace").strip()[:300])
    done = subprocess.run(
        [tool, "--title", title, "--subtitle", subtitle, "--countname", countname,
         "--hash", "--minwidth", "0.05"],
        input=diffed.stdout, capture_output=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError("inferno-flamegraph failed: "
                           + done.stderr.decode(errors="replace").strip()[:300])
    svg.write_bytes(done.stdout)
