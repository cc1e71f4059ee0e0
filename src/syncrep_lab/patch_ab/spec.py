"""The experiment ``ab`` runs: the seed's shape with the two builds as its ``pg`` axis,
or a spec of the user's whose ``pg`` axis and baseline ``ab`` sets.

The default matrix: a primary, standbys ``b`` and ``c``, ``1(b,c)``, insert-only; the
levels a patch to the commit wait can move (``on``, ``remote_write``) and one it should
not (``local``: the control, which returns before the wait); a low and a high client
count; stock and patched interleaved round by round, each cell's ratio taken against
stock's same cell (``[compare] baseline = { pg = STOCK }``), the rounds stopped by
Stein's rule at ±2 % or by the budget. ``[reference] cores`` (the seed's 64) is where
the model says what the measured costs would give where the walsender binds.

The spec is stored with the run as TOML text (the analysis reads its ``[compare]``
back), so it is written here from data: TOML has no writer in the standard library,
and the spec's values are few kinds (strings, numbers, booleans, lists, tables).
"""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path
from typing import TypeAlias

from syncrep_lab.errors import UserError
from syncrep_lab.json_form import JSON
from syncrep_lab.plan.load import load_spec, load_spec_file
from syncrep_lab.plan.spec import Spec

LEVELS = ("on", "remote_write", "local")  # the last: the control
CONTROL_LEVELS = ("local", "off")  # levels whose commits never reach the wait
DEFAULT_CLIENTS = (8, 64)
DEFAULT_BUDGET = "8m"
DUET_TARGET = 0.02  # ab --duet's interval target where the spec sets none
REFERENCE_CORES = 64  # the seed's primary

# A spec's data: a TOML table whose values are JSON's kinds (a spec holds no dates), so
# it is copied through JSON and typed as JSON.
Table: TypeAlias = dict[str, JSON]


def default_spec(name: str, description: str, clients: list[int], budget: str
                 ) -> Table:
    return {
        "name": name, "description": description,
        "topology": {"standbys": 2, "sync": "1(b,c)"},
        "workload": {"kind": "insert", "duration": 5, "warmup": 2},
        "matrix": {"synchronous_commit": list(LEVELS), "clients": list(clients)},
        "run": {"repeats_min": 5, "repeats_max": 40, "ci_target": 0.02, "budget": budget},
        "reference": {"cores": REFERENCE_CORES},
    }


def user_spec(path: Path) -> Table:
    """A spec file's data, checked as ``run`` checks it (every error with its line)."""
    _spec, text = load_spec_file(path)
    data: Table = tomllib.loads(text)
    return data


def with_builds(data: Table, stock: str, patched: str, *,
                budget: str | None = None, clients: list[int] | None = None,
                standby_anatomy: bool = False, duet: bool = False) -> tuple[Spec, str]:
    """The spec with the two builds as its ``pg`` axis and stock as every cell's
    baseline (and ``budget``, ``clients`` where given), parsed, and its text.
    ``standby_anatomy``: the anatomy repeats split the wait for the standby too, unless
    the spec's ``[probes]`` says whether they do (its own choice kept). ``duet``: each
    patched cell at the same moment as its stock twin (``[run] order = "duet"``, over
    the spec's own order: the command line asked for it), aiming at ±2 % where the
    spec's ``[run]`` sets no ``ci_target``."""
    data = _copy(data)
    matrix = _section(data, "matrix")
    topology = data.get("topology")
    if matrix.get("pg") or (isinstance(topology, dict) and topology.get("pg")):
        raise UserError("the spec names a pg of its own; ab sets the pg axis to its two builds",
                        "leave pg out of the spec's [topology] and [matrix]")
    if isinstance(topology, dict) and topology.get("attach"):
        raise UserError("the spec attaches to a running cluster; ab runs its own builds",
                        "leave [topology.attach] out of the spec")
    matrix["pg"] = [stock, patched]
    if clients:
        matrix["clients"] = list(clients)
    data["compare"] = {"baseline": {"pg": stock}}
    if budget is not None:
        _section(data, "run")["budget"] = budget
    if standby_anatomy:
        _section(data, "probes").setdefault("standby_anatomy", True)
    if duet:
        run = _section(data, "run")
        run["order"] = "duet"
        # a duet aims at ±2 % (its pairs share the machine's noise), unless the spec
        # asks for a target of its own; an interleaved ab keeps the spec's
        run.setdefault("ci_target", DUET_TARGET)
    _section(data, "reference").setdefault("cores", REFERENCE_CORES)
    text = to_toml(data)
    return load_spec(text, "ab's spec"), text


def _copy(data: Table) -> Table:
    """A copy, nested tables included."""
    copied: Table = json.loads(json.dumps(data))
    return copied


def _section(data: Table, key: str) -> Table:
    """The table under ``key``, made empty where the spec has none."""
    section = data.setdefault(key, {})
    if not isinstance(section, dict):
        raise UserError(f"the spec's {key} is not a table", f"write it as [{key}]")
    return section


# --- TOML out --------------------------------------------------------------------------


def _key(key: str) -> str:
    bare = key.replace("-", "").replace("_", "").isalnum() and key.isascii()
    return key if bare else json.dumps(key)


def _value(value: JSON) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        # JSON's escapes are TOML's basic string escapes (\uXXXX included)
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {type(value).__name__}")


def _table(value: JSON, prefix: tuple[str, ...]) -> bool:
    """Whether a value is written as a table of its own: the spec's sections, and any
    table holding one; a table of plain values inside a section is written inline."""
    return isinstance(value, dict) and (not prefix or any(isinstance(v, dict)
                                                          for v in value.values()))


def to_toml(data: Table, prefix: tuple[str, ...] = ()) -> str:
    """``data`` as TOML: plain keys first, then each table under its header."""
    lines = [f"{_key(k)} = {_value(v)}" for k, v in data.items() if not _table(v, prefix)]
    out = "\n".join(lines) + ("\n" if lines else "")
    for k, v in data.items():
        if isinstance(v, dict) and _table(v, prefix):
            path = (*prefix, k)
            body = to_toml(v, path)
            head = f"[{'.'.join(_key(p) for p in path)}]\n"
            out += ("\n" if out else "") + head + body
    return out
