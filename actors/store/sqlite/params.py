"""Parameters of SQLite statements: lists of values within its limit, lists of ids inlined."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")

# Values bound in one statement, at most (SQLITE_MAX_VARIABLE_NUMBER is 999 before 3.32).
MAX_PARAMS = 900


def chunks(values: Sequence[T], size: int = MAX_PARAMS) -> Iterator[list[T]]:
    """``values`` in lists of at most ``size`` (none for no values)."""
    for start in range(0, len(values), size):
        yield list(values[start : start + size])


def id_list(ids: Sequence[int]) -> str:
    """Integer ids as the text of an SQL list (``NULL`` for none: matches nothing). Each is
    converted with `int`, so no text reaches the statement."""
    return ",".join(str(int(i)) for i in ids) or "NULL"


def marks(n: int) -> str:
    """``n`` placeholders for an SQL list: ``?,?,?``."""
    return ",".join("?" * n)
