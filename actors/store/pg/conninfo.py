"""libpq's own reading of a connection string, for `dsn` (which imports no driver).

psycopg is imported when a string is read, not with this module: a SQLite user, and a user
without the ``postgres`` extra, can import `dsn`.
"""

from __future__ import annotations

from typing import Any


class Malformed(ValueError):
    """libpq could not read the connection string; the message is libpq's (it may quote
    the part it could not read: pass it through `dsn.redact` before showing it)."""


def read(connection: str) -> dict[str, Any]:
    """The keywords and values libpq reads in ``connection`` (a URL or key=value string).

    Error handling: `Malformed` when libpq cannot read it (libpq's error as ``__cause__``),
    ``UnicodeDecodeError`` for a percent-encoded byte sequence that is not UTF-8,
    ``ImportError`` without the driver."""
    from psycopg import Error
    from psycopg.conninfo import conninfo_to_dict

    try:
        return conninfo_to_dict(connection)
    except Error as exc:
        raise Malformed(str(exc)) from exc
