"""Emulated links between network namespaces: real namespaces, real packets, no mocks.

Helper programs (a TCP echo server and pinger, a UDP counter, a TCP sink) run inside the
namespaces through ``ip netns exec`` with this interpreter. Each test uses its own name
prefix and removes what it made, even when it fails.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from syncrep_lab.errors import UserError
from syncrep_lab.network import netns
from syncrep_lab.network.capabilities import BACKEND_ENV, check_network_support, netem_available
from syncrep_lab.network.commands import NETNS_DIR, exec_prefix
from syncrep_lab.network.delayer_handle import DELAYER_MODULE
from syncrep_lab.network.delivery import delivered
from syncrep_lab.network.links import LinkProfile, check_profile, parse_rate
from syncrep_lab.network.owners import OWNERS_DIR
from syncrep_lab.network.plan import Link, NetworkPlan, plan_network
from syncrep_lab.network.processes import pids_in
from syncrep_lab.network.readback import check_delayers, delay_line_counters, readback
from syncrep_lab.network.shaping import set_profile

from .helpers import machine_wide

SUPPORT = check_network_support() if os.geteuid() == 0 else "not root"
needs_netns = pytest.mark.skipif(SUPPORT is not None, reason=f"no namespaces: {SUPPORT}")
# tests of the delay line itself run on kernels with netem too, when NFQUEUE works there
DELAYER = check_network_support("delayer") if SUPPORT is None else SUPPORT
needs_delayer = pytest.mark.skipif(DELAYER is not None, reason=f"no delay line: {DELAYER}")

HELPER = r"""
import json, socket, sys, threading, time
mode, args = sys.argv[1], sys.argv[2:]
if mode == "tcp-echo":
    srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", int(args[0]))); srv.listen(4)
    print("ready", flush=True)
    def serve(conn):
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while data := conn.recv(64):
            conn.sendall(data)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()
elif mode == "tcp-ping":
    conn = socket.create_connection((args[0], int(args[1])), timeout=10)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    times = []
    for _ in range(int(args[2])):
        start = time.perf_counter(); conn.sendall(b"x"); conn.recv(64)
        times.append((time.perf_counter() - start) * 1000)
    print(json.dumps(times))
elif mode == "udp-count":
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", int(args[0]))); sock.settimeout(10)
    print("ready", flush=True)
    seen = []
    try:
        while True:
            seen.append(int(sock.recv(64)))
            sock.settimeout(1.0)
    except socket.timeout:
        pass
    print(json.dumps(seen))
elif mode == "udp-send":
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    gap = float(args[3]) if len(args) > 3 else 0.001
    for i in range(int(args[2])):
        sock.sendto(str(i).encode(), (args[0], int(args[1]))); time.sleep(gap)
elif mode == "tcp-sink":
    srv = socket.socket(); srv.bind(("0.0.0.0", int(args[0]))); srv.listen(1)
    print("ready", flush=True)
    conn, _ = srv.accept(); total = 0; first = last = 0.0
    while data := conn.recv(1 << 16):
        last = time.perf_counter(); first = first or last; total += len(data)
    print(json.dumps({"bytes": total, "seconds": last - first}))
elif mode == "tcp-send":
    conn = socket.create_connection((args[0], int(args[1])), timeout=10)
    conn.sendall(b"\0" * int(args[2])); conn.close()
"""


def _helper(ns: str, *args: str) -> list[str]:
    return [*exec_prefix(ns), sys.executable, "-c", HELPER, *args]


class Background:
    """A helper server in a namespace, waited for ("ready") and always killed by pid."""

    def __init__(self, ns: str, *args: str) -> None:
        self.proc = subprocess.Popen(_helper(ns, *args), stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "ready"

    def output(self, timeout: float = 20) -> Any:
        out, _ = self.proc.communicate(timeout=timeout)
        return json.loads(out)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(5)


def _run_helper(ns: str, *args: str, timeout: float = 30) -> Any:
    proc = subprocess.run(_helper(ns, *args), capture_output=True, text=True, timeout=timeout,
                          check=True)
    return json.loads(proc.stdout) if proc.stdout.strip() else None


def _median_rtt(plan: NetworkPlan, server: str, client: str, port: int = 7000) -> float:
    echo = Background(plan.namespace(server), "tcp-echo", str(port))
    try:
        times = _run_helper(plan.namespace(client), "tcp-ping",
                            plan.address(server, client), str(port), "50")
    finally:
        echo.stop()
    return float(statistics.median(times))


def _delayer_pids(prefix: str) -> list[int]:
    """Delay lines of ``prefix``'s namespaces anywhere on the machine (by command line)."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry.name}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if DELAYER_MODULE.encode() in cmd and any(
                c.startswith(f"{prefix}-".encode()) for c in cmd):
            out.append(int(entry.name))
    return out


