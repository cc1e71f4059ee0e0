"""A backend caught before PostgreSQL wrote its title: what the hosts' probes name it.

A connection's backend keeps the postmaster's command line as its title until its
startup packet has come; a look at the node's processes in that window reads it as
"other". In a slow guest all of a cell's backends, connecting at once, were caught so
and their kernel lock takes went under "other" (the lock test's failure in CI). Here a
real server's backend is held in that window by a client that has not sent its startup
packet, read by the same snapshot the hosts' probes take (through this machine's
LocalHost), then let through: a later look and the title the lock probe read both name
it a backend."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from syncrep_lab.cluster.manifest import Manifest
from syncrep_lab.hosts.local import LocalHost
from syncrep_lab.hosts.snapshots import proc_snapshot
from syncrep_lab.pg.roles import titled
from syncrep_lab.probes.kernel_locks import named_roles
from syncrep_lab.probes.remote import node_processes, seen_again

PROTOCOL_3 = 196608  # 3.0, the startup packet's version


def _look(data_dir: str) -> list[dict[str, Any]]:
    return proc_snapshot(LocalHost(), data_dir)


def _until(check: Callable[[], Any], what: str, seconds: float = 30.0) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"not within {seconds:g} s: {what}")


def _startup(sock: socket.socket) -> None:
    """The startup packet (user and database postgres: trust on loopback), then every
    message until the server is ready for a query ('Z')."""
    body = struct.pack("!i", PROTOCOL_3) + b"user\0postgres\0database\0postgres\0\0"
    sock.sendall(struct.pack("!i", len(body) + 4) + body)
    buffer = b""
    while True:
        while len(buffer) < 5:
            chunk = sock.recv(4096)
            assert chunk, "the server closed the connection"
            buffer += chunk
        kind, length = buffer[:1], struct.unpack("!i", buffer[1:5])[0]
        while len(buffer) < 1 + length:
            chunk = sock.recv(4096)
            assert chunk, "the server closed the connection"
            buffer += chunk
        assert kind != b"E", buffer[:1 + length]
        if kind == b"Z":
            return
        buffer = buffer[1 + length:]


def test_a_backend_seen_before_its_title_is_named_a_backend_later(
        make_cluster: Callable[..., Manifest]) -> None:
    manifest = make_cluster(standbys=0, tcp=True)
    primary = manifest.primary
    data_dir = str(primary.data_dir(manifest.dir))
    before = {int(p["pid"]) for p in _look(data_dir)}
    with socket.create_connection(("127.0.0.1", primary.port), timeout=30) as sock:
        first = _until(lambda: [p for p in _look(data_dir) if int(p["pid"]) not in before],
                       "a backend for the connection")
        [held] = first
        pid = int(held["pid"])
        # no startup packet yet: the postmaster's command line, read as "other"
        assert not titled(held["title"]), held
        seen = _look(data_dir)
        [role] = [p.role for p in node_processes("primary", seen, {}) if p.pid == pid]
        assert role == "other", seen
        _startup(sock)
        later = _until(lambda: [p for p in _look(data_dir) if int(p["pid"]) == pid
                                and titled(p["title"])], "the backend's title")
        # a later look gives it the title it has now, and so its role
        again = seen_again(seen, _look(data_dir))
        assert {p.pid: p.role for p in node_processes("primary", again, {})}[pid] \
            == "backend", again
        assert sum(int(p["pid"]) == pid for p in again) == 1, again
        # the lock probe's title, read once PostgreSQL had written it, wins over the
        # snapshot's "other"
        roles = named_roles("primary", {pid: ("primary", "other")},
                            {pid: later[0]["title"]}, {})
        assert roles[pid] == ("primary", "backend"), (roles, later)
