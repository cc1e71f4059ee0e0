"""A standby on an SSH host, in a run: the "host" is sshd in a network namespace of the
tests' own (tests/sshd.py), the standby is made there with pg_basebackup over the veth,
runs as the SSH account, is the synchronous one, and its CPU comes back over SSH. And the
client on that host: pgbench runs there against the primary here."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from syncrep_lab.probes import standby_anatomy
from syncrep_lab.store import DB_NAME

from .helpers import cli, cli_here, machine_wide
from .sshd import SshdHost, bpftrace_through_sudo, running_sshd
from .test_standby_anatomy import SUM_WITHIN

BIN_15 = "/usr/lib/postgresql/15/bin"


@pytest.fixture(scope="module")
def far() -> Iterator[SshdHost]:
    with running_sshd() as host:
        yield host


def _spec(host: SshdHost, known_hosts: str | None = None,
          placed: str = 'sync = "c"\nclone = "basebackup"\nhosts = { c = "far" }',
          probed: bool = False, anatomy: bool = False, sudo: bool = False,
          duration: int = 2, standby_anatomy: bool = False) -> str:
    """One measured repeat; the probed repeat (the standbys' sync states are sampled
    there) and the commit anatomy (a repeat of its own after it) only where a test
    reads them; ``sudo``: the account runs bpftrace with sudo -n on the host. Repeats of
    2 s: what is read of them (a sync state sampled, CPU read on the host, rows counted)
    needs no more; a test that counts seconds of progress asks for more."""
    return f"""\
name = "remote"

[topology]
pg = "15"
standbys = 2
{placed}

{host.hosts_table("far", BIN_15, known_hosts)}{"sudo = true" if sudo else ""}
[workload]
clients = 2
duration = {duration}
warmup = 0

[run]
repeats_min = 1
repeats_max = 1

[probes]
probed_repeats = {int(probed or anatomy)}
perf = false
flamegraphs = false
sched = false
anatomy = {str(anatomy).lower()}
standby_anatomy = {str(standby_anatomy).lower()}
"""


def _done_run(workdir: Path, far: SshdHost, spec_text: str) -> sqlite3.Connection:
    """The store of a run of ``spec_text`` whose one cell is done."""
    spec = workdir / "spec.toml"
    spec.write_text(spec_text)
    result = cli("run", str(spec), "--out", str(workdir / "run"), timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr + far.sshd_log()
    db = sqlite3.connect(workdir / "run" / DB_NAME)
    db.row_factory = sqlite3.Row
    cell = db.execute("select status, error, tps_mean from cells").fetchone()
    assert cell["status"] == "done", cell["error"]
    assert cell["tps_mean"] > 0
    return db


def test_a_standby_on_an_ssh_host_is_the_sync_one(workdir: Path, far: SshdHost) -> None:
    """c on the host is the sync standby; in the commit anatomy's repeat, the wait for
    it is split, its walreceiver traced there (through sudo -n) on the host's clock."""
    with bpftrace_through_sudo():
        db = _done_run(workdir, far, _spec(far, anatomy=True, sudo=True,
                                           standby_anatomy=True))
    _the_standby_half_on_the_host(db, workdir / "run")
    assert far.running("bpftrace") == [] and far.running("sudo") == []
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
    assert far.running("postgres") == []
    # the password the cluster used is nowhere in the run folder
    secret_free = subprocess.run(["grep", "-rlE", "password=[^*' ]", str(workdir / "run")],
                                 capture_output=True, text=True, check=False)
    assert secret_free.stdout.strip() == ""


# The namespace's clock is this kernel's: the true offset is 0. Measured in five runs:
# -4.2 to -7.6 µs, spread ±7 to ±12 µs, from the fastest tenth of 1,000 to 2,000 round
# trips, each of 113 to 151 µs of delay at most. Where the trips are joined right, each
# fast one's offset is off by at most half its delay (its way out less its way back,
# halved), so the estimate is within half the fastest tenth's delay (asserted too);
# 30 µs, four times the most measured, leaves room for a loaded machine's wake-ups and
# still fails the first pass's bound taken for the offset (43 µs here: early by a
# transit and a write) or a wrong join (off by a batch's wait, hundreds of µs).
OFFSET_WITHIN_NS = 30_000
SHIFT_NS = 3 * 3600 * 10**9 + 123_456_789  # another machine's boot clock: hours apart


