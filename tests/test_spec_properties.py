"""Random specs: every one is either refused with a cause and a fix, or gives a plan
whose cells are all well-formed. Nothing else may come out (no KeyError, no
ValueError, no hang on a huge matrix).

The documents are built from the spec's real keys (read from the models, so a new
section is covered without a word here) with values of every TOML type: plausible
ones, wrong types, huge numbers, nan and inf, unicode, tables where lists belong,
plus junk keys and sections nested where they do not belong. They go through
``load_spec`` and ``expand``, and through the real command line in-process
(``syncrep-lab run --check``), which must create nothing.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from syncrep_lab.errors import UserError
from syncrep_lab.plan.checks import check_spec
from syncrep_lab.plan.load import load_spec
from syncrep_lab.plan.matrix import (
    AXES,
    DEFAULT_SETTINGS_SET,
    MAX_CELLS,
    Plan,
    expand,
)
from syncrep_lab.plan.spec import SYNC_COMMIT_LEVELS, Spec
from syncrep_lab.plan.spec_hints import _is_model, _unwrap

BUDGET = settings(max_examples=300, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                         HealthCheck.filter_too_much])

# --- TOML values --------------------------------------------------------------------

text = st.text(st.characters(codec="utf-8"), max_size=12)
ints = st.one_of(st.integers(-3, 30), st.integers(-(2**63), 2**63 - 1),
                 st.sampled_from([0, 1, 24, 25, 5000, 10000, 10001, 10**6, 10**9]))
floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                   st.sampled_from([0.0, 0.03, 0.5, 0.95, 1.0, 5.0, -1.0, 1e308]))
scalars = st.one_of(ints, floats, st.booleans(), text, st.dates(),
                    st.times().map(lambda t: t.replace(microsecond=0)))
junk = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(text.filter(bool), inner, max_size=3)),
    max_leaves=6)

SYNC = ["1(b,c)", "ANY 1 (b,c)", "FIRST 2 (b, c)", "b", "", "*", "2 (b)", "ANY 1 (",
        '"Quoted"', "3 (b, c, d)", "1(x)"]
PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "name": st.sampled_from(["t", "sync-levels", "a.b_c", "bad name", "", "ü"]),
    "pg": st.sampled_from(["18", "15", "9.6", "11", "18.6", "/nonexistent", "eighteen"]),
    "standbys": st.integers(-1, 4),
    "names": st.lists(st.sampled_from(["b", "c", "d", "B", "primary", "", "x y"]),
                      max_size=4),
    "sync": st.sampled_from(SYNC),
    "profile": st.sampled_from(["benchmark", "seed", "fast"]),
    "clone": st.sampled_from(["copy", "basebackup", "rsync"]),
    "kind": st.sampled_from(["insert", "pk-lookup", "script", "update"]),
    "batch": st.integers(0, 12),
    "rows": st.integers(0, 2000),
    "script": st.sampled_from(["x.sql", "", "../../etc/passwd"]),
    "clients": st.integers(-1, 400),
    "threads": st.integers(0, 10),
    "duration": st.integers(-1, 5),
    "warmup": st.integers(-1, 3),
    "synchronous_commit": st.sampled_from([*SYNC_COMMIT_LEVELS, "maybe"]),
    "repeats_min": st.integers(0, 12),
    "repeats_max": st.integers(0, 12),
    "ci_target": st.sampled_from([0.03, 0.0, 5.0, math.nan, -0.1]),
    "confidence": st.sampled_from([0.95, 0.5, 1.0, 95]),
    "ready_timeout": st.sampled_from([60, 0, -1, math.inf, 3601]),
    "primary": st.sampled_from(["host=/tmp port=5432", "host=/tmp password=s3cret",
                                "postgresql://u:pw@h/db", "host='x", ""]),
    "max_connections": st.sampled_from([300, 10, "lots", True, 1.5, "100"]),
    "at": st.floats(-1, 20), "action": st.sampled_from(["stop", "kill", "set", "explode"]),
    "target": st.sampled_from(["b", "c", "sync", "potential", "z"]),
    "for": st.floats(-1, 10), "value": st.sampled_from(["c", "on", ""]),
}
AXIS_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "synchronous_commit": st.sampled_from([*SYNC_COMMIT_LEVELS, "never"]),
    "sync": st.sampled_from(SYNC),
    "standbys": st.integers(-1, 3),
    "clients": st.integers(0, 64),
    "threads": st.integers(0, 4),
    "batch": st.integers(0, 10),
    "pg": st.sampled_from(["18", "15", "11", "9.6"]),
    "settings": st.sampled_from([DEFAULT_SETTINGS_SET, "fast", "nope"]),
    "faults": st.sampled_from(["none", "a", "nope"]),
}


def _fields(model: Any) -> dict[str, Any]:
    """key -> annotation of a model's fields, by the name the TOML uses."""
    return {(f.alias or n): f.annotation for n, f in model.model_fields.items()}


