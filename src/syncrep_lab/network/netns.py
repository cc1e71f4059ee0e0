"""Network namespaces joined by emulated links: build, change, read back, remove.

Each endpoint (the primary, a standby, the client) gets its own network namespace
``{prefix}-{endpoint}`` with only a loopback device and one veth interface per link, named
``to-{peer}`` (``l{index}-...`` when that would pass the kernel's 15 character limit). The
endpoints of a link reach each other over it and nothing else: there is no routing between
links and no way out to the host's network, so the addresses can never clash with the
machine's own. Unix sockets in the file system still work across namespaces.

Addresses: link number ``i`` (its place in the plan) gets the ``/30`` at ``10.213.0.0 + 4 i``
(``10.213.0.0/16`` holds 16384 links); its first endpoint is ``.1``, its second ``.2``. A
/30 rather than a /31 because every tool understands it. The same plan gives the same
addresses on every run.

How a link's profile is applied, per direction:

- With ``netem`` (a stock kernel): on each end's egress, ``netem`` for delay, jitter and loss,
  with ``tbf`` as its child for the rate. (netem reorders packets whose jitter exceeds their
  spacing; the delay line below keeps them in order.)
- Without it (some kernels are built without ``netem``): ``tbf`` on each end's egress for the
  rate, and delay, jitter and loss by a userspace delay line (:mod:`.delayer`) fed by an
  NFQUEUE rule on each end's *ingress*: the packets ``a`` sends to ``b`` are held in ``b``'s
  namespace. Ingress, not egress, because a packet held on its sender's egress is still
  charged to the sending socket, and TCP's small-queue limit then caps a 2 ms link at a
  fraction of what it carries otherwise (measured: 0.7 against 4.7 Gbit/s). One
  delayer process per link end; it lives in the namespace, so ``ip netns pids`` finds it
  after a crash of the tool, and it dies with the process that started it (PDEATHSIG: so a
  network whose delays must outlive a thread must be made from a thread that lives as long).
  The rule has ``--queue-bypass``: if the delayer is gone, packets pass *undelayed* rather
  than being lost, so callers must check :func:`check_delayers` during a run.

The backend is chosen once per process (``netem`` when the kernel has it);
``SYNCREP_LAB_LINK_BACKEND=delayer`` forces the delay line, ``=netem`` insists on netem.

Each namespace made here has an owner record in ``/run/syncrep-lab/netns`` (the creating
process's pid and start time), so that :func:`ours` can leave alone the namespaces of another
run still going.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syncrep_lab import procs
from syncrep_lab.errors import UserError
from syncrep_lab.network.links import LinkProfile, check_profile

NETNS_DIR = Path("/run/netns")
OWNERS_DIR = Path("/run/syncrep-lab/netns")
DELAYER_MODULE = "syncrep_lab.network.delayer"
BACKEND_ENV = "SYNCREP_LAB_LINK_BACKEND"
MAX_LINKS = 16384  # /30s in 10.213.0.0/16
MAX_NS_NAME = 64
IFNAMSIZ = 15
TBF_LATENCY_MS = 50  # the longest a packet may wait in the rate limiter's queue
NETEM_LIMIT = 100_000  # packets netem may hold: enough for 100 ms at 10 Gbit/s
KERNEL_HZ = 250
CMD_TIMEOUT = 10.0
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_FIX_ROOT = "run syncrep-lab as root, or leave the links out of the experiment"


# -- the plan ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Link:
    """One veth pair, point to point, between endpoints ``a`` and ``b``."""

    a: str
    b: str
    profile: LinkProfile = field(default_factory=LinkProfile)


@dataclass(frozen=True)
class End:
    """One end of a link as it is made: in ``namespace``, interface ``interface``."""

    index: int  # the link's place in the plan; also its NFQUEUE queue number
    endpoint: str
    peer: str
    namespace: str
    interface: str
    address: str  # with its prefix length, e.g. 10.213.0.1/30
    peer_address: str
    profile: LinkProfile


@dataclass
class NetworkPlan:
    """Which namespaces and links to make; deterministic, and serialisable with
    :meth:`to_json` so that a later process (``clean``, a report) knows what was made.
    :func:`set_profile` keeps ``links`` up to date with what is applied; ``backend`` is
    set by :func:`create`."""

    prefix: str
    links: list[Link]
    backend: str = ""

    def endpoints(self) -> list[str]:
        """Endpoint names in order of first appearance."""
        seen: dict[str, None] = {}
        for link in self.links:
            seen.setdefault(link.a)
            seen.setdefault(link.b)
        return list(seen)

    def namespace(self, endpoint: str) -> str:
        if endpoint not in self.endpoints():
            raise UserError(f"no endpoint {endpoint!r} in the network plan "
                            f"(it has {', '.join(self.endpoints()) or 'none'})",
                            "name one of the plan's endpoints")
        return f"{self.prefix}-{endpoint}"

    def namespaces(self) -> list[str]:
        return [f"{self.prefix}-{e}" for e in self.endpoints()]

    def link_index(self, a: str, b: str) -> int:
        """The place of the link joining ``a`` and ``b`` (either order)."""
        for i, link in enumerate(self.links):
            if {link.a, link.b} == {a, b} and a != b:
                return i
        raise UserError(f"no link joins {a!r} and {b!r} in the network plan",
                        f"add a link between {a} and {b}, or address a directly linked peer")

    def interface(self, endpoint: str, peer: str) -> str:
        """The interface in ``endpoint``'s namespace that leads to ``peer``."""
        index = self.link_index(endpoint, peer)
        name = f"to-{peer}"
        return name if len(name) <= IFNAMSIZ else f"l{index}-{peer}"[:IFNAMSIZ]

    def address(self, of: str, seen_from: str) -> str:
        """The IPv4 address of ``of`` on the link joining it to ``seen_from``."""
        index = self.link_index(of, seen_from)
        return _host(index, 1 if self.links[index].a == of else 2)

    def subnets(self) -> list[str]:
        """One ``/30`` per link, e.g. for pg_hba.conf."""
        return [_host(i, 0) + "/30" for i in range(len(self.links))]

    def ends(self) -> list[End]:
        out = []
        for i, link in enumerate(self.links):
            for me, peer in ((link.a, link.b), (link.b, link.a)):
                out.append(End(i, me, peer, f"{self.prefix}-{me}", self.interface(me, peer),
                               self.address(me, peer) + "/30", self.address(peer, me),
                               link.profile))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "backend": self.backend,
                "links": [{"a": k.a, "b": k.b, "profile": k.profile.to_json()}
                          for k in self.links]}

    @classmethod
    def from_json(cls, d: Any) -> NetworkPlan:
        fix = "the saved network plan is damaged: remove the namespaces with `syncrep-lab clean`"
        if not isinstance(d, dict) or not isinstance(d.get("prefix"), str) \
                or not isinstance(d.get("links"), list):
            raise UserError("a network plan needs a prefix and a list of links", fix)
        links = []
        for item in d["links"]:
            if not isinstance(item, dict) or not isinstance(item.get("a"), str) \
                    or not isinstance(item.get("b"), str):
                raise UserError(f"a link of the network plan is malformed: {item!r}", fix)
            links.append(Link(item["a"], item["b"],
                              LinkProfile.from_json(item.get("profile", {}))))
        plan = plan_network(d["prefix"], links)
        backend = d.get("backend", "")
        plan.backend = backend if backend in ("netem", "delayer") else ""
        return plan


