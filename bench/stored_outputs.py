"""Every read command's output on the stored runs (tests/data/runs), written to a folder,
so that a change meant to keep behaviour can be shown to: run it before and after, then
``diff -r`` the two folders.

    .venv/bin/python bench/stored_outputs.py OUT_DIR

The runs are loaded into a folder of this invocation's own (two at once do not collide),
and every path printed under it is written as one fixed path of the same length (a
header padded to the width stays so), so outputs are the same
from one invocation to the next; the commands run in this process, as ``syncrep-lab``
would run them (``cli.run_command``), with a fixed terminal width.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.data.runs.refresh import HERE, load

from syncrep_lab.cli import run_command

PREFIX = "srl-stored-outputs."

# name of the output file -> the command's arguments after the run folder
PER_RUN: dict[str, list[str]] = {
    "results.txt": ["results"],
    "results.json": ["results", "--json"],
    "results.csv": ["results", "--csv"],
    "costs.txt": ["costs"],
    "costs.json": ["costs", "--json"],
    "diagnose.txt": ["diagnose"],
    "diagnose.json": ["diagnose", "--json"],
    "scaling.txt": ["scaling"],
    "scaling.json": ["scaling", "--json"],
    "model.txt": ["model"],
    "model.json": ["model", "--json"],
    "faults.txt": ["faults"],
    "faults.json": ["faults", "--json"],
    "report.json": ["report", "--json"],
}


def run_cli(args: list[str]) -> str:
    """What the command printed, its status last (errors are outputs too)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    code: object = 0
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            run_command(args)
        except SystemExit as exc:
            code = exc.code
    return f"{stdout.getvalue()}--- stderr\n{stderr.getvalue()}--- status {code}\n"


def main(out: Path) -> None:
    os.environ["COLUMNS"] = "200"
    runs_at = Path(tempfile.mkdtemp(prefix=PREFIX))
    try:
        write_outputs(out, runs_at)
    finally:
        shutil.rmtree(runs_at, ignore_errors=True)
    print(f"{len(list(out.rglob('*.*')))} outputs in {out}")


def write_outputs(out: Path, runs_at: Path) -> None:
    shown = str(runs_at.parent / (PREFIX + "X" * (len(runs_at.name) - len(PREFIX))))

    def write(path: Path, text: str) -> None:
        path.write_text(text.replace(str(runs_at), shown))

    out.mkdir(parents=True, exist_ok=True)
    names = [p.stem for p in sorted(HERE.glob("*.sql"))]
    for name in names:
        run = load(name, runs_at)
        (out / name).mkdir(exist_ok=True)
        for file, args in PER_RUN.items():
            write(out / name / file, run_cli([args[0], str(run), *args[1:]]))
        page = out / name / "report.html"
        run_cli(["report", str(run), "--out", str(page)])
        write(page, page.read_text())
    for a in names:
        for b in names:
            if a != b:
                pair = [str(runs_at / a), str(runs_at / b), "--force"]
                write(out / f"compare-{a}-{b}.txt", run_cli(["compare", *pair]))
                write(out / f"compare-{a}-{b}.json", run_cli(["compare", *pair, "--json"]))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: bench/stored_outputs.py OUT_DIR")
    main(Path(sys.argv[1]))
