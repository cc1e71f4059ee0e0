"""The disk and network counters a repeat stores (readers/io_counters.py), against a known
amount of data written to the machine's disk and sent through a network namespace of
the test's own."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from syncrep_lab.readers.io_counters import (
    DiskCounters,
    disks_here,
    network_of,
    parse_diskstats,
    parse_net_dev,
)

from .helpers import shared_tmp, wait_until

MIB = 1 << 20


def _device_of(path: Path) -> str:
    """The whole block device holding ``path`` (its partition's parent, if any)."""
    dev = os.stat(path).st_dev
    sys_dev = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}").resolve()
    return sys_dev.name if sys_dev.parent.name == "block" else sys_dev.parent.name


def test_the_disk_counters_see_a_known_write() -> None:
    folder = shared_tmp("srl-io-")
    try:
        device = _device_of(folder)
        before = disks_here()
        assert device in before, (device, sorted(before))
        size = 128 * MIB
        started = time.monotonic()
        # direct I/O, then fsync: every byte reaches the device within the call
        subprocess.run(["dd", "if=/dev/zero", f"of={folder / 'f'}", "bs=1M",
                        f"count={size // MIB}", "oflag=direct", "conv=fsync"],
                       check=True, capture_output=True)
        took = time.monotonic() - started
        after = disks_here()
        grown = after[device].since(before[device])
        # others may write to the same device meanwhile (a shared machine): never less
        # than what was written, and short of twice it (a device counted twice, as a
        # disk and its partition, would be 2x) beyond what the others write in as long,
        # read just after. Not closer: the other tests' writes come in bursts (a suite
        # beside it wrote 17 MiB more than the file during the dd, nothing just after)
        time.sleep(took)
        others = disks_here()[device].since(after[device]).write_bytes
        assert size <= grown.write_bytes < 2 * size + 2 * others, (grown, others)
        assert grown.writes >= size // (4 * MIB), grown  # at most 4 MiB an I/O here
        assert grown.busy_ms > 0, grown
    finally:
        subprocess.run(["rm", "-rf", str(folder)], check=False)


SENDER = """
import socket, subprocess, sys, threading
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
server = socket.create_server(("127.0.0.1", 0))
client = socket.create_connection(server.getsockname())
peer, _ = server.accept()
print("ready", flush=True)
sys.stdin.readline()

def send():
    data = b"x" * 65536
    for _ in range(int(sys.argv[1]) // len(data)):
        client.sendall(data)
    client.shutdown(socket.SHUT_WR)

threading.Thread(target=send).start()
got = 0
while chunk := peer.recv(1 << 20):
    got += len(chunk)
print(got, flush=True)
sys.stdin.readline()
"""


def test_the_network_counters_see_a_known_transfer_in_a_namespace() -> None:
    size = 32 * MIB
    # a network namespace of its own: nothing else crosses its loopback
    proc = subprocess.Popen(["unshare", "--net", sys.executable, "-c", SENDER, str(size)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    guard = threading.Timer(60, proc.kill)  # a child that stops answering ends the test
    guard.start()
    try:
        assert proc.stdin is not None and proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        before = network_of(proc.pid)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert int(proc.stdout.readline()) == size
        lo = network_of(proc.pid)["lo"].since(before["lo"])
        # loopback counts each packet once each way; TCP's headers and acks add little
        assert size <= lo.tx_bytes <= 1.1 * size, lo
        assert lo.rx_bytes == lo.tx_bytes and lo.tx_packets >= size // 65536, lo
        assert network_of(None) != network_of(proc.pid)  # not this process's namespace
    finally:
        guard.cancel()
        proc.kill()
        proc.wait(timeout=10)
    wait_until(lambda: network_of(proc.pid) == {}, 5, "the namespace's process to go")


def test_the_parsers_take_what_the_kernel_prints_and_skip_the_rest() -> None:
    stats = (" 254       0 vda 10 1 80 5 20 2 160 7 0 30 40 0 0 0 0 0 0\n"
             " 254       1 vda1 10 1 80 5 20 2 160 7 0 30 40 0 0 0 0 0 0\n"
             "   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
             " 254      16 vdb broken\n")
    assert parse_diskstats(stats, {"vda", "vdb"}) == {
        "vda": DiskCounters(reads=10, writes=20, read_bytes=80 * 512,
                            write_bytes=160 * 512, busy_ms=30)}
    dev = ("Inter-|   Receive                            |  Transmit\n"
           " face |bytes    packets errs drop fifo frame compressed multicast|bytes ...\n"
           "    lo:  100   2    0    0    0     0          0         0  100   2    0    0"
           "    0     0       0          0\n"
           "  to-b: 5000  40    0    0    0     0          0         0  7000  50   0    0"
           "    0     0       0          0\n")
    got = parse_net_dev(dev)
    assert (got["to-b"].rx_bytes, got["to-b"].tx_bytes, got["to-b"].tx_packets) == (
        5000, 7000, 50)
    assert set(got) == {"lo", "to-b"}
    # a counter that went back (io_ticks wraps; a device made again) grew by nothing
    wrapped = DiskCounters(reads=5, writes=25, read_bytes=0, write_bytes=10, busy_ms=3)
    assert wrapped.since(parse_diskstats(stats, {"vda"})["vda"]) == DiskCounters(
        reads=0, writes=5, read_bytes=0, write_bytes=0, busy_ms=0)
