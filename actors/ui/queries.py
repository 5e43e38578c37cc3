"""The dashboard's own reads: what no tool answers (a filtered, sorted page of memories
with the entities each is about, a memory's access history, the distinct types, the
graph's most connected entities, this repository's recent recalls, the code index per
checkout, recent traces). Reads only; every write goes through a tool handler
(``actors.ui.api``)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..chaos import traceview
from ..kg.view import Scoped
from ..store.memories import MEMORY_COLUMNS, _memory_row, get_memory, visibility_sql, visible
from ..store.results import memory_fields
from ..store.scope_rows import memory_scope_names, scope_ids

SORTS = {
    "created": "m.created_at",
    "updated": "m.updated_at",
    "importance": "m.importance",
    "accessed": "m.access_count",
    "id": "m.id",
}
# recall_log rows scanned (newest first) for one memory's access history.
HISTORY_SCAN = 5000
HISTORY_LIMIT = 50
# recall_log rows scanned (newest first) for this repository's recent recall queries.
RECENT_SCAN = 2000


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories a page lists (``ids``: only these, e.g. the ranked ones of a search)."""

    selection: Sequence[str]
    memory_type: str | None = None
    since: float | None = None
    until: float | None = None
    min_importance: float | None = None
    only_scope: str | None = None
    ids: Sequence[int] | None = None

    def where(self, conn: sqlite3.Connection) -> tuple[str, list[Any]]:
        scope_map = scope_ids(conn, self.selection)
        clauses = [visibility_sql(list(scope_map.values()))]
        params: list[Any] = []
        if self.memory_type:
            clauses.append("m.memory_type = ? COLLATE NOCASE")
            params.append(self.memory_type)
        if self.since is not None:
            clauses.append("m.created_at >= ?")
            params.append(self.since)
        if self.until is not None:
            clauses.append("m.created_at < ?")
            params.append(self.until)
        if self.min_importance is not None:
            clauses.append("m.importance >= ?")
            params.append(self.min_importance)
        if self.only_scope:
            clauses.append(
                "EXISTS (SELECT 1 FROM memory_scopes ms JOIN scopes s ON s.id = ms.scope_id "
                "WHERE ms.memory_id = m.id AND s.name = ?)"
            )
            params.append(self.only_scope)
        if self.ids is not None:
            clauses.append(f"m.id IN ({','.join(str(int(i)) for i in self.ids) or 'NULL'})")
        return " AND ".join(clauses), params


def page_of_memories(
    conn: sqlite3.Connection,
    chosen: MemoryFilter,
    sort: str,
    descending: bool,
    offset: int,
    limit: int,
) -> tuple[list[dict[str, Any]], int]:
    """One page of the memories ``chosen`` selects, sorted; and how many there are in all."""
    where, params = chosen.where(conn)
    total = conn.execute(f"SELECT count(*) FROM memories m WHERE {where}", params).fetchone()[0]
    order = f"{SORTS.get(sort, 'm.id')} {'DESC' if descending else 'ASC'}, m.id DESC"
    columns = ", ".join("m." + c.strip() for c in MEMORY_COLUMNS.split(","))
    rows = conn.execute(
        f"SELECT {columns} FROM memories m WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?",
        [*params, limit, offset],
    ).fetchall()
    out = []
    for row in rows:
        memory = _memory_row(row)
        memory["scopes"] = memory_scope_names(conn, memory["id"])
        memory["entities"] = memory_entities(conn, memory["id"])
        out.append(memory)
    return out, total


def memory_entities(conn: sqlite3.Connection, memory_id: int) -> list[dict[str, Any]]:
    """The entities a memory is about, by name (a knowledge-graph observation: its entity),
    in the shape ``get_memory`` gives them."""
    rows = conn.execute(
        "SELECT e.id, e.name, e.kind FROM memory_entities me JOIN entities e ON e.id = me.entity_id "
        "WHERE me.memory_id = ? ORDER BY e.name",
        (memory_id,),
    )
    return [{"id": i, "name": name, "kind": kind} for i, name, kind in rows]


def graph_overview(conn: sqlite3.Connection, sc: Scoped, limit: int, edges: int) -> dict[str, Any]:
    """What the Graph page opens on: the whole visible graph when it has at most ``limit``
    entities, else the ``limit`` most connected ones (by relation count); with the
    relations among them (at most ``edges``) and each one's degree."""
    total = conn.execute(f"SELECT count(*) FROM entities e WHERE {sc.entity()}").fetchone()[0]
    degree = f"""SELECT n, count(*) AS d FROM (
        SELECT r.source_id AS n FROM relations r WHERE {sc.relation()}
        UNION ALL SELECT r.target_id AS n FROM relations r WHERE {sc.relation()}) GROUP BY n"""
    rows = conn.execute(
        f"""SELECT e.id, e.name, e.kind, coalesce(g.d, 0) FROM entities e
            LEFT JOIN ({degree}) g ON g.n = e.id WHERE {sc.entity()}
            ORDER BY coalesce(g.d, 0) DESC, e.id LIMIT ?""",
        (limit,),
    ).fetchall()
    names = {eid: name for eid, name, _, _ in rows}
    inner = ",".join(str(int(i)) for i in names) or "NULL"
    links = conn.execute(
        f"""SELECT r.source_id, r.relation_type, r.target_id FROM relations r
            WHERE r.source_id IN ({inner}) AND r.target_id IN ({inner}) AND {sc.relation()}
            ORDER BY r.id LIMIT ?""",
        (edges + 1,),
    ).fetchall()
    return {
        "entities": [{"name": n, "entityType": k, "degree": d} for _, n, k, d in rows],
        "relations": [
            {"from": names[s], "relationType": t, "to": names[o]} for s, t, o in links[:edges]
        ],
        "total": total,
        "truncated": total > len(rows) or len(links) > edges,
    }


