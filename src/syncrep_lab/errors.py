"""Errors a user can cause, and how they reach the terminal.

Every failure a user can provoke (a bad flag, a missing program, a clash with
something already on the machine) is raised as a :class:`UserError` carrying
the cause and the fix. The CLI prints both and exits non-zero; only a bug in
syncrep-lab itself ever shows a traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """A failure the user can act on: what went wrong, and what to do about it."""

    exit_code = 2

    def __init__(self, cause: str, fix: str | None = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.fix = fix

    def __str__(self) -> str:
        if self.fix:
            return f"{self.cause}\n  fix: {self.fix}"
        return self.cause


class ClusterFailure(UserError):
    """A cluster did not reach the state that was asked of it (bounded wait ran out, a
    server refused to start). Exit code 3 tells it apart from bad input."""

    exit_code = 3


class Interrupted(BaseException):
    """SIGTERM or SIGINT arrived; raised in the main thread so cleanup runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
