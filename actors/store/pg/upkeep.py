"""`interfaces.upkeep.Upkeep` on PostgreSQL, in PostgreSQL's own dialect (`PgConnection.native`).

SQLite's upkeep has nothing to do here (autovacuum keeps the tables, GIN indexes need no
merge, there is no WAL file to checkpoint): those methods report nothing done.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ..interfaces.memories import StoreCounts
from ..interfaces.upkeep import (
    EntityRow,
    FlushCounts,
    IdTable,
    MemoryRow,
    RelationRow,
    Scoped,
    ScopeRow,
    VectorRow,
)
from ..rows import upkeep as shared
from ..rows.scopes import SCOPE_LINKS
from . import schema as pg_schema
from .conn import SQLITE_EQUIVALENT, PgConnection

_TRIPLE = """SELECT s.name, r.relation_type, t.name FROM relations r
    JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id WHERE r.id = %s"""
_BATCH = 500  # rows fetched at a time by the export's streams


class PgUpkeep:
    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn

    def _one(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        row = self.conn.native(sql, params).fetchone()
        return row[0] if row else None

    def _stream(self, sql: str) -> Iterator[tuple[Any, ...]]:
        cur = self.conn.native(sql)
        while rows := cur.fetchmany(_BATCH):
            yield from rows

    # -- health and maintenance ---------------------------------------------------------

    def _count(self, table: str) -> int:
        return int(self._one(f"SELECT count(*) FROM {table}"))

    def counts(self) -> StoreCounts:
        return shared.store_counts(self._count)

    def _schema_version(self) -> int:
        if not self._one("SELECT to_regclass('meta') IS NOT NULL"):
            return 0
        value = self._one("SELECT value FROM meta WHERE key = 'schema_version'")
        return int(value) if value is not None else 0

    def report(self) -> dict[str, str | int]:
        server = self._one("SHOW server_version")
        extensions = dict(
            self.conn.native(
                "SELECT extname, extversion FROM pg_extension WHERE extname IN ('vector', 'pg_trgm')"
            ).fetchall()
        )
        broken = [
            r[0]
            for r in self.conn.native(
                """SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                   JOIN pg_namespace n ON n.oid = c.relnamespace
                   WHERE n.nspname = current_schema() AND NOT (i.indisvalid AND i.indisready)"""
            ).fetchall()
        ]
        size = self._one("SELECT pg_database_size(current_database())")
        return {
            "postgresql": str(server) if server is not None else "?",
            "extensions": ", ".join(f"{k} {v}" for k, v in sorted(extensions.items())) or "none",
            "schema_version": self._schema_version(),
            "latest_schema_version": pg_schema.LATEST,
            "integrity": "ok" if not broken else "invalid indexes: " + ", ".join(broken),
            "fts_integrity": "ok"
            if {"memories_fts", "entities_fts"}.isdisjoint(broken)
            else "failed",
            "database_bytes": int(size) if size is not None else 0,
        }

    def record_version(self) -> int:
        return SQLITE_EQUIVALENT

    def data_version(self) -> int:
        return int(self._one("SELECT pg_snapshot_xmax(pg_current_snapshot())::text"))

    # -- flush ----------------------------------------------------------------------------

    def _counts(self) -> list[int]:
        return [self._count(table) for table in shared.FLUSHED]

    def flush(self, writable: Sequence[str], everything: bool) -> FlushCounts:
        native = self.conn.native
        before = self._counts()
        if everything:
            for table in ("memories", "relations", "entities", "vectors", "recall_log", "scopes"):
                native(f"DELETE FROM {table}")
        else:
            ids = [
                int(r[0])
                for r in native(
                    "SELECT id FROM scopes WHERE name = ANY(%s)", (list(writable),)
                ).fetchall()
            ]

            def only_writable(table: str, col: str, alias: str) -> str:
                return (
                    f"NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id "
                    "AND x.scope_id <> ALL(%(ids)s))"
                )

            args = {"ids": ids}
            native(
                "DELETE FROM memories WHERE id IN (SELECT m.id FROM memories m "
                f"WHERE {only_writable('memory_scopes', 'memory_id', 'm')})",
                args,
            )
            native(
                "DELETE FROM relations WHERE id IN (SELECT r.id FROM relations r "
                f"WHERE {only_writable('relation_scopes', 'relation_id', 'r')} "
                "AND NOT EXISTS (SELECT 1 FROM memory_relations mr WHERE mr.relation_id = r.id))",
                args,
            )
            native(
                "DELETE FROM entities WHERE id IN (SELECT e.id FROM entities e "
                f"WHERE {only_writable('entity_scopes', 'entity_id', 'e')} "
                "AND NOT EXISTS (SELECT 1 FROM memory_entities me WHERE me.entity_id = e.id) "
                "AND NOT EXISTS (SELECT 1 FROM relations r "
                "WHERE r.source_id = e.id OR r.target_id = e.id))",
                args,
            )
        return shared.flush_counts(before, self._counts())

    # -- export -----------------------------------------------------------------------------

    def _scopes_of(self, kind: Scoped, item: int) -> list[str]:
        table = SCOPE_LINKS[kind]
        rows = self.conn.native(
            f"SELECT s.name FROM {table} x JOIN scopes s ON s.id = x.scope_id "
            f"WHERE x.{kind}_id = %s",
            (item,),
        ).fetchall()
        return sorted(r[0] for r in rows)

    def _triple(self, relation_id: int) -> list[str] | None:
        row = self.conn.native(_TRIPLE, (relation_id,)).fetchone()
        return list(row) if row else None

    def scopes(self) -> Iterator[ScopeRow]:
        for sid, name in self._stream("SELECT id, name FROM scopes ORDER BY id"):
            yield ScopeRow(id=sid, name=name)

    def entities(self) -> Iterator[EntityRow]:
        for row in self._stream(f"SELECT {shared.ENTITY_COLUMNS} FROM entities ORDER BY id"):
            yield shared.entity_row(row, self._scopes_of("entity", row[0]))

    def relations(self) -> Iterator[RelationRow]:
        for row in self._stream(
            """SELECT r.id, s.name, r.relation_type, t.name, r.metadata, r.created_at
               FROM relations r JOIN entities s ON s.id = r.source_id
               JOIN entities t ON t.id = r.target_id ORDER BY r.id"""
        ):
            yield shared.relation_row(row, self._scopes_of("relation", row[0]))

    def memories(self) -> Iterator[MemoryRow]:
        for row in self._stream(f"SELECT {shared.MEMORY_COLUMNS} FROM memories ORDER BY id"):
            mid = row[0]
            entities = self.conn.native(
                "SELECT e.name FROM memory_entities me JOIN entities e ON e.id = me.entity_id "
                "WHERE me.memory_id = %s",
                (mid,),
            ).fetchall()
            relations = self.conn.native(
                "SELECT relation_id FROM memory_relations WHERE memory_id = %s", (mid,)
            ).fetchall()
            triples = [self._triple(rid) for (rid,) in relations]
            yield shared.memory_row(row, self._scopes_of("memory", mid), entities, triples)

    def vectors(self) -> Iterator[VectorRow]:
        for row in self._stream(
            f"SELECT {shared.VECTOR_COLUMNS} FROM vectors ORDER BY kind, item_id"
        ):
            kind, item, model, revision = row[:4]
            key: int | str | list[str] | None
            if kind == "memory":
                key = item
            elif kind == "entity":
                key = self._one("SELECT name FROM entities WHERE id = %s", (item,))
            else:
                key = self._triple(item)
            if key is None:
                continue  # a vector of a row that no longer exists
            chunks = self.conn.native(
                "SELECT vec FROM vector_chunks WHERE kind = %s AND item_id = %s AND model = %s "
                "AND revision = %s ORDER BY chunk",
                (kind, item, model, revision),
            ).fetchall()
            yield shared.vector_row(row, key, chunks)

    # -- import -----------------------------------------------------------------------------

    def next_id(self, table: IdTable, at_least: int) -> int:
        name = shared.id_table(table)
        top = self._one(f"SELECT max(id) FROM {name}") or 0
        seq = self._one("SELECT seq FROM id_marks WHERE name = %s", (name,)) or 0
        return int(max(top, seq, at_least)) + 1

    def id_free(self, table: IdTable, item: int) -> bool:
        name = shared.id_table(table)
        return self._one(f"SELECT 1 FROM {name} WHERE id = %s", (item,)) is None

    def add_scope(self, name: str) -> int:
        found = self._one("SELECT id FROM scopes WHERE name = %s", (name,))
        if found is not None:
            return int(found)
        return int(self._one("INSERT INTO scopes (name) VALUES (%s) RETURNING id", (name,)))

    def link_scopes(self, kind: Scoped, item: int, names: Sequence[str]) -> None:
        table = SCOPE_LINKS[kind]
        for name in names:
            self.conn.native(
                f"INSERT INTO {table} ({kind}_id, scope_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (item, self.add_scope(name)),
            )

    def entity_id(self, name: str) -> int | None:
        found = self._one("SELECT id FROM entities WHERE name = %s", (name,))
        return int(found) if found is not None else None

    def add_entity(self, row: EntityRow) -> int:
        return int(
            self._one(
                f"INSERT INTO entities ({shared.ENTITY_COLUMNS}) "
                "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                shared.entity_values(row),
            )
        )

    def relation_id(self, source_id: int, relation_type: str, target_id: int) -> int | None:
        found = self._one(
            "SELECT id FROM relations WHERE source_id = %s AND relation_type = %s "
            "AND target_id = %s",
            (source_id, relation_type, target_id),
        )
        return int(found) if found is not None else None

    def add_relation(self, row: RelationRow, source_id: int, target_id: int) -> int:
        return int(
            self._one(
                "INSERT INTO relations (id, source_id, target_id, relation_type, metadata, "
                "created_at) VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                (row.id, source_id, target_id, row.relation_type, row.metadata, row.created_at),
            )
        )

    def memory_present(self, memory_id: int, content: str, created_at: float) -> bool:
        return (
            self._one(
                "SELECT 1 FROM memories WHERE id = %s AND content = %s AND created_at = %s",
                (memory_id, content, created_at),
            )
            is not None
        )

    def add_memory(self, row: MemoryRow) -> int:
        return int(
            self._one(
                f"INSERT INTO memories ({shared.MEMORY_COLUMNS}) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                shared.memory_values(row),
            )  # fmt: skip
        )

    def link_memory(
        self, memory_id: int, entity_ids: Sequence[int], relation_ids: Sequence[int]
    ) -> None:
        for eid in entity_ids:
            self.conn.native(
                "INSERT INTO memory_entities (memory_id, entity_id) VALUES (%s, %s) "
                "ON CONFLICT DO NOTHING",
                (memory_id, eid),
            )
        for rid in relation_ids:
            self.conn.native(
                "INSERT INTO memory_relations (memory_id, relation_id) VALUES (%s, %s) "
                "ON CONFLICT DO NOTHING",
                (memory_id, rid),
            )