def _host(index: int, host: int) -> str:
    base = 4 * index + host
    return f"10.213.{base >> 8}.{base & 255}"


def plan_network(prefix: str, links: list[Link]) -> NetworkPlan:
    """Check names and profiles and lay out the addresses (see the module's docstring)."""
    fix_name = "use letters, digits, '.', '_' and '-' (starting with a letter or digit)"
    if not _NAME.match(prefix or ""):
        raise UserError(f"network prefix {prefix!r} is not a usable name", fix_name)
    if len(links) > MAX_LINKS:
        raise UserError(f"{len(links)} links are more than the {MAX_LINKS} that fit in "
                        "10.213.0.0/16", "use fewer links")
    pairs: set[frozenset[str]] = set()
    for link in links:
        for name in (link.a, link.b):
            if not isinstance(name, str) or not _NAME.match(name):
                raise UserError(f"link endpoint {name!r} is not a usable name", fix_name)
            if len(f"{prefix}-{name}") > MAX_NS_NAME:
                raise UserError(f"namespace name {prefix}-{name} is longer than "
                                f"{MAX_NS_NAME} characters", "use shorter endpoint names")
        if link.a == link.b:
            raise UserError(f"a link joins {link.a!r} to itself",
                            "a link joins two different endpoints")
        pair = frozenset((link.a, link.b))
        if pair in pairs:
            raise UserError(f"two links join {link.a!r} and {link.b!r}",
                            "give each pair of endpoints at most one link")
        pairs.add(pair)
        problems = check_profile(link.profile)
        if problems:
            raise UserError(f"link {link.a}-{link.b}: " + "; ".join(problems),
                            "give delay and jitter in milliseconds (0 or more), loss as "
                            "0..100 %, and a rate such as 100mbit (or none for unlimited)")
    return NetworkPlan(prefix, list(links))


def exec_prefix(ns: str) -> list[str]:
    """The command prefix that runs a program inside namespace ``ns``."""
    return ["ip", "netns", "exec", ns]


