"""Storage options and the store's maintenance actor: pragmas of a new store, the WAL flush of
``async`` durability, incremental vacuum, FTS5 merge, and crashes of the actor."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import waits
from memtrio.actors.store.domain.memories import NewMemory, insert_memory
from memtrio.actors.store.feature import FEATURE
from memtrio.actors.store.sqlite.db import db_path
from memtrio.actors.store.sqlite.maintenance import MAINTENANCE
from memtrio.actors.store.sqlite.tx import tx as sqlite_tx
from memtrio.actors.store.writer import STORE
from memtrio.protocol.messages import ActorCrashed
from memtrio.supervisors import config as config_mod
from memtrio.supervisors import faults
from memtrio.supervisors.app import build_context, open_app
from memtrio.supervisors.context import AppContext
from stores import raw

QUIET = {"MEMTRIO_EMBEDDINGS": "off", "MEMTRIO_STORE_MAINTENANCE_INTERVAL": "3600"}


@asynccontextmanager
async def store_app(home: Path, **env: str) -> AsyncIterator[AppContext]:
    cfg = config_mod.load(home, env={**QUIET, **env})
    app = build_context(cfg, home, home)
    async with open_app(app, [FEATURE]):
        yield app


def pragma(conn: sqlite3.Connection, name: str) -> object:
    return conn.execute(f"PRAGMA {name}").fetchone()[0]


def write_memories(conn: sqlite3.Connection, texts: list[str]) -> list[int]:
    return [
        insert_memory(sqlite_tx(conn), NewMemory(text, scopes=["global"]))[0]["id"]
        for text in texts
    ]


def actor(app: AppContext, child: str) -> dict[str, object]:
    assert app.root is not None
    for row in app.root.snapshot():
        if row["id"] == child:
            return row
        for inner in row.get("children", []):  # type: ignore[union-attr]
            if inner["id"] == child:
                return inner
    raise KeyError(child)


async def test_a_new_store_has_the_reference_pragmas_and_the_configured_cache(home: Path) -> None:
    async with store_app(home, MEMTRIO_STORE_CACHE_SIZE_MB="16", MEMTRIO_STORE_MMAP_SIZE_MB="8"):
        pass
    for read_only in (False, True):
        from memtrio.actors.store.connections import Tuning
        from memtrio.actors.store.sqlite.db import connect

        conn = connect(db_path(home), read_only=read_only, tuning=Tuning(16, 8))
        try:
            assert pragma(conn, "auto_vacuum") == 2  # incremental, set when the file was created
            assert pragma(conn, "temp_store") == 2  # memory
            assert pragma(conn, "cache_size") == -16 * 1024
            assert pragma(conn, "mmap_size") == 8 * 1024 * 1024
            assert pragma(conn, "synchronous") == 1  # NORMAL: durability async
        finally:
            conn.close()

    async with store_app(home, MEMTRIO_STORE_CACHE_SIZE_MB="16") as app:
        got = await app.service(STORE).read(raw(lambda c: pragma(c, "cache_size")))
        assert got == -16 * 1024  # the read pool gets [store] cache_size_mb too


async def test_an_old_store_keeps_its_vacuum_mode_and_maintenance_says_so(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    old = sqlite3.connect(db_path(home))
    old.execute("CREATE TABLE leftover (x)")  # a store made before auto_vacuum was set
    old.close()
    async with store_app(home) as app:
        report = await app.service(MAINTENANCE).run_now()
        assert report.auto_vacuum == "none" and report.pages_freed == 0


async def test_maintenance_frees_deleted_pages_checkpoints_and_merges_fts(home: Path) -> None:
    async with store_app(home) as app:
        store = app.service(STORE)
        ids: list[int] = []
        for batch in range(20):  # one FTS5 segment per transaction
            texts = [f"note {batch} {i} " + "lorem ipsum dolor " * 200 for i in range(10)]
            ids += await store.write(raw(lambda c, t=texts: write_memories(c, t)))

        def delete_most(conn: sqlite3.Connection) -> None:
            conn.executemany("DELETE FROM memories WHERE id = ?", [(i,) for i in ids[10:]])

        await store.write(raw(delete_most))
        free_before = await store.read(raw(lambda c: pragma(c, "freelist_count")))
        segments = "SELECT count(DISTINCT segid) FROM memories_fts_idx"
        segments_before = await store.read(raw(lambda c: c.execute(segments).fetchone()[0]))
        assert free_before > 100 and segments_before > 1

        report = await app.service(MAINTENANCE).run_now()

        assert report.auto_vacuum == "incremental"
        assert report.pages_freed >= free_before and report.free_pages == 0
        assert await store.read(raw(lambda c: pragma(c, "freelist_count"))) == 0
        assert report.checkpointed == report.wal_frames and not report.checkpoint_busy
        assert report.fts_merged and report.fts_steps["memories_fts"] >= 1
        assert await store.read(raw(lambda c: c.execute(segments).fetchone()[0])) == 1

        def search(conn: sqlite3.Connection) -> int:
            sql = "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'lorem'"
            return conn.execute(sql).fetchone()[0]

        assert await store.read(raw(search)) == 10  # the merged index still answers
        status = app.service(MAINTENANCE).status()
        assert status["runs"] == 1 and status["last"]["pages_freed"] == report.pages_freed  # type: ignore[index]
    # The file shrank: the freed pages went back to the file system.
    with sqlite3.connect(db_path(home)) as conn:
        assert pragma(conn, "freelist_count") == 0


async def wait_for(test: Callable[[], bool]) -> None:
    """Poll until ``test()`` holds. Virtual time races ahead while a worker thread runs (the
    clock jumps whenever every task waits), so it bounds nothing here; pytest's timeout does."""
    while not test():
        await trio.sleep(0.01)


