"""Import of a whole-store export (checked, then written in one transaction), and flush.

Export (`export.export_lines`) writes a header, then scopes, entities,
relations, memories, vectors and the recall log; ids are kept on import when
they are free. Exporting, importing into an empty store and exporting again
gives the same lines (apart from the header's ``exported_at``). Importing the
same file twice is harmless: a memory with the same id, content and creation
time is skipped.

Import reads the file twice, streaming, with bounded memory (see
`import_file`). `check` decodes every line with the typed record structs of
`records` (built from the tools' own limit types), applies the tools' checks,
and checks what the records refer to (in a scratch SQLite database, not in
memory); any failure refuses the whole file, naming the line.
`import_records` then writes the records in the caller's one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import msgspec

from ...protocol.errors import DomainError
from ...protocol.secrets import SecretsMode
from ...supervisors.progress import Progress
from ..store.domain.embeddings import Vec, put_vector
from ..store.domain.scopes import ScopePolicy
from ..store.interfaces import StoreTx
from ..store.interfaces.recall_log import RecallEntry
from ..store.interfaces.upkeep import EntityRow, IdTable, MemoryRow, RelationRow
from ..store.sqlite.scratch import ImportMap, KeySet
from ..store.tooling.import_file import (
    ImportRefused,
    numbered_lines,
    printable,
    record_type,
    require_json,
)
from ..store.writer import Change
from .export import export_lines
from .records import (
    FORMAT,
    NAMES,
    ORDER,
    READS,
    VERSION,
    EntityRecord,
    HeaderRecord,
    MemoryRecord,
    RecallLogRecord,
    Record,
    RelationRecord,
    ScopeRecord,
    VectorRecord,
    decode_record,
    vector_bytes,
)

Key = int | str  # a row id, or a name or key of the file, in `KeySet`


@dataclass
class Checked:
    """A memtrio export whose every line passed `check`: what `import_records` writes."""

    lines: Callable[[], Iterator[tuple[int, bytes]]]
    schema_version: int
    max_ids: dict[str, int] = field(default_factory=dict)
    version: int = VERSION  # of the format: 1 refers to entities by canonical name
    secrets: SecretsMode = "allow"  # how the records are screened (``[store] secrets``)
    warnings: list[str] = field(default_factory=list)  # the secrets replaced, by line


def entity_key(rec: EntityRecord, version: int) -> str:
    """How the other records of a file of format ``version`` refer to the entity ``rec``."""
    return rec.name if version >= 2 else rec.canonical_name


def _key(triple: Iterable[str]) -> str:
    return json.dumps(list(triple), ensure_ascii=False)


def check(  # noqa: C901
    lines: Callable[[], Iterator[tuple[int, bytes]]],
    secrets: SecretsMode = "allow",
    progress: Progress | None = None,
) -> Checked:
    """Check every line of an export (``lines()`` yields them, numbered) before anything is written.

    Checks each record's types and limits, the order of the records (the
    header first, then scopes, entities, relations, memories, vectors, the
    recall log, as `export_lines` writes them), that ids and keys are not
    repeated, and that every entity, relation and memory a record refers to
    is defined above it; the records are screened for secrets by ``secrets`` (a memory,
    an entity name, a relation's fields, the recall log's queries, a vector's model label:
    `records.decode_record`), so what is checked is what will be written. Error handling:
    the first failure raises `ImportRefused` naming its line (a secret under ``refuse``).
    ``progress`` advances by one a line.
    """
    seen = KeySet()
    warnings: list[str] = []
    max_ids = {"entities": 0, "relations": 0, "memories": 0}
    schema_version = 0
    version = VERSION
    rank = -1
    try:
        for number, line in lines():
            if progress is not None:
                progress.advance()
            if rank < 0 and record_type(line) != "header":
                require_json(number, line)
                raise ImportRefused("not a memtrio export: the first line must be its header")
            rec = decode_record(number, line, secrets, warnings)
            at = f"line {number}"
            order = ORDER[type(rec)]
            if order < rank or (order == 0 and rank == 0):
                raise ImportRefused(
                    f"{at}: a {NAMES[order]} record after {NAMES[rank]} records; an export lists the header, "
                    "scopes, entities, relations, memories, vectors and the recall log in that order"
                )
            rank = order
            match rec:
                case HeaderRecord():
                    if rec.format != FORMAT:
                        raise ImportRefused(
                            "not a memtrio export: the first line must be its header"
                        )
                    if rec.version not in READS:
                        raise ImportRefused(
                            f"export format version {printable(str(rec.version), 40)} is not supported "
                            f"(this memtrio reads {' and '.join(map(str, READS))})"
                        )
                    schema_version, version = rec.schema_version, rec.version
                case ScopeRecord():
                    if not seen.add("scope", rec.name):
                        raise ImportRefused(
                            f"{at}: scope {printable(rec.name, 200)!r} is listed twice"
                        )
                case EntityRecord():
                    _once(seen, "entity id", rec.id, at)
                    _once(seen, "entity", entity_key(rec, version), at)
                    max_ids["entities"] = max(max_ids["entities"], rec.id)
                case RelationRecord():
                    _once(seen, "relation id", rec.id, at)
                    for end in (rec.source, rec.target):
                        _defined(seen, "entity", end, at)
                    _once(seen, "relation", _key((rec.source, rec.relation_type, rec.target)), at)
                    max_ids["relations"] = max(max_ids["relations"], rec.id)
                case MemoryRecord():
                    _once(seen, "memory", rec.id, at)
                    for name in rec.entities:
                        _defined(seen, "entity", name, at)
                    for triple in rec.relations:
                        _defined(seen, "relation", _key(triple), at)
                    max_ids["memories"] = max(max_ids["memories"], rec.id)
                case VectorRecord():
                    # decode_record checked that the key is of the kind's type
                    key = rec.key
                    target: Key = key if isinstance(key, (int, str)) else _key(key)
                    _defined(seen, rec.kind, target, at)
                    _once(seen, f"{rec.kind} vector", target, at)
        if rank < 0:
            raise ImportRefused("the file is empty (no records)")
    finally:
        seen.close()
    return Checked(lines, schema_version, max_ids, version, secrets, warnings)


def _once(seen: KeySet, kind: str, key: Key, at: str) -> None:
    if not seen.add(kind, key):
        shown = key if isinstance(key, int) else repr(printable(str(key), 200))
        raise ImportRefused(f"{at}: {kind} {shown} appears twice in the file")


def _defined(seen: KeySet, kind: str, key: Key, at: str) -> None:
    if not seen.has(kind, key):
        shown = key if isinstance(key, int) else repr(printable(str(key), 200))
        raise ImportRefused(f"{at}: refers to {kind} {shown}, which the file does not define above")


def check_file(
    file: BinaryIO, secrets: SecretsMode = "allow", progress: Progress | None = None
) -> Checked:
    """`check` an open import file; `import_records` reads it again from its start."""
    return check(lambda: numbered_lines(file), secrets, progress)


def parse_lines(lines: Iterable[str]) -> Checked:
    """`check` lines held in memory (tests, small inputs)."""
    data = [line.encode("utf-8", "surrogatepass") for line in lines]
    return check(lambda: ((i, b) for i, b in enumerate(data, 1) if b and not b.isspace()))


# -- writing --------------------------------------------------------------------------------


class _Importer:
    """Writes the records of a checked export into the store, one at a time (see `import_records`)."""

    def __init__(self, tx: StoreTx, checked: Checked) -> None:
        self.tx = tx
        self.upkeep = tx.imports
        self.added = dict.fromkeys(
            ("memories", "entities", "relations", "vectors", "recall_log", "skipped_memories"), 0
        )
        self.next_id: dict[IdTable, int] = {
            t: self.upkeep.next_id(t, checked.max_ids.get(t, 0)) for t in _TABLES
        }
        self.unchunked = checked.schema_version < 4  # before vector_chunks
        self.version = checked.version
        # The file's memory ids and entity keys -> the store's, off the heap.
        self.memory_map = ImportMap()

    def close(self) -> None:
        self.memory_map.close()

    def write(self, number: int, rec: Record) -> None:
        match rec:
            case ScopeRecord():
                self.upkeep.add_scope(rec.name)
            case EntityRecord():
                self.entity_record(rec)
            case RelationRecord():
                self.relation_record(rec)
            case MemoryRecord():
                self.memory_record(rec)
            case VectorRecord():
                self.vector_record(rec, number)
            case RecallLogRecord():
                self.recall_log_record(rec)

    # -- the store's rows -------------------------------------------------------

    def row_id(self, table: IdTable, item: int) -> int:
        """``item`` when it is free in ``table``, else the next id above the store's and the file's."""
        if self.upkeep.id_free(table, item):
            return item
        self.next_id[table] += 1
        return self.next_id[table] - 1

    def entity(self, key: str) -> int:
        """The store's id of the entity the file refers to as ``key``."""
        return self.memory_map.entity(key)

    def relation(self, source: str, rtype: str, target: str) -> int | None:
        return self.upkeep.relation_id(self.entity(source), rtype, self.entity(target))

    # -- one record each --------------------------------------------------------

    def entity_record(self, rec: EntityRecord) -> None:
        eid = self.upkeep.entity_id(rec.name)
        if eid is None:
            eid = self.upkeep.add_entity(
                EntityRow(
                    id=self.row_id("entities", rec.id),
                    name=rec.name,
                    canonical_name=rec.canonical_name,
                    kind=rec.kind,
                    created_at=rec.created_at,
                    updated_at=rec.updated_at,
                )
            )
            self.added["entities"] += 1
        self.memory_map.put_entity(entity_key(rec, self.version), eid)
        self.upkeep.link_scopes("entity", eid, rec.scopes)

    def relation_record(self, rec: RelationRecord) -> None:
        rid = self.relation(rec.source, rec.relation_type, rec.target)
        if rid is None:
            rid = self.upkeep.add_relation(
                RelationRow(
                    id=self.row_id("relations", rec.id),
                    source=rec.source,
                    relation_type=rec.relation_type,
                    target=rec.target,
                    metadata=rec.metadata,
                    created_at=rec.created_at,
                ),
                self.entity(rec.source),
                self.entity(rec.target),
            )
            self.added["relations"] += 1
        self.upkeep.link_scopes("relation", rid, rec.scopes)

    def memory_record(self, rec: MemoryRecord) -> None:
        if self.upkeep.memory_present(rec.id, rec.content, rec.created_at):
            self.memory_map.put_memory(rec.id, rec.id, len(rec.content))
            self.added["skipped_memories"] += 1
            return
        mid = self.upkeep.add_memory(
            MemoryRow(
                id=self.row_id("memories", rec.id),
                content=rec.content,
                memory_type=rec.memory_type,
                importance=rec.importance,
                created_at=rec.created_at,
                updated_at=rec.updated_at,
                last_accessed_at=rec.last_accessed_at,
                access_count=rec.access_count,
            )
        )
        self.memory_map.put_memory(rec.id, mid, len(rec.content))
        self.added["memories"] += 1
        self.upkeep.link_scopes("memory", mid, rec.scopes)
        relations = [self.relation(*triple) for triple in rec.relations]
        self.upkeep.link_memory(
            mid,
            [self.entity(name) for name in rec.entities],
            [r for r in relations if r is not None],
        )
        if rec.anchors:
            self.tx.anchors.set(mid, [a.anchor() for a in rec.anchors])

    def vector_record(self, rec: VectorRecord, number: int) -> None:
        length = 0
        key = rec.key  # of the kind's type: `check` found it defined above
        if isinstance(key, int):
            item, length = self.memory_map.memory(key)
        elif isinstance(key, str):
            item = self.entity(key)
        else:
            found = self.relation(*key)
            if found is None:
                return  # the file changed since it was checked
            item = found
        data = vector_bytes(rec, f"line {number}")
        if data is None:
            return  # not whole float32 vectors: recomputed by reembed
        if rec.kind == "memory" and self.unchunked and len(data) == 4 * rec.dim and length > 254:
            # An export from before chunked embeddings: this vector covers only the
            # first window of a long memory; reembed (or recall) recomputes it whole.
            return
        # An existing row keeps its vectors: import never changes a row's
        # content, and the row may belong to another repository too.
        if put_vector(
            self.tx, rec.kind, item, Vec(data, rec.dim, rec.model, rec.revision), replace=False
        ):
            self.added["vectors"] += 1

    def recall_log_record(self, rec: RecallLogRecord) -> None:
        entry = RecallEntry(
            ts=rec.ts, kind=rec.kind, query=rec.query, scopes=rec.scopes, ids=rec.ids,
            scores=rec.scores,
        )  # fmt: skip
        if self.tx.recall_log.append_new(entry):
            self.added["recall_log"] += 1


