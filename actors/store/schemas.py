"""What the two backends' schemas share, so that neither backend imports the other.

- `MARKED_CHANGES`: the tables (and, for memories and entities, the columns) that the
  in-memory caches read: the recall ranker's (`ranker.graph`) and the vector tools'
  index (`vectors.service`). A change to any of them moves ``change_mark`` (SQLite: row
  triggers, `sqlite.schema`; PostgreSQL: statement triggers, `pg.schema`).
- `RECORDS_VERSION`: the version of the records every backend holds, which export
  headers carry. It is SQLite's schema version (`sqlite.schema.LATEST`, checked by
  tests/test_storage_boundary.py): a PostgreSQL store holds the same records under a
  schema version of its own.
- `SchemaTooNew`: a database written by a newer memtrio, on either backend.
"""

from __future__ import annotations

from ...supervisors.errors import UserError

MARKED_CHANGES: dict[str, str] = {
    "memories": "content, memory_type, created_at",
    "entities": "name, canonical_name, kind",
    "scopes": "",
    "memory_scopes": "",
    "entity_scopes": "",
    "relations": "",
    "relation_scopes": "",
    "memory_entities": "",
    "memory_relations": "",
    "vectors": "",
    "vector_chunks": "",
    "entity_embeddings": "",
}

RECORDS_VERSION = 9


class SchemaTooNew(UserError, RuntimeError):
    """The database was written by a newer memtrio."""
