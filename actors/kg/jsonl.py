"""The reference memory server's JSON-lines file format, read and written losslessly.

``@modelcontextprotocol/server-memory`` keeps its graph in ``memory.jsonl``:
one compact JSON object per line (``JSON.stringify``), entities first, then
relations, lines joined by ``\\n`` with no newline after the last one::

    {"type":"entity","name":"Alice","entityType":"person","observations":["likes tea"]}
    {"type":"relation","from":"Alice","to":"Acme","relationType":"works_at"}

`export_lines` writes exactly that (key order, separators, escaping and the
missing final newline included), so importing a reference file into an empty
store and exporting it again gives the same bytes. Entities come out in
creation order, observations in the order they were added, relations in
creation order.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..store import ops
from . import graph
from .graph import EntityIn, Scoped, Writer

FORMAT = "jsonl"


class JsonlError(ValueError):
    """A line of a reference-format file that cannot be read; names the line."""


def dumps(record: dict[str, Any]) -> str:
    """``JSON.stringify`` of a record: compact, non-ASCII kept, same escapes."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def export_lines(conn: sqlite3.Connection, sc: Scoped) -> list[str]:
    """Every visible entity and relation as reference-format lines (inside one read transaction)."""
    ents = [
        graph.Ent(*row)
        for row in conn.execute(
            f"SELECT e.id, e.name, e.kind, e.canonical_name FROM entities e WHERE {sc.entity()} ORDER BY e.id"
        )
    ]
    obs = graph.observations_of(conn, sc, [e.id for e in ents])
    lines = [
        dumps(
            {
                "type": "entity",
                "name": e.name,
                "entityType": e.kind,
                "observations": [c for _, c in obs[e.id]],
            }
        )
        for e in ents
    ]
    for src, rtype, tgt in conn.execute(
        f"""SELECT s.name, r.relation_type, t.name FROM relations r JOIN entities s ON s.id = r.source_id
            JOIN entities t ON t.id = r.target_id WHERE {sc.relation()} ORDER BY r.id"""
    ):
        lines.append(dumps({"type": "relation", "from": src, "to": tgt, "relationType": rtype}))
    return lines


def is_reference_format(lines: Iterable[str]) -> bool:
    """True when the first non-blank line is a reference entity or relation record."""
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            return False
        return (
            isinstance(record, dict)
            and record.get("type") in ("entity", "relation")
            and ("entityType" in record or "relationType" in record)
        )
    return False


@dataclass
class Parsed:
    entities: list[EntityIn] = field(default_factory=list)
    relations: list[tuple[str, str, str]] = field(default_factory=list)


def _string(record: dict[str, Any], key: str, number: int) -> str:
    value = record.get(key)
    if not isinstance(value, str):
        raise JsonlError(f"line {number}: `{key}` must be a string")
    return _encodable(value, key, number)


def _encodable(value: str, key: str, number: int) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise JsonlError(
            f"line {number}: `{key}` holds an unpaired UTF-16 surrogate (a \\udXXX escape), "
            "which is not text and cannot be stored; fix that string in the file"
        ) from None
    return value


def parse(lines: Iterable[str]) -> Parsed:
    """Read reference-format lines. Error handling: a bad line raises `JsonlError` naming it."""
    out = Parsed()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise JsonlError(f"line {number}: not JSON ({exc})") from None
        if not isinstance(record, dict):
            raise JsonlError(f"line {number}: expected a JSON object")
        kind = record.get("type")
        if kind == "entity":
            name = _string(record, "name", number)
            if not name.strip():
                raise JsonlError(f"line {number}: an entity name must not be empty")
            observations = record.get("observations", [])
            if not isinstance(observations, list) or not all(
                isinstance(o, str) for o in observations
            ):
                raise JsonlError(f"line {number}: `observations` must be a list of strings")
            for text in observations:
                _encodable(text, "observations", number)
            out.entities.append(EntityIn(name, _string(record, "entityType", number), observations))
        elif kind == "relation":
            out.relations.append(
                (
                    _string(record, "from", number),
                    _string(record, "relationType", number),
                    _string(record, "to", number),
                )
            )
        else:
            raise JsonlError(
                f"line {number}: unknown record type {kind!r} (expected `entity` or `relation`)"
            )
    return out


def import_graph(w: Writer, parsed: Parsed) -> dict[str, Any]:
    """Add the parsed graph in the caller's write transaction (into the current scope).

    A new entity gets its observations exactly as listed (repeats included,
    as the reference server keeps them); an entity that already exists gets
    the observations it lacks. A relation whose endpoint is not in the file or
    the store gets that endpoint created with type ``entity`` (the reference
    server allows such dangling relations; memtrio's relations need both ends).
    """
    conn, sc = w.conn, w.sc
    names = [e.name for e in parsed.entities] + [n for s, _, t in parsed.relations for n in (s, t)]
    found = graph.resolve(conn, sc, names, visible_only=False)
    known = {
        eid: {c for _, c in v}
        for eid, v in graph.observations_of(
            conn, sc, [e.id for e in found.values() if e.visible]
        ).items()
    }
    counts = {
        "entities": 0,
        "existingEntities": 0,
        "observations": 0,
        "relations": 0,
        "existingRelations": 0,
        "createdEndpoints": 0,
    }
    fresh: set[int] = set()
    for item in parsed.entities:
        canon = ops.canonical_name(item.name)
        ent = found.get(canon)
        if ent is None:
            ent = w.create_entity(item.name, item.entityType or "")
            found[canon] = ent
            fresh.add(ent.id)
            counts["entities"] += 1
        elif not ent.visible:
            w.link_entity(ent.id)
            ent.visible = True
            w.change("entity", ent.id)
            counts["existingEntities"] += 1
        elif ent.id not in fresh:
            counts["existingEntities"] += 1
        have = known.setdefault(ent.id, set())
        for content in item.observations:
            if content in have and ent.id not in fresh:
                continue
            w.add_observation(ent.id, content)
            have.add(content)
            counts["observations"] += 1
    for src, _, tgt in parsed.relations:
        for name in (src, tgt):
            canon = ops.canonical_name(name)
            if canon not in found:
                found[canon] = w.create_entity(name, "entity")
                counts["createdEndpoints"] += 1
            elif not found[canon].visible:
                w.link_entity(found[canon].id)
                found[canon].visible = True
    created = graph.create_relations(w, parsed.relations)
    counts["relations"] = len(created)
    counts["existingRelations"] = len(parsed.relations) - len(created)
    return counts
