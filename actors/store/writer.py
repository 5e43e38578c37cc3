"""The StoreWriter actor and the `Store` handle other actors and tools use.

The StoreWriter owns the one write connection of this process. It serves
`Transact` requests (see ``messages``) from a supervisor-owned `Mailbox`; each one's ``op`` is a
synchronous function ``op(tx) -> result`` (``tx``: the transaction seen through the
storage interfaces) run in a worker thread inside one write transaction (SQLite's
``BEGIN IMMEDIATE ... COMMIT``). If the op raises, or the fault point ``store.commit``
(right before COMMIT) raises, the transaction is rolled back and the caller gets the
exception (a driver's error as the store's, `interfaces.errors`): nothing is
half-written.

An op may return `Written(value, changes)`: the caller receives ``value`` and,
after the commit, every listener registered with `Store.add_listener` is called
with ``changes`` (a list of `Change`). The recall ranker uses this to keep its
in-memory vectors current. Every write also notes the store's change mark
before and after it (`Snapshot.change_mark`) in ``Store.told``: a cache that
finds the mark beyond what was told knows another process wrote (SQLite: never
reported; PostgreSQL: reported through `pg.notify` when announced), and
reloads (`coherence`).

Reads (`Store.read`) run on a small pool of read connections in threads and
never block the trio loop, except those asked ``inline`` (a few indexed lookups),
which the loop runs itself within a budget (`connections.ReadPool`).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

import msgspec
import trio

from ...protocol.errors import Unavailable
from ...supervisors import faults, trace
from ...supervisors.context import ServiceKey
from ...supervisors.supervisor import ChildContext, Mailbox
from . import backends, connections
from .backend import Announce, Backend
from .coherence import NOTIFY_GRACE, ToldMarks
from .domain.scopes import ScopePolicies, ScopePolicy
from .interfaces import ReadTx, StoreTx
from .messages import Change, StoreRequest, Transact

ACTOR = "store"

T = TypeVar("T")


class Written(msgspec.Struct, Generic[T], frozen=True):
    """What a write op returns when it has changes to report: the caller gets ``value``."""

    value: T
    changes: list[Change] = msgspec.field(default_factory=list)


Listener = Callable[[Sequence[Change]], None]


class Store:
    """The client handle of the store (published under `STORE`).

    - ``await store.write(op, name=...)``: run ``op(tx)`` in one write
      transaction on the StoreWriter; returns its value (see `Written`).
    - ``await store.read(op, name=...)``: run ``op(tx)`` in one read transaction on a
      pool connection, in a thread. ``tx`` is the transaction seen through the
      storage interfaces (`interfaces.StoreTx`), ``name`` the operation the trace shows.
    - ``store.default_scope`` / ``store.policy``: the current scope and the
      read/write scope rules of the server's own directory (the CLI's);
      ``store.policies``: those of each session's repository (a tool call uses
      its session's: ``services.policy_of``).
    - ``store.add_listener(fn)``: ``fn(changes)`` is called in the trio thread
      after each commit that reported changes; returns a function that removes it.

    The handle outlives StoreWriter restarts (the mailbox and listeners are
    owned by the feature); the read pool is replaced on each restart.
    """

    def __init__(
        self,
        path: Path,
        policy: ScopePolicy,
        mailbox: Mailbox,
        policies: ScopePolicies | None = None,
        backend: Backend | None = None,
    ) -> None:
        self.path = path  # the SQLite file (the default backend's; its maintenance's)
        # The backend, chosen once where the store is set up (`backends.load`).
        self.backend: Backend = backend if backend is not None else backends.load(None, path)
        # Names this handle's writes in change notifications (PostgreSQL: `pg.notify`).
        self.origin = f"{os.getpid()}-{secrets.token_hex(6)}"
        self.policy = policy
        self.policies = policies if policies is not None else ScopePolicies()
        self.mailbox = mailbox
        self._listeners: list[Listener] = []
        self._pool: connections.ReadPool | None = None
        # How a connection is seen through the interfaces.
        self.make_tx: Callable[[Any], StoreTx] = self.backend.tx_maker()
        # How a commit tells the other processes of its changes (None: they compare marks).
        self.announce: Announce | None = self.backend.announcer()
        # The change marks of the writes told to the listeners (`coherence`): this
        # process's commits, and the other processes' announced ones.
        self.told = ToldMarks()

    @property
    def default_scope(self) -> str:
        return self.policy.current

    async def write(
        self,
        op: Callable[[StoreTx], Written[T]] | Callable[[StoreTx], T],
        name: str = "",
    ) -> T:
        """``op(tx)`` in one write transaction on the StoreWriter; ``name`` (else the
        function's name) is the operation the trace log shows."""
        name = name or _name_of(op)
        return await self.mailbox.call(Transact(op=op, name=name, trace=trace.current.get()))

    async def read(self, op: Callable[[ReadTx], T], inline: bool = False, name: str = "") -> T:
        """``op(tx)`` in one read transaction; ``inline``: a small indexed read, tried on
        the event loop first (`connections.ReadPool`); ``name`` as for `write`."""
        pool = self._pool
        if pool is None:
            raise Unavailable("the memory store is not running (starting or restarting); try again")
        make_tx = self.make_tx
        try:
            with trace.span(ACTOR, "read", op=name or _name_of(op)):
                return await pool.run(lambda conn: op(make_tx(conn)), inline)
        except connections.PoolClosed:
            raise Unavailable("the memory store is restarting; try again") from None

    def add_listener(self, fn: Listener) -> Callable[[], None]:
        self._listeners.append(fn)

        def remove() -> None:
            if fn in self._listeners:
                self._listeners.remove(fn)

        return remove

    @property
    def untold_grace(self) -> float:
        """How long a cache waits for a write's notification before it reloads for it
        (`coherence.CacheMark.check`): `NOTIFY_GRACE` where other processes announce their
        writes (PostgreSQL), 0 where they cannot (SQLite)."""
        return NOTIFY_GRACE if self.announce is not None else 0.0

    def _notify(self, changes: Sequence[Change]) -> None:
        for fn in list(self._listeners):
            try:
                fn(changes)
            except Exception as exc:  # noqa: BLE001 - a listener must not undo a commit
                trace.error(
                    ACTOR,
                    "listener_failed",
                    listener=getattr(fn, "__qualname__", repr(fn)),
                    error=f"{type(exc).__name__}: {exc}",
                )


def _name_of(op: Callable[..., object]) -> str:
    """An operation's name for the trace log: its function's (a lambda's is its module's)."""
    func = getattr(op, "func", op)  # functools.partial
    name = getattr(func, "__qualname__", "") or type(func).__name__
    if "<lambda>" in name:
        return f"{getattr(func, '__module__', '').rsplit('.', 1)[-1]}.<lambda>"
    return name


def _run_op(
    conn: connections.StoreConnection, op: Callable[[Any], T], busy_ms: int, commit: bool
) -> T:
    """In a worker thread: begin a write (SQLite: BEGIN IMMEDIATE; PostgreSQL: BEGIN and
    the write lock), op, and (if ``commit``) commit; rollback on error."""
    with conn.errors():
        conn.begin_write(busy_ms)
        try:
            result = op(conn)
            if commit:
                conn.commit()
        except BaseException:
            connections.rollback_quietly(conn)
            raise
    return result


def _commit(conn: connections.StoreConnection) -> None:
    with conn.errors():
        conn.commit()


def _marked(
    op: Callable[[StoreTx], T],
    make_tx: Callable[[Any], StoreTx],
    span: list[int],
    announce: Announce | None,
    origin: str,
) -> Callable[[Any], T]:
    """``op`` on the transaction, noting in ``span`` the store's change mark before and
    after it (`coherence`: the writes this process tells its listeners of), then, if
    ``announce`` (PostgreSQL: `pg.notify`; `Backend.announcer`), a notification of its
    changes and marks to the other processes, sent if it commits."""

    def run(conn: Any) -> T:
        tx = make_tx(conn)
        span[:] = [tx.snapshot.change_mark()] * 2
        result = op(tx)
        span[1] = tx.snapshot.change_mark()
        if announce is not None and isinstance(result, Written) and result.changes:
            announce(conn, origin, result.changes, (span[0], span[1]))
        return result

    return run


async def _transact(conn: connections.StoreConnection, op: Callable[[Any], T], busy_ms: int) -> T:
    if not faults.ACTIVE:
        return await trio.to_thread.run_sync(_run_op, conn, op, busy_ms, True)
    result = await trio.to_thread.run_sync(_run_op, conn, op, busy_ms, False)
    try:
        await faults.hit("store.commit")
        await trio.to_thread.run_sync(_commit, conn)
    except BaseException:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(connections.rollback_quietly, conn)
        raise
    return result


async def serve_store_writer(
    ctx: ChildContext,
    store: Store,
    *,
    busy_timeout_ms: int,
    durability: str,
    read_connections: int,
    tuning: connections.Tuning = connections.DEFAULT_TUNING,
    publish: Callable[[Store], None] | None = None,
    task_status: trio.TaskStatus[Store] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Open the database (migrating it), publish the read pool, serve write commands.

    Error handling: an exception raised by an op fails that command only; a
    failure of the connection itself (e.g. rollback impossible) crashes the
    actor, which fails the in-flight reply and lets the supervisor restart it.
    """
    if faults.ACTIVE:
        await faults.hit("store.open")  # a slow disk or database server at start
    conn = await trio.to_thread.run_sync(
        lambda: store.backend.open_writer(
            busy_timeout_ms=busy_timeout_ms,
            durability=durability,
            tuning=tuning,
        )
    )
    pool: connections.ReadPool | None = None
    try:
        pool = await trio.to_thread.run_sync(
            lambda: store.backend.open_read_pool(read_connections, busy_timeout_ms, tuning)
        )
        store._pool = pool
        if publish is not None:
            publish(store)
        trace.event(
            ACTOR,
            "store_opened",
            path=store.backend.shown,
            scope=store.default_scope,
            restarts=ctx.restarts,
        )
        task_status.started(store)
        with ctx.cancel_on_shutdown(trio.CancelScope()):
            request: StoreRequest
            async for request in store.mailbox.receive_channel:
                match request:
                    case Transact():
                        await _transact_one(ctx, store, conn, request, busy_timeout_ms)
    finally:
        if store._pool is pool:
            store._pool = None
        if pool is not None:
            pool.close()
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(conn.close)


async def _transact_one(
    ctx: ChildContext, store: Store, conn: connections.StoreConnection, cmd: Transact, busy_ms: int
) -> None:
    if cmd.reply.done:
        return  # the caller gave up (timed out) while this waited in the mailbox
    with ctx.serving(cmd.reply):
        if faults.ACTIVE:
            await faults.hit("store.write")  # a crash of the writer actor itself
        token = trace.current.set(cmd.trace) if cmd.trace is not None else None
        try:
            with trace.span(ACTOR, "write", op=cmd.name) as extra:
                try:
                    # A running op is never abandoned: its thread finishes first.
                    span: list[int] = []
                    op = _marked(cmd.op, store.make_tx, span, store.announce, store.origin)
                    result = await _transact(conn, op, busy_ms)
                except Exception as exc:  # noqa: BLE001 - the op's failure is the caller's
                    if conn.in_transaction:
                        raise  # the connection is in an unknown state: crash and reopen
                    extra["outcome"] = "refused"
                    cmd.reply.fail(exc)
                    return
        finally:
            if token is not None:
                trace.current.reset(token)
        # Told before the listeners run: a cache that sees this mark has its records.
        store.told.add(*span)
        if isinstance(result, Written):
            if result.changes:
                store._notify(result.changes)
            cmd.reply.set(result.value)
        else:
            cmd.reply.set(result)


STORE: ServiceKey[Store] = ServiceKey("store")
