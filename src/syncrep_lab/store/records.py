"""The run, its cells and their repeats as the store reads them back: ``runs``, ``cells``
and ``repeats`` rows as typed values (``Store.run``, ``Store.cells``, ``Store.cell``,
``Store.ensure_cell``, ``Store.repeats`` return them).

Each is a frozen dataclass with a field per column of its table, in the schema's order
(store/schema.py), and owns how it is read from its row (``from_row``). A JSON column
is parsed there, once, into the field named without ``_json`` (``runs.machine_json``
is ``StoredRun.machine``, ``cells.params_json`` is ``StoredCell.params``), so no caller
parses the store's JSON or indexes a row by a name mypy cannot check; every other value
is SQLite's as it is (an integer column's int, a real column's float, null as None).
:func:`columns` gives the table's columns a record reads, which tests/test_store.py
holds against the schema. The names say *stored*: the repeat being measured is
run/repeat_record.RepeatRecord, written by ``Store.add_repeat``.
"""

from __future__ import annotations

import json
import sqlite3
import tomllib
from dataclasses import Field, dataclass, field, fields
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from syncrep_lab.plan.spec import Spec


def _json(column: str) -> dict[str, str]:
    """The metadata of a field read from the JSON column ``column`` (which its record's
    ``from_row`` parses)."""
    return {"column": column}


def _column(f: Field[Any]) -> str:
    return str(f.metadata.get("column", f.name))


def columns(record: type[StoredRun | StoredCell | StoredRepeat]) -> tuple[str, ...]:
    """The columns of its table a record type reads, in the order of its fields."""
    return tuple(_column(f) for f in fields(record))


def _as_stored(record: type[StoredRun | StoredCell | StoredRepeat], row: sqlite3.Row
               ) -> dict[str, Any]:
    """The fields of ``record`` that are a column as it is, from ``row``."""
    return {f.name: row[f.name] for f in fields(record) if "column" not in f.metadata}


def _machine(text: str | None) -> dict[str, Any]:
    """The machine a run was made on; {} when its column is empty or not a JSON object
    (a store edited by hand): what ``compare`` always read it as, and a run whose
    machine cannot be read still has its cells."""
    try:
        machine = json.loads(text or "{}")
    except json.JSONDecodeError:
        return {}
    return machine if isinstance(machine, dict) else {}


@dataclass(frozen=True)
class StoredSpec:
    """A run's stored spec (``runs.spec_toml``), read once however many readers ask:
    ``table`` is its TOML as written (what the report and the fault report print of it,
    defaults not filled in), ``loaded`` the plan's Spec, parsed and checked, or None where
    it no longer loads (a spec an older version wrote: the run still has its figures)."""

    text: str

    @cached_property
    def table(self) -> dict[str, Any]:
        """The TOML's tables; {} where the text is not TOML (a store edited by hand)."""
        try:
            return tomllib.loads(self.text)
        except tomllib.TOMLDecodeError:
            return {}

    @cached_property
    def _outcome(self) -> Spec | Exception:
        # The spec's own parser reads it (the rules of [compare] are the plan's): the
        # store's one import of the plan, made here, where it is needed.
        from syncrep_lab.plan.load import load_spec

        try:
            return load_spec(self.text, "stored spec")
        except Exception as exc:  # a spec of another version, whatever its parser says
            return exc

    @property
    def loaded(self) -> Spec | None:
        outcome = self._outcome
        return None if isinstance(outcome, Exception) else outcome

    def load(self) -> Spec:
        """The loaded spec, or the error that says, at its line, why it does not load."""
        outcome = self._outcome
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


@dataclass(frozen=True)
class StoredRun:
    """``runs``: one run (or one ``observe`` output folder's windows)."""

    id: int
    name: str
    started_at: str
    finished_at: str | None
    status: str  # running | done | interrupted | failed
    spec_toml: str
    # what the run was made on (kernel, CPUs, memory; ``hosts``: the SSH hosts)
    machine: dict[str, Any] = field(metadata=_json("machine_json"))
    tool_version: str
    seed: int | None
    order_mode: str | None  # interleaved | blocked | duet (null: before rounds)
    order_note: str | None
    kind: str | None  # experiment (null before schema 9) | observe

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> StoredRun:
        return cls(**_as_stored(cls, row), machine=_machine(row["machine_json"]))

    @cached_property
    def spec(self) -> StoredSpec:
        """The stored spec, parsed once (as written, and as the plan loads it)."""
        return StoredSpec(self.spec_toml or "")


