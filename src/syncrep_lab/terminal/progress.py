"""The live display of a run: cells done of total, the current cell and phase, live
TPS from pgbench's per-second progress, and an ETA from the cells finished so far."""

from __future__ import annotations

import time
from pathlib import Path
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from syncrep_lab.plan.matrix import Cell, Plan
from syncrep_lab.readers.pgbench_log import ProgressSample
from syncrep_lab.run.context import Events
from syncrep_lab.terminal import make_console


class RunDisplay:
    def __init__(self, out: Path, console: Console | None = None) -> None:
        self.console = console or make_console(stderr=True)
        self.out = out
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("ETA {task.fields[eta]}"),
            TextColumn("{task.fields[now]}"), console=self.console, transient=False,
        )
        self.task = self.progress.add_task("cells", total=None, eta="?", now="")
        self.started = time.monotonic()
        self.done_at_start = 0
        self.finished = 0
        self.total = 0
        self.current = ""
        self.events = Events(plan=self._plan, cell_start=self._cell_start, phase=self._phase,
                             live=self._live, repeat=self._repeat, cell_end=self._cell_end,
                             message=self._message)

    def __enter__(self) -> RunDisplay:
        self.console.print(f"run folder: {self.out}")
        self.progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.progress.stop()

    def _eta(self) -> str:
        measured = self.finished - self.done_at_start
        if measured <= 0:
            return "?"
        per_cell = (time.monotonic() - self.started) / measured
        left = per_cell * (self.total - self.finished)
        return time.strftime("%M:%S", time.gmtime(left)) if left < 3600 else f"{left / 3600:.1f} h"

    def _update(self, now: str) -> None:
        self.progress.update(self.task, completed=self.finished, eta=self._eta(), now=now)

    def _plan(self, plan: Plan, done: int) -> None:
        self.total = len(plan.cells)
        self.finished = self.done_at_start = done
        self.progress.update(self.task, total=self.total)
        self._update("")

    def _cell_start(self, cell: Cell) -> None:
        self.current = cell.label
        self._update(cell.label)

    def _phase(self, cell: Cell, phase: str) -> None:
        self._update(f"{cell.label}: {phase}")

    def _live(self, cell: Cell, sample: ProgressSample) -> None:
        # sysbench reports no mean latency per second, pgbench none for an idle second
        latency = f", {sample.latency_ms:.2f} ms" if sample.latency_ms is not None else ""
        self._update(f"{cell.label}: {sample.tps:,.0f} tps{latency}")

    def _repeat(self, cell: Cell, n: int, tps: float) -> None:
        self._update(f"{cell.label}: repeat {n} {tps:,.0f} tps")

    def _cell_end(self, cell: Cell, summary: dict[str, Any]) -> None:
        self.finished += 1
        if summary.get("status") == "failed":
            self.progress.console.print(
                f"[red]cell {cell.index} {escape(cell.label)} failed:[/] "
                f"{escape(str(summary.get('error')))}", soft_wrap=True)
        else:
            rel = summary.get("tps_ci_rel")
            ci = f" ± {100 * rel:.1f} %" if rel is not None else ""
            self.progress.console.print(
                f"cell {cell.index} {cell.label}: {summary['tps_mean']:,.0f} tps{ci} "
                f"({summary['repeats']} repeats)")
        self._update("")

    def _message(self, text: str) -> None:
        self.progress.console.print(escape(text), soft_wrap=True)