@st.composite
def value_for(draw: st.DrawFn, key: str, annotation: Any, depth: int = 0) -> Any:
    """Mostly a value that fits the key, often one that does not."""
    inner = _unwrap(annotation)
    choice = draw(st.integers(0, 9))
    if choice == 0:
        return draw(junk)
    if _is_model(inner) and depth < 3:
        return draw(table_for(inner, depth + 1))
    if key in ("exclude", "only"):
        return draw(st.lists(st.dictionaries(st.sampled_from([*AXES, "color"]),
                                             st.one_of(*AXIS_VALUES.values()), max_size=2),
                             max_size=2))
    if key in AXIS_VALUES and depth == 1 and "list" in str(annotation):
        return draw(st.lists(AXIS_VALUES[key], min_size=0 if choice == 1 else 1, max_size=4,
                             unique=True))
    if key in PLAUSIBLE and choice > 2:
        return draw(PLAUSIBLE[key])
    if "dict" in str(annotation):
        return draw(st.dictionaries(st.sampled_from(["fast", "b", "max_connections", "a",
                                                     "shared_buffers", "fsync"]),
                                    st.one_of(PLAUSIBLE["max_connections"], scalars,
                                              st.dictionaries(st.sampled_from(
                                                  ["max_connections", "fsync", "events"]),
                                                  scalars, max_size=2)), max_size=3))
    if "bool" in str(annotation):
        return draw(st.booleans())
    if "int" in str(annotation) or "float" in str(annotation):
        return draw(st.one_of(ints, floats))
    return draw(junk)


@st.composite
def table_for(draw: st.DrawFn, model: type[BaseModel], depth: int = 0) -> dict[str, Any]:
    fields = _fields(model)
    keys = draw(st.lists(st.sampled_from(sorted(fields)), max_size=len(fields), unique=True))
    table = {k: draw(value_for(k, fields[k], depth)) for k in keys}
    if draw(st.integers(0, 9)) == 0:  # junk keys, and sections where they do not belong
        table[draw(st.sampled_from(["bogus", "client", "matrix", "ü key", "run"]))] = \
            draw(junk)
    return table


