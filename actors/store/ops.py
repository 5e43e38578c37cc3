"""The store's SQL operations: synchronous functions of a connection.

Each public function here runs inside a transaction that its caller opened
(the StoreWriter for writes, the read pool for reads); none of them commits.
They are shared by the memory tools, the CLI, import/export and the benchmark
preloader, so every path writes rows the same way.

Embedding documents (what text is embedded for a row) are defined here too,
so the recall ranker embeds exactly what the store embeds:
`memory_document`, `entity_document`, `relation_document`.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...protocol.tools import ToolError
from . import limits
from .db import VOCAB_TABLE
from .ownership import Ownership
from .scopes import GLOBAL, ScopePolicy
from .stem import stem
from .writer import Change

# -- names and documents ---------------------------------------------------------


def now() -> float:
    return time.time()


def clean_name(name: str) -> str:
    return " ".join(name.split())


def canonical_name(name: str) -> str:
    """Entity identity: casefolded, whitespace collapsed."""
    return clean_name(name).casefold()


def memory_document(content: str) -> str:
    return content


def entity_document(name: str, kind: str) -> str:
    return name if kind == "entity" else f"{name} ({kind})"


def relation_document(source: str, relation_type: str, target: str) -> str:
    return f"{source} {relation_type.replace('_', ' ')} {target}"


# -- vectors --------------------------------------------------------------------


@dataclass
class Vec:
    """The embedding of one item to store: float32 bytes with the model that made it.

    ``data`` holds ``count`` vectors of ``dim`` float32 values back to back:
    the windows (chunks) of a text longer than the model's token limit, in
    order; a short text has one.
    """

    data: bytes
    dim: int
    model: str
    revision: str

    @property
    def count(self) -> int:
        return len(self.data) // (4 * self.dim) if self.dim > 0 else 0

    def chunk(self, i: int) -> bytes:
        size = 4 * self.dim
        return self.data[i * size : (i + 1) * size]


def vecs_of(result: Any) -> list[Vec]:
    """One `Vec` per text of an embedder result (``EmbedResult``: every window of the text)."""
    model = str(result.model)
    revision = str(result.revision)
    dim = int(result.vectors.shape[1])
    return [
        Vec(result.rows(i).astype("<f4").tobytes(), dim, model, revision)
        for i in range(len(result.truncated))
    ]


def put_vector(
    conn: sqlite3.Connection, kind: str, item_id: int, vec: Vec, replace: bool = True
) -> bool:
    """Store an item's vectors; with ``replace=False`` an existing set of the same model is kept.

    Chunk 0 goes to ``vectors``, the other windows to ``vector_chunks``
    (writing the ``vectors`` row deletes the item's old chunks: a trigger).
    """
    first = vec.chunk(0)
    if replace:
        conn.execute(
            "INSERT OR REPLACE INTO vectors (kind, item_id, model, revision, dim, vec) VALUES (?, ?, ?, ?, ?, ?)",
            (kind, item_id, vec.model, vec.revision, vec.dim, first),
        )
    else:
        cur = conn.execute(
            """INSERT INTO vectors (kind, item_id, model, revision, dim, vec) VALUES (?, ?, ?, ?, ?, ?)
               ON CONFLICT (kind, item_id) DO UPDATE SET model = excluded.model, revision = excluded.revision,
                   dim = excluded.dim, vec = excluded.vec
               WHERE vectors.model != excluded.model OR vectors.revision != excluded.revision""",
            (kind, item_id, vec.model, vec.revision, vec.dim, first),
        )
        if cur.rowcount == 0:
            return False
    if vec.count > 1:
        conn.executemany(
            "INSERT INTO vector_chunks (kind, item_id, chunk, model, revision, dim, vec) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (kind, item_id, i, vec.model, vec.revision, vec.dim, vec.chunk(i))
                for i in range(1, vec.count)
            ],
        )
    return True


def drop_vector(conn: sqlite3.Connection, kind: str, item_id: int) -> None:
    """Delete an item's vectors (its chunks go with the ``vectors`` row: a trigger)."""
    conn.execute("DELETE FROM vectors WHERE kind = ? AND item_id = ?", (kind, item_id))


def item_vectors(
    conn: sqlite3.Connection, kind: str, ids: Sequence[int], model: str, revision: str, dim: int
) -> dict[int, list[bytes]]:
    """The stored windows of ``ids`` under ``model``/``revision``, chunk 0 first.

    Chunks count only under a ``vectors`` row of the same model (a set is
    whole or absent).
    """
    out: dict[int, list[bytes]] = {}
    ids = list(ids)
    for start in range(0, len(ids), SQL_CHUNK):
        part = ids[start : start + SQL_CHUNK]
        marks = ",".join("?" * len(part))
        for item_id, blob in conn.execute(
            f"""SELECT item_id, vec FROM vectors
                WHERE kind = ? AND model = ? AND revision = ? AND dim = ? AND item_id IN ({marks})""",
            (kind, model, revision, dim, *part),
        ):
            out[item_id] = [blob]
        if not out:
            continue
        for item_id, blob in conn.execute(
            f"""SELECT c.item_id, c.vec FROM vector_chunks c
                WHERE c.kind = ? AND c.model = ? AND c.revision = ? AND c.dim = ? AND c.item_id IN ({marks})
                ORDER BY c.item_id, c.chunk""",
            (kind, model, revision, dim, *part),
        ):
            if item_id in out:
                out[item_id].append(blob)
    return out


# -- scopes ---------------------------------------------------------------------


def ensure_scope(conn: sqlite3.Connection, name: str) -> int:
    row = conn.execute("SELECT id FROM scopes WHERE name = ?", (name,)).fetchone()
    if row:
        return row[0]
    return conn.execute("INSERT INTO scopes (name) VALUES (?)", (name,)).lastrowid


def scope_ids(conn: sqlite3.Connection, names: Iterable[str]) -> dict[str, int]:
    """Ids of the scopes that exist (never creates one)."""
    names = list(names)
    if not names:
        return {}
    marks = ",".join("?" * len(names))
    return dict(
        conn.execute(f"SELECT name, id FROM scopes WHERE name IN ({marks})", names).fetchall()
    )


def memory_scope_names(conn: sqlite3.Connection, memory_id: int) -> list[str]:
    rows = conn.execute(
        "SELECT s.name FROM memory_scopes ms JOIN scopes s ON s.id = ms.scope_id WHERE ms.memory_id = ? ORDER BY s.name",
        (memory_id,),
    ).fetchall()
    return [r[0] for r in rows]


# -- entities and relations ------------------------------------------------------


@dataclass
class EntitySpec:
    name: str
    kind: str = "entity"


@dataclass
class RelationSpec:
    source: EntitySpec
    relation: str
    target: EntitySpec
    metadata: dict[str, Any] | None = None


def validate_entity(name: str, kind: str = "entity") -> EntitySpec:
    clean = clean_name(name)
    if not clean:
        raise ToolError("an entity name must not be empty")
    kind_clean = clean_name(kind) or "entity"
    return EntitySpec(clean, kind_clean)


def validate_relation_type(relation: str) -> str:
    clean = clean_name(relation)
    if not clean:
        raise ToolError("a relation type must not be empty (for example `depends_on`)")
    return clean


def find_entity(conn: sqlite3.Connection, name: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT id, name, kind FROM entities WHERE canonical_name = ?", (canonical_name(name),)
    ).fetchone()
    return {"id": row[0], "name": row[1], "kind": row[2]} if row else None


def upsert_entity(
    conn: sqlite3.Connection,
    spec: EntitySpec,
    scope_ids_: Sequence[int],
    ts: float,
    own: Ownership,
    warnings: list[str],
) -> tuple[int, bool]:
    """Create or reuse the entity and link it to ``scope_ids_``. Returns (id, created).

    An existing entity keeps its name. Its generic kind (``entity``) is
    refined by a specific one when the entity is owned here; an entity shared
    with a scope this server may not write keeps its kind, and a different
    kind asked for is reported in ``warnings`` (see `ownership`).
    """
    canon = canonical_name(spec.name)
    row = conn.execute(
        "SELECT id, name, kind FROM entities WHERE canonical_name = ?", (canon,)
    ).fetchone()
    if row:
        entity_id, name, kind = row
        created = False
        if spec.kind != "entity" and spec.kind != kind:
            foreign = own.foreign("entity", entity_id)
            if foreign:
                warnings.append(
                    own.kept(f"entity {name!r}", "kind", f"`{kind}`", f"`{spec.kind}`", foreign)
                )
            elif kind == "entity":
                conn.execute(
                    "UPDATE entities SET kind = ?, updated_at = ? WHERE id = ?",
                    (spec.kind, ts, entity_id),
                )
    else:
        entity_id = conn.execute(
            "INSERT INTO entities (name, canonical_name, kind, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
            (spec.name, canon, spec.kind, ts, ts),
        ).lastrowid
        created = True
    conn.executemany(
        "INSERT OR IGNORE INTO entity_scopes (entity_id, scope_id) VALUES (?, ?)",
        [(entity_id, sid) for sid in scope_ids_],
    )
    return entity_id, created


def relation_label(
    conn: sqlite3.Connection, source_id: int, relation_type: str, target_id: int
) -> str:
    names = dict(
        conn.execute("SELECT id, name FROM entities WHERE id IN (?, ?)", (source_id, target_id))
    )
    return f"relation {names.get(source_id)!r} -[{relation_type}]-> {names.get(target_id)!r}"


def upsert_relation(
    conn: sqlite3.Connection,
    source_id: int,
    relation_type: str,
    target_id: int,
    metadata: dict[str, Any] | None,
    scope_ids_: Sequence[int],
    ts: float,
    own: Ownership,
    warnings: list[str] | None,
) -> tuple[int, bool]:
    """Create or reuse the directed relation and link it to ``scope_ids_``. Returns (id, created).

    Given metadata is merged into an existing relation's when it is owned
    here. On a relation shared with a scope this server may not write, a
    metadata change is refused (`ownership.SharedRow`, before any change of
    the relation) or, with a ``warnings`` list, kept and reported there.
    """
    row = conn.execute(
        "SELECT id, metadata FROM relations WHERE source_id = ? AND relation_type = ? AND target_id = ?",
        (source_id, relation_type, target_id),
    ).fetchone()
    if row:
        relation_id, old = row
        created = False
        stored = json.loads(old or "{}")
        if not isinstance(stored, dict):  # an imported row may hold any JSON
            stored = {}
        merged = {**stored, **(metadata or {})}
        if merged != stored:
            foreign = own.foreign("relation", relation_id)
            if foreign:
                label = relation_label(conn, source_id, relation_type, target_id)
                if warnings is None:
                    raise own.refusal(label, "change its metadata", foreign)
                shown = json.dumps(stored, sort_keys=True)
                asked = json.dumps(merged, sort_keys=True)
                warnings.append(own.kept(label, "metadata", shown, asked, foreign))
            else:
                text = json.dumps(merged, sort_keys=True)
                limits.check_metadata_text(text, "merged metadata")
                conn.execute("UPDATE relations SET metadata = ? WHERE id = ?", (text, relation_id))
    else:
        relation_id = conn.execute(
            "INSERT INTO relations (source_id, target_id, relation_type, metadata, created_at) VALUES (?, ?, ?, ?, ?)",
            (source_id, target_id, relation_type, json.dumps(metadata or {}, sort_keys=True), ts),
        ).lastrowid
        created = True
    conn.executemany(
        "INSERT OR IGNORE INTO relation_scopes (relation_id, scope_id) VALUES (?, ?)",
        [(relation_id, sid) for sid in scope_ids_],
    )
    return relation_id, created


def missing_vectors(
    conn: sqlite3.Connection, entities: Sequence[EntitySpec], relations: Sequence[RelationSpec]
) -> tuple[set[str], set[tuple[str, str, str]]]:
    """Which entities (canonical names) and relations (canonical triples) have no vector yet."""
    ent_missing: set[str] = set()
    for spec in entities:
        canon = canonical_name(spec.name)
        row = conn.execute(
            "SELECT 1 FROM entities e JOIN vectors v ON v.kind = 'entity' AND v.item_id = e.id WHERE e.canonical_name = ?",
            (canon,),
        ).fetchone()
        if row is None:
            ent_missing.add(canon)
    rel_missing: set[tuple[str, str, str]] = set()
    for rel in relations:
        key = (canonical_name(rel.source.name), rel.relation, canonical_name(rel.target.name))
        row = conn.execute(
            """SELECT 1 FROM relations r JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
               JOIN vectors v ON v.kind = 'relation' AND v.item_id = r.id
               WHERE s.canonical_name = ? AND r.relation_type = ? AND t.canonical_name = ?""",
            key,
        ).fetchone()
        if row is None:
            rel_missing.add(key)
    return ent_missing, rel_missing


# -- memories -------------------------------------------------------------------


@dataclass
class NewMemory:
    content: str
    memory_type: str = "observation"
    importance: float = 0.0
    scopes: list[str] = field(default_factory=list)  # canonical scope names
    entities: list[EntitySpec] = field(default_factory=list)
    relations: list[RelationSpec] = field(default_factory=list)
    vector: Vec | None = None
    entity_vectors: dict[str, Vec] = field(default_factory=dict)  # canonical name -> vector
    relation_vectors: dict[tuple[str, str, str], Vec] = field(default_factory=dict)


def insert_memory(
    conn: sqlite3.Connection,
    new: NewMemory,
    ts: float | None = None,
    writable: Sequence[str] | None = None,
) -> tuple[dict[str, Any], list[Change]]:
    """Insert a memory with its scopes, entities, relations and vectors. Returns (result, changes).

    Entities and relations that exist are linked to the memory's scopes;
    those shared with a scope outside ``writable`` (the server's writable
    scopes; default: the memory's scopes and ``global``) keep their kind and
    metadata, and the result's ``warnings`` say so (see `ownership`).
    """
    ts = now() if ts is None else ts
    sids = [ensure_scope(conn, name) for name in new.scopes]
    own = Ownership(conn, writable if writable is not None else [*new.scopes, GLOBAL])
    warnings: list[str] = []
    memory_id = conn.execute(
        "INSERT INTO memories (content, memory_type, importance, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
        (new.content, new.memory_type, new.importance, ts, ts),
    ).lastrowid
    conn.executemany(
        "INSERT INTO memory_scopes (memory_id, scope_id) VALUES (?, ?)",
        [(memory_id, s) for s in sids],
    )
    changes: list[Change] = []
    if new.vector is not None:
        put_vector(conn, "memory", memory_id, new.vector)
    changes.append(_change("memory", memory_id, new.vector))
    entities_out: list[dict[str, Any]] = []
    seen_entities: dict[str, int] = {}

    def entity(spec: EntitySpec) -> int:
        canon = canonical_name(spec.name)
        if canon in seen_entities:
            return seen_entities[canon]
        entity_id, created = upsert_entity(conn, spec, sids, ts, own, warnings)
        seen_entities[canon] = entity_id
        conn.execute(
            "INSERT OR IGNORE INTO memory_entities (memory_id, entity_id) VALUES (?, ?)",
            (memory_id, entity_id),
        )
        vec = new.entity_vectors.get(canon)
        if vec is not None and put_vector(conn, "entity", entity_id, vec, replace=False):
            changes.append(_change("entity", entity_id, vec))
        elif created:
            changes.append(_change("entity", entity_id, None))
        entities_out.append(
            {"id": entity_id, "name": spec.name, "kind": spec.kind, "created": created}
        )
        return entity_id

    for spec in new.entities:
        entity(spec)
    relations_out: list[dict[str, Any]] = []
    for rel in new.relations:
        src = entity(rel.source)
        tgt = entity(rel.target)
        relation_id, created = upsert_relation(
            conn, src, rel.relation, tgt, rel.metadata, sids, ts, own, warnings
        )
        conn.execute(
            "INSERT OR IGNORE INTO memory_relations (memory_id, relation_id) VALUES (?, ?)",
            (memory_id, relation_id),
        )
        key = (canonical_name(rel.source.name), rel.relation, canonical_name(rel.target.name))
        vec = new.relation_vectors.get(key)
        if vec is not None and put_vector(conn, "relation", relation_id, vec, replace=False):
            changes.append(_change("relation", relation_id, vec))
        elif created:
            changes.append(_change("relation", relation_id, None))
        relations_out.append(
            {
                "id": relation_id,
                "source": rel.source.name,
                "relation": rel.relation,
                "target": rel.target.name,
                "created": created,
            }
        )
    result = {
        "id": memory_id,
        "scopes": list(new.scopes),
        "entities": entities_out,
        "relations": relations_out,
        "warnings": warnings,
    }
    return result, changes


def _change(kind: str, item_id: int, vec: Vec | None, deleted: bool = False) -> Change:
    if vec is None:
        return Change(kind=kind, id=item_id, deleted=deleted)  # type: ignore[arg-type]
    return Change(kind=kind, id=item_id, vector=vec.data, model=vec.model, revision=vec.revision)  # type: ignore[arg-type]


MEMORY_COLUMNS = (
    "id, content, memory_type, importance, created_at, updated_at, last_accessed_at, access_count"
)


def _memory_row(row: Sequence[Any]) -> dict[str, Any]:
    keys = (
        "id",
        "content",
        "memory_type",
        "importance",
        "created_at",
        "updated_at",
        "last_accessed_at",
        "access_count",
    )
    return dict(zip(keys, row, strict=True))


def get_memory(
    conn: sqlite3.Connection, memory_id: int, details: bool = True
) -> dict[str, Any] | None:
    row = conn.execute(
        f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ?", (memory_id,)
    ).fetchone()
    if row is None:
        return None
    memory = _memory_row(row)
    memory["scopes"] = memory_scope_names(conn, memory_id)
    if details:
        memory["entities"] = [
            {"id": r[0], "name": r[1], "kind": r[2]}
            for r in conn.execute(
                "SELECT e.id, e.name, e.kind FROM memory_entities me JOIN entities e ON e.id = me.entity_id WHERE me.memory_id = ? ORDER BY e.name",
                (memory_id,),
            )
        ]
        memory["relations"] = [
            {"id": r[0], "source": r[1], "relation": r[2], "target": r[3]}
            for r in conn.execute(
                """SELECT r.id, s.name, r.relation_type, t.name FROM memory_relations mr
                   JOIN relations r ON r.id = mr.relation_id
                   JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
                   WHERE mr.memory_id = ? ORDER BY r.id""",
                (memory_id,),
            )
        ]
    return memory


def visible(memory_scopes: Sequence[str], selection: Sequence[str]) -> bool:
    """Selected scopes see a memory in any of them; an unscoped (legacy) memory is seen everywhere."""
    return not memory_scopes or any(s in selection for s in memory_scopes)


def not_found(memory_id: int, selection: Sequence[str]) -> ToolError:
    where = ", ".join(f"`{s}`" for s in selection)
    return ToolError(
        f"memory {memory_id} not found in scopes {where} "
        "(to read another repository's memory, pass its scope in `scopes`; see list_scopes)"
    )


def writable_memory(
    conn: sqlite3.Connection,
    memory_id: int,
    policy: ScopePolicy,
    selection: Sequence[str],
    action: str = "modify",
) -> dict[str, Any]:
    """The memory, if visible in ``selection`` and owned here (every one of its scopes writable).

    Error handling: an unselected memory raises `not_found`; a memory shared
    with a scope this server may not write raises `ownership.SharedRow`.
    """
    memory = get_memory(conn, memory_id, details=False)
    if memory is None or not visible(memory["scopes"], selection):
        raise not_found(memory_id, selection)
    Ownership(conn, policy.writable).require(
        "memory", memory_id, f"memory {memory_id}", f"{action} memory {memory_id}"
    )
    return memory


def update_memory(
    conn: sqlite3.Connection,
    memory_id: int,
    policy: ScopePolicy,
    selection: Sequence[str],
    *,
    content: str | None,
    memory_type: str | None,
    importance: float | None,
    vector: Vec | None,
    embeddings_on: bool,
) -> tuple[dict[str, Any], list[Change]]:
    memory = writable_memory(conn, memory_id, policy, selection, "update")
    ts = now()
    sets: list[str] = []
    params: list[Any] = []
    changed: list[str] = []
    changes: list[Change] = []
    if content is not None and content != memory["content"]:
        sets.append("content = ?")
        params.append(content)
        changed.append("content")
    if memory_type is not None and memory_type != memory["memory_type"]:
        sets.append("memory_type = ?")
        params.append(memory_type)
        changed.append("memory_type")
    if importance is not None and importance != memory["importance"]:
        sets.append("importance = ?")
        params.append(importance)
        changed.append("importance")
    if sets:
        sets.append("updated_at = ?")
        params.append(ts)
        conn.execute(f"UPDATE memories SET {', '.join(sets)} WHERE id = ?", (*params, memory_id))
    if "content" in changed:
        if vector is not None:
            put_vector(conn, "memory", memory_id, vector)
        else:
            # Without an embedder the stale vector is dropped; the ranker re-embeds lazily.
            drop_vector(conn, "memory", memory_id)
        changes.append(_change("memory", memory_id, vector if embeddings_on else None))
    result = get_memory(conn, memory_id, details=False) or {}
    result["changed"] = changed
    return result, changes


def delete_memory(
    conn: sqlite3.Connection, memory_id: int, policy: ScopePolicy, selection: Sequence[str]
) -> tuple[dict[str, Any], list[Change]]:
    memory = writable_memory(conn, memory_id, policy, selection, "forget")
    conn.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
    return {"id": memory_id, "forgotten": True, "scopes": memory["scopes"]}, [
        _change("memory", memory_id, None, deleted=True)
    ]


# -- lexical search -----------------------------------------------------------

STOP_WORDS = frozenset(
    """a an and are as at be but by do does did for from has have how i if in into is it its me my no not of on
    or our so than that the their them then there these they this to was we were what when where which who why
    will with you your""".split()
)
MAX_QUERY_TOKENS = 32
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)  # letters and digits, like FTS5's unicode61

