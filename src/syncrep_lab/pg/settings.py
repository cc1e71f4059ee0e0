"""Server settings: named profiles, user overrides, and what each version knows.

Which settings exist differs between 9.6 and 18 (``wal_keep_segments`` became
``wal_keep_size`` in 13, ``force_parallel_mode`` was renamed in 16,
``old_snapshot_threshold`` went away in 17). Rather than a table of versions,
the installation itself is asked: ``postgres --describe-config`` lists every
setting the binary knows. A profile's setting the server does not know is
dropped and reported; a user's ``--set`` the server does not know is refused
with the closest known names.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from syncrep_lab.errors import UserError

MiB = 1024 * 1024

# Sensible for a write benchmark on a small machine: WAL big enough that a cell
# of a few minutes sees no forced checkpoint, durable (fsync on), and fast
# standby reconnection.
BENCHMARK = {
    "max_connections": "300",
    "shared_buffers": "256MB",
    "wal_buffers": "64MB",
    "max_wal_size": "4GB",
    "min_wal_size": "1GB",
    "checkpoint_timeout": "30min",
    "checkpoint_completion_target": "0.9",
    "wal_writer_delay": "10ms",
    "synchronous_commit": "on",
    "max_wal_senders": "10",
    "max_replication_slots": "10",
    "wal_keep_size": "1GB",
    "wal_keep_segments": "64",
    "hot_standby": "on",
    "wal_receiver_status_interval": "1s",
    "wal_retrieve_retry_interval": "100ms",
    "log_min_messages": "warning",
    "log_line_prefix": "'%m [%p] %a '",
}

# The seed's postgresql.conf (../shared/seeds, 2016, 9.6 on a 64-core box with
# 24 GB of shared_buffers), memory figures scaled to this machine. Logging and
# locale lines are left out: they change where logs go, not how fast commits are.
SEED = {
    "max_connections": "300",
    "maintenance_work_mem": "512MB",
    "dynamic_shared_memory_type": "posix",
    "vacuum_cost_delay": "0",
    "bgwriter_delay": "10ms",
    "bgwriter_lru_maxpages": "1000",
    "bgwriter_lru_multiplier": "10.0",
    "bgwriter_flush_after": "0",
    "max_parallel_workers_per_gather": "0",
    "old_snapshot_threshold": "-1",
    "backend_flush_after": "0",
    "fsync": "off",
    "synchronous_commit": "remote_write",
    "full_page_writes": "off",
    "wal_writer_delay": "10ms",
    "wal_writer_flush_after": "0",
    "checkpoint_timeout": "45min",
    "checkpoint_completion_target": "0.05",
    "checkpoint_flush_after": "0",
    "max_wal_senders": "5",
    "random_page_cost": "1.0",
    "parallel_tuple_cost": "0",
    "parallel_setup_cost": "0",
    "update_process_title": "off",
    "autovacuum": "on",
    "log_autovacuum_min_duration": "-1",
    "autovacuum_max_workers": "16",
    "autovacuum_naptime": "15s",
    "autovacuum_vacuum_scale_factor": "0.02",
    "autovacuum_analyze_scale_factor": "0.01",
    "vacuum_freeze_table_age": "1500000000",
    "vacuum_multixact_freeze_table_age": "1500000000",
    "hot_standby": "on",
    "wal_retrieve_retry_interval": "100ms",
    "log_min_messages": "warning",
}

PROFILES = ("benchmark", "seed")


def _mem_total() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 * 1024 * MiB


def _scaled_seed(nodes: int) -> dict[str, str]:
    """The seed's 24 GB shared_buffers, 256 MB wal_buffers and 48 GB max_wal_size,
    shrunk so that all nodes of the cluster together use at most a quarter of RAM."""
    per_node = _mem_total() // 4 // max(nodes, 1)
    shared = min(24 * 1024 * MiB, max(128 * MiB, per_node))
    return {
        **SEED,
        "shared_buffers": f"{shared // MiB}MB",
        "wal_buffers": f"{min(256 * MiB, max(16 * MiB, shared // 32)) // MiB}MB",
        "effective_cache_size": f"{2 * shared // MiB}MB",
        "max_wal_size": "8GB",
    }


def profile_settings(profile: str, nodes: int) -> dict[str, str]:
    if profile == "benchmark":
        return dict(BENCHMARK)
    if profile == "seed":
        return _scaled_seed(nodes)
    raise UserError(f"unknown settings profile {profile!r}", f"use one of: {', '.join(PROFILES)}")


@cache
def known_settings(postgres: Path) -> frozenset[str]:
    """Every setting name the given postgres binary knows (``--describe-config``)."""
    out = subprocess.run(
        [str(postgres), "--describe-config"], capture_output=True, text=True, timeout=30,
        check=False,
    )
    if out.returncode != 0:
        raise UserError(f"{postgres} --describe-config failed: {out.stderr.strip()}",
                        "check that this is a working PostgreSQL installation")
    names = {line.split("\t", 1)[0] for line in out.stdout.splitlines() if line}
    # --describe-config leaves out settings flagged not-in-sample; these are real.
    names |= {"data_directory", "config_file", "hba_file", "ident_file", "port",
              "listen_addresses", "unix_socket_directories", "primary_conninfo",
              "wal_level", "hot_standby"}
    return frozenset(names)


def parse_assignment(text: str) -> tuple[str, str]:
    """``name=value`` from a ``--set`` flag."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise UserError(f"--set {text!r} is not name=value", "write e.g. --set shared_buffers=1GB")
    return name.lower(), value.strip()


@dataclass
class ResolvedSettings:
    values: dict[str, str]
    dropped: list[str] = field(default_factory=list)  # profile settings this version lacks


def resolve_settings(
    postgres: Path, profile: str, nodes: int, overrides: dict[str, str]
) -> ResolvedSettings:
    known = known_settings(postgres)
    values: dict[str, str] = {}
    dropped: list[str] = []
    for name, value in profile_settings(profile, nodes).items():
        if name in known:
            values[name] = value
        else:
            dropped.append(name)
    for name, value in overrides.items():
        if name not in known and "." not in name:
            close = difflib.get_close_matches(name, sorted(known), n=3)
            hint = f"did you mean {', '.join(close)}?" if close else "check the name"
            raise UserError(f"--set {name}: this PostgreSQL knows no such setting", hint)
        values[name] = value
    return ResolvedSettings(values, dropped)


def conf_value(value: str) -> str:
    """A value as postgresql.conf wants it: quoted unless already quoted or numeric/bare."""
    v = value.strip()
    if len(v) >= 2 and v[0] == v[-1] == "'":
        return v
    if re.fullmatch(r"-?\d+(\.\d+)?[A-Za-z]*|[A-Za-z_][A-Za-z0-9_]*", v):
        return v
    return "'" + v.replace("\\", "\\\\").replace("'", "''") + "'"


def render_conf(values: dict[str, str], header: str) -> str:
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [f"{name} = {conf_value(value)}" for name, value in values.items()]
    return "\n".join(lines) + "\n"