@st.composite
def likely_documents(draw: st.DrawFn) -> dict[str, Any]:
    """Documents with good values everywhere, so that plans come out (and impossible
    combinations are what refuses them), sometimes with one value poisoned."""
    standbys = draw(st.integers(0, 3))
    doc: dict[str, Any] = {
        "name": "t",
        "topology": {"standbys": standbys},
        "workload": {"clients": draw(st.integers(1, 64)), "duration": 1,
                     "kind": draw(st.sampled_from(["insert", "insert", "pk-lookup"]))},
        "run": {"repeats_min": draw(st.integers(1, 3)), "repeats_max": 3},
        "settings_sets": {"fast": {"fsync": False}},
        "faults": {"a": {"events": [{"at": 1.0, "action": "stop", "target": "b",
                                     "for": 1.0}]}},
    }
    if draw(st.integers(0, 4)) == 0:
        doc["settings"] = {"max_connections": draw(PLAUSIBLE["max_connections"])}
    if draw(st.integers(0, 4)) == 0:
        doc["topology"]["names"] = draw(PLAUSIBLE["names"])
    if draw(st.booleans()):
        doc["topology"]["sync"] = draw(st.sampled_from(["1(b,c)", "b", "ANY 1 (b,c)", "",
                                                        "*", "FIRST 1 (b)"]))
    axes = draw(st.lists(st.sampled_from(sorted(AXIS_VALUES)), max_size=4, unique=True))
    good = {"synchronous_commit": st.sampled_from(SYNC_COMMIT_LEVELS),
            "sync": st.sampled_from(["1(b,c)", "b", "ANY 1 (b,c)", "", "*"]),
            "standbys": st.integers(0, 3), "clients": st.integers(1, 64),
            "threads": st.integers(1, 4), "batch": st.integers(1, 10),
            "pg": st.sampled_from(["18", "15"]),
            "settings": st.sampled_from([DEFAULT_SETTINGS_SET, "fast"]),
            "faults": st.sampled_from(["none", "a"])}
    doc["matrix"] = {a: draw(st.lists(good[a], min_size=1, max_size=3, unique=True))
                     for a in axes}
    if draw(st.booleans()) and axes:
        doc["matrix"]["exclude"] = [{axes[0]: doc["matrix"][axes[0]][0]}]
    if draw(st.integers(0, 9)) == 0:  # a huge matrix: refused by its size, at once
        k = draw(st.integers(1, 400))
        doc["matrix"].update({a: list(range(1, k + 1)) for a in ("clients", "threads",
                                                                 "batch")})
    if draw(st.booleans()):  # one value poisoned
        section = draw(st.sampled_from(sorted(k for k, v in doc.items()
                                              if isinstance(v, dict) and k in _fields(Spec))))
        model = _unwrap(_fields(Spec)[section])
        fields = _fields(model) if _is_model(model) else {"fast": model, "a": model}
        key = draw(st.sampled_from(sorted(fields)))
        doc[section][key] = draw(value_for(key, fields[key], 1))
    return doc


@st.composite
def spec_documents(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        return draw(likely_documents())
    doc = draw(table_for(Spec))
    if draw(st.booleans()):
        doc["name"] = "t"  # most documents get past the first key
    if draw(st.integers(0, 3)) == 0:  # a scenario the faults axis can name
        doc.setdefault("faults", {"a": {"events": [{"at": 1.0, "action": "stop",
                                                    "target": "b", "for": 1.0}]}})
    return doc


# --- TOML text ----------------------------------------------------------------------

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k: str) -> str:
    return k if _BARE.match(k) else _string(k)


def _string(s: str) -> str:
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    assert isinstance(v, dict)
    return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }"


