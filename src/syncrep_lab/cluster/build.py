"""``cluster up``: one primary and N streaming standbys, verified, or nothing at all.

The order matters for both speed and safety:

1. every check that can fail on bad input runs before anything is written;
2. the manifest is written (and the dir registered for ``clean``) before the
   first server starts, so an interruption at any later point leaves a dir
   that ``cluster down`` or ``clean`` can remove;
3. nodes are copies of a cached template (see template.py), or base backups;
4. the primary starts, then all standbys at once;
5. ``up`` returns only when the primary's ``pg_stat_replication`` shows every
   standby streaming with the ``sync_state`` the spec implies, within a bounded
   wait; otherwise everything started is stopped and removed.
"""

from __future__ import annotations

import functools
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syncrep_lab import shutdown
from syncrep_lab.cluster import server, slow_flush
from syncrep_lab.cluster.manifest import MANIFEST, Manifest, Node, load, register
from syncrep_lab.cluster.ready import manifest_log_tail, wait_ready, wait_replication
from syncrep_lab.cluster.teardown import remove_cluster
from syncrep_lab.cluster.template import Copying, finish_copies, start_copies, template_for
from syncrep_lab.errors import ClusterFailure, UserError
from syncrep_lab.pg import sync_names
from syncrep_lab.pg.admin import admin_connection
from syncrep_lab.pg.installations import Installation, reachable_by, resolve
from syncrep_lab.pg.settings import ResolvedSettings, conf_value, render_conf, resolve_settings
from syncrep_lab.pg.sync_names import check_standby_names, check_sync, default_standby_names
from syncrep_lab.placement import layout as placing
from syncrep_lab.placement.layout import Layout
from syncrep_lab.runas import Account, make_dir_for, server_account, unreachable_ancestor

DEFAULT_SYNC = "1(b,c)"
SOCKET_PATH_MAX = 107  # sizeof(sun_path) - 1 on Linux

Progress = Callable[[str], None]


@dataclass
class UpOptions:
    dir: Path
    pg: str | None = None
    standbys: int = 2
    names: list[str] | None = None
    sync: str | None = None  # None: the seed's '1(b,c)' when there are standbys
    tcp: bool = False
    port: int | None = None
    settings: dict[str, str] = field(default_factory=dict)
    # a node's own settings over ``settings`` ([nodes.NAME] of a spec)
    node_settings: dict[str, dict[str, str]] = field(default_factory=dict)
    # a node whose WAL flushes are made slow: the µs each waits (cluster/slow_flush.py)
    flush_delay_us: dict[str, int] = field(default_factory=dict)
    profile: str = "benchmark"
    clone: str = "copy"  # copy | basebackup
    timeout: float = 60.0
    layout: Layout | None = None  # cpusets, numactl, namespaces and links
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)  # a node -> its SSH host
    client_host: dict[str, Any] | None = None  # the SSH host the client (pgbench) runs on
    # ports other clusters of the run hold on SSH hosts: free here (nothing binds them on
    # this machine), so a port picked here could be one of them (instances > 1)
    taken_ports: frozenset[int] = frozenset()


def standby_names(opts: UpOptions) -> list[str]:
    if opts.names:
        return check_standby_names(opts.names, opts.standbys, "--names")
    if not 0 <= opts.standbys <= 24:
        raise UserError(f"--standbys {opts.standbys}: must be 0 to 24", "choose 0 to 24")
    return check_standby_names(default_standby_names(opts.standbys), opts.standbys, "--names")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def choose_ports(count: int, first: int | None,
                 taken: frozenset[int] = frozenset()) -> list[int]:
    if first is not None:
        ports = list(range(first, first + count))
        if not all(1024 <= p <= 65535 for p in ports):
            raise UserError(f"--port {first}: ports {ports[0]}-{ports[-1]} are not all in "
                            "1024-65535", "choose another --port")
        busy = [p for p in ports if not _port_free(p)]
        if busy:
            raise UserError(f"port {busy[0]} is already in use on 127.0.0.1",
                            "choose another --port, or leave it out to pick free ports")
        return ports
    chosen: list[int] = []
    while len(chosen) < count:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in chosen and port not in taken:
            chosen.append(port)
    return chosen


