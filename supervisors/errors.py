"""Failures the user can fix, reported as one line.

A `UserError` says what is wrong and what to do about it, in one line; the
command line prints it as ``memtrio: <message>`` and exits with its ``code``
(2 for invalid configuration, 1 for everything else, see docs/configuration.md).
Whoever raises one (the configuration loader, the home checks, the store
opening its database) knows the remedy; whoever catches it prints it as it is.
"""

from __future__ import annotations


class UserError(Exception):
    """A failure the user can act on; ``str()`` is one line: what is wrong, what to do."""

    code: int = 1

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(one_line(message))
        if code is not None:
            self.code = code


def one_line(text: str) -> str:
    """``text`` on a single line (newlines and runs of blanks become one space)."""
    return " ".join(text.split())


def find_user_error(exc: BaseException) -> UserError | None:
    """The `UserError` behind ``exc``: itself, inside exception groups, or a supervisor's cause.

    A supervisor that gives up keeps the failure of its child in ``cause``; a
    child that failed because of a `UserError` (a damaged database, say) makes
    that error the one to report.
    """
    seen: set[int] = set()
    stack: list[BaseException] = [exc]
    while stack:
        current = stack.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, UserError):
            return current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        cause = getattr(current, "cause", None)
        if isinstance(cause, BaseException):
            stack.append(cause)
    return None