def dumps(doc: dict[str, Any]) -> str:
    """TOML: top-level values first, then one [table] per dict, with inline values."""
    lines = [f"{_key(k)} = {_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    for k, v in doc.items():
        if isinstance(v, dict):
            lines += ["", f"[{_key(k)}]"]
            lines += [f"{_key(kk)} = {_value(vv)}" for kk, vv in v.items()]
    return "\n".join(lines) + "\n"


# --- the properties -----------------------------------------------------------------


def _well_formed(spec: Spec, plan: Plan) -> None:
    assert 1 <= len(plan.cells) <= MAX_CELLS
    assert [c.index for c in plan.cells] == list(range(len(plan.cells)))
    assert len({c.key for c in plan.cells}) == len(plan.cells)
    for cell in plan.cells:
        assert set(cell.axes) <= set(AXES)
        assert 1 <= cell.clients <= 10000
        assert 1 <= cell.threads <= cell.clients
        assert cell.batch >= 1 and (cell.batch == 1 or spec.workload.kind == "insert")
        assert 0 <= cell.standbys <= 24
        assert cell.synchronous_commit in SYNC_COMMIT_LEVELS
        assert cell.settings_set == DEFAULT_SETTINGS_SET or \
            cell.settings_set in spec.settings_sets
        assert cell.sync is None or isinstance(cell.sync, str)
        assert (cell.sync is None) == (spec.topology.attach is not None
                                       and spec.topology.sync is None and "sync" not in
                                       cell.axes)
        assert cell.pg is None or isinstance(cell.pg, str)
        assert isinstance(cell.label, str) and cell.label


def _refusal(exc: UserError) -> None:
    assert exc.cause and exc.cause.strip()
    assert exc.fix and exc.fix.strip()


def _outcome(text: str) -> str:
    """'refused' or 'planned'; any other exception fails the test with the document."""
    started = time.monotonic()
    try:
        spec = load_spec(text, "random.toml")
    except UserError as exc:
        _refusal(exc)
        return "refused"
    finally:
        assert time.monotonic() - started < 5, "a spec took over 5 s to check"
    assert check_spec(spec) == []  # load_spec ran it: what it accepted has no problems
    _well_formed(spec, expand(spec))
    _well_formed(spec, expand(spec, cpu_count=64))
    return "planned"


OUTCOMES: dict[str, int] = {}


@BUDGET
@given(spec_documents())
def test_random_specs_are_refused_or_planned(doc: dict[str, Any]) -> None:
    text = dumps(doc)
    try:
        result = _outcome(text)
    except AssertionError:
        raise
    except Exception as exc:  # the property: nothing but UserError
        pytest.fail(f"{type(exc).__name__}: {exc}\n--- spec ---\n{text}")
    OUTCOMES[result] = OUTCOMES.get(result, 0) + 1


GOOD = """\
name = "t"

[topology]
standbys = 2
sync = "1(b,c)"

[workload]
clients = 4
duration = 1

[matrix]
synchronous_commit = ["local", "on"]
clients = [1, 4]
exclude = [{ synchronous_commit = "local", clients = 1 }]
"""


@BUDGET
@given(st.lists(st.tuples(st.integers(0, len(GOOD)), st.integers(0, 3),
                          st.sampled_from(['"', "'", "[", "]", "=", "\n", " " * 50, "#",
                                           "\\", "{", "}", ",", "0", "-", "é", "\x00",
                                           "[[", "]]", "." , "\"\"\""])),
                min_size=1, max_size=4))
def test_mangled_specs_are_refused_or_planned(edits: list[tuple[int, int, str]]) -> None:
    """A good spec with characters deleted and inserted here and there: TOML errors,
    keys moved to other tables, strings run on over lines."""
    text = GOOD
    for pos, delete, insert in edits:
        pos = min(pos, len(text))
        text = text[:pos] + insert + text[pos + delete:]
    try:
        _outcome(text)
    except AssertionError:
        raise
    except Exception as exc:
        pytest.fail(f"{type(exc).__name__}: {exc}\n--- spec ---\n{text}")


@BUDGET
@given(st.text(max_size=200))
def test_any_text_is_refused_or_planned(garbage: str) -> None:
    try:
        _outcome(garbage)
    except AssertionError:
        raise
    except Exception as exc:
        pytest.fail(f"{type(exc).__name__}: {exc}\n--- text ---\n{garbage!r}")


def test_the_generator_reaches_valid_plans() -> None:
    """The documents are not all refused at the first key: the property above also
    checks plans (asserted after the random test ran, from its tally)."""
    if not OUTCOMES:  # run alone: run the property first, which fills the tally
        test_random_specs_are_refused_or_planned()
    assert OUTCOMES.get("planned", 0) >= 10, OUTCOMES
    assert OUTCOMES.get("refused", 0) >= 10, OUTCOMES


@settings(max_examples=200, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(doc=spec_documents())
def test_random_specs_through_the_command_line(doc: dict[str, Any], workdir: Path) -> None:
    """`syncrep-lab run --check SPEC --out X` in-process: it returns (the plan was
    printed) or raises UserError with cause and fix, and nothing is created."""
    from syncrep_lab.cli import cli
    from syncrep_lab.cluster.manifest import registered

    spec_file = workdir / "random spec é.toml"
    spec_file.write_text(dumps(doc), encoding="utf-8")
    out = workdir / "out dir ü"
    before = registered()
    try:
        cli.main(["run", "--check", str(spec_file), "--out", str(out)],
                 standalone_mode=False)
    except UserError as exc:
        _refusal(exc)
    except Exception as exc:
        pytest.fail(f"{type(exc).__name__}: {exc}\n--- spec ---\n{dumps(doc)}")
    assert not out.exists()
    assert sorted(p.name for p in workdir.iterdir()) == [spec_file.name]
    assert registered() == before
