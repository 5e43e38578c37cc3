"""Code as a way into memory: ``recall``'s ``code`` argument.

The memories anchored to a path or symbol, to the symbols a path contains, and
to the files and symbols that import or call it within one hop of the code
index (`CodeService.near`) are candidates alongside the query's. They come
first, those anchored to the code itself before those anchored only to a file
that imports it; in each group those the query ranked too in the query's order,
then the others (newest first); the query's other results follow. Scores are
lifted to match that order.

Error handling: a ``code`` argument without the code feature or a session
repository is a `BadArgument` saying what is missing; with scopes that leave the
repository out it adds nothing (anchors are the repository's).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...protocol.errors import BadArgument
from ...supervisors.context import CallContext
from ..anchors.anchoring import no_repository, repo_of
from ..store.domain.scopes import ScopePolicy
from ..store.interfaces import ReadTx
from ..store.interfaces.anchors import Anchor
from ..store.tooling.services import store_of

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
    told = _Near(near)

    def op(tx: ReadTx) -> dict[int, int]:
        scope_ids = list(tx.scopes.ids([repo.scope]).values())
        if not scope_ids:
            return {}
        paths = sorted({p for p, _ in near})
        symbols = sorted({s for _, s in near if s})
        found = tx.anchors.at(paths, symbols, scope_ids)
        anchors = tx.anchors.of(found)
        # `at` matches a symbol's name in any file: keep the anchors of the pairs asked
        # for, each memory at its nearest anchor's distance.
        hops = {mid: told.hop(anchors.get(mid, [])) for mid in found}
        return {mid: hop for mid, hop in hops.items() if hop is not None}

    anchored = await store_of(ctx.app).read(op, name="recall.code")
    if not anchored:
        return ranked
    chosen = set(sorted(anchored, key=lambda mid: (anchored[mid], -mid))[:pool])  # nearest, newest
    if reasons is not None:
        for mid in chosen:
            why = (
                "anchored to",
                "anchored to the file that holds",
                "anchored to code that imports",
            )[anchored[mid]]
            reasons.setdefault(mid, []).insert(0, f"code: {why} {code.strip()!r}")
    return anchored_first(ranked, {mid: anchored[mid] for mid in chosen}, pool)


class _Near:
    """`CodeService.near`'s pairs told apart: the code asked for (a file with its symbols,
    or the symbols named and those nested in them) and the files that import it."""

    def __init__(self, near: Sequence[tuple[str, str]]) -> None:
        self.direct = {pair for pair in near if pair[1] or pair == near[0]}
        # A file asked for: any anchor in it; a symbol: a whole-file anchor of its file too.
        self.files = {path for path, symbol in self.direct if not symbol}
        self.holding = {path for path, _ in self.direct if path}
        self.importers = {path for path, symbol in near if not symbol and (path, symbol) != near[0]}

    def hop(self, anchors: Sequence[Anchor]) -> int | None:
        """0: an anchor is on the code asked for (the file asked for, or the symbol); 1: a
        whole-file anchor of the file that holds a symbol asked for (about that code, less
        precisely); 2: only on a file that imports it; None: neither."""
        if any(a.path in self.files or (a.path, a.symbol) in self.direct for a in anchors):
            return 0
        if any(not a.symbol and a.path in self.holding for a in anchors):
            return 1
        return 2 if any(a.path in self.importers for a in anchors) else None


def anchored_first(ranked: Ranked, hops: dict[int, int], pool: int) -> Ranked:
    """``ranked`` with the anchored memories first: those on the code asked for, then those
    on the whole file that holds it, then those on its importers; in each, the ones the query ranked in its order (their score lifted
    above every other), then the others (newest first) at the lowest lifted score. The
    scores stay in order."""
    scores = dict(ranked)
    top = max((abs(s) for _, s in ranked), default=0.0)
    step = 2 * top + 1.0  # more than the query scores' spread: each hop lifted above the next
    merged: Ranked = []
    for hop in sorted(set(hops.values())):
        lift = step * (max(hops.values()) - hop + 1)
        first = [(mid, scores[mid] + lift) for mid, _ in ranked if hops.get(mid) == hop]
        rest = sorted((m for m, h in hops.items() if h == hop and m not in scores), reverse=True)
        floor = min((s for _, s in first), default=lift)
        merged += [*first, *((mid, floor) for mid in rest)]
    return [*merged, *((m, s) for m, s in ranked if m not in hops)][: max(pool, len(ranked))]
