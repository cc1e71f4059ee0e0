"""The ``syncrep-lab`` command line.

Each command is a thin layer over a library call; what it prints goes through one
function, :func:`render`: a command hands it an :class:`Answer` (the result's JSON form
and its text form, a CSV form where it has one) and the output the user chose
(``--json``, ``--csv``). Errors a user can cause exit with a message naming the cause
and the fix.

Modules that pull in psycopg are imported inside the commands that need them:
that import alone costs a fifth of a second, and ``cluster down`` has none to
spare.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click
from rich.markup import escape
from rich.table import Table

from syncrep_lab import __version__, paths, shutdown
from syncrep_lab.cluster.manifest import keep, load, registered
from syncrep_lab.cluster.teardown import clean as clean_all
from syncrep_lab.cluster.teardown import in_use as clusters_in_use
from syncrep_lab.cluster.teardown import kept as kept_clusters
from syncrep_lab.cluster.teardown import remove_cluster
from syncrep_lab.errors import Interrupted, UserError
from syncrep_lab.pg import fetch as pg_fetch
from syncrep_lab.pg.installations import Installation, discover
from syncrep_lab.pg.settings import PROFILES, parse_assignment
from syncrep_lab.runas import divert_profiles
from syncrep_lab.terminal import make_console, route_library_logs

if TYPE_CHECKING:
    from syncrep_lab.analysis.cells import CellRow
    from syncrep_lab.analysis.verdict import CellDiagnosis
    from syncrep_lab.pg.builds import Build

out = make_console()
err = make_console(stderr=True)

@dataclass(frozen=True)
class Answer:
    """What a command found, in each form it can print. ``json``: the result's JSON form
    (called only when JSON is asked for: some are costly), printed as is; ``text``: the
    terminal's form; ``csv`` where the command has one; ``default``: json.dumps's for
    values JSON has no type for (paths, times)."""

    json: Callable[[], object]
    text: Callable[[], None]
    csv: Callable[[], None] | None = None
    default: Callable[[Any], object] | None = None


def render(answer: Answer, output: str) -> None:
    """The one place a command's result is printed, in the output chosen (``text``,
    ``json`` or ``csv``)."""
    if output == "json":
        click.echo(json.dumps(answer.json(), indent=2, default=answer.default))
    elif output == "csv" and answer.csv is not None:
        answer.csv()
    else:
        answer.text()


FC = TypeVar("FC", bound=Callable[..., Any])


def output_options(*, csv: bool = False, json_help: str | None = None
                   ) -> Callable[[FC], FC]:
    """--json (and --csv where the command has one), passed as ``output``: text, json
    or csv (the last given wins)."""
    def add(f: FC) -> FC:
        f = click.option("--text", "output", flag_value="text", default=True, hidden=True)(f)
        f = click.option("--json", "output", flag_value="json", help=json_help)(f)
        if csv:
            f = click.option("--csv", "output", flag_value="csv", help="Print CSV.")(f)
        return f
    return add


def fail(exc: UserError) -> NoReturn:
    # soft_wrap: messages are never broken across lines (users and tests grep them)
    err.print(f"[bold red]error:[/] {escape(exc.cause)}", soft_wrap=True)
    if exc.fix:
        err.print(f"[bold]fix:[/] {escape(exc.fix)}", soft_wrap=True)
    sys.exit(exc.exit_code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="syncrep-lab")
def cli() -> None:
    """Reproduce, measure and explain the write ceiling of synchronous replication."""


# --- pg ---------------------------------------------------------------------------


@cli.group()
def pg() -> None:
    """PostgreSQL installations: list what is here, fetch 9.6 to 17."""


@pg.command("list")
@output_options(json_help="Print JSON for scripts.")
def pg_list(output: str) -> None:
    """Every PostgreSQL installation found, newest first."""
    from syncrep_lab.pg.builds import build_at

    installs = discover()
    builds = {inst.bin_dir: build_at(inst.bin_dir) for inst in installs
              if inst.source == "build"}

    def described(inst: Installation) -> dict[str, object]:
        built = builds.get(inst.bin_dir)
        return {**inst.describe(), **({"build": built.describe()} if built else {})}

    render(Answer(lambda: [described(i) for i in installs], lambda: _print_installs(
        installs, builds)), output)


def _print_installs(installs: list[Installation], builds: dict[Path, Build | None]) -> None:
    if not installs:
        out.print("no PostgreSQL installation found; run ./run setup")
        return
    table = Table(title="PostgreSQL installations")
    for col in ("major", "version", "source", "bin dir", "lacks / borrowed"):
        table.add_column(col)
    for inst in installs:
        notes = [f"{p} from {path.parent}" for p, path in sorted(inst.borrowed.items())]
        if inst.lacks:
            notes.append("lacks " + ", ".join(inst.lacks))
        built = builds.get(inst.bin_dir)
        if built is not None:
            notes.append(f"{built.flavor}, " + (", ".join(p["name"] for p in built.patches)
                                                or "no patches") + f"; {built.source}")
            if built.unfit:
                notes.append(f"not for performance figures: {built.unfit}")
        source = f"build {built.name}" if built else inst.source
        table.add_row(inst.major, str(inst.version), source, str(inst.bin_dir),
                      "\n".join(notes) or "-")
    out.print(table)


@pg.command("fetch")
@click.argument("version")
@click.option("--force", is_flag=True, help="Fetch again even if cached.")
def pg_fetch_cmd(version: str, force: bool) -> None:
    """Fetch a server bundle for PostgreSQL 9.6 to 17 (e.g. 9.6, 9.6.24, 12)."""
    err.print(f"fetching PostgreSQL {pg_fetch.bundle_version(version)} ...")
    inst = pg_fetch.fetch(version, force=force)
    out.print(f"PostgreSQL {inst.version} ready in {inst.bin_dir}")


@pg.command("build")
@click.argument("source")
@click.option("--patch", "patches", multiple=True, type=click.Path(path_type=Path),
              help="A patch (git diff or diff -u, applied with -p1); repeatable, in order.")
@click.option("--flavor", default="release", show_default=True,
              help="release, frame-pointers, profiling (gprof) or debug (assertions on).")
@click.option("--name", default=None,
              help="What --pg and the spec's pg axis call it (default: pgVERSION-FLAVOR, "
                   "with the patches' hash).")
@click.option("--jobs", type=click.IntRange(1, 256), default=None,
              help="make -j (default: the CPUs).")
@click.option("--cflags", default=None,
              help="The C compiler's flags in place of the flavor's (the seed's: "
                   "'-O3 -flto').")
@click.option("--configure", "configure_args", multiple=True, metavar="ARG",
              help="A configure argument (--enable-X, --with-X=Y, VAR=value); repeatable. "
                   "The seed's named semaphores: PREFERRED_SEMAPHORES=NAMED_POSIX.")
@output_options(json_help="Print JSON for scripts.")
def pg_build_cmd(source: str, patches: tuple[Path, ...], flavor: str, name: str | None,
                 jobs: int | None, cflags: str | None, configure_args: tuple[str, ...],
                 output: str) -> None:
    """Build PostgreSQL from SOURCE: a version (a Debian source package, e.g. 18 or 15.18),
    a release tarball, or a source tree; cached by source, patches, flavor and flags."""
    from syncrep_lab.pg.builds import build

    built = build(source, list(patches), flavor, name, jobs,
                  progress=lambda what: err.print(f"pg build: {escape(what)}"),
                  cflags=cflags, configure_args=configure_args)
    def text() -> None:
        out.print(f"{built.name}: PostgreSQL {built.version} ({built.flavor}) in "
                  f"{built.bin_dir}")
        if built.unfit:
            err.print(f"note: {built.unfit}")

    render(Answer(built.describe, text), output)


@cli.command("ab")
@click.argument("bases", nargs=-1, required=True, metavar="BASE...")
@click.option("--patch", "patches", multiple=True, metavar="[VERSION=]FILE",
              help="A patch (git diff or diff -u) for the patched side; repeatable, in "
                   "order. VERSION=FILE gives it to one base only (--patch 15=f15.patch).")
@click.option("--base", "git_base", default=None, metavar="COMMIT",
              help="BASE is a git tree: stock is this commit, patched the tree as it is.")
@click.option("--flavor", default="release", show_default=True,
              help="Both builds' flavor: release, frame-pointers, profiling or debug.")
@click.option("--spec", "spec_file", type=click.Path(path_type=Path), default=None,
              help="A spec whose matrix replaces the default one (ab sets its pg axis "
                   "and baseline).")
@click.option("--clients", default=None, metavar="N,N",
              help="The client counts (default 8,64).")
@click.option("--budget", default=None,
              help="No new round that would not leave time for the probed repeats and "
                   "the answer, from the end of the builds (default 8m).")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Output folder (default ./syncrep-runs/ab-TIME).")
@click.option("--resume", is_flag=True, help="Finish the runs of an interrupted --out.")
@click.option("--jobs", type=click.IntRange(1, 256), default=None,
              help="make -j for the builds (default: the CPUs).")
@click.option("--standby-anatomy", is_flag=True,
              help="Split the wait for the standby too, part by part (send, transits, "
                   "the standby's write, flush, replay, reply), stock -> patched. Off by "
                   "default, for its cost: the anatomy's own repeats run at 0.62 to 0.76 "
                   "of bare TPS with it, 0.82 to 0.91 without (32 clients, 2 cores), "
                   "and its parts are of that slower commit. A --spec's own [probes] "
                   "standby_anatomy is kept.")
@click.option("--duet", is_flag=True,
              help="Run stock and patched at the same moment, each cluster on CPUs of "
                   "its own, swapped every round, the ratio taken over a crossover of "
                   "two rounds of simultaneous pairs ([run] order = \"duet\"; target "
                   "±2 % unless the spec sets one); interleaved, saying why, where the "
                   "machine cannot give each side a CPU.")
@output_options(json_help="Print the answer as JSON.")
def ab_cmd(bases: tuple[str, ...], patches: tuple[str, ...], git_base: str | None,
           flavor: str, spec_file: Path | None, clients: str | None, budget: str | None,
           out: Path | None, resume: bool, jobs: int | None, standby_anatomy: bool,
           duet: bool, output: str) -> None:
    """Judge a patch: build BASE stock and patched (BASE as pg build takes it: a
    version, a tarball or a source tree), run both interleaved on the seed's shape
    (on, remote_write and the control local, at a low and a high client count) and
    say what changed: the paired ratio per cell, the control, CPU and system calls
    per commit per role, the commit anatomy, differential flame graphs and what the
    model makes of the walsender's cost."""
    from syncrep_lab.patch_ab.command import (
        Options,
        failed_cells,
        prepare,
        run_ab,
        write_answer,
    )
    from syncrep_lab.terminal.ab import summary_lines

    prep = prepare(Options(list(bases), list(patches), git_base, flavor, spec_file,
                           clients, budget, out, jobs, resume, standby_anatomy, duet))
    err.print(f"ab: output folder {escape(str(prep.out))}", soft_wrap=True)

    @contextmanager
    def display(folder: Path) -> Iterator[Any]:
        from syncrep_lab.terminal.progress import RunDisplay

        with _ab_resume_hint(prep.out), RunDisplay(folder) as shown:
            yield shown.events

    def progress(what: str) -> None:
        err.print(f"ab: {escape(what)}", soft_wrap=True)

    answer = run_ab(prep, display, progress)
    lines = summary_lines(answer)
    write_answer(answer, lines, prep.out, progress)
    def text() -> None:
        click.echo("\n".join(lines))
        err.print(f"written: {escape(str(prep.out / 'summary.txt'))}, "
                  f"{escape(str(prep.out / 'ab.json'))}", soft_wrap=True)

    render(Answer(answer.to_json, text, default=str), output)
    failed = failed_cells(answer)
    if failed:
        err.print(f"[red]{failed} cells failed[/] (their errors are in each run's store: "
                  "syncrep-lab results RUN)")
        sys.exit(4)


