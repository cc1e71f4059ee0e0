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

from syncrep_lab.store import DB_NAME, Store

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
    """The rows only, each naming its columns: the schema is the store's own, made when
    the run is loaded, and columns a later schema adds are left at their default."""
    db = sqlite3.connect(db_path)
    try:
        rows = []
        tables = [str(r[0]) for r in db.execute(
            "select name from sqlite_master where type = 'table' and name <> 'meta' "
            "order by rowid")]
        for table in tables:
            columns = [str(r[1]) for r in db.execute(f'pragma table_info("{table}")')]
            quoted = " || ',' || ".join(f'quote("{c}")' for c in columns)
            names = ", ".join(f'"{c}"' for c in columns)
            rows += [str(r[0]) for r in db.execute(
                f"select 'INSERT INTO \"{table}\"({names}) VALUES(' || {quoted} || ');' "
                f'from "{table}" order by rowid')]
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
