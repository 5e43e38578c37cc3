"""The records of a memtrio export, typed with the tools' own limits, and their checks.

Each line of an export decodes to one of the record structs below (built
from the tools' limit types, `limits`); `check_record` then applies the
tools' checks to it, so an import accepts nothing a tool would refuse.
"""

from __future__ import annotations

import base64
import binascii
import os
from typing import Annotated, Any, Literal

import msgspec

from ...protocol.errors import BadArgument, DomainError
from ...protocol.screening import screen
from ...protocol.secrets import SecretsMode
from ..store.domain import limits
from ..store.domain.documents import canonical_name
from ..store.domain.limits import MAX_CONTENT, MAX_LINKS, Importance, MemoryType, Scopes
from ..store.domain.scopes import GLOBAL, REPO_PREFIX, ScopeError, check_syntax
from ..store.interfaces.anchors import MAX_ANCHORS, Anchor, check_anchors
from ..store.tooling.import_file import ImportRefused, decode_line, printable

FORMAT = "memtrio-export"
# Version 2 refers to an entity by its name exactly (the store's identity since schema
# version 7); version 1 by its canonical name (casefolded), which import still reads.
# Version 3 adds a memory's code anchors (``anchors``, schema version 8), written only
# for a memory that has some: a file of versions 1 and 2 has none, and is read as before.
VERSION = 3
READS = (1, 2, 3)

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


class HeaderRecord(Record, tag="header", frozen=True, forbid_unknown_fields=False):
    """Unknown fields pass, so a newer format is refused by its version, not a field."""

    format: str | None = None
    version: int | None = None
    schema_version: Annotated[int, msgspec.Meta(ge=0, le=MAX_SCHEMA_VERSION)] = 0
    exported_at: float | None = None


class ScopeRecord(Record, tag="scope", frozen=True):
    id: RowId
    name: str


class EntityRecord(Record, tag="entity", frozen=True):
    id: RowId
    name: str
    canonical_name: str
    kind: str
    created_at: Timestamp
    updated_at: Timestamp
    scopes: RowScopes = []


class RelationRecord(Record, tag="relation", frozen=True):
    id: RowId
    source: str
    relation_type: str
    target: str
    metadata: str
    created_at: Timestamp
    scopes: RowScopes = []


class AnchorRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A memory's code anchor (`interfaces.anchors.Anchor`), checked by `check_anchors`."""

    path: str
    symbol: str
    kind: str
    commit: str
    digest: str
    written_at: float

    def anchor(self) -> Anchor:
        return Anchor(self.path, self.symbol, self.kind, self.commit, self.digest, self.written_at)


class MemoryRecord(Record, tag="memory", frozen=True):
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
    anchors: Annotated[list[AnchorRecord], msgspec.Meta(max_length=MAX_ANCHORS)] = []


