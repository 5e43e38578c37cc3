"""The knowledge graph's rows, the same on both backends (`interfaces.graph`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ..interfaces.graph import (
    Counts,
    Edge,
    Entity,
    Found,
    Link,
    NamedRelation,
    Observation,
    RowKind,
    View,
)
from .sql import Rows


def entity(row: Sequence[Any], visible: bool = True) -> Entity:
    """(id, name, kind, canonical name[, ...]) as an `Entity`."""
    return Entity(row[0], row[1], row[2], row[3], visible)


def seen_entity(row: Sequence[Any]) -> Entity:
    """(id, name, kind, canonical name, visible) as an `Entity`."""
    return entity(row, bool(row[4]))


def observation(row: Sequence[Any]) -> Observation:
    """(entity id, memory id, content) as an `Observation`."""
    return Observation(*row)


def edge(row: Sequence[Any]) -> Edge:
    """(id, source id, relation type, target id) as an `Edge`."""
    return Edge(*row)


def link(row: Sequence[Any]) -> Link:
    """(id, source name, relation type, target name) as a `Link`."""
    return Link(*row)


def named(row: Sequence[Any]) -> NamedRelation:
    """(id, source id, name, kind, relation type, target id, name, kind) as a `NamedRelation`."""
    return NamedRelation(*row)


def found(row: Sequence[Any] | None) -> Found | None:
    """(id, visible) as a `Found`; no row: None."""
    return None if row is None else Found(row[0], bool(row[1]))


def relation_filter(
    source_id: int | None, target_id: int | None, relation_type: str | None
) -> list[tuple[str, int | str]]:
    """The (column, value) pairs a `Graph.find_relations` sets, in a fixed order."""
    given = (("r.source_id", source_id), ("r.target_id", target_id))
    found: list[tuple[str, int | str]] = [(col, v) for col, v in given if v is not None]
    if relation_type is not None:
        found.append(("r.relation_type", relation_type))
    return found


# The row of a `Link` and of a `NamedRelation` (alias ``r``), the same on both backends.
LINK = """SELECT r.id, s.name, r.relation_type, t.name
    FROM relations r JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id"""
NAMED = """SELECT r.id, r.source_id, s.name, s.kind, r.relation_type, r.target_id, t.name, t.kind
    FROM relations r JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id"""


def visible(view: View, table: str, col: str, alias: str) -> str:
    """SQL true for ``alias``'s row visible in ``view``: linked through ``table`` (its column
    ``col``) to a read scope, or to none. The ids are ints, inlined: no parameter."""
    if view.sees_all:
        return "(1 = 1)"
    inner = ",".join(str(int(i)) for i in view.read_ids) or "NULL"
    return (
        f"(EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id AND x.scope_id IN ({inner}))"
        f" OR NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id))"
    )


def ent(view: View, alias: str = "e") -> str:
    return visible(view, "entity_scopes", "entity_id", alias)


def rel(view: View, alias: str = "r") -> str:
    return visible(view, "relation_scopes", "relation_id", alias)


def mem(view: View, alias: str = "m") -> str:
    return visible(view, "memory_scopes", "memory_id", alias)


# The view that sees everything (for statements with no visibility condition).
ALL = View((), (), True)
NEAR = 500  # canonical names a `names_near` looks for, at most


def _edge_id(e: Edge) -> int:
    return e.id


class GraphBase(Rows):
    """The graph interfaces' shared bodies (`interfaces.graph`). Each backend names its
    statements (class attributes in its dialect; ``{ent}``, ``{rel}``, ``{mem}``, ``{obs}``,
    ``{link}`` and ``{named}`` in them stand for `View`'s conditions, the backend's `OBS`
    and `LINK` / `NAMED`, filled by `sql`) and writes the methods whose logic differs."""

    MARK: ClassVar[str]  # the dialect's positional placeholder
    OBS: ClassVar[str]  # SQL true for an observation memory (``m``)
    SCOPE_COUNT = "SELECT count(*) FROM scopes"
    NAMES_NEAR = (
        "SELECT e.name FROM entities e WHERE e.canonical_name {ids} AND {ent}"
        " ORDER BY e.id LIMIT {mark}"
    )
    OBSERVATIONS = """SELECT me.entity_id, m.id, m.content FROM memory_entities me
        JOIN memories m ON m.id = me.memory_id WHERE me.entity_id {ids} AND {obs} AND {mem}
        ORDER BY me.entity_id, me.memory_id"""
    OBSERVATION_TEXTS = """SELECT me.entity_id, m.content FROM memory_entities me
        JOIN memories m ON m.id = me.memory_id WHERE me.entity_id {ids} AND {obs} AND {mem}
        ORDER BY me.entity_id, me.memory_id"""
    OBSERVATION_COUNTS = """SELECT me.entity_id, count(*) FROM memory_entities me
        JOIN memories m ON m.id = me.memory_id WHERE me.entity_id {ids} AND {obs} AND {mem}
        GROUP BY me.entity_id"""
    EDGES = """SELECT r.id, r.source_id, r.relation_type, r.target_id FROM relations r
        WHERE {col} {ids} {typed} AND {rel} ORDER BY r.id"""
    ENTITY_NAMED: ClassVar[str]  # (name,)
    ENTITIES_CANONICAL: ClassVar[str]  # (canonical, limit)
    KIND_IS: ClassVar[str]  # (kind,) as a condition's tail
    COUNT_ENTITIES = "SELECT count(*) FROM entities e WHERE {ent}"
    ENTITY_PAGE: ClassVar[str]  # (*kind, limit, offset); {kind}: `KIND_IS` or nothing
    ENTITIES_AFTER: ClassVar[str]  # (after id, limit)
    RELATIONS_AFTER: ClassVar[str]  # (after id, limit)
    RELATIONS_OF: ClassVar[str]  # (entity id,) x 3
    OUT_DEGREE: ClassVar[str]  # (entity id,)
    IN_DEGREE: ClassVar[str]  # (entity id,)
    COUNTS = (
        "SELECT count(*) FROM entities e WHERE {ent}",
        "SELECT count(*) FROM relations r WHERE {rel}",
        "SELECT count(*) FROM memory_entities me JOIN memories m ON m.id = me.memory_id"
        " WHERE {obs} AND {mem}",
        "SELECT count(DISTINCT e.kind) FROM entities e WHERE {ent}",
        "SELECT count(DISTINCT r.relation_type) FROM relations r WHERE {rel}",
    )
    PAGE: ClassVar[str]  # " LIMIT ? OFFSET ?" in the dialect
    ENTITY_TYPES = "SELECT e.kind, count(*) FROM entities e WHERE {ent} GROUP BY e.kind"
    RELATION_TYPES = (
        "SELECT r.relation_type, count(*) FROM relations r WHERE {rel} GROUP BY r.relation_type"
    )
    EDGES_NAMED: ClassVar[str]  # (node id,); {col}: the end
    RELATION: ClassVar[str]  # (source id, type, target id)
    RELATION_IDS_TOUCHING: ClassVar[str]  # (entity id,) x 2
    RELATION_METADATA: ClassVar[str]  # (relation id,)
    CREATE_ENTITY: ClassVar[str]  # (name, canonical, kind, created, updated): the id
    ADD_OBSERVATION: ClassVar[str]  # (content, created, updated): the id
    OBSERVATION_SCOPE: ClassVar[str]  # (memory id, scope id)
    OBSERVATION_ENTITY: ClassVar[str]  # (memory id, entity id)
    SET_KIND: ClassVar[str]  # (kind, ts, entity id)
    OBSERVATION_ELSEWHERE: ClassVar[str]  # (memory id, entity id)
    DELETE_MEMORY: ClassVar[str]  # (memory id,)
    UNLINK_OBSERVATION: ClassVar[str]  # (memory id, entity id)
    LINKED_MEMORIES: ClassVar[str]  # (entity id,)
    DELETE_ENTITY: ClassVar[str]  # (entity id,)
    CREATE_RELATION: ClassVar[str]  # (source, target, type, metadata, ts): the id
    SET_RELATION_METADATA: ClassVar[str]  # (metadata, relation id)
    DELETE_RELATION: ClassVar[str]  # (relation id,)
    ALL_EDGES_OF: ClassVar[str]  # (entity id,) x 2
    REPOINT_RELATION: ClassVar[str]  # (source id, target id, relation id)
    DROP_RELATION_VECTOR: ClassVar[str]  # (relation id,)

    def sql(self, template: str, view: View, **more: str) -> str:
        """``template`` with ``view``'s conditions and the shared fragments filled in (a
        condition only where the template has it: each is built for the call)."""
        fill = {"obs": self.OBS, "link": LINK, "named": NAMED, "mark": self.MARK, **more}
        for name, condition in (("ent", ent), ("rel", rel), ("mem", mem)):
            if "{" + name + "}" in template:
                fill[name] = condition(view)
        return template.format(**fill)

    def _each(self, template: str, view: View, ids: Sequence[Any], *after: object) -> list[Any]:
        """The rows of ``template`` for each part of ``ids`` (``{ids}``: `one_of` the part;
        ``after``: the parameters that follow it)."""
        out: list[Any] = []
        for part in self.parts(list(dict.fromkeys(ids))):
            test, params = self.one_of(part)
            out += self.all(self.sql(template, view, ids=test), [*params, *after])
        return out

    # -- views and lookups ---------------------------------------------------------------

    def view(self, read: Sequence[str], write: Sequence[str]) -> View:
        names = list(dict.fromkeys([*read, *write]))
        rows = self._each("SELECT name, id FROM scopes WHERE name {ids}", ALL, names)
        ids = {name: int(sid) for name, sid in rows}
        read_ids = tuple(sorted({ids[s] for s in read if s in ids}))
        write_ids = tuple(sorted({ids[s] for s in write if s in ids}))
        total = self.number(self.SCOPE_COUNT)
        return View(read_ids, write_ids, len(read_ids) == total)

    def entities_by_names(self, names: Sequence[str], view: View) -> list[Entity]:
        sql = "SELECT e.id, e.name, e.kind, e.canonical_name, {ent} FROM entities e WHERE e.name {ids}"
        return [seen_entity(r) for r in self._each(sql, view, names)]

    def entities_by_ids(self, ids: Sequence[int]) -> list[Entity]:
        sql = "SELECT id, name, kind, canonical_name FROM entities WHERE id {ids}"
        return [entity(r) for r in self._each(sql, ALL, ids)]

    def names_near(self, canonicals: Sequence[str], view: View, limit: int) -> list[str]:
        canon = list(dict.fromkeys(canonicals))[:NEAR]
        if not canon:
            return []
        test, params = self.one_of(canon)
        sql = self.sql(self.NAMES_NEAR, view, ids=test)
        return [r[0] for r in self.all(sql, [*params, limit])]

    def observations(self, entity_ids: Sequence[int], view: View) -> list[Observation]:
        return [observation(r) for r in self._each(self.OBSERVATIONS, view, entity_ids)]

    def observation_texts(self, entity_ids: Sequence[int], view: View) -> list[tuple[int, str]]:
        rows = self._each(self.OBSERVATION_TEXTS, view, entity_ids)
        return [(int(eid), text) for eid, text in rows]

    def observation_counts(self, entity_ids: Sequence[int], view: View) -> dict[int, int]:
        rows = self._each(self.OBSERVATION_COUNTS, view, entity_ids)
        return {int(eid): int(n) for eid, n in rows}

    def edges(
        self, node_ids: Sequence[int], view: View, outgoing: bool, relation_type: str | None
    ) -> list[Edge]:
        col = "r.source_id" if outgoing else "r.target_id"
        typed = f"AND r.relation_type = {self.MARK}" if relation_type is not None else ""
        extra = [relation_type] if relation_type is not None else []
        sql = self.EDGES.replace("{col}", col).replace("{typed}", typed)
        return sorted((edge(r) for r in self._each(sql, view, node_ids, *extra)), key=_edge_id)

    def without_vectors(self, kind: RowKind, ids: Sequence[int]) -> set[int]:
        sql = "SELECT item_id FROM vectors WHERE item_id {ids} AND kind = {mark}"
        return set(ids) - {int(r[0]) for r in self._each(sql, ALL, ids, kind)}

    def entity_named(self, name: str) -> Entity | None:
        row = self.first(self.ENTITY_NAMED, (name,))
        return None if row is None else entity(row)

    def entities_canonical(self, canonical: str, limit: int) -> list[Entity]:
        return [entity(r) for r in self.all(self.ENTITIES_CANONICAL, (canonical, limit))]

    def count_entities(self, view: View, kind: str | None) -> int:
        typed = (self.KIND_IS, [kind]) if kind is not None else ("", [])
        return self.number(self.sql(self.COUNT_ENTITIES, view) + typed[0], typed[1])

    def entity_page(self, view: View, kind: str | None, offset: int, limit: int) -> list[Entity]:
        typed, params = (self.KIND_IS, [kind]) if kind is not None else ("", [])
        sql = self.sql(self.ENTITY_PAGE, view, kind=typed)
        return [entity(r) for r in self.all(sql, [*params, limit, offset])]

    def entities_after(self, view: View, after_id: int, limit: int) -> list[Entity]:
        return [entity(r) for r in self.all(self.sql(self.ENTITIES_AFTER, view), (after_id, limit))]

    def relations_after(self, view: View, after_id: int, limit: int) -> list[Link]:
        return [link(r) for r in self.all(self.sql(self.RELATIONS_AFTER, view), (after_id, limit))]

    def relations_of(self, entity_id: int, view: View) -> list[NamedRelation]:
        rows = self.all(self.sql(self.RELATIONS_OF, view), (entity_id,) * 3)
        return [named(r) for r in rows]

    def degree(self, entity_id: int, view: View) -> tuple[int, int]:
        out_deg = self.number(self.sql(self.OUT_DEGREE, view), (entity_id,))
        in_deg = self.number(self.sql(self.IN_DEGREE, view), (entity_id,))
        return in_deg, out_deg

    def counts(self, view: View) -> Counts:
        return Counts(*(self.number(self.sql(sql, view)) for sql in self.COUNTS))

    def find_relations(
        self,
        view: View,
        source_id: int | None,
        target_id: int | None,
        relation_type: str | None,
        offset: int,
        limit: int,
    ) -> tuple[int, list[Link]]:
        given = relation_filter(source_id, target_id, relation_type)
        where = " AND ".join([rel(view), *(f"{col} = {self.MARK}" for col, _ in given)])
        params = [value for _, value in given]
        total = self.number(f"SELECT count(*) FROM relations r WHERE {where}", params)
        rows = self.all(f"{LINK} WHERE {where} ORDER BY r.id{self.PAGE}", [*params, limit, offset])
        return total, [link(r) for r in rows]

    def type_counts(self, view: View, what: RowKind) -> list[tuple[str, int]]:
        sql = self.ENTITY_TYPES if what == "entity" else self.RELATION_TYPES
        return [(t, int(n)) for t, n in self.all(self.sql(sql, view) + " ORDER BY 2 DESC, 1")]

    def edges_named(self, node_id: int, view: View, outgoing: bool) -> list[NamedRelation]:
        col = "r.source_id" if outgoing else "r.target_id"
        return [named(r) for r in self.all(self.sql(self.EDGES_NAMED, view, col=col), (node_id,))]

    def relation(
        self, source_id: int, relation_type: str, target_id: int, view: View
    ) -> Found | None:
        return found(
            self.first(self.sql(self.RELATION, view), (source_id, relation_type, target_id))
        )

    def relation_ids_touching(self, entity_id: int, view: View) -> list[int]:
        rows = self.all(self.sql(self.RELATION_IDS_TOUCHING, view), (entity_id, entity_id))
        return [int(r[0]) for r in rows]

    def relation_metadata(self, relation_id: int) -> str | None:
        row = self.first(self.RELATION_METADATA, (relation_id,))
        return None if row is None else str(row[0] or "")

    # -- writes ----------------------------------------------------------------------------

    def create_entity(self, name: str, canonical: str, kind: str, ts: float) -> int:
        return self.insert_id(self.CREATE_ENTITY, (name, canonical, kind, ts, ts))

    def add_observation(self, entity_id: int, content: str, ts: float, scope_id: int) -> int:
        mid = self.insert_id(self.ADD_OBSERVATION, (content, ts, ts))
        self.run(self.OBSERVATION_SCOPE, (mid, scope_id))
        self.run(self.OBSERVATION_ENTITY, (mid, entity_id))
        return mid

    def set_kind(self, entity_id: int, kind: str, ts: float) -> None:
        self.run(self.SET_KIND, (kind, ts, entity_id))

    def observation_elsewhere(self, memory_id: int, entity_id: int) -> bool:
        return self.first(self.OBSERVATION_ELSEWHERE, (memory_id, entity_id)) is not None

    def delete_memory(self, memory_id: int) -> None:
        self.run(self.DELETE_MEMORY, (memory_id,))

    def unlink_observation(self, memory_id: int, entity_id: int) -> None:
        self.run(self.UNLINK_OBSERVATION, (memory_id, entity_id))

    def linked_memories(self, entity_id: int) -> list[int]:
        return [int(r[0]) for r in self.all(self.LINKED_MEMORIES, (entity_id,))]

    def delete_entity(self, entity_id: int) -> None:
        self.run(self.DELETE_ENTITY, (entity_id,))

    def create_relation(
        self, source_id: int, target_id: int, relation_type: str, metadata: str, ts: float
    ) -> int:
        return self.insert_id(
            self.CREATE_RELATION, (source_id, target_id, relation_type, metadata, ts)
        )

    def set_relation_metadata(self, relation_id: int, metadata: str) -> None:
        self.run(self.SET_RELATION_METADATA, (metadata, relation_id))

    def delete_relation(self, relation_id: int) -> None:
        self.run(self.DELETE_RELATION, (relation_id,))

    # -- merge -----------------------------------------------------------------------------

    def all_edges_of(self, entity_id: int) -> list[Edge]:
        return [edge(r) for r in self.all(self.ALL_EDGES_OF, (entity_id, entity_id))]

    def repoint_relation(self, relation_id: int, source_id: int, target_id: int) -> None:
        self.run(self.REPOINT_RELATION, (source_id, target_id, relation_id))
        self.run(self.DROP_RELATION_VECTOR, (relation_id,))
