"""The namespaces' lifecycle: make a plan's namespaces, veth pairs and addresses and apply
its links' profiles (:func:`create`), remove them (:func:`destroy`), and for ``clean`` find
and remove what a crashed run left (:func:`ours`, :func:`destroy_namespaces`).

What is made is laid out by :mod:`.plan`. The endpoints of a link reach each other over it
and nothing else: there is no routing between links and no way out to the host's network,
so the addresses can never clash with the machine's own. Unix sockets in the file system
still work across namespaces.

Each namespace made here has an owner record (:mod:`.owners`), so that :func:`ours` can
leave alone the namespaces of another run still going.
"""

from __future__ import annotations

import contextlib
import json
import os
import time

from syncrep_lab.errors import UserError
from syncrep_lab.network import processes
from syncrep_lab.network.capabilities import choose_backend, support_problem
from syncrep_lab.network.commands import NETNS_DIR, Deadline, exec_prefix, run
from syncrep_lab.network.delayer_handle import DELAYERS
from syncrep_lab.network.owners import claim, owner, unclaim
from syncrep_lab.network.plan import NAME, End, NetworkPlan, plan_network
from syncrep_lab.network.shaping import apply, start_delayers


def create(plan: NetworkPlan, timeout: float = 30) -> None:
    """Make the namespaces, links, addresses, and apply every link's profile.

    All or nothing: when any step fails, everything made so far (namespaces, delay lines,
    owner records) is removed and the error raised; a namespace that existed before is never
    touched. Namespaces are made as the links need them, so a clash with an existing
    namespace is found when its turn comes."""
    plan_network(plan.prefix, plan.links)  # the same checks as when it was planned
    problem = support_problem()
    if problem:
        raise UserError(*problem)
    backend = choose_backend()
    deadline = Deadline(timeout, "setting up the emulated network")
    made: list[str] = []
    try:
        for link_end in _link_pairs(plan):
            for end in link_end:
                if end.namespace not in made:
                    _add_namespace(end.namespace, deadline)
                    made.append(end.namespace)
            first, second = link_end
            run(["ip", "link", "add", first.interface, "netns", first.namespace, "type",
                 "veth", "peer", "name", second.interface, "netns", second.namespace],
                f"create the veth pair {first.endpoint}-{second.endpoint}",
                timeout=deadline.left())
            for end in link_end:
                run(["ip", "-n", end.namespace, "addr", "add", end.address, "dev",
                     end.interface], f"address {end.namespace}/{end.interface}",
                    timeout=deadline.left())
                run(["ip", "-n", end.namespace, "link", "set", end.interface, "up"],
                    f"bring up {end.namespace}/{end.interface}", timeout=deadline.left())
            if backend == "delayer":  # start them early; they take a moment to import
                start_delayers([(e, e.profile) for e in link_end])
        for ns in made:
            _wait_links_up(ns, deadline)
        apply([(e, e.profile) for e in plan.ends()], backend, deadline)
        plan.backend = backend
    except BaseException:
        with contextlib.suppress(Exception):  # the first error is the one to report
            _remove(made, kill_all=False)
        raise


def _link_pairs(plan: NetworkPlan) -> list[tuple[End, End]]:
    ends = plan.ends()
    return [(ends[i], ends[i + 1]) for i in range(0, len(ends), 2)]


def _add_namespace(ns: str, deadline: Deadline) -> None:
    claimed = claim(ns)
    proc = run(["ip", "netns", "add", ns], f"create network namespace {ns}", check=False,
               timeout=deadline.left())
    if proc.returncode != 0:
        if claimed:
            unclaim(ns)
        if (NETNS_DIR / ns).exists():
            raise UserError(f"network namespace {ns} already exists",
                            "remove it with `syncrep-lab clean` if a crashed run left it, "
                            "or use another name prefix")
        raise UserError(f"cannot create network namespace {ns}: {proc.stderr.strip()}",
                        "run as root on a kernel with network namespaces")
    run(["ip", "-n", ns, "link", "set", "lo", "up"], f"bring up loopback in {ns}",
        timeout=deadline.left())
    # Addresses are IPv4 only, and so are the delay line's rules: turn IPv6 off, so that no
    # traffic takes an undelayed path (and no router solicitations cross the links).
    run([*exec_prefix(ns), "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
         "net.ipv6.conf.default.disable_ipv6=1"],
        "turn off IPv6", check=False, timeout=deadline.left())


def _wait_links_up(ns: str, deadline: Deadline) -> None:
    while True:
        proc = run(["ip", "-n", ns, "-j", "link", "show"], f"list the links of {ns}",
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
        names = [n for n in names if owner(n) is None]
    return names


def destroy_namespaces(names: list[str]) -> None:
    """For ``clean`` after a crash: kill every process still inside these namespaces (delay
    lines, and servers a crashed run left), then delete them."""
    for name in names:
        if not NAME.match(name):
            raise UserError(f"{name!r} is not a network namespace name",
                            "pass names as listed by ours()")
    _remove(names, kill_all=True)


def _remove(names: list[str], *, kill_all: bool) -> None:
    wanted = set(names)
    handles = [(k, h) for k, h in DELAYERS.items() if k[0] in wanted]
    for _key, handle in handles:
        handle.terminate()
    deadline = time.monotonic() + 3.0
    for key, handle in handles:
        handle.stop(max(0.1, deadline - time.monotonic()))
        DELAYERS.pop(key, None)
    victims: list[int] = []
    for name in names:
        victims += processes.pids_in(name) if kill_all else list(processes.delayer_pids(name))
    if victims:
        processes.kill_all(victims, 3.0)
    left = []
    for name in names:
        if (NETNS_DIR / name).exists():
            with contextlib.suppress(UserError):
                run(["ip", "netns", "del", name], f"delete network namespace {name}",
                    check=False)
        if (NETNS_DIR / name).exists():
            left.append(name)
        else:
            unclaim(name)
    if left:
        raise UserError(f"could not delete network namespace(s) {', '.join(left)}",
                        "delete them with `ip netns del NAME` as root")
