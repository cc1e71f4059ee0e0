"""Terminal tables for the analysis: costs per commit and wait-event shares."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from syncrep_lab import format as fmt
from syncrep_lab.analysis.anatomy import PART_NAMES, WAIT_PARTS, Anatomy, standby_line
from syncrep_lab.analysis.compare import (
    ONE_REPEAT,
    AnatomyComparison,
    Comparison,
    FigureComparison,
    FigureSide,
)
from syncrep_lab.analysis.costs import KEY_SYSCALLS, CellCosts, GprofProfile, RunCellCosts
from syncrep_lab.analysis.diagnosis import confidence_text, leading_title
from syncrep_lab.analysis.faults import CellFaults
from syncrep_lab.analysis.kernel import function_text
from syncrep_lab.analysis.model import (
    CellModel,
    DelayedFrom,
    HeldFrom,
    LinkedFrom,
    LittleBound,
    ReleaseBound,
    WaitBound,
    headline,
)
from syncrep_lab.analysis.observe import Observation, StandbyLoad
from syncrep_lab.analysis.scaling import Series
from syncrep_lab.analysis.verdict import CellDiagnosis, Verdict
from syncrep_lab.pg.replication import level_rank

SHORT = {"epoll_create1": "ep_create", "epoll_ctl": "ep_ctl", "epoll_wait": "ep_wait",
         "epoll_pwait": "ep_pwait", "fdatasync": "fdsync", "recvfrom": "recv", "sendto": "send",
         "context_switches": "ctx sw"}


_SOURCE_MARK = {"perf": " (perf)", "proc": " (/proc, probed)"}


def print_costs(cells: list[RunCellCosts], console: Console) -> None:
    for run_cell in cells:
        cell = run_cell.costs
        tps = run_cell.tps_mean
        title = f"cell {run_cell.idx} {escape(run_cell.label)}: {tps:,.0f} tps" if tps else ""
        if not cell.roles:
            reasons = "; ".join(s for v in cell.probes.values() for s in v) or "no probes"
            console.print(f"{title}: no per-process costs ({escape(reasons)})", soft_wrap=True)
        else:
            # Only the calls some role makes at least once per 20 commits.
            seen = {k for r in cell.roles for k, v in r["syscalls_per_commit"].items()
                    if (v.get("mean") or 0) >= 0.05}
            calls = [s for s in KEY_SYSCALLS if s in seen]
            table = Table(title=title + " - per commit (CPU and context switches: mean ± "
                          "95% CI half-width over repeats, from /proc in the measured "
                          "repeats unless marked (perf) or (/proc, probed); system calls: "
                          "mean, from the probed repeats)", title_justify="left")
            sched_cols = any(r["sched"] for r in cell.roles)
            extra = ("asleep µs", "run queue µs") if sched_cols else ()
            for col in ("node", "role", "CPU µs", "ctx sw", *extra, *calls):
                left = col in ("node", "role")
                table.add_column(SHORT.get(col, col), justify="left" if left else "right",
                                 no_wrap=left, min_width=12 if col == "role" else None)
            for r in cell.roles:
                if not (r["cpu_us_per_commit"]["mean"] or r["sched"]):
                    continue  # idle all repeat: nothing to show
                sc = r["syscalls_per_commit"]
                sd = r["sched"]
                sched_cells = [fmt.mean_pm(sd[k]) if k in sd else "-" for k in
                               ("sleep_us_per_commit", "runq_us_per_commit")] if extra else []
                cpu = fmt.mean_pm(r["cpu_us_per_commit"]) + _SOURCE_MARK.get(r["cpu_source"], "")
                table.add_row(r["node"], escape(r["role"]), cpu,
                              fmt.mean_pm(r["context_switches_per_commit"], 2), *sched_cells,
                              *(f"{sc[s]['mean']:.2f}" if s in sc and sc[s]["mean"] is not None
                            else "-" for s in calls))
            console.print(table)
        wakes = [w for w in cell.wakeups if (w["per_commit"]["mean"] or 0) >= 0.05]
        if wakes:
            console.print("  wake-ups per commit (scheduler trace): " + "; ".join(
                f"{escape(w['waker_node'])} {escape(w['waker_role'])} → "
                f"{escape(w['wakee_node'])} {escape(w['wakee_role'])} "
                f"{fmt.mean_pm(w['per_commit'], 2)}" for w in wakes[:8]), soft_wrap=True)
        for g in cell.flamegraphs:
            # Where the role's CPU goes in its own code (PostgreSQL, pgbench): functions by
            # inclusive share, leaving out the kernel's and the near-root frames
            # every stack of the role shares.
            hottest = [f for f in g["frames"] if not f["frame"].endswith("_[k]")
                       and f["inclusive"] < 0.95][:4]
            top = "in user space: " + ", ".join(
                f"{escape(f['frame'])} {100 * f['inclusive']:.0f} %" for f in hottest)
            console.print(f"  flame graph {escape(g['node'])} {escape(g['role'])} "
                          f"({g['cpu_us'] / 1e3:,.0f} ms on CPU): {escape(g['svg'])}"
                          + (f"; {top}" if hottest else ""), soft_wrap=True)
        for profile in cell.gprof:
            console.print(_gprof_line(profile), soft_wrap=True)
        anatomy = cell.anatomy
        if anatomy:
            for line in anatomy_lines(anatomy):
                console.print(escape(line), soft_wrap=True)
        lb = cell.latency_breakdown
        if lb:
            standby_wait = (f"{lb['sync_wait_ms']:.2f} ms" if not
                            run_cell.version.startswith("9.")
                            else "not visible on 9.6 (no wait event; counted as on CPU)")
            console.print(
                f"  a commit's {lb['latency_ms']:.2f} ms on the primary's backends: "
                f"waiting for the standby {standby_wait}, WAL write/flush "
                f"{lb['wal_ms']:.2f} ms, on CPU {lb['cpu_ms']:.2f} ms, waiting for the client "
                f"{lb['client_ms']:.2f} ms, other {lb['other_ms']:.2f} ms", soft_wrap=True)
        for rep in cell.replication:
            lags = ", ".join(
                f"{label} {fmt.ms(lag)}" for label, lag in
                (("write", rep.write_ms), ("flush", rep.flush_ms), ("replay", rep.replay_ms))
                if lag is not None)
            console.print(f"  standby {escape(rep.standby)} ({escape(str(rep.states))}): "
                          f"mean lag {lags or 'not reported by this version'}; flush behind "
                          f"by {rep.flush_bytes or 0:,.0f} bytes on average", soft_wrap=True)
        for line in resource_lines(cell) + kernel_lines(cell) + lock_lines(cell):
            console.print(escape(line), soft_wrap=True)
        waits = [w for w in cell.waits if w["role"] in ("backend", "walsender")
                 or w["role"].startswith("walsender")]
        for w in waits:
            top = ", ".join(f"{k} {100 * v:.0f} %" for k, v in list(w["share"].items())[:4])
            console.print(f"  {w['node']} {escape(w['role'])} waits: {escape(top)}",
                          soft_wrap=True)


def resource_lines(cell: CellCosts) -> list[str]:
    """The disks and the links a second of the measured repeats: beside the CPU, the
    rest of "the machine sits idle"; and the delay each emulated link really gave."""
    out = []
    # busy_share is None where the counters ran over no time: so are the rates
    disks = [d for d in cell.resources.disks if d.busy_share is not None]
    if disks:
        out.append("  disks: " + "; ".join(
            f"{d.host + ' ' if d.host else ''}{d.device} busy "
            f"{100 * (d.busy_share or 0.0):.0f} %, {d.write_mb_s:.1f} MB/s written, "
            f"{d.read_mb_s:.1f} MB/s read, {d.ios_s:,.0f} I/Os a second"
            for d in disks))
    nets = [n for n in cell.resources.network if n.interface != "lo"
            and (n.rx_mb_s or n.tx_mb_s)]
    if nets:
        out.append("  network: " + "; ".join(
            f"{n.host + ' ' if n.host else ''}{n.node + ' ' if n.node else ''}"
            f"{n.interface} out {n.tx_mb_s:.2f} MB/s, in {n.rx_mb_s:.2f} MB/s "
            f"({n.tx_packets_s:,.0f} and {n.rx_packets_s:,.0f} packets a second)"
            for n in nets))
    if cell.resources.links:
        out.append("  emulated links, as delivered: " + "; ".join(
            x.line() + (" — late: its figures carry the machine's load" if x.ran_late else "")
            for x in cell.resources.links))
    writers = sorted(((r["disk_bytes_per_commit"]["write"]["mean"] or 0.0, r)
                      for r in cell.roles if "write" in r.get("disk_bytes_per_commit", {})),
                     key=lambda wr: -wr[0])
    if writers and writers[0][0] > 0:
        out.append("  disk writes a commit, by role: " + ", ".join(
            f"{r['node']} {r['role']} {b / 1024:,.1f} KiB" for b, r in writers[:4] if b > 0))
    return out


def _twin_lines(cell: CellModel) -> list[str]:
    """A cell predicted from its twin without the quota, the release delay or the link
    (analysis/model.py): how, and the measured TPS against it."""
    return [f"  predicted from cell {p.cell} ({without}): {how}; measured "
            f"{fmt.tps(p.measured_tps)} ({p.ratio:.2f} of it)"
            for p in (cell.held_from, cell.delayed_from, cell.linked_from) if p is not None
            for without, how in [_twin_how(p)]]


def _twin_how(p: HeldFrom | DelayedFrom | LinkedFrom) -> tuple[str, str]:
    """What the twin lacks, and how the prediction was reached from it."""
    if isinstance(p, HeldFrom):
        return "no quota", (f"{escape(p.role)} at {p.unheld_us_per_commit:,.1f} µs of CPU a "
                            f"commit there, held to {p.share:g} CPU, passes "
                            f"{fmt.tps(p.predicted_tps)} tps")
    if isinstance(p, DelayedFrom):
        return "no release delay", (
            f"{escape(p.walsender)} at {p.stock_us_per_commit:,.1f} µs of CPU a commit "
            f"there, plus {p.delay_us:g} µs for each of the {p.stock_freed_per_commit:.2f} "
            f"waiters it freed a commit: {escape(p.binding)} binds at "
            f"{fmt.tps(p.predicted_tps)} tps")
    return "no link", (f"{p.clients} clients at {fmt.tps(p.unlinked_tps)} tps there, each "
                       f"commit {p.round_trip_ms:g} ms longer (the link's round trip): "
                       f"{fmt.tps(p.predicted_tps)} tps (Little's law)")


def kernel_lines(cell: CellCosts) -> list[str]:
    """Each role's kernel share of its on-CPU samples, with the kernel functions its
    stacks ended in and the PostgreSQL function that called into the kernel."""
    return [f"  kernel: {k.node} {k.role} {100 * k.kernel_share:.0f} % of its on-CPU "
            "samples; " + ", ".join(function_text(f) for f in k.top[:3])
            for k in cell.kernel if k.node != "client" and k.top]


LOCK_SITES = 6  # lock sites shown per cell, the most taken or waited for first


def lock_lines(cell: CellCosts) -> list[str]:
    """The lock probe's figures: what its kernel let it count, the epoll mutex's takes
    per commit by the backends, and the busiest lock sites of the primary's roles."""
    locks = cell.locks
    if locks is None:
        return []
    out = [f"  kernel locks ({n})" for n in locks.notes] or ["  kernel locks"]
    if not locks.repeats:
        return [*out, "    no probed repeat it ran in had a commit to count per"]
    taken, closing = locks.epoll_takes(), locks.epoll_takes(closing=True)
    if taken is not None:
        global_ = locks.epoll_takes(lock="epmutex") or 0.0
        out.append(f"  epoll's mutexes: {taken:.2f} takes per commit by the primary's "
                   f"backends, {closing or 0:.2f} closing a wait set, {global_:.2f} the "
                   "global epmutex")
    shown = [s for s in locks.sites
             if (s.acquisitions is not None and (s.acquisitions.mean or 0.0) >= 0.01)
             or (s.contentions.mean or 0.0) >= 0.01][:LOCK_SITES]
    for s in shown:
        what = s.lock or s.kind
        figures = ([f"{fmt.mean_pm(s.acquisitions.to_json(), 2)} takes"]
                   if s.acquisitions is not None else [])
        figures += [f"{fmt.mean_pm(s.contentions.to_json(), 3)} waits",
                    f"{fmt.mean_pm(s.wait_us.to_json(), 1)} µs waited"]
        out.append(f"    {s.node} {s.role}: {what} from {s.caller or '?'}"
                   + (f" ({s.user_stack})" if s.user_stack else "")
                   + ": " + ", ".join(figures) + " per commit")
    if not shown:
        out.append("    no lock taken or waited for once in 100 commits")
    return out


