"""CPU and NUMA node lists in the kernel's list format ("0-3,5,7-8").

The same format is used by cpuset files, ``Cpus_allowed_list`` in
/proc/PID/status, numactl and taskset, so specs, cgroup writes and read-backs
can be compared as sets. Lists are checked against the CPUs this process may
use, because writing a CPU the machine does not have into a cpuset fails with a
bare EINVAL and ``sched_setaffinity`` silently ignores it when other CPUs are
valid.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from syncrep_lab.errors import UserError

# Far above any real machine (the kernel's NR_CPUS tops out at 8192), low enough
# that "0-99999999" cannot make a list of a hundred million entries.
MAX_ID = 65535

_ITEM_RE = re.compile(r"(\d+)(?:-(\d+))?")
_NODE_DIR_RE = re.compile(r"node(\d+)")


def parse_list(text: str, what: str = "CPU") -> list[int]:
    """Parse a kernel-style list of ``what`` ids ("CPU", "NUMA node") into sorted ids."""
    if not isinstance(text, str):
        raise UserError(f"{what} list {text!r} is not text", f"give {what}s like 0-3,5")
    stripped = text.strip()
    if not stripped:
        raise UserError(f"empty {what} list", f"give at least one {what}, e.g. 0 or 0-3,5")
    found: set[int] = set()
    for raw in stripped.split(","):
        item = raw.strip()
        match = _ITEM_RE.fullmatch(item)
        if match is None:
            raise UserError(
                f"{what} list {text!r}: {item!r} is not a {what} number or range",
                f"give {what}s like 0-3,5 (numbers and first-last ranges, comma separated)",
            )
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise UserError(
                f"{what} list {text!r}: range {item!r} runs backwards",
                f"write the lower {what} first, e.g. {last}-{first}",
            )
        if last > MAX_ID:
            raise UserError(f"{what} list {text!r}: {last} is beyond any machine",
                            f"give {what}s this machine has")
        found.update(range(first, last + 1))
    return sorted(found)


def parse_cpus(text: str) -> list[int]:
    """"0-3,5,7-8" -> [0, 1, 2, 3, 5, 7, 8]; UserError on garbage, empty or backward ranges.

    >>> parse_cpus('0-3,5,7-8')
    [0, 1, 2, 3, 5, 7, 8]
    >>> parse_cpus(' 5, 1-2 ,1')
    [1, 2, 5]
    >>> parse_cpus('3-1')
    Traceback (most recent call last):
    ...
    syncrep_lab.errors.UserError: CPU list '3-1': range '3-1' runs backwards
      fix: write the lower CPU first, e.g. 1-3
    """
    return parse_list(text, "CPU")


def format_cpus(cpus: Iterable[int]) -> str:
    """The compact list form of ``cpus``; "" for none.

    >>> format_cpus([5, 0, 1, 2, 3, 3])
    '0-3,5'
    >>> format_cpus([])
    ''
    """
    ids = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(parts)


def _online_cpus() -> set[int] | None:
    try:
        text = Path("/sys/devices/system/cpu/online").read_text()
    except OSError:
        return None
    try:
        return set(parse_list(text))
    except UserError:
        return None


def machine_cpus() -> list[int]:
    """CPUs this process may run on: its own affinity, restricted to online CPUs.

    The affinity already reflects the cpuset this process sits in (a container,
    a systemd slice), which is what every child it starts can get at most.
    """
    allowed = set(os.sched_getaffinity(0))
    online = _online_cpus()
    return sorted(allowed & online if online is not None else allowed)


def numa_nodes() -> list[int]:
    """The machine's NUMA nodes, from /sys/devices/system/node/node*.

    A kernel built without NUMA has no such directory; everything is then node 0.
    """
    base = Path("/sys/devices/system/node")
    try:
        names = os.listdir(base)
    except OSError:
        return [0]
    nodes = sorted(int(m.group(1)) for n in names if (m := _NODE_DIR_RE.fullmatch(n)))
    return nodes or [0]


def check_cpus(text: str, where: str) -> list[int]:
    """Parse ``text`` and refuse CPUs this machine (or this process) cannot use.

    ``where`` names the setting in the message, e.g. "placements.tight.cpus.b".
    """
    try:
        cpus = parse_cpus(text)
    except UserError as exc:
        raise UserError(f"{where}: {exc.cause}", exc.fix) from None
    require_on_machine(cpus, machine_cpus(), "CPU", where)
    return cpus


def require_on_machine(ids: list[int], have: list[int], noun: str, where: str) -> None:
    """Refuse CPUs (``noun`` "CPU") or NUMA nodes ("node") this machine does not have."""
    missing = sorted(set(ids) - set(have))
    if missing:
        raise UserError(
            f"{where}: {noun}{'s' if len(missing) > 1 else ''} {format_cpus(missing)} not on "
            f"this machine (it has {noun}{'s' if len(have) > 1 else ''} {format_cpus(have)})",
            f"choose among {noun}s {format_cpus(have)}",
        )
