"""Where syncrep-lab keeps its state and caches.

Root's home is usually mode 0700, and servers run as an unprivileged account
when the tool runs as root, so root's defaults live under /var where that
account can reach them. ``SYNCREP_LAB_HOME`` overrides both.
"""

from __future__ import annotations

import os
from pathlib import Path


def _base(kind: str) -> Path:
    override = os.environ.get("SYNCREP_LAB_HOME")
    if override:
        return Path(override) / kind
    if os.geteuid() == 0:
        return Path("/var/lib/syncrep-lab") / kind
    if kind == "cache":
        root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    else:
        root = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(root) / "syncrep-lab"


def cache_dir() -> Path:
    """Fetched PostgreSQL bundles and initdb templates."""
    return _base("cache")


def builds_dir() -> Path:
    """PostgreSQL built from source, its sources and the apt lists they come from.
    ``SYNCREP_LAB_BUILDS`` puts them elsewhere (the tests keep them across runs)."""
    override = os.environ.get("SYNCREP_LAB_BUILDS")
    return Path(override) if override else cache_dir() / "builds"


def state_dir() -> Path:
    """The registry of clusters this tool created, and default cluster dirs."""
    return _base("state")


def default_cluster_dir() -> Path:
    return state_dir() / "clusters" / "default"