# Query-cost bounds for big stores (see `lexical_plan`):
# a word in more than COMMON_FRACTION of the memories is dropped when the query
# has a more selective word (its BM25 weight is small, its posting list long);
# when even the most selective word is that common and the words' posting lists
# add up to more than MAX_POSTINGS, only the newest memories (a window holding
# about MAX_POSTINGS postings) are ranked: all scores are then close and
# recency breaks the ties anyway.
COMMON_FRACTION = 0.2
MAX_POSTINGS = 20000
# The candidate window of lexical_search: the limit * CANDIDATE_FACTOR (at
# least MIN_CANDIDATES) best BM25 matches.
CANDIDATE_FACTOR = 5
MIN_CANDIDATES = 50
SQL_CHUNK = 500
# Two query words next to each other also match as NEAR(a b, PROXIMITY): at most
# this many words between them, a short phrase (see `match_expression`).
PROXIMITY = 4


def query_words(query: str, stop_words: frozenset[str] = STOP_WORDS) -> list[str]:
    """The words of a free-text query in order, lower-cased, diacritics removed, stop words dropped.

    Stop words are dropped only when another word remains. Repeats are kept
    (see `query_terms` for the distinct words); at most `MAX_QUERY_TOKENS`
    distinct words.
    """
    tokens = [
        # lower(), not casefold(): FTS5's unicode61 keeps "ß" (the vocabulary must match)
        "".join(
            c for c in unicodedata.normalize("NFKD", tok.lower()) if not unicodedata.combining(c)
        )
        for tok in _TOKEN.findall(query)
    ]
    tokens = [t for t in tokens if t]
    words = [t for t in tokens if t not in stop_words] or tokens
    allowed = set(list(dict.fromkeys(words))[:MAX_QUERY_TOKENS])
    return [w for w in words if w in allowed]