def recent_queries(
    conn: sqlite3.Connection, selection: Sequence[str], limit: int
) -> list[dict[str, Any]]:
    """The last ``limit`` distinct recall queries (newest first) that read only scopes of
    ``selection`` (this repository's and ``global``: another repository's recalls are not
    shown), with when and how many memories each returned."""
    found: dict[str, dict[str, Any]] = {}
    readable = set(selection)
    rows = conn.execute(
        "SELECT ts, query, scopes, ids FROM recall_log WHERE kind = 'recall' ORDER BY id DESC "
        "LIMIT ?",
        (RECENT_SCAN,),
    )
    for ts, query, scopes, ids in rows:
        try:
            selected, returned = json.loads(scopes), json.loads(ids)
        except ValueError:
            continue
        if not (isinstance(selected, list) and isinstance(returned, list)):
            continue
        if not set(map(str, selected)) <= readable or not query.strip() or query in found:
            continue
        at = memory_fields({"created_at": ts})["created_at"]
        found[query] = {"query": query, "at": at, "memories": len(returned)}
        if len(found) >= limit:
            break
    return list(found.values())


def memory_details(
    conn: sqlite3.Connection, memory_id: int, selection: Sequence[str]
) -> dict[str, Any] | None:
    """A memory with its scopes, entities, relations and access history (None: not visible).

    Unlike ``inspect`` this does not count as an access: looking at the dashboard
    must not change what recall ranks.
    """
    memory = get_memory(conn, memory_id)
    if memory is None or not visible(memory["scopes"], selection):
        return None
    memory["history"] = access_history(conn, memory_id)
    return memory


def access_history(conn: sqlite3.Connection, memory_id: int) -> list[dict[str, Any]]:
    """The recalls and inspections that returned ``memory_id``, newest first."""
    found = []
    rows = conn.execute(
        "SELECT ts, kind, query, ids, scores FROM recall_log ORDER BY id DESC LIMIT ?",
        (HISTORY_SCAN,),
    )
    for ts, kind, query, ids, scores in rows:
        try:
            id_list, score_list = json.loads(ids), json.loads(scores)
        except ValueError:
            continue
        if memory_id in id_list:
            at = id_list.index(memory_id)
            score = score_list[at] if at < len(score_list) else None
            found.append(
                {"at": memory_fields({"created_at": ts})["created_at"], "kind": kind,
                 "query": query, "rank": at + 1, "score": score}
            )  # fmt: skip
            if len(found) >= HISTORY_LIMIT:
                break
    return found


def memory_types(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT min(memory_type), count(*) FROM memories GROUP BY memory_type COLLATE NOCASE "
        "ORDER BY count(*) DESC, 1"
    )
    return [{"name": name, "memories": count} for name, count in rows]


def code_checkouts(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Each indexed checkout: files, indexed files, languages, coverage, last refresh."""
    out = []
    for cid, root, source, indexed, refreshed in conn.execute(
        "SELECT id, root, source_files, indexed_files, refreshed_at FROM checkouts ORDER BY root"
    ).fetchall():
        languages = {
            lang: n
            for lang, n in conn.execute(
                "SELECT language, count(*) FROM files WHERE checkout = ? GROUP BY language "
                "ORDER BY count(*) DESC",
                (cid,),
            )
        }
        coverage = {
            str(cov or "full"): n
            for cov, n in conn.execute(
                "SELECT coverage, count(*) FROM files WHERE checkout = ? GROUP BY coverage", (cid,)
            )
        }
        skipped = conn.execute(
            "SELECT count(*) FROM files WHERE checkout = ? AND skipped IS NOT NULL", (cid,)
        ).fetchone()[0]
        out.append(
            {"root": root, "source_files": source, "indexed_files": indexed,
             "languages": languages, "coverage": coverage, "skipped": skipped,
             "refreshed_at": memory_fields({"created_at": refreshed})["created_at"]
             if refreshed else None}
        )  # fmt: skip
    return out


def recent_traces(log: Path, limit: int) -> list[dict[str, Any]]:
    """The last ``limit`` requests of the trace log as span timelines (offsets in ms from
    the request's start), newest first."""
    try:
        traces = traceview.requests(traceview.build(traceview.read_records(log)))
    except traceview.TraceError:
        return []
    out = []
    for trace in reversed(traces[-limit:]):
        origin = min(s.start for s in trace.roots)
        spans: list[dict[str, Any]] = []
        for root in trace.roots:
            _walk(root, 0, origin, spans)
        out.append(
            {"trace_id": trace.trace_id, "tool": trace.root.record.get("tool"),
             "duration_ms": round(trace.root.duration, 3),
             "outcome": trace.root.record.get("outcome", "ok"),
             "at": memory_fields({"created_at": trace.end})["created_at"], "spans": spans}
        )  # fmt: skip
    return out


def _walk(span: traceview.Span, depth: int, origin: float, into: list[dict[str, Any]]) -> None:
    """``span`` and its children, depth first, as timeline rows."""
    rec = span.record
    into.append(
        {"actor": rec.get("actor", "?"), "name": rec.get("name", "?"), "tool": rec.get("tool"),
         "depth": depth, "start_ms": round((span.start - origin) * 1000, 3),
         "duration_ms": round(span.duration, 3), "outcome": rec.get("outcome", "ok"),
         "error": rec.get("error")}
    )  # fmt: skip
    for child in span.children:
        _walk(child, depth + 1, origin, into)
