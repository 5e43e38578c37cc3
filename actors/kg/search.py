"""``search_nodes``: entities whose name, type or observations contain every word of a query."""

from __future__ import annotations

import sqlite3
from collections import Counter

from ...protocol.errors import BadArgument
from ..store import ops
from ..store.dialect import is_postgres
from ..store.pg import fts
from .lookup import OBS_TYPE_SQL, Ent, chunks, marks
from .reads import type_filter
from .records import JsonObject, entities_page
from .view import Scoped

NAME_WEIGHT = 3  # a word found in an entity's name or type counts as this many observations


def search_nodes(
    conn: sqlite3.Connection,
    sc: Scoped,
    query: str,
    offset: int,
    limit: int,
    mode: str,
    entity_type: str | None,
) -> JsonObject:
    """Entities whose name, type or observations contain every word of ``query``.

    Each word matches as a prefix of a word (FTS5 prefix queries over
    ``entities_fts`` for names and types, ``memories_fts`` for observations)
    or, for words of 3+ characters, anywhere inside a name or type (the
    trigram index ``entities_trigram``); an entity matches when each word
    matches somewhere in it.
    Ranked by name/type matches (weight 3 per word) plus matching observations.

    Error handling: a query without words raises `BadArgument`.
    """
    terms = ops.query_terms(query)
    if not terms:
        raise BadArgument(
            "search_nodes: the query has no words to search for; use read_graph to list entities"
        )
    scores = _scores(conn, sc, terms)
    ranked = sorted(
        _visible(conn, sc, list(scores), entity_type), key=lambda e: (-scores[e.id], e.id)
    )
    chosen = ranked[offset : offset + limit]
    return entities_page(conn, sc, chosen, mode, len(ranked), offset)


def _scores(conn: sqlite3.Connection, sc: Scoped, terms: list[str]) -> Counter[int]:
    """The score of each entity every term matches (summed over the terms)."""
    scores: Counter[int] | None = None
    for term in terms:
        hits = term_hits(conn, sc, term)
        if scores is None:
            scores = hits
        else:
            scores = Counter({k: v + hits[k] for k, v in scores.items() if k in hits})
        if not scores:
            break
    return scores or Counter()


def term_hits(conn: sqlite3.Connection, sc: Scoped, term: str) -> Counter[int]:
    """The entities one term matches: `NAME_WEIGHT` for the name or type, plus one per observation."""
    if is_postgres(conn):
        return _term_hits_pg(conn, sc, term)
    match = f'"{term}"*'
    hits: Counter[int] = Counter()
    in_name = {
        r[0]
        for r in conn.execute("SELECT rowid FROM entities_fts WHERE entities_fts MATCH ?", (match,))
    }
    if len(term) >= 3:  # the trigram index finds it inside a name or type, too
        in_name.update(
            r[0]
            for r in conn.execute(
                "SELECT rowid FROM entities_trigram WHERE entities_trigram MATCH ?",
                (f'"{term}"',),
            )
        )
    for eid in in_name:
        hits[eid] += NAME_WEIGHT
    for eid, n in conn.execute(
        f"""SELECT me.entity_id, count(*) FROM memories_fts f JOIN memories m ON m.id = f.rowid
            JOIN memory_entities me ON me.memory_id = m.id
            WHERE memories_fts MATCH ? AND {OBS_TYPE_SQL} AND {sc.memory()} GROUP BY me.entity_id""",
        (match,),
    ):
        hits[eid] += n
    return hits


def _term_hits_pg(conn: sqlite3.Connection, sc: Scoped, term: str) -> Counter[int]:
    """`term_hits` on PostgreSQL: prefix tsqueries and the trigram indexes (`store.pg.fts`)."""
    prefix = fts.prefix_query(term)
    in_name = {r[0] for r in conn.execute(fts.ENTITY_WORDS, (prefix,))}
    if len(term) >= 3:
        pattern = fts.like_pattern(term)
        in_name.update(r[0] for r in conn.execute(fts.ENTITY_SUBSTRING, (pattern, pattern)))
    hits: Counter[int] = Counter(dict.fromkeys(in_name, NAME_WEIGHT))
    for eid, n in conn.execute(
        f"""SELECT me.entity_id, count(*) FROM {fts.MEMORY_PREFIX} JOIN memories m ON m.id = f.id
            JOIN memory_entities me ON me.memory_id = m.id
            WHERE {OBS_TYPE_SQL} AND {sc.memory()} GROUP BY me.entity_id""",
        (prefix,),
    ):
        hits[eid] += n
    return hits


def _visible(
    conn: sqlite3.Connection, sc: Scoped, candidates: list[int], entity_type: str | None
) -> list[Ent]:
    """The candidates visible to ``sc`` (and of ``entity_type`` when given)."""
    tsql, tparams = type_filter(entity_type)
    ents: dict[int, Ent] = {}
    for part in chunks(candidates):
        for row in conn.execute(
            f"SELECT e.id, e.name, e.kind, e.canonical_name FROM entities e WHERE e.id IN ({marks(len(part))}) AND {sc.entity()} {tsql}",
            [*part, *tparams],
        ):
            ents[row[0]] = Ent(*row)
    return list(ents.values())