def anatomy_lines(a: Anatomy) -> list[str]:
    """A cell's commit anatomy in words: each component per commit, the commit wait's
    parts with their shares, the sync walsender's releases, and the two ceilings."""
    by_name = {c.component: c for c in a.components}

    def us(name: str) -> str:
        c = by_name[name]
        return f"{PART_NAMES[name]} {fmt.mean_pm(c.us_per_commit.to_json(), 1)} µs"

    head = f"  where a commit's time goes ({a.commits:,} commits traced, per commit):"
    parts = [us(n) for n in ("local_flush", "commit_wait") if n in by_name]
    split = [f"{us(n)} ({100 * (by_name[n].share_of_wait or 0):.0f} %)"
             for n in WAIT_PARTS if n in by_name]
    lines = [head + " " + "; ".join(parts) + (" = " + " + ".join(split) if split else "")
             if parts else head.removesuffix(", per commit):") + "): no commit flushed or waited"]
    for r in a.releases:
        if not r.releases:
            continue
        # no colon right after the name: rich reads ":b:" as an emoji code
        if not r.per_waiter_us:
            lines.append(f"  {r.walsender} made {r.releases:,} releases and freed no waiter")
            continue
        lines.append(
            f"  {r.walsender} made {r.releases:,} releases, "
            f"{r.waiters_per_release or 0:.1f} waiters freed each, "
            f"{r.release_us or 0:.1f} µs per release ({r.per_waiter_us:.2f} µs per "
            f"waiter), {r.gap_us or 0:,.0f} µs between releases "
            f"(p99 {r.gap_p99_us or 0:,.0f} µs)")
    lines += [f"  {standby_line(s)}" for s in a.standby]
    bounds = []
    if a.little_bound_tps:
        bounds.append(f"{a.little_bound_tps:,.0f} tps at this concurrency if only the "
                      "flush and the wait remained (Little's law)")
    if a.release_bound_tps:
        bounds.append(f"{a.release_bound_tps:,.0f} tps where the walsender's serial "
                      "release binds")
    if bounds:
        lines.append("  wait-bound ceilings: " + "; ".join(bounds))
    return lines