@contextmanager
def _ab_resume_hint(out_dir: Path) -> Iterator[None]:
    """On an interrupt, say how to finish the answer."""
    try:
        yield
    except Interrupted:
        err.print(f"the repeats done so far are stored in {escape(str(out_dir))}; finish "
                  "with the same command and --resume", soft_wrap=True)
        raise


# --- cluster ----------------------------------------------------------------------

_dir_option = click.option(
    "--dir", "cluster_dir", type=click.Path(path_type=Path), default=None,
    help="Cluster dir (default: the tool's state dir, clusters/default).",
)


@cli.group()
def cluster() -> None:
    """A primary and N streaming standbys: up, status, down."""


@cluster.command("up")
@click.option("--pg", "pg_spec", default=None,
              help="PostgreSQL to use: 18, 15, 9.6, a full version, or a bin dir.")
@click.option("--standbys", default=2, show_default=True, type=int)
@click.option("--names", default=None, help="Standby names, comma separated (default b,c,...).")
@click.option("--sync", "sync", default=None,
              help="synchronous_standby_names (default '1(b,c)' as in the seed; '' for async).")
@_dir_option
@click.option("--tcp", is_flag=True, help="Also listen on 127.0.0.1 and replicate over TCP.")
@click.option("--port", type=int, default=None,
              help="Primary port (standbys follow); default: free ports.")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
              help="Server setting for every node (repeatable).")