def _running(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its parent does not count)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _ns_exists(name: str) -> bool:
    return (NETNS_DIR / name).exists()


_counter = iter(range(1000))


@pytest.fixture
def make_net() -> Iterator[Callable[[list[Link]], NetworkPlan]]:
    """Build networks with a prefix of their own; each is destroyed afterwards."""
    made: list[NetworkPlan] = []

    def make(links: list[Link]) -> NetworkPlan:
        plan = plan_network(f"srl-t{os.getpid() % 10000}n{next(_counter)}", links)
        made.append(plan)
        netns.create(plan)
        return plan

    yield make
    for plan in made:
        netns.destroy(plan)
        netns.destroy_namespaces(netns.ours(plan.prefix + "-", include_live=True))


def _backends() -> list[Any]:
    return [pytest.param("netem"), pytest.param("delayer", marks=[needs_delayer])]


# -- with namespaces -------------------------------------------------------------------------
@needs_netns
@pytest.mark.parametrize("backend", _backends())
def test_delay_adds_to_the_round_trip(make_net: Callable[[list[Link]], NetworkPlan],
                                      backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BACKEND_ENV, backend)
    if backend == "netem" and not netem_available():
        # A kernel without sch_netem (this one): asking for netem is refused up front,
        # with the way out, and nothing is made.
        reason = check_network_support("netem")
        assert reason is not None and "no netem" in reason and "fix:" in reason, reason
        # the namespaces this process's make_net names (another suite's on the machine
        # come and go on their own)
        mine = f"srl-t{os.getpid() % 10000}n"
        before = netns.ours(mine, include_live=True)
        with pytest.raises(UserError, match="netem"):
            make_net([Link("a", "b", LinkProfile(delay_ms=2))])
        assert netns.ours(mine, include_live=True) == before
        return
    plan = make_net([Link("a", "b", LinkProfile(delay_ms=2))])
    assert plan.backend == backend
    counted = delay_line_counters(plan)
    delayed = _median_rtt(plan, "b", "a")
    assert 4.0 <= delayed < 12.0, f"2 ms each way gave a {delayed:.3f} ms round trip"
    if backend == "delayer":
        # what each line says it gave the pings: the asked delay and its lateness, never
        # early by more than its release slack, and no more than the pings saw
        after = delay_line_counters(plan)
        assert set(counted) == set(after) and len(after) == 2, (counted, after)
        got = [delivered(counted[k], after[k]) for k in after]
        assert all(d is not None and d.releases > 0 and d.packets >= d.releases
                   and d.asked_ms == 2 and d.late_p99_ms is not None for d in got), got
        given = [d.delivered_ms for d in got if d is not None and d.delivered_ms is not None]
        assert len(given) == 2 and min(given) >= 2 - 0.2, got
        assert sum(given) <= delayed + 1.0, (got, delayed)

    set_profile(plan, "a", "b", LinkProfile())
    assert plan.links[0].profile == LinkProfile()
    bare = _median_rtt(plan, "b", "a")
    assert bare < 1.0, f"a bare link gave a {bare:.3f} ms round trip"

    set_profile(plan, "b", "a", LinkProfile(delay_ms=3))
    again = _median_rtt(plan, "b", "a")
    assert 6.0 <= again < 14.0, f"3 ms each way, set at run time, gave {again:.3f} ms"


@needs_netns
def test_loss_drops_about_that_share_one_way(
        make_net: Callable[[list[Link]], NetworkPlan]) -> None:
    plan = make_net([Link("a", "b", LinkProfile(loss_pct=30))])
    sent = 400
    counter = Background(plan.namespace("b"), "udp-count", "7001")
    try:
        _run_helper(plan.namespace("a"), "udp-send", plan.address("b", "a"), "7001", str(sent))
        received = len(set(counter.output()))
    finally:
        counter.stop()
    lost = 1 - received / sent
    # 30 % per direction, one direction measured: 400 datagrams put 5 standard deviations
    # (2.3 % each) inside this band
    assert 0.18 <= lost <= 0.42, f"30 % loss dropped {lost:.1%} of {sent} datagrams"


