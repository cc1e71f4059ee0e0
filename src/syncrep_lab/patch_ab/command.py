"""``syncrep-lab ab``, start to end: every input checked before anything is built, both
sides built (patch_ab/sources.py), one interleaved run per base with the two builds as
its ``pg`` axis (the runner ``run`` uses), then the answer (patch_ab/answer.py) written
as ``ab.json`` and ``summary.txt`` in the output folder.

The output folder holds, per base, its run folder (``run-VERSION``: the store, the
spec as it ran and ``report.html``, as ``run`` leaves it) and its differential flame
graphs (``flamediff-VERSION``). ``--resume`` finishes the runs of an output folder that
was interrupted (the builds are cached, so nothing is built again) and writes the
answer.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from syncrep_lab import paths
from syncrep_lab.errors import UserError
from syncrep_lab.json_form import JSON
from syncrep_lab.patch_ab import sources
from syncrep_lab.patch_ab.answer import PatchVerdict, read_answer
from syncrep_lab.patch_ab.spec import (
    DEFAULT_BUDGET,
    DEFAULT_CLIENTS,
    Table,
    default_spec,
    user_spec,
)
from syncrep_lab.patch_ab.spec import with_builds as spec_with_builds
from syncrep_lab.pg.builds import FLAVORS, Build
from syncrep_lab.plan.spec import parse_duration
from syncrep_lab.run.context import Events

ANSWER_FILE = "ab.json"
SUMMARY_FILE = "summary.txt"


@dataclass(frozen=True)
class Options:
    bases: list[str]
    patches: list[str] = field(default_factory=list)
    git_base: str | None = None
    flavor: str = "release"
    spec_file: Path | None = None
    clients: str | None = None
    budget: str | None = None
    out: Path | None = None
    jobs: int | None = None
    resume: bool = False
    standby_anatomy: bool = False  # the anatomy repeats split the wait for the standby
    duet: bool = False  # both sides at the same moment ([run] order = "duet")


@dataclass(frozen=True)
class Prepared:
    """Everything checked; nothing built or run yet."""

    options: Options
    request: sources.Request
    data: Table  # the spec, before its pg axis is set
    clients: list[int] | None
    out: Path
    spec_dir: Path


def parse_clients(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        values = []
    if not values or any(v < 1 or v > 10000 for v in values):
        raise UserError(f"--clients {text!r} is not a list of client counts",
                        "give one or more counts from 1 to 10000, comma separated: "
                        "--clients 8,64")
    return sorted(set(values))


def prepare(opts: Options) -> Prepared:
    """Read and check every input: what would fail later fails here, before a build."""
    if opts.flavor not in FLAVORS:
        raise UserError(f"--flavor {opts.flavor!r} is not a build flavor",
                        f"choose one of {', '.join(FLAVORS)}")
    if opts.budget is not None:
        try:
            parse_duration(opts.budget)
        except ValueError as exc:
            raise UserError(f"--budget: {exc}", "give it as 90s, 10m or 1h") from None
    clients = parse_clients(opts.clients) if opts.clients is not None else None
    request = sources.parse_request(opts.bases, opts.patches, opts.git_base)
    if opts.spec_file is not None:
        data = user_spec(opts.spec_file)
        spec_dir = opts.spec_file.resolve().parent
    else:
        described = ", ".join(sorted({p.name for ps in request.patches.values() for p in ps}))
        data = default_spec("ab", f"stock against patched ({described or 'the tree'})",
                            clients or list(DEFAULT_CLIENTS), opts.budget or DEFAULT_BUDGET)
        spec_dir = Path.cwd()
    # the spec as it will run, with stand-in names: its errors before any build
    spec_with_builds(data, "ab-stock", "ab-patched", budget=opts.budget, clients=clients,
                     standby_anatomy=opts.standby_anatomy, duet=opts.duet)
    out = (opts.out or Path("syncrep-runs") / f"ab-{time.strftime('%Y%m%d-%H%M%S')}").absolute()
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is not a directory", "choose a folder for the answer")
    held = out.is_dir() and any(out.glob("run-*/syncrep-lab.sqlite"))
    if held and not opts.resume:
        raise UserError(f"{out} already holds an ab run",
                        "finish it with the same command and --resume, or choose another "
                        "--out")
    if opts.resume and not held:
        raise UserError(f"--resume: {out} holds no ab run to finish",
                        "give the --out of an ab run that was started, or leave --resume out")
    return Prepared(opts, request, data, clients, out, spec_dir)


def command_line(opts: Options, out: Path) -> str:
    """The one command that makes this answer again (files named in full)."""
    words = ["syncrep-lab", "ab"]
    words += [str(Path(b).resolve()) if Path(b).expanduser().exists() else b
              for b in opts.bases]
    for given in opts.patches:
        prefix, sep, file = given.partition("=")
        if sep and not Path(given).expanduser().exists():
            words += ["--patch", f"{prefix}={Path(file).expanduser().resolve()}"]
        else:
            words += ["--patch", str(Path(given).expanduser().resolve())]
    if opts.git_base:
        words += ["--base", opts.git_base]
    if opts.flavor != "release":
        words += ["--flavor", opts.flavor]
    if opts.spec_file is not None:
        words += ["--spec", str(opts.spec_file.resolve())]
    if opts.clients is not None:
        words += ["--clients", opts.clients]
    if opts.budget is not None:
        words += ["--budget", opts.budget]
    if opts.standby_anatomy:
        words.append("--standby-anatomy")
    if opts.duet:
        words.append("--duet")
    words += ["--out", str(out)]
    return shlex.join(words)


def _slug(version: str, taken: set[str]) -> str:
    slug = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in version) or "pg"
    name, n = slug, 2
    while name in taken:
        name, n = f"{slug}-{n}", n + 1
    taken.add(name)
    return name


def _plain(value: object) -> JSON:
    """A value as ab.json writes it (paths and the like as their text)."""
    found: JSON = json.loads(json.dumps(value, default=str))
    return found


def _build_facts(b: Build) -> dict[str, JSON]:
    return {k: _plain(v) for k, v in b.describe().items()
            if k in ("name", "version", "flavor", "source", "configure", "patches",
                     "bin_dir", "copy_of", "seconds", "unfit")}


@dataclass(frozen=True)
class BaseAnswer:
    """One base: its two builds, the patches, where its run, report and differential
    flame graphs are (relative to the output folder), and the verdict."""

    base: str  # as given
    stock: Build
    patched: Build
    stock_from: str
    patches: tuple[sources.PatchFile, ...]
    note: str | None
    run: str
    report: str | None
    flamediff: str
    answer: PatchVerdict

    def to_json(self) -> dict[str, JSON]:
        return {"base": self.base, "stock": _build_facts(self.stock),
                "patched": _build_facts(self.patched), "stock_from": self.stock_from,
                "patches": [_plain(p.describe()) for p in self.patches], "note": self.note,
                "run": self.run, "report": self.report, "flamediff": self.flamediff,
                "answer": self.answer.to_json()}


@dataclass(frozen=True)
class AbAnswer:
    """What ``ab`` found, every base (``ab.json`` and ``ab --json`` are ``to_json()``)."""

    command: str  # the one command that makes this answer again
    out: str
    builds_dir: str
    bases: tuple[BaseAnswer, ...]

    @property
    def machine(self) -> dict[str, JSON]:
        """The machine the runs were made on (the last base's run's)."""
        return dict(self.bases[-1].answer.machine) if self.bases else {}

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {"command": self.command, "out": self.out,
                                "builds_dir": self.builds_dir,
                                "bases": [b.to_json() for b in self.bases]}
        if self.bases:
            out["machine"] = self.machine
        return out


def run_ab(prep: Prepared, display: Callable[[Path], AbstractContextManager[Events]],
           progress: Callable[[str], None]) -> AbAnswer:
    """Build, run, answer. ``display(run_folder)`` gives the run's live events."""
    from syncrep_lab.run.preflight import check_machine, check_out
    from syncrep_lab.run.runner import resume_run, start_run, stored_spec_text

    opts = prep.options
    sides = sources.build_sides(prep.request, opts.flavor, opts.jobs, progress)
    prep.out.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    bases = []
    for side in sides:
        slug = _slug(side.stock.version, taken)
        folder = prep.out / f"run-{slug}"
        spec, text = spec_with_builds(prep.data, side.stock.name, side.patched.name,
                                      budget=opts.budget, clients=prep.clients,
                                      standby_anatomy=opts.standby_anatomy, duet=opts.duet)
        started = time.monotonic()  # each base's run: its budget from here to its report
        if (folder / "syncrep-lab.sqlite").exists():
            with display(folder) as events:
                resume_run(folder, events, budget=opts.budget, started=started)
        else:
            check_machine(spec)
            stored = stored_spec_text(text)
            check_out(folder)
            with display(folder) as events:
                start_run(spec, stored, prep.spec_dir, folder, events, machine_checked=True,
                          started=started)
        report = _report(folder, progress)
        diffs = prep.out / f"flamediff-{slug}"
        found = read_answer(folder, side.stock.name, side.patched.name, diffs)
        bases.append(BaseAnswer(
            base=side.base, stock=side.stock, patched=side.patched,
            stock_from=side.stock_from, patches=tuple(side.patches), note=side.note,
            run=str(folder.relative_to(prep.out)),
            report=str(report.relative_to(prep.out)) if report else None,
            flamediff=str(diffs.relative_to(prep.out)), answer=found))
    return AbAnswer(command_line(opts, prep.out), str(prep.out), str(paths.builds_dir()),
                    tuple(bases))


def _report(folder: Path, progress: Callable[[str], None]) -> Path | None:
    from syncrep_lab.report.html import write_report

    try:
        return write_report(folder)
    except Exception as exc:  # the figures are stored: a page that failed loses no answer
        cause = exc.cause if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
        progress(f"no report: {cause}; retry with: syncrep-lab report {folder}")
        return None


def write_answer(answer: AbAnswer, lines: list[str], out: Path,
                 progress: Callable[[str], None]) -> None:
    """``ab.json`` and ``summary.txt`` in ``out``; the summary also beside each base's run,
    whose report is made again to show it (its section "The patch's verdict")."""
    from syncrep_lab.report.data import AB_SUMMARY_FILE

    (out / ANSWER_FILE).write_text(json.dumps(answer.to_json(), indent=2, default=str) + "\n")
    text = "\n".join(lines) + "\n"
    (out / SUMMARY_FILE).write_text(text)
    for side in answer.bases:
        folder = out / side.run
        (folder / AB_SUMMARY_FILE).write_text(text)
        if side.report:
            _report(folder, progress)


def failed_cells(answer: AbAnswer) -> int:
    return sum(1 for side in answer.bases for c in side.answer.cells
               if "failed" in (c.stock_status, c.patched_status))
