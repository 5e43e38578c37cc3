"""``memtrio stale [--json]`` and the code index for the memory commands that show anchors.

``memtrio stale`` runs the ``review_stale`` tool's handler in the current
directory's repository, page after page (`MAX_PAGES` at most), and prints each
stale memory with its anchors and diff. `with_code` starts the code feature
beside the store for ``list``, ``show``, ``search`` and ``stale``, so that their
memories show their anchors' statuses (its parser processes start only when a
status needs a parse).
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Collection
from typing import Any

import msgspec

from ...supervisors.commands import emit
from ...supervisors.context import AppContext, AppRunner
from ..store.tooling.runner import STORE_ONLY, run_store_command, tool_context
from .args import ReviewStaleArgs
from .stale import review_stale

HELP = (
    "list the current repository's memories whose code changed or was deleted, with the diff since"
)
MAX_PAGES = 1000  # pages of `review_stale` one command reads, at most


def with_code(run: AppRunner) -> AppRunner:
    """``run`` starting the code feature as well (anchors' statuses need its index)."""

    def wrapped(
        args: argparse.Namespace,
        body: Callable[[AppContext], Awaitable[int]],
        *,
        features: Collection[str] | None = None,
        extra_config: dict[str, dict[str, Any]] | None = None,
    ) -> int:
        wanted = {*(features if features is not None else STORE_ONLY), "code"}
        return run(args, body, features=wanted, extra_config=extra_config)

    return wrapped


def anchor_line(a: dict[str, Any]) -> str:
    """``path:symbol  status  (since ...)``, with where a moved anchor is now."""
    where = f"{a['path']}:{a['symbol']}" if a.get("symbol") else a["path"]
    status = a.get("status", "unchecked")
    moved = a.get("moved_to")
    if moved:
        to = f"{moved['path']}:{moved['symbol']}" if moved.get("symbol") else moved["path"]
        status = f"moved to {to}"
    return f"code:     {where}  {status}  (since {a['since']})"


def _human(memories: list[dict[str, Any]]) -> str:
    if not memories:
        return "no stale memories: every anchored memory's code is as it was"
    blocks = []
    for m in memories:
        lines = [f"#{m['id']} [{m['memory_type']}] {m['content'].splitlines()[0][:100]}"]
        lines += [anchor_line(a) for a in m.get("code", [])]
        if m.get("diff"):
            lines += ["    " + line for line in m["diff"].splitlines()]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def cmd_stale(args: argparse.Namespace, run: AppRunner) -> int:
    async def body(app: AppContext) -> int:
        ctx = tool_context(app)
        found: list[dict[str, Any]] = []
        cursor = 0
        for _ in range(MAX_PAGES):
            page = await review_stale(ctx, ReviewStaleArgs(limit=50, cursor=cursor))
            found += msgspec.to_builtins(page.memories)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        emit(args, found, _human)
        return 0

    return run_store_command(args, with_code(run), body)