def _what_the_join_did(kept: Path, clock: dict[str, Any]) -> str | None:
    """The join replayed on the repeat's kept events, and where its commits missed their
    wait (probes/standby_anatomy.misjoined, at any miss)."""
    text, host = ((kept / f).read_text() for f in ("anatomy.json", "standby.json"))
    joined, _ = standby_anatomy.split(standby_anatomy.events(text + "\n" + host),
                                      clock["attached_ns"])
    return standby_anatomy.misjoined(joined, beyond=0.0)


def _the_standby_half_on_the_host(db: sqlite3.Connection, run: Path) -> None:
    """The wait for c split in the anatomy's repeat: every part, their sum within 15 %
    of the wait, the clock offset estimated near 0; the same recorded events with the
    standby's clock moved by hours give the same parts; nothing left on the host."""
    said = dict(db.execute("select status, reason from probes "
                           "where probe = 'standby_anatomy'").fetchall())
    assert set(said) == {"ran"} and "assuming" in said["ran"] and "far" in said["ran"], said
    repeat = db.execute("select id, stdout_path from repeats where probed = 2").fetchone()
    rows = {(r["who"], r["component"]): r for r in db.execute(
        "select who, component, count, total from anatomy where repeat_id = ?",
        (repeat["id"],))}
    half = {c: (r["count"], r["total"]) for (who, c), r in rows.items() if who == "standby:c"}
    whole_n, whole = half.pop(standby_anatomy.WHOLE)
    half.pop(standby_anatomy.SYNC, None)
    # under `on`, no replay; the flush a part where the standby syncs its WAL
    assert set(half) - {"flush"} == {"send", "transit_out", "queue", "write", "reply",
                                      "transit_back", "reply_handling"}, half
    assert whole_n >= 0.8 * rows[("backend", "standby_wait")]["count"] > 50, (
        said, {k: tuple(r) for k, r in rows.items()})
    assert all(n == whole_n for n, _ in half.values()), half
    # the estimate, against the true offset 0
    kept = (run / repeat["stdout_path"]).parent
    clock = json.loads((kept / "standby-clock.json").read_text())
    summed = sum(t for _, t in half.values())
    # The transits are split on the estimated offset, and a part that comes out negative
    # counts as 0 (standby_anatomy): an offset wrong by e can add up to e to a commit's
    # sum that way, never take it off. So beside the local check's 15 %, each commit may
    # carry the estimate's error (here the true offset is 0: the estimate is the error),
    # which grows with the machine's load (16 % over, seen beside three PostgreSQL builds)
    slack = SUM_WITHIN * whole + whole_n * abs(clock["offset_ns"])
    assert -SUM_WITHIN * whole <= summed - whole <= slack, (
        _what_the_join_did(kept, clock), summed, whole, half, clock)
    assert abs(clock["offset_ns"]) <= min(OFFSET_WITHIN_NS, clock["delay_ns"] / 2), clock
    assert clock["fastest"] >= 5 and clock["spread_ns"] <= OFFSET_WITHIN_NS, clock
    # the same events, the standby's clock hours ahead: the same parts, the offset moved
    text, host = ((kept / f).read_text() for f in ("anatomy.json", "standby.json"))
    again = standby_anatomy.standby_rows(text, "c", clock["attached_ns"], host)
    moved = standby_anatomy.standby_rows(text, "c", clock["attached_ns"],
                                         _clock_moved(host, SHIFT_NS))
    assert again[2] is not None and moved[2] is not None
    assert moved[2].offset - again[2].offset == pytest.approx(SHIFT_NS, abs=2), moved[2]
    assert again[2].offset == clock["offset_ns"]
    first = {r.component: (r.count, r.total) for r in again[0]}
    assert first.keys() == {r.component for r in moved[0]}
    for r in moved[0]:
        count, total = first[r.component]
        assert r.count == count and abs(r.total - total) <= 2 * count, (r, first)


def _clock_moved(printed: str, shift: int) -> str:
    """What bpftrace printed on the standby's host, every event's time moved by
    ``shift`` ns (the third word of its R, W, F and P lines; the third and fourth of its
    I lines, a wait for WAL's start and end)."""
    lines = []
    for line in printed.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            lines.append(line)
            continue
        if record.get("type") == "printf":
            moved = []
            for words in (ln.split() for ln in str(record["data"]).splitlines()):
                if words and words[0] in ("R", "W", "F", "P") and len(words) >= 3:
                    words[2] = str(int(words[2]) + shift)
                if words and words[0] == "I" and len(words) >= 4:
                    words[2], words[3] = (str(int(w) + shift) for w in words[2:4])
                moved.append(" ".join(words) + "\n")
            record["data"] = "".join(moved)
        lines.append(json.dumps(record))
    return "\n".join(lines)


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