@needs_netns
def test_rate_limits_throughput(make_net: Callable[[list[Link]], NetworkPlan]) -> None:
    plan = make_net([Link("a", "b", LinkProfile(rate="10mbit"))])
    sink = Background(plan.namespace("b"), "tcp-sink", "7002")
    try:
        _run_helper(plan.namespace("a"), "tcp-send", plan.address("b", "a"), "7002",
                    str(2_500_000))
        result = sink.output()
    finally:
        sink.stop()
    assert result["bytes"] == 2_500_000
    mbit = result["bytes"] * 8 / result["seconds"] / 1e6
    assert 6.0 <= mbit <= 12.0, f"a 10 mbit link moved {mbit:.1f} Mbit/s"


@needs_netns
def test_readback_shows_what_is_applied(make_net: Callable[[list[Link]], NetworkPlan]) -> None:
    profile = LinkProfile(delay_ms=1, jitter_ms=0.5, rate="100mbit")
    plan = make_net([Link("primary", "b", profile), Link("primary", "client", LinkProfile())])
    ends = readback(plan)
    assert [(e["namespace"], e["interface"]) for e in ends] == [
        (f"{plan.prefix}-primary", "to-b"), (f"{plan.prefix}-b", "to-primary"),
        (f"{plan.prefix}-primary", "to-client"), (f"{plan.prefix}-client", "to-primary")]
    for end in ends:
        assert end["state"] == "UP"
        assert end["addresses"] == [end["planned_address"]]
    assert ends[0]["address"] == plan.address("primary", "b") + "/30"
    for end in ends[:2]:
        assert "rate 100Mbit" in end["qdisc"]
        if plan.backend == "netem":
            assert "netem" in end["qdisc"] and "delay 1ms" in end["qdisc"]
        else:
            delayer = end["delayer"]
            assert delayer["alive"] and delayer["kernel_queue"] is not None
            assert delayer["params"]["delay_ms"] == 1 and delayer["params"]["jitter_ms"] == 0.5
            assert end["rule"] is True
    for end in ends[2:]:
        assert "tbf" not in end["qdisc"] and "netem" not in end["qdisc"]
        assert end.get("delayer") is None
    assert check_delayers(plan) == []


@needs_delayer
def test_jitter_keeps_packets_in_order(make_net: Callable[[list[Link]], NetworkPlan],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # datagrams 0.2 ms apart with +-2 ms of jitter: drawn independently, most would overtake
    # one another; the delay line keeps them in the order they came
    monkeypatch.setenv(BACKEND_ENV, "delayer")
    plan = make_net([Link("a", "b", LinkProfile(delay_ms=3, jitter_ms=2))])
    counter = Background(plan.namespace("b"), "udp-count", "7003")
    try:
        _run_helper(plan.namespace("a"), "udp-send", plan.address("b", "a"), "7003", "300",
                    "0.0002")
        seen = counter.output()
    finally:
        counter.stop()
    assert len(seen) == 300
    assert seen == sorted(seen), "packets were reordered"


@needs_delayer
def test_a_dead_delay_line_is_reported(make_net: Callable[[list[Link]], NetworkPlan],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BACKEND_ENV, "delayer")
    plan = make_net([Link("a", "b", LinkProfile(delay_ms=5))])
    assert check_delayers(plan) == []
    victim = readback(plan)[1]["delayer"]["pid"]
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while _running(victim) and time.monotonic() < deadline:
        time.sleep(0.02)
    problems = check_delayers(plan)
    assert len(problems) == 1, problems
    assert f"{plan.prefix}-b/to-a is not running" in problems[0], problems
    # set_profile starts a new one in its place
    set_profile(plan, "a", "b", LinkProfile(delay_ms=5))
    assert check_delayers(plan) == []


@needs_delayer
def test_destroy_leaves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BACKEND_ENV, "delayer")
    plan = plan_network(f"srl-t{os.getpid() % 10000}d",
                        [Link("a", "b", LinkProfile(delay_ms=1, loss_pct=1))])
    try:
        netns.create(plan)
        pids = _delayer_pids(plan.prefix)
        assert len(pids) == 2
        assert all(_ns_exists(n) for n in plan.namespaces())
        assert all((OWNERS_DIR / n).exists() for n in plan.namespaces())
    finally:
        started = time.monotonic()
        netns.destroy(plan)
        took = time.monotonic() - started
    assert took < 5
    assert not any(_ns_exists(n) for n in plan.namespaces())
    assert netns.ours(plan.prefix, include_live=True) == []
    assert _delayer_pids(plan.prefix) == []
    assert not any((OWNERS_DIR / n).exists() for n in plan.namespaces())
    netns.destroy(plan)  # idempotent


