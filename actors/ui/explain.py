"""Why recall returned each memory, for the dashboard's Recall page.

The ranker answers (memory id, score) pairs; this module says, for each, what
the page can show about why it came, from what is stored:

- ``lexical``: the query words (by stem, as FTS5 matches them) found in its text;
- ``graph``: the query names an entity the memory mentions, or one a relation
  links to an entity the memory mentions (the path that carried the rank);
- ``semantic``: neither, in a semantic ranking: it came by embedding similarity.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..store.domain.documents import canonical_name
from ..store.domain.lexical import query_terms, query_words
from ..store.domain.stem import stem
from ..store.interfaces import ReadTx

# Longest entity name (in words) looked for in the query.
MAX_NAME_WORDS = 6
# Relations shown for a memory linked to an entity the query names.
MAX_LINKS = 3


def named_entities(tx: ReadTx, query: str) -> dict[int, str]:
    """Entities whose whole name occurs in ``query`` (id -> name)."""
    words = [w for w in query.split() if w]
    candidates = {
        canonical_name(" ".join(words[i : i + n]).strip(".,;:!?\"'()"))
        for n in range(1, MAX_NAME_WORDS + 1)
        for i in range(len(words) - n + 1)
    }
    candidates.discard("")
    if not candidates:
        return {}
    return tx.browse.entities_named(sorted(candidates))


def explain(
    tx: ReadTx, query: str, ids: Sequence[int], ranking: str
) -> dict[int, list[dict[str, Any]]]:
    """For each memory id: the reasons it matches ``query`` (see the module docstring)."""
    stems = {stem(t): t for t in query_terms(query)}
    named = named_entities(tx, query)
    out: dict[int, list[dict[str, Any]]] = {}
    for memory_id in ids:
        reasons: list[dict[str, Any]] = []
        content = tx.browse.memory_text(memory_id)
        if content is None:
            continue
        found = {stem(w) for w in query_words(content, frozenset())}
        matched = [word for s, word in stems.items() if s in found]
        if matched:
            reasons.append({"kind": "lexical", "terms": matched})
        mentions = tx.browse.mentions(memory_id)
        direct = [mentions[e] for e in mentions if e in named]
        if direct:
            reasons.append(
                {"kind": "graph", "path": direct, "why": "mentions an entity the query names"}
            )
        elif named and mentions:
            reasons.extend(
                {
                    "kind": "graph",
                    "path": [src, rel, dst],
                    "why": "related to an entity the query names",
                }
                for src, rel, dst in tx.browse.relations_between(
                    list(named), list(mentions), MAX_LINKS
                )
            )
        if not reasons and ranking == "semantic":
            reasons.append({"kind": "semantic", "why": "embedding similarity to the query"})
        out[memory_id] = reasons
    return out
