"""The graph's read queries: pages of entities, relations, types and counts.

Each runs inside the read transaction its caller opened and sees what the
call's `Scoped` view makes visible. ``search_nodes`` is in `search`, the
traversals (paths, neighbors, subgraphs) in `traversal`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..store.interfaces import ReadTx
from .args import DescribeArgs, SearchRelationsArgs
from .lookup import ent_of, get_one, in_order, missing, resolve
from .records import JsonObject, entities_page, full_entity, page, relation_out
from .view import Scoped


def read_graph(
    tx: ReadTx,
    sc: Scoped,
    offset: int,
    limit: int,
    mode: str,
    entity_type: str | None,
) -> JsonObject:
    total = tx.graph.count_entities(sc.ids, entity_type)
    ents = [ent_of(e) for e in tx.graph.entity_page(sc.ids, entity_type, offset, limit)]
    return entities_page(tx, sc, ents, mode, total, offset, sources_only=True)


def open_nodes(
    tx: ReadTx, sc: Scoped, names: Sequence[str], offset: int, limit: int, mode: str
) -> JsonObject:
    found = resolve(tx, sc, names)
    ordered = in_order(found, names)
    chosen = ordered[offset : offset + limit]
    return entities_page(tx, sc, chosen, mode, len(ordered), offset, missing(found, names))


def batch_get(
    tx: ReadTx, sc: Scoped, names: Sequence[str], offset: int, limit: int, mode: str
) -> JsonObject:
    result = open_nodes(tx, sc, names, offset, limit, mode)
    result.pop("relations", None)
    return result


def get_entity(tx: ReadTx, sc: Scoped, name: str) -> JsonObject | str:
    return full_entity(tx, sc, get_one(tx, sc, name))


def entity_exists(tx: ReadTx, sc: Scoped, names: Sequence[str]) -> JsonObject:
    found = resolve(tx, sc, names)
    unique = list(dict.fromkeys(names))
    return {
        "exists": {n: n in found for n in unique},
        "missing": missing(found, unique),
    }


def degree_of(tx: ReadTx, sc: Scoped, eid: int) -> dict[str, int]:
    in_deg, out_deg = tx.graph.degree(eid, sc.ids)
    return {"in": in_deg, "out": out_deg, "total": in_deg + out_deg}


def degree(tx: ReadTx, sc: Scoped, name: str) -> JsonObject:
    ent = get_one(tx, sc, name)
    return {"name": ent.name, **degree_of(tx, sc, ent.id)}


def graph_stats(tx: ReadTx, sc: Scoped) -> JsonObject:
    c = tx.graph.counts(sc.ids)
    return {
        "entities": c.entities,
        "relations": c.relations,
        "observations": c.observations,
        "entityTypes": c.entity_types,
        "relationTypes": c.relation_types,
        "scopes": list(sc.view.selection),
    }


def search_relations(tx: ReadTx, sc: Scoped, args: SearchRelationsArgs) -> JsonObject:
    """Relations filtered by any of their source, target and type, by id."""
    ends: list[int | None] = []
    for name in (args.from_, args.to):
        if name is None:
            ends.append(None)
            continue
        ent = resolve(tx, sc, [name]).get(name)
        if ent is None:
            return {"relations": [], "total": 0, "nextOffset": None}
        ends.append(ent.id)
    total, rows = tx.graph.find_relations(
        sc.ids, ends[0], ends[1], args.relationType, args.offset, args.limit
    )
    return {
        "relations": [relation_out(r.source, r.relation_type, r.target) for r in rows],
        "total": total,
        "nextOffset": page(total, args.offset, len(rows)),
    }


def describe_entity(tx: ReadTx, sc: Scoped, args: DescribeArgs) -> JsonObject:
    """One entity with its observations, degree and a page of its relations (outgoing first)."""
    ent = get_one(tx, sc, args.name)
    offset = args.offset
    rows = tx.graph.relations_of(ent.id, sc.ids)
    chosen = rows[offset : offset + args.limit]
    return {
        "entity": full_entity(tx, sc, ent),
        "degree": degree_of(tx, sc, ent.id),
        "outgoing": [
            {"relationType": r.relation_type, "to": r.target}
            for r in chosen
            if r.source_id == ent.id
        ],
        "incoming": [
            {"from": r.source, "relationType": r.relation_type}
            for r in chosen
            if r.source_id != ent.id
        ],
        "total": len(rows),
        "nextOffset": page(len(rows), offset, len(chosen)),
    }


def list_types(tx: ReadTx, sc: Scoped, what: str, offset: int, limit: int) -> JsonObject:
    rows = tx.graph.type_counts(sc.ids, "entity" if what == "entity" else "relation")
    key = "entityType" if what == "entity" else "relationType"
    chosen = rows[offset : offset + limit]
    return {
        "types": [{key: t, "count": n} for t, n in chosen],
        "total": len(rows),
        "nextOffset": page(len(rows), offset, len(chosen)),
    }