def check_dir(cluster_dir: Path, account: Account) -> bool:
    """Refuse a dir that is not ours or not empty; True if we must create it."""
    if cluster_dir.exists() and not cluster_dir.is_dir():
        raise UserError(f"--dir {cluster_dir} exists and is not a directory",
                        "choose another --dir")
    if cluster_dir.is_dir():
        existing = load(cluster_dir)
        if existing is not None:
            running = [n.name for n in existing.nodes
                       if server.postmaster_pid(n.data_dir(cluster_dir)) is not None]
            state = f"running ({', '.join(running)})" if running else "not running"
            raise UserError(
                f"{cluster_dir} already holds a syncrep-lab cluster, {state}",
                f"syncrep-lab cluster down --dir {cluster_dir}, or choose another --dir",
            )
        if any(cluster_dir.iterdir()):
            raise UserError(
                f"{cluster_dir} is not empty and was not made by syncrep-lab; "
                "nothing in it is touched",
                "choose an empty or new --dir",
            )
    sock = cluster_dir.resolve() / "sock" / ".s.PGSQL.65535.lock"
    if len(str(sock).encode()) > SOCKET_PATH_MAX:
        raise UserError(
            f"--dir {cluster_dir} is too long for a unix socket path "
            f"({len(str(sock).encode())} > {SOCKET_PATH_MAX} bytes)",
            "choose a shorter --dir",
        )
    parent = cluster_dir.resolve().parent
    while not parent.exists():
        parent = parent.parent
    blocked = unreachable_ancestor(account, parent)
    if blocked is not None:
        raise UserError(
            f"the server account {account.name} cannot reach {cluster_dir} "
            f"(no search permission on {blocked})",
            f"choose a --dir outside {blocked}, e.g. under /var/tmp",
        )
    if not os.access(parent, os.W_OK):
        raise UserError(f"cannot create {cluster_dir}: {parent} is not writable",
                        "choose a --dir you can write to")
    return not cluster_dir.exists()


def _write(account: Account, path: Path, text: str, mode: int = 0o600) -> None:
    path.write_text(text)
    path.chmod(mode)
    if not account.is_self:
        os.chown(path, account.uid, account.gid)


HBA = """# syncrep-lab: trust only on this cluster's own socket dir and on loopback.
local   all          all                 trust
local   replication  all                 trust
host    all          all   127.0.0.1/32  trust
host    replication  all   127.0.0.1/32  trust
"""


# Settings of recovery.conf before 12 (not server settings there: --describe-config
# does not know them, and postgresql.conf may not hold them)
RECOVERY_CONF = ("recovery_min_apply_delay",)


def recovery_conf_settings(values: dict[str, str], version_num: int) -> dict[str, str]:
    """Those of ``values`` that go into a standby's recovery.conf on this version."""
    if version_num >= 120000:
        return {}
    return {k: v for k, v in values.items() if k in RECOVERY_CONF}


