"""Runs with a node in a guest (topology.guests): a virtual machine the run boots (TCG on
this machine, whose KVM boots no stock kernel), drives as an SSH host and stops, and
what `clean` does after a kill -9. The guest runs this machine's own PostgreSQL 18
through its read-only share of the root; the tests need root (namespaces, taps) and
QEMU, which ./run setup installs."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncrep_lab import paths
from syncrep_lab.guests import initramfs, leftovers
from syncrep_lab.guests.costs import is_vcpu
from syncrep_lab.pg.installations import Installation
from syncrep_lab.run.guests import OWN_MOUNTS

from .helpers import cli, cli_here, machine_wide, needs_guests, postmasters_in, shared_tmp

pytestmark = [needs_guests, machine_wide]

SPEC = """\
name = "guest-primary"

[topology]
standbys = 1
sync = "b"
clone = "basebackup"
guests = {{ count = 1, vcpus = 1, memory_mb = 1024 }}
hosts = {{ primary = "guest1" }}

[workload]
clients = 2
duration = {duration}
warmup = 1

[run]
repeats_min = 1
repeats_max = 1

[probes]
flamegraphs = false
anatomy = false
sched = false
"""
# The seed's group 5 against group 3, scaled: two primaries in one guest, and each in a
# guest of its own, the two clusters held up at once and their repeats interleaved (guest1
# holds three primaries then: 1024 MB)
ISOLATION = (SPEC.format(duration=3)
             .replace("count = 1, vcpus = 1, memory_mb = 1024",
                      'count = 2, vcpus = 1, memory_mb = 1024, vcpu_cpus = "1"')
             .replace('hosts = { primary = "guest1" }',
                      'hosts = { primary = "guest1" }\ninstances = 2')
             .replace("[run]", '[matrix]\nisolation = ["processes", "guests"]\n\n[run]\n'
                      'order = "interleaved"\nreset = "none"\ndrop_caches = true')
             # the seed's groups 3 and 5, as the seed-guests preset has them
             + '\n[reference]\nfigures = [{ isolation = "processes", tps = 70000 }, '
               '{ isolation = "guests", tps = 190000 }]\n')


def _guest_things() -> dict[str, list[str]]:
    """Whatever of a guest this machine holds: QEMU processes, guest namespaces, the
    host ends of their veths, guest folders."""
    qemus = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().startswith("qemu-system"):
                qemus.append(entry.name)
        except OSError:
            continue
    spaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                            check=False).stdout.split()
    links = [p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith("srlg")]
    folders = [p.name for p in leftovers.guests_dir().glob("*")] \
        if leftovers.guests_dir().exists() else []
    return {"qemu": qemus, "namespaces": [s for s in spaces if s.startswith("srl-guest")],
            "links": links, "folders": folders}


OWN_MOUNTS_PREFIXES = tuple(m + "/" for m in OWN_MOUNTS)
NOTHING: dict[str, list[str]] = {"qemu": [], "namespaces": [], "links": [], "folders": []}


@pytest.fixture(scope="module")
def isolation_run() -> Iterator[tuple[Path, subprocess.CompletedProcess[str]]]:
    """One run of ISOLATION: guest1 and guest2 booted, their clusters' b here."""
    assert _guest_things() == NOTHING
    work = shared_tmp("srl-guests-")
    (work / "spec.toml").write_text(ISOLATION)
    res = cli("run", str(work / "spec.toml"), "--out", str(work / "run"), timeout=900)
    yield work / "run", res
    shutil.rmtree(work, ignore_errors=True)


