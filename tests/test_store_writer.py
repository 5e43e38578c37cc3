"""The StoreWriter actor: one transaction per op, rollback on failure, listeners, read pool, pragmas."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from memtrio.actors.memory import tools as T
from memtrio.actors.store.domain.entities import EntitySpec
from memtrio.actors.store.domain.memories import NewMemory, insert_memory
from memtrio.actors.store.feature import FEATURE
from memtrio.actors.store.interfaces import StoreTx
from memtrio.actors.store.interfaces.errors import StoreOperationalError
from memtrio.actors.store.sqlite import schema
from memtrio.actors.store.sqlite.db import connect, db_path, open_write_connection
from memtrio.actors.store.writer import STORE, Change, Written
from memtrio.protocol.errors import DomainError
from memtrio.supervisors import config as config_mod
from memtrio.supervisors import faults
from memtrio.supervisors.app import build_context, open_app
from memtrio.supervisors.context import AppContext
from stores import raw


class Ctx:
    def __init__(self, app: AppContext) -> None:
        self.app = app
        self.session = None


@asynccontextmanager
async def store_app(
    home: Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> AsyncIterator[AppContext]:
    cfg = config_mod.load(home, env={"MEMTRIO_EMBEDDINGS": "off", **(env or {})})
    app = build_context(cfg, home, cwd or home)
    async with open_app(app, [FEATURE]):
        yield app


def count(home: Path, table: str) -> int:
    conn = sqlite3.connect(db_path(home))
    try:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


async def test_a_failing_op_is_rolled_back_and_the_writer_keeps_serving(home: Path) -> None:
    async with store_app(home) as app:
        store = app.service(STORE)

        def half_then_fail(tx: StoreTx) -> None:
            insert_memory(
                tx,
                NewMemory("half written", scopes=["global"], entities=[EntitySpec("e")]),
            )
            raise DomainError("refused on purpose")

        with pytest.raises(DomainError, match="refused on purpose"):
            await store.write(half_then_fail, name="test.half_then_fail")
        assert (
            count(home, "memories") == 0
            and count(home, "entities") == 0
            and count(home, "scopes") == 0
        )
        result = await T.remember(Ctx(app), T.RememberArgs("after the failure"))
        assert result.id >= 1
        assert app.root is not None and app.root.snapshot()[0]["restarts"] == 0
    assert count(home, "memories") == 1


async def test_fault_at_commit_leaves_nothing_half_written(home: Path) -> None:
    async with store_app(home) as app:
        faults.configure("store.commit=raise@1")
        try:
            with pytest.raises(faults.InjectedFault):
                await T.remember(
                    Ctx(app),
                    T.RememberArgs(
                        "doomed", entities=["alpha"], relations=[T.RelationArg("a", "uses", "b")]
                    ),
                )
            assert [
                count(home, t)
                for t in ("memories", "entities", "relations", "memory_scopes", "memories_fts")
            ] == [0, 0, 0, 0, 0]
            ok = await T.remember(Ctx(app), T.RememberArgs("survivor", entities=["alpha"]))
        finally:
            faults.configure(None)
        found = await T.recall(Ctx(app), T.RecallArgs("survivor doomed"))
        assert [m.id for m in found.memories] == [ok.id]


async def test_listeners_get_change_records_only_after_a_commit(home: Path) -> None:
    seen: list[list[Change]] = []
    async with store_app(home) as app:
        store = app.service(STORE)
        remove = store.add_listener(lambda changes: seen.append(list(changes)))
        store.add_listener(lambda changes: 1 / 0)  # a broken listener must not undo the commit
        ctx = Ctx(app)
        first = await T.remember(
            ctx, T.RememberArgs("x uses y", relations=[T.RelationArg("x", "uses", "y")])
        )
        kinds = sorted((c.kind, c.id) for c in seen[-1])
        assert ("memory", first.id) in kinds and ("relation", 1) in kinds
        assert all(c.vector is None and not c.deleted for c in seen[-1])  # embeddings are off
        with pytest.raises(DomainError):
            await T.forget(ctx, T.ForgetArgs(999))
        assert len(seen) == 1
        await T.update(ctx, T.UpdateArgs(first.id, content="x uses z"))
        assert seen[-1] == [Change(kind="memory", id=first.id)]
        await T.forget(ctx, T.ForgetArgs(first.id))
        assert seen[-1] == [Change(kind="memory", id=first.id, deleted=True)]
        assert (
            await store.write(raw(lambda conn: Written("value", [Change(kind="reset")]))) == "value"
        )
        assert seen[-1] == [Change(kind="reset")]
        remove()
        await T.remember(ctx, T.RememberArgs("unheard"))
        assert len(seen) == 4


async def test_reads_run_in_threads_without_blocking_the_loop(home: Path) -> None:
    # Two reads block in their threads until the test releases them: the event
    # loop must still run (it is what notices both are inside), and two reads
    # run at once (the pool has several connections).
    async with store_app(home) as app:
        store = app.service(STORE)
        main_thread = threading.get_ident()
        inside: list[int] = []
        both_inside = trio.Event()
        release = threading.Event()

        def arrived() -> None:
            inside.append(1)
            if len(inside) == 2:
                both_inside.set()

        def blocked_read(conn: sqlite3.Connection) -> int:
            assert threading.get_ident() != main_thread
            trio.from_thread.run_sync(arrived)
            assert release.wait(30), "the loop never released the reads"
            return conn.execute("SELECT count(*) FROM memories").fetchone()[0]

        results: list[int] = []

        async def read() -> None:
            results.append(await store.read(raw(blocked_read)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            nursery.start_soon(read)
            try:
                with trio.fail_after(30):
                    await both_inside.wait()
            finally:
                release.set()
        assert results == [0, 0]

        def write_in_read(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO scopes (name) VALUES ('global')")

        with pytest.raises(StoreOperationalError) as refused:
            await store.read(raw(write_in_read))  # read connections are query-only
        assert isinstance(refused.value.__cause__, sqlite3.OperationalError)


async def test_write_connection_pragmas_and_durability(home: Path) -> None:
    async with store_app(home, env={"MEMTRIO_DURABILITY": "sync"}) as app:
        store = app.service(STORE)

        def pragmas(conn: sqlite3.Connection) -> tuple[Any, ...]:
            return tuple(
                conn.execute(f"PRAGMA {p}").fetchone()[0]
                for p in ("journal_mode", "foreign_keys", "synchronous", "busy_timeout")
            )

        assert await store.write(raw(pragmas)) == ("wal", 1, 2, 30000)
    async with store_app(home, env={"MEMTRIO_STORE_BUSY_TIMEOUT_MS": "1234"}) as app:
        assert (await app.service(STORE).write(raw(pragmas)))[2:] == (1, 1234)


def test_schema_migrates_forward_and_refuses_a_newer_database(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    conn = open_write_connection(path, busy_timeout_ms=1000, durability="normal")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.LATEST
    conn.execute(f"PRAGMA user_version = {schema.LATEST + 1}")
    conn.close()
    with pytest.raises(schema.SchemaTooNew, match="upgrade memtrio"):
        open_write_connection(path, busy_timeout_ms=1000, durability="normal")


def test_busy_writer_waits_for_the_other_connection(tmp_path: Path) -> None:
    """BEGIN IMMEDIATE on a locked database waits (busy timeout + retries) instead of failing."""
    from memtrio.actors.store.sqlite import db

    path = tmp_path / "b.sqlite"
    first = open_write_connection(path, busy_timeout_ms=1000, durability="normal")
    second = connect(path, busy_timeout_ms=50)
    attempts = threading.Semaphore(0)
    second.set_trace_callback(lambda sql: attempts.release() if sql == "BEGIN IMMEDIATE" else None)
    first.execute("BEGIN IMMEDIATE")
    outcome: list[BaseException | None] = []

    def take_the_lock() -> None:
        try:
            db.begin_immediate(second, 30_000)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome.append(exc)

    waiter = threading.Thread(target=take_the_lock)
    waiter.start()
    # SQLite's own handler gives up after 50 ms; a second attempt is the retry loop waiting.
    assert attempts.acquire(timeout=30) and attempts.acquire(timeout=30)
    assert outcome == []  # still waiting while the lock is held
    first.execute("COMMIT")
    waiter.join(30)
    assert outcome == [None]
    second.set_trace_callback(None)
    second.execute("COMMIT")
    with pytest.raises(sqlite3.OperationalError):
        first.execute("BEGIN IMMEDIATE")
        db.begin_immediate(second, 100)
    first.close()
    second.close()


async def test_a_broken_connection_crashes_the_writer_which_restarts(home: Path) -> None:
    from memtrio.protocol.messages import ActorCrashed

    async with store_app(home) as app:
        store = app.service(STORE)

        def break_connection(conn: sqlite3.Connection) -> None:
            conn.close()

        with pytest.raises(ActorCrashed):
            await store.write(raw(break_connection))
        assert app.service(STORE) is store  # the same handle, served by a new incarnation
        result = await T.remember(Ctx(app), T.RememberArgs("after the restart"))
        assert result.id == 1
        assert app.root is not None and app.root.snapshot()[0]["restarts"] == 1
        assert (
            await store.read(
                raw(lambda conn: conn.execute("SELECT count(*) FROM memories").fetchone()[0])
            )
            == 1
        )
