"""A run's cells as rows: the figures the ``cells`` table holds, with each cell's axes,
parameters, notes, ratio to its baseline, its commit anatomy against its baseline's
(``anatomy_to_baseline``) and where its noise sits (``noise``).
``results`` prints them (and exports them as JSON or CSV), the report's tables start
from them; read from the store only, so they can be shown again at any time after (or
during) a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from syncrep_lab.analysis.noise import cell_noise, repeat_overhead
from syncrep_lab.analysis.ratios import anatomy_to_baseline, ratios_to_baseline
from syncrep_lab.analysis.resources import cell_resources
from syncrep_lab.store import Store

COLUMNS = ("idx", "label", "status", "repeats", "stop_reason", "tps_mean", "tps_ci_low",
           "tps_ci_high", "tps_ci_rel", "lat_mean_ms", "lat_p50_ms", "lat_p90_ms",
           "lat_p99_ms", "lat_p999_ms", "lat_max_ms", "transactions", "failed", "error")


def row_json(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row as ``results --json`` and the report print it: its ratio and its commit
    anatomy against its baseline's, and its noise, in their JSON form."""
    out = dict(row)
    for key in ("ratio_to_baseline", "anatomy_to_baseline", "noise"):
        if out.get(key) is not None:
            out[key] = out[key].to_json()
    return out


def cell_rows(folder: Path) -> list[dict[str, Any]]:
    store = Store(folder, create=False)
    try:
        run = store.run()
        ratios = ratios_to_baseline(store, run)
        anatomies = anatomy_to_baseline(store, run)
        overhead = None if run.kind == "observe" else repeat_overhead(store, run.id)
        rows = []
        for cell in store.cells(run.id):
            row = {k: getattr(cell, k) for k in COLUMNS}
            row["axes"] = cell.axes
            row["params"] = cell.params
            row["run"] = run.name
            row["ratio_to_baseline"] = ratios.get(cell.idx)
            row["anatomy_to_baseline"] = anatomies.get(cell.idx)
            row["notes"] = cell.notes
            row.update(cell_resources(store, cell.id))  # disks, network, quotas
            # an observe window's slices are consecutive, not repeats: no split
            row["noise"] = (None if run.kind == "observe"
                            else cell_noise(store, cell, overhead))
            rows.append(row)
        return rows
    finally:
        store.close()
