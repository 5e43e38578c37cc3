"""The store's SQLite schema, as forward-only versioned migrations.

`MIGRATIONS[i]` takes a database from version ``i`` to ``i + 1``; the version
lives in ``PRAGMA user_version``. Never edit a released migration: append one.

Conventions of the schema (the contract between the store, the recall ranker and
the knowledge-graph tools):

- memories: the narrative records; ``memory_type`` compares case-insensitively;
  times are Unix seconds (REAL). ``memories_fts`` is an external-content FTS5
  index over ``content`` kept in sync by triggers; since version 5 it stems
  words (``porter`` tokenizer; `stem` gives the same stems in Python).
- scopes: ``global`` or ``repo:/absolute/path``; a memory, an entity and a
  relation link to the scopes it belongs to (``*_scopes``).
- entities: one row per name, exactly as written (since version 7; case and
  spaces count, as in the reference servers); ``canonical_name`` (the name
  casefolded and whitespace-collapsed, not unique) serves the lookups that
  forgive case and spacing; ``kind`` is the entity type.
- relations: directed ``source_id -[relation_type]-> target_id``, unique per
  triple, with JSON ``metadata``.
- memory_entities / memory_relations: what a memory mentions (a knowledge-graph
  observation is a memory of type ``observation`` linked to its entity).
- vectors: one embedding per (kind, item_id) with the model id and revision that
  produced it; a vector of another model is treated as missing. Deleting the
  item deletes its vector (triggers). For a text longer than the model's token
  limit this is the vector of its first window (chunk 0); the other windows
  (chunks 1, 2, ...) live in ``vector_chunks`` with the same model and
  revision. Writing, replacing or deleting an item's ``vectors`` row deletes
  its chunks (triggers), so the chunks always belong to the current row: a
  writer stores the row first, then its chunks, in the same transaction. An
  item has a current vector set iff its ``vectors`` row is of the current model.
- entity_embeddings: the bring-your-own embedding of an entity (the vector
  tools, ``--vectors``): float32 little-endian ``vec`` of ``dim`` values, with
  the client's ``model`` label. Deleting the entity deletes it (a trigger).
  Unlike ``vectors`` (the local model's), nothing here is computed by memtrio.
- recall_log: every recall and inspect, with query, scopes, ranked ids and scores.
- memory_anchors (since version 8): a memory's code anchors, in the order they were
  set (``position``): the repository-relative ``path``, the ``symbol`` as the code
  index names it (``''``: the whole file), its ``kind``, the Git commit at write time
  (``git_commit``, ``''`` outside Git), the ``digest`` of its normalised text and
  ``written_at``. Deleting the memory deletes them (foreign key cascade). A memory's
  scopes are its anchors' scopes: nothing else scopes them.
- change_mark (since version 9): one row, ``seq``, moved by triggers on every change
  to a table an in-memory cache reads (`MARKED_CHANGES`); never lowered.
"""

from __future__ import annotations

import sqlite3

from ..schemas import MARKED_CHANGES, SchemaTooNew