@click.option("--profile", type=click.Choice(PROFILES), default="benchmark", show_default=True,
              help="Named settings: a write benchmark's, or the seed's postgresql.conf.")
@click.option("--clone", type=click.Choice(["copy", "basebackup"]), default="copy",
              show_default=True, help="How standbys get their data dir.")
@click.option("--timeout", type=float, default=60.0, show_default=True,
              help="Seconds to wait for the cluster to be ready.")
@output_options()
def cluster_up(pg_spec: str | None, standbys: int, names: str | None, sync: str | None,
               cluster_dir: Path | None, tcp: bool, port: int | None, sets: tuple[str, ...],
               profile: str, clone: str, timeout: float, output: str) -> None:
    """Bring a cluster up; returns when every standby streams in its expected sync state."""
    from syncrep_lab.cluster.build import UpOptions, up
    from syncrep_lab.cluster.status import cluster_status

    started = time.monotonic()
    opts = UpOptions(
        dir=cluster_dir or paths.default_cluster_dir(), pg=pg_spec, standbys=standbys,
        names=names.split(",") if names else None, sync=sync, tcp=tcp, port=port,
        settings=dict(parse_assignment(s) for s in sets), profile=profile, clone=clone,
        timeout=timeout,
    )
    manifest = up(opts, progress=None if output == "json"
                  else lambda m: err.print(f"[dim]{escape(m)}[/]"))
    keep(manifest.dir)  # the user's now: clean leaves it alone (cluster down removes it)
    status = cluster_status(manifest)
    status["seconds"] = round(time.monotonic() - started, 3)

    def text() -> None:
        print_status(status)
        out.print(f"up in {status['seconds']:.2f} s; take it down with: "
                  f"syncrep-lab cluster down --dir {manifest.dir}")

    render(Answer(lambda: status, text, default=str), output)


def print_status(status: dict[str, Any]) -> None:
    table = Table(title=f"PostgreSQL {status['version']} cluster in {status['dir']}",
                  caption=f"synchronous_standby_names = '{status['synchronous_standby_names']}'")
    for col in ("node", "role", "pid", "port", "state", "sync_state", "flush lag",
                "replay lag"):
        table.add_column(col)
    for node in status["nodes"]:
        rep = node.get("replication") or {}

        def lag(kind: str, rep: dict[str, Any] = rep) -> str:
            if not rep:
                return "-"
            secs = rep.get(f"{kind}_lag_s")
            text = f"{rep.get(f'{kind}_lag_bytes', 0)} B"
            return text + (f" / {secs * 1000:.2f} ms" if secs is not None else "")

        state = node["state"] if node["role"] == "primary" else rep.get("state", node["state"])
        table.add_row(node["name"], node["role"], str(node["pid"] or "-"), str(node["port"]),
                      state, node.get("sync_state") or "-", lag("flush"), lag("replay"))
    out.print(table)
    if status.get("dropped_settings"):
        out.print("[dim]profile settings this version lacks (not set): "
                  + ", ".join(status["dropped_settings"]) + "[/]")


def _load(cluster_dir: Path | None) -> Any:
    d = (cluster_dir or paths.default_cluster_dir()).expanduser().absolute()
    manifest = load(d)
    if manifest is None:
        raise UserError(f"{d} holds no syncrep-lab cluster",
                        "give the --dir used with cluster up (syncrep-lab clean --list shows "
                        "every cluster this tool made)")
    return manifest


@cluster.command("status")
@_dir_option
@output_options()
def cluster_status_cmd(cluster_dir: Path | None, output: str) -> None:
    """Each node's role, pid, port, version, state, sync_state, positions and lags."""
    from syncrep_lab.cluster.status import cluster_status

    status = cluster_status(_load(cluster_dir))
    render(Answer(lambda: status, lambda: print_status(status), default=str), output)


@cluster.command("down")
@_dir_option
@click.option("--keep-data", is_flag=True, help="Stop (fast shutdown) but keep the data dirs.")
@click.option("--timeout", type=float, default=30.0, show_default=True)
def cluster_down(cluster_dir: Path | None, keep_data: bool, timeout: float) -> None:
    """Stop every node and remove the cluster dir's contents that syncrep-lab made."""
    d = (cluster_dir or paths.default_cluster_dir()).expanduser().absolute()
    report = remove_cluster(d, keep_data=keep_data, timeout=timeout)
    what = "stopped" if keep_data else "removed"
    killed = f" (killed: {', '.join(report.killed)})" if report.killed else ""
    out.print(f"{what} {d}: {len(report.stopped)} servers stopped{killed} "
              f"in {report.seconds:.2f} s")


