"""The store's row types against its schema: a field per column, in the table's order,
so that a row built by name is written to the right column; and the run, cell and
repeat records (store/records.py) against theirs, read back as they were written."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest

from syncrep_lab.errors import UserError
from syncrep_lab.store import (
    PROBE_TABLES,
    SCHEMA,
    SCHEMA_VERSION,
    ProbeRows,
    ProcCostRow,
    SampleRow,
    Store,
    StoredCell,
    StoredRepeat,
    StoredRun,
    queries,
)
from syncrep_lab.store.records import columns

RECORDS = {"runs": StoredRun, "cells": StoredCell, "repeats": StoredRepeat}


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


def test_records_are_the_tables_columns() -> None:
    """A column added to runs, cells or repeats is a field of its record, and a JSON
    column the field named without ``_json``."""
    db = sqlite3.connect(":memory:")
    db.executescript(SCHEMA)
    for table, record in RECORDS.items():
        assert columns(record) == _columns(db, table), table
        for f, column in zip(dataclasses.fields(record), columns(record), strict=True):
            assert column in (f.name, f"{f.name}_json"), (table, f.name)


def test_records_read_what_was_written(tmp_path: Path) -> None:
    store = Store(tmp_path / "run", create=True)
    try:
        machine = {"cpu_count": 2, "hosts": {"b": {"cpus": 4}}}
        run_id = store.create_run("r", "name = 'r'\n", machine, "1.2.3", seed=7,
                                  order_mode="interleaved")
        params = {"pg": None, "clients": 8, "synchronous_commit": "on"}
        cell = store.ensure_cell(run_id, 0, "k", "sc=on", {"synchronous_commit": "on"},
                                 params)
        assert cell.notes == [] and cell.tps_mean is None and cell.repeats == 0
        store.add_repeat(cell.id, {"n": 1, "started_at": "t0", "duration_s": 2.0,
                                   "transactions": 20, "failed": 0, "tps": 10.0,
                                   "histogram": b"\x01", "round": 3}, [])
        store.update_cell(cell.id, status="done", tps_mean=10.0,
                          notes_json=json.dumps(["a note"]))
        run, [cell], [repeat] = store.run(), store.cells(run_id), store.repeats(cell.id)
        assert (run.id, run.machine, run.seed, run.kind) == (run_id, machine, 7, "experiment")
        assert (cell.params, cell.axes, cell.notes) == (params, {"synchronous_commit": "on"},
                                                         ["a note"])
        assert store.cell(cell.id) == cell
        assert (repeat.round, repeat.probed, repeat.histogram) == (3, 0, b"\x01")
        # every other field is its column's value as SQLite gives it (types included)
        for table, record in ((("runs", run), ("cells", cell), ("repeats", repeat))):
            row = store.db.execute(f"select * from {table}").fetchone()
            for f, column in zip(dataclasses.fields(record), columns(type(record)),
                                 strict=True):
                if column == f.name:
                    value = getattr(record, f.name)
                    assert (value, type(value)) == (row[column], type(row[column])), column
        assert isinstance(cell.tps_mean, float) and isinstance(repeat.transactions, int)
    finally:
        store.close()


def test_a_machine_that_does_not_read_is_empty(tmp_path: Path) -> None:
    """A store whose runs.machine_json was edited into something else still opens (what
    compare always did): its machine is {}, its cells are there."""
    store = Store(tmp_path / "run", create=True)
    try:
        run_id = store.create_run("r", "", {"cpu_count": 2}, "1")
        for text in ("not json", "[1]", ""):
            store.db.execute("update runs set machine_json = ?", (text,))
            assert store.run(run_id).machine == {}
    finally:
        store.close()


def test_the_stored_spec_is_parsed_once_as_written_and_as_loaded(tmp_path: Path) -> None:
    """A run's spec is read once however many readers ask: as written (no default filled
    in) and as the plan loads it; a spec that is not TOML, or no longer loads, is {} and
    None, and load() says why at its line."""
    store = Store(tmp_path / "run", create=True)
    try:
        run_id = store.create_run("r", "name = 'r'\n[run]\nrepeats_min = 2\n", {}, "1")
        run = store.run(run_id)
        assert run.spec is run.spec and run.spec.table == {"name": "r",
                                                            "run": {"repeats_min": 2}}
        loaded = run.spec.loaded
        assert loaded is not None and loaded is run.spec.load()
        assert (loaded.run.repeats_min, loaded.run.confidence) == (2, 0.95)
        for text in ("name = ", "name = 'r'\n[run]\nrepeats_min = 5\nrepeats_max = 3\n"):
            store.db.execute("update runs set spec_toml = ?", (text,))
            spec = store.run(run_id).spec
            assert spec.loaded is None
            with pytest.raises(UserError, match="stored spec"):
                spec.load()
        assert spec.table["run"] == {"repeats_min": 5, "repeats_max": 3}
        store.db.execute("update runs set spec_toml = 'name = '")
        assert store.run(run_id).spec.table == {}
    finally:
        store.close()


def test_a_version_12_store_opens_with_its_proc_costs_read_as_none(tmp_path: Path) -> None:
    """A store of schema 12 (proc_costs without run_delay_ms and migrations, no quotas
    table) is upgraded when opened: the columns are added, its rows read them as None,
    and new rows keep theirs."""
    store = Store(tmp_path / "run", create=True)
    try:
        run_id = store.create_run("r", "", {}, "1")
        cell = store.ensure_cell(run_id, 0, "k", "sc=on", {}, {})
        repeat = {"n": 1, "started_at": "t0", "duration_s": 2.0, "transactions": 20,
                  "failed": 0, "tps": 10.0, "histogram": b""}
        old_id = store.add_repeat(cell.id, repeat, [])
        store.db.execute("insert into proc_costs values (?, 'primary', 'walsender:b', 1, "
                         "1.5, 2.5, 30, 4, 9.0, 7, 10, 20)", (old_id,))
        for column in ("run_delay_ms", "migrations", "read_bytes", "write_bytes"):
            store.db.execute(f"alter table proc_costs drop column {column}")
        store.db.execute("drop table quotas")  # schema 15's
        store.db.execute("update meta set value = '12' where key = 'schema_version'")
    finally:
        store.close()
    store = Store(tmp_path / "run", create=False)
    try:
        assert store.db.execute("select value from meta where key = 'schema_version'"
                                ).fetchone()[0] == str(SCHEMA_VERSION) == "20"
        assert queries.quota_means(store, cell.id) == []  # the table is there, empty
        assert queries.proc_costs_of(store, [old_id]) == [
            (old_id, ProcCostRow("primary", "walsender:b", 1, 1.5, 2.5, 30, 4, None, None,
                                 None, None))]
        new = ProcCostRow("primary", "walsender:b", 1, 1.0, 1.0, 3, 1, 12.5, 40, 4096, 8192)
        new_id = store.add_repeat(cell.id, {**repeat, "n": 2}, [], ProbeRows(proc_costs=[new]))
        assert queries.proc_costs_of(store, [new_id]) == [(new_id, new)]
    finally:
        store.close()


def test_a_version_13_store_gets_its_tps_intervals_on_the_log_scale(tmp_path: Path) -> None:
    """Schema 13 stored mean ± t · s / √n, below zero for two repeats far apart: opened,
    a cell's interval is recomputed from its measured repeats on the log scale with the
    t it was stored with (here 90 %), never below zero; a cell whose repeats are not
    the values of its stored mean, and one without an interval, keep what they have."""
    from syncrep_lab.stats.intervals import mean_ci, rate_ci

    store = Store(tmp_path / "run", create=True)
    tps = [4000.0, 16000.0]
    try:
        run_id = store.create_run("r", "", {}, "1")
        cells = [store.ensure_cell(run_id, i, f"k{i}", f"c{i}", {}, {}) for i in range(3)]
        for cell in cells:
            for n, v in enumerate(tps, start=1):
                store.add_repeat(cell.id, {"n": n, "started_at": f"t{n}", "duration_s": 2.0,
                                           "transactions": int(2 * v), "failed": 0,
                                           "tps": v, "histogram": b""}, [])
            # a probed repeat is no measured one
            store.add_repeat(cell.id, {"n": 3, "started_at": "t3", "duration_s": 2.0,
                                       "transactions": 1, "failed": 0, "tps": 0.5,
                                       "histogram": b"", "probed": 1}, [])
        old = mean_ci(tps, 0.90)
        assert old.low is not None and old.low < 0
        stored = {"tps_mean": old.mean, "tps_stdev": old.stdev, "tps_ci_low": old.low,
                  "tps_ci_high": old.high, "tps_ci_rel": old.half_width_rel}
        store.update_cell(cells[0].id, **stored)
        store.update_cell(cells[1].id, **{**stored, "tps_mean": 11000.0})  # not its repeats
        store.update_cell(cells[2].id, tps_mean=old.mean)  # one repeat: no interval
        store.db.execute("update meta set value = '13' where key = 'schema_version'")
    finally:
        store.close()
    store = Store(tmp_path / "run", create=False)
    try:
        got = {c.idx: (c.tps_ci_low, c.tps_ci_high, c.tps_ci_rel) for c in store.cells(run_id)}
    finally:
        store.close()
    new = rate_ci(tps, 0.90)
    assert new.low is not None and new.low > 0
    assert got[0] == pytest.approx((new.low, new.high, new.half_width_rel), rel=1e-9)
    assert got[1] == (old.low, old.high, old.half_width_rel)
    assert got[2] == (None, None, None)


def test_a_probed_repeat_of_two_instances_is_divided_by_the_first_s_commits(
        tmp_path: Path) -> None:
    """The probes of a repeat with instances = 2 watch instance 1's processes: their
    figures per commit divide by instance 1's commits, not the repeat's sum (which halved
    them), and a repeat of one instance by its own."""
    from syncrep_lab.analysis.costs import cell_costs
    from syncrep_lab.store import CostRow, InstanceResultRow

    store = Store(tmp_path / "run", create=True)
    try:
        run_id = store.create_run("r", "", {}, "1")
        cells = [store.ensure_cell(run_id, i, f"k{i}", f"c{i}", {}, {}) for i in (0, 1)]
        repeat = {"n": 1, "started_at": "t0", "duration_s": 2.0, "transactions": 1000,
                  "failed": 0, "tps": 500.0, "histogram": b"", "probed": 1}
        cost = CostRow("primary", "backend", 2, 400.0, 0, json.dumps({"pwrite64": 300}))
        two = ProbeRows(costs=[cost], instance_results=[
            InstanceResultRow(1, 200.0, 400, 0, None, None),
            InstanceResultRow(2, 300.0, 600, 0, None, None)])
        store.add_repeat(cells[0].id, repeat, [], two)
        store.add_repeat(cells[1].id, repeat, [], ProbeRows(costs=[cost]))
        (both,), (one,) = (cell_costs(store, c.id).roles for c in cells)
        assert both["cpu_us_per_commit"]["mean"] == pytest.approx(1000.0)  # 400 ms / 400
        assert both["syscalls_per_commit"]["pwrite64"]["mean"] == pytest.approx(0.75)
        assert one["cpu_us_per_commit"]["mean"] == pytest.approx(400.0)  # 400 ms / 1000
    finally:
        store.close()


def test_a_version_19_store_gets_the_hosts_numa_table(tmp_path: Path) -> None:
    """Schema 19 had no host_numa: opened, the table is made, a repeat's rows of it are
    written with the repeat and read back as they were."""
    from syncrep_lab.store import HostNumaRow

    store = Store(tmp_path / "run", create=True)
    try:
        run_id = store.create_run("r", "", {}, "1")
        cell = store.ensure_cell(run_id, 0, "k", "kernel=host", {}, {})
        store.db.execute("drop table host_numa")
        store.db.execute("update meta set value = '19' where key = 'schema_version'")
    finally:
        store.close()
    store = Store(tmp_path / "run", create=False)
    try:
        rows = [HostNumaRow("guest1", 0, 1483, 0, 0, 190, 1483, 0, 3.0),
                HostNumaRow("guest1", 1, 179, 0, 0, 178, 0, 179, 3.0)]
        repeat = {"n": 1, "started_at": "t0", "duration_s": 3.0, "transactions": 30,
                  "failed": 0, "tps": 10.0, "histogram": b""}
        repeat_id = store.add_repeat(cell.id, repeat, [], ProbeRows(host_numa=rows))
        assert queries.host_numa_of(store, [repeat_id]) == [(repeat_id, r) for r in rows]
    finally:
        store.close()