def _gprof_line(g: GprofProfile) -> str:
    """A role's gprof profile: the seed's SetLatch-against-commits figure beside perf's
    kill() count, then where its time goes and what it calls most per commit."""
    latch = g["setlatch_per_commit"]["mean"]
    kills = g["kill_per_commit"]["mean"]
    head = (f"  gprof {escape(g['node'])} {escape(g['role'])} ({g['processes']} "
            f"process{'es' if g['processes'] != 1 else ''}, {g['sampled_s']:.2f} s sampled)")
    if latch:
        head += f": SetLatch {latch:.2f} calls/commit"
        head += f" (perf: kill() {kills:.2f}/commit)" if kills is not None else ""
    hottest = ", ".join(f"{escape(f['function'])} {100 * f['self_share']:.0f} %"
                        for f in g["functions"][:4] if f["self_share"] >= 0.01)
    called = sorted((f for f in g["functions"] if f["calls_per_commit"]),
                    key=lambda f: -(f["calls_per_commit"] or 0.0))[:4]
    most = ", ".join(f"{escape(f['function'])} {f['calls_per_commit']:.1f}" for f in called)
    return (head + (f"; self time: {hottest}" if hottest else "")
            + (f"; calls/commit: {most}" if most else "") + f"; {escape(g['profile'])}")


