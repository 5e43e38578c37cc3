"""The memory-store feature: the StoreWriter actor, the nine memory tools, the scope instructions."""

from __future__ import annotations

import trio

from ...supervisors.context import AppContext
from ...supervisors.supervisor import PERMANENT, ChildContext, ChildSpec, Mailbox
from . import db
from .scopes import GLOBAL, ScopePolicy
from .tools import TOOLS
from .writer import STORE, Store, serve_store_writer


def instructions(policy: ScopePolicy) -> str:
    if policy.current == GLOBAL:
        where = "This server was started outside a Git repository, so its default memory scope is `global`."
    else:
        where = (
            f"Default memory scope: `{policy.current}` (the Git repository this server was started in); "
            'memories are written there unless you pass `scopes: ["global"]` for knowledge useful in every project.'
        )
    return (
        "memtrio memory: `remember` what you learn (decisions, conventions, pitfalls) and `recall` it in later "
        f"sessions. {where} Reads cover the current repository plus `global`; use `list_scopes` and pass a scope "
        "name to `recall` or `inspect` to read another repository. Writes may only go to the current repository "
        "and `global`."
    )


class _StoreFeature:
    name = "store"

    def setup(self, app: AppContext) -> StoreComponent:
        policy = ScopePolicy.for_directory(app.cwd)
        store = Store(db.db_path(app.home), policy, Mailbox("store"))
        app.add_tools(TOOLS)
        app.instructions.append(instructions(policy))
        return StoreComponent(app, store)


class StoreComponent:
    """Owns the store handle (its mailbox and read pool); its actor is the StoreWriter."""

    def __init__(self, app: AppContext, store: Store) -> None:
        self.app = app
        self.store = store

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
                publish=lambda handle: app.publish(STORE, handle),
                task_status=task_status,
            )

        return [
            ChildSpec(
                "store",
                start,
                restart=PERMANENT,
                shutdown=10.0,
                mailboxes=[store.mailbox],
                why="owns the only write connection; every memory tool needs it, so it always comes back",
            )
        ]


FEATURE = _StoreFeature()
