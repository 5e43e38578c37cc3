"""`interfaces.fulltext.FullText` on SQLite, in SQLite's dialect.

The indexes are FTS5 tables kept current by triggers (`schema`): ``memories_fts`` (memory
content, ``porter unicode61 remove_diacritics 2``: stemmed), ``entities_fts`` (entity names
and types, unstemmed, prefix indexes) and ``entities_trigram`` (the same, ``trigram``:
substrings). Every word reaches MATCH as an FTS5 string (inside double quotes, quotes
doubled), so no word is FTS5 syntax. Scores are ``-bm25()``.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from itertools import chain
from typing import TYPE_CHECKING

from ..domain.stem import stem
from ..interfaces.fulltext import (
    PROXIMITY,
    Candidate,
    FoundEntity,
    MemoryFilter,
    MemoryMatch,
    TextQuery,
    Visibility,
)
from .db import SQL_CHUNK, VOCAB_TABLE
from .errors import mapped
from .params import marks

if TYPE_CHECKING:  # numpy loads with the first windowed query, not with the CLI
    import numpy as np

# The FTS5 indexes `optimize_indexes` compacts (names from the schema, never from input).
INDEXES = ("entities_fts", "entities_trigram", "memories_fts")

# Document frequencies read from the vocabulary: (database file, newest memory id, stem) -> count.
FREQS_KEPT = 4096
_FREQS: dict[tuple[str, int, str], int] = {}


def quoted(word: str) -> str:
    """``word`` as one FTS5 string: plain text whatever it holds."""
    return '"' + word.replace('"', '""') + '"'


def phrases(query: TextQuery) -> list[str]:
    """The FTS5 phrases of ``query``: each term, then ``NEAR(a b, PROXIMITY)`` for each
    pair of neighbouring query words (`TextQuery.pairs`)."""
    query = query.searchable()
    parts = [quoted(t) for t in query.terms]
    parts += [f"NEAR({quoted(a)} {quoted(b)}, {PROXIMITY})" for a, b in query.pairs()]
    return parts


def match_expression(query: TextQuery) -> str:
    """An FTS5 MATCH expression: the `phrases` OR-ed."""
    return " OR ".join(phrases(query))


def _ids_sql(ids: Sequence[int]) -> str:
    """A literal id list (ints only, so nothing user-written reaches the SQL)."""
    return ",".join(str(int(i)) for i in ids)


def _memory_visible(allowed: MemoryFilter, column: str) -> str:
    inner = _ids_sql(allowed.scope_ids) or "NULL"
    return (
        f"(EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = {column} AND ms.scope_id IN ({inner}))"
        f" OR NOT EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = {column}))"
    )


def _in_repo(allowed: MemoryFilter, column: str) -> str:
    if not allowed.repo_ids:
        return "(1 = 0)"
    return (
        f"EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = {column}"
        f" AND ms.scope_id IN ({_ids_sql(allowed.repo_ids)}))"
    )


def _visible(table: str, col: str, alias: str, visible: Visibility) -> str:
    if visible.everything:
        return "(1 = 1)"
    inner = _ids_sql(visible.scope_ids) or "NULL"
    return (
        f"(EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id AND x.scope_id IN ({inner}))"
        f" OR NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id))"
    )


class SqliteFullText:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def newest_memory_id(self) -> int:
        with mapped():  # its callers fall back on the store's error (`lexical`)
            row = self.conn.execute("SELECT max(rowid) FROM memories").fetchone()
        return int(row[0] or 0)

    def memory_frequencies(self, terms: Sequence[str]) -> dict[str, int] | None:
        """From the connection's ``fts5vocab`` table (`db.VOCAB_TABLE`; the read connections
        have one). A count costs a scan of the term's whole doclist (``fts5vocab`` has no
        index): milliseconds for a word in 100,000 memories. Counts are kept per database
        and newest memory id (`_FREQS`), so they are read again once a memory is added."""
        conn = self.conn
        try:
            conn.execute(f"SELECT doc FROM {VOCAB_TABLE} LIMIT 0")  # this connection has one
            where = conn.execute("PRAGMA database_list").fetchone()[2]
            newest = self.newest_memory_id()
            out: dict[str, int] = {}
            for term in terms:
                key = (where, newest, stem(term))
                count = _FREQS.get(key) if where else None  # "": an in-memory database
                if count is None:
                    row = conn.execute(
                        f"SELECT doc FROM {VOCAB_TABLE} WHERE term = ?", (stem(term),)
                    ).fetchone()
                    count = int(row[0]) if row else 0
                    if len(_FREQS) >= FREQS_KEPT:
                        _FREQS.clear()
                    _FREQS[key] = count
                out[term] = count
            return out
        except sqlite3.OperationalError:
            return None

    def best_memories(self, query: TextQuery, low: int, limit: int) -> list[MemoryMatch]:
        if not query.searchable().terms:
            return []
        rows = self.conn.execute(
            "SELECT rowid, bm25(memories_fts) FROM memories_fts"
            " WHERE memories_fts MATCH ? AND rowid >= ? ORDER BY 2 LIMIT ?",
            (match_expression(query), low, limit),
        ).fetchall()
        return [MemoryMatch(r, -s) for r, s in rows]

    def seed_memories(self, query: TextQuery, low: int, limit: int) -> list[MemoryMatch]:
        if not query.searchable().terms:
            return []
        try:
            if low > 0:
                return self._window_scores(phrases(query), low, limit)
            rows = self.conn.execute(
                "SELECT rowid, -bm25(memories_fts) FROM memories_fts"
                " WHERE memories_fts MATCH ? ORDER BY rank LIMIT ?",
                (match_expression(query), limit),
            ).fetchall()
        except sqlite3.OperationalError:
            return []
        return [MemoryMatch(r, s) for r, s in rows]

    def _window_scores(self, parts: list[str], low: int, limit: int) -> list[MemoryMatch]:
        """The best ``limit`` memories from rowid ``low`` on, by the sum of the IDFs of the
        phrases each one matches (BM25 with every term frequency 1 and lengths average).

        FTS5's ``bm25()`` would count each phrase's memories over the *whole* store first
        (a scan of every doclist: 20-40 ms a query at 1,000,000 memories, whatever the rowid
        window); here each phrase is matched inside the window only and its document
        frequency estimated from the window's share of the store (about 1 ms). The same
        IDF as FTS5's: ``ln(1 + (N - n + 0.5) / (n + 0.5))``.
        """
        import numpy as np

        newest = self.newest_memory_id()
        window = max(newest - low + 1, 1)
        matched: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        for phrase in parts:
            rows = self.conn.execute(
                "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? AND rowid >= ?",
                (phrase, low),
            ).fetchall()
            if not rows:
                continue
            ids = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=len(rows))
            found = min(len(ids) * newest / window, newest)
            idf = math.log(1 + (newest - found + 0.5) / (found + 0.5))
            matched.append(ids)
            weights.append(np.full(len(ids), idf))
        if not matched:
            return []
        # Each memory's IDFs summed in phrase order (as one addition after another would),
        # in numpy: thousands of postings per phrase on a big store.
        rowids, inverse = np.unique(np.concatenate(matched), return_inverse=True)
        scores = np.bincount(inverse, weights=np.concatenate(weights))
        best = np.lexsort((-rowids, -scores))[:limit]  # best score first, then newest
        return [
            MemoryMatch(int(r), float(s)) for r, s in zip(rowids[best], scores[best], strict=True)
        ]

    def best_memories_filtered(
        self, query: TextQuery, low: int, allowed: MemoryFilter, limit: int
    ) -> list[MemoryMatch]:
        if not query.searchable().terms:
            return []
        # (memory_type, rowid) seeks in the small type index, not the memory rows.
        type_sql = (
            "AND EXISTS (SELECT 1 FROM memories t INDEXED BY memories_type"
            " WHERE t.memory_type = ? COLLATE NOCASE AND t.id = f.id)"
            if allowed.memory_type
            else ""
        )
        rows = self.conn.execute(
            f"""SELECT f.id, f.score FROM
                  (SELECT rowid AS id, bm25(memories_fts) AS score FROM memories_fts
                   WHERE memories_fts MATCH ? AND rowid >= ?) f
                WHERE {_memory_visible(allowed, "f.id")} {type_sql}
                ORDER BY {_in_repo(allowed, "f.id")} DESC, f.score ASC, f.id DESC LIMIT ?""",
            [
                match_expression(query),
                low,
                *([allowed.memory_type] if allowed.memory_type else []),
                limit,
            ],
        ).fetchall()
        return [MemoryMatch(r, -s) for r, s in rows]

    def memory_candidates(self, ids: Sequence[int], allowed: MemoryFilter) -> list[Candidate]:
        type_sql = "AND m.memory_type = ? COLLATE NOCASE" if allowed.memory_type else ""
        out: list[Candidate] = []
        for start in range(0, len(ids), SQL_CHUNK):
            chunk = [int(i) for i in ids[start : start + SQL_CHUNK]]
            rows = self.conn.execute(
                f"""SELECT m.id, {_in_repo(allowed, "m.id")}, m.importance, m.updated_at
                    FROM memories m WHERE m.id IN ({marks(len(chunk))})
                    AND {_memory_visible(allowed, "m.id")} {type_sql}""",
                [*chunk, *([allowed.memory_type] if allowed.memory_type else [])],
            ).fetchall()
            out += [Candidate(i, bool(t), imp, up) for i, t, imp, up in rows]
        return out

    def entities_with_word(self, prefix: str) -> list[int]:
        if not prefix or "\x00" in prefix:
            return []
        rows = self.conn.execute(
            "SELECT rowid FROM entities_fts WHERE entities_fts MATCH ?", (quoted(prefix) + "*",)
        )
        return sorted({int(r[0]) for r in rows})

    def entities_containing(self, text: str) -> list[int]:
        if len(text) < 3 or "\x00" in text:  # a trigram at least; no name holds a NUL
            return []
        rows = self.conn.execute(
            "SELECT rowid FROM entities_trigram WHERE entities_trigram MATCH ?", (quoted(text),)
        )
        return sorted({int(r[0]) for r in rows})

    def observations_with_word(self, prefix: str, visible: Visibility) -> dict[int, int]:
        if not prefix or "\x00" in prefix:
            return {}
        rows = self.conn.execute(
            f"""SELECT me.entity_id, count(*) FROM memories_fts f JOIN memories m ON m.id = f.rowid
                JOIN memory_entities me ON me.memory_id = m.id
                WHERE memories_fts MATCH ? AND m.memory_type = 'observation' COLLATE NOCASE
                AND {_visible("memory_scopes", "memory_id", "m", visible)}
                GROUP BY me.entity_id""",
            (quoted(prefix) + "*",),
        )
        return {int(e): int(n) for e, n in rows}

    def visible_entities(
        self, ids: Sequence[int], visible: Visibility, kind: str | None
    ) -> list[FoundEntity]:
        kind_sql, kind_params = ("AND e.kind = ?", [kind]) if kind is not None else ("", [])
        found: dict[int, FoundEntity] = {}
        for start in range(0, len(ids), SQL_CHUNK):
            chunk = [int(i) for i in ids[start : start + SQL_CHUNK]]
            for row in self.conn.execute(
                f"""SELECT e.id, e.name, e.kind, e.canonical_name FROM entities e
                    WHERE e.id IN ({marks(len(chunk))})
                    AND {_visible("entity_scopes", "entity_id", "e", visible)} {kind_sql}""",
                [*chunk, *kind_params],
            ):
                found[int(row[0])] = FoundEntity(int(row[0]), row[1], row[2], row[3])
        return [found[i] for i in sorted(found)]

    def optimize_indexes(self) -> list[str]:
        for index in INDEXES:
            self.conn.execute(f"INSERT INTO {index} ({index}) VALUES ('optimize')")
        return list(INDEXES)