def configure_node(
    account: Account, manifest: Manifest, node: Node, inst: Installation, values: dict[str, str],
    recovery: dict[str, str] | None = None,
) -> None:
    """Write ``node``'s configuration: ``values`` into syncrep-lab.conf, and before 12 a
    standby's recovery.conf with ``recovery`` (recovery_conf_settings) in it."""
    data = node.data_dir(manifest.dir)
    layout = manifest.placed()
    subnets = layout.subnets() if layout is not None else []
    listen = "127.0.0.1" if manifest.tcp else "''"
    if subnets:
        # Alone in its namespace, a node has only its links' addresses and loopback.
        listen = "*"
    remote_hosts = sorted({n.host["address"] for n in manifest.nodes if n.host is not None}
                          | ({manifest.client["host"]["address"]} if manifest.client else set()))
    if node.role == "primary" and remote_hosts:
        from syncrep_lab.cluster.remote_node import local_address_towards

        facing = sorted({local_address_towards(a, 5432) for a in remote_hosts})
        listen = ",".join(([] if listen == "''" else [listen]) + facing)
    own = {
        "port": str(node.port),
        "listen_addresses": listen,
        "unix_socket_directories": str(manifest.sock_dir),
        # trust on the socket: only its owner (the server account) and root may connect
        "unix_socket_permissions": "0700",
        "wal_level": "replica",
        **values,
    }
    if node.role == "primary":
        own["synchronous_standby_names"] = manifest.sync
    header = (f"written by syncrep-lab for node {node.name} ({node.role}) of {manifest.dir}\n"
              "settings here override postgresql.conf, which includes this file last")
    _write(account, data / "syncrep-lab.conf", render_conf(own, header))
    conf = data / "postgresql.conf"
    text = conf.read_text()
    if "include 'syncrep-lab.conf'" not in text:
        _write(account, conf, text + "\ninclude 'syncrep-lab.conf'\n")
    remote_lines = "".join(f"host    {db:<11}  postgres  {a}/32  md5\n"
                           for a in remote_hosts for db in ("all", "replication"))
    _write(account, data / "pg_hba.conf", HBA + "".join(
        f"host    {db:<11}  all   {net}  trust\n"
        for net in subnets for db in ("all", "replication")) + remote_lines)
    # pg_basebackup -R (and old ALTER SYSTEMs) put primary_conninfo into
    # postgresql.auto.conf, which would override ours and drop application_name.
    auto = data / "postgresql.auto.conf"
    if auto.exists():
        kept = [ln for ln in auto.read_text().splitlines()
                if not re.match(r"\s*(primary_conninfo|primary_slot_name)\s*=", ln)]
        _write(account, auto, "\n".join(kept) + "\n")
    if node.role == "standby":
        conninfo = (f"{_primary_from_here(manifest, node.name)} "
                    f"port={manifest.primary.port} user=postgres application_name={node.name}")
        if inst.version.num >= 120000:
            _write(account, data / "standby.signal", "")
            with open(data / "syncrep-lab.conf", "a") as fh:
                fh.write(f"primary_conninfo = '{conninfo}'\n")
                fh.write("recovery_target_timeline = 'latest'\n")
        else:
            _write(account, data / "recovery.conf",
                   "standby_mode = 'on'\n"
                   f"primary_conninfo = '{conninfo}'\n"
                   "recovery_target_timeline = 'latest'\n"
                   + "".join(f"{k} = {conf_value(v)}\n" for k, v in (recovery or {}).items()))


def _primary_from_here(manifest: Manifest, standby: str) -> str:
    """How a standby on this machine reaches the primary (``host=...``, and on an SSH
    host the cluster's password): across its link when the nodes live in namespaces."""
    where = manifest.primary.host
    if where is not None:
        from syncrep_lab.cluster.remote_node import password

        return f"host={where['address']} password={password(manifest.dir)}"
    layout = manifest.placed()
    address = layout.address("primary", standby) if layout is not None else None
    return f"host={address or ('127.0.0.1' if manifest.tcp else manifest.sock_dir)}"


def _base_backup(account: Account, inst: Installation, manifest: Manifest, node: Node) -> None:
    dest = node.data_dir(manifest.dir)
    where = manifest.primary.host
    env = None
    if where is not None:  # the primary on an SSH host: its address, the password apart
        from syncrep_lab.cluster.remote_node import password

        env = {**os.environ, "PGPASSWORD": password(manifest.dir) or ""}
    result = subprocess.run(
        [str(inst.program("pg_basebackup")), "-D", str(dest), "-X", "stream", "-c", "fast",
         "-h", str(manifest.sock_dir) if where is None else str(where["address"]),
         "-p", str(manifest.primary.port), "-U", "postgres", "--no-sync"],
        capture_output=True, text=True, timeout=600, check=False, env=env,
        preexec_fn=shutdown.die_with_parent(signal.SIGKILL),  # not writing on after a kill
    )
    if result.returncode != 0:
        raise ClusterFailure(f"pg_basebackup for {node.name} failed:\n{result.stderr.strip()}",
                             "check the primary's log in the cluster dir")
    if not account.is_self:
        subprocess.run(["chown", "-R", f"{account.uid}:{account.gid}", str(dest)], check=True)
    dest.chmod(0o700)


