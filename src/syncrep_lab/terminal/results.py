"""Results for the terminal and as CSV, from a run's cell rows (analysis/cells.py, read
from the store only, so results can be shown again, or exported, at any time after, or
during, a run).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import IO

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from syncrep_lab import format as fmt
from syncrep_lab.analysis.cells import COLUMNS, CellRow, TopCost
from syncrep_lab.analysis.noise import (
    dominant_words,
    length_advice,
    noise_lines,
    walsender_lines,
)
from syncrep_lab.analysis.ratios import BaselineRatio, target_text
from syncrep_lab.stats.variance import PARTS, NoiseSplit
from syncrep_lab.terminal import make_console


def write_csv(rows: list[CellRow], out: IO[str]) -> None:
    axes = sorted({k for r in rows for k in r.cell.axes})
    writer = csv.writer(out)
    # rows with a summary (report.data.cell_summaries) have a limit and a top cost
    summed = any(r.summary is not None for r in rows)
    limit = ["limit"] if summed else []
    top = ["top_cpu_per_commit"] if summed else []
    writer.writerow([*axes, *COLUMNS, *limit, *top])
    for r in rows:
        writer.writerow([*(r.cell.axes.get(a, "") for a in axes), *(r.column(c) for c in COLUMNS),
                         *((r.summary.limit if r.summary else "") for _ in limit),
                         *(top_cost_text(r.top_cost) for _ in top)])


def top_cost_text(top: TopCost | None) -> str:
    """'primary backend 257 µs': the role whose CPU per commit is the largest."""
    if not top:
        return "-"
    source = " (/proc)" if top.source == "proc" else ""
    return f"{top.node} {top.role} {top.cpu_us:,.0f} µs{source}"


def print_results(folder: Path, rows: list[CellRow],
                  console: Console | None = None) -> None:
    console = console or make_console()
    table = Table(title=f"results of {folder}", title_justify="left")
    costs = any(r.top_cost for r in rows)
    ratios = any(r.ratio_to_baseline for r in rows)
    for col, justify in (("#", "right"), ("cell", "left"), ("TPS", "right"),
                         ("± 95% CI", "right"), ("repeats", "right"), ("mean ms", "right"),
                         ("p50 ms", "right"), ("p99 ms", "right"), ("p99.9 ms", "right"),
                         *((("÷ baseline (95% CI)", "left"),) if ratios else ()),
                         *((("top CPU per commit", "left"),) if costs else ())):
        table.add_column(col, justify=justify)
    for r in rows:
        c = r.cell
        if c.status != "done":
            note = c.error or c.status
            table.add_row(str(c.idx), escape(c.label), f"[red]{c.status}[/]", "",
                          str(c.repeats), escape(note.splitlines()[0][:60]) if note else "",
                          "", "", "", *([""] if ratios else []), *([""] if costs else []))
            continue
        ci = "-" if c.tps_ci_rel is None else f"{100 * c.tps_ci_rel:.1f} %"
        reps = f"{c.repeats}" + ("" if c.stop_reason in ("ci", "window")
                                 else f" ({c.stop_reason or 'max'})")
        table.add_row(str(c.idx), escape(c.label), fmt.number(c.tps_mean), ci, reps,
                      fmt.number(c.lat_mean_ms, "{:.3f}"), fmt.number(c.lat_p50_ms, "{:.3f}"),
                      fmt.number(c.lat_p99_ms, "{:.3f}"), fmt.number(c.lat_p999_ms, "{:.3f}"),
                      *([escape(ratio_text(r.ratio_to_baseline))] if ratios else []),
                      *([top_cost_text(r.top_cost)] if costs else []))
    console.print(table)
    print_ratio_legend(rows, console)
    for r in rows:
        line = no_difference_text(r.ratio_to_baseline)
        if line and r.ratio_to_baseline:
            console.print(f"cell {r.cell.idx} {escape(r.cell.label)} ÷ "
                          f"{escape(r.ratio_to_baseline.baseline)}: {line}",
                          soft_wrap=True)
    for r in rows:
        # only where a part of the commit moved beyond its interval: the table in
        # results --json and compare has every figure
        if (anatomy := r.anatomy_to_baseline) and anatomy.comparison.changed:
            console.print(f"cell {r.cell.idx} {escape(r.cell.label)} ÷ "
                          f"{escape(anatomy.baseline)}, commit anatomy: "
                          f"{escape('; '.join(anatomy.comparison.changed))}", soft_wrap=True)
    for who, split in noise_lines(rows):
        console.print(noise_text(who, split), soft_wrap=True)
    for r, words in walsender_lines(rows):
        console.print(f"cell {r.cell.idx} {escape(r.cell.label)}: {escape(words)}", soft_wrap=True)
    maxed = sum(1 for r in rows if r.cell.status == "done"
                 and r.cell.stop_reason not in ("ci", "window"))
    if maxed:
        console.print(f"[yellow]{maxed} cell(s) stopped (repeats_max or the budget) before "
                      "their comparison met the confidence target: their intervals are "
                      "wider than asked ('(max)', '(budget)').[/]")
    for r in rows:
        if (line := target_text(r.ratio_to_baseline)) and r.ratio_to_baseline:
            console.print(f"cell {r.cell.idx} {escape(r.cell.label)} ÷ "
                          f"{escape(r.ratio_to_baseline.baseline)}: {line}",
                          soft_wrap=True)
    for r in rows:
        for note in r.cell.notes:
            console.print(f"[yellow]cell {r.cell.idx} {escape(r.cell.label)}:[/] {escape(note)}",
                          soft_wrap=True)


def ratio_text(ratio: BaselineRatio | None) -> str:
    """'0.830 (0.80–0.86)': a ratio to the baseline and its interval; † when the two
    were not measured in the same rounds."""
    if ratio is None:
        return ""
    interval = (f" ({ratio.low:.2f}–{ratio.high:.2f})"
                if ratio.low is not None and ratio.high is not None else "")
    return f"{ratio.mean:.3f}{interval}{'' if ratio.paired else ' †'}"


def no_difference_text(ratio: BaselineRatio | None) -> str:
    """'no difference larger than 4.1 % (interval 0.96–1.02); the smallest change this run
    detects (80 % power): 5.0 %', for a ratio whose interval holds 1: "no difference" is
    only as good as the interval is narrow. '' otherwise."""
    if ratio is None or ratio.low is None or ratio.high is None:
        return ""
    low, high = ratio.low, ratio.high
    if not low <= 1 <= high:
        return ""
    text = (f"no difference larger than {100 * max(1 - low, high - 1):.1f} % "
            f"(interval {low:.2f}–{high:.2f})")
    if ratio.detectable_pct is not None:
        text += (f"; the smallest change this run detects (80 % power): "
                 f"{ratio.detectable_pct:.1f} %")
    return text


def noise_text(who: str, split: NoiseSplit) -> str:
    """'noise per repeat: within 4.1 %, between 10.8 %, drift 2.0 % (cell 3, 10 repeats):
    the state at a repeat's start dominates'."""
    parts = [f"{name} {100 * value:.1f} %" for name in PARTS
             if (value := split.part(name)) is not None]
    text = (f"noise per repeat: {', '.join(parts) or 'not split'} ({who}, "
            f"{split.repeats} repeat{'s' if split.repeats != 1 else ''})")
    words = dominant_words(split)
    text = f"{text}: {words}" if words else (f"{text}; {split.note}" if split.note else text)
    length = length_advice(split)
    return f"{text}; {length}" if length else text


def print_ratio_legend(rows: list[CellRow], console: Console) -> None:
    ratios = [(r, r.ratio_to_baseline) for r in rows if r.ratio_to_baseline]
    pairs = [f"{r.cell.label} ÷ {ratio.baseline}" for r, ratio in ratios]
    if not pairs:
        return
    shown = "; ".join(pairs[:8]) + (f"; and {len(pairs) - 8} more" if len(pairs) > 8 else "")
    console.print(f"÷ baseline, in rows/s: {escape(shown)}", soft_wrap=True)
    if any(not ratio.paired for _, ratio in ratios):
        console.print("† not measured in the same rounds as its baseline: the interval "
                      "leaves out the drift between the two (run.order = \"interleaved\" "
                      "pairs them)", soft_wrap=True)
