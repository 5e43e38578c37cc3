"""The statement runner both backends' concept classes share (basic-memory's
`SearchRepositoryBase` pattern: shared method bodies, SQL text per dialect).

A concept's shared base (`rows.memories.MemoriesBase`, ...) writes each method once
against `Rows`; each backend's class mixes in its runner (`sqlite.params.SqliteRows`,
`pg.conn.PgRows`) and names its own statements as class attributes, in its own dialect
(``?`` or ``%s``): nothing here writes or rewrites SQL.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar

Params = Sequence[Any] | Mapping[str, Any]
Row = Sequence[Any]  # a row as the drivers give it (a tuple)
T = TypeVar("T")


class Cursor(Protocol):
    """What the shared bodies read of a driver's cursor (sqlite3's and psycopg's alike)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Row | None: ...

    def fetchall(self) -> list[Any]: ...

    def fetchmany(self, size: int) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Rows:
    """A concept's statements on one connection: `run` is the backend's (its driver's call);
    the rest are the shapes of result the shared bodies ask for."""

    def run(self, sql: str, params: Params = ()) -> Cursor:
        """Run ``sql`` (the backend's own dialect) with ``params``: its cursor."""
        raise NotImplementedError

    def run_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run ``sql`` once per parameter row."""
        raise NotImplementedError

    def insert_id(self, sql: str, params: Params) -> int:
        """Run an insert of one row (on PostgreSQL, ending ``RETURNING id``): its id."""
        raise NotImplementedError

    def one_of(self, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """The dialect's test that a column is one of ``values`` (one of `parts`), written
        after the column, and its parameters."""
        raise NotImplementedError

    def parts(self, values: Sequence[T]) -> Iterator[list[T]]:
        """``values`` in the lists one statement takes (`one_of`); none for no values."""
        if values:
            yield list(values)

    def all(self, sql: str, params: Params = ()) -> list[Any]:
        return self.run(sql, params).fetchall()

    def first(self, sql: str, params: Params = ()) -> Row | None:
        """The first row of ``sql``; None for none."""
        return self.run(sql, params).fetchone()

    def one(self, sql: str, params: Params = ()) -> Row:
        """The row of ``sql``, which always has one (an aggregate, a row known to exist)."""
        row = self.run(sql, params).fetchone()
        assert row is not None
        return row

    def number(self, sql: str, params: Params = ()) -> int:
        """The first column of the first row as an int (no row, or NULL: 0)."""
        row = self.run(sql, params).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def streamed(self, sql: str, params: Params = (), size: int = 500) -> Iterator[Any]:
        """The rows of ``sql``, fetched ``size`` at a time."""
        cur = self.run(sql, params)
        while rows := cur.fetchmany(size):
            yield from rows
