"""The JSON form of the typed results (each owns its ``to_json()``): the type of a JSON
value, and the one rule for figures JSON cannot hold."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TypeAlias, overload

JSON: TypeAlias = "bool | int | float | str | list[JSON] | dict[str, JSON] | None"


@overload
def finite(value: dict[str, JSON]) -> dict[str, JSON]: ...
@overload
def finite(value: list[JSON]) -> list[JSON]: ...
@overload
def finite(value: JSON) -> JSON: ...
def finite(value: JSON) -> JSON:
    """JSON has no infinity: an unbounded figure is null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def json_value(value: object) -> JSON:
    """A value made of JSON's types that mypy sees as another (a TypedDict, a
    dataclass's ``asdict()``) as a JSON value, checked on the way: a tuple is a list,
    anything JSON has no type for is a TypeError here rather than in ``json.dumps``."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        out: dict[str, JSON] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"a JSON object's key is a string, not {k!r}")
            out[k] = json_value(v)
        return out
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    raise TypeError(f"JSON has no type for {type(value).__name__}")
