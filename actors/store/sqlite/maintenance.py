"""The store's maintenance actor: the WAL flush of ``async`` durability and periodic upkeep.

Two duties, on a connection of its own (a checkpoint cannot run inside the
StoreWriter's transactions):

- **WAL flush** (durability ``async``, the default): every ``[store]
  wal_flush_ms`` (250 ms), if anything was committed since the last one, a
  ``PRAGMA wal_checkpoint(PASSIVE)``. Commits run with ``synchronous=NORMAL``:
  each is written to the WAL (the OS has it: a killed process loses nothing
  acknowledged) but not fsynced; the checkpoint fsyncs the WAL and copies it
  into the database, so an OS crash or power loss can cost the commits of
  about the last ``wal_flush_ms``. With ``sync`` (``synchronous=FULL``) each
  commit is fsynced and there is no flush loop.
- **Maintenance** every ``[store] maintenance_interval`` seconds (300), or when
  asked (`RunMaintenance`, `Maintenance.run_now`): each FTS5 index merged
  towards one segment (what ``'optimize'`` does) with FTS5's bounded
  ``('merge', -N)`` command; then, if the database has
  ``auto_vacuum=INCREMENTAL``, its free pages (the merge's old segments
  included) given back to the file system with ``PRAGMA incremental_vacuum``;
  then a PASSIVE checkpoint of it all. Merge and vacuum run through the StoreWriter in
  steps of at most `VACUUM_STEP_PAGES` / `FTS_MERGE_PAGES` pages, each its own
  short transaction, so a writer never waits behind a whole run; a run does at
  most `MAX_STEPS` steps of each (the next run goes on). PASSIVE checkpoints
  take no lock a writer needs.

Each run is a trace span (``store.maintenance`` / ``maintenance``) with what it
did, and its report is kept for ``server_status``. Fault point:
``store.maintenance`` at the start of each run (chaos: a crash here restarts
this actor alone, never the store).
"""

from __future__ import annotations

import time
from pathlib import Path

import msgspec
import trio

from ....supervisors import faults, trace
from ....supervisors.context import ServiceKey
from ....supervisors.supervisor import ChildContext, Mailbox
from .. import connections
from ..interfaces import FileUpkeep, StoreTx
from ..messages import MaintenanceRequest, RunMaintenance
from ..writer import Store
from . import db
from .upkeep import SqliteUpkeep

ACTOR = "store.maintenance"
VACUUM_STEP_PAGES = 512  # pages freed per write transaction (2 MB of 4 KB pages)
FTS_MERGE_PAGES = 256  # FTS5 leaf pages merged per write transaction
MAX_STEPS = 200  # steps of each kind per run; the next run continues


class MaintenanceReport(msgspec.Struct, frozen=True, kw_only=True):
    """What one maintenance run did.

    - ``wal_frames`` / ``checkpointed``: frames in the WAL and frames copied
      into the database by the checkpoint (equal: nothing left to copy);
      ``checkpoint_busy``: a reader or writer kept it from finishing (the next
      one goes on).
    - ``auto_vacuum``: the database's mode; ``none`` for a store created before
      memtrio set ``incremental`` (docs/memory.md says how to switch it).
    - ``pages_freed``: pages given back by the incremental vacuum;
      ``free_pages``: free pages left in the file.
    - ``fts_steps``: merge steps per FTS5 table; ``fts_merged``: every table
      reached one segment in this run.
    """

    wal_frames: int
    checkpointed: int
    checkpoint_busy: bool
    auto_vacuum: str
    pages_freed: int
    free_pages: int
    fts_steps: dict[str, int]
    fts_merged: bool
    seconds: float


class Maintenance:
    """The handle of the maintenance actor (published under `MAINTENANCE`).

    Outlives restarts of the actor: the mailbox and the counters are owned here.
    """

    def __init__(self, mailbox: Mailbox[MaintenanceRequest]) -> None:
        self.mailbox = mailbox
        self.runs = 0
        self.flushes = 0
        self.last: MaintenanceReport | None = None

    async def run_now(self) -> MaintenanceReport:
        """Run maintenance at once and return its report (raises what the run raised)."""
        report: MaintenanceReport = await self.mailbox.call(
            RunMaintenance(trace=trace.current.get())
        )
        return report

    def status(self) -> dict[str, object]:
        out: dict[str, object] = {"runs": self.runs, "wal_flushes": self.flushes}
        if self.last is not None:
            out["last"] = msgspec.to_builtins(self.last)
        return out


MAINTENANCE: ServiceKey[Maintenance] = ServiceKey("store.maintenance")


def _file_upkeep(tx: StoreTx) -> FileUpkeep:
    """The file's upkeep steps (the maintenance actor runs only where the backend has
    `Capability.FILE_UPKEEP`, `feature`)."""
    steps = tx.file_upkeep
    if steps is None:
        raise RuntimeError(f"the {tx.backend} store has no file upkeep steps")
    return steps