def _remote_primary(manifest: Manifest, inst: Installation, values: dict[str, str],
                    deadline: float, say: Progress) -> None:
    """The primary on an SSH host: made there with initdb (the cluster's password set for
    ``postgres``), letting in this machine (the tool, the standbys here, the client
    here) and every other host of the cluster with that password."""
    from syncrep_lab.cluster import remote_node
    from syncrep_lab.cluster.template import initdb_args

    node = manifest.primary
    assert node.host is not None
    spec = remote_node.host_spec(node.host)
    secret = remote_node.new_password(manifest.dir)
    others = {n.host["address"] for n in manifest.standbys if n.host is not None}
    if manifest.client is not None:
        others.add(manifest.client["host"]["address"])
    peers = sorted({remote_node.local_address_towards(spec.address, spec.port)} | others)
    node.remote_data = remote_node.remote_dir(spec, manifest.dir, node.name)
    manifest.save()  # before anything is made there, for the teardown
    # a guest runs this machine's own installation (run/guests.py), so this machine's
    # template is its data dir too: copied over SSH in a few seconds, where initdb under
    # emulation took 16. Any other host's installation is its own: initdb there.
    template = template_for(inst, server_account()) if spec.guest else None
    say(f"the primary on {spec.name} ({spec.endpoint}): "
        + ("this machine's template copied over SSH" if template else "initdb over SSH"))
    data = remote_node.start_primary(
        spec=spec, cluster_dir=manifest.dir, port=node.port, secret=secret,
        settings={**values, "synchronous_standby_names": manifest.sync},
        initdb_args=initdb_args(inst), version_num=inst.version.num, peers=peers,
        prefix=manifest.on_host(node.name), template=template)
    wait_ready(manifest.admin_conninfo(node), None,
               functools.partial(remote_node.log_tail, spec, data), deadline,
               f"the primary on {spec.name}")


def _remote_standbys(manifest: Manifest, inst: Installation, values: dict[str, dict[str, str]],
                     deadline: float, say: Progress) -> None:
    """The standbys placed on SSH hosts: the primary gets the cluster's password (which the
    client on an SSH host uses too), each standby is made and started on its host
    (cluster/remote_node.py)."""
    from psycopg import sql

    from syncrep_lab.cluster import remote_node

    secret = remote_node.new_password(manifest.dir)
    # local: the standbys named in synchronous_standby_names do not exist yet, and this
    # commit must not wait for them
    with admin_connection(manifest.admin_conninfo(manifest.primary),
                          what="the primary") as conn:
        conn.execute(sql.SQL("alter role postgres password {}").format(sql.Literal(secret)))
    for node in manifest.standbys:
        if node.host is None:
            continue
        spec = remote_node.host_spec(node.host)
        address = remote_node.local_address_towards(spec.address, spec.port)
        where = manifest.primary.host  # a primary on a host is reached at its own address
        primary_address = address if where is None else str(where["address"])
        node.remote_data = remote_node.remote_dir(spec, manifest.dir, node.name)
        manifest.save()  # before anything is made there, for the teardown
        say(f"standby {node.name} on {spec.name} ({spec.endpoint}): base backup over SSH")
        data = remote_node.start_standby(
            spec=spec, cluster_dir=manifest.dir, name=node.name, port=node.port,
            primary_address=primary_address, primary_port=manifest.primary.port,
            tool_address=address, secret=secret, settings=values[node.name],
            version_num=inst.version.num, deadline=deadline,
            prefix=manifest.on_host(node.name))
        wait_ready(manifest.admin_conninfo(node), None,
                   functools.partial(remote_node.log_tail, spec, data), deadline,
                   f"standby {node.name} on {spec.name}")


def describe(layout: Layout) -> str:
    parts = []
    for name, launch in [*layout.nodes.items(), *layout.hosts.items()]:
        bits = [f"cpus {','.join(map(str, launch.cpus))}" if launch.cpus else "",
                f"numa {launch.numa}" if launch.numa != "default" else "",
                "own namespace" if launch.netns else ""]
        if any(bits):
            parts.append(f"{name}: {' '.join(b for b in bits if b)}")
    parts += [f"{p.node}/{p.role} on {','.join(map(str, p.cpus))}" for p in layout.pins]
    parts += [f"{q.node}/{q.role} held to {q.share:g} CPU" for q in layout.quotas]
    return "; ".join(parts) or "nothing"


