"""The store's SQL operations, as one import for the other features and the tests.

Each operation lives in the module of its concept; this module only gathers
the names used outside the store:

- `documents`: entity names (`canonical_name`) and embedding documents;
- `vectors`: stored embeddings (`Vec`, `put_vector`, `item_vectors`, ...);
- `entities`: entities and relations (`EntitySpec`, `upsert_entity`, ...);
- `memories`: memory rows (`NewMemory`, `insert_memory`, `get_memory`, ...);
- `lexical`: the FTS5 query planner and lexical recall;

Every operation runs inside a transaction its caller opened (the StoreWriter
for writes, the read pool for reads); none of them commits.
"""

from __future__ import annotations

from .documents import (
    canonical_name,
    clean_name,
    entity_document,
    memory_document,
    relation_document,
)
from .entities import (
    EntitySpec,
    RelationSpec,
    find_entity,
    missing_vectors,
    upsert_entity,
    upsert_relation,
    validate_entity,
    validate_relation_type,
)
from .lexical import (
    lexical_plan,
    query_terms,
    query_words,
    search_memories,
    terms_of,
)
from .memories import (
    NewMemory,
    counts,
    delete_memory,
    get_memory,
    insert_memory,
    list_memories,
    not_found,
    now,
    update_memory,
    visible,
    writable_memory,
)
from .scopes import GLOBAL
from .vectors import Vec, change_of, drop_vector, item_vectors, put_vector, vecs_of

__all__ = [
    "GLOBAL",
    "EntitySpec",
    "NewMemory",
    "RelationSpec",
    "Vec",
    "canonical_name",
    "change_of",
    "clean_name",
    "counts",
    "delete_memory",
    "drop_vector",
    "entity_document",
    "find_entity",
    "get_memory",
    "insert_memory",
    "item_vectors",
    "lexical_plan",
    "list_memories",
    "memory_document",
    "missing_vectors",
    "not_found",
    "now",
    "put_vector",
    "query_terms",
    "query_words",
    "relation_document",
    "search_memories",
    "terms_of",
    "update_memory",
    "upsert_entity",
    "upsert_relation",
    "validate_entity",
    "validate_relation_type",
    "vecs_of",
    "visible",
    "writable_memory",
]
