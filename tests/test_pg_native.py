"""No SQL is rewritten at run time: PostgreSQL runs its own statements, and transactions are
opened and ended by each backend's connection, never chosen by reading SQL text."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
from memtrio.actors.store.direct import Direct
from memtrio.actors.store.interfaces import StoreTx

ROOT = Path(__file__).resolve().parent.parent
# Where a PostgreSQL connection is held: every statement there goes to psycopg as written.
PG_MODULES = sorted((ROOT / "actors" / "store" / "pg").glob("*.py")) + [
    ROOT / "actors" / "chaos" / "pg.py"
]
# psycopg's own connection (``raw``) and cursor (``cur``): no translation between them and us.
NATIVE_RECEIVERS = {"raw", "self.raw", "cur"}


def _execute_receivers(path: Path) -> list[str]:
    """``<receiver>`` of every ``<receiver>.execute(...)`` / ``.executemany(...)`` in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("execute", "executemany")
        ):
            found.append(f"{path.name}:{node.lineno}: {ast.unparse(node.func.value)}")
    return found


def test_no_sql_is_rewritten_at_run_time() -> None:
    from memtrio.actors.store.pg.conn import PgConnection

    # Before: pg/sql.py rewrote SQLite SQL with regexes (`?`, INSERT OR IGNORE, COLLATE
    # NOCASE, rowid, sqlite_sequence, an appended RETURNING id) in PgConnection.execute.
    assert importlib.util.find_spec("memtrio.actors.store.pg.sql") is None
    for shim in ("execute", "executemany"):
        assert not hasattr(PgConnection, shim), f"PgConnection.{shim} would take SQLite's SQL"
    for name in ("native", "native_many", "begin_write", "begin_read", "commit", "rollback"):
        assert callable(getattr(PgConnection, name))
    translated = [
        r
        for path in PG_MODULES
        for r in _execute_receivers(path)
        if r.split(": ", 1)[1] not in NATIVE_RECEIVERS
    ]
    assert translated == [], "statements that do not go to psycopg as written"


def test_a_read_is_one_snapshot_and_a_failed_write_leaves_nothing(direct: Direct) -> None:
    """`begin_read` / `begin_write` / `commit` / `rollback` of each backend's connection."""
    direct.write(lambda tx: tx.scopes.ensure("before"))

    names = ["before", "during"]

    def read_across_a_commit(tx: StoreTx) -> tuple[list[str], list[str]]:
        first = sorted(tx.scopes.ids(names))
        direct.write(lambda w: w.scopes.ensure("during"))  # another connection commits
        return first, sorted(tx.scopes.ids(names))

    first, again = direct.read(read_across_a_commit)
    # One snapshot: the read does not see the commit made meanwhile; the next read does.
    assert first == again == ["before"]
    assert sorted(direct.read(lambda tx: tx.scopes.ids(names))) == names

    def fails(tx: StoreTx) -> None:
        tx.scopes.ensure("rolled back")
        raise RuntimeError("the op failed")

    with pytest.raises(RuntimeError, match="the op failed"):
        direct.write(fails)
    assert direct.read(lambda tx: tx.scopes.ids(["rolled back"])) == {}
    assert sorted(direct.write(lambda tx: tx.scopes.ids(names))) == names  # the writer goes on
