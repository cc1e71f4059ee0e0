"""Cost per commit: for each cell, node and process role, CPU microseconds, context
switches and system calls of each kind per committed transaction, with
confidence intervals over the repeats; and where each role's time went by wait
event. Pure functions over the store: nothing here runs anything.

Per-commit figures are the stable ones on a noisy machine: a cell's TPS can
move by tens of percent between repeats while what one commit costs each
process moves by a few.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from syncrep_lab.experiment.store import Store
from syncrep_lab.measure.stats import mean_ci

KEY_SYSCALLS = ("epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "kill", "futex",
                "read", "write", "sendto", "recvfrom", "fdatasync", "close")


def _ci(values: list[float]) -> dict[str, float | None]:
    ci = mean_ci(values)
    return {"mean": ci.mean, "low": ci.low, "high": ci.high}


def cell_costs(store: Store, cell_id: int) -> dict[str, Any]:
    """Per-commit costs and wait shares of one cell, over its repeats."""
    repeats = {int(r["id"]): int(r["transactions"]) for r in store.repeats(cell_id)}
    per: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    probe_status: dict[str, set[str]] = defaultdict(set)
    for row in store.db.execute(
            f"select * from probes where repeat_id in ({','.join('?' * len(repeats))})",
            tuple(repeats)):
        probe_status[row["probe"]].add(row["status"] + (f": {row['reason']}"
                                                          if row["reason"] else ""))
    for row in store.db.execute(
            f"select * from costs where repeat_id in ({','.join('?' * len(repeats))})",
            tuple(repeats)):
        commits = repeats[int(row["repeat_id"])]
        if commits <= 0:
            continue
        figures = per[(row["node"], row["role"])]
        figures["cpu_us"].append(1000.0 * row["cpu_ms"] / commits)
        figures["context_switches"].append(row["context_switches"] / commits)
        for name, n in json.loads(row["syscalls_json"]).items():
            figures[f"syscall:{name}"].append(n / commits)
    roles = []
    for (node, role), figures in sorted(per.items()):
        syscalls = {k.removeprefix("syscall:"): _ci(v) for k, v in figures.items()
                    if k.startswith("syscall:")}
        roles.append({
            "node": node, "role": role,
            "cpu_us_per_commit": _ci(figures["cpu_us"]),
            "context_switches_per_commit": _ci(figures["context_switches"]),
            "syscalls_per_commit": syscalls,
            "repeats": len(figures["cpu_us"]),
        })
    waits: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    totals: dict[tuple[str, str], int] = defaultdict(int)
    for row in store.db.execute(
            f"select node, role, wait_type, wait_event, sum(samples) as n from waits "
            f"where repeat_id in ({','.join('?' * len(repeats))}) "
            f"group by node, role, wait_type, wait_event", tuple(repeats)):
        waits[(row["node"], row["role"])][f"{row['wait_type']}:{row['wait_event']}"] = row["n"]
        totals[(row["node"], row["role"])] += row["n"]
    shares = [{"node": node, "role": role, "samples": totals[(node, role)],
               "share": {k: v / totals[(node, role)] for k, v in
                         sorted(events.items(), key=lambda kv: -kv[1])}}
              for (node, role), events in sorted(waits.items()) if totals[(node, role)]]
    return {"roles": roles, "waits": shares,
            "probes": {k: sorted(v) for k, v in probe_status.items()}}


def run_costs(folder: Path) -> list[dict[str, Any]]:
    store = Store(folder, create=False)
    try:
        run = store.run()
        out = []
        for cell in store.cells(int(run["id"])):
            if cell["status"] != "done":
                continue
            out.append({"idx": cell["idx"], "label": cell["label"],
                        "tps_mean": cell["tps_mean"], **cell_costs(store, int(cell["id"]))})
        return out
    finally:
        store.close()