def terms_of(words: Sequence[str]) -> list[str]:
    """The distinct words of ``words`` (see `query_words`), one per stem, first occurrence first."""
    out: dict[str, str] = {}
    for word in words:
        out.setdefault(stem(word), word)
    return list(out.values())


def query_terms(query: str, stop_words: frozenset[str] = STOP_WORDS) -> list[str]:
    """The distinct words of `query_words`, one per stem, first occurrence first."""
    return terms_of(query_words(query, stop_words))


def match_expression(terms: Sequence[str], words: Sequence[str]) -> str:
    """An FTS5 MATCH expression: each term quoted, OR-ed, plus the proximity pairs.

    For every two words next to each other in ``words`` (the query's content
    words in order) that are both among ``terms``, ``NEAR("a" "b",
    PROXIMITY)`` is OR-ed in too: a memory where they occur close together
    scores both again, as in the sequential dependence model of IR (Metzler
    and Croft, 2005), so "model kits" ranks a memory about a model kit above
    one about a model train and a kitchen. Quoting makes FTS5 syntax (quotes,
    ``*``, ``-``, ``:``, parentheses, ``AND``/``OR``/``NOT``/``NEAR``) plain
    text.
    """
    kept = {stem(t) for t in terms}
    parts = [f'"{t}"' for t in terms]
    pairs: list[tuple[str, str]] = []
    for a, b in zip(words, words[1:], strict=False):
        sa, sb = stem(a), stem(b)
        if sa != sb and sa in kept and sb in kept and (sa, sb) not in pairs:
            pairs.append((sa, sb))
            parts.append(f'NEAR("{a}" "{b}", {PROXIMITY})')
    return " OR ".join(parts)


