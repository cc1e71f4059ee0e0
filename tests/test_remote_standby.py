"""A standby on an SSH host, in a run: the "host" is sshd in a network namespace of the
tests' own (tests/sshd.py), the standby is made there with pg_basebackup over the veth,
runs as the SSH account, is the synchronous one, and its CPU comes back over SSH."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncrep_lab.store import DB_NAME

from .helpers import cli, cli_here, live_processes
from .sshd import SshdHost, running_sshd

BIN_15 = "/usr/lib/postgresql/15/bin"


@pytest.fixture(scope="module")
def far() -> Iterator[SshdHost]:
    with running_sshd() as host:
        yield host


def _spec(host: SshdHost, known_hosts: str | None = None) -> str:
    return f"""\
name = "remote"

[topology]
pg = "15"
standbys = 2
sync = "c"
clone = "basebackup"
hosts = {{ c = "far" }}

[hosts.far]
address = "{host.address}"
port = {host.port}
user = "{host.user}"
key = "{host.key}"
known_hosts = "{known_hosts or host.known_hosts}"
bin_dir = "{BIN_15}"
data_root = "{host.data_root}"
connect_timeout = 5

[workload]
clients = 2
duration = 3
warmup = 0

[run]
repeats_min = 1
repeats_max = 1

[probes]
probed_repeats = 1
perf = false
flamegraphs = false
sched = false
"""


def test_a_standby_on_an_ssh_host_is_the_sync_one(workdir: Path, far: SshdHost) -> None:
    spec = workdir / "spec.toml"
    spec.write_text(_spec(far))
    result = cli("run", str(spec), "--out", str(workdir / "run"), timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr + far.sshd_log()
    db = sqlite3.connect(workdir / "run" / DB_NAME)
    db.row_factory = sqlite3.Row
    cell = db.execute("select status, error, tps_mean from cells").fetchone()
    assert cell["status"] == "done", cell["error"]
    assert cell["tps_mean"] > 0
    states = {r["standby"]: r["sync_state"] for r in db.execute(
        "select standby, sync_state from replication_samples")}
    assert states.get("c") == "sync" and states.get("b") == "async", states
    nodes = json.loads(db.execute("select nodes_json from clusters").fetchone()[0])
    assert {n["name"] for n in nodes} == {"primary", "b", "c"}
    # the remote node's CPU, read from /proc on its host over SSH
    remote = {r["role"]: r for r in db.execute(
        "select role, processes, user_ms + system_ms as cpu_ms from proc_costs "
        "where node = 'c'")}
    assert "walreceiver" in remote and "startup" in remote, remote
    assert remote["walreceiver"]["cpu_ms"] + remote["startup"]["cpu_ms"] > 0
    settings = json.loads(db.execute("select settings_json from clusters").fetchone()[0])
    assert "c" in settings and "error" not in settings["c"], settings.get("c")
    # nothing of the standby is left on the host, and no server of its account runs
    assert list(Path(far.data_root).iterdir()) == []
    assert live_processes("postgres", far.user) == []
    # the password the cluster used is nowhere in the run folder
    secret_free = subprocess.run(["grep", "-rlE", "password=[^*' ]", str(workdir / "run")],
                                 capture_output=True, text=True, check=False)
    assert secret_free.stdout.strip() == ""


def test_a_host_key_mismatch_is_refused_before_anything_is_made(workdir: Path,
                                                                 far: SshdHost) -> None:
    wrong = workdir / "known_hosts"
    other = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                            str(workdir / "k")], capture_output=True, check=True)
    assert other.returncode == 0
    algorithm, blob = (workdir / "k.pub").read_text().split()[:2]
    wrong.write_text(f"[{far.address}]:{far.port} {algorithm} {blob}\n")
    spec = workdir / "spec.toml"
    spec.write_text(_spec(far, str(wrong)))
    result = cli("run", str(spec), "--out", str(workdir / "run"), timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "mismatch" in result.stderr.lower() or "does not match" in result.stderr.lower()
    assert "fix:" in result.stderr and "Traceback" not in result.stderr
    assert not (workdir / "run").exists()


def test_an_unreachable_host_is_refused_with_the_reason(workdir: Path, far: SshdHost) -> None:
    spec = workdir / "spec.toml"
    spec.write_text(_spec(far).replace(f"port = {far.port}", "port = 2299"))
    result = cli_here("run", str(spec), "--check")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "2299" in result.stderr and "fix:" in result.stderr
