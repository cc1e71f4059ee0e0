"""Did-you-mean for a spec's unknown keys: the keys allowed at that place, nearest first.

Walks the pydantic models along an error's key path (through optional values, lists
and tables of models), so a new section of the spec gets hints without a word here.
"""

from __future__ import annotations

import difflib
import types
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel


def _unwrap(tp: Any) -> Any:
    """``X | None`` and ``Annotated[X, ...]`` as ``X``."""
    while True:
        origin = get_origin(tp)
        args = [a for a in get_args(tp) if a is not type(None)]
        if origin is Annotated or (origin in (Union, types.UnionType) and len(args) == 1):
            tp = args[0]
        else:
            return tp


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def nearest_keys(model: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    """Up to three allowed keys close to the unknown one ``loc[-1]``."""
    tp: Any = model
    for part in loc[:-1]:
        tp = _unwrap(tp)
        if _is_model(tp):
            field = tp.model_fields.get(str(part))
            if field is None:
                return []
            tp = field.annotation
        elif get_origin(tp) in (list, dict):
            tp = get_args(tp)[-1]
        else:
            return []
    tp = _unwrap(tp)
    if not _is_model(tp):
        return []
    names = [f.alias or name for name, f in tp.model_fields.items()]
    return difflib.get_close_matches(str(loc[-1]), names, n=3, cutoff=0.6)


def unknown_key_hint(model: type[BaseModel], loc: tuple[str | int, ...]) -> str:
    """What to say after "unknown key": the nearest allowed keys, or that a section was
    written inside another one."""
    near = nearest_keys(model, loc)
    if near:
        return f" (did you mean {' or '.join(near)}?)"
    if len(loc) > 1 and str(loc[-1]) in model.model_fields:
        return f" ([{loc[-1]}] is a section of its own, not inside [{_path(loc[:-1])}])"
    return ""


def _path(loc: tuple[str | int, ...]) -> str:
    return ".".join(str(p) for p in loc)
