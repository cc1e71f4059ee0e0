"""A node whose WAL flushes are slow on purpose: ``[nodes.NAME] flush_delay_us``.

A small shared library, preloaded into that node's postmaster (``LD_PRELOAD``, so
every process it forks has it too), sleeps the given microseconds before each
``fdatasync`` and ``fsync`` and then makes the real call. Only that node's flushes
move: its walreceiver writes and replies as fast as before, then flushes late (the
flush part of a commit's wait, ``flush_lag`` less ``write_lag``). Why a preload and
not a blkio throttle, a device-mapper delay or a loop device: docs/decisions.md,
"A standby made slow on purpose".

The library is compiled with gcc once per source text into the tool's cache (which
the server account can read, paths.py). Nothing is made per run: the delay lives in
the node's environment alone and goes with its processes, which every way a run ends
(and ``clean`` after a kill -9) stops.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from syncrep_lab import paths
from syncrep_lab.errors import ClusterFailure, UserError

DELAY_VAR = "SYNCREP_LAB_FLUSH_DELAY_US"


# nanosleep is restarted with what is left when a signal (a latch's SIGURG or SIGUSR1)
# cuts it short, and errno is kept: the server reads the real call's errno.
SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <time.h>

static long delay_ns;
static int (*real_fdatasync)(int);
static int (*real_fsync)(int);

__attribute__((constructor)) static void syncrep_lab_init(void)
{
    const char *text = getenv("SYNCREP_LAB_FLUSH_DELAY_US");
    delay_ns = text ? atol(text) * 1000L : 0;
    real_fdatasync = (int (*)(int)) dlsym(RTLD_NEXT, "fdatasync");
    real_fsync = (int (*)(int)) dlsym(RTLD_NEXT, "fsync");
}

static void syncrep_lab_pause(void)
{
    struct timespec left = {delay_ns / 1000000000L, delay_ns % 1000000000L};
    int saved = errno;

    if (delay_ns <= 0)
        return;
    while (nanosleep(&left, &left) == -1 && errno == EINTR)
        ;
    errno = saved;
}

int fdatasync(int fd)
{
    syncrep_lab_pause();
    return real_fdatasync(fd);
}

int fsync(int fd)
{
    syncrep_lab_pause();
    return real_fsync(fd);
}
"""


def library() -> Path:
    """The preload library, compiled into the cache the first time (a UserError naming
    the fix where this machine cannot compile it)."""
    digest = hashlib.sha256(SOURCE.encode()).hexdigest()[:12]
    target = paths.cache_dir() / f"slow-flush-{digest}.so"
    if target.exists():
        return target
    gcc = shutil.which("gcc")
    if gcc is None:
        raise UserError("a slow flush (flush_delay_us) needs gcc to compile its preload "
                        "library, and gcc is not installed",
                        "apt-get install gcc (./run setup does it as root), or leave "
                        "flush_delay_us out")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="syncrep-lab-slow-flush-") as tmp:
        src = Path(tmp) / "slow_flush.c"
        src.write_text(SOURCE)
        built = Path(tmp) / "slow_flush.so"
        out = subprocess.run([gcc, "-O2", "-shared", "-fPIC", "-o", str(built), str(src),
                              "-ldl"], capture_output=True, text=True, timeout=120,
                             check=False)
        if out.returncode != 0:
            raise UserError(f"gcc could not compile the slow flush's preload library:\n"
                            f"{out.stderr.strip()}",
                            "check that gcc and libc6-dev are installed, or leave "
                            "flush_delay_us out")
        built.chmod(0o755)  # the server account loads it
        staged = target.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(built, staged)
        staged.chmod(0o755)
        staged.replace(target)  # atomic: a concurrent run finds it whole or not at all
    return target


def environment(delay_us: int) -> dict[str, str]:
    """What a node's postmaster is started with to make its flushes ``delay_us`` slower
    (nothing for 0)."""
    if delay_us <= 0:
        return {}
    return {"LD_PRELOAD": str(library()), DELAY_VAR: str(delay_us)}


def check_loaded(pid: int, node: str, log_tail: str = "") -> None:
    """Refuse a node started to be slow whose postmaster did not load the library (a
    loader that ignored ``LD_PRELOAD``: its flushes would be as fast as ever and the
    cell would measure nothing)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return  # gone already: its start reports why
    if "/slow-flush-" not in maps:
        raise ClusterFailure(f"{node} started without its slow flush: its postmaster "
                             f"(pid {pid}) did not load the preload library{log_tail}",
                             "check that the server account can read the tool's cache "
                             f"({paths.cache_dir()}), or leave flush_delay_us out")
