"""``ab``'s answer as plain text: at most 72 columns, no colour, fit for a mailing list
post. The same lines are printed and written to ``summary.txt``."""

from __future__ import annotations

import shlex
import textwrap

from syncrep_lab import format as fmt
from syncrep_lab.analysis.anatomy import PART_NAMES, STANDBY, STANDBY_PARTS
from syncrep_lab.patch_ab.answer import (
    BoundRatio,
    CostRatio,
    Figure,
    PatchedCell,
    PatchVerdict,
    RoleCosts,
)
from syncrep_lab.patch_ab.command import AbAnswer, BaseAnswer
from syncrep_lab.stats.pairing import CROSSOVER_NOTE

WIDTH = 72
BACKEND_PARTS = ("local_flush", "commit_wait", "standby_wait", "wakeup_queue", "run_queue",
                 "unsignalled")
SHORT_PARTS = {"unsignalled": "released before sleeping"}
# the parts of the wait for a standby, in a column (analysis/anatomy.py's STANDBY_NAMES
# spelt out are too wide for it)
STANDBY_SHORT = {"send": "primary's send", "transit_out": "transit out",
                 "queue": "standby's queue",
                 "write": "standby's write", "flush": "standby's flush",
                 "replay": "standby's replay", "reply": "standby's reply",
                 "transit_back": "transit back", "reply_handling": "reply's handling"}
CPU_FLOOR_US = 1.0  # roles under 1 µs of CPU per commit on both sides are not listed
SYSCALL_CHANGE = 0.10  # one probed repeat a side: calls shown where they moved by 10 %


def wrap(text: str, indent: str = "", first: str | None = None) -> list[str]:
    # a word longer than the line (a path in the command to run again) is kept whole:
    # broken, it could not be copied back (a checkout in a mktemp folder broke one)
    return textwrap.wrap(text, WIDTH, initial_indent=indent if first is None else first,
                         subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=False) or [""]


def _times(fig: Figure | CostRatio | BoundRatio | None) -> str:
    """'x0.93 [0.88, 0.98]' for a B/A with its interval."""
    return "" if fig is None else fmt.times(fig.ratio, fig.low, fig.high)


def _level(cell: PatchedCell) -> str:
    return cell.level + (" (ctl)" if cell.control else "")


def _head(cell: PatchedCell) -> str:
    return f"{cell.level}, {cell.clients} clients" + (" (control)" if cell.control else "")


def ratio_lines(ab: PatchVerdict) -> list[str]:
    conf = round(100 * ab.confidence)
    duet = ab.order == "duet"
    paired = (f"simultaneous pairs, a {CROSSOVER_NOTE}" if duet else "paired by round")
    lines = [*wrap(f"Throughput, patched / stock ({paired}, {conf} % interval)"),
             f"{'level':<18}{'clients':>7}  {'ratio':>5}  {'interval':<12} "
             f"{'could see':>9}  verdict"]
    for c in ab.cells:
        r = c.ratio
        mean = r.mean if r else None
        interval = (f"{r.low:.3f}-{r.high:.3f}" if r is not None and r.low is not None
                    and r.high is not None else "-")
        seen = (f"±{r.detectable_pct:.1f} %" if r is not None and r.detectable_pct is not None
                else "-")
        lines.append(f"{_level(c):<18}{c.clients:>7}  "
                     f"{(f'{mean:.3f}' if mean is not None else '-'):>5}  {interval:<12} "
                     f"{seen:>9}  {c.verdict}")
    if duet:
        lines += _per_round_lines(ab)
    if duet:
        lines += _tightest_lines(ab)
    missing = [c for c in ab.cells if c.verdict == "not measured"]
    for c in missing:
        failed = [side for side, status in c.statuses.items() if status != "done"]
        lines += wrap(f"{c.level} at {c.clients} clients: not measured, the "
                      f"{' and '.join(failed)} cell {' and '.join(c.statuses[f] for f in failed)}"
                      f" (syncrep-lab results {ab.run} says why).")
    lines += wrap("'no change': none larger than 'could see' (the change this run "
                  "would have detected 4 times in 5); 'ctl': the control, whose "
                  "commits return before the wait.")
    lines += wrap(f"Control: {ab.control.sentence}.")
    return lines