def test_the_client_on_an_ssh_host_runs_pgbench_there(workdir: Path, far: SshdHost) -> None:
    # 3 s: two whole seconds of progress at least
    db = _done_run(workdir, far, _spec(far, placed='hosts = { client = "far" }', duration=3))
    for repeat in db.execute("select id, transactions, pgbench_transactions, stdout_path "
                             "from repeats").fetchall():
        # the per-transaction logs came back from the host: every transaction in them
        assert repeat["transactions"] == repeat["pgbench_transactions"] > 0
        argv = (workdir / "run" / repeat["stdout_path"]).with_suffix(".argv").read_text()
        assert argv.startswith(f"{BIN_15}/pgbench ")  # the host's pgbench, not ours
        assert f"host={far.gateway} " in argv  # to the primary's address on the veth
        seconds = db.execute("select count(*) from samples where repeat_id = ?",
                             (repeat["id"],)).fetchone()[0]
        assert seconds >= 2  # its progress, line by line while it ran
    # its CPU, measured on the host (the shell that waited for it), in every repeat
    client = db.execute("select count(*), min(user_ms + system_ms), max(processes) "
                        "from proc_costs where node = 'client' and role = 'pgbench'"
                        ).fetchone()
    assert client[0] == db.execute("select count(*) from repeats").fetchone()[0]
    assert client[1] > 0 and client[2] == 1
    # the host as it was read: what it is, and in every repeat its clock and busy CPUs
    machine = json.loads(db.execute("select machine_json from runs").fetchone()[0])
    facts = machine["hosts"]["far"]
    assert facts["roles"] == ["client"] and facts["cpus"] == os.cpu_count()
    assert facts["kernel"].startswith("Linux ") and facts["netem"] is False  # no sch_netem
    seen = db.execute("select * from host_repeats").fetchall()
    assert len(seen) == db.execute("select count(*) from repeats").fetchone()[0]
    for row in seen:
        assert row["host"] == "far" and row["roles"] == "client"
        # the namespace shares this kernel's clock: the offset is within its uncertainty
        # and a few milliseconds of scheduling
        assert abs(row["clock_offset_ms"]) <= row["clock_uncertainty_ms"] + 5
        assert 0 < row["clock_uncertainty_ms"] < 500
        assert 0 <= row["busy_cpus"] <= row["cpus"] == os.cpu_count()
    report = (workdir / "run" / "report.html").read_text()
    assert "SSH hosts" in report and "client" in report
    assert list(Path(far.data_root).iterdir()) == []
    assert far.running("pgbench") == []


@pytest.mark.parametrize(("placed", "traced"), [
    ('hosts = { client = "far" }', None),
    ('sync = "1(b,c)"\nclone = "basebackup"\nhosts = { primary = "far", c = "far", '
     'client = "far" }', ".anatomy.bt"),
    ('sync = "c"\nclone = "basebackup"\nhosts = { c = "far" }', ".standby-anatomy.bt")],
    ids=["client", "primary-standby-client", "sync-standby"])