@needs_delayer
def test_leftovers_are_found_and_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BACKEND_ENV, "delayer")
    prefix = f"srl-t{os.getpid() % 10000}c"
    plan = plan_network(prefix, [Link("a", "b", LinkProfile(delay_ms=1))])
    try:
        netns.create(plan)
        names = plan.namespaces()
        del plan  # dropped without destroy, as by a crash
        # this process is alive, so its namespaces are not leftovers for a `clean`
        assert netns.ours(prefix) == []
        assert netns.ours(prefix, include_live=True) == names
        netns.destroy_namespaces(netns.ours(prefix, include_live=True))
        assert not any(_ns_exists(n) for n in names)
        assert _delayer_pids(prefix) == []
    finally:
        netns.destroy_namespaces(netns.ours(prefix, include_live=True))


@machine_wide
@needs_delayer
def test_a_killed_run_leaves_namespaces_that_clean_removes() -> None:
    prefix = f"srl-t{os.getpid() % 10000}k"
    code = f"""
import subprocess, sys, time
from syncrep_lab.network import netns
from syncrep_lab.network.commands import exec_prefix
from syncrep_lab.network.links import LinkProfile
from syncrep_lab.network.plan import Link, plan_network
plan = plan_network({prefix!r}, [Link("a", "b", LinkProfile(delay_ms=1))])
netns.create(plan)
# a process left inside a namespace, as a server of a crashed run would be
subprocess.Popen(exec_prefix(plan.namespace("b")) + ["sleep", "300"],
                 start_new_session=True)
print("made", flush=True)
time.sleep(300)
"""
    env = {**os.environ, BACKEND_ENV: "delayer"}
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             env=env)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "made"
        names = [f"{prefix}-a", f"{prefix}-b"]
        assert netns.ours(prefix) == []  # its maker is alive
        child.kill()
        child.wait(5)
        assert netns.ours(prefix) == names
        # the delay lines die with the process that started them
        deadline = time.monotonic() + 5
        while _delayer_pids(prefix) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _delayer_pids(prefix) == []
        inside = pids_in(f"{prefix}-b")
        assert len(inside) == 1  # the sleep
        netns.destroy_namespaces(netns.ours(prefix))
        assert netns.ours(prefix, include_live=True) == []
        assert not any(_running(pid) for pid in inside)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(5)
        netns.destroy_namespaces(netns.ours(prefix, include_live=True))


@needs_delayer
def test_failed_create_removes_its_own_and_spares_the_existing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BACKEND_ENV, "delayer")
    prefix = f"srl-t{os.getpid() % 10000}f"
    existing = f"{prefix}-client"
    subprocess.run(["ip", "netns", "add", existing], check=True)
    try:
        subprocess.run(["ip", "-n", existing, "link", "add", "mark0", "type", "veth", "peer",
                        "name", "mark1"], check=True)
        plan = plan_network(prefix, [Link("primary", "b", LinkProfile(delay_ms=2)),
                                     Link("primary", "client", LinkProfile())])
        with pytest.raises(UserError) as caught:
            netns.create(plan)
        assert existing in caught.value.cause and "already exists" in caught.value.cause
        assert caught.value.fix
        # the namespaces and delay lines it made first are gone, the other is intact
        assert not _ns_exists(f"{prefix}-primary") and not _ns_exists(f"{prefix}-b")
        assert _delayer_pids(prefix) == []
        assert not (OWNERS_DIR / f"{prefix}-primary").exists()
        assert _ns_exists(existing)
        links = subprocess.run(["ip", "-n", existing, "-o", "link", "show"],
                               capture_output=True, text=True, check=True).stdout
        assert "mark0" in links and "mark1" in links
        assert not (OWNERS_DIR / existing).exists()
    finally:
        subprocess.run(["ip", "netns", "del", existing], check=False)
        netns.destroy_namespaces(netns.ours(prefix, include_live=True))


# -- without namespaces ----------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["--queue", "70000"], ["--queue", "1", "--loss-pct", "150"],
                                  ["--queue", "1", "--delay-ms", "-1"]])