# --- experiments ------------------------------------------------------------------

RUNS_DIR = Path("syncrep-runs")


def _latest_run() -> Path:
    runs = sorted((p for p in RUNS_DIR.glob("*") if (p / "syncrep-lab.sqlite").exists()),
                  key=lambda p: p.stat().st_mtime)
    if not runs:
        raise UserError(f"no run found in ./{RUNS_DIR}",
                        "give the run folder, or start one with: syncrep-lab run")
    return runs[-1]


@cli.command()
@click.argument("spec_file", required=False, type=click.Path(path_type=Path))
@click.option("--preset", default=None, help="A built-in spec: quick or seed.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Run folder (default ./syncrep-runs/NAME-TIME).")
@click.option("--resume", is_flag=True, help="Continue the run in --out where it stopped.")
@click.option("--check", is_flag=True,
              help="Only validate the spec and what it needs here; print the cells that "
                   "would run. Creates nothing.")
@click.option("--allow-alter", is_flag=True,
              help="Attached cluster: let the run change synchronous_standby_names (put "
                   "back at the end). Without it nothing of the cluster's is changed.")
@click.option("--budget", default=None,
              help="How long the command may take, from its start to its report (90s, "
                   "10m, 1h): no round starts that would not leave time for the probed "
                   "repeats and the end; overrides run.budget.")
@click.option("--duet", is_flag=True,
              help="Run each cell at the same moment as its baseline, each on a cluster "
                   "and CPUs of its own, swapped every round ([run] order = \"duet\"; a "
                   "baseline shared by several cells runs beside each of them).")
def run(spec_file: Path | None, preset: str | None, out: Path | None, resume: bool,
        check: bool, allow_alter: bool, budget: str | None, duet: bool) -> None:
    """Run an experiment: a TOML spec, or a preset (default: seed)."""
    started = time.monotonic()  # what the budget is counted from
    from syncrep_lab.plan import load
    from syncrep_lab.plan import spec as specs

    if budget is not None:
        try:
            specs.parse_duration(budget)
        except ValueError as exc:
            raise UserError(f"--budget: {exc}", "give it as 90s, 10m or 1h") from None

    if resume:
        if out is None:
            raise UserError("--resume needs the run folder", "pass --out RUN_FOLDER")
        if spec_file or preset or check or duet:
            raise UserError("--resume takes the spec stored with the run",
                            "leave out SPEC, --preset, --check and --duet")
        if not (out / "syncrep-lab.sqlite").is_file():
            raise UserError(f"{out} holds no run to resume (no syncrep-lab.sqlite)",
                            "give the --out of a run that was started, or start one with: "
                            "syncrep-lab run SPEC --out FOLDER")
        from syncrep_lab.run.runner import resume_run
        from syncrep_lab.terminal.progress import RunDisplay

        with _resume_hint(out), RunDisplay(out) as display:
            resume_run(out, display.events, allow_alter=allow_alter, budget=budget,
                       started=started)
        _finish(out)
        return
    if spec_file and preset:
        raise UserError("give a spec file or --preset, not both", "drop one of them")
    if spec_file:
        spec, text = load.load_spec_file(spec_file, allow_alter=allow_alter)
        spec_dir, source = spec_file.resolve().parent, str(spec_file)
    else:
        if allow_alter:
            raise UserError("--allow-alter applies to a spec that attaches to a cluster",
                            "leave --allow-alter out with --preset")
        spec, text = load.load_preset(preset or "seed")
        # a preset's relative paths (its builds' patches) are the presets' folder's
        spec_dir, source = specs.PRESETS_DIR, f"preset {preset or 'seed'}"
    if duet:
        text = load.with_order(text, "duet")
        spec = load.load_spec(text, f"{source} with --duet", allow_alter=allow_alter)
    if budget is not None:
        spec = spec.model_copy(update={"run": spec.run.model_copy(update={"budget": budget})})
    given_out = out
    if out is None:
        out = RUNS_DIR / f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    # What start_run would refuse, refused before the display starts (and for --check);
    # start_run is told the machine is checked, so that hosts are reached once a run.
    from syncrep_lab.run.preflight import check_machine, check_out, declared_patches
    from syncrep_lab.run.runner import start_run, stored_spec_text

    declared_patches(spec, spec_dir)
    guest_facts = check_machine(spec)
    stored_spec_text(text)
    check_out(out)
    if check:
        _print_check(spec, given_out, guest_facts)
        return
    from syncrep_lab.terminal.progress import RunDisplay

    with _resume_hint(out), RunDisplay(out) as display:
        start_run(spec, text, spec_dir, out, display.events, machine_checked=True,
                  started=started)
    _finish(out)


