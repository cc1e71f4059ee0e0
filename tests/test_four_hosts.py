"""The seed's four machines: the primary, standbys b and c and the client each on a host
of its own (sshd in four namespaces on one bridge, tests/sshd.py), syncrep-lab on none
of them. A cell runs with probes and a fault on the host of b: per-role costs and flame
graphs come back from the hosts, each host's load and clock are stored, the client's
host has a clock seven seconds ahead and the fault still lines up with the throughput it
stopped, and nothing is left on any host."""

from __future__ import annotations

import json
import shutil
import sqlite3
import statistics
from collections.abc import Iterator

import pytest

from syncrep_lab.store import DB_NAME

from .helpers import cli, shared_tmp
from .sshd import SshdHost, clock_ahead, perf_through_sudo, running_hosts

BIN_15 = "/usr/lib/postgresql/15/bin"
NAMES = ("a", "s1", "s2", "d")
AHEAD_S = 7  # the client's host's clock against this machine's


@pytest.fixture(scope="module")
def hosts() -> Iterator[dict[str, SshdHost]]:
    with running_hosts(len(NAMES), {NAMES.index("d"): clock_ahead(AHEAD_S)}) as made, \
            perf_through_sudo():
        yield dict(zip(NAMES, made, strict=True))


def test_every_role_on_a_host_of_its_own(hosts: dict[str, SshdHost]) -> None:
    tables = "".join(h.hosts_table(name, BIN_15) + "sudo = true\n\n"
                     for name, h in hosts.items())
    root = shared_tmp("srl-four-")
    (root / "spec.toml").write_text(f"""\
name = "four-machines"

[topology]
pg = "15"
standbys = 2
sync = "1(b,c)"
clone = "basebackup"
hosts = {{ primary = "a", b = "s1", c = "s2", client = "d" }}

{tables}
[workload]
clients = 4
duration = 5
warmup = 0

[matrix]
faults = ["pause-b"]

# b is the synchronous standby and stays connected while stopped: every commit waits
[faults.pause-b]
events = [{{ at = 1.5, action = "pause", target = "b", for = 2 }}]

[run]
repeats_min = 1
repeats_max = 1

[probes]
# every "host" here is this machine: each records all of its CPUs, so the default
# rate keeps four recordings (and this machine's) from crowding two cores
sched = false
# a primary on a host traced by bpftrace there is tests/test_remote_standby.py's and
# tests/test_host_probes.py's: its own repeat here would add some 8 s and no check
anatomy = false
""")
    try:
        res = cli("run", "spec.toml", "--out", "run", timeout=600, cwd=root)
        assert res.returncode == 0, res.stdout + res.stderr
        db = sqlite3.connect(root / "run" / DB_NAME)
        db.row_factory = sqlite3.Row
        assert db.execute("select status from cells").fetchone()[0] == "done"
        states = {r["standby"]: r["sync_state"] for r in db.execute(
            "select standby, sync_state from replication_samples")}
        assert states.get("b") == "sync" and states.get("c") == "potential", states
        # each host read in every repeat, with what runs there
        seen = {r["host"]: r["roles"] for r in db.execute("select host, roles from host_repeats")}
        assert seen == {"a": "primary", "s1": "b", "s2": "c", "d": "client"}
        # and their disks and network, read there: each host's own namespace carries
        # the replication (the hosts are namespaces of this machine, linked over veths)
        disks = {r["host"] for r in db.execute("select host from disk_io")}
        assert {"a", "s1", "s2", "d"} <= disks, disks
        sent = {r["host"]: r["tx"] for r in db.execute(
            "select host, sum(tx_bytes) as tx from net_io where host != '' group by host")}
        assert set(sent) == {"a", "s1", "s2", "d"} and sent["a"] > 0, sent
        # per-role costs counted on the hosts: the sync walsender wakes the committing
        # backends (kill), the standbys' walreceivers write the WAL they receive
        costs = {(r["node"], r["role"]): json.loads(r["syscalls_json"]) for r in db.execute(
            "select node, role, syscalls_json from costs")}
        assert costs[("primary", "walsender:b")].get("kill", 0) > 0, costs
        for standby in ("b", "c"):
            calls = costs[(standby, "walreceiver")]
            assert calls.get("write", 0) + calls.get("pwrite64", 0) > 0, calls
        graphs = {(r["node"], r["role"]) for r in db.execute(
            "select node, role from flamegraphs")}
        # the workload's backends on a, born after the first snapshot, named by a look
        # midway (once in a suite, a and s1 had no graph at all: what the probes' rows
        # said of each host is in the message)
        wanted = {("primary", "walsender:b"), ("b", "walreceiver"), ("c", "walreceiver"),
                  ("primary", "backend"), ("*a", "all"), ("*s1", "all"), ("*s2", "all")}
        # what the flame graph probes said, first (a long message is cut at its end)
        assert wanted <= graphs, ([tuple(r) for r in db.execute(
            "select probe, status, reason from probes where probe like 'flamegraphs%'")],
            wanted - graphs, graphs)
        # the client's host is AHEAD_S ahead, measured so; the others are this clock
        offsets = {r["host"]: r["clock_offset_ms"] for r in db.execute(
            "select host, clock_offset_ms from host_repeats")}
        assert abs(offsets["d"] - AHEAD_S * 1000) < 500, offsets
        assert all(abs(offsets[h]) < 500 for h in ("a", "s1", "s2")), offsets
        # one timeline: the seconds whose commits all waited for the paused b lie
        # between the pause and the continue as the fault driver stamped them here
        events = {r["detail"].split(" ")[0]: r["t_s"] for r in db.execute(
            "select t_s, detail from fault_events where kind = 'fault' and node = 'b'")}
        # stamped when they took effect on s1, through SSH: on a loaded machine the pause
        # came 1.1 s after its 1.5 s (a suite beside three others), always inside its
        # window (1.5 to 3.5 s) and before the continue
        assert 1.0 <= events["pause"] <= 3.5 and events["continue"] > events["pause"], events
        tps = {int(r["t_s"]): r["tps"] for r in db.execute("select t_s, tps from samples")}
        normal = statistics.median(v for k, v in tps.items() if k <= events["pause"]
                                   or k - 1 >= events["continue"] + 0.5)
        stopped = [k for k, v in tps.items() if v < 0.2 * normal]
        assert stopped, tps
        for second in stopped:  # second k covers (k-1, k] of the client's timeline
            assert events["pause"] - 0.5 <= second - 1 and second <= events["continue"] + 0.5, \
                (events, tps)
        assert [r[0] for r in db.execute("select count(*) from durability where ok = 0")] == [0]
        argv = next((root / "run").glob("artifacts/cell-*/repeat-01/pgbench.argv")).read_text()
        assert f"host={hosts['a'].address} " in argv  # pgbench on d, to the primary on a
        for host in hosts.values():
            assert list((host.workdir / "data").iterdir()) == []
        for host in hosts.values():
            assert host.running("postgres") == [] and host.running("pgbench") == []
            assert host.running("perf") == []
    finally:
        shutil.rmtree(root, ignore_errors=True)
