"""CPU of the processes of a node on an SSH host: /proc read there (one command over
SSH, hosts/remote.proc_snapshot) before and after a probed repeat, the difference
per role. Processes born during the repeat count from zero; those that also ended
during it are not seen (their CPU is in the postmaster's cutime/cstime, which is
added as the role ``backend`` when it grew), as with the local /proc probe."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from typing import Any

from syncrep_lab.pg.roles import role_of_title
from syncrep_lab.store import ProcCostRow


def postmaster_of(snapshot: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The postmaster among a node's processes: the one whose parent is not one of them."""
    pids = {int(p["pid"]) for p in snapshot}
    return next((p for p in snapshot if int(p["ppid"]) not in pids), None)


def role_costs(node: str, before: list[dict[str, Any]], after: list[dict[str, Any]], *,
               walsenders: dict[int, str] | None = None, ignore: Collection[int] = ()
               ) -> list[ProcCostRow]:
    """proc_costs rows, one per role. ``walsenders`` names each walsender by the standby it serves
    (``walsender:b``); ``ignore``: pids that are the tool's own sessions."""
    first = {int(p["pid"]): p for p in before}
    postmaster = postmaster_of(after)
    names = walsenders or {}
    sums: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0, 0])
    for p in after:
        if int(p["pid"]) in ignore:
            continue
        tick_ms = 1000.0 / int(p.get("clk_tck") or 100)
        base = first.get(int(p["pid"]), {})
        role = "postmaster" if p is postmaster else role_of_title(str(p["title"]))
        if role == "walsender" and names.get(int(p["pid"])):
            role = f"walsender:{names[int(p['pid'])]}"
        row = sums[role]
        row[0] += 1
        row[1] += (int(p["utime"]) - int(base.get("utime", 0))) * tick_ms
        row[2] += (int(p["stime"]) - int(base.get("stime", 0))) * tick_ms
        row[3] += int(p["voluntary"]) - int(base.get("voluntary", 0))
        row[4] += int(p["involuntary"]) - int(base.get("involuntary", 0))
    if postmaster is not None:
        base = first.get(int(postmaster["pid"]), {})
        tick_ms = 1000.0 / int(postmaster.get("clk_tck") or 100)
        reaped_user = (int(postmaster["cutime"]) - int(base.get("cutime", 0))) * tick_ms
        reaped_sys = (int(postmaster["cstime"]) - int(base.get("cstime", 0))) * tick_ms
        if reaped_user or reaped_sys:
            row = sums["backend"]
            row[1] += reaped_user
            row[2] += reaped_sys
    return [ProcCostRow(node, role, int(v[0]), round(v[1], 3), round(v[2], 3), int(v[3]),
                        int(v[4])) for role, v in sorted(sums.items())]
