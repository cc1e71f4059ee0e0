"""The kernel's half of a role's CPU, as the seed read it from ``perf report -g``: the
share of the role's on-CPU samples spent in the kernel, and the kernel functions they
ended in, each with the PostgreSQL function that called into the kernel (the seed
followed ``mutex_spin_on_owner`` back through ``epoll_ctl`` and ``WaitLatchOrSocket`` to
``SyncRepWaitForLSN``).

Read from the folded stacks the flame graphs are drawn from (probes/flamegraph.py:
``NODE-ROLE.folded``, the last probed repeat's), where a kernel frame ends in ``_[k]``.
The caller is the innermost frame below the system call that is PostgreSQL's own: the C
library's wrappers (``__GI___kill``, ``epoll_wait``, ``__libc_recv``) are passed over.
The vDSO's functions (``__vdso_clock_gettime``) carry the mark too, but run in user mode
without entering the kernel: they count as the process's own time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from syncrep_lab.json_form import JSON

KERNEL = "_[k]"
# the C library's system call wrappers, as perf names them when their names carry no
# leading underscore; any frame starting with "_" is taken as the library's too
WRAPPERS = frozenset({
    "read", "write", "pread64", "pwrite64", "readv", "writev", "pwritev", "preadv",
    "fsync", "fdatasync", "sync_file_range", "open", "open64", "openat", "close", "lseek",
    "lseek64", "ftruncate", "fallocate", "posix_fallocate", "kill", "send", "recv",
    "sendto", "recvfrom", "sendmsg", "recvmsg", "poll", "ppoll", "select", "epoll_wait",
    "epoll_pwait", "epoll_ctl", "epoll_create", "epoll_create1", "semop", "semtimedop",
    "futex", "syscall", "getpid", "nanosleep", "clock_nanosleep", "usleep",
    "clock_gettime", "gettimeofday", "madvise", "mmap", "mmap64", "munmap", "brk", "sbrk",
    "signalfd", "sigprocmask", "pthread_sigmask", "setitimer", "timer_settime", "[unknown]",
    "drain"})
TOP = 5  # kernel functions shown per role
VDSO = "__vdso_"


class FrameShare(TypedDict):
    """A frame's share of its role's on-CPU time: with its callees, and its own."""

    frame: str
    inclusive: float
    self: float


class FlameGraph(TypedDict):
    """A role's flame graph (files named in full) and its frames' shares of its CPU, as
    analysis/costs.py reads them from the store: the folded stacks read here."""

    node: str
    role: str
    cpu_us: int
    svg: str
    folded: str
    frames: list[FrameShare]


def in_kernel(frame: str) -> bool:
    """A frame the kernel ran: marked ``_[k]`` and not the vDSO's."""
    return frame.endswith(KERNEL) and not frame.startswith(VDSO)


@dataclass(frozen=True)
class KernelFunction:
    function: str  # the kernel function the samples ended in
    caller: str  # the PostgreSQL function that entered the kernel, "" when none
    share: float  # of the role's on-CPU samples


@dataclass(frozen=True)
class RoleKernel:
    node: str
    role: str
    samples: int  # the role's on-CPU weight: the folded stacks' weights (µs on CPU)
    kernel_share: float  # of it, the stacks that ended in the kernel
    top: list[KernelFunction]

    def to_json(self) -> dict[str, JSON]:
        return {"node": self.node, "role": self.role, "samples": self.samples,
                "kernel_share": self.kernel_share,
                "top": [{"function": f.function, "caller": f.caller, "share": f.share}
                        for f in self.top]}


def function_text(f: KernelFunction) -> str:
    """A top kernel function as costs and diagnose say it: ``function ← caller 24 %``."""
    caller = f" ← {f.caller}" if f.caller else ""
    return f"{f.function}{caller} {100 * f.share:.0f} %"


def _caller(frames: list[str]) -> str:
    """The innermost frame below the first kernel frame that is not the C library's."""
    first = next((i for i, f in enumerate(frames) if in_kernel(f)), len(frames))
    for frame in reversed(frames[1:first]):  # the first frame is the role's own label
        if not frame.startswith("_") and frame not in WRAPPERS:
            return frame
    return ""


def role_kernel(node: str, role: str, folded: str, top: int = TOP) -> RoleKernel | None:
    """The kernel's half of one role's folded stacks (``frame;frame;... weight`` lines);
    None when there are none."""
    total = 0
    ended: Counter[tuple[str, str]] = Counter()
    for line in folded.splitlines():
        stack, _, weight = line.rpartition(" ")
        if not stack or not weight.isdigit():
            continue
        n = int(weight)
        total += n
        frames = stack.split(";")
        if in_kernel(frames[-1]):
            ended[(frames[-1].removesuffix(KERNEL), _caller(frames))] += n
    if total == 0:
        return None
    kernel = sum(ended.values())
    return RoleKernel(node, role, total, kernel / total,
                      [KernelFunction(f, c, n / total) for (f, c), n in ended.most_common(top)])


def cell_kernel(flamegraphs: Sequence[FlameGraph]) -> list[RoleKernel]:
    """Each role's kernel share, from the folded files of a cell's flame graphs (its
    last probed repeat's; analysis/costs.py), but the all-processes graph."""
    out = []
    for g in flamegraphs:
        if g["node"] == "*":
            continue
        try:
            text = Path(g["folded"]).read_text()
        except OSError:
            continue  # the files were removed: the shares in the store still stand
        found = role_kernel(g["node"], g["role"], text)
        if found is not None:
            out.append(found)
    return out