# -- running commands ----------------------------------------------------------------------
def _run(cmd: list[str], what: str, *, timeout: float = CMD_TIMEOUT, check: bool = True,
         fix: str | None = None) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max(timeout, 0.5),
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError as exc:
        raise UserError(f"cannot {what}: {cmd[0]} is not installed",
                        "install iproute2 (ip, tc) and iptables") from exc
    except subprocess.TimeoutExpired as exc:
        raise UserError(f"cannot {what}: `{' '.join(cmd)}` did not finish within "
                        f"{max(timeout, 0.5):.0f} s",
                        fix or "check the machine's load, then try again") from exc
    if check and proc.returncode != 0:
        detail = (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}")
        raise UserError(f"cannot {what}: {detail.splitlines()[-1]} (`{' '.join(cmd)}`)",
                        fix or "check that this machine allows network namespaces, and "
                        "remove leftovers with `syncrep-lab clean`")
    return proc


class _Deadline:
    def __init__(self, seconds: float, what: str) -> None:
        self.end = time.monotonic() + seconds
        self.seconds = seconds
        self.what = what

    def left(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise UserError(f"{self.what} took longer than {self.seconds:g} s",
                            "check the machine's load, or allow more time")
        return min(left, CMD_TIMEOUT)


# -- what the machine can do -----------------------------------------------------------------
@dataclass
class _Probe:
    problem: tuple[str, str] | None  # (cause, fix) when namespaces cannot be built at all
    netem: bool
    delayer_problem: tuple[str, str] | None  # why the NFQUEUE delay line cannot work


_probe_result: _Probe | None = None


def _probe() -> _Probe:
    """Try, once per process, what this machine allows, in a throwaway namespace."""
    global _probe_result
    if _probe_result is not None:
        return _probe_result
    if os.geteuid() != 0:
        return _Probe((f"network namespaces need root (this process runs as uid "
                       f"{os.geteuid()})", _FIX_ROOT), False, None)
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return _Probe((f"`{tool}` is not installed, and emulated links need it",
                           "install iproute2"), False, None)
    ns = f"srl-probe-{os.getpid()}"
    try:
        try:
            _claim(ns)
            _run(["ip", "netns", "del", ns], "remove an old probe namespace", check=False)
            _run(["ip", "netns", "add", ns], "create a network namespace",
                 fix="run as root on a kernel with network namespaces")
            _run(["ip", "-n", ns, "link", "add", "p0", "type", "veth", "peer", "name", "p1"],
                 "create a veth pair", fix="use a kernel with veth (CONFIG_VETH)")
            _run(["tc", "-n", ns, "qdisc", "add", "dev", "p1", "root", "tbf", "rate", "1mbit",
                  "burst", "32k", "latency", "50ms"], "set up a tbf rate limiter",
                 fix="use a kernel with the tbf qdisc (CONFIG_NET_SCH_TBF)")
        except UserError as exc:
            result = _Probe((exc.cause, exc.fix or ""), False, None)
        else:
            netem = _run(["tc", "-n", ns, "qdisc", "add", "dev", "p0", "root", "netem",
                          "delay", "1ms"], "try netem", check=False).returncode == 0
            result = _Probe(None, netem, _probe_delayer(ns))
    finally:
        _run(["ip", "netns", "del", ns], "remove the probe namespace", check=False)
        _unclaim(ns)
    _probe_result = result
    return result


def _probe_delayer(ns: str) -> tuple[str, str] | None:
    if shutil.which("iptables") is None:
        return ("the kernel has no netem, and the fallback delay line needs iptables, which "
                "is not installed", "install iptables (or use a kernel with netem)")
    try:
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12).close()
    except OSError as exc:
        return (f"the kernel has no netem, and no netfilter netlink for the fallback delay "
                f"line ({exc})", "use a kernel with netem or with NFQUEUE")
    proc = _run([*exec_prefix(ns), "iptables", "-w", "5", "-t", "mangle", "-A", "PREROUTING",
                 "-i", "p1", "-j", "NFQUEUE", "--queue-num", "0", "--queue-bypass"],
                "try an NFQUEUE rule", check=False)
    if proc.returncode != 0:
        return ("the kernel has neither netem nor a working NFQUEUE iptables target "
                f"({proc.stderr.strip()})", "use a kernel with netem (CONFIG_NET_SCH_NETEM) "
                "or NFQUEUE (CONFIG_NETFILTER_XT_TARGET_NFQUEUE)")
    return None


def netem_available() -> bool:
    """Whether this kernel has the netem qdisc (tried once, then remembered)."""
    return _probe().netem


def choose_backend() -> str:
    """``netem`` or ``delayer``: how delay, jitter and loss will be applied."""
    wanted = os.environ.get(BACKEND_ENV, "").strip()
    if wanted not in ("", "netem", "delayer"):
        raise UserError(f"{BACKEND_ENV}={wanted!r} is neither netem nor delayer",
                        f"set {BACKEND_ENV} to netem or delayer, or unset it")
    if wanted:
        return wanted
    return "netem" if netem_available() else "delayer"


