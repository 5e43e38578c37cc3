"""``search_nodes``: entities whose name, type or observations contain every word of a query.

The matching runs through the full-text interface (``tx.fulltext``,
`interfaces.fulltext.FullText`); the rules (every word must match, the weights, the
ranking, the error for a query without words) are here.
"""

from __future__ import annotations

from collections import Counter

from ...protocol.errors import BadArgument
from ..store.domain.lexical import query_terms
from ..store.interfaces import ReadTx
from ..store.interfaces.fulltext import FoundEntity, FullTextReads, Visibility
from .lookup import Ent
from .records import JsonObject, entities_page
from .view import Scoped

NAME_WEIGHT = 3  # a word found in an entity's name or type counts as this many observations
SUBSTRING_FROM = 3  # characters: a word this long also matches inside a name or type


def search_nodes(
    tx: ReadTx,
    sc: Scoped,
    query: str,
    offset: int,
    limit: int,
    mode: str,
    entity_type: str | None,
) -> JsonObject:
    """Entities whose name, type or observations contain every word of ``query``.

    Each word matches as a prefix of a word (of a name or type, or of an
    observation) or, for words of `SUBSTRING_FROM`+ characters, anywhere inside a
    name or type; an entity matches when each word matches somewhere in it.
    Ranked by name/type matches (weight `NAME_WEIGHT` per word) plus matching
    observations, ties by id.

    Error handling: a query without words raises `BadArgument`.
    """
    terms = query_terms(query)
    if not terms:
        raise BadArgument(
            "search_nodes: the query has no words to search for; use read_graph to list entities"
        )
    ranked = ranked_entities(tx.fulltext, visibility(sc), terms, entity_type)
    chosen = [Ent(e.id, e.name, e.kind, e.canonical_name) for e in ranked[offset : offset + limit]]
    return entities_page(tx, sc, chosen, mode, len(ranked), offset)


def visibility(sc: Scoped) -> Visibility:
    """What ``sc`` sees, for the full-text interface."""
    return Visibility(scope_ids=list(sc.read_ids), everything=sc.sees_all)


def ranked_entities(
    ft: FullTextReads, visible: Visibility, terms: list[str], entity_type: str | None
) -> list[FoundEntity]:
    """The visible entities (of ``entity_type`` when given) every term matches, best first."""
    scores = _scores(ft, visible, terms)
    found = ft.visible_entities(list(scores), visible, entity_type)
    return sorted(found, key=lambda e: (-scores[e.id], e.id))


def _scores(ft: FullTextReads, visible: Visibility, terms: list[str]) -> Counter[int]:
    """The score of each entity every term matches (summed over the terms)."""
    scores: Counter[int] | None = None
    for term in terms:
        hits = hits_of(ft, visible, term)
        if scores is None:
            scores = hits
        else:
            scores = Counter({k: v + hits[k] for k, v in scores.items() if k in hits})
        if not scores:
            break
    return scores or Counter()


def hits_of(ft: FullTextReads, visible: Visibility, term: str) -> Counter[int]:
    """The entities one term matches: `NAME_WEIGHT` for the name or type, plus one per
    visible observation."""
    in_name = set(ft.entities_with_word(term))
    if len(term) >= SUBSTRING_FROM:  # found inside a name or type, too
        in_name.update(ft.entities_containing(term))
    hits: Counter[int] = Counter(dict.fromkeys(in_name, NAME_WEIGHT))
    for eid, n in ft.observations_with_word(term, visible).items():
        hits[eid] += n
    return hits


def term_hits(tx: ReadTx, sc: Scoped, term: str) -> Counter[int]:
    """`hits_of` in the transaction ``tx`` (the vectors' text ranking)."""
    return hits_of(tx.fulltext, visibility(sc), term)