def doc_freqs(conn: sqlite3.Connection, terms: Sequence[str]) -> dict[str, int] | None:
    """Memories containing each term (by its stem; 0 if none), or None if this connection has no vocab table."""
    try:
        out = {}
        for term in terms:
            row = conn.execute(
                f"SELECT doc FROM {VOCAB_TABLE} WHERE term = ?", (stem(term),)
            ).fetchone()
            out[term] = row[0] if row else 0
        return out
    except sqlite3.OperationalError:
        return None


def lexical_plan(conn: sqlite3.Connection, query: str) -> tuple[str, int] | None:
    """(MATCH expression, lowest rowid to rank) for ``query``, or None when it has no words."""
    words = query_words(query)
    terms = terms_of(words)
    if not terms:
        return None
    freqs = doc_freqs(conn, terms)
    low = 0
    if freqs is not None:
        total = conn.execute("SELECT max(rowid) FROM memories").fetchone()[0] or 0
        common = COMMON_FRACTION * total
        selective = [t for t in terms if 0 < freqs[t] <= common]
        if selective:
            terms = [
                t for t in terms if freqs[t] <= common
            ]  # unknown (0) words stay: they cost nothing
        postings = sum(freqs[t] for t in terms)
        known = [freqs[t] for t in terms if freqs[t] > 0]
        if not selective and known and postings > MAX_POSTINGS:
            low = total - int(total * MAX_POSTINGS / postings)
    return match_expression(terms, words), low


