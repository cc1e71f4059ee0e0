"""The cluster manifest: what syncrep-lab created in a cluster dir, and a registry of
every such dir, so that ``cluster down`` and ``clean`` remove only what is ours.

Layout of a cluster dir ``D``::

    D/syncrep-lab.json    this manifest; written before any server exists
    D/sock/               unix sockets of every node
    D/<node>/             data dir of each node (primary, b, c, ...)
    D/<node>.log          server log of each node

A dir without the manifest is never written to nor deleted by the tool.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from syncrep_lab import paths, procs, shutdown
from syncrep_lab.cluster.server import processes_in

if TYPE_CHECKING:
    from syncrep_lab.placement.layout import Launch, Layout

MANIFEST = "syncrep-lab.json"
FORMAT = 1


@dataclass
class Node:
    name: str
    role: str  # primary | standby
    port: int
    host: dict[str, Any] | None = None  # an SSH host (hosts.ssh.HostSpec fields), or here
    remote_data: str | None = None  # its data dir on that host
    # µs each fsync/fdatasync of its processes waits first (cluster/slow_flush.py)
    flush_delay_us: int = 0

    def data_dir(self, cluster_dir: Path) -> Path:
        return cluster_dir / self.name

    def log_file(self, cluster_dir: Path) -> Path:
        return cluster_dir / f"{self.name}.log"


@dataclass
class Manifest:
    dir: Path
    bin_dir: str
    version: str
    sync: str
    tcp: bool
    nodes: list[Node]
    state: str = "creating"  # creating | up | stopped
    settings: dict[str, str] = field(default_factory=dict)
    dropped_settings: list[str] = field(default_factory=list)
    profile: str = "benchmark"
    clone: str = "copy"
    created_by_uid: int = field(default_factory=os.geteuid)
    # cpusets, numactl policies, namespaces and links (placement/layout.py), as JSON;
    # saved before any of it is made, so that `clean` can undo it after a crash
    layout: dict[str, Any] | None = None
    # the client (pgbench) on an SSH host: {"host": HostSpec fields, "dir": its folder
    # there}; saved before anything is made there, for the teardown
    client: dict[str, Any] | None = None

    @property
    def sock_dir(self) -> Path:
        return self.dir / "sock"

    @property
    def primary(self) -> Node:
        return next(n for n in self.nodes if n.role == "primary")

    @property
    def standbys(self) -> list[Node]:
        return [n for n in self.nodes if n.role == "standby"]

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def placed(self) -> Layout | None:
        from syncrep_lab.placement.layout import Layout

        return Layout.from_json(self.layout) if self.layout else None

    def launch(self, name: str) -> Launch | None:
        layout = self.placed()
        return None if layout is None else layout.launch(name)

    def on_host(self, name: str) -> list[str]:
        """What the node (or ``client``) on an SSH host is started under there: numactl
        and taskset (placement/layout.Launch.on_host), or nothing."""
        layout = self.placed()
        launch = layout.hosts.get(name) if layout is not None else None
        return launch.on_host() if launch is not None else []

    def conninfo(self, node: Node, dbname: str = "postgres") -> str:
        """The client's connection (pgbench's): across the client's link when the
        nodes live in namespaces; from the client's SSH host, to this machine's address
        on the route to it (its password is given apart, in a file there). A node on an SSH
        host is reached at its own address with the cluster's password (the client's
        program takes the password out of the command line)."""
        if node.host is not None:
            from syncrep_lab.cluster.remote_node import password

            return (f"host={node.host['address']} port={node.port} user=postgres "
                    f"dbname={dbname} password={password(self.dir)}")
        if self.client is not None:
            from syncrep_lab.cluster.remote_node import local_address_towards

            where = self.client["host"]
            facing = local_address_towards(where["address"], int(where.get("port", 22)))
            return f"host={facing} port={node.port} user=postgres dbname={dbname}"
        layout = self.placed()
        address = layout.address(node.name, "client") if layout is not None else None
        host = address or ("127.0.0.1" if self.tcp else str(self.sock_dir))
        return f"host={host} port={node.port} user=postgres dbname={dbname}"

    def admin_conninfo(self, node: Node, dbname: str = "postgres") -> str:
        """The tool's own connection: over the cluster's unix socket, or over TCP with the
        cluster's password to a node on another host."""
        if node.host is not None:
            from syncrep_lab.cluster.remote_node import password

            return (f"host={node.host['address']} port={node.port} user=postgres "
                    f"dbname={dbname} password={password(self.dir)} connect_timeout=10")
        return f"host={self.sock_dir} port={node.port} user=postgres dbname={dbname}"

    @property
    def local_nodes(self) -> list[Node]:
        return [n for n in self.nodes if n.host is None]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["dir"] = str(self.dir)
        data["format"] = FORMAT
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Manifest:
        data = dict(data)
        data.pop("format", None)
        data["dir"] = Path(data["dir"])
        data["nodes"] = [Node(**n) for n in data["nodes"]]
        return cls(**data)

    def save(self) -> None:
        tmp = self.dir / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        os.replace(tmp, self.dir / MANIFEST)