def test_delayer_refuses_bad_arguments(argv: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", DELAYER_MODULE, *argv],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "delayer:" in proc.stderr and "ready" not in proc.stdout


@pytest.mark.parametrize("text", ["0", "0mbit", "abc", "-5mbit", "10", "10 furlongs", "",
                                  "1bit", "999tbit", "mbit"])
def test_bad_rates_are_refused_with_a_fix(text: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_rate(text)
    assert caught.value.fix
    assert repr(text) in caught.value.cause or text == ""


def test_rate_of_zero_says_why() -> None:
    with pytest.raises(UserError, match="would carry nothing"):
        parse_rate("0")


@pytest.mark.parametrize(("text", "bits"), [
    ("1gbit", 10**9), ("100mbit", 10**8), ("500kbit", 500_000), ("10mbps", 80_000_000),
    ("10MBit", 10**7), ("1.5mbit", 1_500_000), ("1mibit", 1 << 20), ("1 Gbit/s", 10**9)])
def test_rates_in_tc_units(text: str, bits: int) -> None:
    assert parse_rate(text) == bits


def test_profile_checks_and_descriptions() -> None:
    assert check_profile(LinkProfile(delay_ms=1, jitter_ms=5)) == []  # jitter > delay is fine
    problems = check_profile(LinkProfile(delay_ms=-1, loss_pct=150, rate="0"))
    assert len(problems) == 3
    assert any("delay" in p for p in problems) and any("loss" in p for p in problems)
    assert check_profile(LinkProfile(loss_pct=float("nan")))
    assert LinkProfile().describe() == "no delay"
    assert LinkProfile(delay_ms=0.2, rate="1gbit").describe() == "0.2 ms, 1 Gbit/s"
    assert LinkProfile(delay_ms=2, jitter_ms=0.5, loss_pct=1).describe() == \
        "2 ms ± 0.5 ms, 1% loss"
    assert LinkProfile(rate="10mbps").describe() == "no delay, 80 Mbit/s"


def test_bad_profiles_and_plans_are_refused() -> None:
    with pytest.raises(UserError) as caught:
        plan_network("srl-x", [Link("a", "b", LinkProfile(loss_pct=150))])
    assert "loss" in caught.value.cause and caught.value.fix
    for links in ([Link("a", "a")], [Link("a", "b"), Link("b", "a")], [Link("a/b", "c")],
                  [Link("a", "x" * 80)]):
        with pytest.raises(UserError) as caught:
            plan_network("srl-x", links)
        assert caught.value.fix
    with pytest.raises(UserError):
        plan_network("bad name", [])
    plan = plan_network("srl-x", [Link("a", "b")])
    with pytest.raises(UserError) as caught:
        set_profile(plan, "a", "b", LinkProfile(rate="abc"))
    assert caught.value.fix
    with pytest.raises(UserError):
        plan.address("a", "c")
    with pytest.raises(UserError):
        LinkProfile.from_json({"delay_ms": "2"})
    with pytest.raises(UserError):
        NetworkPlan.from_json({"prefix": "srl-x"})


def test_plan_layout_is_deterministic() -> None:
    links = [Link("primary", "b", LinkProfile(delay_ms=0.2, rate="1gbit")),
             Link("primary", "c"), Link("client", "primary"),
             Link("primary", "a-standby-with-a-long-name")]
    plan = plan_network("srl-1a2b3c", links)
    assert plan.endpoints() == ["primary", "b", "c", "client", "a-standby-with-a-long-name"]
    assert plan.namespace("b") == "srl-1a2b3c-b"
    assert plan.address("primary", "b") == "10.213.0.1"
    assert plan.address("b", "primary") == "10.213.0.2"
    assert plan.address("client", "primary") == "10.213.0.9"
    assert plan.address("primary", "client") == "10.213.0.10"
    assert plan.subnets() == ["10.213.0.0/30", "10.213.0.4/30", "10.213.0.8/30",
                              "10.213.0.12/30"]
    assert plan.interface("primary", "b") == "to-b"
    names = [plan.interface("primary", p) for p in ("b", "c", "client",
                                                    "a-standby-with-a-long-name")]
    assert all(len(n) <= 15 for n in names) and len(set(names)) == 4
    again = NetworkPlan.from_json(json.loads(json.dumps(plan.to_json())))
    assert again == plan
    big = plan_network("srl-x", [Link(f"n{i}", f"m{i}") for i in range(300)])
    assert big.address("m299", "n299") == "10.213.4.174"
