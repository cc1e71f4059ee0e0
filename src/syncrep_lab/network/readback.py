"""What is really applied, read back from the kernel and the delay lines: per link end
(:func:`readback`, stored with a run's results), and whether every delay line a plan needs
is running (:func:`check_delayers`, cheap enough to call during a run).
"""

from __future__ import annotations

import json
from typing import Any

from syncrep_lab import procs
from syncrep_lab.network.capabilities import choose_backend
from syncrep_lab.network.commands import run
from syncrep_lab.network.delayer_handle import DELAYERS, kernel_queue
from syncrep_lab.network.plan import End, NetworkPlan
from syncrep_lab.network.processes import delayer_pids, ns_id, option
from syncrep_lab.network.tc import iptables, qdisc


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
        handle = DELAYERS.get((end.namespace, end.interface))
        pid = handle.proc.pid if handle is not None and handle.alive() else None
        if pid is None:
            found = [p for p, cmd in delayer_pids(end.namespace).items()
                     if option(cmd, "--tag") == where]
            pid = found[0] if found else None
        if pid is None:
            problems.append(f"the delay line for {where} is not running: its packets pass "
                            "undelayed")
        elif kernel_queue(pid, end.index) is None:
            problems.append(f"the delay line for {where} (pid {pid}) has not bound queue "
                            f"{end.index}")
    return problems


def delay_line_counters(plan: NetworkPlan) -> dict[tuple[str, str], dict[str, Any]]:
    """The counters of each delay line of the plan this process started, by (namespace,
    interface): the start of a window network/delivery.py takes the difference over."""
    out = {}
    for end in plan.ends():
        handle = DELAYERS.get((end.namespace, end.interface))
        stats = handle.stats() if handle is not None and end.profile.delays else None
        if stats is not None:
            out[(end.namespace, end.interface)] = stats
    return out


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
        exists = ns_id(end.namespace) is not None
        item["exists"] = exists
        if exists:
            proc = run(["ip", "-n", end.namespace, "-j", "addr", "show", "dev", end.interface],
                       "read an interface", check=False)
            try:
                info = json.loads(proc.stdout)[0]
            except (ValueError, IndexError, KeyError):
                info = {}
            item["state"] = info.get("operstate")
            item["addresses"] = [f"{a['local']}/{a['prefixlen']}" for a in
                                 info.get("addr_info", []) if a.get("family") == "inet"]
            item["address"] = item["addresses"][0] if item["addresses"] else None
            item["qdisc"] = run(qdisc(end, "show", "dev", end.interface), "read qdiscs",
                                check=False).stdout.strip()
        if backend == "delayer":
            item["delayer"] = _delayer_readback(end) if exists else None
            item["rule"] = exists and run(iptables(end, "-C"), "check a rule",
                                          check=False).returncode == 0
        out.append(item)
    return out


def _delayer_readback(end: End) -> dict[str, Any] | None:
    where = f"{end.namespace}/{end.interface}"
    handle = DELAYERS.get((end.namespace, end.interface))
    if handle is not None and handle.alive():
        pid, owned = handle.proc.pid, True
        params: dict[str, Any] = {"delay_ms": handle.profile.delay_ms,
                                  "jitter_ms": handle.profile.jitter_ms,
                                  "loss_pct": handle.profile.loss_pct}
    else:
        found = {p: c for p, c in delayer_pids(end.namespace).items()
                 if option(c, "--tag") == where}
        if not found:
            return None
        pid, cmd = next(iter(found.items()))
        owned = False
        params = {key: float(option(cmd, flag) or 0) for key, flag in
                  (("delay_ms", "--delay-ms"), ("jitter_ms", "--jitter-ms"),
                   ("loss_pct", "--loss-pct"))}
        params["note"] = "as started; a later change by its parent is not visible"
    return {"pid": pid, "alive": procs.alive(pid), "owned": owned, "queue": end.index,
            "params": params, "stats": handle.stats() if owned and handle else None,
            "kernel_queue": kernel_queue(pid, end.index)}
