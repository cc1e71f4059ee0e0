"""What bpftrace prints with ``-f json``: one JSON object a line, each with its
``type`` (map, printf, ...) and its ``data``. Read by the commit anatomy's maps
(probes/anatomy.py) and the standby's half's printed events (probes/standby_anatomy.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def printed(text: str, kind: str) -> Iterator[Any]:
    """The data of every object of type ``kind`` (map, printf) bpftrace printed with ``-f
    json``, in order: one JSON object a line. Lines that are not JSON (none are
    expected) are passed over."""
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("type") == kind:
            yield entry.get("data")
