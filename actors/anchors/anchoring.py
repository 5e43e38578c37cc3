"""Code anchors of memories: which code a memory describes, and whether that code has changed.

Writing (`anchors_for`): ``remember``, ``update`` and the graph's observation
tools anchor a memory to the code given in their ``code`` argument
(`CodeService.resolve_targets`: a file or symbol that is not there is refused)
or, without it, to the paths and identifiers of its text that name exactly one
file or symbol of the session's repository (`CodeService.find_targets`). Each
anchor keeps the head commit and the time it was written (its ``since``).

Reading (`code_states`): the anchors of the memories a call returns, each
``fresh``, ``changed``, ``moved`` or ``deleted`` against the repository's
working tree (`CodeService.target_states`, after the code index's incremental
refresh). A memory with a changed or deleted anchor is ``stale`` (`is_stale`), except
that a file anchor does not count where the memory also names symbols of that
file: only those symbols do.

Anchors belong to a repository: only a memory in the session's repository scope
is anchored, and only its anchors are checked. Without the code feature or a
session repository, nothing is found or checked (an explicit ``code`` is
refused, saying why) and statuses are omitted.

Work: finding anchors in text is bounded per call (`Budget`): one deadline
(`FIND_WAIT`) and `FIND_CHARS` characters of text for all the texts of a call
(a ``remember``, or every observation of a graph call), each text read in a
worker thread in time linear in its length (`code.anchors.candidates`); texts
past the budget are stored without found anchors, with one warning.

Error handling: a bad explicit anchor is a `BadArgument` naming it (nothing is
written); a failure of the code index while *finding* anchors or computing
statuses is not the caller's fault: the memory is written without found anchors,
or answered without statuses, with a warning, and the next call computes them
again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from ...protocol.errors import BadArgument, DomainError
from ...supervisors import trace
from ...supervisors.context import CallContext
from ..code.anchors import MAX_TEXT, AnchorError, CodeTarget, TargetState
from ..code.checkout import checkout_root
from ..code.service import CODE, CodeService
from ..store.domain.memories import now
from ..store.domain.scopes import GLOBAL, ScopePolicy
from ..store.interfaces.anchors import Anchor
from ..store.tooling.services import store_of

ACTOR = "memory.anchors"
MAX_FOUND = 8  # anchors found in one text, at most
# Seconds a write waits for the session repository's code index when it looks for
# anchors in a text: the first write in a large repository builds the index (about
# 2,000 files a second of CPU); past this it is stored without found anchors, with a
# warning, and the index goes on from where it stopped at the next call.
FIND_WAIT = 10.0
# Characters of text one call searches for anchors, all its texts together (each text
# counts at most `code.anchors.MAX_TEXT`): the text of a `remember` fits whole, a graph
# call's observations up to this; the scan costs about a microsecond a character.
FIND_CHARS = 200_000
STALE = frozenset({"changed", "deleted"})  # statuses that make a memory stale

Wanted = Sequence[tuple[str, str]]  # explicit anchors: (path, symbol or "")


@dataclass
class Budget:
    """What one call may spend finding anchors in its texts: a deadline (trio time) and
    characters; texts it left unsearched are counted for the call's one warning."""

    deadline: float
    chars: int = FIND_CHARS
    skipped: int = 0

    @classmethod
    def start(cls) -> Budget:
        return cls(trio.current_time() + FIND_WAIT)

    def take(self, text: str) -> bool:
        """Whether ``text`` may be searched (and charge it), else count it as skipped."""
        cost = min(len(text), MAX_TEXT)
        if self.chars < cost or trio.current_time() >= self.deadline:
            self.skipped += 1
            return False
        self.chars -= cost
        return True

    def warn(self, warnings: list[str]) -> None:
        """Add the call's one warning about the texts it did not search, if any."""
        if self.skipped:
            warnings.append(
                f"code anchors were not looked for in {self.skipped} text(s): one call searches "
                f"at most {FIND_CHARS:,} characters within {FIND_WAIT:g} s; pass `code` to "
                "anchor them explicitly"
            )


