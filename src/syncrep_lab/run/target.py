"""Where a cell's workload goes: ``Target``, one instance of the cluster it runs on,
whoever made it. The bottom of run/: the client, the watches of a repeat and the
clusters all speak of it, so it imports none of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syncrep_lab.cluster.manifest import Manifest
from syncrep_lab.probes.session import ProbeNode


@dataclass
class Target:
    """Where a cell's workload goes, whoever made the cluster."""

    conninfo: str  # pgbench's connection
    admin: str  # the tool's connection to the primary
    standbys: list[str]
    version_num: int
    pgbench: Path
    log_of: Callable[[str], str] | None = None
    nodes: list[ProbeNode] = field(default_factory=list)
    manifest: Manifest | None = None  # None for an attached cluster
    instance: int = 1
    pinners: list[Any] = field(default_factory=list)  # placement.pinning.RolePinner
