"""Export and import of the whole store as JSON lines, and flush.

Export writes one JSON object per line: a header, then scopes, entities,
relations, memories, vectors and the recall log. Entities are keyed by
canonical name, relations by (source, type, target), so an import into a store
that already holds some of them reuses them; ids are kept when they are free.
Exporting, importing into an empty store and exporting again gives the same
lines (apart from the header's ``exported_at``).

Importing the same file twice is harmless: a memory with the same id, content
and creation time is skipped.

Import reads the file twice, streaming, with bounded memory (see
`import_file`). `check` decodes every line with the typed record structs
below, built from the tools' own limit types (`limits`), applies the tools'
checks, and checks what the records refer to (in a scratch SQLite database,
not in memory); any failure refuses the whole file, naming the line.
`import_records` then writes the records in the caller's one transaction.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any, BinaryIO, Literal

import msgspec

from ...protocol.tools import ToolError
from . import limits
from .documents import canonical_name
from .import_file import (
    ImportRefused,
    decode_line,
    numbered_lines,
    printable,
    record_type,
    require_json,
)
from .limits import MAX_CONTENT, MAX_LINKS, Importance, MemoryType, Scopes
from .scope_rows import ensure_scope
from .scopes import GLOBAL, REPO_PREFIX, ScopeError, ScopePolicy, check_syntax
from .vectors import Vec, put_vector
from .writer import Change

FORMAT = "memtrio-export"
VERSION = 1


ImportError_ = ImportRefused  # a file refused as a whole; the message names the line


# -- export ------------------------------------------------------------------------


def export_lines(conn: sqlite3.Connection) -> Iterator[dict[str, Any]]:
    """Every record of the store, in a stable order (run inside one read transaction).

    Streams: rows are read as they are written out, never all at once.
    """
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    yield {
        "type": "header",
        "format": FORMAT,
        "version": VERSION,
        "schema_version": version,
        "exported_at": time.time(),
    }
    for sid, name in conn.execute("SELECT id, name FROM scopes ORDER BY id"):
        yield {"type": "scope", "id": sid, "name": name}

    def scopes_of(table: str, column: str, item: int) -> list[str]:
        rows = conn.execute(
            f"SELECT s.name FROM {table} x JOIN scopes s ON s.id = x.scope_id WHERE x.{column} = ?",
            (item,),
        )
        return sorted(r[0] for r in rows)

    def triple(rid: int) -> list[str] | None:
        row = conn.execute(
            """SELECT s.canonical_name, r.relation_type, t.canonical_name FROM relations r
               JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id WHERE r.id = ?""",
            (rid,),
        ).fetchone()
        return list(row) if row else None

    for eid, name, cname, kind, created, updated in conn.execute(
        "SELECT id, name, canonical_name, kind, created_at, updated_at FROM entities ORDER BY id"
    ):
        yield {
            "type": "entity", "id": eid, "name": name, "canonical_name": cname, "kind": kind,
            "created_at": created, "updated_at": updated, "scopes": scopes_of("entity_scopes", "entity_id", eid),
        }  # fmt: skip
    for rid, src, rtype, tgt, meta, created in conn.execute(
        """SELECT r.id, s.canonical_name, r.relation_type, t.canonical_name, r.metadata, r.created_at
           FROM relations r JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
           ORDER BY r.id"""
    ):
        yield {
            "type": "relation", "id": rid, "source": src, "relation_type": rtype, "target": tgt,
            "metadata": meta, "created_at": created, "scopes": scopes_of("relation_scopes", "relation_id", rid),
        }  # fmt: skip
    for row in conn.execute(
        "SELECT id, content, memory_type, importance, created_at, updated_at, last_accessed_at, access_count FROM memories ORDER BY id"
    ):
        mid = row[0]
        entities = conn.execute(
            "SELECT e.canonical_name FROM memory_entities me JOIN entities e ON e.id = me.entity_id WHERE me.memory_id = ?",
            (mid,),
        )
        relations = conn.execute(
            "SELECT relation_id FROM memory_relations WHERE memory_id = ?", (mid,)
        ).fetchall()
        yield {
            "type": "memory", "id": mid, "content": row[1], "memory_type": row[2], "importance": row[3],
            "created_at": row[4], "updated_at": row[5], "last_accessed_at": row[6], "access_count": row[7],
            "scopes": scopes_of("memory_scopes", "memory_id", mid),
            "entities": sorted(r[0] for r in entities),
            "relations": sorted(t for (rid,) in relations if (t := triple(rid)) is not None),
        }  # fmt: skip
    for kind, item, model, revision, dim, vec in conn.execute(
        "SELECT kind, item_id, model, revision, dim, vec FROM vectors ORDER BY kind, item_id"
    ):
        key: Any = (
            item
            if kind == "memory"
            else (
                conn.execute("SELECT canonical_name FROM entities WHERE id = ?", (item,)).fetchone()
                or [None]
            )[0]
            if kind == "entity"
            else triple(item)
        )
        if key is None:
            continue  # a vector of a row that no longer exists
        # A long text's windows: chunk 0 is in `vectors`, the others (same model) follow it.
        chunks = conn.execute(
            """SELECT vec FROM vector_chunks WHERE kind = ? AND item_id = ? AND model = ? AND revision = ?
               ORDER BY chunk""",
            (kind, item, model, revision),
        )
        vec = vec + b"".join(r[0] for r in chunks)
        yield {
            "type": "vector", "kind": kind, "key": key, "model": model, "revision": revision, "dim": dim,
            "vec": base64.b64encode(vec).decode("ascii"),
        }  # fmt: skip
    for ts, kind, query, scopes, ids, scores in conn.execute(
        "SELECT ts, kind, query, scopes, ids, scores FROM recall_log ORDER BY id"
    ):
        yield {
            "type": "recall_log",
            "ts": ts,
            "kind": kind,
            "query": query,
            "scopes": scopes,
            "ids": ids,
            "scores": scores,
        }


# -- import records: the tools' limits as types ----------------------------------------

MAX_ROW_ID = 2**63 - 1  # SQLite's INTEGER
MAX_TIMESTAMP = 253_402_300_799.0  # 9999-12-31 23:59:59 UTC, the last time `datetime` shows
MAX_SCHEMA_VERSION = 1_000
MAX_ROW_SCOPES = limits.MAX_ITEMS  # scopes of one entity or relation (one per repository using it)
MAX_MODEL_NAME = 1024  # characters of an embedding model id or revision
MAX_DIM = 8192
MAX_WINDOWS = 256  # `[embedding] max_chunks` at most
MAX_LOG_TEXT = 1_000_000  # characters of a recall-log entry's JSON texts

RowId = Annotated[int, msgspec.Meta(ge=1, le=MAX_ROW_ID)]
Timestamp = Annotated[float, msgspec.Meta(ge=0.0, le=MAX_TIMESTAMP)]
RowScopes = Annotated[list[str], msgspec.Meta(max_length=MAX_ROW_SCOPES)]
ModelName = Annotated[str, msgspec.Meta(max_length=MAX_MODEL_NAME)]
LogText = Annotated[str, msgspec.Meta(max_length=MAX_LOG_TEXT)]


class Record(msgspec.Struct, tag_field="type", forbid_unknown_fields=True, frozen=True):
    pass


class HeaderRecord(Record, tag="header", forbid_unknown_fields=False):
    """Unknown fields pass, so a newer format is refused by its version, not a field."""

    format: str | None = None
    version: int | None = None
    schema_version: Annotated[int, msgspec.Meta(ge=0, le=MAX_SCHEMA_VERSION)] = 0
    exported_at: float | None = None


class ScopeRecord(Record, tag="scope"):
    id: RowId
    name: str


class EntityRecord(Record, tag="entity"):
    id: RowId
    name: str
    canonical_name: str
    kind: str
    created_at: Timestamp
    updated_at: Timestamp
    scopes: RowScopes = []


class RelationRecord(Record, tag="relation"):
    id: RowId
    source: str
    relation_type: str
    target: str
    metadata: str
    created_at: Timestamp
    scopes: RowScopes = []


class MemoryRecord(Record, tag="memory"):
    id: RowId
    content: Annotated[str, msgspec.Meta(max_length=MAX_CONTENT)]
    memory_type: MemoryType
    importance: Importance
    created_at: Timestamp
    updated_at: Timestamp
    last_accessed_at: Timestamp | None = None
    access_count: Annotated[int, msgspec.Meta(ge=0, le=MAX_ROW_ID)] = 0
    scopes: Scopes = []
    entities: Annotated[list[str], msgspec.Meta(max_length=MAX_LINKS)] = []
    relations: Annotated[list[tuple[str, str, str]], msgspec.Meta(max_length=MAX_LINKS)] = []


class VectorRecord(Record, tag="vector"):
    kind: Literal["memory", "entity", "relation"]
    # Not `RowId | ...`: msgspec 0.23 segfaults (in the GC) on a union of a constrained int and a tuple.
    key: int | str | tuple[str, str, str]
    model: ModelName
    revision: ModelName
    dim: Annotated[int, msgspec.Meta(ge=1, le=MAX_DIM)]
    vec: Annotated[str, msgspec.Meta(max_length=4 * ((4 * MAX_DIM * MAX_WINDOWS + 2) // 3))]


class RecallLogRecord(Record, tag="recall_log"):
    ts: Timestamp
    kind: Annotated[str, msgspec.Meta(max_length=64)]
    query: Annotated[str, msgspec.Meta(max_length=limits.MAX_QUERY)]
    scopes: LogText
    ids: LogText
    scores: LogText


AnyRecord = (
    HeaderRecord
    | ScopeRecord
    | EntityRecord
    | RelationRecord
    | MemoryRecord
    | VectorRecord
    | RecallLogRecord
)
_decoder = msgspec.json.Decoder(AnyRecord)
_metadata_decoder = msgspec.json.Decoder(dict[str, Any])
_ORDER = {
    HeaderRecord: 0,
    ScopeRecord: 1,
    EntityRecord: 2,
    RelationRecord: 3,
    MemoryRecord: 4,
    VectorRecord: 5,
    RecallLogRecord: 6,
}
_NAMES = ["header", "scope", "entity", "relation", "memory", "vector", "recall_log"]


def _scope(name: str, where: str) -> str:
    """A stored scope: the canonical syntax exactly (`scopes.check_syntax`, no file-system access)."""
    try:
        text = check_syntax(name)
    except ScopeError as exc:
        raise ToolError(f"{where}: {exc}") from None
    path = text[len(REPO_PREFIX) :]
    if text != name or (text != GLOBAL and os.path.normpath(path) != path):
        raise ToolError(f"{where}: scope {printable(name, 200)!r} is not in canonical form")
    return text


def _canonical(name: str, where: str) -> str:
    if not name or canonical_name(name) != name:
        raise ToolError(f"{where}: {printable(name, 200)!r} is not a canonical entity name")
    return name


def _vector_bytes(rec: VectorRecord, where: str) -> bytes | None:
    """The float32 bytes of a vector record; None when they are not whole vectors of ``dim``.

    Such a vector is left out (``memtrio reembed`` or recall computes it again).
    """
    try:
        data = base64.b64decode(rec.vec, validate=True)
    except (binascii.Error, ValueError):
        raise ToolError(f"{where}: `vec` is not base64") from None
    size = 4 * rec.dim
    if not data or len(data) % size:
        return None
    if len(data) // size > MAX_WINDOWS:
        raise ToolError(
            f"{where}: `vec` holds {len(data) // size:,} windows; the limit is {MAX_WINDOWS}"
        )
    import numpy as np

    if not np.isfinite(np.frombuffer(data, dtype="<f4")).all():
        raise ToolError(f"{where}: `vec` holds a NaN or infinite value")
    return data


def check_record(rec: Record, number: int) -> None:
    """The tools' checks on one decoded record (types and ranges were checked by decoding).

    Error handling: raises `ToolError` (a `ScopeError` for a scope) naming the field.
    """
    at = f"line {number}"
    match rec:
        case ScopeRecord():
            _scope(rec.name, f"{at}: name")
        case EntityRecord():
            limits.check_stored_name(rec.name, f"{at}: name")
            if rec.canonical_name != canonical_name(rec.name):
                raise ToolError(
                    f"{at}: canonical_name {printable(rec.canonical_name, 200)!r} is not the canonical form of the name"
                )
            limits.check_type(rec.kind, f"{at}: kind", "kind")
            for scope in rec.scopes:
                _scope(scope, f"{at}: scopes")
        case RelationRecord():
            _canonical(rec.source, f"{at}: source")
            _canonical(rec.target, f"{at}: target")
            limits.check_type(rec.relation_type, f"{at}: relation_type", "relation_type")
            limits.check_metadata_text(rec.metadata, f"{at}: metadata")
            try:
                _metadata_decoder.decode(rec.metadata)
            except (msgspec.DecodeError, RecursionError):
                raise ToolError(f"{at}: metadata is not the JSON text of an object") from None
            for scope in rec.scopes:
                _scope(scope, f"{at}: scopes")
        case MemoryRecord():
            if not rec.memory_type.strip():
                raise ToolError(f"{at}: memory_type must not be empty")
            for scope in rec.scopes:
                _scope(scope, f"{at}: scopes")
            for name in rec.entities:
                _canonical(name, f"{at}: entities")
            for source, rtype, target in rec.relations:
                _canonical(source, f"{at}: relations")
                _canonical(target, f"{at}: relations")
                limits.check_type(rtype, f"{at}: relations", "relation type")
        case VectorRecord():
            expected = {"memory": int, "entity": str, "relation": tuple}[rec.kind]
            if not isinstance(rec.key, expected) or (
                expected is int and not 1 <= rec.key <= MAX_ROW_ID
            ):
                raise ToolError(
                    f"{at}: the key of a {rec.kind} vector must be a {_KEY_SHAPE[rec.kind]}"
                )
            _vector_bytes(rec, at)


_KEY_SHAPE = {
    "memory": "memory id",
    "entity": "canonical entity name",
    "relation": "[source, relation_type, target] triple",
}


def _decode(number: int, line: bytes) -> Record:
    rec = decode_line(_decoder, number, line)
    try:
        check_record(rec, number)
    except ToolError as exc:
        raise ImportError_(printable(str(exc), 600)) from None
    return rec


# -- checking the whole file ------------------------------------------------------------


@dataclass
class Checked:
    """A memtrio export whose every line passed `check`: what `import_records` writes."""

    lines: Callable[[], Iterator[tuple[int, bytes]]]
    schema_version: int
    max_ids: dict[str, int] = field(default_factory=dict)


class _Seen:
    """What the file defined so far, in a scratch SQLite database (on disk, not in memory)."""

    def __init__(self) -> None:
        self.db = sqlite3.connect("", isolation_level=None)
        self.db.execute("CREATE TABLE seen (kind TEXT, key, PRIMARY KEY (kind, key)) WITHOUT ROWID")
        self.db.execute("BEGIN")

    def add(self, kind: str, key: Any) -> bool:
        """Record ``key``; False when it was already there."""
        try:
            self.db.execute("INSERT INTO seen VALUES (?, ?)", (kind, key))
        except sqlite3.IntegrityError:
            return False
        return True

    def has(self, kind: str, key: Any) -> bool:
        return (
            self.db.execute("SELECT 1 FROM seen WHERE kind = ? AND key = ?", (kind, key)).fetchone()
            is not None
        )

    def close(self) -> None:
        self.db.close()


def _key(triple: Iterable[str]) -> str:
    return json.dumps(list(triple), ensure_ascii=False)


def check(lines: Callable[[], Iterator[tuple[int, bytes]]]) -> Checked:
    """Check every line of an export (``lines()`` yields them, numbered) before anything is written.

    Checks each record's types and limits, the order of the records (the
    header first, then scopes, entities, relations, memories, vectors, the
    recall log, as `export_lines` writes them), that ids and keys are not
    repeated, and that every entity, relation and memory a record refers to
    is defined above it. Error handling: the first failure raises
    `ImportError_` naming its line.
    """
    seen = _Seen()
    max_ids = {"entities": 0, "relations": 0, "memories": 0}
    schema_version = 0
    rank = -1
    try:
        for number, line in lines():
            if rank < 0 and record_type(line) != "header":
                require_json(number, line)
                raise ImportError_("not a memtrio export: the first line must be its header")
            rec = _decode(number, line)
            at = f"line {number}"
            order = _ORDER[type(rec)]
            if order < rank or (order == 0 and rank == 0):
                raise ImportError_(
                    f"{at}: a {_NAMES[order]} record after {_NAMES[rank]} records; an export lists the header, "
                    "scopes, entities, relations, memories, vectors and the recall log in that order"
                )
            rank = order
            match rec:
                case HeaderRecord():
                    if rec.format != FORMAT:
                        raise ImportError_(
                            "not a memtrio export: the first line must be its header"
                        )
                    if rec.version != VERSION:
                        raise ImportError_(
                            f"export format version {printable(str(rec.version), 40)} is not supported (this memtrio reads {VERSION})"
                        )
                    schema_version = rec.schema_version
                case ScopeRecord():
                    if not seen.add("scope", rec.name):
                        raise ImportError_(
                            f"{at}: scope {printable(rec.name, 200)!r} is listed twice"
                        )
                case EntityRecord():
                    _once(seen, "entity id", rec.id, at)
                    _once(seen, "entity", rec.canonical_name, at)
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
                    target = _key(rec.key) if rec.kind == "relation" else rec.key
                    _defined(seen, rec.kind, target, at)
                    _once(seen, f"{rec.kind} vector", target, at)
        if rank < 0:
            raise ImportError_("the file is empty (no records)")
    finally:
        seen.close()
    return Checked(lines, schema_version, max_ids)


def _once(seen: _Seen, kind: str, key: Any, at: str) -> None:
    if not seen.add(kind, key):
        shown = key if isinstance(key, int) else repr(printable(str(key), 200))
        raise ImportError_(f"{at}: {kind} {shown} appears twice in the file")


def _defined(seen: _Seen, kind: str, key: Any, at: str) -> None:
    if not seen.has(kind, key):
        shown = key if isinstance(key, int) else repr(printable(str(key), 200))
        raise ImportError_(f"{at}: refers to {kind} {shown}, which the file does not define above")


def check_file(file: BinaryIO) -> Checked:
    """`check` an open import file; `import_records` reads it again from its start."""
    return check(lambda: numbered_lines(file))


def parse_lines(lines: Iterable[str]) -> Checked:
    """`check` lines held in memory (tests, small inputs)."""
    data = [line.encode("utf-8", "surrogatepass") for line in lines]
    return check(lambda: ((i, b) for i, b in enumerate(data, 1) if b and not b.isspace()))


# -- writing --------------------------------------------------------------------------------


def _next_id(conn: sqlite3.Connection, table: str, in_file: int) -> int:
    """An id above every id of ``table`` (rows and AUTOINCREMENT's high mark) and of the file."""
    top = conn.execute(f"SELECT max(id) FROM {table}").fetchone()[0] or 0
    seq = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
    return max(top, seq[0] if seq else 0, in_file) + 1


def import_records(conn: sqlite3.Connection, checked: Checked) -> dict[str, int]:
    """Write a checked export (inside the caller's write transaction). Returns counts.

    A row keeps its id when the id is free in the store; otherwise it gets
    one above every id of the store and of the file, so it never takes the
    id of a later row of the file that could have kept its own. Entities are
    reused by canonical name, relations by (source, type, target), and a
    memory with the same id, content and creation time is skipped.
    """
    added = {
        "memories": 0,
        "entities": 0,
        "relations": 0,
        "vectors": 0,
        "recall_log": 0,
        "skipped_memories": 0,
    }
    next_id = {t: _next_id(conn, t, checked.max_ids.get(t, 0)) for t in _TABLES}
    unchunked = checked.schema_version < 4  # before vector_chunks
    # The file's memory ids -> the store's (and the content's length), off the heap.
    memory_map = sqlite3.connect("", isolation_level=None)
    memory_map.execute("CREATE TABLE m (old INTEGER PRIMARY KEY, new INTEGER, length INTEGER)")
    memory_map.execute("BEGIN")

    def row_id(table: str, item: int) -> int:
        if conn.execute(f"SELECT 1 FROM {table} WHERE id = ?", (item,)).fetchone() is None:
            return item
        next_id[table] += 1
        return next_id[table] - 1

    def link_scopes(table: str, item: int, scopes: list[str]) -> None:
        for name in scopes:
            conn.execute(
                f"INSERT OR IGNORE INTO {table} VALUES (?, ?)", (item, ensure_scope(conn, name))
            )

    def entity(canonical: str) -> int:
        return conn.execute(
            "SELECT id FROM entities WHERE canonical_name = ?", (canonical,)
        ).fetchone()[0]

    def relation(source: str, rtype: str, target: str) -> int | None:
        row = conn.execute(
            """SELECT r.id FROM relations r JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
               WHERE s.canonical_name = ? AND r.relation_type = ? AND t.canonical_name = ?""",
            (source, rtype, target),
        ).fetchone()
        return row[0] if row else None

    try:
        for number, line in checked.lines():
            rec = _decode(number, line)
            match rec:
                case ScopeRecord():
                    ensure_scope(conn, rec.name)
                case EntityRecord():
                    row = conn.execute(
                        "SELECT id FROM entities WHERE canonical_name = ?", (rec.canonical_name,)
                    ).fetchone()
                    if row:
                        eid = row[0]
                    else:
                        eid = conn.execute(
                            "INSERT INTO entities (id, name, canonical_name, kind, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                            (
                                row_id("entities", rec.id),
                                rec.name,
                                rec.canonical_name,
                                rec.kind,
                                rec.created_at,
                                rec.updated_at,
                            ),
                        ).lastrowid
                        added["entities"] += 1
                    link_scopes("entity_scopes", eid, rec.scopes)
                case RelationRecord():
                    rid = relation(rec.source, rec.relation_type, rec.target)
                    if rid is None:
                        rid = conn.execute(
                            "INSERT INTO relations (id, source_id, target_id, relation_type, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                            (
                                row_id("relations", rec.id),
                                entity(rec.source),
                                entity(rec.target),
                                rec.relation_type,
                                rec.metadata,
                                rec.created_at,
                            ),
                        ).lastrowid
                        added["relations"] += 1
                    link_scopes("relation_scopes", rid, rec.scopes)
                case MemoryRecord():
                    same = conn.execute(
                        "SELECT 1 FROM memories WHERE id = ? AND content = ? AND created_at = ?",
                        (rec.id, rec.content, rec.created_at),
                    ).fetchone()
                    if same:
                        memory_map.execute(
                            "INSERT INTO m VALUES (?, ?, ?)", (rec.id, rec.id, len(rec.content))
                        )
                        added["skipped_memories"] += 1
                        continue
                    mid = conn.execute(
                        """INSERT INTO memories (id, content, memory_type, importance, created_at, updated_at, last_accessed_at, access_count)
                           VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
                        (
                            row_id("memories", rec.id),
                            rec.content,
                            rec.memory_type,
                            rec.importance,
                            rec.created_at,
                            rec.updated_at,
                            rec.last_accessed_at,
                            rec.access_count,
                        ),
                    ).lastrowid
                    memory_map.execute(
                        "INSERT INTO m VALUES (?, ?, ?)", (rec.id, mid, len(rec.content))
                    )
                    added["memories"] += 1
                    link_scopes("memory_scopes", mid, rec.scopes)
                    for name in rec.entities:
                        conn.execute(
                            "INSERT OR IGNORE INTO memory_entities VALUES (?, ?)",
                            (mid, entity(name)),
                        )
                    for triple in rec.relations:
                        conn.execute(
                            "INSERT OR IGNORE INTO memory_relations VALUES (?, ?)",
                            (mid, relation(*triple)),
                        )
                case VectorRecord():
                    length = 0
                    if rec.kind == "memory":
                        row = memory_map.execute(
                            "SELECT new, length FROM m WHERE old = ?", (rec.key,)
                        ).fetchone()
                        item, length = row
                    elif rec.kind == "entity":
                        item = entity(rec.key)
                    else:
                        item = relation(*rec.key)
                    data = _vector_bytes(rec, f"line {number}")
                    if data is None:
                        continue  # not whole float32 vectors: recomputed by reembed
                    if (
                        rec.kind == "memory"
                        and unchunked
                        and len(data) == 4 * rec.dim
                        and length > 254
                    ):
                        # An export from before chunked embeddings: this vector covers only the
                        # first window of a long memory; reembed (or recall) recomputes it whole.
                        continue
                    # An existing row keeps its vectors: import never changes a row's
                    # content, and the row may belong to another repository too.
                    put_vector(
                        conn,
                        rec.kind,
                        item,
                        Vec(data, rec.dim, rec.model, rec.revision),
                        replace=False,
                    )
                    added["vectors"] += 1
                case RecallLogRecord():
                    exists = conn.execute(
                        "SELECT 1 FROM recall_log WHERE ts = ? AND kind = ? AND query = ?",
                        (rec.ts, rec.kind, rec.query),
                    ).fetchone()
                    if not exists:
                        conn.execute(
                            "INSERT INTO recall_log (ts, kind, query, scopes, ids, scores) VALUES (?, ?, ?, ?, ?, ?)",
                            (rec.ts, rec.kind, rec.query, rec.scopes, rec.ids, rec.scores),
                        )
                        added["recall_log"] += 1
    except ToolError as exc:  # the file changed since it was checked
        raise ImportError_(printable(str(exc), 600)) from None
    finally:
        memory_map.close()
    return added


_TABLES = ("entities", "relations", "memories")


def flush(
    conn: sqlite3.Connection, policy: ScopePolicy, everything: bool
) -> tuple[dict[str, int], list[Change]]:
    """Delete memories (and orphaned entities/relations) of the writable scopes, or everything."""
    before = {
        t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("memories", "entities", "relations")
    }
    if everything:
        for table in ("memories", "relations", "entities", "vectors", "recall_log", "scopes"):
            conn.execute(f"DELETE FROM {table}")
    else:
        ids = [
            r[0]
            for r in conn.execute(
                f"SELECT id FROM scopes WHERE name IN ({','.join('?' * len(policy.writable))})",
                policy.writable,
            )
        ]
        inner = ",".join(str(i) for i in ids) or "NULL"
        only_writable = lambda table, col, alias: (  # noqa: E731
            f"NOT EXISTS (SELECT 1 FROM {table} x WHERE x.{col} = {alias}.id AND x.scope_id NOT IN ({inner}))"
        )
        conn.execute(
            f"DELETE FROM memories WHERE id IN (SELECT m.id FROM memories m WHERE {only_writable('memory_scopes', 'memory_id', 'm')})"
        )
        conn.execute(
            f"""DELETE FROM relations WHERE id IN (SELECT r.id FROM relations r WHERE {only_writable("relation_scopes", "relation_id", "r")}
                AND NOT EXISTS (SELECT 1 FROM memory_relations mr WHERE mr.relation_id = r.id))"""
        )
        conn.execute(
            f"""DELETE FROM entities WHERE id IN (SELECT e.id FROM entities e WHERE {only_writable("entity_scopes", "entity_id", "e")}
                AND NOT EXISTS (SELECT 1 FROM memory_entities me WHERE me.entity_id = e.id)
                AND NOT EXISTS (SELECT 1 FROM relations r WHERE r.source_id = e.id OR r.target_id = e.id))"""
        )
    after = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in before}
    return {f"deleted_{t}": before[t] - after[t] for t in before}, [Change(kind="reset")]


def schema_version(conn: sqlite3.Connection) -> int:
    return conn.execute("PRAGMA user_version").fetchone()[0]