def _print_check(spec: Any, out_dir: Path | None, guest_facts: dict[str, Any]) -> None:
    """`run --check`: the plan, as the run would execute it (``guest_facts``: what the
    machine's check found of the guests, run/guests.check)."""
    from syncrep_lab.plan.matrix import expand
    from syncrep_lab.run.machine import machine_metadata
    from syncrep_lab.run.preflight import without_unlinkable

    plan = without_unlinkable(spec, expand(spec, machine_metadata()["cpus_usable"] or 2))
    clusters = len({c.cluster_key for c in plan.cells})
    out.print(f"spec {escape(spec.name)} is valid: {len(plan.cells)} cells on {clusters} "
              f"cluster{'s' if clusters != 1 else ''}", soft_wrap=True)
    shown = 50
    for cell in plan.cells[:shown]:
        out.print(f"  {cell.index:>4}  {escape(cell.label)}  (pg {cell.pg or 'default'}, "
                  f"{cell.standbys} standbys, sync {cell.sync!r}, {cell.threads} threads)",
                  soft_wrap=True)
    if len(plan.cells) > shown:
        out.print(f"  ... and {len(plan.cells) - shown} more")
    for message in plan.dropped:
        out.print(f"left out: {escape(message)}", soft_wrap=True)
    if spec.run.order == "duet":
        from syncrep_lab.plan.duet import duet_pairs

        pairs = duet_pairs(spec, plan.cells)
        out.print(f"duet: {len(pairs)} pairs a round, each side on CPUs of its own "
                  "(fewer than 2 CPUs: interleaved instead)", soft_wrap=True)
        for pair in pairs:
            out.print(f"  {pair.cell.index:>4} beside {pair.base.index}"
                      f"{' (on a twin of its cluster)' if pair.twin else ''}",
                      soft_wrap=True)
    from syncrep_lab.pg.builds import find_build

    for name, declared in spec.builds.items():
        made = find_build(name)
        out.print(f"build {escape(name)}: " + (
            f"one of that name is in the cache ({escape(str(made.bin_dir))}; rebuilt if its "
            "source or patches changed)" if made is not None else
            f"to be built before the first cluster (PostgreSQL {escape(declared.version)}, "
            f"{declared.flavor}, {len(declared.patches)} patch(es); minutes the first "
            "time)"), soft_wrap=True)
    if guest_facts:
        from syncrep_lab.plan.spec import GUEST_PREFIX

        g = guest_facts
        hosts = spec.topology.hosts
        placed = []
        for h in g["guests"]:
            base, _, _ = h.partition("-k")  # guest1-k2: guest1 with matrix.kernel's second
            i = int(base.removeprefix(GUEST_PREFIX))
            there = ", ".join(sorted(n for n, at in hosts.items() if at == base))
            placed.append(f"{h} ({there or f'instance {i}, isolation guests'})")
        out.print(f"guests: {', '.join(placed)}, booted before the first cluster, each "
                  f"{g['vcpus']} vCPU and {g['memory_mb']} MB"
                  + (f" in {g['numa_nodes']} virtual NUMA nodes" if g["numa_nodes"] > 1 else "")
                  + (f", vCPUs on CPUs {g['vcpu_cpus']} here" if g["vcpu_cpus"] else "")
                  + f"; kernel {escape(g['kernel'])}; "
                  f"{escape(g['accel'])}", soft_wrap=True)
    where = f" into {escape(str(out_dir))}" if out_dir is not None else ""
    out.print(f"nothing was created; run it{where} without --check", soft_wrap=True)


@contextmanager
def _resume_hint(out_dir: Path) -> Iterator[None]:
    """On an interrupt, say where the run is and how to continue it."""
    try:
        yield
    except Interrupted:
        if (out_dir / "syncrep-lab.sqlite").exists():
            err.print(f"the repeats done so far are stored in {escape(str(out_dir))}; "
                      f"continue with: syncrep-lab run --resume --out {escape(str(out_dir))}",
                      soft_wrap=True)
        raise


def _print_results_and_verdicts(out_dir: Path, rows: list[CellRow],
                                diagnosed: Sequence[CellDiagnosis]) -> None:
    """The results table (``rows`` from ``cell_summaries``) and each finished cell's
    leading verdict (``diagnosed``, the diagnosis the rows were made with)."""
    from syncrep_lab.analysis.faults import run_faults
    from syncrep_lab.terminal.analysis import print_verdict_lines
    from syncrep_lab.terminal.results import print_results

    print_results(out_dir, rows)

    for cell in run_faults(out_dir):
        if cell.acknowledged_lost:
            out.print(f"[bold red]cell {cell.idx} {escape(cell.label)}: acknowledged "
                      f"commits were lost (details: syncrep-lab faults {escape(str(out_dir))})[/]",
                      soft_wrap=True)
    by_idx = {d.idx: d for d in diagnosed}
    cells = [by_idx[r.cell.idx] for r in rows if r.cell.status == "done" and r.cell.idx in by_idx]
    if cells:
        out.print("what limits each cell (details: syncrep-lab diagnose "
                  f"{escape(str(out_dir))}):")
        print_verdict_lines(cells, out)


def _finish(out_dir: Path) -> None:
    """What `run` prints at the end: results, verdicts, and the exit status."""
    from syncrep_lab.analysis.diagnosis import diagnose_run
    from syncrep_lab.report.data import cell_summaries
    from syncrep_lab.report.html import write_report

    diagnosed = diagnose_run(out_dir)
    rows = cell_summaries(out_dir, diagnosed=diagnosed)
    _print_results_and_verdicts(out_dir, rows, diagnosed)
    try:
        out.print(f"report: {escape(str(write_report(out_dir)))}")
    except Exception as exc:  # the figures are stored: a page that failed loses no run
        cause = exc.cause if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
        err.print(f"[yellow]no report:[/] {escape(cause)}; retry with: syncrep-lab report "
                  f"{escape(str(out_dir))}", soft_wrap=True)
    failed = [r for r in rows if r.cell.status == "failed"]
    if failed:
        err.print(f"[red]{len(failed)} of {len(rows)} cells failed[/] (their errors are in "
                  "the table above and in the store)")
        sys.exit(4)


@cli.command()
@click.argument("run_dir", required=False, type=click.Path(path_type=Path))
@output_options(csv=True)
def results(run_dir: Path | None, output: str) -> None:
    """One row per cell: mean TPS with its confidence interval, latencies, repeats used,
    the leading verdict and the largest cost per commit."""
    from syncrep_lab.analysis.diagnosis import diagnose_run
    from syncrep_lab.report.data import cell_summaries
    from syncrep_lab.terminal.results import write_csv

    folder = run_dir or _latest_run()
    diagnosed = diagnose_run(folder)
    rows = cell_summaries(folder, diagnosed=diagnosed)
    render(Answer(lambda: [r.to_json() for r in rows],
                  lambda: _print_results_and_verdicts(folder, rows, diagnosed),
                  csv=lambda: write_csv(rows, sys.stdout)), output)


