"""Run each spec here for real and keep its store as an SQL dump (text, diffable):
the diagnosis tests read these instead of running a cluster.

    .venv/bin/python tests/data/runs/refresh.py [NAME ...]
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from syncrep_lab.experiment.store import DB_NAME, Store

HERE = Path(__file__).resolve().parent


def refresh(spec: Path) -> None:
    out = Path(tempfile.mkdtemp(prefix="srl-fixture-", dir="/tmp"))
    out.chmod(0o755)
    try:
        subprocess.run([sys.executable, "-m", "syncrep_lab", "run", str(spec), "--out",
                        str(out / "run")], check=True, stdin=subprocess.DEVNULL)
        dump(out / "run" / "syncrep-lab.sqlite", HERE / f"{spec.stem}.sql")
    finally:
        shutil.rmtree(out, ignore_errors=True)


def dump(db_path: Path, sql: Path) -> None:
    """The rows only: the schema is the store's own, made when the run is loaded."""
    db = sqlite3.connect(db_path)
    try:
        rows = [s for s in db.iterdump()
                if s.startswith("INSERT INTO") and not s.startswith('INSERT INTO "meta"')]
    finally:
        db.close()
    sql.write_text("\n".join(rows) + "\n")


def load(name: str, folder: Path) -> Path:
    """The stored run ``name`` as a run folder under ``folder``."""
    run = folder / name
    Store(run, create=True).close()
    db = sqlite3.connect(run / DB_NAME)
    try:
        db.executescript((HERE / f"{name}.sql").read_text())
    finally:
        db.close()
    return run


if __name__ == "__main__":
    names = sys.argv[1:] or [p.stem for p in sorted(HERE.glob("*.toml"))]
    for name in names:
        refresh(HERE / f"{name}.toml")
