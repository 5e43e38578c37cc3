"""The store's PostgreSQL schema, as forward-only versioned migrations under an advisory lock.

The tables, columns and meanings are those of the SQLite schema (see
``store.sqlite.schema``), at its latest version; what SQLite does with virtual
tables and triggers PostgreSQL does with its own means:

- full text over memory content: a stored generated ``tsvector`` column
  ``fts`` (the ``english`` configuration: stemmed, as the SQLite index is with
  ``porter``) and a GIN index; entity names and types: ``fts`` (``simple``,
  unstemmed words) and trigram (``pg_trgm``) GIN indexes for substring search;
- the semantic seeds: ``embedding``, a ``pgvector`` copy of each local model's
  vector (``vectors``: first windows, ``vector_chunks``: the others), with an
  HNSW index (cosine) over the 384-dimension ones (`snapshot._NEAREST`);
- ids as SQLite's AUTOINCREMENT gives them: one more than the table's high-water
  mark in ``id_marks`` (what SQLite keeps in ``sqlite_sequence``), set by a
  row trigger in the writing transaction, so a rolled-back write leaves no gap and a deleted id is never
  given again (a sequence would do neither); writers take turns
  (`conn.WRITE_LOCK`), so the mark is never contended;
- the cascades SQLite's triggers do (vectors, chunks, embeddings of a deleted
  item) are PL/pgSQL triggers;
- the change counter ``change_mark`` (since version 4) is moved by a statement
  trigger on each table a cache reads (SQLite's are row triggers).

`migrate` runs each migration in one transaction holding
``pg_advisory_xact_lock(MIGRATE_LOCK)``: of several processes starting at
once, the first migrates and the others, once the lock is theirs, find the
version already current and do nothing. The version lives in ``meta``
(``schema_version``).
"""

from __future__ import annotations

from ..schemas import MARKED_CHANGES
from .conn import MIGRATE_LOCK, PgConnection

# Tables whose rows get their id from the table's high-water mark in ``id_marks``.
ID_TABLES = frozenset({"memories", "scopes", "entities", "relations", "recall_log"})

# The dimension of the local model's vectors that the HNSW index covers.
HNSW_DIM = 384

_CASCADES = {
    "memories": "memory",
    "entities": "entity",
    "relations": "relation",
}


def _cascade_triggers() -> str:
    out = []
    for table, kind in _CASCADES.items():
        extra = (
            "DELETE FROM entity_embeddings WHERE entity_id = old.id;" if table == "entities" else ""
        )
        out.append(f"""
CREATE FUNCTION {table}_vector_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM vectors WHERE kind = '{kind}' AND item_id = old.id;
    DELETE FROM vector_chunks WHERE kind = '{kind}' AND item_id = old.id;
    {extra}
    RETURN old;
END $$;
CREATE TRIGGER {table}_vector_delete AFTER DELETE ON {table}
    FOR EACH ROW EXECUTE FUNCTION {table}_vector_delete();
""")
    for table in ID_TABLES:
        out.append(f"""
INSERT INTO id_marks (name, seq) VALUES ('{table}', 0);
CREATE TRIGGER {table}_id BEFORE INSERT ON {table}
    FOR EACH ROW EXECUTE FUNCTION next_id();""")
    return "\n".join(out)


