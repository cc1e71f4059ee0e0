"""A run's cells as rows: the figures the ``cells`` table holds, with each cell's axes,
parameters, notes, ratio to its baseline, its commit anatomy against its baseline's
(``anatomy_to_baseline``) and where its noise sits (``noise``).
``results`` prints them (and exports them as JSON or CSV), the report's tables start
from them; read from the store only, so they can be shown again at any time after (or
during) a run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from syncrep_lab.analysis.noise import CellNoise, cell_noise, repeat_overhead
from syncrep_lab.analysis.ratios import (
    BaselineAnatomy,
    BaselineRatio,
    anatomy_to_baseline,
    ratios_to_baseline,
)
from syncrep_lab.analysis.resources import Resources, cell_resources
from syncrep_lab.analysis.verdict import Verdict
from syncrep_lab.json_form import JSON
from syncrep_lab.store import Store, StoredCell

COLUMNS = ("idx", "label", "status", "repeats", "stop_reason", "tps_mean", "tps_ci_low",
           "tps_ci_high", "tps_ci_rel", "lat_mean_ms", "lat_p50_ms", "lat_p90_ms",
           "lat_p99_ms", "lat_p999_ms", "lat_max_ms", "transactions", "failed", "error")


@dataclass(frozen=True)
class TopCost:
    """The role whose CPU per commit is the largest: where a commit's CPU goes first."""

    node: str
    role: str
    cpu_us: float
    source: str  # a key of costs.CPU_SOURCES

    def to_json(self) -> dict[str, JSON]:
        return {"node": self.node, "role": self.role, "cpu_us": self.cpu_us,
                "source": self.source}


@dataclass(frozen=True)
class RowSummary:
    """What ``results`` and the report add to a row beside the store's figures: its
    verdicts, the model's ceiling, the leading verdict's title and its largest cost."""

    verdicts: tuple[Verdict, ...]
    ceiling: str | None
    limit: str  # '' without a diagnosis
    top_cost: TopCost | None

    def to_json(self) -> dict[str, JSON]:
        return {"verdicts": [v.to_json() for v in self.verdicts], "ceiling": self.ceiling,
                "limit": self.limit,
                "top_cost": self.top_cost.to_json() if self.top_cost else None}


@dataclass(frozen=True)
class CellRow:
    """A cell as ``results`` shows it; :meth:`to_json` is ``results --json``'s row."""

    cell: StoredCell  # the cells table's row: its COLUMNS, axes, params and notes
    run: str
    ratio_to_baseline: BaselineRatio | None
    anatomy_to_baseline: BaselineAnatomy | None
    # each disk and network interface a second of the measured repeats, and the CPU
    # quotas (analysis/resources.py)
    resources: Resources
    noise: CellNoise | None  # None in an observe window: its slices are not repeats
    summary: RowSummary | None = None  # report.data.cell_summaries's

    @property
    def top_cost(self) -> TopCost | None:
        return self.summary.top_cost if self.summary else None

    def column(self, name: str) -> JSON:
        """One of COLUMNS by name (the CSV's)."""
        value: JSON = getattr(self.cell, name)
        return value

    def summed(self, summary: RowSummary) -> CellRow:
        return replace(self, summary=summary)

    def to_json(self) -> dict[str, JSON]:
        """The row as ``results --json`` and the report print it: its ratio and its
        commit anatomy against its baseline's, and its noise, in their JSON form; the
        summary's keys last, where there is one."""
        out: dict[str, JSON] = {name: self.column(name) for name in COLUMNS}
        out.update({
            "axes": self.cell.axes, "params": self.cell.params, "run": self.run,
            "ratio_to_baseline": (self.ratio_to_baseline.to_json()
                                  if self.ratio_to_baseline is not None else None),
            "anatomy_to_baseline": (self.anatomy_to_baseline.to_json()
                                    if self.anatomy_to_baseline is not None else None),
            "notes": list(self.cell.notes), **self.resources.to_json(),
            "noise": self.noise.to_json() if self.noise is not None else None})
        if self.summary is not None:
            out.update(self.summary.to_json())
        return out


def cell_rows(folder: Path) -> list[CellRow]:
    store = Store(folder, create=False)
    try:
        run = store.run()
        ratios = ratios_to_baseline(store, run)
        anatomies = anatomy_to_baseline(store, run)
        overhead = None if run.kind == "observe" else repeat_overhead(store, run.id)
        rows = []
        for cell in store.cells(run.id):
            rows.append(CellRow(
                cell, run=run.name, ratio_to_baseline=ratios.get(cell.idx),
                anatomy_to_baseline=anatomies.get(cell.idx),
                resources=cell_resources(store, cell.id),
                # an observe window's slices are consecutive, not repeats: no split
                noise=None if run.kind == "observe" else cell_noise(store, cell, overhead)))
        return rows
    finally:
        store.close()
