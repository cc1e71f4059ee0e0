"""A cluster built by hand, the way many users build one, without the tool's cluster code:
``initdb``, ``pg_ctl``, ``pg_basebackup -R`` for each standby.

``named=True`` gives each standby its application_name in the primary_conninfo that
``pg_basebackup -R`` writes to postgresql.auto.conf (it copies the connection string it
was given). ``named=False`` is the common mistake: the application_name is appended to
postgresql.conf, where the primary_conninfo of postgresql.auto.conf overrides it, so
every standby connects as ``walreceiver`` and none is synchronous.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from pathlib import Path

import psycopg

from syncrep_lab.pg.installations import Installation
from syncrep_lab.runas import make_dir_for, run_as, server_account


class HandBuilt:
    def __init__(self, root: Path, inst: Installation, port: int, *, named: bool,
                 standbys: tuple[str, ...] = ("b", "c"), sync: str = "1(b,c)") -> None:
        self.root, self.inst, self.port = root, inst, port
        self.named, self.standbys, self.sync = named, standbys, sync
        self.account = server_account()
        self.sock = root / "sock"

    def conninfo(self, node: str = "primary") -> str:
        return f"host={self.sock} port={self.port_of(node)} user=postgres dbname=postgres"

    def port_of(self, node: str) -> int:
        return self.port if node == "primary" else self.port + 1 + self.standbys.index(node)

    def _run(self, *argv: str | Path) -> str:
        res = run_as(self.account, list(argv), timeout=120)
        assert res.returncode == 0, f"{argv}: {res.stdout}{res.stderr}"
        return res.stdout

    def build(self) -> HandBuilt:
        make_dir_for(self.account, self.root, 0o755)
        make_dir_for(self.account, self.sock, 0o755)
        primary = self.root / "primary"
        self._run(self.inst.program("initdb"), "-D", primary, "-U", "postgres",
                  "--auth=trust", "--no-sync", "--encoding=UTF8", "--no-locale")
        with open(primary / "postgresql.conf", "a") as conf:
            conf.write(f"port = {self.port}\nlisten_addresses = ''\n"
                       f"unix_socket_directories = '{self.sock}'\n"
                       f"synchronous_standby_names = '{self.sync}'\n"
                       "shared_buffers = 32MB\nmax_connections = 40\n")
        self.start("primary")
        for name in self.standbys:
            data = self.root / name
            given = self.conninfo() + (f" application_name={name}" if self.named else "")
            self._run(self.inst.program("pg_basebackup"), "-D", data, "-R", "-d", given,
                      "-X", "stream", "--no-sync")
            with open(data / "postgresql.conf", "a") as conf:
                conf.write(f"port = {self.port_of(name)}\n")
                if not self.named:  # overridden by postgresql.auto.conf
                    conf.write(f"primary_conninfo = '{self.conninfo()} application_name="
                               f"{name}'\n")
            self.start(name)
        return self

    def start(self, node: str) -> None:
        self._run(self.inst.program("pg_ctl"), "start", "-w", "-D", self.root / node,
                  "-l", self.root / f"{node}.log")

    def stop(self, node: str, mode: str = "fast") -> None:
        self._run(self.inst.program("pg_ctl"), "stop", "-w", "-m", mode, "-D",
                  self.root / node)

    def running(self, node: str) -> bool:
        return (self.root / node / "postmaster.pid").exists()

    def sync_states(self) -> dict[str, str]:
        with psycopg.connect(self.conninfo(), autocommit=True) as conn:
            return {str(r[0]): str(r[1]) for r in conn.execute(
                "select application_name, sync_state from pg_stat_replication "
                "where state = 'streaming'")}

    def wait_sync(self, want: dict[str, str], timeout: float = 60) -> None:
        """Start the standbys that are down, then wait for these sync states."""
        for name in self.standbys:
            if not self.running(name):
                self.start(name)
        deadline = time.monotonic() + timeout
        while (seen := self.sync_states()) != want:
            assert time.monotonic() < deadline, f"sync states {seen}, wanted {want}"
            time.sleep(0.2)

    def remove(self) -> None:
        for node in (*self.standbys, "primary"):
            if self.running(node):
                with contextlib.suppress(AssertionError):
                    self.stop(node, "immediate")
        shutil.rmtree(self.root, ignore_errors=True)
