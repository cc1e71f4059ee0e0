"""``cluster status``: each node's role, process, version and replication position.

Column names differ before 10 (``sent_location`` ... and the ``xlog``
functions); the queries here pick the right ones from the server's version.
Lags are given in bytes (every version) and as times (10+).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from syncrep_lab.cluster import server
from syncrep_lab.cluster.manifest import Manifest
from syncrep_lab.pg.deadline import query_deadline


def _replication_query(version_num: int) -> str:
    if version_num >= 100000:
        return """
            select application_name as name, pid as walsender_pid, state, sync_state,
                   sync_priority, sent_lsn::text as sent_lsn, write_lsn::text as write_lsn,
                   flush_lsn::text as flush_lsn, replay_lsn::text as replay_lsn,
                   pg_wal_lsn_diff(pg_current_wal_lsn(), sent_lsn)::bigint as sent_lag_bytes,
                   pg_wal_lsn_diff(pg_current_wal_lsn(), write_lsn)::bigint as write_lag_bytes,
                   pg_wal_lsn_diff(pg_current_wal_lsn(), flush_lsn)::bigint as flush_lag_bytes,
                   pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint as replay_lag_bytes,
                   extract(epoch from write_lag)::float8 as write_lag_s,
                   extract(epoch from flush_lag)::float8 as flush_lag_s,
                   extract(epoch from replay_lag)::float8 as replay_lag_s
            from pg_stat_replication order by application_name"""
    return """
        select application_name as name, pid as walsender_pid, state, sync_state,
               sync_priority, sent_location::text as sent_lsn,
               write_location::text as write_lsn, flush_location::text as flush_lsn,
               replay_location::text as replay_lsn,
               pg_xlog_location_diff(pg_current_xlog_location(), sent_location)::bigint
                   as sent_lag_bytes,
               pg_xlog_location_diff(pg_current_xlog_location(), write_location)::bigint
                   as write_lag_bytes,
               pg_xlog_location_diff(pg_current_xlog_location(), flush_location)::bigint
                   as flush_lag_bytes,
               pg_xlog_location_diff(pg_current_xlog_location(), replay_location)::bigint
                   as replay_lag_bytes,
               null::float8 as write_lag_s, null::float8 as flush_lag_s,
               null::float8 as replay_lag_s
        from pg_stat_replication order by application_name"""


def cluster_status(manifest: Manifest) -> dict[str, Any]:
    nodes: list[dict[str, Any]] = []
    replication: dict[str, dict[str, Any]] = {}
    for node in manifest.nodes:
        pid = server.postmaster_pid(node.data_dir(manifest.dir))
        entry: dict[str, Any] = {
            "name": node.name,
            "role": node.role,
            "pid": pid,
            "port": node.port,
            "data_dir": str(node.data_dir(manifest.dir)),
            "conninfo": manifest.conninfo(node),
            "state": "running" if pid else "stopped",
        }
        if pid:
            try:
                with (psycopg.connect(manifest.admin_conninfo(node), autocommit=True,
                                      connect_timeout=5, row_factory=dict_row) as conn,
                      query_deadline(conn, 10, f"node {node.name}")):
                    row = conn.execute(
                        "select current_setting('server_version') as version, "
                        "current_setting('server_version_num')::int as version_num, "
                        "pg_is_in_recovery() as in_recovery"
                    ).fetchone()
                    assert row is not None
                    entry["version"] = row["version"]
                    entry["in_recovery"] = row["in_recovery"]
                    if node.role == "primary":
                        for r in conn.execute(_replication_query(row["version_num"])):
                            replication[str(r["name"])] = dict(r)
            except psycopg.Error as exc:
                entry["state"] = "unreachable"
                entry["error"] = str(exc).strip()
        nodes.append(entry)
    for entry in nodes:
        if entry["role"] == "standby":
            rep = replication.get(entry["name"])
            entry["replication"] = rep
            entry["sync_state"] = rep["sync_state"] if rep else None
    return {
        "dir": str(manifest.dir),
        "version": manifest.version,
        "bin_dir": manifest.bin_dir,
        "synchronous_standby_names": manifest.sync,
        "tcp": manifest.tcp,
        "profile": manifest.profile,
        "dropped_settings": manifest.dropped_settings,
        "nodes": nodes,
    }
