"""Export of the whole store as JSON lines (the format `records` reads back).

One JSON object per line: a header, then scopes, entities, relations,
memories (with their code anchors, when they have some), vectors and the recall log. Entities are keyed by name (exactly, as
the store identifies them), relations by (source, type, target), so an import
into a store that already holds some of them reuses them.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any

import msgspec

from ..store.interfaces import ReadTx
from .records import FORMAT, VERSION


def export_lines(tx: ReadTx) -> Iterator[dict[str, Any]]:
    """Every record of the store, in a stable order (run inside one read transaction).

    Streams: rows are read as they are written out, never all at once.
    """
    upkeep = tx.export
    yield {
        "type": "header",
        "format": FORMAT,
        "version": VERSION,
        "schema_version": upkeep.record_version(),
        "exported_at": time.time(),
    }
    for scope in upkeep.scopes():
        yield {"type": "scope", "id": scope.id, "name": scope.name}
    for e in upkeep.entities():
        yield {
            "type": "entity", "id": e.id, "name": e.name, "canonical_name": e.canonical_name,
            "kind": e.kind, "created_at": e.created_at, "updated_at": e.updated_at, "scopes": e.scopes,
        }  # fmt: skip
    for r in upkeep.relations():
        yield {
            "type": "relation", "id": r.id, "source": r.source, "relation_type": r.relation_type,
            "target": r.target, "metadata": r.metadata, "created_at": r.created_at, "scopes": r.scopes,
        }  # fmt: skip
    for m in upkeep.memories():
        record = {
            "type": "memory", "id": m.id, "content": m.content, "memory_type": m.memory_type,
            "importance": m.importance, "created_at": m.created_at, "updated_at": m.updated_at,
            "last_accessed_at": m.last_accessed_at, "access_count": m.access_count,
            "scopes": m.scopes, "entities": m.entities, "relations": m.relations,
        }  # fmt: skip
        anchors = tx.anchors.of([m.id]).get(m.id)
        if anchors:  # only then: a memory without anchors is written as before
            record["anchors"] = [msgspec.structs.asdict(a) for a in anchors]
        yield record
    for v in upkeep.vectors():
        yield {
            "type": "vector", "kind": v.kind, "key": v.key, "model": v.model, "revision": v.revision,
            "dim": v.dim, "vec": base64.b64encode(v.vec).decode("ascii"),
        }  # fmt: skip
    yield from _recall_log(tx)


def _recall_log(tx: ReadTx) -> Iterator[dict[str, Any]]:
    """The recall log's records, oldest first."""
    for entry in tx.recall_log.entries():
        yield {
            "type": "recall_log",
            "ts": entry.ts,
            "kind": entry.kind,
            "query": entry.query,
            "scopes": entry.scopes,
            "ids": entry.ids,
            "scores": entry.scores,
        }