@dataclass(frozen=True)
class Repo:
    """The session's repository as the code index sees it."""

    service: CodeService
    root: Path
    scope: str  # its memory scope (``repo:/...``)


async def repo_of(ctx: CallContext, policy: ScopePolicy) -> Repo | None:
    """The calling session's repository with the code feature running, or None (no
    code feature, no repository: anchors are neither found nor checked)."""
    service = ctx.app.find(CODE)
    if service is None or policy.current == GLOBAL:
        return None
    start = ctx.app.cwd if ctx.session is None else ctx.session.root
    if start is None:
        return None
    try:
        root = await checkout_root(None, start)
    except DomainError:
        return None
    return Repo(service, root, policy.current)


def no_repository(repo: Repo | None, scopes: Sequence[str]) -> str | None:
    """Why explicit anchors cannot be stored on a memory in ``scopes``, or None."""
    if repo is None:
        return (
            "`code` anchors need the session's repository and the code feature: open the session "
            "in a Git checkout with [code] enabled, or leave `code` out"
        )
    if repo.scope not in scopes:
        return (
            f"`code` anchors belong to a repository: the memory must be in `{repo.scope}` "
            "(anchors are not stored on a `global`-only memory); leave `code` out or add that scope"
        )
    return None


async def anchors_for(
    ctx: CallContext,
    policy: ScopePolicy,
    scopes: Sequence[str],
    text: str,
    wanted: Wanted | None,
    warnings: list[str],
    budget: Budget | None = None,
) -> list[Anchor]:
    """The anchors to store on a memory in ``scopes`` with ``text``: ``wanted`` (explicit,
    each checked) or those found in ``text`` (``wanted`` None), within ``budget`` (the
    call's; None: a budget of its own).

    Error handling: an explicit anchor that does not resolve, or explicit anchors
    without a repository, raise `BadArgument` (nothing is written); finding anchors
    that fails adds a warning and anchors nothing.
    """
    repo = await repo_of(ctx, policy)
    if wanted is not None and wanted:
        if (why := no_repository(repo, scopes)) is not None:
            raise BadArgument(why)
    if repo is None or repo.scope not in scopes or (wanted is not None and not wanted):
        return []
    if wanted is not None:
        targets = await resolve(repo, wanted)
    else:
        try:
            targets = await found(repo, text, warnings, budget)
        except (DomainError, OSError) as exc:
            trace.warning(ACTOR, "find_targets_failed", error=f"{type(exc).__name__}: {exc}")
            warnings.append(f"code anchors could not be found ({exc}); none were stored")
            return []
    return await stamped(repo, targets)


async def found(
    repo: Repo, text: str, warnings: list[str], budget: Budget | None = None
) -> list[CodeTarget]:
    """The targets named in ``text`` (`CodeService.find_targets`) within ``budget`` (the
    call's, which warns of what it skipped; None: one of its own): none when the budget
    is spent, or, with a warning, when the repository's code index is not ready by the
    budget's deadline."""
    if budget is None:
        budget = Budget.start()
        targets = await found(repo, text, warnings, budget)
        budget.warn(warnings)
        return targets
    if not budget.take(text):
        return []
    with trio.move_on_at(budget.deadline):
        return await repo.service.find_targets(repo.root, text, MAX_FOUND)
    trace.warning(ACTOR, "find_targets_waited", root=str(repo.root), seconds=FIND_WAIT)
    warnings.append(
        "code anchors were not looked for: the repository's code index is still being built "
        "(it goes on at the next call); pass `code` to anchor this memory explicitly"
    )
    return []


MAX_FOUND_TEXTS = 64  # texts of one graph call searched for anchors; the rest anchor only by `code`


