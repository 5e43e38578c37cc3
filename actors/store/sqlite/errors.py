"""SQLite's errors as the store's (`interfaces.errors`), the sqlite3 error kept as ``__cause__``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from ..interfaces.errors import StoreBusy, StoreConflict, StoreError, StoreOperationalError


def store_error(exc: sqlite3.Error) -> StoreError:
    """The store's error for ``exc`` (the caller chains ``exc`` as its cause)."""
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, sqlite3.IntegrityError):
        return StoreConflict(detail)
    if isinstance(exc, sqlite3.OperationalError):
        text = detail.lower()
        if "locked" in text or "busy" in text:
            return StoreBusy(detail)
        return StoreOperationalError(detail)
    return StoreError(detail)


@contextmanager
def mapped() -> Iterator[None]:
    """Run the block with sqlite3's errors raised as the store's, chained."""
    try:
        yield
    except sqlite3.Error as exc:
        raise store_error(exc) from exc
