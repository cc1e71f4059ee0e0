"""What the NFQUEUE delay line costs: packets a second it sustains, its CPU, its accuracy.

On kernels without netem, delay, jitter and loss are applied by a Python process per link end
(syncrep_lab.network.delayer). It shares the machine's cores with PostgreSQL, so its cost
matters. This bench builds two namespaces a and b joined by one link with the delay line
forced (SYNCREP_LAB_LINK_BACKEND=delayer) and measures, for the delay line that holds a->b
traffic (it runs in b):

  udp N/s   UDP datagrams offered at a fixed rate for --seconds: delivered rate, the delay
            line's CPU (share of one core, from /proc utime+stime) and its cost per packet
  udp max   as fast as one Python sender can: the most the delay line passes
  tcp bulk  one TCP stream for --seconds through the delay line, and over the bare link
            (GSO packets: one verdict per up to 64 KiB)
  rtt       TCP request/response round trips: bare link, through the delay line with no
            delay, and with --delay-ms each way (the excess over 2 x delay is its error)

CPU counted for the delay line includes kernel work done in its system calls; after a verdict
the kernel finishes receiving the packet (IP, TCP) in the caller's context, so part of the
receiver's own stack cost lands here.

    .venv/bin/python bench/link_delayer.py [--delay-ms 1] [--seconds 3]
        [--rates 2000,10000,30000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from syncrep_lab.network import netns
from syncrep_lab.network.capabilities import BACKEND_ENV, check_network_support
from syncrep_lab.network.commands import exec_prefix
from syncrep_lab.network.links import LinkProfile
from syncrep_lab.network.plan import Link, NetworkPlan, plan_network
from syncrep_lab.network.readback import readback
from syncrep_lab.network.shaping import set_profile

HELPER = r"""
import json, socket, sys, time
mode, args = sys.argv[1], sys.argv[2:]
if mode == "udp-count":
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind(("0.0.0.0", int(args[0]))); sock.settimeout(15)
    print("ready", flush=True)
    n = 0; first = last = 0.0
    try:
        while True:
            sock.recv(64); last = time.perf_counter(); first = first or last; n += 1
            sock.settimeout(1.0)
    except socket.timeout:
        pass
    print(json.dumps({"packets": n, "seconds": last - first}))
elif mode == "udp-send":
    host, port, rate, seconds = args[0], int(args[1]), float(args[2]), float(args[3])
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload = b"x" * 32; sent = 0; start = time.perf_counter(); end = start + seconds
    while (now := time.perf_counter()) < end:
        if rate <= 0:
            for _ in range(64):
                sock.sendto(payload, (host, port))
            sent += 64
            continue
        due = int((now - start) * rate)
        while sent < due:
            sock.sendto(payload, (host, port)); sent += 1
        time.sleep(0.0005)
    print(json.dumps({"sent": sent, "seconds": time.perf_counter() - start}))
elif mode == "tcp-echo":
    srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", int(args[0]))); srv.listen(4)
    print("ready", flush=True)
    while True:
        conn, _ = srv.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while data := conn.recv(64):
            conn.sendall(data)
elif mode == "tcp-ping":
    conn = socket.create_connection((args[0], int(args[1])), timeout=10)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    times = []
    for _ in range(int(args[2])):
        t = time.perf_counter(); conn.sendall(b"x"); conn.recv(64)
        times.append((time.perf_counter() - t) * 1000)
    print(json.dumps(times))
elif mode == "tcp-sink":
    srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", int(args[0]))); srv.listen(1)
    print("ready", flush=True)
    conn, _ = srv.accept(); total = 0; first = last = 0.0
    while data := conn.recv(1 << 20):
        last = time.perf_counter(); first = first or last; total += len(data)
    print(json.dumps({"bytes": total, "seconds": last - first}))
elif mode == "tcp-send":
    conn = socket.create_connection((args[0], int(args[1])), timeout=10)
    buf = b"\0" * (1 << 20); end = time.perf_counter() + float(args[2])
    while time.perf_counter() < end:
        conn.sendall(buf)
    conn.close()
"""

TICK = os.sysconf("SC_CLK_TCK")


def helper(plan: NetworkPlan, where: str, *args: str) -> list[str]:
    return [*exec_prefix(plan.namespace(where)), sys.executable, "-c", HELPER, *args]


def start_server(plan: NetworkPlan, where: str, *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(helper(plan, where, *args), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def finish(proc: subprocess.Popen[str]) -> Any:
    out, _ = proc.communicate(timeout=30)
    return json.loads(out)


def cpu_times(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK


def cpu_seconds(pid: int) -> float:
    return sum(cpu_times(pid))


def receiving_delayer(plan: NetworkPlan) -> tuple[int, dict[str, Any]]:
    """The pid and counters of the delay line holding a->b traffic (it runs in b), with the
    kernel's queue counters merged in."""
    end = next(e for e in readback(plan) if e["endpoint"] == "b")
    if not end.get("delayer"):
        raise SystemExit("no delay line on b: is the link's profile empty?")
    stats = dict(end["delayer"]["stats"] or {})
    stats.update(end["delayer"]["kernel_queue"] or {})
    return int(end["delayer"]["pid"]), stats


