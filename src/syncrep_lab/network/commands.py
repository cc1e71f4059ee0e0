"""Running the commands that build and read the network (``ip``, ``tc``, ``iptables``):
bounded in time, a failure raised as a :class:`UserError` that names the command, and a
deadline shared by the steps of one operation. Also the two facts about named namespaces
that every layer needs: where iproute2 keeps them (:data:`NETNS_DIR`) and the prefix that
runs a program inside one (:func:`exec_prefix`).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from syncrep_lab.errors import UserError

NETNS_DIR = Path("/run/netns")
CMD_TIMEOUT = 10.0


def exec_prefix(ns: str) -> list[str]:
    """The command prefix that runs a program inside namespace ``ns``."""
    return ["ip", "netns", "exec", ns]


def run(cmd: list[str], what: str, *, timeout: float = CMD_TIMEOUT, check: bool = True,
        fix: str | None = None) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max(timeout, 0.5),
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError as exc:
        raise UserError(f"cannot {what}: {cmd[0]} is not installed",
                        "install iproute2 (ip, tc) and iptables") from exc
    except subprocess.TimeoutExpired as exc:
        raise UserError(f"cannot {what}: `{' '.join(cmd)}` did not finish within "
                        f"{max(timeout, 0.5):.0f} s",
                        fix or "check the machine's load, then try again") from exc
    if check and proc.returncode != 0:
        detail = (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}")
        raise UserError(f"cannot {what}: {detail.splitlines()[-1]} (`{' '.join(cmd)}`)",
                        fix or "check that this machine allows network namespaces, and "
                        "remove leftovers with `syncrep-lab clean`")
    return proc


class Deadline:
    def __init__(self, seconds: float, what: str) -> None:
        self.end = time.monotonic() + seconds
        self.seconds = seconds
        self.what = what

    def left(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise UserError(f"{self.what} took longer than {self.seconds:g} s",
                            "check the machine's load, or allow more time")
        return min(left, CMD_TIMEOUT)
