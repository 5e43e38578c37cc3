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
creation order. An entity with more observations than one line may carry on
import (`MAX_ITEMS`, or `MAX_LINE_BYTES` of JSON) is written as several lines
of the same entity, which an import joins again.

Import applies the graph tools' limits (`store.domain.limits`): names and types at
most 1,024 bytes, observations at most 65,536 bytes, at most 1,000
observations per line. As in the reference format, an observation, an
entityType or a relationType may be empty; an entity name may not.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Annotated, BinaryIO

import msgspec

from ...protocol.errors import DomainError
from ...protocol.screening import screen
from ...protocol.secrets import SecretsMode
from ..store.domain import limits
from ..store.interfaces import ReadTx
from ..store.tooling.import_file import (
    MAX_LINE_BYTES,
    ImportRefused,
    decode_line,
    numbered_lines,
    printable,
    require_json,
)
from ..store.writer import Change
from .lookup import observation_contents, observation_texts, resolve
from .view import Scoped
from .writer import Writer
from .writes import create_relations

FORMAT = "jsonl"
MAX_ITEMS = limits.MAX_ITEMS
PAGE = 500  # entities or relations read at a time by an export
MAX_WARNINGS = 100  # an import reports this many (ownership) warnings, then counts the rest


def dumps(record: object) -> str:
    """``JSON.stringify`` of a record: compact, non-ASCII kept, same escapes."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


# -- export ----------------------------------------------------------------------------


def _entity_lines(name: str, kind: str, observations: list[str]) -> Iterator[str]:
    """One entity's line, or several when one would be over an import's limits."""
    head = len(dumps({"type": "entity", "name": name, "entityType": kind, "observations": []}))
    chunk: list[str] = []
    size = head
    for text in observations:
        cost = len(dumps([text]).encode("utf-8"))  # its JSON string, a comma, bracket slack
        if chunk and (len(chunk) == MAX_ITEMS or size + cost > MAX_LINE_BYTES):
            yield dumps({"type": "entity", "name": name, "entityType": kind, "observations": chunk})
            chunk, size = [], head
        chunk.append(text)
        size += cost
    yield dumps({"type": "entity", "name": name, "entityType": kind, "observations": chunk})


def iter_lines(tx: ReadTx, sc: Scoped) -> Iterator[str]:
    """Every visible entity and relation as reference-format lines (inside one read transaction).

    Streams: entities and relations are read a page at a time, entities with their observations.
    """
    after = 0
    while ents := tx.graph_edges.entities_after(sc.ids, after, PAGE):
        obs = observation_contents(tx, sc, [e.id for e in ents])
        for e in ents:
            yield from _entity_lines(e.name, e.kind, obs[e.id])
        after = ents[-1].id
    after = 0
    while rels := tx.graph_edges.relations_after(sc.ids, after, PAGE):
        for r in rels:
            yield dumps(
                {
                    "type": "relation",
                    "from": r.source,
                    "to": r.target,
                    "relationType": r.relation_type,
                }
            )
        after = rels[-1].id


def export_lines(tx: ReadTx, sc: Scoped) -> list[str]:
    """`iter_lines` as a list (the ``export_graph`` tool pages it)."""
    return list(iter_lines(tx, sc))


# -- import records ------------------------------------------------------------------------


class EntityRecord(msgspec.Struct, tag_field="type", tag="entity", frozen=True):
    """An entity line. Other fields (a fork's own) are ignored, as the reference server ignores them."""

    name: str
    entityType: str
    observations: Annotated[list[str], msgspec.Meta(max_length=MAX_ITEMS)] = []


class RelationRecord(msgspec.Struct, tag_field="type", tag="relation", frozen=True):
    from_: str = msgspec.field(name="from")
    to: str
    relationType: str


_decoder = msgspec.json.Decoder(EntityRecord | RelationRecord)


class _Probe(msgspec.Struct):
    type: object = None
    entityType: msgspec.Raw = msgspec.Raw()  # only whether the field is there, not decoded
    relationType: msgspec.Raw = msgspec.Raw()


_probe = msgspec.json.Decoder(_Probe)


def is_reference_format(number: int, first_line: bytes) -> bool:
    """True when the first non-blank line is a reference entity or relation record.

    Error handling: a line that is no record of either format (not UTF-8,
    not JSON, nested too deeply) raises `ImportRefused`.
    """
    try:
        probe = _probe.decode(first_line)
    except msgspec.ValidationError:  # JSON, but not an object: a memtrio header is expected
        return False
    except (msgspec.DecodeError, RecursionError):
        require_json(number, first_line)  # raises, saying why
        raise
    return probe.type in ("entity", "relation") and (
        len(probe.entityType) > 0 or len(probe.relationType) > 0
    )


def _decode(
    number: int, line: bytes, secrets: SecretsMode = "allow", warnings: list[str] | None = None
) -> EntityRecord | RelationRecord:
    """One line, decoded, within the graph tools' limits (`store.domain.limits`) and screened for
    secrets by ``secrets`` (``protocol.screening``: names, types, observations), what was
    replaced added to ``warnings``."""
    rec = decode_line(_decoder, number, line)
    at = f"line {number}"
    try:
        if isinstance(rec, EntityRecord):
            limits.check_name(rec.name, f"{at}: name")
            limits.check_type(rec.entityType, f"{at}: entityType")
            for j, text in enumerate(rec.observations):
                limits.check_observation_size(text, f"{at}: observations[{j}]")
        else:
            limits.check_name(rec.from_, f"{at}: from")
            limits.check_name(rec.to, f"{at}: to")
            limits.check_type(rec.relationType, f"{at}: relationType", "relationType")
        screened, found = screen(rec, secrets, at)
    except DomainError as exc:
        raise ImportRefused(printable(str(exc), 600)) from None
    if warnings is not None:
        warnings += found
    return screened


Lines = Callable[[], Iterator[tuple[int, bytes]]]


def check(lines: Lines, secrets: SecretsMode = "allow", warnings: list[str] | None = None) -> int:
    """Check every line before anything is written; returns the number of records. The
    secrets ``secrets`` replaces are added to ``warnings``.

    Error handling: the first bad line raises `ImportRefused` naming it (a secret under
    ``refuse`` too).
    """
    count = 0
    for number, line in lines():
        _decode(number, line, secrets, warnings)
        count += 1
    if count == 0:
        raise ImportRefused("the file is empty (no records)")
    return count


def check_file(
    file: BinaryIO, secrets: SecretsMode = "allow", warnings: list[str] | None = None
) -> Lines:
    """`check` an open file; returns what `import_graph` reads again."""
    lines: Lines = lambda: numbered_lines(file)  # noqa: E731
    check(lines, secrets, warnings)
    return lines


def import_graph(w: Writer, lines: Lines, secrets: SecretsMode = "allow") -> dict[str, int]:
    """Add the checked lines' graph in the caller's write transaction (into the current scope).

    Line by line, so memory stays bounded by one line. A new entity gets its
    observations exactly as listed (repeats included, as the reference
    server keeps them, and across several lines of the same entity); an
    entity that already existed gets the observations it lacks. A relation
    whose endpoint is not in the file or the store gets that endpoint created
    with type ``entity`` (the reference server allows such dangling
    relations; memtrio's relations need both ends). Listeners get one
    ``reset`` change (in ``w.changes``), not one change per row, and
    ``w.warnings`` keeps the first `MAX_WARNINGS` warnings.
    """
    # Entities created by this import have ids above every id there was.
    fresh_above = w.tx.graph_writes.next_ids()[0] - 1
    counts = {
        "entities": 0,
        "existingEntities": 0,
        "observations": 0,
        "relations": 0,
        "existingRelations": 0,
        "createdEndpoints": 0,
    }
    more = 0  # warnings past MAX_WARNINGS
    for number, line in lines():
        rec = _decode(number, line, secrets)
        if isinstance(rec, EntityRecord):
            _import_entity(w, rec, fresh_above, counts)
        else:
            _import_relation(w, rec, counts)
        w.changes.clear()  # one reset at the end instead
        if len(w.warnings) > MAX_WARNINGS:
            more += len(w.warnings) - MAX_WARNINGS
            del w.warnings[MAX_WARNINGS:]
    if more:
        w.warnings.append(f"... and {more:,} more warnings like these")
    w.changes.append(Change(kind="reset"))
    return counts


def _import_entity(w: Writer, rec: EntityRecord, fresh_above: int, counts: dict[str, int]) -> None:
    tx, sc = w.tx, w.sc
    ent = resolve(tx, sc, [rec.name], visible_only=False).get(rec.name)
    have: set[str] = set()
    if ent is None:
        ent = w.create_entity(rec.name, rec.entityType or "")
        counts["entities"] += 1
    elif not ent.visible:
        w.link_entity(ent.id)
        counts["existingEntities"] += 1
    elif ent.id <= fresh_above:
        counts["existingEntities"] += 1
        have = observation_texts(tx, sc, [ent.id])[ent.id]
    added = w.add_new_observations(ent.id, rec.observations, have, repeats=ent.id > fresh_above)
    counts["observations"] += len(added)


def _import_relation(w: Writer, rec: RelationRecord, counts: dict[str, int]) -> None:
    found = resolve(w.tx, w.sc, [rec.from_, rec.to], visible_only=False)
    for name in (rec.from_, rec.to):
        if name not in found:
            found[name] = w.create_entity(name, "entity")
            counts["createdEndpoints"] += 1
        elif not found[name].visible:
            w.link_entity(found[name].id)
            found[name].visible = True
    created = create_relations(w, [(rec.from_, rec.relationType, rec.to)])
    counts["relations" if created else "existingRelations"] += 1
