"""Full-text search: the text index of memories, entities and observations, and its queries.

The interface every store backend implements (`sqlite.fulltext`, `pg.fulltext`): arguments and
results are msgspec Structs or plain values, never rows, cursors or SQL.

Words match by stem (FTS5's ``porter`` tokenizer on SQLite; the ``english`` text search
configuration on PostgreSQL, which `stem.stem` reproduces), so the query planner
(`lexical.plan_terms`) and both backends agree on what a word is. A `TextQuery` holds plain
words, never query syntax: each backend quotes them in its own query language, so quotes,
``*``, ``-``, ``:``, ``&``, ``|``, ``!``, parentheses and ``AND``/``OR``/``NOT``/``NEAR`` in a
word are plain text. Scores are "larger is better" everywhere (``-bm25()`` on SQLite,
``ts_rank`` on PostgreSQL); the two backends' scores are not comparable with each other.

The index itself is kept current by the database (triggers on SQLite, generated ``tsvector``
columns on PostgreSQL): the only write here is `FullText.optimize_indexes`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import msgspec

from ..domain.stem import stem


class TextQuery(msgspec.Struct, frozen=True):
    """What a free-text query matches (see `lexical.plan_terms`).

    - ``terms``: the words matched, one per stem (a memory matching any of them matches);
    - ``words``: the query's words in order: two neighbours that are both among ``terms``
      also match as a short phrase (within `PROXIMITY` words), which scores again.
    """

    terms: list[str]
    words: list[str] = []

    def searchable(self) -> TextQuery:
        """This query without the words that hold a NUL character: no indexed word does (FTS5
        splits words there; PostgreSQL text cannot hold one), so they match nothing."""
        if not any("\x00" in w for w in (*self.terms, *self.words)):
            return self
        return TextQuery(
            [t for t in self.terms if "\x00" not in t], [w for w in self.words if "\x00" not in w]
        )

    def pairs(self) -> list[tuple[str, str]]:
        """The neighbouring query words (as written in ``words``) that are both among the
        terms, by distinct stems, first occurrence first: the phrases matched besides them."""
        kept = {stem(t) for t in self.terms}
        seen: list[tuple[str, str]] = []
        out: list[tuple[str, str]] = []
        for a, b in zip(self.words, self.words[1:], strict=False):
            sa, sb = stem(a), stem(b)
            if sa != sb and sa in kept and sb in kept and (sa, sb) not in seen:
                seen.append((sa, sb))
                out.append((a, b))
        return out


# Two query words next to each other also match as a phrase: at most this many words apart.
PROXIMITY = 4


class MemoryMatch(msgspec.Struct, frozen=True):
    """A memory the query matches and its relevance (larger is better)."""

    id: int
    score: float


class MemoryFilter(msgspec.Struct, frozen=True):
    """Which memories a ranking may return.

    - ``scope_ids``: a memory linked to one of these scopes, or to no scope at all, is visible;
    - ``repo_ids``: the repository scopes among them (a memory linked to one ranks first);
    - ``memory_type``: only memories of this type (compared without case), or any.
    """

    scope_ids: list[int]
    repo_ids: list[int] = []
    memory_type: str | None = None


class Candidate(msgspec.Struct, frozen=True):
    """A memory that passed a `MemoryFilter`, with what breaks ties between equal scores."""

    id: int
    in_repo: bool
    importance: float
    updated_at: float


class Visibility(msgspec.Struct, frozen=True):
    """The scopes a graph read sees: a row linked to one of ``scope_ids``, or to no scope at
    all, is visible; ``everything``: every row is (the reader sees every scope of the store)."""

    scope_ids: list[int]
    everything: bool = False


class FoundEntity(msgspec.Struct, frozen=True):
    """An entity a search found."""

    id: int
    name: str
    kind: str
    canonical_name: str


class FullTextReads(Protocol):
    """What a read transaction may ask of `FullText` (`ReadTx.fulltext`): nothing that writes."""

    def newest_memory_id(self) -> int:
        """The largest memory id (0 for an empty store): the query planner's store size."""
        ...

    def memory_frequencies(self, terms: Sequence[str]) -> dict[str, int] | None:
        """How many memories contain each term (by its stem; 0 if none), or None when this
        transaction cannot tell (a SQLite connection without the vocabulary table).

        Cheap, and allowed to be approximate (the planner only steers pruning with it):
        counts may lag edits on SQLite; PostgreSQL gives its planner's estimate.
        """
        ...

    def best_memories(self, query: TextQuery, low: int, limit: int) -> list[MemoryMatch]:
        """The ``limit`` memories from id ``low`` on that match ``query`` best (BM25 on
        SQLite, ``ts_rank`` on PostgreSQL), best first; no scope or type filter."""
        ...

    def seed_memories(self, query: TextQuery, low: int, limit: int) -> list[MemoryMatch]:
        """`best_memories` for the ranker's lexical seeds: with ``low`` > 0 on SQLite, scored
        inside the window only (the sum of the IDFs of the phrases each memory matches, the
        document frequencies estimated from the window), which spares FTS5 a scan of every
        doclist; empty when the index cannot be read (SQLite)."""
        ...

    def best_memories_filtered(
        self, query: TextQuery, low: int, allowed: MemoryFilter, limit: int
    ) -> list[MemoryMatch]:
        """The ``limit`` memories from id ``low`` on that match ``query`` and pass ``allowed``:
        repository memories first, then by score, then the newest id first."""
        ...

    def memory_candidates(self, ids: Sequence[int], allowed: MemoryFilter) -> list[Candidate]:
        """Those of ``ids`` that pass ``allowed`` (any number of ids; order not kept)."""
        ...

    def entities_with_word(self, prefix: str) -> list[int]:
        """Ids of the entities whose name or type has a word starting with ``prefix``
        (words compared without case), ascending."""
        ...

    def entities_containing(self, text: str) -> list[int]:
        """Ids of the entities whose name or type contains ``text`` anywhere (without case),
        ascending; a ``text`` shorter than 3 characters (a trigram) finds nothing."""
        ...

    def observations_with_word(self, prefix: str, visible: Visibility) -> dict[int, int]:
        """For each entity, how many of its visible observations have a word starting with
        ``prefix`` (entities with none are left out)."""
        ...

    def visible_entities(
        self, ids: Sequence[int], visible: Visibility, kind: str | None
    ) -> list[FoundEntity]:
        """Those of ``ids`` that are visible (and of type ``kind``, exactly, when given),
        ascending by id; any number of ids."""
        ...


class FullText(FullTextReads, Protocol):
    """Full-text search, in one transaction of the store (`StoreTx.fulltext`)."""

    def optimize_indexes(self) -> list[str]:
        """Compact the text indexes (a write transaction; the ``compact`` tool's): FTS5's
        ``optimize`` of each index on SQLite; on PostgreSQL the GIN indexes' pending lists
        merged into their trees, for the indexes this role owns (the others are left to
        autovacuum). Returns the names of the indexes compacted, sorted."""
        ...