@dataclass(frozen=True)
class CellParams:
    """The parameters a cell's readers take from ``cells.params_json``
    (plan.Cell.params()), coerced once: None where the cell has none (a run from before
    an axis existed, an observe window's, 0 clients), so each reader says its default
    (``p.clients or 1``) instead of coercing the JSON by hand."""

    pg: str | None  # the installation's name (ab: stock or patched)
    sync: str | None  # synchronous_standby_names as the spec gives it
    synchronous_commit: str | None
    clients: int | None
    threads: int | None
    cores: float | None  # the servers confined to this many CPUs (the cores axis)
    placement: str | None
    link: str | None
    faults: str | None  # a [faults.NAME] scenario, or none

    @classmethod
    def of(cls, params: dict[str, Any]) -> CellParams:
        """
        >>> p = CellParams.of({"synchronous_commit": "on", "clients": 64, "cores": 2})
        >>> p.synchronous_commit, p.clients, p.threads, p.cores, p.link
        ('on', 64, None, 2.0, None)
        >>> CellParams.of({"clients": 0}).clients is None
        True
        """
        def text(name: str) -> str | None:
            value = params.get(name)
            return None if value is None else str(value)

        def count(name: str) -> int | None:
            value = params.get(name)
            return int(value) if value else None  # 0 as absent: every reader's default

        cores = params.get("cores")
        return cls(text("pg"), text("sync"), text("synchronous_commit"), count("clients"),
                   count("threads"), None if cores is None else float(cores),
                   text("placement"), text("link"), text("faults"))


@dataclass(frozen=True)
class StoredCell:
    """``cells``: one point of the run's matrix (an observe window), its figures over
    its measured repeats once it is done."""

    id: int
    run_id: int
    idx: int
    key: str
    label: str
    axes: dict[str, Any] = field(metadata=_json("axes_json"))  # the axes the cell sets
    params: dict[str, Any] = field(metadata=_json("params_json"))  # plan.Cell.params()
    status: str  # pending | running | done | failed
    error: str | None
    repeats: int  # measured repeats
    stop_reason: str | None  # ci | max | budget | window
    tps_mean: float | None
    tps_stdev: float | None
    tps_ci_low: float | None
    tps_ci_high: float | None
    tps_ci_rel: float | None
    transactions: int | None
    failed: int | None
    lat_mean_ms: float | None
    lat_p50_ms: float | None
    lat_p90_ms: float | None
    lat_p99_ms: float | None
    lat_p999_ms: float | None
    lat_max_ms: float | None
    histogram: bytes | None  # all measured repeats merged
    started_at: str | None
    finished_at: str | None
    notes: list[str] = field(metadata=_json("notes_json"))  # [] when null

    @property
    def typed_params(self) -> CellParams:
        return CellParams.of(self.params)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> StoredCell:
        notes = row["notes_json"]
        return cls(**_as_stored(cls, row), axes=json.loads(row["axes_json"]),
                   params=json.loads(row["params_json"]),
                   notes=json.loads(notes) if notes else [])


MEASURED, PROBED, ANATOMY = 0, 1, 2  # repeats.probed: what ran beside the client


@dataclass(frozen=True)
class StoredRepeat:
    """``repeats``: one pgbench (or sysbench) run of a cell, or an observe slice."""

    id: int
    cell_id: int
    n: int
    probed: int  # PROBED: probes ran; ANATOMY: the commit anatomy alone; kept out of figures
    started_at: str
    duration_s: float
    transactions: int
    failed: int
    tps: float
    pgbench_transactions: int | None
    pgbench_latency_avg_ms: float | None
    lat_mean_ms: float | None
    lat_p50_ms: float | None
    lat_p90_ms: float | None
    lat_p99_ms: float | None
    lat_p999_ms: float | None
    lat_max_ms: float | None
    histogram: bytes
    stdout_path: str | None
    stderr_path: str | None
    round: int | None  # interleaved: the round it ran in
    position: int | None  # its place in that round's order
    checkpoints: int | None
    autovacuums: int | None
    other_cpu: float | None
    disturbed: str | None  # what hit it, comma separated
    pair: int | None  # duet: its pair's place in the round
    cpus: str | None  # duet: the CPUs its side was confined to

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> StoredRepeat:
        return cls(**_as_stored(cls, row))