def _node_values(opts: UpOptions, inst: Installation, nodes: list[Node],
                 common: ResolvedSettings, say: Progress,
                 ) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """Each node's settings (the common ones, then its own, each checked against what
    this server knows) and, before 12, what goes into its recovery.conf. A node whose
    flushes are made slow gets fsync on where the profile turned it off: with fsync off
    a server never flushes, and the delay would never be paid (a user's own fsync = off
    is refused by the spec's check, plan/checks.py)."""
    values: dict[str, dict[str, str]] = {}
    recovery: dict[str, dict[str, str]] = {}
    for node in nodes:
        own = opts.node_settings.get(node.name, {})
        # a primary has no recovery.conf: there such a setting is refused as unknown
        recovery[node.name] = (recovery_conf_settings(own, inst.version.num)
                               if node.role == "standby" else {})
        if recovery[node.name] and node.host is not None:
            raise UserError(f"{node.name}: {', '.join(recovery[node.name])} is recovery.conf's "
                            f"on PostgreSQL {inst.version}, which a standby on an SSH host "
                            "is not given", "run that standby here, or on PostgreSQL 12 or "
                            "later")
        own = {k: v for k, v in own.items() if k not in recovery[node.name]}
        mine = dict(common.values) if not own else resolve_settings(
            inst.program("postgres"), opts.profile, len(nodes), {**opts.settings, **own}).values
        if node.flush_delay_us and mine.get("fsync", "on").lower() in ("off", "false"):
            mine["fsync"] = "on"
            say(f"{node.name}: fsync on (the {opts.profile} profile's off would never "
                f"flush, and {node.name}'s flushes are {node.flush_delay_us} µs slower)")
        values[node.name] = mine
    return values, recovery


