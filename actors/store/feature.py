"""The memory-store feature: the StoreWriter actor, the nine memory tools, the scope instructions."""

from __future__ import annotations

from typing import Any

import trio

from ...supervisors.supervisor import PERMANENT, ChildContext, ChildSpec, Mailbox
from . import db
from .scopes import GLOBAL, ScopePolicy
from .tools import TOOLS
from .writer import Store, serve_store_writer


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

    def __init__(self) -> None:
        self._stores: dict[int, Store] = {}

    def setup(self, app: Any) -> None:
        policy = ScopePolicy.for_directory(app.cwd)
        self._stores[id(app)] = Store(db.db_path(app.home), policy, Mailbox("store"))
        app.add_tools(TOOLS)
        app.instructions.append(instructions(policy))

    def children(self, app: Any) -> list[ChildSpec]:
        store = self._stores.pop(id(app))
        cfg = app.config.store

        def publish(handle: Store) -> None:
            app.services["store"] = handle

        async def start(ctx: ChildContext, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            await serve_store_writer(
                ctx,
                store,
                busy_timeout_ms=cfg.busy_timeout_ms,
                durability=cfg.durability,
                read_connections=cfg.read_connections,
                publish=publish,
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