def _per_round_lines(ab: PatchVerdict) -> list[str]:
    """A duet's per-round intervals of the same rounds beside the crossover's: what
    taking the ratio over two rounds removed (the CPU sets' difference), and the rounds
    left out of the units."""
    shown, dropped = [], 0
    for c in ab.cells:
        r = c.ratio
        each = r.per_round if r is not None else None
        if r is None or each is None or each.low is None or each.high is None \
                or r.crossover_units is None:
            continue
        dropped = max(dropped, r.unpaired_rounds)
        shown.append(f"{_level(c)} {c.clients} {each.low:.3f}-{each.high:.3f}")
    if not shown:
        return []
    lines = wrap("The same rounds paired one by one (each pair's ratio carries the CPU "
                 "sets' difference, the crossover cancels it): " + "; ".join(shown) + ".")
    if dropped:
        lines += wrap(f"{dropped} round{'s' if dropped != 1 else ''} outside a whole "
                      "crossover unit (an odd last round) left out of the ratio.")
    return lines


def _tightest_lines(ab: PatchVerdict) -> list[str]:
    """A duet's: per cell, the measure that moved with the narrowest interval (TPS, a
    role's CPU or a system call per commit), and how its sides were paired; then what
    the work per commit could not be measured with here."""
    lines = []
    for c in ab.cells:
        m = c.tightest
        if m is not None:
            lines += wrap(f"{_level(c)} at {c.clients}: tightest measure that moved: "
                          f"{m.measure} {fmt.times(m.ratio, m.low, m.high)} "
                          f"(±{100 * m.half_width_rel:.1f} %, {m.how})", "    ", "  ")
    head = "Measures that moved (the narrowest interval of each cell):"
    lines = [head, *lines] if lines else [f"{head} none."]
    for note in ab.work_notes:
        lines += wrap(note[0].upper() + note[1:] + ".")
    return lines


def _roles(cell: PatchedCell) -> tuple[RoleCosts, ...]:
    return cell.compared.roles if cell.compared else ()


def _cpu_lines(cell: PatchedCell) -> list[str]:
    lines = []
    for role in _roles(cell):
        cpu = role.cpu_us
        if cpu is None:
            continue
        a, b = cpu.stock.mean, cpu.patched.mean
        if max(a or 0.0, b or 0.0) < CPU_FLOOR_US:
            continue
        name = f"{role.node} {role.role}"
        mark = " *" if cpu.significant else ""
        lines.append(f"  {name[:26]:<26} {fmt.figure(a):>7} -> {fmt.figure(b):>7}  "
                     f"{_times(cpu)}{mark}")
    return lines


def _syscall_lines(cell: PatchedCell, sync: str | None) -> list[str]:
    """The commit path's roles (the primary's backends and its sync walsender): each
    system call per commit on both sides."""
    roles = [r for r in _roles(cell) if r.node == "primary" and (
        r.role == "backend" or r.role == sync
        or (sync is None and r.role.startswith("walsender")))]
    lines = []
    counts = set()
    for role in roles:
        for call, fig in role.syscalls.items():
            a, b = fig.stock.mean, fig.patched.mean
            if a is None or b is None:
                continue
            counts.add(min(fig.stock.n, fig.patched.n))
            mark = " *" if fig.significant else ""
            name = f"{role.role} {call}"
            lines.append(f"    {name[:28]:<28} {fmt.figure(a, 2):>6} -> {fmt.figure(b, 2):>6}  "
                         f"{_times(fig)}{mark}")
    if not lines:
        return []
    n = min(counts)
    how = ("no interval: one probed repeat a side" if n < 2
           else f"{n} probed repeats a side")
    return [f"  system calls per commit (perf; {how}):", *lines]


