"""``review_stale`` and ``memtrio stale``: the repository's memories whose code has changed.

A page walks the repository's anchored memories in id order (`Anchors.anchored`),
checks their anchors against the working tree in one code call per batch, and
returns the stale ones (an anchor changed or deleted; a file anchor only where
the memory names no symbol of that file: `is_stale`), each with the structural
diff of its anchors' files from the commit they were anchored at
(`CodeService.anchor_diff`), so that an agent can ``update`` (re-anchoring it)
or ``forget`` it. Reading records no access.

Error handling: without the code feature or a session repository the call is a
`BadArgument` saying what is missing; a diff that cannot be computed (the commit
is gone: a rebase, a shallow clone) leaves ``diff`` saying so.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from ...protocol.errors import BadArgument, DomainError
from ...supervisors.context import CallContext
from ..anchors.anchoring import Repo, is_stale, repo_of, shown, states_of
from ..store.domain.memories import get_memory
from ..store.interfaces import StoreTx
from ..store.interfaces.anchors import Anchor
from ..store.tooling.services import policy_of, store_of
from .args import ReviewStaleArgs
from .results import ReviewStaleResult, StaleMemory, memory_result

BATCH = 64  # anchored memories checked per code call
MAX_CHECKED = 2048  # anchored memories one page checks, at most (then next_cursor)
DIFF_LINES = 40  # lines of one anchor file's diff
NO_REPOSITORY = (
    "review_stale lists the memories of the session's repository whose code changed, and this "
    "session has none: open the session in a Git checkout, with [code] enabled (memories of "
    "`global` have no code anchors)"
)


async def review_stale(ctx: CallContext, args: ReviewStaleArgs) -> ReviewStaleResult:
    store = store_of(ctx.app)
    policy = await policy_of(ctx)
    repo = await repo_of(ctx, policy)
    if repo is None:
        raise BadArgument(NO_REPOSITORY)
    scope_ids = await store.read(
        lambda tx: list(tx.scopes.ids([repo.scope]).values()), name="stale.scope"
    )
    found: list[dict[str, Any]] = []
    cursor, checked, more = args.cursor, 0, bool(scope_ids)
    while more and len(found) < args.limit and checked < MAX_CHECKED:
        page = await store.read(
            partial(_page, scope_ids=scope_ids, after=cursor), name="stale.page"
        )
        more = len(page) == BATCH
        states = await states_of(repo, {mid: anchors for mid, (_, anchors) in page.items()})
        for mid, (row, anchors) in page.items():
            cursor, checked = mid, checked + 1
            got = states.get(mid, [])
            if not is_stale(anchors, got):
                continue
            row["code"] = [shown(a, s) for a, s in zip(anchors, got, strict=True)]
            row["stale"] = True
            row["diff"] = await _diff(repo, anchors, DIFF_LINES)
            found.append(row)
            if len(found) >= args.limit:
                more = more or any(m > mid for m in page)
                break
    return ReviewStaleResult(
        memories=[memory_result(row, StaleMemory) for row in found],
        scope=repo.scope,
        checked=checked,
        next_cursor=cursor if more else None,
    )


async def stale_ids(ctx: CallContext) -> list[int]:
    """The ids of the session repository's stale memories (of its first `MAX_CHECKED`
    anchored ones); [] without a repository or the code feature. For the dashboard's filter."""
    repo = await repo_of(ctx, await policy_of(ctx))
    if repo is None:
        return []
    store = store_of(ctx.app)
    scope_ids = await store.read(
        lambda tx: list(tx.scopes.ids([repo.scope]).values()), name="stale.scope"
    )
    found: list[int] = []
    cursor, checked, more = 0, 0, bool(scope_ids)
    while more and checked < MAX_CHECKED:
        page = await store.read(
            partial(_page, scope_ids=scope_ids, after=cursor), name="stale.page"
        )
        more = len(page) == BATCH
        states = await states_of(repo, {mid: anchors for mid, (_, anchors) in page.items()})
        found += [mid for mid, got in states.items() if is_stale(page[mid][1], got)]
        checked += len(page)
        cursor = max(page, default=cursor)
    return sorted(found)


async def stale_diff(ctx: CallContext, memory_id: int) -> str:
    """The structural diff ``review_stale`` gives the memory ``memory_id``: each of its
    anchored files from the commit it was anchored at to the working tree ("" without a
    repository, the code feature or anchors). For the dashboard's view of a stale memory."""
    repo = await repo_of(ctx, await policy_of(ctx))
    if repo is None:
        return ""
    anchors = await store_of(ctx.app).read(
        lambda tx: tx.anchors.of([memory_id]).get(memory_id, []), name="stale.anchors"
    )
    return await _diff(repo, anchors, DIFF_LINES) if anchors else ""


def _page(
    tx: StoreTx, *, scope_ids: list[int], after: int, limit: int = BATCH
) -> dict[int, tuple[dict[str, Any], list[Anchor]]]:
    """The next ``limit`` anchored memories after ``after``: their rows and anchors."""
    ids = tx.anchors.anchored(scope_ids, after, limit)
    anchors = tx.anchors.of(ids)
    out: dict[int, tuple[dict[str, Any], list[Anchor]]] = {}
    for mid in ids:
        row = get_memory(tx, mid, details=False)
        if row is not None and anchors.get(mid):
            out[mid] = (row, anchors[mid])
    return out


async def _diff(repo: Repo, anchors: list[Anchor], limit: int) -> str:
    """The structural diff of each anchored file from its commit to the working tree."""
    parts: list[str] = []
    for commit, path in dict.fromkeys((a.commit, a.path) for a in anchors):
        if not commit:
            parts.append(f"{path}: no commit was recorded (not in Git when anchored)")
            continue
        try:
            text = await repo.service.anchor_diff(repo.root, commit, path, limit)
        except (DomainError, OSError) as exc:
            text = f"{path}: no diff from {commit[:12]} ({exc})"
        if text:
            parts.append(text)
    return "\n".join(parts)
