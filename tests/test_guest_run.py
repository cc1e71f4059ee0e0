"""Runs with a node in a guest (topology.guests): a virtual machine the run boots (TCG on
this machine, whose KVM boots no stock kernel), drives as an SSH host and stops, and
what `clean` does after a kill -9. The guest runs this machine's own PostgreSQL 18
through its read-only share of the root; the tests need root (namespaces, taps) and
QEMU, which ./run setup installs."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from syncrep_lab import paths
from syncrep_lab.guests import leftovers
from syncrep_lab.guests.costs import is_vcpu

from .helpers import cli, cli_here, postmasters_in

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("qemu-system-x86_64") is None,
    reason="guests need root and QEMU (./run setup installs it)")

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
repeats_min = 2
repeats_max = 2

[probes]
flamegraphs = false
anatomy = false
sched = false
"""


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


NOTHING: dict[str, list[str]] = {"qemu": [], "namespaces": [], "links": [], "folders": []}


def test_a_primary_in_a_guest_streams_to_b_here_and_the_guest_is_measured(
        workdir: Path, nothing_new_to_clean: Callable[[], None]) -> None:
    """The primary in guest1, its sync standby b on this machine: on commits cross the
    guest's network both ways; the primary's CPU per role is read in the guest, its steal
    there, its vCPU thread's CPU and wait here; the report shows the guest; nothing of
    the guest is left after the run."""
    assert _guest_things() == NOTHING
    spec = workdir / "spec.toml"
    spec.write_text(SPEC.format(duration=3))
    res = cli("run", str(spec), "--out", str(workdir / "run"), timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "guest1 ready in" in res.stderr, res.stderr
    out = workdir / "run"
    db = sqlite3.connect(out / "syncrep-lab.sqlite")
    machine = json.loads(db.execute("select machine_json from runs").fetchone()[0])
    guest = machine["guests"]["guest1"]
    assert guest["accel"] in ("kvm", "tcg") and guest["accel_reason"], guest
    assert guest["vcpus"] == 1 and guest["kernel"].startswith("6.1."), guest
    assert 0 < guest["boot_s"]["ssh_ready"] < 180, guest
    assert machine["hosts"]["guest1"]["roles"] == ["primary"], machine["hosts"]
    # the commits waited for b here: b was the sync standby, as the server said
    report = json.loads(cli_here("report", str(out), "--json").stdout)
    assert report["topology"][0]["states"] == {"b": "sync"}, report["topology"]
    cell = json.loads(cli_here("results", str(out), "--json").stdout)[0]
    assert cell["status"] == "done" and cell["tps_mean"] > 0, cell
    # CPU per role of the primary, read in the guest's /proc over SSH
    roles = {(r["node"], r["role"]): r for r in json.loads(
        cli_here("costs", str(out), "--json").stdout)[0]["roles"]}
    for role in ("backend", "walsender:b"):
        figure = roles[("primary", role)]
        assert figure["cpu_source"] == "proc" and figure["cpu_us_per_commit"]["mean"] > 0, \
            figure
    # every measured repeat: the guest's own steal, and what its vCPU took here
    measured = [r[0] for r in db.execute("select id from repeats where probed = 0")]
    assert len(measured) == 2
    steal = dict(db.execute("select repeat_id, steal_cpus from host_repeats "
                            "where host = 'guest1'").fetchall())
    assert set(measured) <= set(steal) and all(steal[r] is not None and steal[r] >= 0
                                                for r in measured), steal
    if guest["accel"] == "tcg":  # no steal clock under emulation
        assert all(steal[r] == 0 for r in measured), steal
    costs = {r[0]: r[1:] for r in db.execute(
        "select repeat_id, vcpus, vcpu_cpus, vcpu_delay_cpus, qemu_cpus from guest_repeats "
        "where guest = 'guest1'")}
    for repeat in measured:
        vcpus, on_cpu, waiting, qemu = costs[repeat]
        # the guest's one vCPU ran for the commits; QEMU's whole CPU holds it
        assert vcpus == 1 and 0.05 < on_cpu <= 1.05 and waiting >= 0, costs
        assert qemu >= 0.9 * on_cpu, costs
    page = (out / "report.html").read_text()
    assert 'id="guests"' in page and "guest1 (10.215." in page
    assert _guest_things() == NOTHING
    nothing_new_to_clean()


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


def test_what_a_guest_spec_needs_is_said_before_a_boot(workdir: Path) -> None:
    """run --check names the guests, what runs in each and how the machine will run
    them; a guest nothing runs in, an unknown host and a missing kernel are refused
    with the fix, and nothing is made."""
    spec = workdir / "spec.toml"
    spec.write_text(SPEC.format(duration=3))
    res = cli_here("run", str(spec), "--check")
    assert res.returncode == 0, res.stderr
    assert "guests: guest1 (primary), booted before the first cluster" in res.stdout
    for edit, needle in [
            (("count = 1", "count = 2"), "nothing runs in guest2"),
            (('primary = "guest1"', 'primary = "guest3"'), "or a guest: guest1"),
            (("memory_mb = 1024", "memory_mb = 1024, kernel = '/nonexistent/bzImage'"),
             "/nonexistent/bzImage does not exist")]:
        spec.write_text(SPEC.format(duration=3).replace(*edit))
        bad = cli_here("run", str(spec), "--check")
        assert bad.returncode != 0 and needle in bad.stderr, (edit, bad.stderr)
        assert "fix:" in bad.stderr and "Traceback" not in bad.stderr
    assert _guest_things() == NOTHING


def test_a_vcpu_thread_is_known_by_its_name() -> None:
    assert is_vcpu("CPU 0/TCG\n") and is_vcpu("CPU 3/KVM") and not is_vcpu("IO mon_iothread")