def _anatomy_lines(cell: PatchedCell) -> list[str]:
    a = cell.compared.anatomy_stock if cell.compared else None
    b = cell.compared.anatomy_patched if cell.compared else None
    if a is None or b is None:
        return []
    lines = ["  commit anatomy, µs per commit (probed repeats):"]
    for part in BACKEND_PARTS:
        ca, cb = a.components.get(part), b.components.get(part)
        if ca is None and cb is None:
            continue
        va = ca.us_per_commit.mean if ca else None
        vb = cb.us_per_commit.mean if cb else None
        indent = "      " if part not in ("local_flush", "commit_wait") else "    "
        name = SHORT_PARTS.get(part) or PART_NAMES.get(part, part)
        lines.append(f"{indent}{name:<{30 - len(indent)}} {fmt.figure(va):>8} -> "
                     f"{fmt.figure(vb):>8}")
    ra, rb = a.releases, b.releases
    if ra and rb and ra.waiters_per_release and rb.waiters_per_release:
        lines += wrap(f"{ra.walsender} frees {ra.waiters_per_release:.1f} -> "
                      f"{rb.waiters_per_release:.1f} waiters a release, "
                      f"{fmt.figure(ra.per_waiter_us, 2)} -> "
                      f"{fmt.figure(rb.per_waiter_us, 2)} "
                      "µs each", "    ")
    return lines + _standby_lines(cell)


def _standby_lines(cell: PatchedCell) -> list[str]:
    """The wait for each standby in its parts (``--standby-anatomy``), stock ->
    patched, B/A with its interval over the anatomy repeats, ``*`` where it moved at the
    cell's per-figure level (as the costs are marked)."""
    if cell.compared is None or cell.compared.anatomy_stock is None \
            or cell.compared.anatomy_patched is None:
        return []
    a = {s.standby: s for s in cell.compared.anatomy_stock.standby}
    b = {s.standby: s for s in cell.compared.anatomy_patched.standby}
    ratios = {(f.standby, f.part): f.figure for f in cell.compared.standby_half}
    lines = []
    for who in sorted(a.keys() & b.keys()):
        sa, sb = a[who], b[who]
        lines += wrap(f"the wait for standby {who.removeprefix(STANDBY)}, µs per "
                      f"commit joined ({sa.commits:,} -> {sb.commits:,}):",
                      "      ", "    ")
        for part in STANDBY_PARTS:
            pa, pb = sa.parts.get(part), sb.parts.get(part)
            if pa is None and pb is None:
                continue
            fig = ratios.get((who, part))
            mark = " *" if fig is not None and fig.significant else ""
            # the anatomy's columns above, one space before B/A: 72 with a mark
            lines.append(f"      {STANDBY_SHORT[part]:<24} "
                         f"{fmt.figure(pa.mean if pa else None):>8} -> "
                         f"{fmt.figure(pb.mean if pb else None):>8} {_times(fig)}{mark}")
        if sa.sum_ratio is not None and sb.sum_ratio is not None:
            lines += wrap(f"the parts sum to {sa.sum_ratio:.2f} -> {sb.sum_ratio:.2f} of "
                          f"its {fmt.figure(sa.whole_us)} -> {fmt.figure(sb.whole_us)} µs",
                          "        ", "      ")
    return lines


def _gprof_lines(cell: PatchedCell, sync: str | None) -> list[str]:
    """gprof's calls per commit of the commit path's roles (a profiling build)."""
    lines = []
    for g in (cell.compared.gprof if cell.compared else None) or ():
        if g.node != "primary" or g.role not in ("backend", sync):
            continue
        lines.append(f"  gprof, calls per commit in {g.role} (exact counts):")
        for f in g.functions:
            lines.append(f"    {f.function[:36]:<36} {fmt.figure(f.stock, 2):>9} -> "
                         f"{fmt.figure(f.patched, 2):>9}")
    return lines


