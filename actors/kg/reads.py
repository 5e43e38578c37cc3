"""The graph's read queries: pages of entities, relations, types and counts.

Each runs inside the read transaction its caller opened and sees what the
call's `Scoped` view makes visible. ``search_nodes`` is in `search`, the
traversals (paths, neighbors, subgraphs) in `traversal`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from .args import DescribeArgs, SearchRelationsArgs
from .lookup import OBS_TYPE_SQL, Ent, get_one, in_order, missing, resolve
from .records import JsonObject, entities_page, full_entity, page, relation_out
from .view import Scoped


def type_filter(entity_type: str | None) -> tuple[str, list[str]]:
    """The SQL condition (on alias ``e``) and parameters of an optional entityType filter."""
    return ("AND e.kind = ?", [entity_type]) if entity_type is not None else ("", [])


def read_graph(
    conn: sqlite3.Connection,
    sc: Scoped,
    offset: int,
    limit: int,
    mode: str,
    entity_type: str | None,
) -> JsonObject:
    tsql, tparams = type_filter(entity_type)
    total = conn.execute(
        f"SELECT count(*) FROM entities e WHERE {sc.entity()} {tsql}", tparams
    ).fetchone()[0]
    ents = [
        Ent(*row)
        for row in conn.execute(
            f"SELECT e.id, e.name, e.kind, e.canonical_name FROM entities e WHERE {sc.entity()} {tsql} ORDER BY e.id LIMIT ? OFFSET ?",
            [*tparams, limit, offset],
        )
    ]
    return entities_page(conn, sc, ents, mode, total, offset, sources_only=True)


def open_nodes(
    conn: sqlite3.Connection, sc: Scoped, names: Sequence[str], offset: int, limit: int, mode: str
) -> JsonObject:
    found = resolve(conn, sc, names)
    ordered = in_order(found, names)
    chosen = ordered[offset : offset + limit]
    return entities_page(conn, sc, chosen, mode, len(ordered), offset, missing(found, names))


def batch_get(
    conn: sqlite3.Connection, sc: Scoped, names: Sequence[str], offset: int, limit: int, mode: str
) -> JsonObject:
    result = open_nodes(conn, sc, names, offset, limit, mode)
    result.pop("relations", None)
    return result


def get_entity(conn: sqlite3.Connection, sc: Scoped, name: str) -> JsonObject | str:
    return full_entity(conn, sc, get_one(conn, sc, name))


def entity_exists(conn: sqlite3.Connection, sc: Scoped, names: Sequence[str]) -> JsonObject:
    found = resolve(conn, sc, names)
    unique = list(dict.fromkeys(names))
    return {
        "exists": {n: n in found for n in unique},
        "missing": missing(found, unique),
    }


def degree_of(conn: sqlite3.Connection, sc: Scoped, eid: int) -> dict[str, int]:
    out_deg = conn.execute(
        f"SELECT count(*) FROM relations r WHERE r.source_id = ? AND {sc.relation()}", (eid,)
    ).fetchone()[0]
    in_deg = conn.execute(
        f"SELECT count(*) FROM relations r WHERE r.target_id = ? AND {sc.relation()}", (eid,)
    ).fetchone()[0]
    return {"in": in_deg, "out": out_deg, "total": in_deg + out_deg}


def degree(conn: sqlite3.Connection, sc: Scoped, name: str) -> JsonObject:
    ent = get_one(conn, sc, name)
    return {"name": ent.name, **degree_of(conn, sc, ent.id)}


def graph_stats(conn: sqlite3.Connection, sc: Scoped) -> JsonObject:
    def one(sql: str) -> int:
        return conn.execute(sql).fetchone()[0]

    return {
        "entities": one(f"SELECT count(*) FROM entities e WHERE {sc.entity()}"),
        "relations": one(f"SELECT count(*) FROM relations r WHERE {sc.relation()}"),
        "observations": one(
            f"""SELECT count(*) FROM memory_entities me JOIN memories m ON m.id = me.memory_id
                WHERE {OBS_TYPE_SQL} AND {sc.memory()}"""
        ),
        "entityTypes": one(f"SELECT count(DISTINCT e.kind) FROM entities e WHERE {sc.entity()}"),
        "relationTypes": one(
            f"SELECT count(DISTINCT r.relation_type) FROM relations r WHERE {sc.relation()}"
        ),
        "scopes": list(sc.view.selection),
    }


def search_relations(conn: sqlite3.Connection, sc: Scoped, args: SearchRelationsArgs) -> JsonObject:
    """Relations filtered by any of their source, target and type, by id."""
    conds = [sc.relation()]
    params: list[int | str] = []
    rtype, offset = args.relationType, args.offset
    for name, col in ((args.from_, "r.source_id"), (args.to, "r.target_id")):
        if name is not None:
            ent = resolve(conn, sc, [name]).get(name)
            if ent is None:
                return {"relations": [], "total": 0, "nextOffset": None}
            conds.append(f"{col} = ?")
            params.append(ent.id)
    if rtype is not None:
        conds.append("r.relation_type = ?")
        params.append(rtype)
    where = " AND ".join(conds)
    total = conn.execute(f"SELECT count(*) FROM relations r WHERE {where}", params).fetchone()[0]
    rows = conn.execute(
        f"""SELECT s.name, r.relation_type, t.name FROM relations r JOIN entities s ON s.id = r.source_id
            JOIN entities t ON t.id = r.target_id WHERE {where} ORDER BY r.id LIMIT ? OFFSET ?""",
        [*params, args.limit, offset],
    ).fetchall()
    return {
        "relations": [relation_out(*r) for r in rows],
        "total": total,
        "nextOffset": page(total, offset, len(rows)),
    }


def describe_entity(conn: sqlite3.Connection, sc: Scoped, args: DescribeArgs) -> JsonObject:
    """One entity with its observations, degree and a page of its relations (outgoing first)."""
    ent = get_one(conn, sc, args.name)
    offset = args.offset
    rows = conn.execute(
        f"""SELECT s.name, r.relation_type, t.name, r.source_id = ? FROM relations r
            JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
            WHERE (r.source_id = ? OR r.target_id = ?) AND {sc.relation()}
            ORDER BY r.source_id != ?, r.id""",
        (ent.id, ent.id, ent.id, ent.id),
    ).fetchall()
    chosen = rows[offset : offset + args.limit]
    return {
        "entity": full_entity(conn, sc, ent),
        "degree": degree_of(conn, sc, ent.id),
        "outgoing": [{"relationType": r[1], "to": r[2]} for r in chosen if r[3]],
        "incoming": [{"from": r[0], "relationType": r[1]} for r in chosen if not r[3]],
        "total": len(rows),
        "nextOffset": page(len(rows), offset, len(chosen)),
    }


def list_types(
    conn: sqlite3.Connection, sc: Scoped, what: str, offset: int, limit: int
) -> JsonObject:
    if what == "entity":
        sql = f"SELECT e.kind, count(*) FROM entities e WHERE {sc.entity()} GROUP BY e.kind"
        key = "entityType"
    else:
        sql = f"SELECT r.relation_type, count(*) FROM relations r WHERE {sc.relation()} GROUP BY r.relation_type"
        key = "relationType"
    rows = conn.execute(f"{sql} ORDER BY 2 DESC, 1").fetchall()
    chosen = rows[offset : offset + limit]
    return {
        "types": [{key: t, "count": n} for t, n in chosen],
        "total": len(rows),
        "nextOffset": page(len(rows), offset, len(chosen)),
    }
