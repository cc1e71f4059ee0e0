"""Differential flame graphs of a cell's stock and patched sides, per role, and the
frames whose time per commit moved beyond the sampling noise.

Each side's folded stacks are its last probed repeat's (probes/flamegraph.py writes one
file per node and role, in µs of CPU). Both are put per commit (ns per commit, so a
side that committed more is not wider for it) before ``inferno-diff-folded``: the graph
is as wide as patched, red where a frame's time per commit grew, blue where it shrank.

Whether a frame moved: perf samples every CPU at ``flame_hz``, so a frame's time is a
count of samples, each one period long. If its time per commit were the same on both
sides, its samples on the stock side would be binomial over the two sides' samples with
the share stock's commits are of both; a frame is said to have moved where that count
is further from its expectation than a two-sided test at 95 % allows, Bonferroni-
corrected over every frame tested in the answer, all cells and roles (so an A/A says
nothing moved 19 times in 20). This is the sampling noise of the two recordings only:
a frame's drift between repeats is not in it (the per-role CPU with its interval over
the measured repeats is).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any

from syncrep_lab.probes.flamegraph import ROOT_FRAMES, render_diff
from syncrep_lab.store import Store, queries

ALPHA = 0.05
MIN_SAMPLES = 10  # a frame seen fewer times on both sides together is not tested
SHOWN = 5  # moved frames kept per role


@dataclass(frozen=True)
class Side:
    folded: Path
    commits: int


def _sides(store: Store, cell_id: int) -> dict[tuple[str, str], Side]:
    """(node, role) -> the folded stacks of the cell's last probed repeat with graphs."""
    repeats = {r.id: r for r in store.repeats(cell_id) if r.probed}
    if not repeats:
        return {}
    out = {}
    for repeat_id, g in queries.last_flamegraphs(store, list(repeats)):
        if g.node.startswith("*") or g.role == "all":
            continue
        out[(g.node, g.role)] = Side(store.folder / g.folded_path,
                                     int(repeats[repeat_id].transactions))
    return out


def _read(path: Path) -> Counter[str]:
    stacks: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks[stack] += int(count)
    return stacks


def _per_commit(stacks: Counter[str], commits: int) -> list[str]:
    """µs per repeat -> ns per commit, as folded lines."""
    lines = []
    for stack, us in stacks.items():
        ns = round(us * 1000 / commits)
        if ns > 0:
            lines.append(f"{stack} {ns}")
    return lines


def _inclusive(stacks: Counter[str]) -> Counter[str]:
    out: Counter[str] = Counter()
    for stack, us in stacks.items():
        for frame in set(stack.split(";")[1:]):  # the first is the role
            if frame not in ROOT_FRAMES:
                out[frame] += us
    return out


def frame_tests(a: Counter[str], b: Counter[str], commits_a: int, commits_b: int,
                period_us: float) -> list[dict[str, Any]]:
    """Each frame seen often enough on the two sides (folded stacks in µs): its time
    per commit on each and ``z``, how far patched's samples are from what the same
    time per commit would give, in standard deviations (positive: patched more)."""
    inc_a, inc_b = _inclusive(a), _inclusive(b)
    share = commits_a / (commits_a + commits_b)
    out: list[dict[str, Any]] = []
    for frame in sorted(inc_a.keys() | inc_b.keys()):
        na = inc_a[frame] / period_us
        n = na + inc_b[frame] / period_us
        if n < MIN_SAMPLES:
            continue
        z = (na - n * share) / math.sqrt(n * share * (1 - share))
        us_a, us_b = inc_a[frame] / commits_a, inc_b[frame] / commits_b
        out.append({"frame": frame, "stock_ns_per_commit": 1000 * us_a,
                    "patched_ns_per_commit": 1000 * us_b,
                    "change_ns_per_commit": 1000 * (us_b - us_a), "z": -z})
    return out


def mark_moved(graphs: list[dict[str, Any]]) -> float | None:
    """Every graph's ``moved`` (its frames beyond the sampling noise, the largest change
    first, at most SHOWN) and ``moved_count``, Bonferroni over every frame of
    ``graphs``; its ``tests`` are dropped. Returns the |z| a frame had to pass."""
    tested = sum(len(g["tests"]) for g in graphs)
    z_crit = NormalDist().inv_cdf(1 - ALPHA / (2 * tested)) if tested else None
    for g in graphs:
        moved = [t for t in g.pop("tests") if z_crit is not None and abs(t["z"]) >= z_crit]
        moved.sort(key=lambda f: -abs(f["change_ns_per_commit"]))
        g.update(moved=moved[:SHOWN], moved_count=len(moved))
    return z_crit


def cell_diffs(store: Store, stock_cell: int, patched_cell: int, hz: int, into: Path,
               label: str) -> list[dict[str, Any]]:
    """Per role both sides have: the differential flame graph (written into ``into``)
    and its frames' tests (``tests``, for :func:`mark_moved`); an empty list where either
    side has no flame graphs."""
    a, b = _sides(store, stock_cell), _sides(store, patched_cell)
    period_us = 1e6 / hz
    out: list[dict[str, Any]] = []
    for node, role in sorted(a.keys() & b.keys()):
        sa, sb = a[(node, role)], b[(node, role)]
        if sa.commits <= 0 or sb.commits <= 0 or not sa.folded.exists() \
                or not sb.folded.exists():
            continue
        stacks_a, stacks_b = _read(sa.folded), _read(sb.folded)
        into.mkdir(parents=True, exist_ok=True)
        name = f"{node}-{role}".replace(":", "_").replace("/", "_")
        before, after = into / f"{name}.stock.folded", into / f"{name}.patched.folded"
        before.write_text("\n".join(_per_commit(stacks_a, sa.commits)) + "\n")
        after.write_text("\n".join(_per_commit(stacks_b, sb.commits)) + "\n")
        svg = into / f"{name}.diff.svg"
        entry: dict[str, Any] = {"node": node, "role": role, "svg": str(svg),
                                 "stock_us_per_commit": sum(stacks_a.values()) / sa.commits,
                                 "patched_us_per_commit": sum(stacks_b.values()) / sb.commits}
        try:
            render_diff(before, after, svg, f"{role} on {node}: patched against stock",
                        f"{label}; red: more time per commit than stock, blue: less",
                        "ns per commit")
        except (RuntimeError, OSError) as exc:
            entry["svg"] = None
            entry["svg_error"] = str(exc)
        tests = frame_tests(stacks_a, stacks_b, sa.commits, sb.commits, period_us)
        entry.update(frames_tested=len(tests), tests=tests)
        out.append(entry)
    return out