def _support_problem(backend: str | None = None) -> tuple[str, str] | None:
    # Asked every time, not cached with the probe: a process that gave up root (as a
    # test's child does) must not inherit a root's answer.
    if os.geteuid() != 0:
        return (f"network namespaces need root (this is uid {os.geteuid()})",
                "run syncrep-lab as root, or leave [network] and matrix.link out")
    probe = _probe()
    if probe.problem:
        return probe.problem
    backend = backend or choose_backend()
    if backend == "netem" and not probe.netem:
        return ("netem was asked for, but this kernel has no netem qdisc",
                f"unset {BACKEND_ENV} to use the NFQUEUE delay line instead")
    if backend == "delayer":
        return probe.delayer_problem
    return None


def check_network_support(backend: str | None = None) -> str | None:
    """None when this process can build emulated links (with ``backend``, by default the one
    :func:`choose_backend` picks); otherwise why not, and what to do."""
    problem = _support_problem(backend)
    return None if problem is None else f"{problem[0]}; fix: {problem[1]}"


# -- processes inside namespaces -------------------------------------------------------------
def _ns_id(ns: str) -> tuple[int, int] | None:
    try:
        st = os.stat(NETNS_DIR / ns)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def pids_in(ns: str) -> list[int]:
    """Processes inside namespace ``ns`` (what ``ip netns pids`` prints)."""
    ident = _ns_id(ns)
    if ident is None:
        return []
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{entry.name}/ns/net")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == ident:
            out.append(int(entry.name))
    return out


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _delayer_pids(ns: str) -> dict[int, list[str]]:
    """Delayer processes inside ``ns``, with their command lines."""
    out = {}
    for pid in pids_in(ns):
        cmd = _cmdline(pid)
        if DELAYER_MODULE in cmd:
            out[pid] = cmd
    return out


def _option(cmd: list[str], name: str) -> str | None:
    with contextlib.suppress(ValueError, IndexError):
        return cmd[cmd.index(name) + 1]
    return None


