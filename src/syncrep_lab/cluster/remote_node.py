"""Nodes on other hosts, reached over SSH (hosts/): the primary, made there with initdb
(:func:`start_primary`), and standbys, made as described below; and the client's folder
there (:func:`remove_client`).

The standby is a real base backup taken *on that host* from the primary over the
network (``pg_basebackup -h``), configured, and started as the SSH account. It and
the primary authenticate over TCP with a password made for the cluster (``md5`` in
pg_hba, which also accepts a SCRAM-stored password), never ``trust``: a real
network is not this machine's loopback. The password lives in the cluster dir here
(``secret``, mode 0600) and in the standby's own configuration there (0600, in its
data dir).

The tool connects to the standby over TCP for everything it asks (readiness,
settings, the wait-event and replication samplers); the per-process CPU figures of
a remote node come from ``/proc`` on its host, read over SSH before and after each
probed repeat (hosts/snapshots.proc_snapshot).
"""

from __future__ import annotations

import contextlib
import functools
import io
import posixpath
import secrets
import socket
import tarfile
import time
from pathlib import Path
from typing import Any

from syncrep_lab.cluster.template import SINGLE_USER_SETTINGS
from syncrep_lab.errors import ClusterFailure, UserError
from syncrep_lab.hosts import dirs, postmaster, snapshots
from syncrep_lab.hosts.ssh import HostSpec, SshHost
from syncrep_lab.pg.settings import render_conf

SECRET = "secret"


def host_spec(data: dict[str, Any]) -> HostSpec:
    return HostSpec(**data)


def new_password(cluster_dir: Path) -> str:
    """The cluster's password, made once and kept beside the manifest (0600)."""
    path = cluster_dir / SECRET
    if path.exists():
        return path.read_text().strip()
    password = secrets.token_hex(16)
    path.touch(mode=0o600)
    path.write_text(password + "\n")
    return password


def password(cluster_dir: Path) -> str | None:
    try:
        return (cluster_dir / SECRET).read_text().strip()
    except OSError:
        return None


def local_address_towards(address: str, port: int) -> str:
    """This machine's address on the route to ``address`` (what the host sees us as)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect((address, port))
        except OSError as exc:
            raise UserError(f"no route to {address}: {exc.strerror}",
                            "check the host's address in [hosts]") from None
        return str(s.getsockname()[0])


def remote_dir(spec: HostSpec, cluster_dir: Path, node: str) -> str:
    """Where the node's files go on its host: below data_root, named after this
    machine's cluster dir so that two clusters never share one."""
    tag = f"{socket.gethostname()}-{cluster_dir.name}"
    return posixpath.join(spec.data_root, tag, node)


def log_path(data: str) -> str:
    """A node's server log on its host: beside its data dir, named after the node."""
    return posixpath.join(posixpath.dirname(data), f"{posixpath.basename(data)}.log")


