"""Code as a way into memory: ``recall``'s ``code`` argument.

The memories anchored to a path or symbol, to the symbols a path contains, and
to the files and symbols that import or call it within one hop of the code
index (`CodeService.near`) are candidates alongside the query's. They come
first: those the query ranked too in the query's order, then the others
(newest first); the query's other results follow.

Error handling: a ``code`` argument without the code feature or a session
repository is a `BadArgument` saying what is missing; with scopes that leave the
repository out it adds nothing (anchors are the repository's).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...protocol.errors import BadArgument
from ...supervisors.context import CallContext
from ..anchors.anchoring import no_repository, repo_of
from ..store.interfaces import StoreTx
from ..store.scopes import ScopePolicy
from ..store.services import store_of

Ranked = list[tuple[int, float]]


async def code_candidates(
    ctx: CallContext,
    policy: ScopePolicy,
    selection: Sequence[str],
    code: str,
    ranked: Ranked,
    pool: int,
    reasons: dict[int, list[str]] | None,
) -> Ranked:
    """``ranked`` with the memories anchored near ``code`` first (at most ``pool`` of them)."""
    repo = await repo_of(ctx, policy)
    if repo is None:
        why = no_repository(repo, selection) or ""
        raise BadArgument(why.replace("`code` anchors need", "`code` needs"))
    if repo.scope not in selection:
        return ranked  # anchors are the repository's: none in the scopes searched
    near = await repo.service.near(repo.root, code.strip())
    if not near:
        return ranked
    pairs = set(near)
    files = {p for p, s in near if not s}
    paths = sorted({p for p, _ in near})
    symbols = sorted({s for _, s in near if s})

    def op(tx: StoreTx) -> list[int]:
        scope_ids = list(tx.scopes.ids([repo.scope]).values())
        if not scope_ids:
            return []
        found = tx.anchors.at(paths, symbols, scope_ids)
        anchors = tx.anchors.of(found)
        # `at` matches a symbol's name in any file: keep the anchors of the pairs asked for.
        return [
            mid
            for mid in found
            if any(a.path in files or (a.path, a.symbol) in pairs for a in anchors.get(mid, []))
        ]

    anchored = await store_of(ctx.app).read(op, name="recall.code")
    if not anchored:
        return ranked
    chosen = set(anchored[-pool:])
    scores = dict(ranked)
    top = max((s for _, s in ranked), default=1.0)
    boost = abs(top) + 1.0
    first = [(mid, scores[mid] + boost) for mid, _ in ranked if mid in chosen]
    rest = sorted(chosen - scores.keys(), reverse=True)  # newest first
    floor = min((s for _, s in first), default=boost)
    if reasons is not None:
        for mid in chosen:
            reasons.setdefault(mid, []).insert(0, f"code: anchored to or near {code.strip()!r}")
    merged = [*first, *((mid, floor) for mid in rest)]
    return [*merged, *((m, s) for m, s in ranked if m not in chosen)][: max(pool, len(ranked))]
