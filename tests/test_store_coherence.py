"""The store's change mark and what the StoreWriter tells of it (`store.coherence`): a cache
is current while every mark past its own was told by this process's writes, and stale as
soon as another process moved the mark, whatever the counts say."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
from memtrio.actors.store.coherence import CURRENT, STALE, WAITING, CacheMark, ToldMarks
from memtrio.actors.store.domain.memories import NewMemory, insert_memory
from memtrio.actors.store.feature import FEATURE
from memtrio.actors.store.interfaces import StoreTx
from memtrio.actors.store.sqlite.db import db_path
from memtrio.actors.store.writer import STORE, Store
from memtrio.supervisors import config as config_mod
from memtrio.supervisors.app import build_context, open_app


def test_told_spans_merge_and_cover_only_what_was_told() -> None:
    told = ToldMarks()
    told.add(3, 5)
    told.add(7, 9)
    assert told.covers(3, 5) and told.covers(4, 5) and told.covers(7, 8)
    assert not told.covers(3, 6) and not told.covers(5, 7) and not told.covers(2, 4)
    told.add(5, 7)  # the gap told: one span from 3 to 9
    assert told.covers(3, 9)
    told.add(1, 2)
    assert not told.covers(1, 3)  # 2 -> 3 was never told
    assert not told.covers(5, 5) and not told.covers(6, 4)


def test_a_cache_is_current_while_every_mark_past_its_own_was_told() -> None:
    told = ToldMarks()
    mark = CacheMark(10)
    assert mark.check(10, told, 0.0, now=0.0) == CURRENT
    told.add(10, 12)  # this process's own write
    assert mark.check(12, told, 0.0, now=0.0) == CURRENT and mark.base == 12
    # Another process's write (12 -> 13), then an own one (13 -> 14): the own write
    # must not hide the other one.
    told.add(13, 14)
    assert mark.check(14, told, 0.0, now=0.0) == STALE
    assert mark.check(14, None, 0.0, now=0.0) == STALE
    # A store whose mark went back (replaced by a restore) is another store.
    assert CacheMark(20).check(5, told, 0.0, now=0.0) == STALE


def test_an_untold_write_waits_for_its_notification_no_longer_than_the_grace() -> None:
    told = ToldMarks()
    mark = CacheMark(1)
    assert mark.check(2, told, 1.0, now=100.0) == WAITING
    told.add(1, 2)  # the notification arrived
    assert mark.check(2, told, 1.0, now=100.5) == CURRENT
    assert mark.check(3, told, 1.0, now=101.0) == WAITING
    assert mark.check(3, told, 1.0, now=101.9) == WAITING
    assert mark.check(3, told, 1.0, now=102.0) == STALE


async def test_a_wait_for_an_untold_write_ends_when_it_is_told_or_at_the_grace(
    autojump_clock: trio.abc.Clock,
) -> None:
    told = ToldMarks()
    mark = CacheMark(1)
    assert mark.check(3, told, 1.0, now=trio.current_time()) == WAITING
    async with trio.open_nursery() as nursery:

        async def tell() -> None:
            await trio.sleep(0.3)
            told.add(1, 2)  # one of the two writes: not yet enough
            await trio.sleep(0.2)
            told.add(2, 3)

        nursery.start_soon(tell)
        start = trio.current_time()
        assert await mark.wait_told(told, 3, 1.0, trio.current_time())
        assert trio.current_time() - start == pytest.approx(0.5)
    assert mark.check(3, told, 1.0, now=trio.current_time()) == CURRENT
    # Never told: the wait ends with the grace, and the cache is stale.
    assert mark.check(4, told, 1.0, now=trio.current_time()) == WAITING
    start = trio.current_time()
    assert not await mark.wait_told(told, 4, 1.0, trio.current_time())
    assert trio.current_time() - start == pytest.approx(1.0)
    assert mark.check(4, told, 1.0, now=trio.current_time()) == STALE


@asynccontextmanager
async def store_of(home: Path) -> AsyncIterator[Store]:
    cfg = config_mod.load(home, env={"MEMTRIO_EMBEDDINGS": "off"})
    app = build_context(cfg, home, home)
    async with open_app(app, [FEATURE]):
        yield app.service(STORE)


def change_mark(tx: StoreTx) -> int:
    return tx.snapshot.change_mark()


async def test_the_writers_own_writes_are_told_and_another_connections_are_not(
    home: Path,
) -> None:
    async with store_of(home) as store:
        base = await store.read(change_mark)
        mark = CacheMark(base)

        def remember(tx: StoreTx) -> int:
            return int(insert_memory(tx, NewMemory("told", scopes=["global"]))[0]["id"])

        first = await store.write(remember)
        second = await store.write(remember)
        now = await store.read(change_mark)
        assert now > base
        assert mark.check(now, store.told, 0.0, now=0.0) == CURRENT

        # Another process forgets one memory and remembers one: the same count of rows.
        other = sqlite3.connect(db_path(home), isolation_level=None)
        try:
            other.execute("DELETE FROM memories WHERE id = ?", (first,))
            other.execute(
                "INSERT INTO memories (content, created_at, updated_at) VALUES ('x', 1, 1)"
            )
        finally:
            other.close()
        await store.write(lambda tx: tx.memories.delete(second))  # own writes after it
        await store.write(remember)
        assert mark.check(await store.read(change_mark), store.told, 0.0, now=0.0) == STALE