CONFIDENCE_STYLE = {"high": "bold red", "medium": "yellow", "low": "dim", "unknown": "dim"}


def print_diagnosis(cells: Sequence[CellDiagnosis], console: Console) -> None:
    for cell in cells:
        console.print(f"[bold]cell {cell.idx} {escape(cell.label)}[/]: "
                      f"{cell.tps_mean:,.0f} tps")
        if cell.ceiling:
            console.print(f"  ceiling: {escape(cell.ceiling)} (syncrep-lab model)",
                          soft_wrap=True)
        for error in cell.ceiling_errors:
            console.print(f"  [red]model error[/red]: {escape(error)}", soft_wrap=True)
        if cell.anatomy:
            console.print(f"  commit anatomy: {escape(cell.anatomy)}", soft_wrap=True)
        print_verdicts(cell.verdicts, console)


def styled_verdict_title(v: Verdict) -> str:
    """:func:`~syncrep_lab.analysis.diagnosis.verdict_title` in rich markup, the
    confidence in its colour."""
    style = CONFIDENCE_STYLE[v.confidence]
    return f"{escape(v.mechanism)} [{style}]({escape(confidence_text(v))} confidence)[/]"


def print_verdicts(verdicts: Sequence[Verdict], console: Console) -> None:
    if not verdicts:
        console.print("  no rule fired: nothing here stands out as the limit")
    for v in verdicts:
        console.print(f"  {styled_verdict_title(v)}: {escape(v.summary)}", soft_wrap=True)
        if v.evidence:
            # an interval as the JSON gives it: its ends to 3 decimals
            numbers = ", ".join(f"{k}={val}" + (f" [{round(v.intervals[k].low, 3)}, "
                                                 f"{round(v.intervals[k].high, 3)}]"
                                                 if k in v.intervals else "")
                                for k, val in v.evidence.items())
            console.print(f"    evidence: {escape(numbers)}", soft_wrap=True)
        for step in v.next_steps:
            console.print(f"    try: {escape(step)}", soft_wrap=True)


def print_verdict_lines(cells: Sequence[CellDiagnosis], console: Console) -> None:
    """One line per cell: its most confident verdict (the full story: diagnose)."""
    for cell in cells:
        line = leading_title(cell.verdicts, styled_verdict_title)
        if not line:
            line = (f"[dim]{escape(cell.verdicts[0].summary)}[/]" if cell.verdicts
                    else "no rule fired")
        console.print(f"  cell {cell.idx} {escape(cell.label)}: {line}", soft_wrap=True)


def print_scaling(series: list[Series], console: Console) -> None:
    for entry in series:
        table = Table(title=f"scaling: {escape(entry['series'])} (TPS; p99 ms)",
                      title_justify="left")
        clients = sorted({p["clients"] for lv in entry["levels"].values() for p in lv["points"]})
        table.add_column("synchronous_commit")
        for c in clients:
            table.add_column(f"{c} clients", justify="right")
        table.add_column("knee")
        for level in sorted(entry["levels"], key=level_rank):
            lv = entry["levels"][level]
            by = {p["clients"]: p for p in lv["points"]}
            cells = [f"{by[c]['tps']:,.0f}; {by[c]['p99_ms']:.1f}" if c in by else "-"
                     for c in clients]
            k = lv["knee"]
            knee_text = (f"{k['clients']} clients ({k['tps']:,.0f} tps)" if k
                         else "none in range")
            table.add_row(level, *cells, knee_text)
        console.print(table)
        for level, ratios in entry["ratios_to_local"].items():
            parts = []
            for r in ratios:
                ci = (f" [{r['low']:.2f}, {r['high']:.2f}]" if r["low"] is not None
                      and r["high"] is not None else "")
                parts.append(f"{r['clients']} clients {r['ratio']:.2f}{ci}")
            console.print(f"  {level} / local: " + "; ".join(parts), soft_wrap=True)


VERDICT_STYLE = {"B faster, significant": "bold green", "B slower, significant": "bold red",
                 "B higher, significant": "bold", "B lower, significant": "bold"}


def _value(side: FigureSide, unit: str) -> str:
    mean = side.mean
    if mean is None:
        return "-"
    text = f"{mean:,.0f}" if unit == "tps" else f"{mean:.3f}" if unit == "ms" else f"{mean:.3g}"
    return f"{text} (n={side.n})"