@cli.command()
@click.argument("run_dir", required=False, type=click.Path(path_type=Path))
@click.option("--out", "out_file", type=click.Path(path_type=Path), default=None,
              help="Where to write the page (default RUN/report.html).")
@click.option("--cell", "cell", type=int, default=None,
              help="The cell whose timeline and flame graphs are shown (its #; default the "
                   "fastest cell whose commits waited for a standby).")
@output_options(json_help="Print the report's data instead.")
def report(run_dir: Path | None, out_file: Path | None, cell: int | None,
           output: str) -> None:
    """Write the self-contained HTML report of a run (plots, verdict, costs, the seed
    side by side); it works offline and can be rebuilt at any time."""
    folder = run_dir or _latest_run()

    def data() -> object:
        from syncrep_lab.report.data import report_data

        return report_data(folder, cell)

    def text() -> None:  # the page, written
        from syncrep_lab.report.html import write_report

        path = write_report(folder, out_file, cell)
        out.print(f"report written to {escape(str(path))}")

    render(Answer(data, text, default=str), output)


@cli.command()
@click.argument("run_dir", required=False, type=click.Path(path_type=Path))
@click.option("--cell", "only_cell", type=int, default=None, help="Only this cell (its #).")
@output_options()
def costs(run_dir: Path | None, only_cell: int | None, output: str) -> None:
    """Cost per commit of every node and process role: CPU µs, context switches,
    system calls by kind; and the wait events each role was seen in."""
    from syncrep_lab.analysis.costs import run_costs
    from syncrep_lab.terminal.analysis import print_costs

    cells = [c for c in run_costs(run_dir or _latest_run())
             if only_cell is None or c.idx == only_cell]
    render(Answer(lambda: [c.to_json() for c in cells], lambda: print_costs(cells, out)),
           output)


@cli.command()
@click.argument("run_dir", required=False, type=click.Path(path_type=Path))
@click.option("--cell", "only_cell", type=int, default=None, help="Only this cell (its #).")
@output_options()
def diagnose(run_dir: Path | None, only_cell: int | None, output: str) -> None:
    """What limits each cell: the mechanism, the numbers behind it, what to try next."""
    from syncrep_lab.analysis.diagnosis import diagnose_run
    from syncrep_lab.terminal.analysis import print_diagnosis

    cells = [c for c in diagnose_run(run_dir or _latest_run())
             if only_cell is None or c.idx == only_cell]
    render(Answer(lambda: [c.to_json() for c in cells], lambda: print_diagnosis(cells, out)),
           output)


@cli.command("model")
@click.argument("run_dir", required=False, type=click.Path(path_type=Path))
@click.option("--cell", "only_cell", type=int, default=None, help="Only this cell (its #).")
@click.option("--cores", type=click.FloatRange(min=1), default=None,
              help="What would bind on this many CPUs, demands as measured.")
@click.option("--clients", type=click.IntRange(min=1), default=None,
              help="... and with this many clients.")
@output_options()
def model_cmd(run_dir: Path | None, only_cell: int | None, cores: float | None,
              clients: int | None, output: str) -> None:
    """Where each cell's ceiling is and which process sets it: the bound of every
    process, pool, the machine and the clients from CPU per commit, the knee, the
    Universal Scalability Law over clients, and what would bind on more cores."""
    from syncrep_lab.analysis.model import run_model
    from syncrep_lab.terminal.analysis import print_model

    cells = run_model(run_dir or _latest_run(), cell=only_cell, cores=cores, clients=clients)
    render(Answer(lambda: [c.to_json() for c in cells], lambda: print_model(cells, out)),
           output)


@cli.command("observe")
@click.argument("conninfo", required=False)
@click.option("--dir", "cluster_dir", type=click.Path(path_type=Path), default=None,
              help="A cluster made by syncrep-lab cluster up (instead of CONNINFO).")
@click.option("--standby", "standbys", multiple=True, metavar="NAME=CONNINFO",
              help="A standby to sample as well (repeatable); NAME is its application_name.")
@click.option("--seconds", type=float, default=60.0, show_default=True,
              help="How long to watch.")
@click.option("--hz", type=float, default=10.0, show_default=True,
              help="Samples of wait events and replication state per second.")
@click.option("--slice", "slice_seconds", type=int, default=10, show_default=True,
              help="Seconds per slice (the stored repeats: figures get intervals over them).")
@click.option("--host", default=None, help="Read the primary's /proc over SSH on this host.")
@click.option("--hosts", "hosts_file", type=click.Path(path_type=Path), default=None,
              help="TOML file with the [hosts.NAME] that --host names (a spec will do).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Folder to store it in (an earlier observe's: a new window there).")
@click.option("--label", default=None, help="A name for this window, e.g. 'before'.")
@click.option("--anatomy", is_flag=True,
              help="Also time every commit inside the primary (bpftrace uprobes, for the "
                   "window only): root, on the primary's machine; every server of its binary "
                   "here pays the traps while attached. With --standby, the sync standby's "
                   "half of each commit too, where it runs on this machine.")
@click.option("--serve", "serve_addr", default=None, metavar="HOST:PORT",
              help="Observe window after window (--seconds each) and serve the latest "
                   "window's answer for Prometheus at /metrics (:0 picks a free port).")
@click.option("--textfile", type=click.Path(path_type=Path), default=None,
              help="Write the latest window's answer to this file for node_exporter's "
                   "textfile collector (atomically, each window).")
@click.option("--windows", type=int, default=None,
              help="With --serve/--textfile: stop after this many windows (default: "
                   "until stopped).")