@machine_wide
def test_a_killed_tool_leaves_nothing_on_the_host(workdir: Path, far: SshdHost,
                                                 placed: str, traced: str | None) -> None:
    """The tool killed with SIGKILL while pgbench runs on the host: pgbench ends with its
    SSH channel, and `clean` stops the nodes there and removes every folder it made. With
    the primary there, the kill comes in the commit anatomy's repeat, while bpftrace
    traces the primary there: it ends with its watchdog's channel too; with the sync
    standby there (pgbench here), while bpftrace traces its walreceiver there."""
    spec = workdir / "spec.toml"
    client_there = "client" in placed
    # the anatomy's repeat comes after a measured and a probed one: short ones
    spec.write_text(_spec(far, placed=placed, anatomy=traced is not None,
                          sudo=traced is not None, duration=2 if traced else 60,
                          standby_anatomy=traced == ".standby-anatomy.bt"))

    def load() -> list[int]:
        """The host's pgbench running the load: not the `pgbench --version` the host
        probe runs first (seen, then gone, it made this test fail once)."""
        return [pid for pid in far.running("pgbench", wait=0)
                if b"--version" not in _cmdline(pid)]

    def tracer() -> list[int]:
        """The anatomy's bpftrace on the host: not the one-line trial of its check."""
        return [pid for pid in far.running("bpftrace", wait=0)
                if traced is not None and traced.encode() in _cmdline(pid)]

    with bpftrace_through_sudo() if traced else contextlib.nullcontext():
        tool = subprocess.Popen([sys.executable, "-m", "syncrep_lab", "run", str(spec),
                                 "--out", str(workdir / "run")], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 180
            while not ((load() or not client_there) and (tracer() or not traced)) \
                    and time.monotonic() < deadline:
                assert tool.poll() is None, "the run ended before its pgbench started"
                time.sleep(0.2)
            assert load() or not client_there, "pgbench never ran on the host"
            assert tracer() or not traced, "bpftrace never traced on the host"
        finally:
            tool.kill()
            tool.wait()
        assert far.running("pgbench", wait=15) == [], "pgbench outlived the tool's channel"
        assert far.running("bpftrace", wait=15) == [], "bpftrace outlived the tool"
        assert far.running("sudo", wait=5) == []
    cleaned = cli("clean", timeout=120)
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    left = sorted(str(p) for p in Path(far.data_root).rglob("*"))
    assert left == [], (left, cleaned.stdout, far.sshd_log())
    assert far.running("postgres") == []


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_the_primary_on_an_ssh_host_streams_to_standbys_here(workdir: Path,
                                                             far: SshdHost) -> None:
    """The primary made on the host with initdb, the standbys here base backups of it over
    the veth, pgbench here against it: b is the sync one, and the primary's CPU per role
    (its walsenders named by standby) comes back from the host. Its commit anatomy is
    traced there, by bpftrace through sudo -n, and read here."""
    with bpftrace_through_sudo():
        db = _done_run(workdir, far, _spec(far, placed='sync = "1(b,c)"\nclone = '
                                                       '"basebackup"\nhosts = { primary = '
                                                       '"far" }', anatomy=True, sudo=True))
    states = {r["standby"]: r["sync_state"] for r in db.execute(
        "select standby, sync_state from replication_samples")}
    assert states.get("b") == "sync" and states.get("c") == "potential", states
    remote = {r["role"] for r in db.execute(
        "select role from proc_costs where node = 'primary' and user_ms + system_ms > 0")}
    assert "walsender:b" in remote, remote
    settings = json.loads(db.execute("select settings_json from clusters").fetchone()[0])
    assert settings["primary"]["synchronous_standby_names"]["setting"] == "FIRST 1 (b, c)"
    # the commit anatomy, in a repeat of its own after the probed one, ran on the host
    said = [tuple(r) for r in db.execute(
        "select status, reason from probes where probe = 'anatomy'")]
    assert said == [("ran", None)]
    assert [r["probed"] for r in db.execute("select probed from repeats order by n")] == [
        0, 1, 2]
    repeat = db.execute("select id, transactions from repeats where probed = 2").fetchone()
    parts = {(r["who"], r["component"]): r for r in db.execute(
        "select who, component, count, total from anatomy where repeat_id = ?",
        (repeat["id"],))}
    # every commit of that repeat waited once and was timed once, on the host
    wait = parts[("backend", "commit_wait")]
    assert abs(wait["count"] - repeat["transactions"]) <= max(2, 0.03 * repeat["transactions"])
    split = sum(parts[("backend", c)]["total"] for c in
                ("standby_wait", "wakeup_queue", "run_queue", "unsignalled")
                if ("backend", c) in parts)
    assert split == pytest.approx(wait["total"], rel=1e-6)
    assert parts[("backend", "local_flush")]["count"] >= wait["count"]
    # the sync walsender freed the waiters, one kill each; the potential one none
    assert parts[("walsender:b", "waiters_freed")]["total"] > 0
    assert ("walsender:c", "waiters_freed") not in parts \
        or parts[("walsender:c", "waiters_freed")]["total"] == 0
    costs = json.loads(cli_here("costs", str(workdir / "run"), "--json").stdout)
    assert costs[0]["anatomy"] is not None
    # nothing of it is left on the host
    assert far.running("bpftrace") == [] and far.running("sudo") == []
    assert list(Path(far.data_root).iterdir()) == []
    assert far.running("postgres") == []


def test_primary_standby_and_client_on_one_host(workdir: Path, far: SshdHost) -> None:
    """Several nodes and the client on one host: the standby there streams from the
    primary there, the one here from the host's address, pgbench runs there."""
    db = _done_run(workdir, far, _spec(far, placed='sync = "c"\nclone = "basebackup"\n'
                                                   'hosts = { primary = "far", c = "far", '
                                                   'client = "far" }', probed=True))
    states = {r["standby"]: r["sync_state"] for r in db.execute(
        "select standby, sync_state from replication_samples")}
    assert states.get("c") == "sync" and states.get("b") == "async", states
    hosts = {r["roles"] for r in db.execute("select roles from host_repeats")}
    assert hosts == {"primary,c,client"}
    argv = next((workdir / "run").glob("artifacts/cell-*/repeat-01/pgbench.argv")).read_text()
    assert argv.startswith(f"{BIN_15}/pgbench ") and "password" not in argv
    assert list(Path(far.data_root).iterdir()) == []
    assert far.running("postgres") == []


def test_sysbench_as_the_client_on_an_ssh_host(workdir: Path, far: SshdHost) -> None:
    db = _done_run(workdir, far, _spec(far, placed='hosts = { client = "far" }')
                   .replace("warmup = 0", 'warmup = 0\ndriver = "sysbench"'))
    for repeat in db.execute("select transactions, pgbench_transactions, stdout_path "
                             "from repeats").fetchall():
        assert repeat["transactions"] == repeat["pgbench_transactions"] > 0
        assert repeat["stdout_path"].endswith("sysbench.stdout")
        argv = (workdir / "run" / repeat["stdout_path"]).with_suffix(".argv").read_text()
        assert argv.startswith("sysbench workload.lua --db-driver=pgsql")
        assert f"--pgsql-host={far.gateway}" in argv and "password" not in argv
    assert list(Path(far.data_root).iterdir()) == []
    assert far.running("sysbench") == []


def test_faults_act_on_the_standby_on_its_host(workdir: Path, far: SshdHost) -> None:
    """kill -9 and stop of the synchronous standby there, each brought back there within
    the repeat: c is killed and started, then stopped and started, while b here takes
    over; every acknowledged row is on every node afterwards."""
    # c has 7 s between its start and its stop to stream again, and the stop 5 s to be
    # undone before the repeat ends: on a loaded machine (another SSH host's test beside
    # it) c's start there after the kill took 5.3 s, the stop came 3.2 s late and its
    # start fell after the repeat's 7 s
    text = _spec(far, placed='sync = "1(c,b)"\nclone = "basebackup"\nhosts = { c = "far" }',
                 duration=14) + """
[matrix]
faults = ["kill-stop-c"]

[faults.kill-stop-c]
events = [{ at = 0.5, action = "kill", target = "c", for = 1.5 },
          { at = 9, action = "stop", target = "c", for = 1 }]
"""
    db = _done_run(workdir, far, text)
    events = [(r["t_s"], r["kind"], r["node"], r["detail"]) for r in db.execute(
        "select t_s, kind, node, detail from fault_events where repeat_id = "
        "(select min(id) from repeats) order by t_s")]
    acts = [(node, detail.split(" ")[0]) for _, kind, node, detail in events
            if kind == "fault"]
    assert acts == [("c", "kill"), ("c", "start"), ("c", "stop"), ("c", "start")], events
    assert not [e for e in events if e[1] == "error"], events
    # the primary saw c go and b take its place, each time
    moved = [detail for _, kind, node, detail in events if kind == "state" and node == "b"]
    assert moved.count("potential -> sync") >= 2, events
    assert [r[0] for r in db.execute("select count(*) from durability where ok = 0")] == [0]
    assert {r[0] for r in db.execute("select node from durability")} == {"primary", "b", "c"}


def test_a_placement_on_the_host_is_applied_and_read_back_there(workdir: Path,
                                                                 far: SshdHost) -> None:
    """c and the client on the host get a CPU affinity and c a NUMA policy there, every
    process of c inherits them but its walreceiver, pinned apart there, and what the
    host's kernel applied is stored per role; a CPU the host does not have is refused
    before anything is made."""
    text = _spec(far, placed='sync = "c"\nclone = "basebackup"\n'
                             'hosts = { c = "far", client = "far" }') + """
[matrix]
placement = ["far-pinned"]

[placements.far-pinned]
cpus = { c = "1", client = "0" }
numa = { c = "interleave=all" }
pin = { "c/walreceiver" = "0" }
"""
    db = _done_run(workdir, far, text)
    rows = {(r["node"], r["role"]): (r["cpus"], r["numa_policy"]) for r in db.execute(
        "select node, role, cpus, numa_policy from placement")}
    of_c = {role: got for (node, role), got in rows.items() if node == "c"}
    assert {"postmaster", "startup", "walreceiver"} <= set(of_c), rows
    assert of_c.pop("walreceiver")[0] == "0", rows
    assert {cpus for cpus, _ in of_c.values()} == {"1"}, rows
    assert {policy for _, policy in of_c.values()} == {"interleave:0"}, rows
    assert rows[("client", "pgbench")][0] == "0", rows
    # the host has CPUs 0 and 1 only: CPU 7 is refused, naming the host, with nothing made
    bad = workdir / "bad.toml"
    bad.write_text(text.replace('c = "1", client = "0"', 'c = "7", client = "0"'))
    res = cli("run", str(bad), "--out", str(workdir / "bad"), timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "placements.far-pinned.cpus.c: CPU 7 not on far" in " ".join(res.stderr.split())
    assert list((far.workdir / "data").iterdir()) == []


def _streaming_there(far: SshdHost) -> set[str]:
    """The data dirs on the host whose walreceiver streams now (a walreceiver runs in its
    node's data dir)."""
    dirs = set()
    for pid in far.running("postgres", wait=0):
        if b"walreceiver" in _cmdline(pid) and b"streaming" in _cmdline(pid):
            with contextlib.suppress(OSError):
                dirs.add(os.readlink(f"/proc/{pid}/cwd"))
    return dirs


def _run_watching(workdir: Path, far: SshdHost, text: str, *, kill: bool
                  ) -> tuple[subprocess.Popen[bytes], set[str]]:
    """The run of ``text`` in the background, the host's streaming walreceivers watched
    until two are seen (then the tool is killed with SIGKILL when ``kill``) or it ends."""
    spec = workdir / "spec.toml"
    spec.write_text(text)
    tool = subprocess.Popen([sys.executable, "-m", "syncrep_lab", "run", str(spec),
                             "--out", str(workdir / "run")], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seen: set[str] = set()
    deadline = time.monotonic() + 240
    try:
        while tool.poll() is None and time.monotonic() < deadline:
            seen |= _streaming_there(far)
            if kill and len(seen) >= 2:
                break
            time.sleep(0.2)
    finally:
        if kill or tool.poll() is None:
            tool.kill()
        tool.wait()
    return tool, seen


INSTANCES_ON_HOST = ('sync = "1(b,c)"\nclone = "basebackup"\ninstances = 2\n'
                     'hosts = { c = "far" }')


def test_two_instances_each_stream_to_a_standby_on_the_host(workdir: Path,
                                                            far: SshdHost) -> None:
    """instances = 2 with c on the host: each instance's c is made there in a data dir of
    its own, on a port of its own, and both stream there while the run measures; both
    instances' figures are stored, and nothing is left on the host."""
    text = _spec(far, placed=INSTANCES_ON_HOST, duration=4)
    tool, seen = _run_watching(workdir, far, text, kill=False)
    out = tool.stdout.read().decode(errors="replace") if tool.stdout else ""
    assert tool.returncode == 0, out + far.sshd_log()
    assert len(seen) == 2 and all(d.startswith(far.data_root) for d in seen), seen
    db = sqlite3.connect(workdir / "run" / DB_NAME)
    assert db.execute("select status from cells").fetchone()[0] == "done"
    per_instance = db.execute("select instance, tps from instance_results "
                              "order by instance").fetchall()
    assert [i for i, _ in per_instance] == [1, 2], per_instance
    assert all(tps > 0 for _, tps in per_instance), per_instance
    # each instance's c answered from the host, on a port of its own
    described = [json.loads(r[0]) for r in db.execute("select nodes_json from clusters")]
    ports = [n["port"] for nodes in described for n in nodes if n["name"] == "c"]
    assert len(ports) == 2 and len(set(ports)) == 2, described
    assert list(Path(far.data_root).iterdir()) == []
    assert far.running("postgres") == []


@machine_wide
def test_a_killed_run_of_two_instances_is_cleaned_off_the_host(workdir: Path,
                                                               far: SshdHost) -> None:
    """kill -9 of the tool while both instances' c stream on the host: `clean` finds both
    (each instance's cluster manifest records its c there) and leaves nothing there."""
    text = _spec(far, placed=INSTANCES_ON_HOST, duration=60)
    _, seen = _run_watching(workdir, far, text, kill=True)
    assert len(seen) == 2, seen
    cleaned = cli("clean", timeout=120)
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    left = sorted(str(p) for p in Path(far.data_root).rglob("*"))
    assert left == [], (left, cleaned.stdout, far.sshd_log())
    assert far.running("postgres") == []
