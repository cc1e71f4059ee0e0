"""Differential flame graphs of a cell's stock and patched sides, per role, and the
frames whose share of the role's CPU moved beyond the sampling noise.

Each side's folded stacks are its last probed repeat's (probes/flamegraph.py writes one
file per node and role, in µs of CPU). ``inferno-diff-folded --normalize`` scales
stock's to patched's total: the graph is as wide as patched, red where a frame takes a
larger share of the role's CPU than in stock, blue where a smaller one. Shares, not
time per commit: a machine too busy for perf loses samples (a recording of 66 samples
where 990 were due was seen here, with the probes' neighbours at 20 runnable
processes), which would read as CPU per commit that fell. How much CPU a role takes per
commit is the measured repeats' /proc figure with its interval (answer.py); a frame's
"ns per commit" is its share times that.

Whether a frame moved: perf samples every CPU at ``flame_hz``, so a frame's time is a
count of samples. If its share of the role were the same on both sides, its samples on
the stock side would be binomial over its samples on both, with the share stock's
samples of the role are of both; a frame moved where that count is further from its
expectation than a two-sided test at 95 % allows, Bonferroni-corrected over every frame
tested in the answer, all cells and roles (so an A/A says nothing moved 19 times in
20). That is the sampling noise of the two recordings only: a frame's drift between
repeats is not in it.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import NormalDist

from syncrep_lab.json_form import JSON
from syncrep_lab.probes.flamegraph import ROOT_FRAMES, render_diff
from syncrep_lab.store import Store, queries

ALPHA = 0.05
MIN_SAMPLES = 10  # a frame seen fewer times on both sides together is not tested
SHOWN = 5  # moved frames kept per role


@dataclass(frozen=True)
class Side:
    folded: Path
    commits: int


@dataclass(frozen=True)
class FrameTest:
    """A frame of a role, stock against patched: its share of the role's recorded CPU on
    each side, ``z`` (how far patched's samples of it are from what the same share would
    give, in standard deviations; positive: patched more), and its ns per commit where
    the role's CPU per commit is known."""

    frame: str
    stock_share: float
    patched_share: float
    stock_ns_per_commit: float | None
    patched_ns_per_commit: float | None
    z: float

    def to_json(self) -> dict[str, JSON]:
        return {"frame": self.frame, "stock_share": self.stock_share,
                "patched_share": self.patched_share,
                "stock_ns_per_commit": self.stock_ns_per_commit,
                "patched_ns_per_commit": self.patched_ns_per_commit, "z": self.z}


@dataclass(frozen=True)
class DiffGraph:
    """A role's differential flame graph (``svg`` None where it could not be drawn, and
    ``svg_error`` why), the samples on each side, and its frames beyond the sampling
    noise: ``tests`` holds every frame tested until :func:`mark_moved` has read them all,
    then ``moved`` the largest changes of share (at most SHOWN) of ``moved_count``."""

    node: str
    role: str
    svg: str | None
    samples_stock: int
    samples_patched: int
    svg_error: str | None
    frames_tested: int
    tests: tuple[FrameTest, ...] = ()
    moved: tuple[FrameTest, ...] = ()
    moved_count: int = 0

    def to_json(self) -> dict[str, JSON]:
        """The graph as ab.json holds it (its frames' tests are not kept)."""
        out: dict[str, JSON] = {
            "node": self.node, "role": self.role, "svg": self.svg,
            "samples": {"stock": self.samples_stock, "patched": self.samples_patched}}
        if self.svg_error is not None:
            out["svg_error"] = self.svg_error
        out.update(frames_tested=self.frames_tested, moved=[f.to_json() for f in self.moved],
                   moved_count=self.moved_count)
        return out


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


def _inclusive(stacks: Counter[str]) -> Counter[str]:
    out: Counter[str] = Counter()
    for stack, us in stacks.items():
        for frame in set(stack.split(";")[1:]):  # the first is the role
            # libc's entry points carry their symbol version (__libc_start_main@@GLIBC_2.34)
            if frame.split("@@")[0] not in ROOT_FRAMES:
                out[frame] += us
    return out