def _flame_lines(cell: PatchedCell) -> list[str]:
    graphs = cell.compared.flame if cell.compared else ()
    if not graphs:
        return ["  flame graphs: none on one side (probes off, or perf missing)"]
    moved = [g for g in graphs if g.moved]
    tested = [g for g in graphs if g.frames_tested]
    frames = sum(g.frames_tested for g in tested)
    samples = (sum(g.samples_stock for g in tested), sum(g.samples_patched for g in tested))
    if not moved:
        return wrap(f"flame graphs: no frame's share of its role moved beyond the "
                    f"sampling noise ({frames} frames of {len(tested)} "
                    f"role{'s' if len(tested) != 1 else ''}, "
                    f"{samples[0]:,} and {samples[1]:,} samples)", "    ", "  ")
    lines = ["  flame graphs, frames whose share of the role moved:"]
    for g in moved:
        for f in g.moved:
            who = f"{g.role} {f.frame}"
            ns = ""
            if f.stock_ns_per_commit is not None and f.patched_ns_per_commit is not None:
                ns = (f" ({f.stock_ns_per_commit:,.0f} -> "
                      f"{f.patched_ns_per_commit:,.0f} ns)")
            lines.append(f"    {who[:34]:<34} {100 * f.stock_share:>5.1f} -> "
                         f"{100 * f.patched_share:>5.1f} %{ns}")
    return lines


def _model_lines(cell: PatchedCell) -> list[str]:
    m = cell.model
    if m is None:
        return []
    a, b, cost, bound = m.stock, m.patched, m.cost_ratio, m.bound_ratio
    text = (f"{_head(cell)}: {m.walsender} {fmt.figure(a.demand_us)} -> "
            f"{fmt.figure(b.demand_us)} µs of CPU per commit")
    if cost and cost.ratio:
        text += f", {_times(cost)}"
    text += (f"; alone it would bind at {fmt.tps_short(a.bound_tps)} -> "
             f"{fmt.tps_short(b.bound_tps)} tps")
    if bound.ratio:
        text += f", {_times(bound)}"
    at = (f"; on {m.cores:g} cores the model has {a.binding_at_cores} bind "
          + ("in both builds" if a.binding_at_cores == b.binding_at_cores
             else f"with stock, {b.binding_at_cores} with patched"))
    text += at + "."
    return wrap(text, "    ", "  ")


def _model_sentence(ab: PatchVerdict) -> list[str]:
    """The headline of the model: the waiting cell at the most clients."""
    waiting = [(c, c.model, c.model.cost_ratio, c.model.cost_ratio.ratio)
               for c in ab.cells if not c.control and c.model and c.model.cost_ratio
               and c.model.cost_ratio.ratio]
    if not waiting:
        return []
    cell, m, cost, cost_ratio = max(waiting, key=lambda w: (w[0].clients, w[0].level == "on"))
    bound = m.bound_ratio
    change = 100 * (cost_ratio - 1)
    moves = "falls" if change < 0 else "rises"
    text = (f"At {_head(cell)}, {m.walsender}'s CPU per commit {moves} "
            f"{abs(change):.0f} %")
    if cost.low is not None and cost.high is not None:
        text += f" [{100 * (cost.low - 1):+.0f}, {100 * (cost.high - 1):+.0f} %]"
    if not cost.significant:
        text += " (no change beyond its interval)"
    up = 100 * ((bound.ratio or 0.0) - 1)
    text += (f"; where it binds, the ceiling would {'rise' if up >= 0 else 'fall'} "
             f"about {abs(up):.0f} %.")
    return wrap(text)


def _build_lines(side: BaseAnswer) -> list[str]:
    lines = []
    for which, b in (("stock", side.stock), ("patched", side.patched)):
        lines += wrap(f"{which}: {b.name}, PostgreSQL {b.version} ({b.flavor}), "
                      f"from {side.stock_from if which == 'stock' else b.source}",
                      "    ", "  ")
        lines += wrap("configure " + " ".join(shlex.quote(f) for f in b.configure),
                      "      ", "    ")
        if b.unfit:
            lines += wrap(f"not for performance figures: {b.unfit}", "      ", "    ")
    for p in side.patches:
        lines += wrap(f"patch {p.name} sha256 {p.sha256[:16]}"
                      + ("" if p.changes else " (changes no file)"), "    ", "  ")
    if side.note:
        lines += wrap(side.note, "    ", "  ")
    return lines


