"""A spec as the commands take it: parsed, each key valid (plan/spec.py), then checked
as a whole (plan/checks.py), every problem named with its line.

The checks read the spec's cells (plan/matrix.py), which are made of the parsed spec:
this module sits above the three, so that spec, matrix and checks import one way.
"""

from __future__ import annotations

from pathlib import Path

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
