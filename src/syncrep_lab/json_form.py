"""The JSON form of the typed results (each owns its ``to_json()``): the type of a JSON
value, and the one rule for figures JSON cannot hold."""

from __future__ import annotations

import math
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