def summary_lines(answer: AbAnswer) -> list[str]:
    """Every line of the answer, none wider than WIDTH."""
    lines: list[str] = []
    machine = answer.machine
    for side in answer.bases:
        ab = side.answer
        version = side.stock.version
        title = f"PostgreSQL {version}: stock against patched (syncrep-lab ab)"
        lines += [title, "=" * len(title)]
        names = ", ".join(p.name for p in side.patches) or "none (the tree as it is)"
        lines += wrap(f"patches: {names}")
        minutes = (ab.seconds or 0) / 60
        budget = f", budget {ab.budget}" if ab.budget else ""
        stopped = ", ".join(ab.stop_reasons) or "-"
        order = ("duet rounds (stock and patched at the same moment, each on CPUs of "
                 "its own, swapped every round)" if ab.order == "duet"
                 else f"{ab.order} rounds")
        lines += wrap(f"{ab.rounds} {order} of {ab.duration_s} s repeats "
                      f"in {minutes:.0f} min{budget} (rounds stopped by: {stopped}); "
                      f"{machine.get('cpus_usable')} CPUs, {machine.get('cpu_model')}, "
                      f"{machine.get('kernel')}")
        if ab.order_note and (ab.order == "duet" or "duet" in ab.order_note):
            lines += wrap(f"order: {ab.order_note}")
        lines.append("")
        lines += ratio_lines(ab)
        most = max((x.clients for x in ab.cells), default=0)
        shown = [c for c in ab.cells if c.compared is not None and (
            c.verdict in ("faster", "slower") or c.clients == most)]
        if shown:
            conf = round(100 * ab.confidence)
            lines += ["", f"Per commit, stock -> patched (B/A and its {conf} % interval; "
                          "* moved)"]
            lines += wrap("CPU µs from /proc over the measured repeats; system calls "
                          "counted by perf in the probed repeats. The cells at the most "
                          "clients and those that moved; every cell is in ab.json. "
                          f"* : moved at {100 - conf} % over all the figures the cell "
                          "compares (Bonferroni: each at that level divided by their "
                          "number, given beside the cell).")
        for cell in shown:
            tested = cell.compared.figures_tested if cell.compared else 0
            lines += ["", f"{_head(cell)}: {tested} figures compared"]
            lines += _cpu_lines(cell)
            sync = (ab.sync_walsender if cell.control
                    else cell.model.walsender if cell.model else None)
            lines += _syscall_lines(cell, sync)
            lines += _anatomy_lines(cell)
            lines += _gprof_lines(cell, sync)
            lines += _flame_lines(cell)
        models = [c for c in ab.cells if not c.control and c.model]
        if models:
            lines += ["", f"The walsender's bound (the model on {ab.reference_cores:g} "
                          "cores: a shape, not a forecast)"]
            lines += _model_sentence(ab)
            for cell in models:
                lines += _model_lines(cell)
        lines += ["", "Builds"]
        lines += _build_lines(side)
        lines += ["", "Files (in the output folder)"]
        lines += wrap(f"report: {side.report}", "    ", "  ")
        lines += wrap(f"differential flame graphs: {side.flamediff}", "    ", "  ")
        lines.append("")
    lines.append("Reproduce")
    lines += wrap(answer.command, "    ", "  ")
    out = []
    for ln in lines:  # a figure wider than its column: wrapped, never past WIDTH
        ln = ln.rstrip()
        indent = ln[:len(ln) - len(ln.lstrip())]
        out += [ln] if len(ln) <= WIDTH else wrap(ln.strip(), indent + "  ", indent)
    return out
