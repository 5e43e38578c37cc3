"""`interfaces.vectors.Vectors` on SQLite, in SQLite's dialect."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence

from ..interfaces.vectors import (
    EntityEmbedding,
    EntityRef,
    EntityText,
    MemoryText,
    RelationText,
    StoredWindow,
    Visibility,
    Windows,
)

SQL_CHUNK = 500  # ids per statement: well under SQLite's bound parameter limit
TABLES = {"memory": "memories", "entity": "entities", "relation": "relations"}


def _parts(ids: Sequence[int]) -> Iterator[list[int]]:
    items = [int(i) for i in ids]
    for start in range(0, len(items), SQL_CHUNK):
        yield items[start : start + SQL_CHUNK]


def _marks(n: int) -> str:
    return ",".join("?" * n)


def _table(kind: str) -> str:
    try:
        return TABLES[kind]
    except KeyError:
        raise ValueError(f"no such kind of item: {kind!r}") from None


def _visible(scopes: Visibility, table: str, col: str, alias: str) -> str:
    """The condition that row ``alias`` of ``table``'s owner is visible in ``scopes``."""
    if scopes is None:
        return "(1 = 1)"
    inner = ",".join(str(int(i)) for i in scopes) or "NULL"
    return (
        f"(EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id AND x.scope_id IN ({inner}))"
        f" OR NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id))"
    )


_UPSERT = """INSERT INTO vectors (kind, item_id, model, revision, dim, vec) VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (kind, item_id) DO UPDATE SET model = excluded.model, revision = excluded.revision,
        dim = excluded.dim, vec = excluded.vec"""