@output_options()
def observe_cmd(conninfo: str | None, cluster_dir: Path | None, standbys: tuple[str, ...],
                seconds: float, hz: float, slice_seconds: int, host: str | None,
                hosts_file: Path | None, out_dir: Path | None, label: str | None,
                anatomy: bool, serve_addr: str | None, textfile: Path | None,
                windows: int | None, output: str) -> None:
    """Watch a running cluster, read-only and without load: is synchronous replication
    what limits its commits, and how much headroom is left. Needs pg_monitor.
    With --serve or --textfile it keeps watching, window after window, and exports each
    window's answer as Prometheus metrics."""
    from syncrep_lab.observe.command import ObserveOptions, observe, parse_standby

    given = dict(parse_standby(s) for s in standbys)
    if (conninfo is None) == (cluster_dir is None):
        raise UserError("give the primary's CONNINFO or --dir of a cluster the tool made",
                        "e.g. syncrep-lab observe 'host=db1 dbname=postgres user=monitor'")
    if cluster_dir is not None:
        manifest = _load(cluster_dir)
        conninfo = manifest.conninfo(manifest.primary)
        for node in manifest.standbys:
            given.setdefault(node.name, manifest.conninfo(node))
    # with --anatomy, the sync one's half is split too, wherever it runs here: named
    # with --standby or added by --dir alike (a standby elsewhere is said and left out)
    named = tuple(given)
    assert conninfo is not None
    folder = out_dir or RUNS_DIR / f"observe-{time.strftime('%Y%m%d-%H%M%S')}"
    # what it says while it watches goes to stderr where stdout is JSON
    said = err if output == "json" else out
    opts = ObserveOptions(conninfo, given, seconds, hz, slice_seconds, host, hosts_file,
                          folder, label, anatomy, named)
    if serve_addr is not None or textfile is not None or windows is not None:
        from syncrep_lab.observe.serve import ServeOptions, serve

        status = serve(opts, ServeOptions(serve_addr, textfile, windows, keep=out_dir is not None),
                       say=lambda text: said.print(escape(text), soft_wrap=True),
                       line=(lambda text: print(text, flush=True)) if output == "json"
                       else None)
        sys.exit(status)
    if output != "json":
        out.print(f"observing for {seconds:g} s at {hz:g} Hz (read-only, no load) ...")
    done = observe(opts, say=lambda text: said.print(escape(text), soft_wrap=True))
    # the analysis (scipy) is imported after the window, not during it
    from syncrep_lab.analysis.observe import run_observations
    from syncrep_lab.terminal.analysis import print_observation

    answered = [w for w in run_observations(folder) if w.idx == done.cell]
    def text() -> None:
        print_observation(answered, out)
        for lag in done.lags:
            parts = ", ".join(f"{part} {1000 * value:.2f} ms" if value is not None
                              else f"{part} unknown" for part, value in lag.lag_s.items())
            said = (f"; {lag.reason}" if lag.reason else "") + (
                "; replay stalled" if lag.replay_stalled and not lag.stale else "")
            out.print(f"standby {escape(lag.standby)} from WAL positions: {parts}"
                      f"{escape(said)}", soft_wrap=True)
        out.print(f"stored in {folder} (syncrep-lab report {folder}; compare it with "
                  "another window's folder)")

    render(Answer(lambda: {**done.to_json(), "windows": [w.to_json() for w in answered]},
                  text), output)
    if done.signum:
        sys.exit(128 + done.signum)
    if done.ended:
        sys.exit(3)  # stored, but shorter than asked: the primary stopped answering


@cli.command("faults")
@click.argument("run_dir", required=False, type=click.Path(path_type=Path))
@output_options()
def faults_cmd(run_dir: Path | None, output: str) -> None:
    """What each fault did: when the primary saw it, throughput before, during and
    after, slow commits, and whether every acknowledged commit survived."""
    from syncrep_lab.analysis.faults import run_faults
    from syncrep_lab.terminal.analysis import print_faults

    cells = run_faults(run_dir or _latest_run())
    render(Answer(lambda: [c.to_json() for c in cells], lambda: print_faults(cells, out)),
           output)


@cli.command("scaling")
@click.argument("run_dir", required=False, type=click.Path(path_type=Path))
@output_options()
def scaling_cmd(run_dir: Path | None, output: str) -> None:
    """TPS against clients per synchronous_commit level, the knee, and each level's
    price as a ratio to local (95 % CI over repeats)."""
    from syncrep_lab.analysis.scaling import core_sweep, scaling
    from syncrep_lab.terminal.analysis import print_scaling

    folder = run_dir or _latest_run()
    series = scaling(folder)
    cores = core_sweep(folder)

    def text() -> None:
        print_scaling(series, out)
        for sweep in cores:
            steps = ", ".join(f"{p['cores']}: {p['tps']:,.0f}" for p in sweep["points"])
            knee_text = (f"; stops growing after {sweep['knee']['cores']} cores"
                         if sweep["knee"] else "")
            worse = ", more cores measurably worse" if sweep["more_is_worse"] else ""
            out.print(f"cores ({escape(sweep['series'])}): tps by cores {steps}; best "
                      f"{sweep['best']['cores']}{worse}{knee_text}", soft_wrap=True)

    render(Answer(lambda: series if not cores else {"clients": series, "cores": cores},
                  text), output)


@cli.command("compare")
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True,
              help="Compare even if the runs were made on machines that differ.")
@click.option("--top", type=int, default=10, show_default=True,
              help="How many of the per-commit costs that changed most to show per cell.")
@output_options(json_help="Print the comparison's data as JSON.")
@click.option("--html", "html_out", type=click.Path(path_type=Path), default=None,
              help="Also write the comparison as a self-contained HTML page here.")
def compare_cmd(run_a: Path, run_b: Path, force: bool, top: int, output: str,
                html_out: Path | None) -> None:
    """Run B against run A, cell by matching cell: TPS and latency ratios with 95 % CI and
    Welch's t-test, and the per-commit costs that changed most."""
    from syncrep_lab.analysis.compare import compare_runs
    from syncrep_lab.terminal.analysis import print_compare

    data = compare_runs(run_a, run_b, force=force, top=top)
    render(Answer(data.to_json, lambda: print_compare(data, out)), output)
    if html_out is not None:
        from syncrep_lab.report.html import render_compare, write_page

        path = write_page(render_compare(data), html_out)
        (err if output == "json" else out).print(f"comparison written to {escape(str(path))}")


