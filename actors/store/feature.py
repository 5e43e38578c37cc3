"""The memory-store feature: the StoreWriter actor, the nine memory tools, the scope instructions."""

from __future__ import annotations

import trio

from ...supervisors.context import AppContext, SessionView
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
from . import db
from .maintenance import MAINTENANCE, Maintenance, serve_maintenance
from .scopes import GLOBAL, ScopePolicies, ScopePolicy
from .tools import TOOLS
from .writer import STORE, Store, serve_store_writer


def where(scope: str, session: SessionView) -> str:
    """Where the session's default memory scope ``scope`` comes from, in a sentence or two."""
    root, source = session.root, session.root_source
    if source == "cwd":
        if scope == GLOBAL:
            return "This server was started outside a Git repository, so its default memory scope is `global`."
        return (
            f"Default memory scope: `{scope}` (the Git repository this server was started in); "
            'memories are written there unless you pass `scopes: ["global"]` for knowledge useful in every project.'
        )
    if root is not None and scope != GLOBAL:
        given = (
            "your client's MCP roots" if source == "roots" else 'initialize `_meta["memtrio/root"]`'
        )
        return (
            f"Default memory scope: `{scope}` (this session's repository {root}, from {given}); "
            'memories are written there unless you pass `scopes: ["global"]` for knowledge useful in every project.'
        )
    if root is not None:
        return f"This session's directory {root} is not inside a Git repository, so its default memory scope is `global`."
    if source == "roots":
        return (
            "This session's repository comes from your client's MCP roots (the first `file://` root inside a "
            "Git checkout), asked for once the session is initialized; `list_scopes` shows the current scope "
            "(`global` until a root inside a Git checkout is known)."
        )
    return (
        "This session has no repository (the client declared no MCP roots and passed no "
        '`_meta["memtrio/root"]` at initialize), so its default memory scope is `global`.'
    )


def instructions(scope: str, session: SessionView) -> str:
    return (
        "memtrio memory: `remember` what you learn (decisions, conventions, pitfalls) and `recall` it in later "
        f"sessions. {where(scope, session)} Reads cover the current repository plus `global`; use `list_scopes` "
        "and pass a scope name to `recall` or `inspect` to read another repository. Writes may only go to the "
        "current repository and `global`."
    )


class _StoreFeature:
    name = "store"

    def setup(self, app: AppContext) -> StoreComponent:
        policy = ScopePolicy.for_directory(app.cwd)
        policies = ScopePolicies({app.cwd: policy.current})
        url = app.config.store.url
        store = Store(
            db.db_path(app.home, app.config.store.file),
            policy,
            Mailbox("store"),
            policies,
            url=None if url == "sqlite" else url,
        )
        maintenance = Maintenance(Mailbox("store.maintenance"))
        app.add_tools(TOOLS)
        if store.url is None:  # PostgreSQL's own autovacuum keeps a PostgreSQL store
            app.status_sections["maintenance"] = maintenance.status

        async def scope_instructions(session: SessionView) -> str:
            return instructions(await policies.scope_of(session.root), session)

        app.session_instructions.append(scope_instructions)
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
                tuning=db.Tuning(cfg.cache_size_mb, cfg.mmap_size_mb),
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
        url = store.url
        if url is None:  # upkeep of the SQLite file (PostgreSQL runs its own autovacuum)
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
        if url is not None:
            try:
                from .pg.notify import serve_change_listener  # psycopg: PostgreSQL stores only
            except ImportError:  # the store says how to install the driver (backends)
                return specs

            async def listen(
                ctx: ChildContext, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
            ) -> None:
                await serve_change_listener(ctx, store, url, task_status=task_status)

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
                tuning=db.Tuning(cfg.cache_size_mb, cfg.mmap_size_mb),
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
