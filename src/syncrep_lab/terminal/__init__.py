"""What the tool prints on a terminal, in one package: the consoles everything prints
through (here), the results table and CSV (``results``), the analysis tables
(``analysis``) and a run's live display (``progress``). The figures come from
``analysis/`` and the store; this package only lays them out.

Tables are wider than 80 columns: when output goes to a pipe or a CI log,
rich would otherwise squeeze them to 80, so those get 132.
"""

from __future__ import annotations

import logging
import sys

from rich.console import Console


def make_console(*, stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    # no emoji codes: rich would print "walsender:b:" in a message with a letter B emoji
    return Console(stderr=stderr, highlight=False, emoji=False,
                   width=None if stream.isatty() else 132)


# What libraries log, shown as the tool's own notes: warnings only, passwords masked,
# and without the ones that only say a connection was abandoned on purpose (leaving a
# connection mid-statement on an interrupt makes psycopg say it could not roll back).
LIBRARY_LOGGERS = ("psycopg", "asyncssh", "py.warnings")
_NOISE = ("error ignored in rollback", "error ignored terminating")


class LibraryNotes(logging.Handler):
    def __init__(self, console: Console) -> None:
        super().__init__(logging.WARNING)
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        from rich.markup import escape

        from syncrep_lab.pg.conninfo import mask_text

        try:
            text = record.getMessage().strip()
        except (TypeError, ValueError):
            text = str(record.msg)
        if any(text.startswith(n) for n in _NOISE):
            return
        first = mask_text(text.splitlines()[0] if text else "")
        library = "python" if record.name == "py.warnings" else record.name.split(".")[0]
        self.console.print(f"note: {escape(library)}: {escape(first)}", soft_wrap=True)


def route_library_logs(console: Console) -> None:
    """Every library warning reaches the terminal through :class:`LibraryNotes`."""
    logging.captureWarnings(True)
    handler = LibraryNotes(console)
    for name in LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.propagate = False
        logger.setLevel(logging.WARNING)
