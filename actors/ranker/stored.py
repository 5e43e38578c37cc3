"""Values read from the store's rows, as the ranker's cache needs them, whatever a row holds.

SQLite keeps any value in any column: a row written by an older memtrio or by
hand may hold a BLOB where a text belongs or a text where a number does. The
cache load reads every row; one such value must not stop it (a crash there
restarts the ranker until its supervisor gives up), so each is converted here.
"""

from __future__ import annotations

import math


def as_text(value: object) -> str:
    """A stored text as ``str`` (bytes decoded, invalid UTF-8 replaced; None as "")."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else str(value)


def as_number(value: object) -> float:
    """A stored number as a finite ``float``; 0.0 for anything else (a text, NaN, None)."""
    try:
        out = float(value)  # type: ignore[arg-type] # any stored value; a failure is 0.0
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return out if math.isfinite(out) else 0.0