def _ratio(fig: FigureComparison) -> str:
    if fig.ratio is None:
        # A per-commit figure that was 0 in A: B's calls are new, there is no ratio.
        return "new in B" if (fig.b.mean or 0) > 0 else "-"
    if fig.ratio_low is None or fig.ratio_high is None:
        return f"{fig.ratio:.2f}"
    return f"{fig.ratio:.2f} [{fig.ratio_low:.2f}, {fig.ratio_high:.2f}]"


def _detectable(fig: FigureComparison) -> str:
    value = fig.detectable_pct
    return "-" if value is None else f"±{value:.1f} %"


def _p(fig: FigureComparison) -> str:
    return "-" if fig.test is None else f"{fig.test.p_value:.3g}"


def _styled_verdict(verdict: str) -> str:
    style = VERDICT_STYLE.get(verdict, "dim" if verdict.startswith("too few")
                              or verdict == ONE_REPEAT else "")
    return f"[{style}]{escape(verdict)}[/]" if style else escape(verdict)


def _key_text(key: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={v}" for k, v in key.items()) or "the only cell"


def print_compare(data: Comparison, console: Console) -> None:
    """Run B against run A: the header, a table per matched cell, the costs that moved."""
    a, b = data.a, data.b
    for name, side in (("A", a), ("B", b)):
        console.print(f"[bold]{name}[/]: {escape(str(side.run))} in {escape(side.folder)}"
                      f" (started {escape(str(side.started_at))}, {escape(str(side.status))}"
                      f", PostgreSQL {escape(', '.join(side.versions) or '?')})",
                      soft_wrap=True)
    dims = "; ".join(f"{escape(str(d['label']))} {escape(str(d['a']))} → "
                     f"{escape(str(d['b']))}" for d in data.dimensions)
    console.print(f"compared: {dims or 'nothing differs between the runs'}; cells matched on "
                  f"{escape(', '.join(data.matched_on) or 'nothing (one cell a side)')}",
                  soft_wrap=True)
    for diff in data.machine_differences:
        console.print(f"[yellow]warning: the machines differ ({escape(diff)}): figures may "
                      "differ for that reason alone[/]", soft_wrap=True)
    drifts = [f"{name} ±{100 * side.drift.sd:.1f} % ({escape(side.drift.source)})"
              for name, side in (("A", a), ("B", b)) if side.drift]
    if data.between_runs:
        console.print(f"between runs: each run's own drift is added to the intervals and "
                      f"tests of its figures: {'; '.join(drifts)}", soft_wrap=True)
    if data.advice:
        console.print(f"[dim]{escape(data.advice)}[/]", soft_wrap=True)
    explained = False  # what "detects" means, said under the first table that has it
    for pair in data.pairs:
        table = Table(title=f"{escape(_key_text(pair.key))}: A cell {pair.a.idx} "
                      f"{escape(pair.a.label)} vs B cell {pair.b.idx} "
                      f"{escape(pair.b.label)}", title_justify="left")
        for col in ("figure", "A", "B", "B/A [95% CI]", "detects", "p", "verdict"):
            table.add_column(col, justify="left" if col in ("figure", "verdict") else "right")
        for fig in pair.figures:
            unit = "" if fig.unit == "tps" else f" ({fig.unit})"
            table.add_row(escape(fig.figure + unit), _value(fig.a, fig.unit),
                          _value(fig.b, fig.unit), _ratio(fig), _detectable(fig),
                          _p(fig), _styled_verdict(fig.verdict))
        console.print(table)
        if not explained and any(fig.detectable_pct is not None for fig in pair.figures):
            explained = True
            console.print("  [dim]detects: the smallest change of B/A its test would find "
                          "4 times in 5 (80 % power); below it, \"no significant "
                          "difference\" says little[/]", soft_wrap=True)
        console.print(f"  [bold]{escape(pair.summary)}[/]", soft_wrap=True)
        if pair.anatomy is not None:
            print_anatomy_comparison(pair.anatomy, console)
        costs = pair.costs
        if not costs.top:
            console.print("  no per-commit cost changed" if costs.compared else
                          "  no per-commit costs on both sides (probes skipped or not run)",
                          soft_wrap=True)
            continue
        ct = Table(title=f"per-commit costs that changed most ({len(costs.top)} of "
                   f"{costs.compared}; ranked by |log B/A|)", title_justify="left")
        for col in ("node", "role", "per commit", "A", "B", "B/A", "B-A", "p", "verdict"):
            ct.add_column(col, justify="left" if col in ("node", "role", "per commit",
                                                         "verdict") else "right")
        for c in costs.top:
            ct.add_row(escape(c.node), escape(c.role), escape(c.figure),
                       f"{c.a.mean:.3g}", f"{c.b.mean:.3g}",
                       "new in B" if c.ratio is None else
                       "gone in B" if c.b.mean == 0 else f"{c.ratio:.3g}",
                       f"{c.difference:+.3g}", _p(c), _styled_verdict(c.verdict))
        console.print(ct)
        if any(c.test is None for c in costs.top):
            # Costs come from the probed repeats only, which are usually one per cell.
            console.print("  [dim]p: Welch's t needs 2 values a side; per-commit costs come "
                          "from probed repeats only (\\[probes] probed_repeats = 2 or more in "
                          "the spec gives them a test)[/]", soft_wrap=True)
        for note in costs.notes:
            console.print(f"  [dim]{escape(note)}[/]", soft_wrap=True)
    for name in ("a", "b"):
        for cell in data.unmatched[name]:
            console.print(f"[dim]unmatched in {name.upper()}: cell {cell.idx} "
                          f"{escape(cell.label)} ({escape(_key_text(cell.key))})[/]",
                          soft_wrap=True)
        for gone in data.not_done[name]:
            console.print(f"[dim]not compared, {escape(gone.status)} in "
                          f"{name.upper()}: cell {gone.idx} {escape(gone.label)}[/]",
                          soft_wrap=True)
    if not data.pairs:
        console.print("[yellow]no cell of A matches one of B: nothing to compare[/]")


def print_anatomy_comparison(cmp: AnatomyComparison, console: Console,
                             a: str = "A", b: str = "B") -> None:
    """Where a commit's time moved: each anatomy figure of ``b`` against ``a``."""
    if cmp.missing or not cmp.figures:
        console.print(f"  [dim]{escape(cmp.summary)}[/]", soft_wrap=True)
        return
    table = Table(title=f"where a commit's time moved ({a}: {cmp.repeats_a}, {b}: "
                  f"{cmp.repeats_b} anatomy repeats)", title_justify="left")
    for col in ("part", "unit", a, b, f"{b}/{a} [95% CI]", "verdict"):
        table.add_column(col, justify="left" if col in ("part", "unit", "verdict")
                         else "right")
    for f in cmp.figures:
        table.add_row(escape(f.figure), escape(f.unit), fmt.amount(f.a.mean),
                      fmt.amount(f.b.mean), _ratio(f), _styled_verdict(f.verdict))
    console.print(table)
    for side, parts in ((a, cmp.only_in_a), (b, cmp.only_in_b)):
        if parts:
            console.print(f"  [dim]measured in {side} only: {escape(', '.join(parts))}[/]",
                          soft_wrap=True)
    console.print(f"  [dim]{escape(cmp.interval)}[/]", soft_wrap=True)
    console.print(f"  [bold]{escape(cmp.summary)}[/]", soft_wrap=True)


def print_faults(cells: list[CellFaults], console: Console) -> None:
    """Each faulted cell: its events and what followed, the slow commits, and the rows
    counted on every node afterwards (lost acknowledged commits in red)."""
    if not cells:
        console.print("no cell of this run ran a fault scenario ([faults.NAME] and the "
                      "faults axis in the spec)")
        return
    for cell in cells:
        head = f"[bold]cell {cell.idx} {escape(cell.label)}[/]"
        if cell.status != "done":
            head += f": [red]{cell.status}[/] {escape(cell.error or '')}"
        console.print(head, soft_wrap=True)
        if not cell.repeats:
            continue
        table = Table(title_justify="left")
        for col in ("rep", "at s", "event", "seen by the primary", "after s", "TPS before",
                    "during", "back after s", "TPS after"):
            table.add_column(col, justify="left" if col in ("event", "seen by the primary")
                             else "right")
        for r in cell.repeats:
            for e in r.events:
                ev, fx = e.record, e.effects
                table.add_row(str(r.n), f"{ev.t_s:.2f}", escape(f"{ev.node} {ev.detail}"),
                              escape(fx.detected or "no state change"),
                              fmt.number(fx.detect_s, "{:.2f}"), fmt.number(fx.tps_before),
                              fmt.number(fx.tps_during), fmt.number(fx.recovery_s, "{:.1f}"),
                              fmt.number(fx.tps_after))
        console.print(table)
        for r in cell.repeats:
            rows = "; ".join(f"{d.node} {d.rows:,}/{d.expected:,}"
                             for d in r.durability) or "not counted (not an insert workload)"
            line = (f"  repeat {r.n}: {r.slow_commits:,} of {r.transactions:,} commits "
                    f"slower than {cell.slow_commit_ms:g} ms; rows found/expected: {rows}")
            console.print(escape(line), soft_wrap=True)
            for d in r.lost:
                console.print(f"  [bold red]ACKNOWLEDGED COMMITS LOST on {escape(d.node)}: "
                              f"{escape(d.detail)}[/]", soft_wrap=True)


def print_model(cells: list[CellModel], console: Console) -> None:
    """Each cell's bounds, lowest first, the binding one marked; the serial part of the
    sync walsender; the what-if; the USL fit of its series."""
    for cell in cells:
        head = (f"cell {cell.idx} {escape(cell.label)}: {fmt.tps(cell.measured_tps)} tps "
                f"measured, {cell.clients} clients on {cell.cpus:g} CPUs")
        if cell.missing and not cell.wait_bounds:
            console.print(f"{head}: {escape(cell.missing)}", soft_wrap=True)
            continue
        table = Table(title=head + " - the bounds, lowest first (95 % CI)",
                      title_justify="left")
        for col in ("resource", "kind", "µs / commit", "max tps", "from"):
            table.add_column(col, justify="left" if col in ("resource", "kind", "from")
                             else "right")
        for b in sorted([*cell.bounds, *cell.wait_bounds], key=lambda b: b.max_tps.mean):
            d = b.demand_us
            demand = "-" if d is None else f"{d.mean:,.1f} [{fmt.us(d.low)}, {fmt.us(d.high)}]"
            mark = " ← binds" if b.resource == cell.binding else ""
            table.add_row(escape(b.resource) + mark, b.kind, demand,
                          f"{fmt.tps(b.max_tps.mean)} [{fmt.tps(b.max_tps.low)}, "
                          f"{fmt.tps(b.max_tps.high)}]", escape(b.source))
        console.print(table)
        said = headline(cell)
        if said:
            console.print(f"  {escape(said)}", soft_wrap=True)
        for line in _wait_lines(cell):
            console.print(line, soft_wrap=True, markup=False)
        for error in cell.errors:
            console.print(f"  [red]model error[/red]: {escape(error)}", soft_wrap=True)
        if cell.knee_clients is not None:
            console.print(f"  knee: about {cell.knee_clients:,.1f} clients (R1 from "
                          f"{escape(cell.knee_from or '')})", soft_wrap=True)
        for s in cell.serial[:1]:
            console.print(f"  {s.role} spends {100 * s.share:.0f} % of its CPU in "
                          f"{s.frame}: at least {s.serial_us_per_commit:,.1f} µs per "
                          f"commit under SyncRepLock, a serial ceiling of "
                          f"{fmt.tps(s.max_tps_if_serial)} tps", soft_wrap=True)
        for line in _twin_lines(cell):
            console.print(line, soft_wrap=True)
        w = cell.what_if
        if w is not None and w.max_tps is not None:
            console.print(f"  on {w.cores:g} CPUs with {w.clients} clients, demands as "
                          f"measured: {escape(w.binding or '')} binds at "
                          f"{fmt.tps(w.max_tps.mean)} tps [{fmt.tps(w.max_tps.low)}, "
                          f"{fmt.tps(w.max_tps.high)}]", soft_wrap=True)
            there = [_wait_there(b) for b in w.wait_bounds]
            if there:
                console.print("  the wait bounds there: " + "; ".join(there), soft_wrap=True,
                              markup=False)
        for axis, fit in (("clients", cell.usl), ("cores", cell.usl_cores)):
            if fit is None:
                continue
            sg, kp, pk, pt = fit.sigma, fit.kappa, fit.peak_n, fit.peak_tps
            if sg is None or kp is None or pk is None or pt is None:
                console.print(f"  USL over {axis}: no fit ({escape(fit.reason or '')})",
                              soft_wrap=True)
                continue
            console.print(f"  USL over {axis}: σ {sg.value:.3f} [{sg.low:.3f}, "
                          f"{sg.high:.3f}], κ {kp.value:.5f} [{kp.low:.5f}, "
                          f"{kp.high:.5f}]; peak at {fmt.tps(pk.value)} {axis}, "
                          f"{fmt.tps(pt.value)} tps [{fmt.tps(pt.low)}, {fmt.tps(pt.high)}]",
                          soft_wrap=True)
    if cells:
        console.print("Demands are CPU per commit as measured; they fall as more commits "
                      "share a WAL flush at higher load, so a bound on another machine is "
                      "a ceiling for the shape, not a forecast.", soft_wrap=True)
    if any(c.wait_bounds for c in cells):
        console.print("Wait bounds keep the traced repeat's shares of time (its traps slow "
                      "every duration) and take the durations from the measured throughput. "
                      "On another machine the release's cost per waiter stays (one process, "
                      "one waiter at a time) and the commit's time in the server stays as "
                      "measured at the cell's clients, though it grows with the waiters and "
                      "its run-queue part may shrink with cores: the shape, not a forecast.",
                      soft_wrap=True)


def _wait_lines(cell: CellModel) -> list[str]:
    """How the wait bounds were reached, or why the cell has none."""
    little = next((b for b in cell.wait_bounds if isinstance(b, LittleBound)), None)
    if little is None:
        return [f"  no wait bounds: {cell.wait_missing}"] if cell.wait_missing else []
    traced = ", ".join(f"{b.resource} {fmt.tps(b.as_traced_tps)} tps"
                       for b in cell.wait_bounds)
    lines = [f"  wait bounds from the commit anatomy ({little.traced_commits:,} commits "
             f"traced at {little.traced_tps:,.0f} tps, {little.scale:.2f}x slower than "
             "the measured repeats: the probe's traps), its shares of time carried to the "
             f"measured pace; as traced {traced} (as costs shows)"]
    if little.parts_us:
        lines.append("  per commit in the server at the measured pace: " + ", ".join(
            f"{PART_NAMES[k]} {v:,.0f} µs" for k, v in little.parts_us.items()))
    return lines


def _wait_there(b: WaitBound) -> str:
    span = f"{b.resource} {fmt.tps(b.max_tps.mean)} tps [{fmt.tps(b.max_tps.low)}, " \
           f"{fmt.tps(b.max_tps.high)}]"
    if isinstance(b, ReleaseBound):
        return (f"{span} (its cost per waiter does not shrink with cores; "
                f"measured at {b.waiters_per_release or 0:.1f} waiters per release, it "
                "falls where a release frees more)")
    assert isinstance(b, LittleBound)
    dropped = ", ".join(p.replace("_", " ") for p in b.dropped)
    carried = ", ".join(p.replace("_", " ") for p in b.carried)
    parts = (f"; carried: {carried}; dropped: {dropped} (this machine's wait for a core)"
             if dropped else "")
    return (f"{span} ({b.clients} clients over the time in the server as at {b.at_clients}"
            f"{parts})")


def standby_words(b: StandbyLoad) -> str:
    """A standby's walreceiver, its flush lag both ways and its WAL disk, in a line."""
    said = []
    if b.syncing is not None:
        said.append(f"walreceiver {100 * b.syncing:.0f} % in a WAL sync, "
                    f"{100 * float(b.writing or 0):.0f} % writing")
    if b.position_flush_ms is not None:
        trust = " (the view's disagrees: positions trusted)" if b.lags_disagree else ""
        said.append(f"flush lag from WAL positions {b.position_flush_ms:,.2f} ms{trust}")
    if b.sync_call_us is not None:
        said.append(f"{b.syncs:,} fdatasync calls, {b.sync_call_us / 1000:,.2f} ms each")
    if b.disk is not None:
        said.append(b.disk.words())
    return "; ".join(said) or "its walreceiver was not sampled"


def print_observation(windows: Sequence[Observation], console: Console) -> None:
    """``observe``'s answer: the rates, the wait, the sync walsender, the lags, the
    observer's own cost, then the verdicts as ``diagnose`` prints them."""
    for o in windows:
        low, high = o.writes_ci
        interval = (f" [{low:,.0f}, {high:,.0f}]" if low is not None and high is not None
                    else "")
        console.print(f"[bold]window {o.idx} {escape(o.label)}[/]: {o.seconds:.0f} s in "
                      f"{o.slices} slices, PostgreSQL {escape(o.version)}, "
                      f"synchronous_commit = {escape(str(o.synchronous_commit))}, "
                      f"synchronous_standby_names = "
                      f"'{escape(str(o.synchronous_standby_names or ''))}'", soft_wrap=True)
        console.print(f"  writes: {o.writes_per_s:,.0f} transactions/s{interval} "
                      f"(all commits {o.commits_per_s:,.0f}/s, rollbacks "
                      f"{o.rollbacks_per_s:,.1f}/s); WAL {o.wal_mb_per_s:,.2f} MB/s; "
                      f"{o.sessions_max} client sessions, {o.in_transaction_mean:.2f} "
                      "in a transaction on average", soft_wrap=True)
        if o.sync_wait_share is not None:
            console.print(f"  waiting for a standby: {100 * o.sync_wait_share:.1f} % of the "
                          f"backends' time in a transaction ({o.waiting_backends_mean or 0.0:.2f} "
                          "backends at once)", soft_wrap=True)
        for w in o.walsenders:
            if w.cores_busy is None:
                continue
            # a window cut short may have one slice (no interval) or no write (no CPU
            # per write): what is not known is left out, not formatted
            cpu = w.cpu_us_per_commit
            per_write = ""
            if cpu is not None and cpu["mean"] is not None:
                per_write = (f"{cpu['mean']:,.1f} µs CPU per write"
                             + (f" [{cpu['low']:,.1f}, {cpu['high']:,.1f}]"
                                if cpu["low"] is not None and cpu["high"] is not None
                                else "") + ", ")
            bound = f"; alone it would bind at ~{fmt.tps(w.max_tps)} tps" if w.max_tps else ""
            console.print(f"  walsender for {escape(w.standby)}: {per_write}"
                          f"{w.cores_busy:.2f} of a core busy{bound}", soft_wrap=True)
        for r in o.replication:
            lags = ", ".join(f"{k} {lag:.2f} ms" for k, lag in (
                ("write", r.write_ms), ("flush", r.flush_ms), ("replay", r.replay_ms))
                if lag is not None)
            console.print(f"  standby {escape(str(r.standby))} ({escape(str(r.states))}): "
                          f"{lags or 'no lag times (9.6)'}; flush distance "
                          f"{(r.flush_bytes or 0) / 1024:,.1f} KiB on average", soft_wrap=True)
        for b in o.standbys:
            console.print(f"    {escape(b.standby)}: {standby_words(b)}", soft_wrap=True)
        for c in o.state_changes[:10]:
            console.print(f"  at {c.t_s:.1f} s standby {escape(str(c.standby))}: "
                          f"{escape(c.change)}", soft_wrap=True)
        if len(o.state_changes) > 10:
            console.print(f"  ... {len(o.state_changes) - 10} more sync-state changes "
                          "(diagnose --json has them all)")
        own = o.own
        cost = (f"{100 * own.cpu_share_of_core:.2f} % of a core"
                if own.cpu_share_of_core is not None else "CPU not measured")
        console.print(f"  the observer's own cost: {cost}, {own.queries_per_s:.1f} "
                      "read-only statements/s", soft_wrap=True)
        if o.anatomy:
            for line in anatomy_lines(o.anatomy):
                console.print(escape(line), soft_wrap=True)
        for note in o.notes:
            console.print(f"  [yellow]note[/]: {escape(note)}", soft_wrap=True)
        print_verdicts(o.verdicts, console)
