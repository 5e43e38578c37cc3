"""Which backend the store is: `load`, the one place where a store's address is looked at.

``sqlite`` (the default ``[store] url``) is the SQLite file at the given path (by
default ``memtrio.sqlite`` in the home, `sqlite.backend`); a ``postgresql://`` URL is
that database (`pg.backend`, which imports psycopg only when it opens something, so a
SQLite user needs no PostgreSQL driver). Everything else in memtrio holds the chosen
`backend.Backend` and asks it for what it can do (`Backend.has`), never compares a URL
or a backend's name: `tests/test_storage_boundary.py` checks that. A third backend is a
package of its own implementing `Backend` plus one line of `_BACKENDS` below.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .backend import Backend, Capability, DriverMissing
from .pg.backend import STORE_ORIGIN, PgBackend
from .sqlite.backend import SqliteBackend

SQLITE = "sqlite"  # ``[store] url``'s default: the SQLite file

# A store URL's scheme -> its backend, made from the URL. A URL of no known scheme goes to
# PostgreSQL's, whose `Backend.check` says what a store URL must be (without quoting it).
_BACKENDS: dict[str, Callable[[str], Backend]] = {
    "postgresql": PgBackend,
    "postgres": PgBackend,
}


def load(url: str | None, path: Path = Path()) -> Backend:
    """The backend of the store at ``url`` (None or ``sqlite``: the SQLite file ``path``).
    Nothing is opened, checked or imported here (`Backend.check`, the openers)."""
    if url is None or url == SQLITE:
        return SqliteBackend(path)
    return _BACKENDS.get(url.partition("://")[0].lower(), PgBackend)(url)


def check_url(url: str, origin: str) -> Backend:
    """The backend of ``url``, checked: `DriverMissing` or `ConfigError` (exit code 2)
    unless it is a store address memtrio can use; ``origin`` names where it came from."""
    backend = load(url)
    backend.check(origin)
    return backend


__all__ = ["Backend", "Capability", "DriverMissing", "STORE_ORIGIN", "check_url", "load"]