class VectorRecord(Record, tag="vector", frozen=True):
    kind: Literal["memory", "entity", "relation"]
    # Not `RowId | ...`: msgspec 0.23 segfaults (in the GC) on a union of a constrained int and a tuple.
    key: int | str | tuple[str, str, str]
    model: ModelName
    revision: ModelName
    dim: Annotated[int, msgspec.Meta(ge=1, le=MAX_DIM)]
    vec: Annotated[str, msgspec.Meta(max_length=4 * ((4 * MAX_DIM * MAX_WINDOWS + 2) // 3))]


class RecallLogRecord(Record, tag="recall_log", frozen=True):
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
ORDER = {
    HeaderRecord: 0,
    ScopeRecord: 1,
    EntityRecord: 2,
    RelationRecord: 3,
    MemoryRecord: 4,
    VectorRecord: 5,
    RecallLogRecord: 6,
}
NAMES = ["header", "scope", "entity", "relation", "memory", "vector", "recall_log"]


def _scope(name: str, where: str) -> str:
    """A stored scope: the canonical syntax exactly (`scopes.check_syntax`, no file-system access)."""
    try:
        text = check_syntax(name)
    except ScopeError as exc:
        raise BadArgument(f"{where}: {exc}") from None
    path = text[len(REPO_PREFIX) :]
    if text != name or (text != GLOBAL and os.path.normpath(path) != path):
        raise BadArgument(f"{where}: scope {printable(name, 200)!r} is not in canonical form")
    return text


def _entity_key(name: str, where: str) -> str:
    """A reference to an entity: its name (version 2) or canonical name (version 1), which
    `transfer.check` requires the file to define above."""
    return limits.check_stored_name(name, where)


def vector_bytes(rec: VectorRecord, where: str) -> bytes | None:
    """The float32 bytes of a vector record; None when they are not whole vectors of ``dim``.

    Such a vector is left out (``memtrio reembed`` or recall computes it again).
    """
    try:
        data = base64.b64decode(rec.vec, validate=True)
    except (binascii.Error, ValueError):
        raise BadArgument(f"{where}: `vec` is not base64") from None
    size = 4 * rec.dim
    if not data or len(data) % size:
        return None
    if len(data) // size > MAX_WINDOWS:
        raise BadArgument(
            f"{where}: `vec` holds {len(data) // size:,} windows; the limit is {MAX_WINDOWS}"
        )
    import numpy as np  # ~40 ms: only when an import file carries vectors

    if not np.isfinite(np.frombuffer(data, dtype="<f4")).all():
        raise BadArgument(f"{where}: `vec` holds a NaN or infinite value")
    return data


def check_record(rec: Record, number: int) -> None:  # noqa: C901
    """The tools' checks on one decoded record (types and ranges were checked by decoding).

    Error handling: raises `BadArgument` (a `ScopeError` for a scope) naming the field.
    """
    at = f"line {number}"
    match rec:
        case ScopeRecord():
            _scope(rec.name, f"{at}: name")
        case EntityRecord():
            limits.check_stored_name(rec.name, f"{at}: name")
            if rec.canonical_name != canonical_name(rec.name):
                raise BadArgument(
                    f"{at}: canonical_name {printable(rec.canonical_name, 200)!r} is not the canonical form of the name"
                )
            limits.check_type(rec.kind, f"{at}: kind", "kind")
            for scope in rec.scopes:
                _scope(scope, f"{at}: scopes")
        case RelationRecord():
            _entity_key(rec.source, f"{at}: source")
            _entity_key(rec.target, f"{at}: target")
            limits.check_type(rec.relation_type, f"{at}: relation_type", "relation_type")
            limits.check_metadata_text(rec.metadata, f"{at}: metadata")
            try:
                _metadata_decoder.decode(rec.metadata)
            except (msgspec.DecodeError, RecursionError):
                raise BadArgument(f"{at}: metadata is not the JSON text of an object") from None
            for scope in rec.scopes:
                _scope(scope, f"{at}: scopes")
        case MemoryRecord():
            if not rec.memory_type.strip():
                raise BadArgument(f"{at}: memory_type must not be empty")
            for scope in rec.scopes:
                _scope(scope, f"{at}: scopes")
            for name in rec.entities:
                _entity_key(name, f"{at}: entities")
            for source, rtype, target in rec.relations:
                _entity_key(source, f"{at}: relations")
                _entity_key(target, f"{at}: relations")
                limits.check_type(rtype, f"{at}: relations", "relation type")
            check_anchors([a.anchor() for a in rec.anchors], f"{at}: anchors")
        case VectorRecord():
            expected = {"memory": int, "entity": str, "relation": tuple}[rec.kind]
            if not isinstance(rec.key, expected) or (
                isinstance(rec.key, int) and not 1 <= rec.key <= MAX_ROW_ID
            ):
                raise BadArgument(
                    f"{at}: the key of a {rec.kind} vector must be a {_KEY_SHAPE[rec.kind]}"
                )
            vector_bytes(rec, at)


_KEY_SHAPE = {
    "memory": "memory id",
    "entity": "entity name",
    "relation": "[source, relation_type, target] triple",
}


def decode_record(
    number: int, line: bytes, secrets: SecretsMode = "allow", warnings: list[str] | None = None
) -> Record:
    """Line ``number`` decoded and checked (`check_record`), then screened for secrets by
    the ``secrets`` mode (``protocol.screening``; an entity's canonical name follows its
    redacted name), what was replaced added to ``warnings``. Error handling: raises
    `ImportRefused`, a secret under ``refuse`` too."""
    rec = decode_line(_decoder, number, line)
    try:
        check_record(rec, number)
        screened, found = screen(rec, secrets, f"line {number}", skip=NOT_TEXT)
    except DomainError as exc:
        raise ImportRefused(printable(str(exc), 600)) from None
    if isinstance(screened, EntityRecord) and isinstance(rec, EntityRecord):
        if screened.name != rec.name:
            screened = msgspec.structs.replace(
                screened, canonical_name=canonical_name(screened.name)
            )
    if warnings is not None:
        warnings += found
    return screened


NOT_TEXT = frozenset({"vec", "canonical_name"})  # a vector's base64; derived from `name`
