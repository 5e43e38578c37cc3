"""Export and import of the whole store as JSON lines, and flush.

Export writes one JSON object per line: a header, then scopes, entities,
relations, memories, vectors and the recall log. Entities are keyed by
canonical name, relations by (source, type, target), so an import into a store
that already holds some of them reuses them; ids are kept when they are free.
Exporting, importing into an empty store and exporting again gives the same
lines (apart from the header's ``exported_at``).

Importing the same file twice is harmless: a memory with the same id, content
and creation time is skipped.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from typing import Any

from . import ops, schema
from .scopes import ScopePolicy
from .writer import Change

FORMAT = "memtrio-export"
VERSION = 1


class ImportError_(ValueError):
    """A line of an import file that cannot be read; names the line."""


def export_lines(conn: sqlite3.Connection) -> Iterator[dict[str, Any]]:
    """Every record of the store, in a stable order (run inside one read transaction)."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    yield {
        "type": "header",
        "format": FORMAT,
        "version": VERSION,
        "schema_version": version,
        "exported_at": time.time(),
    }
    scope_names = dict(conn.execute("SELECT id, name FROM scopes"))
    for sid, name in sorted(scope_names.items()):
        yield {"type": "scope", "id": sid, "name": name}

    def scopes_of(table: str, column: str, item: int) -> list[str]:
        rows = conn.execute(f"SELECT scope_id FROM {table} WHERE {column} = ?", (item,)).fetchall()
        return sorted(scope_names[r[0]] for r in rows)

    canon: dict[int, str] = {}
    for eid, name, cname, kind, created, updated in conn.execute(
        "SELECT id, name, canonical_name, kind, created_at, updated_at FROM entities ORDER BY id"
    ).fetchall():
        canon[eid] = cname
        yield {
            "type": "entity", "id": eid, "name": name, "canonical_name": cname, "kind": kind,
            "created_at": created, "updated_at": updated, "scopes": scopes_of("entity_scopes", "entity_id", eid),
        }  # fmt: skip
    triples: dict[int, list[str]] = {}
    for rid, src, tgt, rtype, meta, created in conn.execute(
        "SELECT id, source_id, target_id, relation_type, metadata, created_at FROM relations ORDER BY id"
    ).fetchall():
        triples[rid] = [canon[src], rtype, canon[tgt]]
        yield {
            "type": "relation", "id": rid, "source": canon[src], "relation_type": rtype, "target": canon[tgt],
            "metadata": meta, "created_at": created, "scopes": scopes_of("relation_scopes", "relation_id", rid),
        }  # fmt: skip
    for row in conn.execute(
        "SELECT id, content, memory_type, importance, created_at, updated_at, last_accessed_at, access_count FROM memories ORDER BY id"
    ).fetchall():
        mid = row[0]
        yield {
            "type": "memory", "id": mid, "content": row[1], "memory_type": row[2], "importance": row[3],
            "created_at": row[4], "updated_at": row[5], "last_accessed_at": row[6], "access_count": row[7],
            "scopes": scopes_of("memory_scopes", "memory_id", mid),
            "entities": sorted(canon[r[0]] for r in conn.execute("SELECT entity_id FROM memory_entities WHERE memory_id = ?", (mid,))),
            "relations": sorted(triples[r[0]] for r in conn.execute("SELECT relation_id FROM memory_relations WHERE memory_id = ?", (mid,))),
        }  # fmt: skip
    # A long text's windows: chunk 0 is in `vectors`, the others (same model) follow it.
    chunks: dict[tuple[str, int], list[bytes]] = {}
    for kind, item, vec in conn.execute(
        """SELECT c.kind, c.item_id, c.vec FROM vector_chunks c
           JOIN vectors v ON v.kind = c.kind AND v.item_id = c.item_id
               AND v.model = c.model AND v.revision = c.revision
           ORDER BY c.kind, c.item_id, c.chunk"""
    ):
        chunks.setdefault((kind, item), []).append(vec)
    for kind, item, model, revision, dim, vec in conn.execute(
        "SELECT kind, item_id, model, revision, dim, vec FROM vectors ORDER BY kind, item_id"
    ).fetchall():
        vec = vec + b"".join(chunks.get((kind, item), ()))
        key: Any = (
            item if kind == "memory" else canon.get(item) if kind == "entity" else triples.get(item)
        )
        if key is None:
            continue  # a vector of a row that no longer exists
        yield {
            "type": "vector", "kind": kind, "key": key, "model": model, "revision": revision, "dim": dim,
            "vec": base64.b64encode(vec).decode("ascii"),
        }  # fmt: skip
    for ts, kind, query, scopes, ids, scores in conn.execute(
        "SELECT ts, kind, query, scopes, ids, scores FROM recall_log ORDER BY id"
    ).fetchall():
        yield {
            "type": "recall_log",
            "ts": ts,
            "kind": kind,
            "query": query,
            "scopes": scopes,
            "ids": ids,
            "scores": scores,
        }