SCHEMA_VERSION_1 = f"""
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE id_marks (
    name TEXT PRIMARY KEY,
    seq  BIGINT NOT NULL
);
CREATE FUNCTION next_id() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF new.id IS NULL THEN
        UPDATE id_marks SET seq = seq + 1 WHERE name = TG_TABLE_NAME RETURNING seq INTO new.id;
    ELSE
        UPDATE id_marks SET seq = greatest(seq, new.id) WHERE name = TG_TABLE_NAME;
    END IF;
    RETURN new;
END $$;

CREATE TABLE memories (
    id               BIGINT PRIMARY KEY,
    content          TEXT NOT NULL,
    memory_type      TEXT NOT NULL DEFAULT 'observation',
    importance       DOUBLE PRECISION NOT NULL DEFAULT 0.0,
    created_at       DOUBLE PRECISION NOT NULL,
    updated_at       DOUBLE PRECISION NOT NULL,
    last_accessed_at DOUBLE PRECISION,
    access_count     BIGINT NOT NULL DEFAULT 0,
    fts              tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED
);
CREATE INDEX memories_type ON memories (lower(memory_type), id);
CREATE INDEX memories_fts ON memories USING gin (fts);

CREATE TABLE scopes (
    id   BIGINT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);

CREATE TABLE memory_scopes (
    memory_id BIGINT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    scope_id  BIGINT NOT NULL REFERENCES scopes (id),
    PRIMARY KEY (memory_id, scope_id)
);
CREATE INDEX memory_scopes_scope ON memory_scopes (scope_id, memory_id);

CREATE TABLE entities (
    id             BIGINT PRIMARY KEY,
    name           TEXT NOT NULL,
    canonical_name TEXT NOT NULL UNIQUE,
    kind           TEXT NOT NULL DEFAULT 'entity',
    created_at     DOUBLE PRECISION NOT NULL,
    updated_at     DOUBLE PRECISION NOT NULL,
    fts            tsvector GENERATED ALWAYS AS
                       (to_tsvector('simple', name || ' ' || kind)) STORED
);
CREATE INDEX entities_kind ON entities (kind);
CREATE INDEX entities_fts ON entities USING gin (fts);
CREATE INDEX entities_name_trgm ON entities USING gin (name gin_trgm_ops);
CREATE INDEX entities_kind_trgm ON entities USING gin (kind gin_trgm_ops);

CREATE TABLE entity_scopes (
    entity_id BIGINT NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    scope_id  BIGINT NOT NULL REFERENCES scopes (id),
    PRIMARY KEY (entity_id, scope_id)
);
CREATE INDEX entity_scopes_scope ON entity_scopes (scope_id, entity_id);

CREATE TABLE relations (
    id            BIGINT PRIMARY KEY,
    source_id     BIGINT NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    target_id     BIGINT NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    relation_type TEXT NOT NULL,
    metadata      TEXT NOT NULL DEFAULT '{{}}',
    created_at    DOUBLE PRECISION NOT NULL,
    UNIQUE (source_id, relation_type, target_id)
);
CREATE INDEX relations_target ON relations (target_id);
CREATE INDEX relations_type ON relations (relation_type);

CREATE TABLE relation_scopes (
    relation_id BIGINT NOT NULL REFERENCES relations (id) ON DELETE CASCADE,
    scope_id    BIGINT NOT NULL REFERENCES scopes (id),
    PRIMARY KEY (relation_id, scope_id)
);
CREATE INDEX relation_scopes_scope ON relation_scopes (scope_id, relation_id);

CREATE TABLE memory_entities (
    memory_id BIGINT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    entity_id BIGINT NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    PRIMARY KEY (memory_id, entity_id)
);
CREATE INDEX memory_entities_entity ON memory_entities (entity_id, memory_id);

CREATE TABLE memory_relations (
    memory_id   BIGINT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    relation_id BIGINT NOT NULL REFERENCES relations (id) ON DELETE CASCADE,
    PRIMARY KEY (memory_id, relation_id)
);
CREATE INDEX memory_relations_relation ON memory_relations (relation_id, memory_id);

CREATE TABLE vectors (
    kind      TEXT NOT NULL CHECK (kind IN ('memory', 'entity', 'relation')),
    item_id   BIGINT NOT NULL,
    model     TEXT NOT NULL,
    revision  TEXT NOT NULL,
    dim       INTEGER NOT NULL,
    vec       BYTEA NOT NULL,
    embedding vector,
    PRIMARY KEY (kind, item_id)
);
CREATE INDEX vectors_hnsw ON vectors
    USING hnsw ((embedding::vector({HNSW_DIM})) vector_cosine_ops)
    WHERE dim = {HNSW_DIM} AND embedding IS NOT NULL;

CREATE TABLE vector_chunks (
    kind     TEXT NOT NULL CHECK (kind IN ('memory', 'entity', 'relation')),
    item_id  BIGINT NOT NULL,
    chunk    INTEGER NOT NULL CHECK (chunk >= 1),
    model    TEXT NOT NULL,
    revision TEXT NOT NULL,
    dim      INTEGER NOT NULL,
    vec      BYTEA NOT NULL,
    embedding vector,
    PRIMARY KEY (kind, item_id, chunk)
);
CREATE INDEX vector_chunks_hnsw ON vector_chunks
    USING hnsw ((embedding::vector({HNSW_DIM})) vector_cosine_ops)
    WHERE dim = {HNSW_DIM} AND embedding IS NOT NULL;

CREATE FUNCTION vectors_chunks_reset() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        DELETE FROM vector_chunks WHERE kind = new.kind AND item_id = new.item_id;
        RETURN new;
    END IF;
    DELETE FROM vector_chunks WHERE kind = old.kind AND item_id = old.item_id;
    RETURN old;
END $$;
CREATE TRIGGER vectors_chunks_reset AFTER INSERT OR UPDATE OF vec, model, revision OR DELETE
    ON vectors FOR EACH ROW EXECUTE FUNCTION vectors_chunks_reset();

CREATE TABLE entity_embeddings (
    entity_id  BIGINT PRIMARY KEY,
    model      TEXT NOT NULL DEFAULT '',
    dim        INTEGER NOT NULL,
    vec        BYTEA NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);

CREATE TABLE recall_log (
    id     BIGINT PRIMARY KEY,
    ts     DOUBLE PRECISION NOT NULL,
    kind   TEXT NOT NULL,
    query  TEXT NOT NULL,
    scopes TEXT NOT NULL,
    ids    TEXT NOT NULL,
    scores TEXT NOT NULL
);
{_cascade_triggers()}
"""