def up(opts: UpOptions, progress: Progress | None = None) -> Manifest:
    say = progress or (lambda _msg: None)
    account = server_account()
    inst = resolve(opts.pg)
    for program in ("postgres", "initdb", *(["pg_basebackup"] if opts.clone == "basebackup"
                                             else [])):
        inst.program(program)  # a UserError naming what is missing
    names = standby_names(opts)
    sync_text = opts.sync if opts.sync is not None else (DEFAULT_SYNC if names else "")
    spec, rendered = check_sync(sync_text, names, inst.version.num)
    if opts.clone not in ("copy", "basebackup"):
        raise UserError(f"--clone {opts.clone!r}", "use copy or basebackup")
    if not 0 < opts.timeout < math.inf:  # nan and inf would make every wait unbounded
        raise UserError(f"--timeout {opts.timeout}: must be positive", "give seconds, e.g. 60")
    cluster_dir = opts.dir.expanduser().absolute()
    must_create = check_dir(cluster_dir, account)
    inst = reachable_by(inst, account)
    settings = resolve_settings(inst.program("postgres"), opts.profile, 1 + len(names),
                                opts.settings)
    ports = choose_ports(1 + len(names), opts.port, opts.taken_ports)
    nodes = [Node("primary", "primary", ports[0], host=opts.hosts.get("primary"),
                  flush_delay_us=opts.flush_delay_us.get("primary", 0))]
    nodes += [Node(n, "standby", p, host=opts.hosts.get(n),
                   flush_delay_us=opts.flush_delay_us.get(n, 0))
              for n, p in zip(names, ports[1:], strict=True)]
    values, recovery = _node_values(opts, inst, nodes, settings, say)
    manifest = Manifest(
        dir=cluster_dir, bin_dir=str(inst.bin_dir), version=str(inst.version), sync=rendered,
        tcp=opts.tcp, nodes=nodes, settings=settings.values,
        dropped_settings=settings.dropped, profile=opts.profile, clone=opts.clone,
        layout=opts.layout.to_json() if opts.layout is not None else None,
    )
    if opts.client_host is not None:
        from syncrep_lab.cluster import remote_node

        client_spec = remote_node.host_spec(opts.client_host)
        manifest.client = {"host": opts.client_host,
                           "dir": remote_node.remote_dir(client_spec, cluster_dir, "client")}
    expected = sync_names.expect(spec, names)

    deadline = time.monotonic() + opts.timeout
    copying: Copying = []
    spawned: list[subprocess.Popen[bytes]] = []
    try:
        if must_create:
            make_dir_for(account, cluster_dir, 0o755)
        elif not account.is_self:
            os.chown(cluster_dir, account.uid, account.gid)
        manifest.save()
        register(cluster_dir)
        if opts.layout is not None:
            say("placing: " + describe(opts.layout))
            try:
                placing.apply(opts.layout)
            finally:  # the cpuset paths made, for the teardown
                manifest.layout = opts.layout.to_json()
                manifest.save()
        make_dir_for(account, manifest.sock_dir, 0o755)
        say(f"PostgreSQL {inst.version}: preparing {len(nodes)} data dirs")
        template = template_for(inst, account)
        copies = [n for n in (nodes if opts.clone == "copy" else nodes[:1]) if n.host is None]
        for node in copies:
            make_dir_for(account, node.data_dir(cluster_dir))
        # Creating files is what costs here (about 1000 per data dir). The primary's
        # copy runs first alongside one standby's; the rest overlap its start-up.
        first, rest = copies[:2], copies[2:]
        copying = start_copies(account, template, [n.data_dir(cluster_dir) for n in first])
        finish_copies(copying[:1])
        copying = copying[1:] + start_copies(account, template,
                                             [n.data_dir(cluster_dir) for n in rest])
        postgres = inst.program("postgres")
        if manifest.primary.host is not None:
            _remote_primary(manifest, inst, values["primary"], deadline, say)
        else:
            configure_node(account, manifest, manifest.primary, inst, values["primary"])
            say("starting the primary")
            primary_proc = server.spawn(account, postgres,
                                        manifest.primary.data_dir(cluster_dir),
                                        manifest.primary.log_file(cluster_dir),
                                        manifest.launch("primary"),
                                        slow_flush.environment(manifest.primary.flush_delay_us))
            spawned.append(primary_proc)
            wait_ready(manifest.admin_conninfo(manifest.primary), primary_proc,
                       manifest.primary.log_file(cluster_dir), deadline, "the primary")
            if manifest.primary.flush_delay_us:
                slow_flush.check_loaded(primary_proc.pid, "the primary")
        if opts.hosts or opts.client_host is not None:
            _remote_standbys(manifest, inst, values, deadline, say)
        say(f"starting {len(manifest.standbys)} standbys")
        procs = {}
        for node in manifest.standbys:
            if node.host is not None:
                continue
            if opts.clone == "basebackup":
                _base_backup(account, inst, manifest, node)
            else:  # each standby starts as soon as its own copy is complete
                mine = [c for c in copying if c[0] == node.data_dir(cluster_dir)]
                finish_copies(mine)
            configure_node(account, manifest, node, inst, values[node.name],
                           recovery[node.name])
            procs[node.name] = server.spawn(account, postgres, node.data_dir(cluster_dir),
                                            node.log_file(cluster_dir),
                                            manifest.launch(node.name),
                                            slow_flush.environment(node.flush_delay_us))
            spawned.append(procs[node.name])
        for node in manifest.standbys:
            if node.host is not None:
                continue
            wait_ready(manifest.admin_conninfo(node), procs[node.name],
                              node.log_file(cluster_dir), deadline, f"standby {node.name}")
            if node.flush_delay_us:
                slow_flush.check_loaded(procs[node.name].pid, f"standby {node.name}")
        say("waiting for " + ", ".join(f"{k}={v}" for k, v in expected.states.items()))
        wait_replication(manifest.admin_conninfo(manifest.primary), expected, deadline,
                         manifest_log_tail(manifest))
        manifest.state = "up"
        manifest.save()
        return manifest
    except BaseException:
        for _, proc in copying:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        # A postmaster just spawned may not have written postmaster.pid yet, so
        # remove_cluster could not find it: stop our own children directly first.
        server.stop_children(spawned)
        if (cluster_dir / MANIFEST).exists():
            remove_cluster(cluster_dir, keep_dir=not must_create)
        elif must_create and cluster_dir.exists():
            shutil.rmtree(cluster_dir, ignore_errors=True)
        raise
