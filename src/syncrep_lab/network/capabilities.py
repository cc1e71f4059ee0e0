"""What this machine can do for emulated links, tried once per process in a throwaway
namespace (root, iproute2, veth, ``tbf``, ``netem``, and for the fallback delay line
iptables and NFQUEUE), and which backend applies delay, jitter and loss.

The backend is chosen once per process (``netem`` when the kernel has it);
``SYNCREP_LAB_LINK_BACKEND=delayer`` forces the delay line, ``=netem`` insists on netem.
"""

from __future__ import annotations

import os
import shutil
import socket
from dataclasses import dataclass

from syncrep_lab.errors import UserError
from syncrep_lab.network.commands import exec_prefix, run
from syncrep_lab.network.owners import claim, unclaim

BACKEND_ENV = "SYNCREP_LAB_LINK_BACKEND"
_FIX_ROOT = "run syncrep-lab as root, or leave the links out of the experiment"


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
            claim(ns)
            run(["ip", "netns", "del", ns], "remove an old probe namespace", check=False)
            run(["ip", "netns", "add", ns], "create a network namespace",
                fix="run as root on a kernel with network namespaces")
            run(["ip", "-n", ns, "link", "add", "p0", "type", "veth", "peer", "name", "p1"],
                "create a veth pair", fix="use a kernel with veth (CONFIG_VETH)")
            run(["tc", "-n", ns, "qdisc", "add", "dev", "p1", "root", "tbf", "rate", "1mbit",
                 "burst", "32k", "latency", "50ms"], "set up a tbf rate limiter",
                fix="use a kernel with the tbf qdisc (CONFIG_NET_SCH_TBF)")
        except UserError as exc:
            result = _Probe((exc.cause, exc.fix or ""), False, None)
        else:
            netem = run(["tc", "-n", ns, "qdisc", "add", "dev", "p0", "root", "netem",
                         "delay", "1ms"], "try netem", check=False).returncode == 0
            result = _Probe(None, netem, _probe_delayer(ns))
    finally:
        run(["ip", "netns", "del", ns], "remove the probe namespace", check=False)
        unclaim(ns)
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
    proc = run([*exec_prefix(ns), "iptables", "-w", "5", "-t", "mangle", "-A", "PREROUTING",
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


def support_problem(backend: str | None = None) -> tuple[str, str] | None:
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
    problem = support_problem(backend)
    return None if problem is None else f"{problem[0]}; fix: {problem[1]}"
