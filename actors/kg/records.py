"""The graph tools' answer records: entities, relations and pages.

Records follow the reference memory server (camelCase; entities
``{name, entityType, observations}``, relations ``{from, to, relationType}``).
An entity is shown in one of three modes: ``full`` (observations),
``summary`` (observation counts) or ``names`` (the name alone). A page
answers ``total`` and ``nextOffset`` (None on the last page).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..store.interfaces import ReadTx
from .lookup import Ent, observation_contents, observation_counts
from .view import Scoped

JsonObject = dict[str, object]
Observations = dict[int, list[str]]  # by entity id: the observation texts, oldest first


def page(total: int, offset: int, count: int) -> int | None:
    return offset + count if offset + count < total else None


def entity_out(ent: Ent, mode: str, obs: Observations | None = None) -> JsonObject | str:
    if mode == "names":
        return ent.name
    items = (obs or {}).get(ent.id, [])
    if mode == "summary":
        return {"name": ent.name, "entityType": ent.kind, "observationCount": len(items)}
    return {"name": ent.name, "entityType": ent.kind, "observations": items}


def entities_out(tx: ReadTx, sc: Scoped, ents: Sequence[Ent], mode: str) -> list[JsonObject | str]:
    ids = [e.id for e in ents]
    if mode == "names":
        return [e.name for e in ents]
    if mode == "summary":  # counted in SQL: a hub's thousands of texts are never read
        counts = observation_counts(tx, sc, ids)
        return [
            {"name": e.name, "entityType": e.kind, "observationCount": counts[e.id]} for e in ents
        ]
    obs = observation_contents(tx, sc, ids)
    return [entity_out(e, mode, obs) for e in ents]


def full_entity(tx: ReadTx, sc: Scoped, ent: Ent) -> JsonObject | str:
    """One entity with its observations."""
    return entities_out(tx, sc, [ent], "full")[0]


def relation_out(src: str, rtype: str, tgt: str) -> dict[str, str]:
    return {"from": src, "to": tgt, "relationType": rtype}


def relations_touching(
    tx: ReadTx, sc: Scoped, ids: Sequence[int], sources_only: bool = False
) -> list[dict[str, str]]:
    """Visible relations with an endpoint (or, with ``sources_only``, the source) among ``ids``, by id."""
    return [
        relation_out(r.source, r.relation_type, r.target)
        for r in tx.graph_edges.relations_touching(list(ids), sc.ids, sources_only)
    ]


def entities_page(
    tx: ReadTx,
    sc: Scoped,
    chosen: Sequence[Ent],
    mode: str,
    total: int,
    offset: int,
    missing: list[str] | None = None,
    sources_only: bool = False,
) -> JsonObject:
    """A page of entities with the relations touching them (none in ``names`` mode).

    ``missing`` (the names asked for that are not entities) is listed when given.
    """
    result: JsonObject = {"entities": entities_out(tx, sc, chosen, mode)}
    if mode != "names":
        result["relations"] = relations_touching(tx, sc, [e.id for e in chosen], sources_only)
    if missing is not None:
        result["missing"] = missing
    result["total"] = total
    result["nextOffset"] = page(total, offset, len(chosen))
    return result