async def run_maintenance(upkeep: SqliteUpkeep, store: Store, lock: trio.Lock) -> MaintenanceReport:
    """One run: FTS5 merge, incremental vacuum (which gives back the pages the merge
    freed), then a checkpoint of it all (see the module doc). ``upkeep`` is this actor's
    own connection (checkpoints run outside the StoreWriter's transactions)."""
    started = time.perf_counter()
    async with lock:
        mode, tables = await trio.to_thread.run_sync(
            lambda: (upkeep.auto_vacuum(), upkeep.fts_tables())
        )
    steps: dict[str, int] = {}
    merged = True
    for table in tables:
        steps[table] = 0
        for _ in range(MAX_STEPS):
            steps[table] += 1
            if await store.write(
                lambda tx, table=table: _file_upkeep(tx).fts_merge_step(table, FTS_MERGE_PAGES),
                name="store.fts_merge",
            ):
                break
        else:
            merged = False
    freed, left = 0, 0
    for _ in range(MAX_STEPS if mode == "incremental" else 0):
        step_freed, left = await store.write(
            lambda tx: _file_upkeep(tx).vacuum_step(VACUUM_STEP_PAGES),
            name="store.incremental_vacuum",
        )
        freed += step_freed
        if left == 0 or step_freed == 0:
            break
    if mode != "incremental":
        async with lock:  # this actor's own connection, as the checkpoint's
            left = await trio.to_thread.run_sync(upkeep.free_pages)
    async with lock:
        point = await trio.to_thread.run_sync(upkeep.checkpoint)
    return MaintenanceReport(
        wal_frames=point.wal_frames,
        checkpointed=point.checkpointed,
        checkpoint_busy=point.busy,
        auto_vacuum=mode,
        pages_freed=freed,
        free_pages=left,
        fts_steps=steps,
        fts_merged=merged,
        seconds=round(time.perf_counter() - started, 3),
    )


async def _traced_run(
    upkeep: SqliteUpkeep, store: Store, handle: Maintenance, lock: trio.Lock
) -> MaintenanceReport:
    with trace.span(ACTOR, "maintenance") as extra:
        if faults.ACTIVE:
            await faults.hit("store.maintenance")
        report = await run_maintenance(upkeep, store, lock)
        extra.update(msgspec.to_builtins(report))
    handle.runs += 1
    handle.last = report
    return report


async def _flush_loop(
    upkeep: SqliteUpkeep, handle: Maintenance, lock: trio.Lock, period: float
) -> None:
    """Durability ``async``: a PASSIVE checkpoint every ``period`` seconds when anything
    was committed since the last complete one (``PRAGMA data_version`` tells)."""
    seen = None
    while True:
        await trio.sleep(period)
        async with lock:
            version = upkeep.data_version()
            if version == seen:
                continue
            point = await trio.to_thread.run_sync(upkeep.checkpoint)
        handle.flushes += 1
        seen = version if not point.busy and point.checkpointed == point.wal_frames else None


async def serve_maintenance(
    ctx: ChildContext,
    handle: Maintenance,
    store: Store,
    *,
    interval: float,
    wal_flush_ms: int,
    durability: str,
    busy_timeout_ms: int,
    tuning: connections.Tuning = connections.DEFAULT_TUNING,
    task_status: trio.TaskStatus[Maintenance] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Flush the WAL (durability ``async``) and run maintenance every ``interval``
    seconds or on request, until stopped.

    Error handling: a failed run (a fault, a database error) crashes the actor,
    which fails that request and lets its supervisor restart it; the store and
    its writer are not affected.
    """
    path: Path = store.path
    conn = await trio.to_thread.run_sync(
        lambda: db.connect(
            path, busy_timeout_ms=busy_timeout_ms, durability=durability, tuning=tuning
        )
    )
    upkeep = SqliteUpkeep(conn)
    lock = trio.Lock()
    try:
        task_status.started(handle)
        with ctx.cancel_on_shutdown(trio.CancelScope()):
            async with trio.open_nursery() as nursery:
                if durability != "sync":
                    nursery.start_soon(_flush_loop, upkeep, handle, lock, wal_flush_ms / 1000)
                await _serve_runs(ctx, upkeep, store, handle, lock, interval)
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(conn.close)


async def _serve_runs(
    ctx: ChildContext,
    upkeep: SqliteUpkeep,
    store: Store,
    handle: Maintenance,
    lock: trio.Lock,
    interval: float,
) -> None:
    due = trio.current_time() + interval
    while True:
        request: MaintenanceRequest | None = None
        with trio.move_on_at(due):
            request = await handle.mailbox.receive_channel.receive()
        match request:
            case RunMaintenance():
                if request.reply.done:
                    continue
                with ctx.serving(request.reply):
                    request.reply.set(await _traced_run(upkeep, store, handle, lock))
            case None:
                await _traced_run(upkeep, store, handle, lock)
                due = trio.current_time() + interval
