"""A spec as the commands take it: parsed, each key valid (plan/spec.py), then checked
as a whole (plan/checks.py), every problem named with its line.

The checks read the spec's cells (plan/matrix.py), which are made of the parsed spec:
this module sits above the three, so that spec, matrix and checks import one way.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from syncrep_lab.errors import UserError
from syncrep_lab.plan.checks import check_spec
from syncrep_lab.plan.spec import Spec, SpecError, parse_spec, preset_text, spec_file_text


def load_spec(text: str, source: str = "spec", *, allow_alter: bool = False) -> Spec:
    """The spec in ``text``, parsed and checked (``allow_alter``: as ``parse_spec``'s)."""
    spec = parse_spec(text, source, allow_alter=allow_alter)
    problems = check_spec(spec)
    if problems:
        raise SpecError.at_keys(source, text, problems)
    return spec


def load_spec_file(path: Path, *, allow_alter: bool = False) -> tuple[Spec, str]:
    """The spec in the file ``path``, parsed and checked, and its text (kept with the run)."""
    text = spec_file_text(path)
    return load_spec(text, str(path), allow_alter=allow_alter), text


def load_preset(name: str) -> tuple[Spec, str]:
    """A preset of the tool's (plan/spec.PRESETS), parsed and checked, and its text."""
    text = preset_text(name)
    return load_spec(text, f"preset {name}"), text


_TABLE = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]\s*(#.*)?$")
_ORDER = re.compile(r"^\s*order\s*=")


def with_order(text: str, order: str) -> str:
    """The spec's text with ``[run] order`` set to ``order`` (``run --duet``), its
    comments and every other line kept: the text is what the run stores and what
    ``--resume`` reads, so the order must be in it. Only a ``[run]`` table written as
    one (or none) can be edited; a spec that spells it another way is refused with
    the fix.

    >>> print(with_order('[run]\\nrepeats_min = 5\\n', "duet"), end="")
    [run]
    order = "duet"
    repeats_min = 5
    >>> print(with_order('[run]\\norder = "blocked"  # one by one\\n[x]\\n', "duet"), end="")
    [run]
    order = "duet"
    [x]
    >>> with_order('name = "a"\\n', "duet").endswith('[run]\\norder = "duet"\\n')
    True
    """
    lines = text.splitlines(keepends=True)
    table: str | None = None
    header: int | None = None
    out: list[str] = []
    for line in lines:
        m = _TABLE.match(line)
        if m:
            table = m.group(1)
        if table == "run" and _ORDER.match(line):
            continue  # the old order, replaced below the header
        out.append(line)
        if m and table == "run":
            header = len(out)
            out.append(f'order = "{order}"\n')
    if header is None:
        if out and not out[-1].endswith("\n"):
            out.append("\n")
        out.append(f'\n[run]\norder = "{order}"\n')
    edited = "".join(out)
    try:
        ok = tomllib.loads(edited).get("run", {}).get("order") == order
    except tomllib.TOMLDecodeError:
        ok = False
    if not ok:
        raise UserError(f"could not set [run] order = \"{order}\" in the spec's text",
                        f'write [run] as a table of its own, with order = "{order}" in it')
    return edited
