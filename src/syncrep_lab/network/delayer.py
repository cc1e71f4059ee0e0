"""A userspace delay line for one NFQUEUE queue: delay, jitter and loss without ``netem``.

Why this exists: the usual way to emulate a slow link is the ``netem`` queueing discipline,
but some kernels are built without it (``tc qdisc add ... netem`` then fails with
"Specified qdisc kind is unknown"). Such kernels mostly still have NFQUEUE, which hands
packets that match an iptables rule to a userspace program and waits for its verdict. This
module is that program: it holds each packet's verdict back until the packet is due, and
drops packets at random for loss. The link's rate is left to ``tc tbf``, which every kernel
has.

How it is run (``shaping`` does this): inside the namespace that receives the traffic it
delays, as ``ip netns exec NS python -m syncrep_lab.network.delayer --queue N --delay-ms D
--jitter-ms J --loss-pct L --parent PID``, with a rule such as ``iptables -t mangle -A
PREROUTING -i IF -j NFQUEUE --queue-num N --queue-bypass`` sending it the packets arriving
over one link. (On the receiving side rather than the sending one: a packet held before it
leaves is still charged to its sending socket, and TCP's small-queue limit then throttles
the sender.) It prints ``ready`` on stdout once the queue is bound; until then (and after it
is gone) ``--queue-bypass`` lets packets through undelayed, which is why the caller must
check that the delayer is alive.

Behaviour, and the choices behind it:

- One process per queue, that is per link end (the packets arriving over that link), so a
  change of one link never disturbs another, and a crashed or restarted delayer affects one
  direction of one link.
- Delays count from the packet's arrival as the kernel stamped it (NFQA_TIMESTAMP, turned on
  by holding a socket with SO_TIMESTAMP), not from when this process read it, and timer
  wake-ups are aimed early by their usual lateness: both errors are otherwise around a tenth
  of a millisecond on a virtual machine.
- Packets leave in the order they came (per queue FIFO): a packet's due time is
  ``arrival + delay + uniform(-jitter, +jitter)``, raised to the previous packet's due time if
  it is earlier. TCP is therefore never reordered, which a single real path does not do
  either; the price is that with jitter larger than the spacing of packets the mean delay
  is a little above ``delay``. (``netem`` itself reorders packets when jitter is set.) Jitter
  is uniform, as netem's default.
- Lost packets are dropped at once (a verdict of NF_DROP), the others are accepted in batches:
  since due times never decrease, one NFQNL_MSG_VERDICT_BATCH accepts every packet that has
  come due, so a busy queue costs one system call per wake-up, not one per packet.
- Only packet metadata is copied to userspace (NFQNL_COPY_META). Without loss the queue takes
  whole GSO packets (NFQA_CFG_F_GSO: a 64 KiB TCP burst is one verdict, as in netem); with
  loss the kernel splits them, so that loss hits single wire-sized packets.
- The process dies with its parent (PR_SET_PDEATHSIG, and end of file on its stdin), and on
  SIGTERM, end of input or ``quit`` it accepts everything still held before it exits, so a
  stopped delayer does not turn into a burst of loss.
- It runs at nice -10 with a 10 µs timer slack: a delay line must not queue behind the
  database for CPU, or the emulated delay would grow with the load.

- It counts how late it released what came due: each batch by its first packet, the one
  due earliest (the mean and the worst), and each packet by its own lateness (the sum
  and a histogram over LATE_EDGES_MS), all since it started, so that a reader takes the
  difference of two ``stats`` for a window of its own
  (network/delivery.py: the delay a repeat's packets really had). A delay line that is
  starved of CPU, on a machine whose other tenants take it, holds packets longer than
  asked, and a figure measured through it carries that.

Control protocol on stdin, one command a line, each answered by one line on stdout:
``set DELAY_MS JITTER_MS LOSS_PCT`` -> ``ok``; ``stats`` -> a JSON object of counters;
``quit`` -> the delayer releases what it holds and exits (no answer).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import ctypes
import errno
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from types import FrameType

NETLINK_NETFILTER = 12
SOL_NETLINK = 270
SO_RCVBUFFORCE = 33  # not exported by the socket module
SO_TIMESTAMP = 29
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NFQNL_MSG_VERDICT_BATCH = 3
NLMSG_ERROR = 2
NLM_F_REQUEST = 1
NLM_F_ACK = 4
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_TIMESTAMP = 4
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQA_CFG_MASK = 4
NFQA_CFG_FLAGS = 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_CFG_F_GSO = 4
NF_DROP = 0
NF_ACCEPT = 1

PACKET_TYPE = (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET
_PR_SET_PDEATHSIG = 1
_PR_SET_TIMERSLACK = 29

# Packets come due within this much of a wake-up are released with it rather than after
# another sleep: a sleep that short would cost more than it gains.
RELEASE_SLACK_S = 50e-6
NO_TIMESTAMPS = -2
MAX_WAKE_LAG_S = 0.5e-3  # the wake-up latency allowed for is capped at this
# the upper edges (ms) of the lateness histogram's bins; one bin more for what is later
LATE_EDGES_MS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0)
DEFAULT_MAXLEN = 32768  # packets the kernel holds for one queue before it drops new ones
RCVBUF = 16 << 20  # the netlink socket's receive buffer (packet notices wait there)

_HEADER = struct.Struct("=IHHI I")  # nlmsghdr: length, type, flags, sequence, port id
_MSG_HEAD = struct.Struct("=IH")
_ATTR_HEAD = struct.Struct("=HH")
_BE32 = struct.Struct("!I")
_TIMESTAMP = struct.Struct("!QQ")  # seconds, microseconds (real time)
_NATIVE_I32 = struct.Struct("=i")


def _attr(kind: int, payload: bytes) -> bytes:
    raw = _ATTR_HEAD.pack(4 + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) % 4)


def message(kind: int, flags: int, seq: int, queue: int, attrs: bytes) -> bytes:
    """One nfnetlink message for ``queue``: nlmsghdr, nfgenmsg (family, version, queue
    number big endian), then the attributes."""
    body = bytes((socket.AF_UNSPEC, 0)) + struct.pack("!H", queue) + attrs
    return _HEADER.pack(16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | kind, flags, seq, 0) + body


def verdict_template(queue: int, kind: int, verdict: int) -> bytearray:
    """A verdict message whose packet id (the last four bytes) is filled in per use."""
    return bytearray(message(kind, NLM_F_REQUEST, 0, queue,
                             _attr(NFQA_VERDICT_HDR, struct.pack("!II", verdict, 0))))


@dataclass
class Params:
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss_pct: float = 0.0

    def problems(self) -> list[str]:
        out = []
        for name, value in (("delay", self.delay_ms), ("jitter", self.jitter_ms)):
            if not (0 <= value <= 60_000):
                out.append(f"{name} {value} ms is outside 0..60000")
        if not (0 <= self.loss_pct <= 100):
            out.append(f"loss {self.loss_pct} % is outside 0..100")
        return out


@dataclass
class Stats:
    received: int = 0
    accepted: int = 0
    dropped: int = 0
    max_held: int = 0
    overruns: int = 0  # notices the kernel could not deliver (receive buffer full)
    verdict_errors: int = 0
    late_max_ms: float = 0.0  # how much later than due a packet was released, at worst
    late_sum_ms: float = 0.0  # signed: early releases (by under the wake-up lag) count less
    releases: int = 0
    wake_lag_ms: float = 0.0
    # packets accepted, by their own lateness: bin i up to LATE_EDGES_MS[i], the last
    # one beyond them all; and the sum of their lateness
    late_bins: list[int] = field(default_factory=lambda: [0] * (len(LATE_EDGES_MS) + 1))
    packet_late_sum_ms: float = 0.0

    def to_json(self, held: int, params: Params) -> str:
        return json.dumps({
            "received": self.received, "accepted": self.accepted, "dropped": self.dropped,
            "held": held, "max_held": self.max_held, "overruns": self.overruns,
            "verdict_errors": self.verdict_errors, "late_max_ms": round(self.late_max_ms, 3),
            "late_mean_ms": round(self.late_sum_ms / self.releases, 3) if self.releases else 0,
            "releases": self.releases, "packet_late_sum_ms": round(self.packet_late_sum_ms, 3),
            "late_bins": self.late_bins, "late_edges_ms": list(LATE_EDGES_MS),
            "delay_ms": params.delay_ms, "jitter_ms": params.jitter_ms,
            "loss_pct": params.loss_pct, "wake_lag_ms": round(self.wake_lag_ms, 3),
        })


class Delayer:
    """The delay line for one queue: the netlink socket, the held packets and the loop."""

    def __init__(self, queue: int, params: Params, maxlen: int = DEFAULT_MAXLEN,
                 seed: int | None = None) -> None:
        self.queue = queue
        self.params = params
        self.maxlen = maxlen
        self.rng = random.Random(seed)
        self.stats = Stats()
        self.held: deque[tuple[float, int]] = deque()  # (due, packet id), due never decreasing
        self.last_due = 0.0
        self.seq = 0
        self.stopping = False
        self.gso: bool | None = None
        self.wake_lag = 0.0  # how late timer wake-ups come, on average (seconds)
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock.bind((0, 0))
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)
        except OSError:  # not privileged: take what the system allows
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
        self.accept_batch = verdict_template(queue, NFQNL_MSG_VERDICT_BATCH, NF_ACCEPT)
        self.drop_one = verdict_template(queue, NFQNL_MSG_VERDICT, NF_DROP)
        self.buf = bytearray(65536)
        # Any socket asking for receive timestamps makes the kernel stamp every packet as it
        # arrives; the queue then passes the stamp on (NFQA_TIMESTAMP), and delays count from
        # arrival rather than from when this process got round to reading the packet (up to
        # a tenth of a millisecond later when it was asleep).
        self.stamper = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with contextlib.suppress(OSError):
            self.stamper.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMP, 1)
        self.ts_at = -1  # where the timestamp attribute sits in a notice, once found
        self.ts_misses = 0
        self.real_minus_mono = time.time() - time.monotonic()

    # -- configuration ------------------------------------------------------------------
    def _request(self, attrs: bytes) -> None:
        """Send a config message and wait for its acknowledgement (raises OSError)."""
        self.seq += 1
        self.sock.send(message(NFQNL_MSG_CONFIG, NLM_F_REQUEST | NLM_F_ACK, self.seq,
                               self.queue, attrs))
        deadline = time.monotonic() + 5
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                raise OSError(errno.ETIMEDOUT, "no answer from nfnetlink_queue")
            n = self.sock.recv_into(self.buf)
            off = 0
            while off + 20 <= n:
                length, kind, _flags, seq, _port = _HEADER.unpack_from(self.buf, off)
                if kind == NLMSG_ERROR and seq == self.seq:
                    code = _NATIVE_I32.unpack_from(self.buf, off + 16)[0]
                    if code:
                        raise OSError(-code, os.strerror(-code))
                    return
                if kind == PACKET_TYPE:  # a packet while reconfiguring: hold it as usual
                    self._take(self.buf, off, length, time.monotonic())
                off += max((length + 3) & ~3, 16)

    def bind(self) -> None:
        cmd = struct.pack("!BBH", NFQNL_CFG_CMD_BIND, 0, socket.AF_INET)
        self._request(_attr(NFQA_CFG_CMD, cmd))
        self._request(_attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0xFFFF, NFQNL_COPY_META))
                      + _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", self.maxlen)))
        self._apply_gso()
        self.sock.setblocking(False)

    def _apply_gso(self) -> None:
        """Whole GSO packets without loss (cheap); wire-sized packets with loss (faithful)."""
        want = self.params.loss_pct == 0
        if want == self.gso:
            return
        blocking = self.sock.getblocking()
        self.sock.setblocking(True)
        try:
            self._request(_attr(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_GSO if want else 0))
                          + _attr(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_GSO)))
        finally:
            self.sock.setblocking(blocking)
        self.gso = want

    def set_params(self, params: Params) -> None:
        self.params = params
        self._apply_gso()

    # -- the packet path ----------------------------------------------------------------
    def _take(self, buf: bytearray, off: int, length: int, now: float) -> None:
        """One packet notice at ``off`` (``length`` bytes): drop it now, or hold it until it
        is due."""
        if _ATTR_HEAD.unpack_from(buf, off + 20)[1] & 0x3FFF == NFQA_PACKET_HDR:
            pid = _BE32.unpack_from(buf, off + 24)[0]
        else:  # the kernel puts the packet header first; search in case that ever changes
            at = self._find_attr(buf, off, NFQA_PACKET_HDR)
            if at < 0:
                return
            pid = _BE32.unpack_from(buf, off + at + 4)[0]
        stats = self.stats
        stats.received += 1
        params = self.params
        if params.loss_pct and self.rng.random() * 100 < params.loss_pct:
            self.drop_one[-4:] = _BE32.pack(pid)
            self.sock.send(self.drop_one)
            stats.dropped += 1
            return
        at = self.ts_at
        if at != NO_TIMESTAMPS and (
                at < 0 or at + 20 > length
                or _ATTR_HEAD.unpack_from(buf, off + at) != (20, NFQA_TIMESTAMP)):
            at = self.ts_at = self._find_attr(buf, off, NFQA_TIMESTAMP)
            if at < 0:
                self.ts_misses += 1
                if self.ts_misses > 64:  # this kernel does not stamp: stop looking
                    self.ts_at = NO_TIMESTAMPS
        if at >= 0:
            sec, usec = _TIMESTAMP.unpack_from(buf, off + at + 4)
            arrived = sec + usec * 1e-6 - self.real_minus_mono
            if now - 0.5 < arrived < now:  # else a clock step: trust our own reading
                now = arrived
        due = now + params.delay_ms / 1000
        if params.jitter_ms:
            due += (self.rng.random() * 2 - 1) * params.jitter_ms / 1000
        if due < self.last_due:
            due = self.last_due
        self.last_due = due
        self.held.append((due, pid))

    @staticmethod
    def _find_attr(buf: bytearray, off: int, wanted: int) -> int:
        """Where attribute ``wanted`` starts, relative to the notice at ``off`` (-1: none)."""
        end = off + _MSG_HEAD.unpack_from(buf, off)[0]
        pos = off + 20
        while pos + 4 <= end:
            length, kind = _ATTR_HEAD.unpack_from(buf, pos)
            if length < 4:
                return -1
            if kind & 0x3FFF == wanted:
                return pos - off
            pos += (length + 3) & ~3
        return -1

    def drain(self) -> None:
        """Read every packet notice waiting on the socket."""
        sock, buf, take = self.sock, self.buf, self._take
        while True:
            try:
                n = sock.recv_into(buf)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:
                    self.stats.overruns += 1
                    continue
                raise
            now = time.monotonic()
            self.real_minus_mono = time.time() - now
            off = 0
            while off + 20 <= n:
                length, kind = _MSG_HEAD.unpack_from(buf, off)
                if kind == PACKET_TYPE:
                    take(buf, off, length, now)
                elif kind == NLMSG_ERROR and _NATIVE_I32.unpack_from(buf, off + 16)[0]:
                    self.stats.verdict_errors += 1
                off += max((length + 3) & ~3, 16)
        if len(self.held) > self.stats.max_held:
            self.stats.max_held = len(self.held)

    def release(self, everything: bool = False) -> None:
        """Accept every packet that has come due (all of them with ``everything``), with one
        batch verdict."""
        held = self.held
        if not held:
            return
        now = time.monotonic()
        limit = float("inf") if everything else now + max(RELEASE_SLACK_S, self.wake_lag)
        first_due = held[0][0]
        last = -1
        count = 0
        stats = self.stats
        bins, edges = stats.late_bins, LATE_EDGES_MS
        while held and held[0][0] <= limit:
            due, last = held.popleft()
            count += 1
            # each packet's own lateness: after a stall (the line without a CPU) one
            # release frees many packets, each as late as it was
            late_ms = (now - due) * 1000
            stats.packet_late_sum_ms += late_ms
            bins[bisect.bisect_left(edges, late_ms)] += 1
        if count:
            self.accept_batch[-4:] = _BE32.pack(last)
            self.sock.send(self.accept_batch)
            stats.accepted += count
            late = (now - first_due) * 1000  # negative: released a little early
            stats.late_sum_ms += late
            stats.releases += 1
            if late > stats.late_max_ms:
                stats.late_max_ms = late

    # -- control ------------------------------------------------------------------------
    def command(self, line: str) -> str | None:
        """Handle one control line; returns the answer, or None to stop."""
        words = line.split()
        if not words:
            return "error empty command"
        if words[0] == "quit":
            return None
        if words[0] == "stats":
            self.stats.wake_lag_ms = self.wake_lag * 1000
            return self.stats.to_json(len(self.held), self.params)
        if words[0] == "set" and len(words) == 4:
            try:
                params = Params(*(float(w) for w in words[1:]))
            except ValueError:
                return "error set takes three numbers: delay_ms jitter_ms loss_pct"
            problems = params.problems()
            if problems:
                return "error " + "; ".join(problems)
            try:
                self.set_params(params)
            except OSError as exc:
                return f"error {exc}"
            return "ok"
        return f"error unknown command {words[0]!r}"

    def serve(self, control: int | None, wake: int) -> None:
        """The loop: sleep until a packet arrives, a command comes, or the oldest held packet
        is due."""
        sock_fd = self.sock.fileno()
        fds = [sock_fd, wake] + ([control] if control is not None else [])
        pending = b""
        while not self.stopping:
            timeout = target = None
            if self.held:
                # wake up early by the usual wake-up latency, so packets leave on time on
                # average rather than always late by it
                target = self.held[0][0] - self.wake_lag
                timeout = max(0.0, target - time.monotonic())
            ready = select.select(fds, [], [], timeout)[0]
            if not ready and target is not None:
                observed = min(max(time.monotonic() - target, 0.0), MAX_WAKE_LAG_S)
                self.wake_lag += (observed - self.wake_lag) * 0.1
            if sock_fd in ready:
                self.drain()
            if wake in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake, 512)
            if control is not None and control in ready:
                chunk = os.read(control, 4096)
                if not chunk:  # the parent closed our input (or died): finish
                    break
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    answer = self.command(line.decode(errors="replace"))
                    if answer is None:
                        self.stopping = True
                        break
                    sys.stdout.write(answer + "\n")
                    sys.stdout.flush()
            self.release()
        self.drain()
        self.release(everything=True)

    def close(self) -> None:
        self.sock.close()
        self.stamper.close()


def _prctl(option: int, value: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m syncrep_lab.network.delayer",
                                     description="NFQUEUE delay line (delay, jitter, loss)")
    parser.add_argument("--queue", type=int, required=True, help="NFQUEUE queue number")
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--loss-pct", type=float, default=0.0)
    parser.add_argument("--parent", type=int, default=0,
                        help="exit at once unless this is still the parent process")
    parser.add_argument("--maxlen", type=int, default=DEFAULT_MAXLEN)
    parser.add_argument("--seed", type=int, default=None, help="seed for jitter and loss")
    parser.add_argument("--tag", default="", help="free text naming the link end (for ps)")
    parser.add_argument("--no-control", action="store_true",
                        help="do not read commands from stdin")
    args = parser.parse_args(argv)
    params = Params(args.delay_ms, args.jitter_ms, args.loss_pct)
    problems = params.problems()
    if problems or not (0 <= args.queue <= 65535):
        print("delayer: " + "; ".join(problems or ["queue must be 0..65535"]), file=sys.stderr)
        return 2

    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if args.parent and os.getppid() != args.parent:
        return 1  # the parent died before the death signal was armed
    _prctl(_PR_SET_TIMERSLACK, 10_000)
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, -10)

    rfd, wfd = os.pipe()
    os.set_blocking(rfd, False)
    os.set_blocking(wfd, False)
    signal.set_wakeup_fd(wfd)
    delayer: Delayer | None = None
    stop_early = False

    def stop(_signum: int, _frame: FrameType | None) -> None:
        nonlocal stop_early
        stop_early = True
        if delayer is not None:
            delayer.stopping = True

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    try:
        delayer = Delayer(args.queue, params, args.maxlen, args.seed)
        delayer.bind()
    except OSError as exc:
        hint = " (another process has bound this queue)" if exc.errno == errno.EBUSY else ""
        print(f"delayer: cannot bind NFQUEUE queue {args.queue}: {exc}{hint}", file=sys.stderr)
        return 3
    delayer.stopping = stop_early
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    try:
        delayer.serve(None if args.no_control else sys.stdin.fileno(), rfd)
    except BrokenPipeError:  # the parent stopped reading our answers
        delayer.release(everything=True)
    finally:
        delayer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
