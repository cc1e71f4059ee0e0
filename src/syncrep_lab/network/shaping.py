"""Applying a link's profile to its two ends: qdiscs, the NFQUEUE rule and the delay line,
when the network is made (:func:`.netns.create`) and while it carries traffic
(:func:`set_profile`).

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
  than being lost, so callers must check :func:`.readback.check_delayers` during a run.

Which of the two is used is :func:`.capabilities.choose_backend`'s choice.
"""

from __future__ import annotations

import time

from syncrep_lab.errors import UserError
from syncrep_lab.network.capabilities import choose_backend
from syncrep_lab.network.commands import CMD_TIMEOUT, Deadline, run
from syncrep_lab.network.delayer_handle import DELAYERS, DelayerHandle, kernel_queue
from syncrep_lab.network.links import LinkProfile, check_profile
from syncrep_lab.network.plan import End, Link, NetworkPlan
from syncrep_lab.network.processes import delayer_pids, kill_all, option
from syncrep_lab.network.tc import iptables, netem, qdisc, tbf


def _apply_qdisc(end: End, p: LinkProfile, backend: str, deadline: Deadline) -> None:
    where = f"{end.namespace}/{end.interface}"
    bits = p.rate_bits()
    if (backend == "netem" and p.empty) or (backend == "delayer" and bits is None):
        run(qdisc(end, "del", "dev", end.interface, "root"), "remove a qdisc", check=False,
            timeout=deadline.left())
        return
    if backend == "netem":
        run(qdisc(end, "replace", "dev", end.interface, "root", "handle", "1:", *netem(p)),
            f"set netem on {where}", timeout=deadline.left())
        if bits is None:
            run(qdisc(end, "del", "dev", end.interface, "parent", "1:1", "handle", "10:"),
                "remove a rate limit", check=False, timeout=deadline.left())
        else:
            run(qdisc(end, "replace", "dev", end.interface, "parent", "1:1", "handle", "10:",
                      *tbf(bits)), f"set the rate on {where}", timeout=deadline.left())
    else:
        assert bits is not None
        run(qdisc(end, "replace", "dev", end.interface, "root", "handle", "1:", *tbf(bits)),
            f"set the rate on {where}", timeout=deadline.left())


def start_delayers(ends: list[tuple[End, LinkProfile]]) -> None:
    """Start (without waiting) a delay line for each end that needs one and has none; a
    change of profile for a running one is sent to it by :func:`_finish_end`."""
    for end, p in ends:
        key = (end.namespace, end.interface)
        handle = DELAYERS.get(key)
        if not p.delays or (handle is not None and handle.alive() and (
                not handle.ready or kernel_queue(handle.proc.pid, end.index) is not None)):
            continue
        if handle is not None:  # dead, or dying (its queue is gone): make sure, then replace
            handle.stop(1.0)
        # a delay line left by another process (or a crashed one) holds the queue: stop it
        tag = f"{end.namespace}/{end.interface}"
        kill_all([pid for pid, cmd in delayer_pids(end.namespace).items()
                  if option(cmd, "--tag") == tag], 3.0)
        DELAYERS[key] = DelayerHandle(end, p)


def _finish_end(end: End, p: LinkProfile, backend: str, deadline: Deadline) -> None:
    _apply_qdisc(end, p, backend, deadline)
    if backend != "delayer":
        return
    key = (end.namespace, end.interface)
    handle = DELAYERS.get(key)
    if p.delays:
        if handle is None or not handle.ready:
            raise UserError(f"the delay line for {end.namespace}/{end.interface} is not "
                            "running", "remove leftovers with `syncrep-lab clean`, then retry")
        if handle.profile != p:
            handle.set(p)
        if run(iptables(end, "-C"), "check an NFQUEUE rule", check=False,
               timeout=deadline.left()).returncode != 0:
            run(iptables(end, "-A"), f"add the NFQUEUE rule on {end.namespace}",
                timeout=deadline.left())
    else:
        # the rule goes first, so no packet is sent to a queue nobody reads
        run(iptables(end, "-D"), "remove an NFQUEUE rule", check=False,
            timeout=deadline.left())
        if handle is not None:
            handle.stop()
            del DELAYERS[key]
        tag = f"{end.namespace}/{end.interface}"
        kill_all([pid for pid, cmd in delayer_pids(end.namespace).items()
                  if option(cmd, "--tag") == tag], 3.0)


def apply(ends: list[tuple[End, LinkProfile]], backend: str, deadline: Deadline) -> None:
    """Apply profiles to link ends: delay lines first (started together, since each takes a
    moment to import), then qdiscs and rules."""
    if backend == "delayer":
        start_delayers(ends)
        for end, p in ends:
            handle = DELAYERS.get((end.namespace, end.interface))
            if p.delays and handle is not None and not handle.ready:
                handle.wait_ready(time.monotonic() + deadline.left())
    for end, p in ends:
        _finish_end(end, p, backend, deadline)


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
    apply([(e, profile) for e in ends], backend, Deadline(CMD_TIMEOUT, f"changing {a}-{b}"))
    link = plan.links[index]
    plan.links[index] = Link(link.a, link.b, profile)
