"""How long a report takes to build from a stored run, and how big the page is.

Each round times the three stages separately (gathering the data from the store,
specifying the charts, rendering and writing the page) and the peak memory of the
whole build; the figures are medians over --times rounds, all in this process.
Give one or more run folders (a seed preset run is the realistic case).

    .venv/bin/python bench/report_speed.py RUN [RUN ...] [--times 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from syncrep_lab.report.charts import all_charts
from syncrep_lab.report.data import report_data
from syncrep_lab.report.html import render, write_page


def one_build(folder: Path, out: Path) -> dict[str, float]:
    tracemalloc.start()
    t0 = time.perf_counter()
    data = report_data(folder)
    t1 = time.perf_counter()
    all_charts(data)
    t2 = time.perf_counter()
    write_page(render(data), out)  # render specifies the charts again: as a real build does
    t3 = time.perf_counter()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"data_s": t1 - t0, "charts_s": t2 - t1, "render_write_s": t3 - t2,
            "total_s": t3 - t0, "peak_mib": peak / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--times", type=int, default=5)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for folder in args.runs:
            out = Path(tmp) / "report.html"
            rounds = [one_build(folder, out) for _ in range(args.times)]
            medians = {k: round(statistics.median(r[k] for r in rounds), 3) for k in rounds[0]}
            data = report_data(folder)
            results.append({
                "run": str(folder), "cells": len(data["cells"]),
                "charts": len(all_charts(data)),
                "flame_graphs_embedded": sum(1 for g in data["flamegraphs"]["graphs"]
                                             if g["data_uri"]),
                "page_mib": round(out.stat().st_size / 2**20, 2), "times": args.times,
                "median": medians,
                "total_s_each": [round(r["total_s"], 3) for r in rounds]})
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
