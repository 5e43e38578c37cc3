"""The store feature: the StoreWriter actor, its read pool, maintenance and (PostgreSQL) the
change listener. The memory tools are the memory feature's (`actors.memory.feature`)."""

from __future__ import annotations

import trio

from ...supervisors.context import AppContext, ServiceKey
from ...supervisors.supervisor import (
    ONE_FOR_ONE,
    PERMANENT,
    TEMPORARY,
    ChildContext,
    ChildSpec,
    Mailbox,
    Supervisor,
    supervisor_child,
)
from . import backends, connections
from .backend import Capability
from .domain.scopes import ScopePolicies, ScopePolicy
from .sqlite import db
from .sqlite.maintenance import MAINTENANCE, Maintenance, serve_maintenance
from .writer import STORE, Store, serve_store_writer

# The scope rules of each session's repository, made when the store is set up (the memory
# feature reads them for its session instructions).
POLICIES: ServiceKey[ScopePolicies] = ServiceKey("store.policies")


class _StoreFeature:
    name = "store"

    def setup(self, app: AppContext) -> StoreComponent:
        policy = ScopePolicy.for_directory(app.cwd)
        policies = ScopePolicies({app.cwd: policy.current})
        path = db.db_path(app.home, app.config.store.file)
        store = Store(
            path, policy, Mailbox("store"), policies, backends.load(app.config.store.url, path)
        )
        maintenance = Maintenance(Mailbox("store.maintenance"))
        app.publish(POLICIES, policies)  # set-up data, not an actor: the memory feature's
        if store.backend.has(Capability.FILE_UPKEEP):  # a server keeps its own database
            app.status_sections["maintenance"] = maintenance.status

        return StoreComponent(app, store, maintenance)


# The maintenance actor's own supervisor: a crash restarts it alone (never the store or
# the sessions); more than this many in the period and it stays down (see children()).
MAINTENANCE_RESTARTS = 5
MAINTENANCE_PERIOD = 60.0


class StoreComponent:
    """Owns the store handle (its mailbox and read pool) and the maintenance handle; its
    actors are the StoreWriter and, under a supervisor of its own, the maintenance actor."""

    def __init__(self, app: AppContext, store: Store, maintenance: Maintenance) -> None:
        self.app = app
        self.store = store
        self.maintenance = maintenance

    def children(self) -> list[ChildSpec]:
        app, store = self.app, self.store
        cfg = app.config.store

        async def start(
            ctx: ChildContext, *, task_status: trio.TaskStatus[Store] = trio.TASK_STATUS_IGNORED
        ) -> None:
            await serve_store_writer(
                ctx,
                store,
                busy_timeout_ms=cfg.busy_timeout_ms,
                durability=cfg.durability,
                read_connections=cfg.read_connections,
                tuning=connections.Tuning(cfg.cache_size_mb, cfg.mmap_size_mb),
                publish=lambda handle: app.publish(STORE, handle),
                task_status=task_status,
            )

        specs: list[ChildSpec] = [
            ChildSpec(
                "store",
                start,
                restart=PERMANENT,
                shutdown=10.0,
                mailboxes=[store.mailbox],
                why="owns the only write connection; every memory tool needs it, so it always comes back",
            ),
        ]
        backend = store.backend
        if backend.has(Capability.FILE_UPKEEP):  # a server (PostgreSQL) keeps its own database
            specs.append(
                supervisor_child(
                    self._maintenance_supervisor,
                    "store.maintenance",
                    restart=TEMPORARY,
                    mailboxes=[self.maintenance.mailbox],
                    on_ready=lambda: app.publish(MAINTENANCE, self.maintenance),
                    why=(
                        "upkeep (WAL flush, vacuum, FTS merge) restarted by its own one_for_one "
                        "supervisor; if it fails faster than that it stays down rather than "
                        "restarting the sessions after it (SQLite still checkpoints every 1000 pages)"
                    ),
                )
            )
        serve_changes = backend.change_listener()  # None: other processes' writes are not announced
        if serve_changes is not None:

            async def listen(
                ctx: ChildContext, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
            ) -> None:
                await serve_changes(ctx, store, task_status=task_status)

            specs.append(
                ChildSpec(
                    "store.listener",
                    listen,
                    restart=PERMANENT,
                    shutdown=2.0,
                    why="keeps this process's caches current with other processes' writes; "
                    "it reconnects itself, so a restart means a bug: bring it back",
                )
            )
        return specs

    def _maintenance_supervisor(self) -> Supervisor:
        app, store, handle = self.app, self.store, self.maintenance
        cfg = app.config.store

        async def start(
            ctx: ChildContext,
            *,
            task_status: trio.TaskStatus[Maintenance] = trio.TASK_STATUS_IGNORED,
        ) -> None:
            await serve_maintenance(
                ctx,
                handle,
                store,
                interval=cfg.maintenance_interval,
                wal_flush_ms=cfg.wal_flush_ms,
                durability=cfg.durability,
                busy_timeout_ms=cfg.busy_timeout_ms,
                tuning=connections.Tuning(cfg.cache_size_mb, cfg.mmap_size_mb),
                task_status=task_status,
            )

        child = ChildSpec(
            "maintenance",
            start,
            restart=PERMANENT,
            shutdown=5.0,
            why="periodic and on request; a crash loses one run, the next incarnation goes on",
        )
        return Supervisor(
            "store.maintenance",
            [child],
            strategy=ONE_FOR_ONE,
            max_restarts=MAINTENANCE_RESTARTS,
            period=MAINTENANCE_PERIOD,
        )


FEATURE = _StoreFeature()