# Version 2 (exact entity names, SQLite's version 7): an entity is its name exactly,
# so the unique key moves from ``canonical_name`` (kept, indexed, for the lookups that
# forgive case and spacing) to ``name``. Every row stays as it is: names were unique
# already (one per canonical name).
SCHEMA_VERSION_2 = """
ALTER TABLE entities DROP CONSTRAINT entities_canonical_name_key;
ALTER TABLE entities ADD CONSTRAINT entities_name_key UNIQUE (name);
CREATE INDEX entities_canonical ON entities (canonical_name);
"""

# Version 3 (code anchors, SQLite's version 8): a memory's code anchors, as in
# `store.sqlite.schema`. A new table only: every existing row stays. The path and symbol
# indexes are hash indexes (lookups are by equality): a B-tree entry is limited to
# about 2,700 bytes, less than a path of 1,024 characters can take in UTF-8.
SCHEMA_VERSION_3 = """
CREATE TABLE memory_anchors (
    memory_id  BIGINT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    position   INTEGER NOT NULL,
    path       TEXT NOT NULL,
    symbol     TEXT NOT NULL DEFAULT '',
    kind       TEXT NOT NULL,
    git_commit TEXT NOT NULL DEFAULT '',
    digest     TEXT NOT NULL,
    written_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (memory_id, position)
);
CREATE INDEX memory_anchors_path ON memory_anchors USING hash (path);
CREATE INDEX memory_anchors_symbol ON memory_anchors USING hash (symbol);
"""


def _change_mark_triggers() -> str:
    out = []
    for table, columns in MARKED_CHANGES.items():
        update = f"UPDATE OF {columns}" if columns else "UPDATE"
        out.append(
            f"CREATE TRIGGER {table}_change AFTER INSERT OR DELETE OR {update} ON {table}\n"
            "    FOR EACH STATEMENT EXECUTE FUNCTION change_mark_bump();"
        )
    return "\n".join(out)


# Version 4 (the change counter, SQLite's version 9): ``change_mark.seq`` moves on every
# statement that changes a table a cache reads (`store.schemas.MARKED_CHANGES`), as
# SQLite's row triggers move it on every row. A statement trigger (one bump per
# statement, not per row) keeps a bulk import from updating the one row once per row;
# writers take turns (`conn.WRITE_LOCK`), so the row is never contended.
SCHEMA_VERSION_4 = f"""
CREATE TABLE change_mark (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    seq BIGINT NOT NULL
);
INSERT INTO change_mark (id, seq) VALUES (1, 0);
CREATE FUNCTION change_mark_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE change_mark SET seq = seq + 1;
    RETURN NULL;
END $$;
{_change_mark_triggers()}
"""

MIGRATIONS: list[str] = [SCHEMA_VERSION_1, SCHEMA_VERSION_2, SCHEMA_VERSION_3, SCHEMA_VERSION_4]
LATEST = len(MIGRATIONS)


def version(conn: PgConnection) -> int:
    """The schema version of the database (0: empty)."""
    exists = conn.native("SELECT to_regclass('meta') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return 0
    row = conn.native("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: PgConnection) -> int:
    """Bring the database to `LATEST`, one transaction per migration, under the migration lock.

    Error handling: a database newer than this code raises `SchemaTooNew` and
    is left untouched.
    """
    from ..schemas import SchemaTooNew

    current = version(conn)
    while current < LATEST:
        raw = conn.raw
        with raw.transaction():
            raw.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
            current = version(conn)  # another process may have migrated while we waited
            if current < LATEST:
                raw.execute(MIGRATIONS[current].encode())
                raw.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(current + 1),),
                )
                current += 1
    if current > LATEST:
        raise SchemaTooNew(
            f"the store has PostgreSQL schema version {current}, newer than this memtrio ({LATEST}); upgrade memtrio"
        )
    return current