def _visibility_sql(ids: Sequence[int], column: str = "m.id") -> str:
    inner = ",".join(str(int(i)) for i in ids) or "NULL"
    return (
        f"(EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = {column} AND ms.scope_id IN ({inner}))"
        f" OR NOT EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = {column}))"
    )


def _tier_sql(repo_ids: Sequence[int], column: str = "m.id") -> str:
    if not repo_ids:
        return "0"
    inner = ",".join(str(int(i)) for i in repo_ids)
    return f"EXISTS (SELECT 1 FROM memory_scopes ms WHERE ms.memory_id = {column} AND ms.scope_id IN ({inner}))"


def lexical_search(
    conn: sqlite3.Connection,
    query: str,
    selection: Sequence[str],
    memory_type: str | None,
    limit: int,
) -> list[tuple[int, float]]:
    """BM25 over memory content within the selected scopes, repository matches first.

    Ties on BM25 are broken by importance, then recency. The scope and
    memory_type filters apply before ranking, so unselected memories never
    take a place in the result. Scores are ``-bm25`` (higher is better).

    Cost: the common case ranks a small window of the best FTS5 matches and
    filters it (no scope or type lookups for the rest); when the filters leave
    too few, one pass ranks every match with the filters applied in SQL (scope
    links and the type index only, never the memory rows), then the window of
    the best is re-sorted with the tie-breakers.
    """
    plan = lexical_plan(conn, query)
    if plan is None:
        return []
    match, low = plan
    ids = scope_ids(conn, selection)
    repo_ids = [sid for name, sid in ids.items() if name != GLOBAL]
    window = max(limit * CANDIDATE_FACTOR, MIN_CANDIDATES)
    candidates = conn.execute(
        "SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ? AND rowid >= ? ORDER BY 2 LIMIT ?",
        (match, low, window),
    ).fetchall()
    rows = _filter_candidates(conn, candidates, ids, repo_ids, memory_type)
    enough = sum(r[1] for r in rows) >= limit if repo_ids else len(rows) >= limit
    if len(candidates) == window and not enough:
        # (memory_type, rowid) seeks in the small type index, not the memory rows.
        type_sql = (
            "AND EXISTS (SELECT 1 FROM memories t INDEXED BY memories_type"
            " WHERE t.memory_type = ? COLLATE NOCASE AND t.id = f.id)"
            if memory_type
            else ""
        )
        candidates = conn.execute(
            f"""SELECT f.id, f.score FROM
                    (SELECT rowid AS id, bm25(memories_fts) AS score FROM memories_fts
                     WHERE memories_fts MATCH ? AND rowid >= ?) f
                WHERE {_visibility_sql(list(ids.values()), "f.id")} {type_sql}
                ORDER BY {_tier_sql(repo_ids, "f.id")} DESC, f.score ASC, f.id DESC LIMIT ?""",
            [match, low, *([memory_type] if memory_type else []), window],
        ).fetchall()
        rows = _filter_candidates(conn, candidates, ids, repo_ids, memory_type)
    score = dict(candidates)
    rows.sort(key=lambda r: (-r[1], score[r[0]], -r[2], -r[3], -r[0]))
    return [(r[0], -score[r[0]]) for r in rows[:limit]]