# --- clean ------------------------------------------------------------------------


@cli.command()
@click.option("--list", "just_list", is_flag=True, help="Only list what would be removed.")
@click.option("--kept", "with_kept", is_flag=True,
              help="Also remove the clusters cluster up made (left alone otherwise).")
def clean(just_list: bool, with_kept: bool) -> None:
    """Stop and remove every cluster syncrep-lab made and did not take down, with its
    standbys on SSH hosts, network namespaces, links, cpusets and CPU quota groups; on
    attached clusters, end the sessions of runs that were killed and drop their tables;
    end a bpftrace of the commit anatomy probe whose run or observe was killed, and
    remove its files. Clusters that cluster up finished are the user's: they are left
    alone, and listed, unless --kept is given (cluster down takes one down)."""
    from syncrep_lab.placement.layout import leftovers as kernel_leftovers
    from syncrep_lab.probes.anatomy import (
        clean_tracers,
        clean_work_dirs,
        leftover_tracers,
        leftover_work_dirs,
    )
    from syncrep_lab.run.attached import clean_visits, visit_records

    if just_list:
        busy = clusters_in_use()
        spared = [] if with_kept else kept_clusters()
        dirs = [d for d in registered() if d not in busy and d not in spared]
        for d in dirs:
            out.print(str(d))
        for d, pid in busy.items():
            out.print(f"left alone: {d} (its run, pid {pid}, is still going)")
        for d in spared:
            out.print(_kept_line(d), soft_wrap=True)
        records = visit_records()
        for path in records:
            out.print(f"{path} (a run on an attached cluster)")
        tracers = leftover_tracers()
        for path in tracers:
            out.print(f"{path} (a bpftrace of the commit anatomy probe, ended if the run "
                      "or observe that started it is gone)")
        work = leftover_work_dirs()
        for path in work:
            out.print(f"{path} (the commit anatomy's files of an observe, removed if it is "
                      "gone)")
        kernel = kernel_leftovers(remove=False) if os.geteuid() == 0 else []
        for what in kernel:
            out.print(f"{what} (no cluster recorded it)")
        if not dirs and not records and not tracers and not work and not kernel:
            out.print("nothing else to clean" if busy or spared else "nothing to clean")
        return
    # First: a tracer left running holds uprobes on the servers about to be stopped.
    ended = clean_tracers()
    for what in ended:
        out.print(f"ended {what}: the run or observe that started it is gone")
    removed = clean_work_dirs()
    for path in removed:
        out.print(f"removed {path} (the commit anatomy's files of an observe that is gone)")
    cleaned = clean_all(with_kept)
    reports, leftovers, busy = cleaned.reports, cleaned.leftovers, cleaned.busy
    for d, pid in busy.items():
        out.print(f"left alone: {d} (its run, pid {pid}, is still going; stop that run "
                  f"first, or syncrep-lab cluster down --dir {d})", soft_wrap=True)
    for d in cleaned.kept:
        out.print(_kept_line(d), soft_wrap=True)
    for r in reports:
        out.print(f"removed {r.dir} ({len(r.stopped)} servers stopped)")
    for what in leftovers:
        out.print(f"removed {what} (no cluster recorded it)")
    visits = clean_visits()
    unfinished = False
    for v in visits:
        if v.live:
            out.print(f"left alone: the run in {escape(v.run)} on an attached cluster is still "
                      "going", soft_wrap=True)
            continue
        unfinished = unfinished or not v.done
        head = "cleaned" if v.done else "could not clean all"
        out.print(f"{head}: what the run in {escape(v.run)} left on an attached cluster",
                  soft_wrap=True)
        for line in v.lines:
            (out if v.done else err).print(f"  {escape(line)}", soft_wrap=True)
    if not reports and not leftovers and not visits and not ended and not removed:
        out.print("nothing else to clean" if busy or cleaned.kept else "nothing to clean")
    if unfinished:
        raise UserError("some of what killed runs left on attached clusters is still there",
                        "see above; syncrep-lab clean tries again")


def _kept_line(cluster_dir: Path) -> str:
    return (f"left alone: {cluster_dir} (made by cluster up, kept; syncrep-lab cluster down "
            f"--dir {cluster_dir} takes it down, clean --kept removes it with the rest)")


def main() -> None:
    shutdown.install()  # SIGINT, SIGTERM, SIGHUP: cleanup; a second one: out at once
    run_command(None)


def run_command(args: list[str] | None) -> None:
    """Run one command (``args``; None: the process's own) with every error mapped to
    the tool's format and exit status, raising SystemExit as ``main`` does. The signal
    handlers are ``main``'s: the tests run commands that start nothing through here."""
    route_library_logs(err)
    divert_profiles()  # a profiling build's programs: no gmon.out in the user's folders
    try:
        cli.main(args=args, standalone_mode=False, prog_name="syncrep-lab")
    except UserError as exc:
        fail(exc)
    except OSError as exc:  # a file system refusing, wherever it was not caught earlier
        fixes = {errno.ENOSPC: "free space on that disk (df -h), then run the command again",
                 errno.EDQUOT: "free space within your quota, then run the command again",
                 errno.EROFS: "write somewhere writable, or remount it read-write",
                 errno.EACCES: "check its permissions (ls -ld) or use another place",
                 errno.EPERM: "check its permissions (ls -ld) or use another place"}
        if exc.errno not in fixes:
            raise
        fail(UserError(f"{exc.filename or 'a file'}: {exc.strerror}", fixes[exc.errno]))
    except click.exceptions.Abort:
        err.print("interrupted")
        sys.exit(130)
    except click.UsageError as exc:
        # a bad flag or argument: the tool's own error format, with where to look
        where = exc.ctx.command_path if exc.ctx is not None else "syncrep-lab"
        fail(UserError(exc.format_message(), f"see {where} --help"))
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, Interrupted) as exc:
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        err.print(f"interrupted ({signal.Signals(signum).name}); what this command started "
                  "was stopped and removed")
        sys.exit(128 + signum)