def frame_tests(a: Counter[str], b: Counter[str], period_us: float,
                cpu_us: tuple[float | None, float | None] = (None, None)
                ) -> list[FrameTest]:
    """Each frame seen often enough on the two sides (folded stacks in µs), tested;
    given each side's CPU µs per commit of the role, with its ns per commit."""
    inc_a, inc_b = _inclusive(a), _inclusive(b)
    total_a, total_b = sum(a.values()), sum(b.values())
    if total_a <= 0 or total_b <= 0:
        return []
    p = total_a / (total_a + total_b)
    out: list[FrameTest] = []
    for frame in sorted(inc_a.keys() | inc_b.keys()):
        na = inc_a[frame] / period_us
        n = na + inc_b[frame] / period_us
        if n < MIN_SAMPLES:
            continue
        z = (na - n * p) / math.sqrt(n * p * (1 - p))
        share_a, share_b = inc_a[frame] / total_a, inc_b[frame] / total_b
        out.append(FrameTest(
            frame=frame, stock_share=share_a, patched_share=share_b,
            stock_ns_per_commit=None if cpu_us[0] is None else 1000 * share_a * cpu_us[0],
            patched_ns_per_commit=None if cpu_us[1] is None else 1000 * share_b * cpu_us[1],
            z=-z))
    return out


def critical_z(graphs: list[DiffGraph]) -> float | None:
    """The |z| a frame must pass to have moved: two-sided at ALPHA, Bonferroni over every
    frame tested in ``graphs`` (None: none was)."""
    tested = sum(len(g.tests) for g in graphs)
    return NormalDist().inv_cdf(1 - ALPHA / (2 * tested)) if tested else None


def mark_moved(graph: DiffGraph, z_crit: float | None) -> DiffGraph:
    """The graph with its frames beyond ``z_crit`` (:func:`critical_z`) as ``moved``, the
    largest change of share first, at most SHOWN, and their count; its tests dropped."""
    moved = [t for t in graph.tests if z_crit is not None and abs(t.z) >= z_crit]
    moved.sort(key=lambda f: -abs(f.patched_share - f.stock_share))
    return replace(graph, tests=(), moved=tuple(moved[:SHOWN]), moved_count=len(moved))


def cell_diffs(store: Store, stock_cell: int, patched_cell: int, hz: int, into: Path,
               label: str, cpu_us: dict[tuple[str, str], tuple[float | None, float | None]]
               ) -> list[DiffGraph]:
    """Per role both sides have: the differential flame graph (written into ``into``)
    and its frames' tests (``tests``, for :func:`mark_moved`); an empty list where either
    side has no flame graphs. ``cpu_us``: each role's CPU µs per commit, stock and
    patched (the measured repeats')."""
    a, b = _sides(store, stock_cell), _sides(store, patched_cell)
    period_us = 1e6 / hz
    out: list[DiffGraph] = []
    for node, role in sorted(a.keys() & b.keys()):
        sa, sb = a[(node, role)], b[(node, role)]
        if not sa.folded.exists() or not sb.folded.exists():
            continue
        stacks_a, stacks_b = _read(sa.folded), _read(sb.folded)
        into.mkdir(parents=True, exist_ok=True)
        name = f"{node}-{role}".replace(":", "_").replace("/", "_")
        svg: str | None = str(into / f"{name}.diff.svg")
        error = None
        try:
            render_diff(sa.folded, sb.folded, into / f"{name}.diff.svg",
                        f"{role} on {node}: patched against stock",
                        f"{label}; red: a larger share of the role's CPU than in stock, "
                        "blue: a smaller one", "µs")
        except (RuntimeError, OSError) as exc:
            svg, error = None, str(exc)
        # The client is the same program on both sides, and its stacks are the ones
        # DWARF unwinding cuts short (pgbench's threads: how many reach threadRun
        # changed fivefold between two recordings of one program): drawn, not tested.
        tests = ([] if node == "client" else
                 frame_tests(stacks_a, stacks_b, period_us,
                             cpu_us.get((node, role), (None, None))))
        out.append(DiffGraph(
            node=node, role=role, svg=svg,
            samples_stock=round(sum(stacks_a.values()) / period_us),
            samples_patched=round(sum(stacks_b.values()) / period_us),
            svg_error=error, frames_tested=len(tests), tests=tuple(tests)))
    return out