def load(cluster_dir: Path) -> Manifest | None:
    path = cluster_dir / MANIFEST
    if not path.is_file():
        return None
    try:
        return Manifest.from_json(json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError):
        return None


def _registry() -> Path:
    return paths.state_dir() / "registry"


def _record(cluster_dir: Path) -> Path:
    """The registry's record of the cluster in ``cluster_dir``."""
    key = hashlib.sha256(str(cluster_dir.resolve()).encode()).hexdigest()[:16]
    return _registry() / f"{key}.json"


def register(cluster_dir: Path) -> None:
    """Record the cluster for ``clean``, with the process that made it (its pid and start
    time, so that a reused pid is not taken for it): ``clean`` leaves a cluster alone while
    that process runs (a run going on in another terminal), and removes it once it is gone
    (a killed run; ``cluster up``, whose command ends when the cluster is up)."""
    _registry().mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    _record(cluster_dir).write_text(json.dumps({
        "dir": str(cluster_dir.resolve()), "owner": pid,
        "owner_start": procs.start_time(pid)}))
    # a second Ctrl-C kills its servers at once (the dir as it is now: the process may
    # change its working directory before then)
    resolved = cluster_dir.resolve()
    shutdown.own(_owner_key(resolved), lambda: kill_servers(resolved))


def keep(cluster_dir: Path) -> None:
    """Mark the registered cluster in ``cluster_dir`` as kept: one that ``cluster up``
    finished, which the user keeps on purpose. ``clean`` leaves it alone (its data may be
    the user's) unless asked with ``--kept``; ``cluster down`` takes it down. A ``cluster
    up`` killed before it finished is not kept: ``clean`` removes what it half made."""
    record = _record(cluster_dir)
    try:
        data = json.loads(record.read_text())
    except (OSError, ValueError):
        return
    data["kept"] = True
    tmp = record.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(record)
    shutdown.disown(_owner_key(cluster_dir.resolve()))


def is_kept(cluster_dir: Path) -> bool:
    try:
        return bool(json.loads(_record(cluster_dir).read_text()).get("kept"))
    except (OSError, ValueError, AttributeError):
        return False


def unregister(cluster_dir: Path) -> None:
    _record(cluster_dir).unlink(missing_ok=True)
    shutdown.disown(_owner_key(cluster_dir.resolve()))


def _owner_key(resolved: Path) -> tuple[str, Path]:
    """What the cluster in the dir ``resolved`` is registered with shutdown.py by."""
    return ("cluster", resolved)


def kill_servers(cluster_dir: Path) -> None:
    """SIGKILL to every server of the cluster in ``cluster_dir`` (a PostgreSQL process
    whose working directory is one of its data dirs, found through /proc): a second
    Ctrl-C's, which waits for nothing (shutdown.py)."""
    manifest = load(cluster_dir)
    if manifest is None:
        return
    for pid in processes_in([n.data_dir(cluster_dir) for n in manifest.nodes]):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def live_owner(cluster_dir: Path) -> int | None:
    """The pid of the process that made the cluster in ``cluster_dir``, while it still runs
    and is not this one; None when it is gone, unknown (a record from before owners were
    kept) or this process."""
    try:
        record = json.loads(_record(cluster_dir).read_text())
        pid, start = int(record["owner"]), record.get("owner_start")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if pid == os.getpid() or not procs.is_running(pid, start):
        return None
    return pid


def registered() -> list[Path]:
    reg = _registry()
    if not reg.is_dir():
        return []
    dirs = []
    for entry in sorted(reg.glob("*.json")):
        try:
            dirs.append(Path(json.loads(entry.read_text())["dir"]))
        except (ValueError, KeyError, OSError):
            entry.unlink(missing_ok=True)
    return dirs