SCHEMA_VERSION_1 = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE memories (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    content          TEXT NOT NULL,
    memory_type      TEXT NOT NULL DEFAULT 'observation',
    importance       REAL NOT NULL DEFAULT 0.0,
    created_at       REAL NOT NULL,
    updated_at       REAL NOT NULL,
    last_accessed_at REAL,
    access_count     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX memories_type ON memories (memory_type COLLATE NOCASE);

CREATE TABLE scopes (
    id   INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);

CREATE TABLE memory_scopes (
    memory_id INTEGER NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    scope_id  INTEGER NOT NULL REFERENCES scopes (id),
    PRIMARY KEY (memory_id, scope_id)
) WITHOUT ROWID;
CREATE INDEX memory_scopes_scope ON memory_scopes (scope_id, memory_id);

CREATE TABLE entities (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    name           TEXT NOT NULL,
    canonical_name TEXT NOT NULL UNIQUE,
    kind           TEXT NOT NULL DEFAULT 'entity',
    created_at     REAL NOT NULL,
    updated_at     REAL NOT NULL
);
CREATE INDEX entities_kind ON entities (kind);

CREATE TABLE entity_scopes (
    entity_id INTEGER NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    scope_id  INTEGER NOT NULL REFERENCES scopes (id),
    PRIMARY KEY (entity_id, scope_id)
) WITHOUT ROWID;
CREATE INDEX entity_scopes_scope ON entity_scopes (scope_id, entity_id);

CREATE TABLE relations (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    source_id     INTEGER NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    target_id     INTEGER NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    relation_type TEXT NOT NULL,
    metadata      TEXT NOT NULL DEFAULT '{}',
    created_at    REAL NOT NULL,
    UNIQUE (source_id, relation_type, target_id)
);
CREATE INDEX relations_target ON relations (target_id);
CREATE INDEX relations_type ON relations (relation_type);

CREATE TABLE relation_scopes (
    relation_id INTEGER NOT NULL REFERENCES relations (id) ON DELETE CASCADE,
    scope_id    INTEGER NOT NULL REFERENCES scopes (id),
    PRIMARY KEY (relation_id, scope_id)
) WITHOUT ROWID;
CREATE INDEX relation_scopes_scope ON relation_scopes (scope_id, relation_id);

CREATE TABLE memory_entities (
    memory_id INTEGER NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    entity_id INTEGER NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    PRIMARY KEY (memory_id, entity_id)
) WITHOUT ROWID;
CREATE INDEX memory_entities_entity ON memory_entities (entity_id, memory_id);

CREATE TABLE memory_relations (
    memory_id   INTEGER NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    relation_id INTEGER NOT NULL REFERENCES relations (id) ON DELETE CASCADE,
    PRIMARY KEY (memory_id, relation_id)
) WITHOUT ROWID;
CREATE INDEX memory_relations_relation ON memory_relations (relation_id, memory_id);

CREATE VIRTUAL TABLE memories_fts USING fts5 (
    content,
    content = 'memories',
    content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER memories_fts_update AFTER UPDATE OF content ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO memories_fts (rowid, content) VALUES (new.id, new.content);
END;

CREATE TABLE vectors (
    kind     TEXT NOT NULL CHECK (kind IN ('memory', 'entity', 'relation')),
    item_id  INTEGER NOT NULL,
    model    TEXT NOT NULL,
    revision TEXT NOT NULL,
    dim      INTEGER NOT NULL,
    vec      BLOB NOT NULL,
    PRIMARY KEY (kind, item_id)
) WITHOUT ROWID;
CREATE TRIGGER memories_vector_delete AFTER DELETE ON memories BEGIN
    DELETE FROM vectors WHERE kind = 'memory' AND item_id = old.id;
END;
CREATE TRIGGER entities_vector_delete AFTER DELETE ON entities BEGIN
    DELETE FROM vectors WHERE kind = 'entity' AND item_id = old.id;
END;
CREATE TRIGGER relations_vector_delete AFTER DELETE ON relations BEGIN
    DELETE FROM vectors WHERE kind = 'relation' AND item_id = old.id;
END;

CREATE TABLE recall_log (
    id     INTEGER PRIMARY KEY,
    ts     REAL NOT NULL,
    kind   TEXT NOT NULL,
    query  TEXT NOT NULL,
    scopes TEXT NOT NULL,
    ids    TEXT NOT NULL,
    scores TEXT NOT NULL
);
"""

# Version 2 (knowledge graph): an external-content FTS5 index over entity names
# and types, kept by triggers, so search_nodes matches names and types by word
# and prefix; observations are memories and already live in memories_fts.
SCHEMA_VERSION_2 = """
CREATE VIRTUAL TABLE entities_fts USING fts5 (
    name,
    kind,
    content = 'entities',
    content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
INSERT INTO entities_fts (entities_fts) VALUES ('rebuild');
CREATE TRIGGER entities_fts_insert AFTER INSERT ON entities BEGIN
    INSERT INTO entities_fts (rowid, name, kind) VALUES (new.id, new.name, new.kind);
END;
CREATE TRIGGER entities_fts_delete AFTER DELETE ON entities BEGIN
    INSERT INTO entities_fts (entities_fts, rowid, name, kind) VALUES ('delete', old.id, old.name, old.kind);
END;
CREATE TRIGGER entities_fts_update AFTER UPDATE OF name, kind ON entities BEGIN
    INSERT INTO entities_fts (entities_fts, rowid, name, kind) VALUES ('delete', old.id, old.name, old.kind);
    INSERT INTO entities_fts (rowid, name, kind) VALUES (new.id, new.name, new.kind);
END;
"""

# Version 3 (knowledge graph): a trigram FTS5 index over entity names and
# types, so a word of a search matches inside a name (`Service` finds
# `DatabaseService`), as the reference memory server's substring search does.
SCHEMA_VERSION_3 = """
CREATE VIRTUAL TABLE entities_trigram USING fts5 (
    name,
    kind,
    content = 'entities',
    content_rowid = 'id',
    tokenize = 'trigram'
);
INSERT INTO entities_trigram (entities_trigram) VALUES ('rebuild');
CREATE TRIGGER entities_trigram_insert AFTER INSERT ON entities BEGIN
    INSERT INTO entities_trigram (rowid, name, kind) VALUES (new.id, new.name, new.kind);
END;
CREATE TRIGGER entities_trigram_delete AFTER DELETE ON entities BEGIN
    INSERT INTO entities_trigram (entities_trigram, rowid, name, kind) VALUES ('delete', old.id, old.name, old.kind);
END;
CREATE TRIGGER entities_trigram_update AFTER UPDATE OF name, kind ON entities BEGIN
    INSERT INTO entities_trigram (entities_trigram, rowid, name, kind) VALUES ('delete', old.id, old.name, old.kind);
    INSERT INTO entities_trigram (rowid, name, kind) VALUES (new.id, new.name, new.kind);
END;
"""

# Version 4 (chunked embeddings): a text longer than the model's token limit is
# embedded as several overlapping windows. Chunk 0 stays in ``vectors`` (so every
# reader of one vector per item keeps working); chunks 1.. go here, with the
# model and revision of their chunk 0. Memory vectors written before this
# version cover only the first window of a long text: those of memories over
# 254 characters (the shortest text that can exceed 256 tokens) are dropped, so
# `memtrio reembed` (or recall's lazy re-embedding) stores them with all chunks.
SCHEMA_VERSION_4 = """
CREATE TABLE vector_chunks (
    kind     TEXT NOT NULL CHECK (kind IN ('memory', 'entity', 'relation')),
    item_id  INTEGER NOT NULL,
    chunk    INTEGER NOT NULL CHECK (chunk >= 1),
    model    TEXT NOT NULL,
    revision TEXT NOT NULL,
    dim      INTEGER NOT NULL,
    vec      BLOB NOT NULL,
    PRIMARY KEY (kind, item_id, chunk)
) WITHOUT ROWID;
CREATE TRIGGER vectors_chunks_insert AFTER INSERT ON vectors BEGIN
    DELETE FROM vector_chunks WHERE kind = new.kind AND item_id = new.item_id;
END;
CREATE TRIGGER vectors_chunks_update AFTER UPDATE ON vectors BEGIN
    DELETE FROM vector_chunks WHERE kind = old.kind AND item_id = old.item_id;
END;
CREATE TRIGGER vectors_chunks_delete AFTER DELETE ON vectors BEGIN
    DELETE FROM vector_chunks WHERE kind = old.kind AND item_id = old.item_id;
END;
CREATE TRIGGER memories_chunks_delete AFTER DELETE ON memories BEGIN
    DELETE FROM vector_chunks WHERE kind = 'memory' AND item_id = old.id;
END;
CREATE TRIGGER entities_chunks_delete AFTER DELETE ON entities BEGIN
    DELETE FROM vector_chunks WHERE kind = 'entity' AND item_id = old.id;
END;
CREATE TRIGGER relations_chunks_delete AFTER DELETE ON relations BEGIN
    DELETE FROM vector_chunks WHERE kind = 'relation' AND item_id = old.id;
END;
DELETE FROM vectors WHERE kind = 'memory'
    AND item_id IN (SELECT id FROM memories WHERE length(content) > 254);
"""

# Version 5 (stemmed full-text index): ``memories_fts`` is rebuilt with the
# ``porter`` tokenizer over unicode61, so "charities" matches "charity" and
# "camping" matches "camp" in both directions (it used to match exact words,
# and the ranker emulated stemming with prefix queries, which also matched
# "kitchen" for "kits"). The triggers of version 1 keep it current; only the
# index is rebuilt from the memories (external content).
SCHEMA_VERSION_5 = """
DROP TABLE memories_fts;
CREATE VIRTUAL TABLE memories_fts USING fts5 (
    content,
    content = 'memories',
    content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO memories_fts (memories_fts) VALUES ('rebuild');
"""

# Version 6 (vector tools): clients' own entity embeddings, one per entity, kept
# apart from ``vectors`` (the local model's, which recall reads): their dimension
# is the store's ``[vectors] dims`` and no model of memtrio made them.
SCHEMA_VERSION_6 = """
CREATE TABLE entity_embeddings (
    entity_id  INTEGER PRIMARY KEY,
    model      TEXT NOT NULL DEFAULT '',
    dim        INTEGER NOT NULL,
    vec        BLOB NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TRIGGER entities_embedding_delete AFTER DELETE ON entities BEGIN
    DELETE FROM entity_embeddings WHERE entity_id = old.id;
END;
"""

# Version 7 (exact entity names): an entity is its name exactly, case and spaces
# included, as in the reference servers (`Alice` and `alice` are two entities), so
# the unique key moves from ``canonical_name`` to ``name``; ``canonical_name`` stays,
# indexed, for the lookups that forgive case and spacing (search, recall's named
# entities, the memory tools' `entities.match_entity`). SQLite cannot drop a column's
# UNIQUE, so the table is rebuilt (SQLite's "generalized ALTER TABLE" steps, run by
# `migrate` with foreign keys off, then checked): every row, id and the id high-water
# mark are kept, and so are the FTS indexes (same ids, same contents), the triggers are
# made again. Existing names were unique already (one per canonical name), so nothing
# merges or splits.
SCHEMA_VERSION_7 = """
CREATE TABLE entities_v7 (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    name           TEXT NOT NULL UNIQUE,
    canonical_name TEXT NOT NULL,
    kind           TEXT NOT NULL DEFAULT 'entity',
    created_at     REAL NOT NULL,
    updated_at     REAL NOT NULL
);
INSERT INTO entities_v7 (id, name, canonical_name, kind, created_at, updated_at)
    SELECT id, name, canonical_name, kind, created_at, updated_at FROM entities ORDER BY id;
DELETE FROM sqlite_sequence WHERE name = 'entities_v7';
UPDATE sqlite_sequence SET name = 'entities_v7' WHERE name = 'entities';
DROP TABLE entities;
ALTER TABLE entities_v7 RENAME TO entities;
CREATE INDEX entities_kind ON entities (kind);
CREATE INDEX entities_canonical ON entities (canonical_name);
CREATE TRIGGER entities_fts_insert AFTER INSERT ON entities BEGIN
    INSERT INTO entities_fts (rowid, name, kind) VALUES (new.id, new.name, new.kind);
END;
CREATE TRIGGER entities_fts_delete AFTER DELETE ON entities BEGIN
    INSERT INTO entities_fts (entities_fts, rowid, name, kind) VALUES ('delete', old.id, old.name, old.kind);
END;
CREATE TRIGGER entities_fts_update AFTER UPDATE OF name, kind ON entities BEGIN
    INSERT INTO entities_fts (entities_fts, rowid, name, kind) VALUES ('delete', old.id, old.name, old.kind);
    INSERT INTO entities_fts (rowid, name, kind) VALUES (new.id, new.name, new.kind);
END;
CREATE TRIGGER entities_trigram_insert AFTER INSERT ON entities BEGIN
    INSERT INTO entities_trigram (rowid, name, kind) VALUES (new.id, new.name, new.kind);
END;
CREATE TRIGGER entities_trigram_delete AFTER DELETE ON entities BEGIN
    INSERT INTO entities_trigram (entities_trigram, rowid, name, kind) VALUES ('delete', old.id, old.name, old.kind);
END;
CREATE TRIGGER entities_trigram_update AFTER UPDATE OF name, kind ON entities BEGIN
    INSERT INTO entities_trigram (entities_trigram, rowid, name, kind) VALUES ('delete', old.id, old.name, old.kind);
    INSERT INTO entities_trigram (rowid, name, kind) VALUES (new.id, new.name, new.kind);
END;
CREATE TRIGGER entities_vector_delete AFTER DELETE ON entities BEGIN
    DELETE FROM vectors WHERE kind = 'entity' AND item_id = old.id;
END;
CREATE TRIGGER entities_chunks_delete AFTER DELETE ON entities BEGIN
    DELETE FROM vector_chunks WHERE kind = 'entity' AND item_id = old.id;
END;
CREATE TRIGGER entities_embedding_delete AFTER DELETE ON entities BEGIN
    DELETE FROM entity_embeddings WHERE entity_id = old.id;
END;
"""

# Version 8 (code anchors, issue #33): the code a memory describes, as it was when the
# memory was written, so recall can say when that code changed. A new table only: every
# existing row stays as it is, and existing memories have no anchors.
SCHEMA_VERSION_8 = """
CREATE TABLE memory_anchors (
    memory_id  INTEGER NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    position   INTEGER NOT NULL,
    path       TEXT NOT NULL,
    symbol     TEXT NOT NULL DEFAULT '',
    kind       TEXT NOT NULL,
    git_commit TEXT NOT NULL DEFAULT '',
    digest     TEXT NOT NULL,
    written_at REAL NOT NULL,
    PRIMARY KEY (memory_id, position)
) WITHOUT ROWID;
CREATE INDEX memory_anchors_path ON memory_anchors (path, memory_id);
CREATE INDEX memory_anchors_symbol ON memory_anchors (symbol, memory_id);
"""


def _change_mark_triggers() -> str:
    out = []
    for table, columns in MARKED_CHANGES.items():
        for event in ("INSERT", "DELETE", "UPDATE"):
            on = f"UPDATE OF {columns}" if event == "UPDATE" and columns else event
            out.append(
                f"CREATE TRIGGER {table}_change_{event.lower()} AFTER {on} ON {table} BEGIN\n"
                "    UPDATE change_mark SET seq = seq + 1;\nEND;"
            )
    return "\n".join(out)


# Version 9 (issue #37): the store's change counter. Every row inserted, deleted or
# changed in a table a cache reads (`MARKED_CHANGES`; the recall log, access counts and
# code anchors are not read by any cache) adds one to ``change_mark.seq``, whoever
# writes: this memtrio, another process, a hand edit. It never goes down, so a delete
# followed by an insert (same counts, same highest ids) still moves it. A cache
# remembers the mark it read its rows at, and the StoreWriter the marks of its own
# commits (`store.marks.ToldMarks`): a mark beyond both is another process's write.
SCHEMA_VERSION_9 = f"""
CREATE TABLE change_mark (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL
);
INSERT INTO change_mark (id, seq) VALUES (1, 0);
{_change_mark_triggers()}
"""

MIGRATIONS: list[str] = [
    SCHEMA_VERSION_1,
    SCHEMA_VERSION_2,
    SCHEMA_VERSION_3,
    SCHEMA_VERSION_4,
    SCHEMA_VERSION_5,
    SCHEMA_VERSION_6,
    SCHEMA_VERSION_7,
    SCHEMA_VERSION_8,
    SCHEMA_VERSION_9,
]
LATEST = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring ``conn``'s database to `LATEST`, one transaction per migration.

    Foreign keys are off while a migration runs (a table rebuilt drops the old
    one, which must not cascade), and checked before it commits.

    Error handling: a database newer than this code raises `SchemaTooNew`
    and is left untouched; a migration that would leave a dangling reference
    raises `sqlite3.IntegrityError` and is rolled back.
    """
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > LATEST:
        raise SchemaTooNew(
            f"the store has schema version {version}, newer than this memtrio ({LATEST}); upgrade memtrio"
        )
    keys = conn.execute("PRAGMA foreign_keys").fetchone()[0]
    conn.execute("PRAGMA foreign_keys = OFF")  # outside a transaction, where it takes effect
    try:
        while version < LATEST:
            _migrate_one(conn, version)
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.execute(f"PRAGMA foreign_keys = {'ON' if keys else 'OFF'}")
    return version


def _migrate_one(conn: sqlite3.Connection, version: int) -> None:
    """Run migration ``version`` -> ``version + 1`` in one transaction (unless another
    process ran it while we waited for the lock)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] == version:
            if conn.execute("PRAGMA foreign_keys").fetchone()[0]:
                raise RuntimeError("schema migration inside a transaction: foreign keys still on")
            for statement in _statements(MIGRATIONS[version]):
                conn.execute(statement)
            dangling = conn.execute("PRAGMA foreign_key_check").fetchone()
            if dangling is not None:
                raise sqlite3.IntegrityError(
                    f"schema migration {version + 1} would leave a dangling reference "
                    f"({dangling[0]} row {dangling[1]} -> {dangling[2]}); nothing was changed"
                )
            conn.execute(f"PRAGMA user_version = {version + 1}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _statements(script: str) -> list[str]:
    """Split a migration script into complete statements (triggers included)."""
    out: list[str] = []
    buf = ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip():
        raise ValueError(f"incomplete SQL statement in migration: {buf[:80]!r}")
    return out