async def test_maintenance_runs_every_interval(home: Path, autojump_clock: trio.abc.Clock) -> None:
    # sync: no WAL flush loop, so the only timers are the interval and this test's.
    env = {"MEMTRIO_STORE_MAINTENANCE_INTERVAL": "300", "MEMTRIO_DURABILITY": "sync"}
    async with store_app(home, **env) as app:
        handle = app.service(MAINTENANCE)
        await trio.sleep(299.5)
        assert handle.runs == 0
        await wait_for(lambda: handle.runs == 1)
        await trio.sleep(299)  # the next run is due 300 s after this one ended
        assert handle.runs == 1
        await wait_for(lambda: handle.runs == 2)


async def test_async_durability_flushes_the_wal_after_commits_and_sync_does_not(
    home: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with store_app(home) as app:
        handle = app.service(MAINTENANCE)
        await wait_for(lambda: handle.flushes >= 1)  # the first tick
        await trio.sleep(1)
        idle = handle.flushes
        await trio.sleep(2)
        assert handle.flushes == idle  # nothing committed: no checkpoint
        await app.service(STORE).write(raw(lambda c: write_memories(c, ["flushed soon"])))
        await wait_for(lambda: handle.flushes > idle)  # the commit is checkpointed
        await trio.sleep(1)
        after = handle.flushes
        await trio.sleep(2)
        assert handle.flushes == after  # then quiet again
    async with store_app(home, MEMTRIO_DURABILITY="sync") as app:
        await app.service(STORE).write(raw(lambda c: write_memories(c, ["fsynced at commit"])))
        await trio.sleep(2)
        assert app.service(MAINTENANCE).flushes == 0


async def test_a_crash_in_maintenance_restarts_it_alone(home: Path) -> None:
    faults.configure("store.maintenance=raise@1")
    try:
        async with store_app(home) as app:
            handle = app.service(MAINTENANCE)
            with pytest.raises(ActorCrashed, match="InjectedFault"):
                await handle.run_now()
            # The store never noticed; the actor came back under its own supervisor.
            await app.service(STORE).write(raw(lambda c: write_memories(c, ["still writable"])))

            def restarted() -> bool:
                maintenance = actor(app, "maintenance")
                return (maintenance["restarts"], maintenance["state"]) == (1, "running")

            await waits.until(restarted, 10)
            assert actor(app, "store")["restarts"] == 0
            report = await handle.run_now()
            assert report.auto_vacuum == "incremental" and handle.runs == 1
    finally:
        faults.configure(None)
