"""The store's read pool: graph reads run on the event loop within a budget, else in a thread."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
from memtrio.actors.store import connections
from memtrio.actors.store.interfaces.errors import StoreOperationalError
from memtrio.actors.store.sqlite import db

# About 300,000 SQLite VM steps: far over any budget when the budget is zero.
COUNT_TO_100K = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) "
    "SELECT sum(i) FROM n"
)


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The functions run in a worker thread."""
    seen: list[object] = []
    real = trio.to_thread.run_sync

    async def counting(fn: Callable[..., object], *args: object, **kw: object) -> object:
        seen.append(fn)
        return await real(fn, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(trio.to_thread, "run_sync", counting)
    return seen


def _pool(tmp_path: Path) -> connections.ReadPool:
    path = tmp_path / "m.sqlite"
    db.open_write_connection(path, busy_timeout_ms=1000, durability="normal").close()
    return db.open_read_pool(path, 1, 1000)


async def test_a_small_inline_read_needs_no_thread_and_a_long_one_runs_again_in_one(
    tmp_path: Path, hops: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = _pool(tmp_path)
    run: Callable[..., Awaitable[object]] = pool.run
    try:
        assert (
            await run(lambda c: c.execute("SELECT count(*) FROM entities").fetchone()[0], True) == 0
        )
        assert hops == []
        monkeypatch.setattr(connections, "INLINE_BUDGET", 0.0)
        assert await run(lambda c: c.execute(COUNT_TO_100K).fetchone()[0], True) == 5000050000
        assert hops == [connections.run_read]  # interrupted on the loop, answered from the thread
        assert (
            await run(lambda c: c.execute("SELECT 1").fetchone()[0], True) == 1
        )  # under 1,000 steps
        assert await run(lambda c: c.execute("SELECT 2").fetchone()[0]) == 2
        assert hops == [connections.run_read, connections.run_read]  # not inline: always a thread
    finally:
        pool.close()


async def test_a_failing_inline_read_fails_as_it_would_in_a_thread(
    tmp_path: Path, hops: list[object]
) -> None:
    pool = _pool(tmp_path)
    try:
        with pytest.raises(StoreOperationalError) as failed:
            await pool.run(lambda c: c.execute("SELECT * FROM no_such_table").fetchall(), True)
        assert isinstance(failed.value.__cause__, sqlite3.OperationalError)
        assert hops == [connections.run_read]  # an SQLite error is checked again in the thread
        with pytest.raises(KeyError):
            await pool.run(lambda c: {}["x"], True)
        assert hops == [connections.run_read]  # not SQLite's: raised at once
    finally:
        pool.close()