def parse_lines(lines: Iterable[str]) -> list[dict[str, Any]]:
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise ImportError_(f"line {number}: not JSON ({exc})") from None
        if not isinstance(record, dict) or "type" not in record:
            raise ImportError_(f"line {number}: expected an object with a `type`")
        records.append(record)
    if not records or records[0].get("type") != "header" or records[0].get("format") != FORMAT:
        raise ImportError_("not a memtrio export: the first line must be its header")
    if records[0].get("version") != VERSION:
        raise ImportError_(
            f"export format version {records[0].get('version')} is not supported (this memtrio reads {VERSION})"
        )
    return records


def import_records(conn: sqlite3.Connection, records: list[dict[str, Any]]) -> dict[str, int]:
    """Insert the records (inside the caller's write transaction). Returns counts."""
    added = {
        "memories": 0,
        "entities": 0,
        "relations": 0,
        "vectors": 0,
        "recall_log": 0,
        "skipped_memories": 0,
    }
    scope_id: dict[str, int] = {}

    def sid(name: str) -> int:
        if name not in scope_id:
            row = conn.execute("SELECT id FROM scopes WHERE name = ?", (name,)).fetchone()
            scope_id[name] = (
                row[0]
                if row
                else conn.execute("INSERT INTO scopes (name) VALUES (?)", (name,)).lastrowid
            )
        return scope_id[name]

    def free(table: str, item: int) -> bool:
        return conn.execute(f"SELECT 1 FROM {table} WHERE id = ?", (item,)).fetchone() is None

    entity_id: dict[str, int] = {}
    relation_id: dict[tuple[str, str, str], int] = {}
    memory_id: dict[int, int] = {}
    memory_length: dict[int, int] = {}  # new memory id -> characters of its content
    header = next((r for r in records if r.get("type") == "header"), {})
    unchunked = int(header.get("schema_version") or 0) < 4  # before vector_chunks
    try:
        for rec in _import_order(conn, records):
            kind = rec["type"]
            if kind == "scope":
                sid(rec["name"])
            elif kind == "entity":
                row = conn.execute(
                    "SELECT id FROM entities WHERE canonical_name = ?", (rec["canonical_name"],)
                ).fetchone()
                if row:
                    eid = row[0]
                else:
                    eid = conn.execute(
                        "INSERT INTO entities (id, name, canonical_name, kind, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                        (
                            rec["id"] if free("entities", rec["id"]) else None,
                            rec["name"],
                            rec["canonical_name"],
                            rec["kind"],
                            rec["created_at"],
                            rec["updated_at"],
                        ),
                    ).lastrowid
                    added["entities"] += 1
                entity_id[rec["canonical_name"]] = eid
                conn.executemany(
                    "INSERT OR IGNORE INTO entity_scopes VALUES (?, ?)",
                    [(eid, sid(s)) for s in rec["scopes"]],
                )
            elif kind == "relation":
                src, tgt = entity_id[rec["source"]], entity_id[rec["target"]]
                key = (rec["source"], rec["relation_type"], rec["target"])
                row = conn.execute(
                    "SELECT id FROM relations WHERE source_id = ? AND relation_type = ? AND target_id = ?",
                    (src, rec["relation_type"], tgt),
                ).fetchone()
                if row:
                    rid = row[0]
                else:
                    rid = conn.execute(
                        "INSERT INTO relations (id, source_id, target_id, relation_type, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                        (
                            rec["id"] if free("relations", rec["id"]) else None,
                            src,
                            tgt,
                            rec["relation_type"],
                            rec["metadata"],
                            rec["created_at"],
                        ),
                    ).lastrowid
                    added["relations"] += 1
                relation_id[key] = rid
                conn.executemany(
                    "INSERT OR IGNORE INTO relation_scopes VALUES (?, ?)",
                    [(rid, sid(s)) for s in rec["scopes"]],
                )
            elif kind == "memory":
                same = conn.execute(
                    "SELECT 1 FROM memories WHERE id = ? AND content = ? AND created_at = ?",
                    (rec["id"], rec["content"], rec["created_at"]),
                ).fetchone()
                if same:
                    memory_id[rec["id"]] = rec["id"]
                    memory_length[rec["id"]] = len(rec["content"])
                    added["skipped_memories"] += 1
                    continue
                mid = conn.execute(
                    """INSERT INTO memories (id, content, memory_type, importance, created_at, updated_at, last_accessed_at, access_count)
                       VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
                    (
                        rec["id"] if free("memories", rec["id"]) else None,
                        rec["content"],
                        rec["memory_type"],
                        rec["importance"],
                        rec["created_at"],
                        rec["updated_at"],
                        rec["last_accessed_at"],
                        rec["access_count"],
                    ),
                ).lastrowid
                memory_id[rec["id"]] = mid
                memory_length[mid] = len(rec["content"])
                added["memories"] += 1
                conn.executemany(
                    "INSERT OR IGNORE INTO memory_scopes VALUES (?, ?)",
                    [(mid, sid(s)) for s in rec["scopes"]],
                )
                conn.executemany(
                    "INSERT OR IGNORE INTO memory_entities VALUES (?, ?)",
                    [(mid, entity_id[c]) for c in rec["entities"]],
                )
                conn.executemany(
                    "INSERT OR IGNORE INTO memory_relations VALUES (?, ?)",
                    [(mid, relation_id[tuple(t)]) for t in rec["relations"]],
                )
            elif kind == "vector":
                vkind = rec["kind"]
                key = rec["key"]
                item = (
                    memory_id.get(key)
                    if vkind == "memory"
                    else entity_id.get(key)
                    if vkind == "entity"
                    else relation_id.get(tuple(key))
                )
                if item is None:
                    continue
                data = base64.b64decode(rec["vec"])
                dim = int(rec["dim"])
                if dim <= 0 or len(data) == 0 or len(data) % (4 * dim):
                    continue  # not whole float32 vectors: recomputed by reembed
                if (
                    vkind == "memory"
                    and unchunked
                    and len(data) == 4 * dim
                    and memory_length.get(item, 0) > 254
                ):
                    # An export from before chunked embeddings: this vector covers only the
                    # first window of a long memory; reembed (or recall) recomputes it whole.
                    continue
                ops.put_vector(conn, vkind, item, ops.Vec(data, dim, rec["model"], rec["revision"]))
                added["vectors"] += 1
            elif kind == "recall_log":
                exists = conn.execute(
                    "SELECT 1 FROM recall_log WHERE ts = ? AND kind = ? AND query = ?",
                    (rec["ts"], rec["kind"], rec["query"]),
                ).fetchone()
                if not exists:
                    conn.execute(
                        "INSERT INTO recall_log (ts, kind, query, scopes, ids, scores) VALUES (?, ?, ?, ?, ?, ?)",
                        (
                            rec["ts"],
                            rec["kind"],
                            rec["query"],
                            rec["scopes"],
                            rec["ids"],
                            rec["scores"],
                        ),
                    )
                    added["recall_log"] += 1
            elif kind != "header":
                raise ImportError_(f"unknown record type {kind!r}")
    except (KeyError, TypeError) as exc:
        raise ImportError_(
            f"malformed {rec.get('type', '?')} record (missing or wrong field {exc}); nothing was imported"
        ) from None
    return added


_ORDER = {
    "header": 0,
    "scope": 1,
    "entity": 2,
    "relation": 3,
    "memory": 4,
    "vector": 5,
    "recall_log": 6,
}
_TABLES = {"entity": "entities", "relation": "relations", "memory": "memories"}


def _import_order(conn: sqlite3.Connection, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records in dependency order; within a type, those whose id is free first.

    So a row that must be renumbered (its id is taken) never takes the id of a
    later row that could have kept its own.
    """

    def taken(rec: dict[str, Any]) -> bool:
        table = _TABLES.get(rec.get("type", ""))
        if table is None or not isinstance(rec.get("id"), int):
            return False
        return (
            conn.execute(f"SELECT 1 FROM {table} WHERE id = ?", (rec["id"],)).fetchone() is not None
        )

    return sorted(records, key=lambda r: (_ORDER.get(r.get("type"), 7), taken(r)))


def flush(
    conn: sqlite3.Connection, policy: ScopePolicy, everything: bool
) -> tuple[dict[str, int], list[Change]]:
    """Delete memories (and orphaned entities/relations) of the writable scopes, or everything."""
    before = {
        t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("memories", "entities", "relations")
    }
    if everything:
        for table in ("memories", "relations", "entities", "vectors", "recall_log", "scopes"):
            conn.execute(f"DELETE FROM {table}")
    else:
        ids = [
            r[0]
            for r in conn.execute(
                f"SELECT id FROM scopes WHERE name IN ({','.join('?' * len(policy.writable))})",
                policy.writable,
            )
        ]
        inner = ",".join(str(i) for i in ids) or "NULL"
        only_writable = lambda table, col, alias: (  # noqa: E731
            f"NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id AND x.scope_id NOT IN ({inner}))"
        )
        conn.execute(
            f"DELETE FROM memories WHERE id IN (SELECT m.id FROM memories m WHERE {only_writable('memory_scopes', 'memory_id', 'm')})"
        )
        conn.execute(
            f"""DELETE FROM relations WHERE id IN (SELECT r.id FROM relations r WHERE {only_writable("relation_scopes", "relation_id", "r")}
                AND NOT EXISTS (SELECT 1 FROM memory_relations mr WHERE mr.relation_id = r.id))"""
        )
        conn.execute(
            f"""DELETE FROM entities WHERE id IN (SELECT e.id FROM entities e WHERE {only_writable("entity_scopes", "entity_id", "e")}
                AND NOT EXISTS (SELECT 1 FROM memory_entities me WHERE me.entity_id = e.id)
                AND NOT EXISTS (SELECT 1 FROM relations r WHERE r.source_id = e.id OR r.target_id = e.id))"""
        )
    after = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in before}
    return {f"deleted_{t}": before[t] - after[t] for t in before}, [Change(kind="reset")]


def schema_version(conn: sqlite3.Connection) -> int:
    return conn.execute("PRAGMA user_version").fetchone()[0]


LATEST_SCHEMA = schema.LATEST