def _filter_candidates(
    conn: sqlite3.Connection,
    candidates: Sequence[tuple[int, float]],
    ids: dict[str, int],
    repo_ids: Sequence[int],
    memory_type: str | None,
) -> list[tuple[int, int, float, float]]:
    """(id, tier, importance, updated_at) of the candidates that pass the scope and type filters."""
    type_sql = "AND m.memory_type = ? COLLATE NOCASE" if memory_type else ""
    rows: list[tuple[int, int, float, float]] = []
    for start in range(0, len(candidates), SQL_CHUNK):
        chunk = [c[0] for c in candidates[start : start + SQL_CHUNK]]
        rows += conn.execute(
            f"""SELECT m.id, {_tier_sql(repo_ids)}, m.importance, m.updated_at FROM memories m
                WHERE m.id IN ({",".join("?" * len(chunk))}) AND {_visibility_sql(list(ids.values()))} {type_sql}""",
            [*chunk, *([memory_type] if memory_type else [])],
        ).fetchall()
    return rows


def record_access(
    conn: sqlite3.Connection,
    kind: str,
    query: str,
    selection: Sequence[str],
    ranked: Sequence[tuple[int, float]],
    ts: float | None = None,
) -> list[dict[str, Any]]:
    """Count an access of each returned memory (still existing), log the call, return the rows.

    Rows come back repository matches first (stable), then in ranked order.
    """
    ts = now() if ts is None else ts
    rows: list[dict[str, Any]] = []
    seen: set[int] = set()
    for memory_id, score in ranked:
        if memory_id in seen:
            continue
        seen.add(memory_id)
        scopes = memory_scope_names(conn, memory_id)
        if not visible(scopes, selection):
            continue  # never return an unselected memory, whoever ranked it
        cur = conn.execute(
            "UPDATE memories SET access_count = access_count + 1, last_accessed_at = ? WHERE id = ?",
            (ts, memory_id),
        )
        if cur.rowcount == 0:
            continue  # deleted since it was ranked
        memory = get_memory(conn, memory_id, details=False)
        assert memory is not None
        memory["score"] = float(score)
        rows.append(memory)
    repos = {s for s in selection if s != GLOBAL}
    rows.sort(key=lambda m: 0 if repos.intersection(m["scopes"]) else 1)
    conn.execute(
        "INSERT INTO recall_log (ts, kind, query, scopes, ids, scores) VALUES (?, ?, ?, ?, ?, ?)",
        (
            ts,
            kind,
            query,
            json.dumps(list(selection)),
            json.dumps([m["id"] for m in rows]),
            json.dumps([m["score"] for m in rows]),
        ),
    )
    return rows


