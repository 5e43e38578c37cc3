"""Export of the whole store as JSON lines (the format `records` reads back).

One JSON object per line: a header, then scopes, entities, relations,
memories, vectors and the recall log. Entities are keyed by name (exactly, as
the store identifies them), relations by (source, type, target), so an import
into a store that already holds some of them reuses them.
"""

from __future__ import annotations

import base64
import sqlite3
import time
from collections.abc import Iterator
from typing import Any

from .records import FORMAT, VERSION


def export_lines(conn: sqlite3.Connection) -> Iterator[dict[str, Any]]:
    """Every record of the store, in a stable order (run inside one read transaction).

    Streams: rows are read as they are written out, never all at once.
    """
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    yield {
        "type": "header",
        "format": FORMAT,
        "version": VERSION,
        "schema_version": version,
        "exported_at": time.time(),
    }
    for sid, name in conn.execute("SELECT id, name FROM scopes ORDER BY id"):
        yield {"type": "scope", "id": sid, "name": name}

    def scopes_of(table: str, column: str, item: int) -> list[str]:
        rows = conn.execute(
            f"SELECT s.name FROM {table} x JOIN scopes s ON s.id = x.scope_id WHERE x.{column} = ?",
            (item,),
        )
        return sorted(r[0] for r in rows)

    def triple(rid: int) -> list[str] | None:
        row = conn.execute(
            """SELECT s.name, r.relation_type, t.name FROM relations r
               JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id WHERE r.id = ?""",
            (rid,),
        ).fetchone()
        return list(row) if row else None

    for eid, name, cname, kind, created, updated in conn.execute(
        "SELECT id, name, canonical_name, kind, created_at, updated_at FROM entities ORDER BY id"
    ):
        yield {
            "type": "entity", "id": eid, "name": name, "canonical_name": cname, "kind": kind,
            "created_at": created, "updated_at": updated, "scopes": scopes_of("entity_scopes", "entity_id", eid),
        }  # fmt: skip
    for rid, src, rtype, tgt, meta, created in conn.execute(
        """SELECT r.id, s.name, r.relation_type, t.name, r.metadata, r.created_at
           FROM relations r JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
           ORDER BY r.id"""
    ):
        yield {
            "type": "relation", "id": rid, "source": src, "relation_type": rtype, "target": tgt,
            "metadata": meta, "created_at": created, "scopes": scopes_of("relation_scopes", "relation_id", rid),
        }  # fmt: skip
    for row in conn.execute(
        "SELECT id, content, memory_type, importance, created_at, updated_at, last_accessed_at, access_count FROM memories ORDER BY id"
    ):
        mid = row[0]
        entities = conn.execute(
            "SELECT e.name FROM memory_entities me JOIN entities e ON e.id = me.entity_id WHERE me.memory_id = ?",
            (mid,),
        )
        relations = conn.execute(
            "SELECT relation_id FROM memory_relations WHERE memory_id = ?", (mid,)
        ).fetchall()
        yield {
            "type": "memory", "id": mid, "content": row[1], "memory_type": row[2], "importance": row[3],
            "created_at": row[4], "updated_at": row[5], "last_accessed_at": row[6], "access_count": row[7],
            "scopes": scopes_of("memory_scopes", "memory_id", mid),
            "entities": sorted(r[0] for r in entities),
            "relations": sorted(t for (rid,) in relations if (t := triple(rid)) is not None),
        }  # fmt: skip
    for kind, item, model, revision, dim, vec in conn.execute(
        "SELECT kind, item_id, model, revision, dim, vec FROM vectors ORDER BY kind, item_id"
    ):
        key: int | str | list[str] | None = (
            item
            if kind == "memory"
            else (
                conn.execute("SELECT name FROM entities WHERE id = ?", (item,)).fetchone() or [None]
            )[0]
            if kind == "entity"
            else triple(item)
        )
        if key is None:
            continue  # a vector of a row that no longer exists
        # A long text's windows: chunk 0 is in `vectors`, the others (same model) follow it.
        chunks = conn.execute(
            """SELECT vec FROM vector_chunks WHERE kind = ? AND item_id = ? AND model = ? AND revision = ?
               ORDER BY chunk""",
            (kind, item, model, revision),
        )
        vec = vec + b"".join(r[0] for r in chunks)
        yield {
            "type": "vector", "kind": kind, "key": key, "model": model, "revision": revision, "dim": dim,
            "vec": base64.b64encode(vec).decode("ascii"),
        }  # fmt: skip
    yield from _recall_log(conn)


def _recall_log(conn: sqlite3.Connection) -> Iterator[dict[str, Any]]:
    """The recall log's records, oldest first."""
    for ts, kind, query, scopes, ids, scores in conn.execute(
        "SELECT ts, kind, query, scopes, ids, scores FROM recall_log ORDER BY id"
    ):
        yield {
            "type": "recall_log",
            "ts": ts,
            "kind": kind,
            "query": query,
            "scopes": scopes,
            "ids": ids,
            "scores": scores,
        }
