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

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ...protocol.errors import NotFound
from ...protocol.plural import plural
from ..store import ops
from .view import Scoped

SQL_CHUNK = 500  # ids per ``IN (...)`` list
OBSERVATION = "observation"
OBS_TYPE_SQL = "m.memory_type = 'observation' COLLATE NOCASE"

T = TypeVar("T")


def chunks(items: Sequence[T], size: int = SQL_CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def marks(n: int) -> str:
    return ",".join("?" * n)


@dataclass
class Ent:
    id: int
    name: str
    kind: str
    canonical: str
    visible: bool = True


def resolve(
    conn: sqlite3.Connection, sc: Scoped, names: Iterable[str], visible_only: bool = True
) -> dict[str, Ent]:
    """Entities by exact name (one query per chunk), keyed by name; invisible ones only if asked."""
    wanted = list(dict.fromkeys(names))
    out: dict[str, Ent] = {}
    for part in chunks(wanted):
        for eid, name, kind, cname, vis in conn.execute(
            f"SELECT e.id, e.name, e.kind, e.canonical_name, {sc.entity()} FROM entities e "
            f"WHERE e.name IN ({marks(len(part))})",
            list(part),
        ):
            if vis or not visible_only:
                out[name] = Ent(eid, name, kind, cname, bool(vis))
    return out


def in_order(found: dict[str, Ent], names: Iterable[str]) -> list[Ent]:
    """The entities of ``found`` that ``names`` name, in the order first named, once each."""
    return [found[n] for n in dict.fromkeys(names) if n in found]


def missing(found: dict[str, Ent], names: Iterable[str]) -> list[str]:
    """The names (once each, in order) that ``found`` lacks."""
    return [n for n in dict.fromkeys(names) if n not in found]


def near_names(conn: sqlite3.Connection, sc: Scoped, names: Sequence[str], limit: int = 5) -> str:
    """`` (names are case-sensitive: did you mean 'Alice'?)`` for visible entities whose
    names differ from ``names`` only in case or spacing; "" when there are none."""
    canon = list(dict.fromkeys(ops.canonical_name(n) for n in names[:SQL_CHUNK]))
    rows = conn.execute(
        f"SELECT e.name FROM entities e WHERE e.canonical_name IN ({marks(len(canon))}) "
        f"AND {sc.entity()} ORDER BY e.id LIMIT ?",
        [*canon, limit + 1],
    ).fetchall()
    if not rows:
        return ""
    shown = ", ".join(repr(r[0]) for r in rows[:limit]) + (" ..." if len(rows) > limit else "")
    return f" (names are case-sensitive: did you mean {shown}?)"


def require(
    conn: sqlite3.Connection, sc: Scoped, found: dict[str, Ent], names: Iterable[str], what: str
) -> None:
    """Error handling: raises `NotFound` listing (the first ten of) the names not in
    ``found``, and the entities whose names differ from them only in case or spacing."""
    absent = missing(found, names)
    if absent:
        shown = ", ".join(repr(n) for n in absent[:10]) + (" ..." if len(absent) > 10 else "")
        raise NotFound(
            f"{what}: {plural(len(absent), 'entity')} not found ({shown})"
            f"{near_names(conn, sc, absent)}; "
            "create them with create_entities first (nothing was changed)"
        )


def get_one(conn: sqlite3.Connection, sc: Scoped, name: str) -> Ent:
    """The visible entity ``name``. Error handling: raises `NotFound` when there is none."""
    ent = resolve(conn, sc, [name]).get(name)
    if ent is None:
        raise NotFound(
            f"entity {name!r} not found{near_names(conn, sc, [name])} "
            "(search_nodes finds entities by words of their names or observations)"
        )
    return ent


def entity_rows(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, Ent]:
    out: dict[int, Ent] = {}
    for part in chunks(list(ids)):
        for eid, name, kind, cname in conn.execute(
            f"SELECT id, name, kind, canonical_name FROM entities WHERE id IN ({marks(len(part))})",
            list(part),
        ):
            out[eid] = Ent(eid, name, kind, cname)
    return out


def observations_of(
    conn: sqlite3.Connection, sc: Scoped, ids: Sequence[int]
) -> dict[int, list[tuple[int, str]]]:
    """Visible observations (memory id, content) of each entity, oldest first."""
    out: dict[int, list[tuple[int, str]]] = {i: [] for i in ids}
    for part in chunks(list(ids)):
        for eid, mid, content in conn.execute(
            f"""SELECT me.entity_id, m.id, m.content FROM memory_entities me JOIN memories m ON m.id = me.memory_id
                WHERE me.entity_id IN ({marks(len(part))}) AND {OBS_TYPE_SQL} AND {sc.memory()}
                ORDER BY me.entity_id, me.memory_id""",
            list(part),
        ):
            out[eid].append((mid, content))
    return out


def observation_contents(
    conn: sqlite3.Connection, sc: Scoped, ids: Sequence[int]
) -> dict[int, list[str]]:
    """Visible observation texts of each entity, oldest first (`observations_of` without the ids)."""
    out: dict[int, list[str]] = {i: [] for i in ids}
    for part in chunks(list(ids)):
        for eid, content in conn.execute(
            f"""SELECT me.entity_id, m.content FROM memory_entities me JOIN memories m ON m.id = me.memory_id
                WHERE me.entity_id IN ({marks(len(part))}) AND {OBS_TYPE_SQL} AND {sc.memory()}
                ORDER BY me.entity_id, me.memory_id""",
            part,
        ):
            out[eid].append(content)
    return out


def observation_counts(conn: sqlite3.Connection, sc: Scoped, ids: Sequence[int]) -> dict[int, int]:
    """The number of visible observations of each entity (``summary`` mode), no text read."""
    out = dict.fromkeys(ids, 0)
    for part in chunks(list(ids)):
        for eid, n in conn.execute(
            f"""SELECT me.entity_id, count(*) FROM memory_entities me JOIN memories m ON m.id = me.memory_id
                WHERE me.entity_id IN ({marks(len(part))}) AND {OBS_TYPE_SQL} AND {sc.memory()}
                GROUP BY me.entity_id""",
            part,
        ):
            out[eid] = n
    return out


def observation_texts(
    conn: sqlite3.Connection, sc: Scoped, ids: Sequence[int]
) -> dict[int, set[str]]:
    """The set of visible observation texts of each entity."""
    return {eid: {c for _, c in v} for eid, v in observations_of(conn, sc, ids).items()}
