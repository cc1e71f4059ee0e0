"""The consoles everything prints through.

Tables are wider than 80 columns: when output goes to a pipe or a CI log,
rich would otherwise squeeze them to 80, so those get 132.
"""

from __future__ import annotations

import sys

from rich.console import Console


def make_console(*, stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, highlight=False, width=None if stream.isatty() else 132)


def number(value: float | None, fmt: str = "{:,.0f}") -> str:
    """A figure for a table cell, "-" when there is none."""
    return "-" if value is None else fmt.format(value)