async def text_anchors(
    ctx: CallContext,
    policy: ScopePolicy,
    items: Sequence[tuple[Sequence[str], Wanted | None]],
    warnings: list[str],
) -> dict[str, list[Anchor]]:
    """Anchors of the graph tools' observation texts, by text: each item's texts get its
    explicit anchors (``Wanted``) or those found in each text (the first `MAX_FOUND_TEXTS`).

    Error handling: as `anchors_for` (a bad explicit anchor refuses the whole call).
    """
    if not any(texts for texts, _ in items):
        return {}
    repo = await repo_of(ctx, policy)
    out: dict[str, list[Anchor]] = {}
    searched = 0
    budget = Budget.start()
    for texts, wanted in items:
        if wanted:
            if (why := no_repository(repo, [policy.current])) is not None:
                raise BadArgument(why)
            assert repo is not None
            anchors = await stamped(repo, await resolve(repo, wanted))
            out.update(dict.fromkeys(texts, anchors))
            continue
        if repo is None or wanted is not None:
            continue
        for text in dict.fromkeys(texts):
            if text in out or searched >= MAX_FOUND_TEXTS:
                continue
            searched += 1
            out[text] = await anchors_for(ctx, policy, [repo.scope], text, None, warnings, budget)
    budget.warn(warnings)
    return {text: anchors for text, anchors in out.items() if anchors}


async def update_anchors(
    ctx: CallContext,
    policy: ScopePolicy,
    current: dict[str, Any],
    content: str | None,
    wanted: Wanted | None,
    warnings: list[str],
) -> list[Anchor] | None:
    """The anchors an ``update`` of the memory ``current`` stores, or None to leave them.

    Re-anchored to the current code: ``wanted`` when given; else found in the new
    ``content``; else the stored anchors where their code is now (`reanchored`), or,
    with none stored, found in the memory's text. None: no repository (anchors kept).
    """
    scopes = current.get("scopes", [])
    repo = await repo_of(ctx, policy)
    if wanted is not None or content is not None:
        if repo is None and not wanted:
            return None
        return await anchors_for(
            ctx, policy, scopes, content or current["content"], wanted, warnings
        )
    if repo is None or repo.scope not in scopes:
        return None
    memory_id = int(current["id"])
    stored = await store_of(ctx.app).read(
        lambda tx: tx.anchors.of([memory_id]).get(memory_id, []), name="anchors.of"
    )
    try:
        if stored:
            return await reanchored(repo, stored)
        return await stamped(repo, await found(repo, current["content"], warnings))
    except (DomainError, OSError) as exc:
        trace.warning(ACTOR, "reanchor_failed", error=f"{type(exc).__name__}: {exc}")
        warnings.append(f"the code anchors could not be renewed ({exc}); they were kept")
        return None


async def resolve(repo: Repo, wanted: Wanted) -> list[CodeTarget]:
    """``wanted`` as code targets. Error handling: `BadArgument` with AnchorError's message."""
    try:
        return await repo.service.resolve_targets(repo.root, list(wanted))
    except AnchorError as exc:
        raise BadArgument(f"code: {exc}") from None


async def stamped(repo: Repo, targets: Iterable[CodeTarget]) -> list[Anchor]:
    """``targets`` as anchors written now, at the repository's head commit."""
    targets = list(dict.fromkeys(targets))
    if not targets:
        return []
    commit = await repo.service.head_commit(repo.root)
    ts = now()
    return [Anchor(t.path, t.symbol, t.kind, commit, t.digest, ts) for t in targets]


async def reanchored(repo: Repo, stored: Sequence[Anchor]) -> list[Anchor]:
    """The memory's ``stored`` anchors, re-anchored to the code where it is now: a moved
    one to its new place, a deleted one dropped, each with today's digest and commit."""
    states = await repo.service.target_states(repo.root, [target_of(a) for a in stored])
    wanted = list(dict.fromkeys((s.path, s.symbol) for s in states if s.status != "deleted"))
    targets: list[CodeTarget] = []
    for one in wanted:  # one at a time: a target gone meanwhile is dropped, not fatal
        try:
            targets += await repo.service.resolve_targets(repo.root, [one])
        except AnchorError:
            continue
    return await stamped(repo, targets)


def where(anchor: Anchor) -> tuple[str, str, str, str]:
    """What an anchor points at (its path, symbol, kind and digest), without when."""
    return (anchor.path, anchor.symbol, anchor.kind, anchor.digest)


def target_of(anchor: Anchor) -> CodeTarget:
    return CodeTarget(anchor.path, anchor.symbol, anchor.kind, anchor.digest)


