"""The store's row types against its schema: a field per column, in the table's order,
so that a row built by name is written to the right column."""

from __future__ import annotations

import dataclasses
import sqlite3

from syncrep_lab.store import PROBE_TABLES, SCHEMA, ProbeRows, SampleRow


def _columns(db: sqlite3.Connection, table: str) -> tuple[str, ...]:
    return tuple(str(r[1]) for r in db.execute(f"pragma table_info({table})")
                 if r[1] != "repeat_id")


def test_row_types_are_the_tables_columns() -> None:
    db = sqlite3.connect(":memory:")
    db.executescript(SCHEMA)
    assert SampleRow._fields == _columns(db, "samples")
    for table, row_type in PROBE_TABLES.items():
        assert row_type._fields == _columns(db, table), table
    assert [f.name for f in dataclasses.fields(ProbeRows)] == list(PROBE_TABLES)