def test_a_primary_in_a_guest_streams_to_b_here_and_the_guest_is_measured(
        isolation_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    """The primary in guest1, its sync standby b on this machine: on commits cross the
    guest's network both ways; the primary's CPU per role is read in the guest, its steal
    there, its vCPU thread's CPU and wait here; nothing of a guest is left after."""
    out, res = isolation_run
    assert res.returncode == 0, res.stdout + res.stderr
    assert "guest1 ready in" in res.stderr and "guest2 ready in" in res.stderr, res.stderr
    db = sqlite3.connect(out / "syncrep-lab.sqlite")
    machine = json.loads(db.execute("select machine_json from runs").fetchone()[0])
    for name in ("guest1", "guest2"):
        guest = machine["guests"][name]
        assert guest["accel"] in ("kvm", "tcg") and guest["accel_reason"], guest
        assert guest["vcpus"] == 1 and guest["kernel"].startswith("6.1."), guest
        assert 0 < guest["boot_s"]["ssh_ready"] < 180, guest
        assert machine["hosts"][name]["roles"] == ["primary"], machine["hosts"]
    # the commits waited for b here: each instance's b was its sync standby, as the
    # server said
    report = json.loads(cli_here("report", str(out), "--json").stdout)
    # two cells, two instances each
    assert [t["states"] for t in report["topology"]] == [{"b": "sync"}] * 4, \
        report["topology"]
    cells = json.loads(cli_here("results", str(out), "--json").stdout)
    assert [c["status"] for c in cells] == ["done", "done"] and all(
        c["tps_mean"] > 0 for c in cells), cells
    # CPU per role of the primary, read in the guest's /proc over SSH, and its system
    # calls counted by perf there (run as root through the guest's own sudo)
    for cell in json.loads(cli_here("costs", str(out), "--json").stdout):
        roles = {(r["node"], r["role"]): r for r in cell["roles"]}
        for role in ("backend", "walsender:b"):
            figure = roles[("primary", role)]
            assert figure["proc"]["system_us_per_commit"]["mean"] > 0, figure
            assert figure["cpu_us_per_commit"]["mean"] > 0, figure
        if shutil.which("sudo") is not None:
            calls = roles[("primary", "backend")]["syscalls_per_commit"]
            # a commit's WAL write and its reply to the client, about one each: counted
            # in instance 1's backends against instance 1's commits (counted against
            # both instances' they were half that: 0.48 WAL writes a commit)
            assert calls["pwrite64"]["mean"] > 0.7 and calls["sendto"]["mean"] > 0.7, calls
    # every measured repeat: each guest's own steal, and what its vCPU took here
    measured = [r[0] for r in db.execute("select id from repeats where probed = 0")]
    assert len(measured) == 2
    steal = db.execute("select repeat_id, host, steal_cpus from host_repeats").fetchall()
    assert {r for r, _, _ in steal} >= set(measured), steal
    assert all(s is not None and s >= 0 for _, _, s in steal), steal
    if machine["guests"]["guest1"]["accel"] == "tcg":  # no steal clock under emulation
        assert all(s == 0 for _, _, s in steal), steal
    for _, vcpus, on_cpu, waiting, qemu in db.execute(
            "select guest, vcpus, vcpu_cpus, vcpu_delay_cpus, qemu_cpus from guest_repeats"):
        # each guest's one vCPU ran for the commits; QEMU's whole CPU holds it
        assert vcpus == 1 and 0.05 < on_cpu <= 1.05 and waiting >= 0, (on_cpu, waiting)
        assert qemu >= 0.9 * on_cpu, (qemu, on_cpu)
    assert _guest_things() == NOTHING
    assert cli_here("clean", "--list").stdout.strip() in ("", "nothing to clean")


def test_two_instances_in_one_guest_and_in_a_guest_each(
        isolation_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    """isolation = ["processes", "guests"] with instances = 2: the processes cell holds
    both primaries in guest1, the guests cell one in each guest; both cells' instances
    are measured apart and summed, and the report shows both sides and both guests."""
    out, res = isolation_run
    assert res.returncode == 0, res.stdout + res.stderr
    db = sqlite3.connect(out / "syncrep-lab.sqlite")
    seen = {key: sorted(guests.split(",")) for key, guests in db.execute(
        "select c.key, group_concat(distinct g.guest) from guest_repeats g join repeats r "
        "on r.id = g.repeat_id join cells c on c.id = r.cell_id where r.probed = 0 "
        "group by c.key")}
    assert seen == {"isolation=processes": ["guest1"],
                    "isolation=guests": ["guest1", "guest2"]}, seen
    per_instance = db.execute(
        "select c.key, i.instance, i.tps from instance_results i join repeats r on "
        "r.id = i.repeat_id join cells c on c.id = r.cell_id where r.probed = 0 "
        "order by c.key, i.instance").fetchall()
    assert [(k, i) for k, i, _ in per_instance] == [
        ("isolation=guests", 1), ("isolation=guests", 2),
        ("isolation=processes", 1), ("isolation=processes", 2)], per_instance
    assert all(tps > 0 for _, _, tps in per_instance), per_instance
    # the two clusters were held up together: their measured repeats share a round, so
    # the ratio of the two isolations is paired in time
    rounds = dict(db.execute("select c.key, group_concat(distinct r.round) from repeats r "
                             "join cells c on c.id = r.cell_id where r.probed = 0 "
                             "group by c.key"))
    assert rounds["isolation=processes"] == rounds["isolation=guests"] is not None, rounds
    note = db.execute("select order_note from runs").fetchone()[0] or ""
    assert "one after another" not in note, note
    # drop_caches: before each cluster, here and in the guests its nodes are in
    dropped = [ln.split("(", 1)[1] for ln in res.stderr.splitlines()
               if "page cache dropped before its cluster" in ln]
    assert sorted(("guest1" in d, "guest2" in d) for d in dropped) == [
        (True, False), (True, True)], res.stderr
    # vcpu_cpus: each guest's one vCPU thread pinned to CPU 1 here, read back after boot
    machine = json.loads(db.execute("select machine_json from runs").fetchone()[0])
    for name in ("guest1", "guest2"):
        [(thread, cpus)] = machine["guests"][name]["vcpu_pinning"].items()
        assert thread.startswith("CPU 0/") and cpus == "1", machine["guests"][name]
    # and the report sets that ratio beside the seed's 190k / 70k (one round: no
    # interval, so not paired yet; with two or more it is, the rounds being shared)
    seed = json.loads(cli_here("report", str(out), "--json").stdout)["seed"]
    [ratio] = [r for r in seed["ratios"] if r["axis"] == "isolation"]
    assert ratio["seed"] == pytest.approx(190 / 70) and ratio["here"] > 0, ratio
    for key, total in db.execute("select c.key, r.tps from repeats r join cells c on "
                                 "c.id = r.cell_id where r.probed = 0"):
        parts = sum(t for k, _, t in per_instance if k == key)
        assert abs(total - parts) < 0.02 * parts, (key, total, parts)
    page = " ".join((out / "report.html").read_text().split())
    assert 'id="guests"' in page and "guest1 (10.215." in page and "guest2 (10.215." in page
    assert "iso=processes" in page and "iso=guests" in page


def test_a_killed_run_leaves_its_guest_to_clean(workdir: Path) -> None:
    """kill -9 of the tool while the primary in the guest takes commits: QEMU dies with
    the tool (PR_SET_PDEATHSIG); `clean` removes b here, the guest's namespace and its
    folder, and does not try to reach the dead guest's nodes."""
    spec = workdir / "spec.toml"
    spec.write_text(SPEC.format(duration=60))
    tool = subprocess.Popen([sys.executable, "-m", "syncrep_lab", "run", str(spec),
                             "--out", str(workdir / "run")], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # until b here streams from the primary there, and commits wait for it
        deadline = time.monotonic() + 300
        db = workdir / "run" / "syncrep-lab.sqlite"
        here: list[int] = []
        while time.monotonic() < deadline and tool.poll() is None:
            here = postmasters_in(paths.state_dir() / "clusters")  # b's, on this machine
            if here and db.exists():
                with sqlite3.connect(db) as conn:
                    if conn.execute("select count(*) from clusters").fetchone()[0]:
                        break
            time.sleep(0.5)
        assert tool.poll() is None, "the run ended before its cluster was up"
        assert here  # b's postmaster and its children
        time.sleep(2)
    finally:
        tool.kill()
        tool.wait()
    deadline = time.monotonic() + 10
    while _guest_things()["qemu"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _guest_things()["qemu"] == []  # gone with the tool
    started = time.monotonic()
    cleaned = cli("clean", timeout=120)
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    # the dead guest's nodes are not waited for (an SSH connect would time out)
    assert time.monotonic() - started < 30, cleaned.stdout
    said = cleaned.stdout + cleaned.stderr
    assert "removed network namespace srl-guest" in said and " on guest1:" not in said, said
    assert postmasters_in(paths.state_dir() / "clusters") == []
    assert _guest_things() == NOTHING
    assert cli_here("clean", "--list").stdout.strip() in ("", "nothing to clean")


def test_what_a_guest_spec_needs_is_said_before_a_boot(workdir: Path, pg96: Installation,
                                                       monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """run --check names the guests, what runs in each and how the machine will run
    them; a guest nothing runs in, an unknown host, a missing kernel, a machine without
    the sshd the guest starts from its root, and a PostgreSQL the guest cannot see are
    refused with the fix, and nothing is made."""
    spec = workdir / "spec.toml"
    spec.write_text(SPEC.format(duration=3))
    res = cli_here("run", str(spec), "--check")
    assert res.returncode == 0, res.stderr
    assert "guests: guest1 (primary), booted before the first cluster" in res.stdout
    # the guest's root is this machine's: without its sshd a boot would end in the
    # guest's init ("sshd: not found"), so the check says so first
    with monkeypatch.context() as m:
        m.setattr(initramfs, "SSHD", workdir / "no-sshd")
        bad = cli_here("run", str(spec), "--check")
    assert bad.returncode != 0 and "an OpenSSH server" in bad.stderr, bad.stderr
    assert "apt-get install openssh-server" in bad.stderr and "Traceback" not in bad.stderr
    for edit, needle in [
            (("count = 1", "count = 2"), "nothing runs in guest2"),
            (('primary = "guest1"', 'primary = "guest3"'), "or a guest: guest1"),
            (("memory_mb = 1024", "memory_mb = 1024, kernel = '/nonexistent/bzImage'"),
             "/nonexistent/bzImage does not exist"),
            (("memory_mb = 1024", "memory_mb = 1024, vcpu_cpus = '4000'"),
             "vcpu_cpus: CPU 4000 is not one this process may use")]:
        spec.write_text(SPEC.format(duration=3).replace(*edit))
        bad = cli_here("run", str(spec), "--check")
        assert bad.returncode != 0 and needle in bad.stderr, (edit, bad.stderr)
        assert "fix:" in bad.stderr and "Traceback" not in bad.stderr
    # 9.6 in the session's tool home: on /dev/shm, which a guest mounts its own of, a
    # refusal; elsewhere (a machine without room there) it is seen, and the check passes
    spec.write_text(SPEC.format(duration=3).replace("[topology]", '[topology]\npg = "9.6"'))
    res = cli_here("run", str(spec), "--check")
    hidden = str(pg96.bin_dir.resolve()).startswith(OWN_MOUNTS_PREFIXES)
    if hidden:
        assert res.returncode != 0 and "which a guest does not see" in res.stderr, res.stderr
        assert "SYNCREP_LAB_HOME" in res.stderr and "Traceback" not in res.stderr
    else:
        assert res.returncode == 0, res.stderr
    assert _guest_things() == NOTHING


def test_a_vcpu_thread_is_known_by_its_name() -> None:
    assert is_vcpu("CPU 0/TCG\n") and is_vcpu("CPU 3/KVM") and not is_vcpu("IO mon_iothread")
