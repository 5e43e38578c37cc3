"""Finding the graph's rows: entities by name or id, and their observations.

The graph lives in the memory store's tables: an entity is a row of
``entities`` (``kind`` is its entityType), a relation a row of ``relations``,
and an observation a memory of type ``observation`` linked to its entity
through ``memory_entities``.

Identity: an entity is its name exactly, as in the reference servers (``Alice``
and ``alice`` are two entities; schema version 7). Every tool of the reference's
surface that names entities (``open_nodes``, ``add_observations``, relation
endpoints, ``get_entity``, ...) matches names exactly; ``search_nodes`` forgives
case, as the reference's does. An exact name that is not found is reported with
the entities that differ from it only in case or spacing (`near_names`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ...protocol.errors import NotFound
from ...protocol.plural import plural
from ..store.domain.documents import canonical_name
from ..store.interfaces import ReadTx, StoreTx
from ..store.interfaces.graph import Entity
from .view import Scoped

NEAR_NAMES = 500  # names looked up for a "did you mean" hint
OBSERVATION = "observation"


@dataclass
class Ent:
    id: int
    name: str
    kind: str
    canonical: str
    visible: bool = True


def ent_of(row: Entity) -> Ent:
    return Ent(row.id, row.name, row.kind, row.canonical, row.visible)


def resolve(
    tx: ReadTx, sc: Scoped, names: Iterable[str], visible_only: bool = True
) -> dict[str, Ent]:
    """Entities by exact name, keyed by name; invisible ones only if asked."""
    out: dict[str, Ent] = {}
    for row in tx.graph.entities_by_names(list(dict.fromkeys(names)), sc.ids):
        if row.visible or not visible_only:
            out[row.name] = ent_of(row)
    return out


def in_order(found: dict[str, Ent], names: Iterable[str]) -> list[Ent]:
    """The entities of ``found`` that ``names`` name, in the order first named, once each."""
    return [found[n] for n in dict.fromkeys(names) if n in found]


def missing(found: dict[str, Ent], names: Iterable[str]) -> list[str]:
    """The names (once each, in order) that ``found`` lacks."""
    return [n for n in dict.fromkeys(names) if n not in found]


def near_names(tx: ReadTx, sc: Scoped, names: Sequence[str], limit: int = 5) -> str:
    """`` (names are case-sensitive: did you mean 'Alice'?)`` for visible entities whose
    names differ from ``names`` only in case or spacing; "" when there are none."""
    canon = list(dict.fromkeys(canonical_name(n) for n in names[:NEAR_NAMES]))
    rows = tx.graph.names_near(canon, sc.ids, limit + 1)
    if not rows:
        return ""
    shown = ", ".join(repr(r) for r in rows[:limit]) + (" ..." if len(rows) > limit else "")
    return f" (names are case-sensitive: did you mean {shown}?)"


def require(
    tx: StoreTx, sc: Scoped, found: dict[str, Ent], names: Iterable[str], what: str
) -> None:
    """Error handling: raises `NotFound` listing (the first ten of) the names not in
    ``found``, and the entities whose names differ from them only in case or spacing."""
    absent = missing(found, names)
    if absent:
        shown = ", ".join(repr(n) for n in absent[:10]) + (" ..." if len(absent) > 10 else "")
        raise NotFound(
            f"{what}: {plural(len(absent), 'entity')} not found ({shown})"
            f"{near_names(tx, sc, absent)}; "
            "create them with create_entities first (nothing was changed)"
        )


def get_one(tx: ReadTx, sc: Scoped, name: str) -> Ent:
    """The visible entity ``name``. Error handling: raises `NotFound` when there is none."""
    ent = resolve(tx, sc, [name]).get(name)
    if ent is None:
        raise NotFound(
            f"entity {name!r} not found{near_names(tx, sc, [name])} "
            "(search_nodes finds entities by words of their names or observations)"
        )
    return ent


def entity_rows(tx: ReadTx, ids: Sequence[int]) -> dict[int, Ent]:
    return {row.id: ent_of(row) for row in tx.graph.entities_by_ids(list(ids))}


def observations_of(
    tx: StoreTx, sc: Scoped, ids: Sequence[int]
) -> dict[int, list[tuple[int, str]]]:
    """Visible observations (memory id, content) of each entity, oldest first."""
    out: dict[int, list[tuple[int, str]]] = {i: [] for i in ids}
    for o in tx.graph.observations(list(ids), sc.ids):
        out[o.entity_id].append((o.memory_id, o.content))
    return out


def observation_contents(tx: ReadTx, sc: Scoped, ids: Sequence[int]) -> dict[int, list[str]]:
    """Visible observation texts of each entity, oldest first (`observations_of` without the ids)."""
    out: dict[int, list[str]] = {i: [] for i in ids}
    for eid, content in tx.graph.observation_texts(list(ids), sc.ids):
        out[eid].append(content)
    return out


def observation_counts(tx: ReadTx, sc: Scoped, ids: Sequence[int]) -> dict[int, int]:
    """The number of visible observations of each entity (``summary`` mode), no text read."""
    out = dict.fromkeys(ids, 0)
    out.update(tx.graph.observation_counts(list(ids), sc.ids))
    return out


def observation_texts(tx: StoreTx, sc: Scoped, ids: Sequence[int]) -> dict[int, set[str]]:
    """The set of visible observation texts of each entity."""
    return {eid: {c for _, c in v} for eid, v in observations_of(tx, sc, ids).items()}