def import_records(
    tx: StoreTx, checked: Checked, progress: Progress | None = None
) -> dict[str, int]:
    """Write a checked export (inside the caller's write transaction). Returns counts of the
    rows it added (``skipped_memories``: memories already present).

    A row keeps its id when the id is free in the store; otherwise it gets
    one above every id of the store and of the file, so it never takes the
    id of a later row of the file that could have kept its own. Entities are
    reused by name (exactly), relations by (source, type, target), and a
    memory with the same id, content and creation time is skipped. ``progress``
    advances by one a line.
    """
    importer = _Importer(tx, checked)
    try:
        for number, line in checked.lines():
            importer.write(number, decode_record(number, line, checked.secrets))
            if progress is not None:
                progress.advance()
    except DomainError as exc:  # the file changed since it was checked
        raise ImportRefused(printable(str(exc), 600)) from None
    finally:
        importer.close()
    return importer.added


_TABLES: tuple[IdTable, ...] = ("entities", "relations", "memories")


def flush(
    tx: StoreTx, policy: ScopePolicy, everything: bool
) -> tuple[dict[str, int], list[Change]]:
    """Delete memories (and orphaned entities/relations) of the writable scopes, or everything."""
    deleted = tx.imports.flush(list(policy.writable), everything)
    return msgspec.structs.asdict(deleted), [Change(kind="reset")]


__all__ = ["FORMAT", "VERSION", "Checked", "ImportRefused", "check_file", "export_lines", "flush"]
