"""Security defaults, on real clusters made by the command line.

- Servers listen on unix sockets only, and on 127.0.0.1 (never a wildcard) with --tcp:
  read back from the servers and from the kernel's socket tables.
- ``trust`` only on the cluster's own socket and on 127.0.0.1; the socket only for the
  server account (and root); data dirs 0700.
- A password in an attached cluster's conninfo (key=value or URI) reaches no terminal,
  log, store table, artifact or report: checked by a real attach run into a folder
  whose path has spaces and non-ASCII letters.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import stat
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest

from syncrep_lab import paths
from syncrep_lab.cluster.manifest import Manifest, load
from syncrep_lab.runas import server_account

from .helpers import cli, cli_here, postmasters_in


def _up(cluster_dir: Path, *args: str) -> Manifest:
    res = cli("cluster", "up", "--dir", str(cluster_dir), "--json", *args)
    assert res.returncode == 0, res.stderr
    manifest = load(cluster_dir)
    assert manifest is not None
    return manifest


def _down(cluster_dir: Path) -> None:
    res = cli("cluster", "down", "--dir", str(cluster_dir))
    assert res.returncode == 0, res.stderr
    assert postmasters_in(cluster_dir) == []


def _listening(ports: set[int]) -> list[tuple[str, str, int]]:
    """(table, local address, port) of every listening TCP socket on these ports."""
    found = []
    for table in ("tcp", "tcp6"):
        path = Path("/proc/net") / table
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            addr, port_hex = fields[1].rsplit(":", 1)
            if fields[3] == "0A" and int(port_hex, 16) in ports:  # 0A: LISTEN
                found.append((table, addr, int(port_hex, 16)))
    return found


def _unix_listeners() -> set[str]:
    paths = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[5] == "01":  # 01: listening
            paths.add(fields[7])
    return paths


def _setting(manifest: Manifest, node_name: str, name: str) -> str:
    with psycopg.connect(manifest.admin_conninfo(manifest.node(node_name)),
                         autocommit=True) as conn:
        row = conn.execute("select setting from pg_settings where name = %s",
                           (name,)).fetchone()
    assert row is not None
    return str(row[0])


def _hba_rules(manifest: Manifest) -> list[dict[str, Any]]:
    with psycopg.connect(manifest.admin_conninfo(manifest.primary), autocommit=True) as conn:
        cur = conn.execute("select type, address, netmask, auth_method, error "
                           "from pg_hba_file_rules")
        names = [d.name for d in cur.description or []]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _check_common(manifest: Manifest) -> None:
    """What holds with or without --tcp: sockets, permissions, pg_hba."""
    account = server_account()
    ports = {n.port for n in manifest.nodes}
    bound = _unix_listeners()
    for node in manifest.nodes:
        sock = manifest.sock_dir / f".s.PGSQL.{node.port}"
        assert str(sock) in bound, f"{sock} is not listening"
        st = sock.stat()
        assert stat.S_ISSOCK(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == 0o700, oct(st.st_mode)
        assert st.st_uid == account.uid
        assert _setting(manifest, node.name, "unix_socket_permissions") == "0700"
        data = node.data_dir(manifest.dir)
        assert stat.S_IMODE(data.stat().st_mode) == 0o700, f"{data} is not 0700"
        assert data.stat().st_uid == account.uid
        for line in (data / "pg_hba.conf").read_text().splitlines():
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            if fields[0] == "local":
                continue
            assert fields[0] == "host" and fields[3] == "127.0.0.1/32", line
    rules = _hba_rules(manifest)
    assert rules and all(r["error"] is None for r in rules)
    for rule in rules:
        assert rule["type"] == "local" or (rule["type"] == "host"
                                           and rule["address"] == "127.0.0.1"
                                           and rule["netmask"] == "255.255.255.255"), rule
    assert ports


def _other_user_cannot_connect(manifest: Manifest) -> None:
    """A local account that is neither root nor the server's gets no connection to the
    trusted socket."""
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user")
    sock = manifest.sock_dir / f".s.PGSQL.{manifest.primary.port}"
    probe = ("import socket, sys\n"
             "s = socket.socket(socket.AF_UNIX)\n"
             "try:\n    s.connect(sys.argv[1])\nexcept PermissionError:\n"
             "    print('refused')\nelse:\n    print('connected')\n")
    res = subprocess.run(["runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c", probe,
                          str(sock)], capture_output=True, text=True, timeout=30, check=False)
    assert res.stdout.strip() == "refused", (res.stdout, res.stderr)


def test_default_cluster_listens_on_unix_sockets_only(cluster_dir: Path) -> None:
    manifest = _up(cluster_dir)
    try:
        for node in manifest.nodes:
            assert _setting(manifest, node.name, "listen_addresses") == ""
        assert _listening({n.port for n in manifest.nodes}) == []
        _check_common(manifest)
        _other_user_cannot_connect(manifest)
    finally:
        _down(cluster_dir)


def test_tcp_listens_on_loopback_only(cluster_dir: Path) -> None:
    manifest = _up(cluster_dir, "--tcp", "--standbys", "1", "--sync", "b")
    try:
        ports = {n.port for n in manifest.nodes}
        for node in manifest.nodes:
            assert _setting(manifest, node.name, "listen_addresses") == "127.0.0.1"
        listening = _listening(ports)
        assert sorted(p for _, _, p in listening) == sorted(ports)
        # 0100007F is 127.0.0.1 as /proc/net/tcp writes it; nothing on tcp6 or 0.0.0.0
        assert {(t, a) for t, a, _ in listening} == {("tcp", "0100007F")}
        conninfo = _setting(manifest, "b", "primary_conninfo")
        assert "host=127.0.0.1" in conninfo
        _check_common(manifest)
        # and a connection to a non-loopback address of this machine is refused
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.connect(("192.0.2.1", 9))  # no packet is sent; picks the outgoing address
                own = s.getsockname()[0]
            except OSError:
                own = "127.0.0.1"
        if not own.startswith("127."):
            with socket.socket() as s, pytest.raises(OSError):
                s.settimeout(2)
                s.connect((own, manifest.primary.port))
    finally:
        _down(cluster_dir)


SECRETS = ["Pw-first-7c1e", "Pw-second-93aa", "Pw-third-1b0d", "Pw fourth 55e2",
           "Pw-fifth-a4f0"]


def _grep_folder(folder: Path, secrets: list[str]) -> list[str]:
    """Every file (and the store's SQL dump) that holds one of the secrets."""
    hits = []
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            hits += [f"{path}: {s}" for s in secrets if s.encode() in data]
    db = sqlite3.connect(folder / "syncrep-lab.sqlite")
    dump = "\n".join(db.iterdump())
    db.close()
    hits += [f"store dump: {s}" for s in secrets if s in dump]
    return hits


def test_attach_passwords_are_never_shown_or_stored(workdir: Path) -> None:
    """An attached cluster whose conninfos carry passwords (trust ignores them), in both
    forms; one standby's own primary_conninfo carries one too (read back by the run)."""
    theirs = workdir / "theirs"
    manifest = _up(theirs)
    try:
        sock = str(manifest.sock_dir)
        b, c = manifest.node("b"), manifest.node("c")
        with psycopg.connect(manifest.admin_conninfo(b), autocommit=True) as conn:
            old = str(conn.execute("show primary_conninfo").fetchone()[0])  # type: ignore[index]
            conn.execute(f"alter system set primary_conninfo = "
                         f"'{old} password={SECRETS[4]}'")
            conn.execute("select pg_reload_conf()")
        primary = (f"host={sock} port={manifest.primary.port} user=postgres dbname=postgres "
                   f"password={SECRETS[0]}")
        uri_b = (f"postgresql://postgres:{SECRETS[1]}@/postgres?host={quote(sock, safe='')}"
                 f"&port={b.port}&password={SECRETS[2]}")
        kv_c = f"host={sock} port={c.port} user=postgres password='{SECRETS[3]}'"
        spec = workdir / "attach.toml"
        spec.write_text(f"""\
name = "secret-attach"

[topology.attach]
primary = "{primary}"
standbys = {{ b = "{uri_b}", c = "{kv_c}" }}

[workload]
clients = 2
duration = 1
warmup = 0

[run]
repeats_min = 1
repeats_max = 1

[probes]
probed_repeats = 1
perf = false
flamegraphs = false
sched = false
anatomy = false
""")
        out = workdir / "runs with space" / "é ü 名前"
        check = cli_here("run", str(spec), "--out", str(out), "--check")
        assert check.returncode == 0, check.stderr
        res = cli("run", str(spec), "--out", str(out), timeout=300)
        assert res.returncode == 0, res.stderr
        db = sqlite3.connect(out / "syncrep-lab.sqlite")
        status = db.execute("select status, error from cells").fetchall()
        spec_toml = db.execute("select spec_toml from runs").fetchone()[0]
        settings = json.loads(db.execute("select settings_json from clusters").fetchone()[0])
        db.close()
        assert status == [("done", None)]
        assert "password=***" in spec_toml and "postgres:***@" in spec_toml
        assert "password=***" in settings["b"]["primary_conninfo"]["setting"]
        assert (out / "report.html").exists()
        more = [cli_here(cmd, str(out), *extra) for cmd, *extra in
                [("results", "--json"), ("report", "--json"), ("costs",), ("diagnose",)]]
        assert all(r.returncode == 0 for r in more), [r.stderr for r in more]
        shown = "\n".join(r.stdout + r.stderr for r in [check, res, *more])
        assert [s for s in SECRETS if s in shown] == []
        assert _grep_folder(out, SECRETS) == []
        logs = "".join(p.read_text(errors="replace") for p in theirs.glob("*.log"))
        assert logs and [s for s in SECRETS[:4] if s in logs] == []
        # pgbench got the password in its environment, not on its command line
        argv = next(out.rglob("pgbench.argv")).read_text()
        assert "password" not in argv and str(manifest.primary.port) in argv
    finally:
        _down(theirs)


def test_attach_that_fails_shows_no_password(workdir: Path) -> None:
    spec = workdir / "gone.toml"
    spec.write_text(f"""\
name = "gone"

[topology.attach]
primary = "postgresql://postgres:{SECRETS[1]}@/postgres?host=%2Fnonexistent&port=1"

[workload]
duration = 1
""")
    out = workdir / "run"
    res = cli_here("run", str(spec), "--out", str(out))
    # refused before the run starts: its cells wait for a standby, so the primary is
    # asked first whether it can acknowledge them
    assert res.returncode == 2, res.stderr
    assert "cannot connect to the attached primary" in res.stdout + res.stderr
    assert SECRETS[1] not in res.stdout + res.stderr
    assert not out.exists()
    state = [p for p in paths.state_dir().rglob("*") if p.is_file()]
    assert [p for p in state if SECRETS[1].encode() in p.read_bytes()] == []