def _kill_all(pids: list[int], timeout: float) -> None:
    """SIGTERM, then SIGKILL what is left after ``timeout``; waits (bounded) for them."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 2.0)):
        alive = []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
                alive.append(pid)
        deadline = time.monotonic() + wait
        while alive and time.monotonic() < deadline:
            _reap_children()
            alive = [p for p in alive if _exists(p)]
            if alive:
                time.sleep(0.02)
        pids = alive
        if not pids:
            return


def _exists(pid: int) -> bool:
    return procs.alive(pid)


def _reap_children() -> None:
    """Forget delay lines of ours that have exited (one that never got ready is kept, so that
    waiting for it reports why it failed)."""
    for key, handle in list(_DELAYERS.items()):
        if handle.ready and handle.proc.poll() is not None:
            handle.close()
            del _DELAYERS[key]


# -- the delay line --------------------------------------------------------------------------
class _DelayerHandle:
    """A delayer this process started, with its control pipe."""

    def __init__(self, end: End, profile: LinkProfile) -> None:
        self.end = end
        self.profile = profile
        env = dict(os.environ)
        src = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        cmd = [
            *exec_prefix(end.namespace), sys.executable, "-m", DELAYER_MODULE,
            "--queue", str(end.index), *_delayer_args(profile), "--parent", str(os.getpid()),
            "--tag", f"{end.namespace}/{end.interface}"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, bufsize=0,
                                     start_new_session=True)
        self.buf = b""
        self.ready = False
        self.lock = threading.Lock()  # one question at a time (a fault thread, a probe)

    @property
    def where(self) -> str:
        return f"{self.end.namespace}/{self.end.interface}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _line(self, deadline: float) -> str | None:
        """The next line on its stdout; None on end of file or when the time is up."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode(errors="replace")

    def _failure(self, what: str) -> UserError:
        self.stop(1.0)
        detail = ""
        if self.proc.stderr is not None:
            with contextlib.suppress(OSError, ValueError):
                os.set_blocking(self.proc.stderr.fileno(), False)
                detail = (self.proc.stderr.read() or b"").decode(errors="replace").strip()
        detail = detail.splitlines()[-1] if detail else f"exit status {self.proc.returncode}"
        return UserError(f"the delay line for {self.where} {what}: {detail}",
                         "check that NFQUEUE works in network namespaces on this kernel, and "
                         "remove leftovers with `syncrep-lab clean`")

    def wait_ready(self, deadline: float) -> None:
        line = self._line(deadline)
        if line != "ready":
            raise self._failure("did not start" if line is None else f"said {line!r}")
        self.ready = True

    def ask(self, command: str, timeout: float = 5.0) -> str:
        assert self.proc.stdin is not None
        with self.lock:
            try:
                self.proc.stdin.write(command.encode() + b"\n")
            except (BrokenPipeError, ValueError) as exc:
                raise self._failure("is gone") from exc
            answer = self._line(time.monotonic() + timeout)
        if answer is None:
            raise self._failure(f"did not answer {command.split()[0]!r}")
        return answer

    def set(self, profile: LinkProfile) -> None:
        answer = self.ask("set " + " ".join(_delayer_values(profile)))
        if answer != "ok":
            raise UserError(f"the delay line for {self.where} refused the new profile: "
                            f"{answer}", "check the link's profile")
        self.profile = profile

    def stats(self) -> dict[str, Any] | None:
        if not self.alive():
            return None
        try:
            data = json.loads(self.ask("stats", 2.0))
        except (UserError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def terminate(self) -> None:
        """Ask it to stop (it releases the packets it holds, then exits)."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()

    def stop(self, timeout: float = 3.0) -> None:
        self.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(2.0)
        self.close()

    def close(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


_DELAYERS: dict[tuple[str, str], _DelayerHandle] = {}  # (namespace, interface) -> handle


def _delayer_values(p: LinkProfile) -> list[str]:
    return [f"{p.delay_ms:g}", f"{p.jitter_ms:g}", f"{p.loss_pct:g}"]


def _delayer_args(p: LinkProfile) -> list[str]:
    delay, jitter, loss = _delayer_values(p)
    return ["--delay-ms", delay, "--jitter-ms", jitter, "--loss-pct", loss]


def _rule(end: End) -> list[str]:
    return ["PREROUTING", "-i", end.interface, "-j", "NFQUEUE",
            "--queue-num", str(end.index), "--queue-bypass"]


def _iptables(end: End, op: str) -> list[str]:
    return [*exec_prefix(end.namespace), "iptables", "-w", "5", "-t", "mangle", op, *_rule(end)]


def _kernel_queue(pid: int, queue: int) -> dict[str, int] | None:
    """The kernel's view of a bound NFQUEUE queue, read through the delayer's /proc."""
    try:
        lines = Path(f"/proc/{pid}/net/netfilter/nfnetlink_queue").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) >= 8 and fields[0] == str(queue):
            return {"held": int(fields[2]), "dropped_queue_full": int(fields[5]),
                    "dropped_user": int(fields[6]), "packets": int(fields[7])}
    return None


# -- applying a profile to a link end -------------------------------------------------------
def _tbf(bits: int) -> list[str]:
    """tbf with a burst of 1/HZ of the rate (at least a few packets, at most 32 KiB for slow
    links so that the burst does not swamp the rate) and a 50 ms queue."""
    rate_bytes = bits / 8
    burst = max(int(rate_bytes / KERNEL_HZ), min(32768, max(3200, int(rate_bytes / 50))))
    return ["tbf", "rate", f"{bits}bit", "burst", str(burst), "latency", f"{TBF_LATENCY_MS}ms"]


def _netem(p: LinkProfile) -> list[str]:
    args = ["netem", "limit", str(NETEM_LIMIT)]
    if p.delay_ms or p.jitter_ms:
        args += ["delay", f"{round(p.delay_ms * 1000)}us"]
        if p.jitter_ms:
            args.append(f"{round(p.jitter_ms * 1000)}us")
    if p.loss_pct:
        args += ["loss", f"{p.loss_pct:g}%"]
    return args


def _tc(end: End, *args: str) -> list[str]:
    return ["tc", "-n", end.namespace, "qdisc", *args]


def _apply_qdisc(end: End, p: LinkProfile, backend: str, deadline: _Deadline) -> None:
    where = f"{end.namespace}/{end.interface}"
    bits = p.rate_bits()
    if (backend == "netem" and p.empty) or (backend == "delayer" and bits is None):
        _run(_tc(end, "del", "dev", end.interface, "root"), "remove a qdisc", check=False,
             timeout=deadline.left())
        return
    if backend == "netem":
        _run(_tc(end, "replace", "dev", end.interface, "root", "handle", "1:", *_netem(p)),
             f"set netem on {where}", timeout=deadline.left())
        if bits is None:
            _run(_tc(end, "del", "dev", end.interface, "parent", "1:1", "handle", "10:"),
                 "remove a rate limit", check=False, timeout=deadline.left())
        else:
            _run(_tc(end, "replace", "dev", end.interface, "parent", "1:1", "handle", "10:",
                     *_tbf(bits)), f"set the rate on {where}", timeout=deadline.left())
    else:
        assert bits is not None
        _run(_tc(end, "replace", "dev", end.interface, "root", "handle", "1:", *_tbf(bits)),
             f"set the rate on {where}", timeout=deadline.left())


def _start_delayers(ends: list[tuple[End, LinkProfile]]) -> None:
    """Start (without waiting) a delay line for each end that needs one and has none; a
    change of profile for a running one is sent to it by :func:`_finish_end`."""
    for end, p in ends:
        key = (end.namespace, end.interface)
        handle = _DELAYERS.get(key)
        if not p.delays or (handle is not None and handle.alive() and (
                not handle.ready or _kernel_queue(handle.proc.pid, end.index) is not None)):
            continue
        if handle is not None:  # dead, or dying (its queue is gone): make sure, then replace
            handle.stop(1.0)
        # a delay line left by another process (or a crashed one) holds the queue: stop it
        tag = f"{end.namespace}/{end.interface}"
        _kill_all([pid for pid, cmd in _delayer_pids(end.namespace).items()
                   if _option(cmd, "--tag") == tag], 3.0)
        _DELAYERS[key] = _DelayerHandle(end, p)


def _finish_end(end: End, p: LinkProfile, backend: str, deadline: _Deadline) -> None:
    _apply_qdisc(end, p, backend, deadline)
    if backend != "delayer":
        return
    key = (end.namespace, end.interface)
    handle = _DELAYERS.get(key)
    if p.delays:
        if handle is None or not handle.ready:
            raise UserError(f"the delay line for {end.namespace}/{end.interface} is not "
                            "running", "remove leftovers with `syncrep-lab clean`, then retry")
        if handle.profile != p:
            handle.set(p)
        if _run(_iptables(end, "-C"), "check an NFQUEUE rule", check=False,
                timeout=deadline.left()).returncode != 0:
            _run(_iptables(end, "-A"), f"add the NFQUEUE rule on {end.namespace}",
                 timeout=deadline.left())
    else:
        # the rule goes first, so no packet is sent to a queue nobody reads
        _run(_iptables(end, "-D"), "remove an NFQUEUE rule", check=False,
             timeout=deadline.left())
        if handle is not None:
            handle.stop()
            del _DELAYERS[key]
        tag = f"{end.namespace}/{end.interface}"
        _kill_all([pid for pid, cmd in _delayer_pids(end.namespace).items()
                   if _option(cmd, "--tag") == tag], 3.0)


def _apply(ends: list[tuple[End, LinkProfile]], backend: str, deadline: _Deadline) -> None:
    """Apply profiles to link ends: delay lines first (started together, since each takes a
    moment to import), then qdiscs and rules."""
    if backend == "delayer":
        _start_delayers(ends)
        for end, p in ends:
            handle = _DELAYERS.get((end.namespace, end.interface))
            if p.delays and handle is not None and not handle.ready:
                handle.wait_ready(time.monotonic() + deadline.left())
    for end, p in ends:
        _finish_end(end, p, backend, deadline)


# -- owner records ---------------------------------------------------------------------------
# A namespace's owner record is written *before* the namespace is made, so that a concurrent
# ``clean`` never sees one of ours without it.
def _owner(ns: str) -> int | None:
    """The pid of the live process that made ``ns``, if it is still running."""
    try:
        pid_text, start = (OWNERS_DIR / ns).read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    return pid if _exists(pid) and procs.start_time(pid) == start else None


def _claim(ns: str) -> bool:
    """Write this process's owner record for ``ns``. Returns whether a new record was made
    (so that a failure removes only what it made); raises when a live run owns ``ns``."""
    me = f"{os.getpid()} {procs.start_time(os.getpid())}\n"
    path = OWNERS_DIR / ns
    try:
        OWNERS_DIR.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        owner = _owner(ns)
        if owner is not None and owner != os.getpid():
            raise UserError(f"network namespace {ns} belongs to another run still going "
                            f"(pid {owner})", "wait for it to end, or use another name "
                            "prefix") from None
        with contextlib.suppress(OSError):
            path.write_text(me)
        return False
    except OSError:  # no place for records: go on without them
        return False
    with os.fdopen(fd, "w") as f:
        f.write(me)
    return True


def _unclaim(ns: str) -> None:
    with contextlib.suppress(OSError):
        (OWNERS_DIR / ns).unlink()


# -- the public operations -------------------------------------------------------------------
def create(plan: NetworkPlan, timeout: float = 30) -> None:
    """Make the namespaces, links, addresses, and apply every link's profile.

    All or nothing: when any step fails, everything made so far (namespaces, delay lines,
    owner records) is removed and the error raised; a namespace that existed before is never
    touched. Namespaces are made as the links need them, so a clash with an existing
    namespace is found when its turn comes."""
    plan_network(plan.prefix, plan.links)  # the same checks as when it was planned
    problem = _support_problem()
    if problem:
        raise UserError(*problem)
    backend = choose_backend()
    deadline = _Deadline(timeout, "setting up the emulated network")
    made: list[str] = []
    try:
        for link_end in _link_pairs(plan):
            for end in link_end:
                if end.namespace not in made:
                    _add_namespace(end.namespace, deadline)
                    made.append(end.namespace)
            first, second = link_end
            _run(["ip", "link", "add", first.interface, "netns", first.namespace, "type",
                  "veth", "peer", "name", second.interface, "netns", second.namespace],
                 f"create the veth pair {first.endpoint}-{second.endpoint}",
                 timeout=deadline.left())
            for end in link_end:
                _run(["ip", "-n", end.namespace, "addr", "add", end.address, "dev",
                      end.interface], f"address {end.namespace}/{end.interface}",
                     timeout=deadline.left())
                _run(["ip", "-n", end.namespace, "link", "set", end.interface, "up"],
                     f"bring up {end.namespace}/{end.interface}", timeout=deadline.left())
            if backend == "delayer":  # start them early; they take a moment to import
                _start_delayers([(e, e.profile) for e in link_end])
        for ns in made:
            _wait_links_up(ns, deadline)
        _apply([(e, e.profile) for e in plan.ends()], backend, deadline)
        plan.backend = backend
    except BaseException:
        with contextlib.suppress(Exception):  # the first error is the one to report
            _remove(made, kill_all=False)
        raise


def _link_pairs(plan: NetworkPlan) -> list[tuple[End, End]]:
    ends = plan.ends()
    return [(ends[i], ends[i + 1]) for i in range(0, len(ends), 2)]


def _add_namespace(ns: str, deadline: _Deadline) -> None:
    claimed = _claim(ns)
    proc = _run(["ip", "netns", "add", ns], f"create network namespace {ns}", check=False,
                timeout=deadline.left())
    if proc.returncode != 0:
        if claimed:
            _unclaim(ns)
        if (NETNS_DIR / ns).exists():
            raise UserError(f"network namespace {ns} already exists",
                            "remove it with `syncrep-lab clean` if a crashed run left it, "
                            "or use another name prefix")
        raise UserError(f"cannot create network namespace {ns}: {proc.stderr.strip()}",
                        "run as root on a kernel with network namespaces")
    _run(["ip", "-n", ns, "link", "set", "lo", "up"], f"bring up loopback in {ns}",
         timeout=deadline.left())
    # Addresses are IPv4 only, and so are the delay line's rules: turn IPv6 off, so that no
    # traffic takes an undelayed path (and no router solicitations cross the links).
    _run([*exec_prefix(ns), "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
          "net.ipv6.conf.default.disable_ipv6=1"],
         "turn off IPv6", check=False, timeout=deadline.left())


def _wait_links_up(ns: str, deadline: _Deadline) -> None:
    while True:
        proc = _run(["ip", "-n", ns, "-j", "link", "show"], f"list the links of {ns}",
                    timeout=deadline.left())
        try:
            links = json.loads(proc.stdout)
        except ValueError:
            links = []
        down = [k.get("ifname") for k in links
                if k.get("link_type") == "ether" and k.get("operstate") != "UP"]
        if not down:
            return
        deadline.left()
        time.sleep(0.02)


def set_profile(plan: NetworkPlan, a: str, b: str, profile: LinkProfile) -> None:
    """Change the link joining ``a`` and ``b``, both ends, while it carries traffic (for timed
    link faults); ``plan.links`` then holds the new profile. With the delay line, packets
    already held keep their due time, and later ones never overtake them. A delay line this
    process did not start (the network was made by another process) cannot be told: it is
    replaced, and for the tenth of a second until the new one is ready, packets pass
    undelayed."""
    problems = check_profile(profile)
    if problems:
        raise UserError(f"link {a}-{b}: " + "; ".join(problems),
                        "give delay and jitter in milliseconds (0 or more), loss as 0..100 %, "
                        "and a rate such as 100mbit (or none for unlimited)")
    index = plan.link_index(a, b)
    backend = plan.backend or choose_backend()
    ends = [e for e in plan.ends() if e.index == index]
    _apply([(e, profile) for e in ends], backend, _Deadline(CMD_TIMEOUT, f"changing {a}-{b}"))
    link = plan.links[index]
    plan.links[index] = Link(link.a, link.b, profile)


def check_delayers(plan: NetworkPlan) -> list[str]:
    """Problems with the delay lines a plan needs (empty when every one is running with its
    queue bound). Cheap (no commands run): meant to be called during a run, because a dead
    delay line lets packets through undelayed."""
    if (plan.backend or choose_backend()) != "delayer":
        return []
    problems = []
    for end in plan.ends():
        if not end.profile.delays:
            continue
        where = f"{end.namespace}/{end.interface}"
        handle = _DELAYERS.get((end.namespace, end.interface))
        pid = handle.proc.pid if handle is not None and handle.alive() else None
        if pid is None:
            found = [p for p, cmd in _delayer_pids(end.namespace).items()
                     if _option(cmd, "--tag") == where]
            pid = found[0] if found else None
        if pid is None:
            problems.append(f"the delay line for {where} is not running: its packets pass "
                            "undelayed")
        elif _kernel_queue(pid, end.index) is None:
            problems.append(f"the delay line for {where} (pid {pid}) has not bound queue "
                            f"{end.index}")
    return problems


def readback(plan: NetworkPlan) -> list[dict[str, Any]]:
    """What is really applied, per link end: the interface's address and state as the
    kernel reports them, the qdiscs (``tc qdisc show``), and for the delay line its pid,
    whether it is alive, its parameters, its counters and the kernel's queue counters."""
    backend = plan.backend or choose_backend()
    out = []
    for end in plan.ends():
        item: dict[str, Any] = {
            "link": f"{plan.links[end.index].a}-{plan.links[end.index].b}",
            "endpoint": end.endpoint, "peer": end.peer, "namespace": end.namespace,
            "interface": end.interface, "planned_address": end.address,
            "peer_address": end.peer_address, "profile": end.profile.to_json(),
            "describe": end.profile.describe(), "backend": backend,
        }
        exists = _ns_id(end.namespace) is not None
        item["exists"] = exists
        if exists:
            proc = _run(["ip", "-n", end.namespace, "-j", "addr", "show", "dev", end.interface],
                        "read an interface", check=False)
            try:
                info = json.loads(proc.stdout)[0]
            except (ValueError, IndexError, KeyError):
                info = {}
            item["state"] = info.get("operstate")
            item["addresses"] = [f"{a['local']}/{a['prefixlen']}" for a in
                                 info.get("addr_info", []) if a.get("family") == "inet"]
            item["address"] = item["addresses"][0] if item["addresses"] else None
            item["qdisc"] = _run(_tc(end, "show", "dev", end.interface), "read qdiscs",
                                 check=False).stdout.strip()
        if backend == "delayer":
            item["delayer"] = _delayer_readback(end) if exists else None
            item["rule"] = exists and _run(_iptables(end, "-C"), "check a rule",
                                           check=False).returncode == 0
        out.append(item)
    return out


def _delayer_readback(end: End) -> dict[str, Any] | None:
    where = f"{end.namespace}/{end.interface}"
    handle = _DELAYERS.get((end.namespace, end.interface))
    if handle is not None and handle.alive():
        pid, owned = handle.proc.pid, True
        params: dict[str, Any] = {"delay_ms": handle.profile.delay_ms,
                                  "jitter_ms": handle.profile.jitter_ms,
                                  "loss_pct": handle.profile.loss_pct}
    else:
        found = {p: c for p, c in _delayer_pids(end.namespace).items()
                 if _option(c, "--tag") == where}
        if not found:
            return None
        pid, cmd = next(iter(found.items()))
        owned = False
        params = {key: float(_option(cmd, flag) or 0) for key, flag in
                  (("delay_ms", "--delay-ms"), ("jitter_ms", "--jitter-ms"),
                   ("loss_pct", "--loss-pct"))}
        params["note"] = "as started; a later change by its parent is not visible"
    return {"pid": pid, "alive": _exists(pid), "owned": owned, "queue": end.index,
            "params": params, "stats": handle.stats() if owned and handle else None,
            "kernel_queue": _kernel_queue(pid, end.index)}


def destroy(plan: NetworkPlan) -> None:
    """Stop the plan's delay lines and delete its namespaces (the veths go with them).
    Idempotent and bounded in time; processes other than delay lines still inside a
    namespace (servers not yet stopped) are left alone: the namespace then lingers, nameless,
    until they exit."""
    _remove(plan.namespaces(), kill_all=False)


def ours(prefix_root: str = "srl-", *, include_live: bool = False) -> list[str]:
    """Namespaces under /run/netns whose names start with ``prefix_root`` and whose creating
    process is gone: the leftovers of a crashed or killed run. The namespaces of a run still
    going (another test session, a second terminal) are left out unless ``include_live``,
    so that ``clean`` never pulls the network from under a running experiment."""
    try:
        names = sorted(e.name for e in os.scandir(NETNS_DIR) if e.name.startswith(prefix_root))
    except OSError:
        return []
    if not include_live:
        names = [n for n in names if _owner(n) is None]
    return names


def destroy_namespaces(names: list[str]) -> None:
    """For ``clean`` after a crash: kill every process still inside these namespaces (delay
    lines, and servers a crashed run left), then delete them."""
    for name in names:
        if not _NAME.match(name):
            raise UserError(f"{name!r} is not a network namespace name",
                            "pass names as listed by ours()")
    _remove(names, kill_all=True)


def _remove(names: list[str], *, kill_all: bool) -> None:
    wanted = set(names)
    handles = [(k, h) for k, h in _DELAYERS.items() if k[0] in wanted]
    for _key, handle in handles:
        handle.terminate()
    deadline = time.monotonic() + 3.0
    for key, handle in handles:
        handle.stop(max(0.1, deadline - time.monotonic()))
        _DELAYERS.pop(key, None)
    victims: list[int] = []
    for name in names:
        victims += pids_in(name) if kill_all else list(_delayer_pids(name))
    if victims:
        _kill_all(victims, 3.0)
    left = []
    for name in names:
        if (NETNS_DIR / name).exists():
            with contextlib.suppress(UserError):
                _run(["ip", "netns", "del", name], f"delete network namespace {name}",
                     check=False)
        if (NETNS_DIR / name).exists():
            left.append(name)
        else:
            _unclaim(name)
    if left:
        raise UserError(f"could not delete network namespace(s) {', '.join(left)}",
                        "delete them with `ip netns del NAME` as root")