def udp_run(plan: NetworkPlan, rate: float, seconds: float) -> dict[str, Any]:
    pid, before = receiving_delayer(plan)
    counter = start_server(plan, "b", "udp-count", "7100")
    (user0, sys0), t0 = cpu_times(pid), time.monotonic()
    sender = subprocess.run(helper(plan, "a", "udp-send", plan.address("b", "a"), "7100",
                                   str(rate), str(seconds)),
                            capture_output=True, text=True, check=True, timeout=seconds + 30)
    time.sleep(0.05 + plan.links[0].profile.delay_ms / 1000)  # the last ones leave the line
    user1, sys1 = cpu_times(pid)
    wall = time.monotonic() - t0
    got = finish(counter)
    _, after = receiving_delayer(plan)
    sent = json.loads(sender.stdout)
    passed = after.get("received", 0) - before.get("received", 0)
    cpu = user1 + sys1 - user0 - sys0
    return {
        "offered_pps": round(sent["sent"] / sent["seconds"]),
        "delivered_pps": round(got["packets"] / max(got["seconds"], 1e-9)),
        "lost": sent["sent"] - got["packets"],
        "lost_queue_full": after.get("dropped_queue_full", 0)
        - before.get("dropped_queue_full", 0),
        "lost_overrun": after.get("dropped_user", 0) - before.get("dropped_user", 0),
        "delayer_cpu_pct": round(100 * cpu / wall, 1),
        "user_pct": round(100 * (user1 - user0) / wall, 1),
        "us_per_packet": round(1e6 * cpu / max(passed, 1), 2),
        "late_mean_ms": after.get("late_mean_ms"), "late_max_ms": after.get("late_max_ms"),
    }


def tcp_bulk(plan: NetworkPlan, seconds: float) -> dict[str, Any]:
    pid = None
    with_delayer = any(e.get("delayer") for e in readback(plan))
    if with_delayer:
        pid, before = receiving_delayer(plan)
    sink = start_server(plan, "b", "tcp-sink", "7101")
    t0 = time.monotonic()
    cpu0 = cpu_seconds(pid) if pid else 0.0
    subprocess.run(helper(plan, "a", "tcp-send", plan.address("b", "a"), "7101", str(seconds)),
                   check=True, timeout=seconds + 30)
    cpu1 = cpu_seconds(pid) if pid else 0.0
    wall = time.monotonic() - t0
    got = finish(sink)
    out: dict[str, Any] = {"mbit_s": round(got["bytes"] * 8 / got["seconds"] / 1e6)}
    if pid:
        _, after = receiving_delayer(plan)
        out["delayer_cpu_pct"] = round(100 * (cpu1 - cpu0) / wall, 1)
        out["verdicts_per_s"] = round((after["received"] - before["received"]) / wall)
    return out


def rtt(plan: NetworkPlan, count: int = 300) -> dict[str, float]:
    echo = start_server(plan, "b", "tcp-echo", "7102")
    try:
        out = subprocess.run(helper(plan, "a", "tcp-ping", plan.address("b", "a"), "7102",
                                    str(count)), capture_output=True, text=True, check=True,
                             timeout=120)
    finally:
        echo.kill()
        echo.wait()
    times = sorted(json.loads(out.stdout))
    return {"median_ms": round(statistics.median(times), 3),
            "p99_ms": round(times[int(0.99 * (len(times) - 1))], 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay-ms", type=float, default=1.0)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rates", default="2000,10000,30000")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    problem = check_network_support()
    if problem:
        raise SystemExit(problem)
    os.environ[BACKEND_ENV] = "delayer"
    delayed = LinkProfile(delay_ms=args.delay_ms)
    plan = plan_network(f"srl-bench{os.getpid() % 10000}", [Link("a", "b", delayed)])
    netns.create(plan)
    results: dict[str, Any] = {"delay_ms": args.delay_ms, "cores": os.cpu_count()}
    try:
        for rate in (float(r) for r in args.rates.split(",") if r):
            results[f"udp {rate:.0f}/s"] = udp_run(plan, rate, args.seconds)
        results["udp max"] = udp_run(plan, 0, args.seconds)
        results["tcp bulk, delay line"] = tcp_bulk(plan, args.seconds)
        results[f"rtt, {args.delay_ms:g} ms each way"] = rtt(plan)
        set_profile(plan, "a", "b", LinkProfile(delay_ms=1e-6))
        results["rtt, delay line, no delay"] = rtt(plan)
        set_profile(plan, "a", "b", LinkProfile())
        results["rtt, bare link"] = rtt(plan)
        results["tcp bulk, bare link"] = tcp_bulk(plan, args.seconds)
    finally:
        netns.destroy(plan)
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        for key, value in results.items():
            print(f"{key:28} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
