"""What an agent should know about this repository now, within a token budget.

`session_context` groups the visible memories for a session start: the
repository's conventions and decisions (by importance), the memories whose code
changed (stale), the recent ones, then the global tier. `prompt_context` is the
prompt-time recall: the memories a prompt matches lexically, kept only when the
best one covers `threshold` of the prompt's words (no noise on prompts memory
cannot help). Neither loads the embedding model: both read the store directly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...supervisors.context import AppContext
from ..anchors.anchoring import STALE, code_states
from ..memory.access import ranked_rows
from ..memory.handlers import estimate_tokens
from ..store.domain.lexical import FUNCTION_WORDS, query_words, search_memories, terms_of
from ..store.domain.memories import list_memories
from ..store.domain.scopes import GLOBAL
from ..store.domain.stem import stem
from ..store.interfaces import ReadTx
from ..store.tooling.runner import tool_context
from ..store.tooling.services import store_of

# Memory types that say how the repository is to be worked on: listed first.
GUIDING_TYPES = ("convention", "decision", "preference", "instruction", "rule", "pitfall")
# Memories read for a session start, at most (the newest first): the budget keeps fewer.
POOL = 400
# Characters of one memory shown, at most (the rest is behind ``memtrio show ID``).
MAX_LINE = 400
# Prompt-time recall: the lexical matches considered, and shown at most.
PROMPT_POOL = 10
PROMPT_SHOWN = 5


@dataclass
class Section:
    title: str
    lines: list[str] = field(default_factory=list)


@dataclass
class Context:
    """The chosen memories, grouped, and the tokens they take."""

    sections: list[Section]
    tokens: int = 0
    ids: list[int] = field(default_factory=list)

    def text(self, heading: str) -> str:
        """The sections as plain text under ``heading``; "" when nothing was chosen."""
        if not self.ids:
            return ""
        parts = [heading]
        for s in self.sections:
            if s.lines:
                parts.append(f"\n## {s.title}\n" + "\n".join(s.lines))
        return "\n".join(parts) + "\n"


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_LINE else flat[: MAX_LINE - 1] + "…"


def _line(m: dict[str, Any]) -> str:
    line = f"- #{m['id']} [{m['memory_type']}] {_short(m['content'])}"
    changed = [
        f"{a['path']}{':' + a['symbol'] if a.get('symbol') else ''} {a['status']}"
        for a in m.get("code", [])
        if a.get("status") in STALE
    ]
    if m.get("stale") and changed:
        line += f" (code changed: {', '.join(changed)})"
    return line


def _fill(groups: Sequence[tuple[str, Sequence[dict[str, Any]]]], max_tokens: int) -> Context:
    """The memories of ``groups`` in order, each once, while they fit in ``max_tokens``
    (a memory too long for what is left is skipped for the next ones)."""
    ctx = Context(sections=[])
    seen: set[int] = set()
    for title, rows in groups:
        section = Section(title)
        for m in rows:
            if m["id"] in seen:
                continue
            line = _line(m)
            cost = estimate_tokens(line)
            if ctx.tokens + cost > max_tokens:
                continue
            seen.add(m["id"])
            ctx.ids.append(m["id"])
            ctx.tokens += cost
            section.lines.append(line)
        ctx.sections.append(section)
    return ctx


async def session_context(app: AppContext, max_tokens: int) -> Context:
    """The repository's memories for a session start, grouped, within ``max_tokens``."""
    store = store_of(app)
    ctx, policy = tool_context(app), store.policy
    selection = policy.select(None)
    rows = await store.read(
        lambda tx: list_memories(tx, selection, None, POOL), name="context.list"
    )
    warnings: list[str] = []
    await code_states(ctx, policy, rows, warnings)
    repo = [m for m in rows if any(s != GLOBAL for s in m["scopes"])]
    tier = [m for m in rows if all(s == GLOBAL for s in m["scopes"])]

    def weight(m: dict[str, Any]) -> tuple[float, float]:
        return (-float(m["importance"]), -float(m["updated_at"]))

    guiding = sorted(
        (m for m in repo if m["memory_type"].lower() in GUIDING_TYPES and not m.get("stale")),
        key=weight,
    )
    stale = [m for m in repo if m.get("stale")]
    recent = sorted(repo, key=lambda m: m["updated_at"], reverse=True)
    tier = sorted(tier, key=weight)
    groups = [
        ("Conventions and decisions", guiding),
        ("Code changed since these were written (check before relying on them)", stale),
        ("Recent", recent),
        ("Global", tier),
    ]
    return _fill(groups, max_tokens)


def coverage(weights: dict[str, float], content: str) -> float:
    """The weighted share of the prompt's words (stem -> weight) that ``content`` holds."""
    total = sum(weights.values())
    if not total:
        return 0.0
    have = {stem(w) for w in query_words(content, FUNCTION_WORDS)}
    return sum(w for s, w in weights.items() if s in have) / total


def prompt_words(prompt: str) -> list[str]:
    """The prompt's distinct words, one per stem, function words dropped (none if only those)."""
    return terms_of([w for w in query_words(prompt, FUNCTION_WORDS) if w not in FUNCTION_WORDS])


def word_weights(tx: ReadTx, words: list[str]) -> dict[str, float]:
    """Each word's weight (by stem): its inverse document frequency in the store, so that a
    word most memories hold counts for little and one none holds for much."""
    counts = tx.fulltext.memory_frequencies(words) or {}
    n = tx.fulltext.newest_memory_id()
    return {stem(w): math.log(1 + (n + 1) / (counts.get(w, 0) + 0.5)) for w in words}


async def prompt_context(
    app: AppContext,
    prompt: str,
    threshold: float,
    max_tokens: int,
    selection: list[str] | None = None,
    shown: int = PROMPT_SHOWN,
) -> tuple[Context, float]:
    """The memories relevant to ``prompt`` within ``max_tokens``, and their relevance: the
    share of the prompt's words (weighted by `word_weights`) the best-covering match
    holds. Empty when that is under ``threshold``; else the ``shown`` best lexical
    matches (BM25 order).
    """
    store = store_of(app)
    chosen = selection if selection is not None else store.policy.select(None)
    words = prompt_words(prompt)
    if not words:
        return Context(sections=[]), 0.0

    def read(tx: ReadTx) -> tuple[list[dict[str, Any]], dict[str, float]]:
        ranked = search_memories(tx, prompt, chosen, None, PROMPT_POOL)
        return ranked_rows(tx, chosen, ranked), word_weights(tx, words)

    rows, weights = await store.read(read, name="context.prompt")
    best = max((coverage(weights, m["content"]) for m in rows), default=0.0)
    if best < threshold or best == 0.0:
        return Context(sections=[]), best
    return _fill([("Memories relevant to this prompt", rows[:shown])], max_tokens), best
