"""`interfaces.upkeep.Upkeep` on PostgreSQL, in PostgreSQL's own dialect (`PgConnection.native`).

SQLite's upkeep has nothing to do here (autovacuum keeps the tables, GIN indexes need no
merge, there is no WAL file to checkpoint): those methods report nothing done.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..rows import upkeep as shared
from ..rows.sql import Params
from . import schema as pg_schema
from .conn import SQLITE_EQUIVALENT
from .statements import PgRows

_BATCH = 500  # rows fetched at a time by the export's streams


class PgUpkeep(shared.UpkeepBase, PgRows):
    MARK = "%s"
    SCOPES_OF = (
        "SELECT s.name FROM {table} x JOIN scopes s ON s.id = x.scope_id WHERE x.{kind}_id = %s"
    )
    TRIPLE = """SELECT s.name, r.relation_type, t.name FROM relations r
        JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
        WHERE r.id = %s"""
    ENTITY_NAME = "SELECT name FROM entities WHERE id = %s"
    MEMORY_ENTITIES = (
        "SELECT e.name FROM memory_entities me JOIN entities e ON e.id = me.entity_id"
        " WHERE me.memory_id = %s"
    )
    MEMORY_RELATIONS = "SELECT relation_id FROM memory_relations WHERE memory_id = %s"
    LATER_WINDOWS = (
        "SELECT vec FROM vector_chunks WHERE kind = %s AND item_id = %s AND model = %s"
        " AND revision = %s ORDER BY chunk"
    )
    SEQ = "SELECT seq FROM id_marks WHERE name = %s"
    ID_TAKEN = "SELECT 1 FROM {table} WHERE id = %s"
    SCOPE_ID = "SELECT id FROM scopes WHERE name = %s"
    ADD_SCOPE = "INSERT INTO scopes (name) VALUES (%s) RETURNING id"
    LINK_SCOPE = "INSERT INTO {table} ({kind}_id, scope_id) VALUES (%s, %s) ON CONFLICT DO NOTHING"
    ENTITY_ID = "SELECT id FROM entities WHERE name = %s"
    ADD_ENTITY = (
        f"INSERT INTO entities ({shared.ENTITY_COLUMNS})"
        " VALUES (%s, %s, %s, %s, %s, %s) RETURNING id"
    )
    RELATION_ID = (
        "SELECT id FROM relations WHERE source_id = %s AND relation_type = %s AND target_id = %s"
    )
    ADD_RELATION = (
        "INSERT INTO relations (id, source_id, target_id, relation_type, metadata, created_at)"
        " VALUES (%s, %s, %s, %s, %s, %s) RETURNING id"
    )
    MEMORY_PRESENT = "SELECT 1 FROM memories WHERE id = %s AND content = %s AND created_at = %s"
    ADD_MEMORY = (
        f"INSERT INTO memories ({shared.MEMORY_COLUMNS})"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id"
    )
    LINK_ENTITY = (
        "INSERT INTO memory_entities (memory_id, entity_id) VALUES (%s, %s) ON CONFLICT DO NOTHING"
    )
    LINK_RELATION = (
        "INSERT INTO memory_relations (memory_id, relation_id) VALUES (%s, %s)"
        " ON CONFLICT DO NOTHING"
    )

    def only_writable(self, ids: list[int]) -> tuple[str, Params]:
        return (
            "NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id"
            " AND x.scope_id <> ALL(%(ids)s))"
        ), {"ids": ids}

    def _one(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        row = self.conn.native(sql, params).fetchone()
        return row[0] if row else None

    # -- health and maintenance ---------------------------------------------------------

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

    # -- export -----------------------------------------------------------------------------

    # -- import -----------------------------------------------------------------------------