class SqliteVectors:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    # -- the local model's windows -----------------------------------------------------------

    def put(self, kind: str, item_id: int, windows: Windows, *, replace: bool) -> bool:
        first = (kind, item_id, windows.model, windows.revision, windows.dim, windows.chunks[0])
        if replace:
            self.conn.execute(_UPSERT, first)
        else:
            cur = self.conn.execute(
                _UPSERT
                + " WHERE vectors.model != excluded.model OR vectors.revision != excluded.revision",
                first,
            )
            if cur.rowcount == 0:
                return False
        # Writing the ``vectors`` row deleted the item's old chunks (a trigger).
        if len(windows.chunks) > 1:
            self.conn.executemany(
                "INSERT INTO vector_chunks (kind, item_id, chunk, model, revision, dim, vec) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (kind, item_id, i, windows.model, windows.revision, windows.dim, blob)
                    for i, blob in enumerate(windows.chunks[1:], start=1)
                ],
            )
        return True

    def drop(self, kind: str, item_id: int) -> None:
        self.conn.execute("DELETE FROM vectors WHERE kind = ? AND item_id = ?", (kind, item_id))

    def windows_of(
        self, kind: str, ids: Sequence[int], model: str, revision: str, dim: int
    ) -> dict[int, list[bytes]]:
        out: dict[int, list[bytes]] = {}
        for part in _parts(ids):
            key = (kind, model, revision, dim, *part)
            for item_id, blob in self.conn.execute(
                f"""SELECT item_id, vec FROM vectors
                    WHERE kind = ? AND model = ? AND revision = ? AND dim = ?
                      AND item_id IN ({_marks(len(part))})""",
                key,
            ):
                out[item_id] = [blob]
            if not out:
                continue
            for item_id, blob in self.conn.execute(
                f"""SELECT item_id, vec FROM vector_chunks
                    WHERE kind = ? AND model = ? AND revision = ? AND dim = ?
                      AND item_id IN ({_marks(len(part))})
                    ORDER BY item_id, chunk""",
                key,
            ):
                if item_id in out:
                    out[item_id].append(blob)
        return out

    def lacking(self, kind: str, model: str, revision: str, after: int, limit: int) -> list[int]:
        rows = self.conn.execute(
            f"""SELECT t.id FROM {_table(kind)} t
                LEFT JOIN vectors v ON v.kind = ? AND v.item_id = t.id AND v.model = ? AND v.revision = ?
                WHERE t.id > ? AND v.item_id IS NULL ORDER BY t.id LIMIT ?""",
            (kind, model, revision, after, limit),
        )
        return [int(r[0]) for r in rows]

    def count_lacking(self, kind: str, model: str, revision: str) -> int:
        row = self.conn.execute(
            f"""SELECT count(*) FROM {_table(kind)} t
                LEFT JOIN vectors v ON v.kind = ? AND v.item_id = t.id AND v.model = ? AND v.revision = ?
                WHERE v.item_id IS NULL""",
            (kind, model, revision),
        ).fetchone()
        return int(row[0])

    def existing(self, kind: str, ids: Sequence[int]) -> set[int]:
        table = _table(kind)
        out: set[int] = set()
        for part in _parts(ids):
            out.update(
                int(r[0])
                for r in self.conn.execute(
                    f"SELECT id FROM {table} WHERE id IN ({_marks(len(part))})", part
                )
            )
        return out

    def memory_texts(self, ids: Sequence[int]) -> list[MemoryText]:
        out: list[MemoryText] = []
        for part in _parts(ids):
            rows = self.conn.execute(
                f"SELECT id, content FROM memories WHERE id IN ({_marks(len(part))}) ORDER BY id",
                part,
            )
            out.extend(MemoryText(int(i), c) for i, c in rows)
        return out

    def entity_texts(self, ids: Sequence[int]) -> list[EntityText]:
        out: list[EntityText] = []
        for part in _parts(ids):
            rows = self.conn.execute(
                f"SELECT id, name, kind FROM entities WHERE id IN ({_marks(len(part))}) ORDER BY id",
                part,
            )
            out.extend(EntityText(int(i), n, k) for i, n, k in rows)
        return out

    def relation_texts(self, ids: Sequence[int]) -> list[RelationText]:
        out: list[RelationText] = []
        for part in _parts(ids):
            rows = self.conn.execute(
                f"""SELECT r.id, s.name, r.relation_type, t.name FROM relations r
                    JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
                    WHERE r.id IN ({_marks(len(part))}) ORDER BY r.id""",
                part,
            )
            out.extend(RelationText(int(i), s, rt, t) for i, s, rt, t in rows)
        return out

    def windows_after(self, after: tuple[str, int] | None, limit: int) -> list[StoredWindow]:
        last = after or ("", -1)
        rows = self.conn.execute(
            "SELECT kind, item_id, dim, vec FROM vectors WHERE (kind, item_id) > (?, ?) "
            "ORDER BY kind, item_id LIMIT ?",
            (*last, limit),
        ).fetchall()
        return [StoredWindow(k, int(i), 0, d, v) for k, i, d, v in rows]

    def chunks_after(self, after: tuple[str, int, int] | None, limit: int) -> list[StoredWindow]:
        last = after or ("", -1, -1)
        rows = self.conn.execute(
            "SELECT kind, item_id, chunk, dim, vec FROM vector_chunks "
            "WHERE (kind, item_id, chunk) > (?, ?, ?) ORDER BY kind, item_id, chunk LIMIT ?",
            (*last, limit),
        ).fetchall()
        return [StoredWindow(k, int(i), int(c), d, v) for k, i, c, d, v in rows]

    # -- the clients' entity embeddings ------------------------------------------------------

    def put_embedding(
        self, entity_id: int, model: str, dim: int, vec: bytes, updated_at: float
    ) -> bool:
        had = self.conn.execute(
            "SELECT 1 FROM entity_embeddings WHERE entity_id = ?", (entity_id,)
        ).fetchone()
        self.conn.execute(
            """INSERT INTO entity_embeddings (entity_id, model, dim, vec, updated_at)
               VALUES (?, ?, ?, ?, ?)
               ON CONFLICT (entity_id) DO UPDATE SET model = excluded.model, dim = excluded.dim,
                   vec = excluded.vec, updated_at = excluded.updated_at""",
            (entity_id, model, dim, vec, updated_at),
        )
        return had is None

    def delete_embedding(self, entity_id: int) -> bool:
        cur = self.conn.execute("DELETE FROM entity_embeddings WHERE entity_id = ?", (entity_id,))
        return cur.rowcount > 0

    def embeddings_of(self, ids: Sequence[int]) -> dict[int, EntityEmbedding]:
        out: dict[int, EntityEmbedding] = {}
        for part in _parts(ids):
            for eid, model, dim, vec in self.conn.execute(
                "SELECT entity_id, model, dim, vec FROM entity_embeddings "
                f"WHERE entity_id IN ({_marks(len(part))})",
                part,
            ):
                out[eid] = EntityEmbedding(eid, model, dim, vec)
        return out

    def embeddings_after(self, after: int, dim: int | None, limit: int) -> list[EntityEmbedding]:
        if dim is None:
            rows = self.conn.execute(
                "SELECT entity_id, model, dim, vec FROM entity_embeddings WHERE entity_id > ? "
                "ORDER BY entity_id LIMIT ?",
                (after, limit),
            )
        else:
            rows = self.conn.execute(
                "SELECT entity_id, model, dim, vec FROM entity_embeddings "
                "WHERE entity_id > ? AND dim = ? ORDER BY entity_id LIMIT ?",
                (after, dim, limit),
            )
        return [EntityEmbedding(int(e), m, d, v) for e, m, d, v in rows]

    def embedding_counts(self, dim: int) -> tuple[int, int]:
        row = self.conn.execute(
            "SELECT count(*) FILTER (WHERE dim = ?), count(*) FILTER (WHERE dim != ?) "
            "FROM entity_embeddings",
            (dim, dim),
        ).fetchone()
        return int(row[0]), int(row[1])

    # -- the entities the vector tools read --------------------------------------------------

    def visible_entities(
        self, ids: Sequence[int], scopes: Visibility, entity_type: str | None
    ) -> dict[int, EntityRef]:
        vis = _visible(scopes, "entity_scopes", "entity_id", "e")
        typed = "" if entity_type is None else "AND e.kind = ?"
        out: dict[int, EntityRef] = {}
        for part in _parts(ids):
            params: list[object] = [*part] if entity_type is None else [*part, entity_type]
            for i, name, kind, canonical in self.conn.execute(
                "SELECT e.id, e.name, e.kind, e.canonical_name FROM entities e "
                f"WHERE e.id IN ({_marks(len(part))}) AND {vis} {typed}",
                params,
            ):
                out[int(i)] = EntityRef(int(i), name, kind, canonical)
        return out

    def embedded_entities(self, dim: int, scopes: Visibility, entity_type: str | None) -> set[int]:
        vis = _visible(scopes, "entity_scopes", "entity_id", "e")
        typed = "" if entity_type is None else "AND e.kind = ?"
        params: list[object] = [dim] if entity_type is None else [dim, entity_type]
        rows = self.conn.execute(
            "SELECT e.id FROM entity_embeddings v JOIN entities e ON e.id = v.entity_id "
            f"WHERE v.dim = ? AND {vis} {typed}",
            params,
        )
        return {int(r[0]) for r in rows}

    def count_embedded(self, dim: int, scopes: Visibility) -> int:
        vis = _visible(scopes, "entity_scopes", "entity_id", "e")
        row = self.conn.execute(
            "SELECT count(*) FROM entity_embeddings v JOIN entities e ON e.id = v.entity_id "
            f"WHERE v.dim = ? AND {vis}",
            (dim,),
        ).fetchone()
        return int(row[0])

    def relation_ends(self, scopes: Visibility) -> list[tuple[int, int]]:
        vis = _visible(scopes, "relation_scopes", "relation_id", "r")
        rows = self.conn.execute(f"SELECT r.source_id, r.target_id FROM relations r WHERE {vis}")
        return [(int(s), int(t)) for s, t in rows]