def check_version(host: SshHost, bin_dir: str, major: int) -> None:
    out = host.run([posixpath.join(bin_dir, "postgres"), "--version"], timeout=30).stdout
    words = out.split()
    version = words[2] if len(words) >= 3 else out.strip()
    theirs = version.split(".")[0]
    ours = str(major // 10000) if major >= 100000 else f"{major // 10000}.{major // 100 % 100}"
    if not (theirs == ours or version.startswith(ours + ".")):
        raise UserError(f"{host.spec.name} has PostgreSQL {version} in {bin_dir}, the "
                        f"primary runs {ours}: streaming replication needs one major version",
                        f"set bin_dir on {host.spec.name} to a PostgreSQL {ours}, or "
                        "topology.pg to the host's version")


def start_standby(*, spec: HostSpec, cluster_dir: Path, name: str, port: int,
                  primary_address: str, primary_port: int, tool_address: str,
                  secret: str, settings: dict[str, str], version_num: int,
                  deadline: float, prefix: list[str] | None = None) -> str:
    """Base backup, configure and start the standby ``name`` on its host; returns its
    data dir there. Everything it makes is below data_root, removed by stop_standby."""
    bin_dir = spec.bin_dir or ""
    data = remote_dir(spec, cluster_dir, name)
    top = posixpath.dirname(data)
    passfile = posixpath.join(top, f"{name}.pgpass")
    with SshHost(spec) as host:
        check_version(host, bin_dir, version_num)
        host.run(["mkdir", "-p", "-m", "0700", top], timeout=30)
        host.put_text(passfile, f"{primary_address}:{primary_port}:*:postgres:{secret}\n",
                      0o600)
        left = max(30.0, deadline - time.monotonic())
        result = host.run(["env", f"PGPASSFILE={passfile}",
                           posixpath.join(bin_dir, "pg_basebackup"), "-D", data,
                           "-X", "stream", "-c", "fast", "-h", primary_address,
                           "-p", str(primary_port), "-U", "postgres", "-w"],
                          timeout=left, check=False)
        if result.returncode != 0:
            raise ClusterFailure(f"pg_basebackup on {spec.name} for standby {name} failed:\n"
                                 f"{result.stderr.strip()[-1500:]}",
                                 f"check that {spec.name} reaches {primary_address}:"
                                 f"{primary_port} (a firewall, a route)")
        conninfo = (f"host={primary_address} port={primary_port} user=postgres "
                    f"password={secret} application_name={name}")
        own = {"port": str(port), "listen_addresses": "*",
               "unix_socket_directories": top, "unix_socket_permissions": "0700",
               "hot_standby": "on", **settings, "primary_conninfo": conninfo,
               "recovery_target_timeline": "latest"}
        if version_num < 120000:
            recovery = {"standby_mode": "on", "primary_conninfo": conninfo,
                        "recovery_target_timeline": "latest"}
            own = {k: v for k, v in own.items() if k not in recovery}
            host.put_text(posixpath.join(data, "recovery.conf"),
                          render_conf(recovery, "written by syncrep-lab"), 0o600)
        else:
            host.put_text(posixpath.join(data, "standby.signal"), "", 0o600)
        _configure(host, data, own, f"standby {name} of {cluster_dir}", [tool_address],
                   replication=False)
        postmaster.start_postgres(host, bin_dir, data, log_path(data),
                                  prefix=prefix or [])
    return data


def _configure(host: SshHost, data: str, own: dict[str, str], what: str,
               peers: list[str], *, replication: bool) -> None:
    """The node's settings in syncrep-lab.conf (included last), and a pg_hba that lets in
    ``peers`` with the cluster's password (``md5``; for replication too on a primary)."""
    host.put_text(posixpath.join(data, "syncrep-lab.conf"),
                  render_conf(own, f"written by syncrep-lab for {what}"), 0o600)
    host.sh('grep -q "^include \'syncrep-lab.conf\'" "$1/postgresql.conf" || '
            'printf "\\ninclude \'syncrep-lab.conf\'\\n" >> "$1/postgresql.conf"; '
            ': > "$1/postgresql.auto.conf"', data, what="including syncrep-lab.conf")
    databases = ("all", "replication") if replication else ("all",)
    host.put_text(posixpath.join(data, "pg_hba.conf"),
                  "local all all trust\n" + "".join(
                      f"host {db} postgres {a}/32 md5\n" for a in peers for db in databases),
                  0o600)


# $1: the data dir to make, $2: the template's archive beside it, $3: the server binary,
# $4: a file holding the ALTER ROLE that sets the cluster's password, then the settings
# of the single-user run. The archive is unpacked and removed, then the password set in
# single-user mode (no connection can come before it) and its file removed, whatever
# failed.
_FROM_TEMPLATE_SH = r"""
data=$1 archive=$2 postgres=$3 sql=$4
shift 4
rc=0
mkdir -m 0700 "$data" && tar -xzf "$archive" -C "$data" || rc=1
rm -f -- "$archive"
if [ "$rc" = 0 ]; then
  said=$("$postgres" --single -D "$data" "$@" postgres <"$sql" 2>&1) || rc=2
  case "$said" in *ERROR:*|*FATAL:*) rc=2 ;; esac
  [ "$rc" = 0 ] || printf '%s\n' "$said" >&2
fi
rm -f -- "$sql"
exit "$rc"
"""


@functools.lru_cache(maxsize=2)
def template_archive(template: Path) -> bytes:
    """The template data dir (cluster/template.py) as a gzipped tar: 38 MB a data dir,
    under 5 MB packed (most of it a WAL segment of zeros). Packed once a process: a
    template is never changed once made (template_for replaces it whole), and a run of
    several instances or cells puts the same one in every guest primary."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        for entry in sorted(template.iterdir()):
            tar.add(entry, arcname=entry.name)
    return buffer.getvalue()


def _from_template(host: SshHost, spec: HostSpec, template: Path, data: str, bin_dir: str,
                   secret: str) -> None:
    """The primary's data dir made there from this machine's template, its password set:
    for a guest, whose PostgreSQL is this machine's own installation, where ``initdb``
    under emulation took 16 s a primary and this takes a few."""
    archive, sql = f"{data}.tgz", f"{data}.pw.sql"
    host.put_bytes(archive, template_archive(template), 0o600)
    quoted = secret.replace("'", "''")
    host.put_text(sql, f"ALTER ROLE postgres PASSWORD '{quoted}';\n", 0o600)
    result = host.sh(_FROM_TEMPLATE_SH, data, archive, posixpath.join(bin_dir, "postgres"),
                     sql, *SINGLE_USER_SETTINGS,
                     what="making the primary's data dir from the template", timeout=300,
                     check=False)
    if result.returncode != 0:
        step = "unpacking the template" if result.returncode == 1 else "setting its password"
        raise ClusterFailure(f"the primary's data dir on {spec.name} failed at {step}:\n"
                             f"{result.stderr.strip()[-1500:]}",
                             f"run syncrep-lab clean, then the run again; {spec.name} "
                             "may be out of memory or disk")


def start_primary(*, spec: HostSpec, cluster_dir: Path, port: int, secret: str,
                  settings: dict[str, str], initdb_args: list[str], version_num: int,
                  peers: list[str], prefix: list[str] | None = None,
                  template: Path | None = None) -> str:
    """initdb (or, given ``template``, a copy of this machine's template data dir: for a
    guest running this machine's own installation), configure and start the primary on
    its host; returns its data dir there. ``peers``: the addresses its standbys, its
    client and the tool reach it from, let in with the cluster's password. Everything it
    makes is below data_root."""
    bin_dir = spec.bin_dir or ""
    data = remote_dir(spec, cluster_dir, "primary")
    top = posixpath.dirname(data)
    pwfile = posixpath.join(top, "primary.pw")
    with SshHost(spec) as host:
        check_version(host, bin_dir, version_num)
        host.run(["mkdir", "-p", "-m", "0700", top], timeout=30)
        if template is not None:
            _from_template(host, spec, template, data, bin_dir, secret)
        else:
            host.put_text(pwfile, secret + "\n", 0o600)
            try:
                result = host.run([posixpath.join(bin_dir, "initdb"), "-D", data,
                                   f"--pwfile={pwfile}", *initdb_args], timeout=300,
                                  check=False)
            finally:
                host.run(["rm", "-f", "--", pwfile], timeout=30, check=False)
            if result.returncode != 0:
                raise ClusterFailure(f"initdb of the primary on {spec.name} failed:\n"
                                     f"{result.stderr.strip()[-1500:]}",
                                     f"run it by hand on {spec.name} as {spec.user} to see why")
        own = {"port": str(port), "listen_addresses": "*",
               "unix_socket_directories": top, "unix_socket_permissions": "0700",
               "wal_level": "replica", **settings}
        _configure(host, data, own, f"the primary of {cluster_dir}", peers, replication=True)
        postmaster.start_postgres(host, bin_dir, data, log_path(data),
                                  prefix=prefix or [])
    return data


def log_tail(spec: HostSpec, data: str, lines: int = 20) -> str:
    """The end of the remote standby's log, fetched over SSH (for error messages)."""
    log = log_path(data)
    try:
        with SshHost(spec) as host:
            res = host.run(["tail", "-n", str(lines), "--", log], timeout=30, check=False)
    except UserError as exc:
        return f"(its log {log} on {spec.name} could not be read: {exc.cause})"
    return res.stdout.rstrip() or f"(its log {log} on {spec.name} is empty or missing)"


def stop_standby(spec: HostSpec, data: str) -> None:
    """Stop the remote standby and remove everything made for it on its host."""
    with SshHost(spec) as host:
        postmaster.stop_postgres(host, spec.bin_dir or "", data)
        top = posixpath.dirname(data)
        dirs.remove_dir(host, data)
        name = posixpath.basename(data)
        host.run(["rm", "-f", "--", posixpath.join(top, f"{name}.pgpass"),
                  log_path(data)], timeout=30, check=False)
        with contextlib.suppress(UserError):
            host.run(["rmdir", "--", top], timeout=30, check=False)


def snapshot(spec: HostSpec, data: str) -> list[dict[str, Any]]:
    with SshHost(spec) as host:
        return snapshots.proc_snapshot(host, data)


def remove_client(client: dict[str, Any]) -> None:
    """End any pgbench still running in the client's folder on its host, and remove the
    folder (``cluster down``, ``clean``)."""
    spec = host_spec(client["host"])
    with SshHost(spec) as host:
        host.sh('for f in "$1"/run-*/client.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" '
                '2>/dev/null; done; exit 0', client["dir"], what="ending pgbench",
                check=False)
        dirs.remove_dir(host, client["dir"])
        top = posixpath.dirname(client["dir"])
        host.run(["rmdir", "--", top], timeout=30, check=False)