def shown(anchor: Anchor, state: TargetState | None) -> dict[str, Any]:
    """One anchor as a result field (``code[i]``): where, what, since when, its status."""
    out: dict[str, Any] = {
        "path": anchor.path,
        "symbol": anchor.symbol,
        "kind": anchor.kind,
        "since": anchor.written_at,
        "commit": anchor.commit,
    }
    if state is not None:
        out["status"] = state.status
        if state.status == "moved":
            out["moved_to"] = {"path": state.path, "symbol": state.symbol}
    return out


async def states_of(repo: Repo, anchors: dict[int, list[Anchor]]) -> dict[int, list[TargetState]]:
    """The status of every anchor of ``anchors`` (memory id -> anchors), in one code call."""
    flat = [(mid, a) for mid, items in anchors.items() for a in items]
    states = await repo.service.target_states(repo.root, [target_of(a) for _, a in flat])
    out: dict[int, list[TargetState]] = {}
    for (mid, _), state in zip(flat, states, strict=True):
        out.setdefault(mid, []).append(state)
    return out


async def code_states(
    ctx: CallContext, policy: ScopePolicy, rows: Sequence[dict[str, Any]], warnings: list[str]
) -> None:
    """Add ``code`` (each anchor with its status) and ``stale`` to the ``rows`` of the
    session's repository that have anchors; the others are left as they are.

    Error handling: when the statuses cannot be computed (the code index failing),
    the anchors are shown without a status and ``warnings`` says why; the next
    call computes them again.
    """
    repo = await repo_of(ctx, policy)
    if repo is None:
        return
    mine = [r for r in rows if repo.scope in r.get("scopes", ())]
    if not mine:
        return
    ids = [int(r["id"]) for r in mine]
    anchors = await store_of(ctx.app).read(lambda tx: tx.anchors.of(ids), name="anchors.of")
    if not anchors:
        return
    try:
        states: dict[int, list[TargetState]] | None = await states_of(repo, anchors)
    except (DomainError, OSError) as exc:
        trace.warning(ACTOR, "target_states_failed", error=f"{type(exc).__name__}: {exc}")
        warnings.append(
            f"code statuses could not be computed ({exc}); they are computed again on the next call"
        )
        states = None
    for row in mine:
        items = anchors.get(int(row["id"]))
        if not items:
            continue
        got = states.get(int(row["id"])) if states is not None else None
        row["code"] = [shown(a, got[i] if got else None) for i, a in enumerate(items)]
        row["stale"] = bool(got) and is_stale(items, got or [])


def is_stale(anchors: Sequence[Anchor], states: Sequence[TargetState]) -> bool:
    """Whether a memory with ``anchors`` (and their ``states``, in the same order) is
    stale: one of its anchors changed or was deleted. A whole-file anchor does not count
    in a file where the memory also names symbols: the memory is about those symbols, and
    an edit elsewhere in the file (another function) leaves it as true as it was."""
    named = {a.path for a in anchors if a.symbol}
    return any(
        s.status in STALE
        for a, s in zip(anchors, states, strict=True)
        if a.symbol or a.path not in named
    )


def penalized(rows: list[dict[str, Any]], penalty: float, selection: Sequence[str]) -> None:
    """Lower each stale memory's score in ``rows`` by ``penalty`` (a share of it) and move it
    down past the following memories of its group (the repository's, then the others) that
    now score higher; the other memories keep their order, and no memory is dropped."""
    if penalty <= 0:
        return
    repos = {s for s in selection if s != GLOBAL}

    def group(row: dict[str, Any]) -> bool:
        return bool(repos.intersection(row.get("scopes", ())))

    for i in range(len(rows) - 1, -1, -1):
        row = rows[i]
        if not row.get("stale") or not isinstance(row.get("score"), int | float):
            continue
        row["score"] = row["score"] - abs(row["score"]) * penalty
        j = i
        while (
            j + 1 < len(rows)
            and group(rows[j + 1]) == group(row)
            and float(rows[j + 1]["score"]) > row["score"]
        ):
            rows[j] = rows[j + 1]
            j += 1
        rows[j] = row