def list_memories(
    conn: sqlite3.Connection,
    selection: Sequence[str],
    memory_type: str | None,
    limit: int,
    offset: int = 0,
) -> list[dict[str, Any]]:
    ids = scope_ids(conn, selection)
    type_sql = "AND m.memory_type = ? COLLATE NOCASE" if memory_type else ""
    params: list[Any] = [memory_type] if memory_type else []
    params += [limit, offset]
    rows = conn.execute(
        f"SELECT {', '.join('m.' + c.strip() for c in MEMORY_COLUMNS.split(','))} FROM memories m "
        f"WHERE {_visibility_sql(list(ids.values()))} {type_sql} ORDER BY m.id DESC LIMIT ? OFFSET ?",
        params,
    ).fetchall()
    out = []
    for row in rows:
        memory = _memory_row(row)
        memory["scopes"] = memory_scope_names(conn, memory["id"])
        out.append(memory)
    return out


# -- graph ----------------------------------------------------------------------


def graph_paths(
    conn: sqlite3.Connection,
    entity: str,
    direction: str,
    max_depth: int,
    limit: int,
    selection: Sequence[str],
) -> dict[str, Any]:
    """Simple paths (no entity twice) of length 1..max_depth around ``entity``, breadth first."""
    start = find_entity(conn, entity)
    if start is None:
        raise ToolError(f"entity {entity!r} not found (entities are created by remember or relate)")
    ids = list(scope_ids(conn, selection).values())
    inner = ",".join(str(i) for i in ids) or "NULL"
    vis = (
        f"(EXISTS (SELECT 1 FROM relation_scopes rs WHERE rs.relation_id = r.id AND rs.scope_id IN ({inner}))"
        " OR NOT EXISTS (SELECT 1 FROM relation_scopes rs WHERE rs.relation_id = r.id))"
    )
    names: dict[int, tuple[str, str]] = {start["id"]: (start["name"], start["kind"])}

    def edges(node: int) -> list[tuple[int, int, str, int]]:
        """(relation id, source id, type, target id) touching node, in the asked direction."""
        out: list[tuple[int, int, str, int]] = []
        queries = []
        if direction in ("outgoing", "both"):
            queries.append("r.source_id = ?")
        if direction in ("incoming", "both"):
            queries.append("r.target_id = ?")
        for cond in queries:
            for rid, src, rtype, tgt, sname, skind, tname, tkind in conn.execute(
                f"""SELECT r.id, r.source_id, r.relation_type, r.target_id, s.name, s.kind, t.name, t.kind
                    FROM relations r JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
                    WHERE {cond} AND {vis} ORDER BY r.relation_type, r.id""",
                (node,),
            ):
                names[src] = (sname, skind)
                names[tgt] = (tname, tkind)
                out.append((rid, src, rtype, tgt))
        return out

    paths: list[dict[str, Any]] = []
    frontier: list[tuple[int, list[tuple[int, int, str, int]], frozenset[int]]] = [
        (start["id"], [], frozenset([start["id"]]))
    ]
    truncated = False
    cache: dict[int, list[tuple[int, int, str, int]]] = {}
    for depth in range(1, max_depth + 1):
        next_frontier = []
        for node, path, on_path in frontier:
            if node not in cache:
                cache[node] = edges(node)
            for edge in cache[node]:
                _, src, _, tgt = edge
                other = tgt if src == node else src
                if other in on_path:
                    continue  # a cycle: this path ends here
                if len(paths) >= limit:
                    truncated = True
                    break
                new_path = [*path, edge]
                paths.append(
                    {
                        "depth": depth,
                        "end": names[other][0],
                        "edges": [
                            {"source": names[s][0], "relation": t, "target": names[g][0]}
                            for _, s, t, g in new_path
                        ],
                    }
                )
                next_frontier.append((other, new_path, on_path | {other}))
            if truncated:
                break
        if truncated or not next_frontier:
            break
        frontier = next_frontier
    return {
        "entity": {"id": start["id"], "name": start["name"], "kind": start["kind"]},
        "direction": direction,
        "paths": paths,
        "truncated": truncated,
    }


# -- counts ---------------------------------------------------------------------


def counts(conn: sqlite3.Connection) -> dict[str, int]:
    one = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
    return {
        "memories": one("SELECT count(*) FROM memories"),
        "scopes": one("SELECT count(*) FROM scopes"),
        "entities": one("SELECT count(*) FROM entities"),
        "edges": one("SELECT count(*) FROM relations"),
        "vectors": one("SELECT count(*) FROM vectors"),
        "recall_log": one("SELECT count(*) FROM recall_log"),
    }


def scope_counts(conn: sqlite3.Connection) -> dict[str, int]:
    """Every stored scope with its number of memories (0 for scopes of entities only)."""
    rows = conn.execute(
        "SELECT s.name, count(ms.memory_id) FROM scopes s LEFT JOIN memory_scopes ms ON ms.scope_id = s.id GROUP BY s.id"
    ).fetchall()
    return dict(rows)
