"""The limits of what the store holds: one definition for the tools and for import.

The memory tools declare theirs as msgspec constraints on their argument
structs (so the tools' JSON Schemas show them) and count characters; the
knowledge-graph tools follow the reference server and count UTF-8 bytes with
the ``check_*`` functions below. ``memtrio import`` decodes every record with
structs built from these same types and calls these same checks, so a file
can hold nothing that a tool call could not have written.

Error handling: every check raises a `DomainError` (`BadArgument`, `LimitExceeded`) naming ``where`` (a tool
argument path, or an import file's line and field) and the limit.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import msgspec

from ....protocol.errors import BadArgument, LimitExceeded

# -- the memory tools (remember, update, relate, recall; characters) ------------

MAX_CONTENT = 1_000_000
MAX_SCOPES = 64
MAX_LINKS = 100  # entities, and relations, one `remember` may link
MAX_ENTITY_NAME = 512
MAX_QUERY = 10_000

Content = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_CONTENT)]
MemoryType = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=64,
        description="e.g. decision, pitfall; case ignored",
    ),
]
Importance = Annotated[float, msgspec.Meta(ge=0.0, le=1.0, description="breaks ranking ties")]
MemoryId = Annotated[int, msgspec.Meta(ge=1, le=2**63 - 1)]  # SQLite's and PostgreSQL's bigint
Scopes = Annotated[
    list[str],
    msgspec.Meta(
        max_length=MAX_SCOPES,
        description="`global`, `repo:/abs/path`; default: this repo",
    ),
]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ENTITY_NAME)]

# -- the knowledge-graph tools (the reference server's; UTF-8 bytes) ------------

MAX_NAME_BYTES = 1024  # entity names, entity types, relation types
MAX_OBSERVATION_BYTES = 65536
MAX_ITEMS = 1000  # items of one call (entities, relations, observations of an entity)

# -- both -------------------------------------------------------------------------

MAX_METADATA_BYTES = 65536  # a relation's metadata, as stored (JSON)


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def check_name(name: str, where: str) -> str:
    if not name.strip():
        raise BadArgument(f"{where}: an entity name must not be empty or only whitespace")
    size = utf8_size(name)
    if size > MAX_NAME_BYTES:
        raise LimitExceeded(
            f"{where}: the name is {size:,} bytes; entity names are limited to {MAX_NAME_BYTES:,} bytes (UTF-8)"
        )
    return name


def check_type(value: str, where: str, what: str = "entityType") -> str:
    size = utf8_size(value)
    if size > MAX_NAME_BYTES:
        raise LimitExceeded(
            f"{where}: {what} is {size:,} bytes; it is limited to {MAX_NAME_BYTES:,} bytes (UTF-8)"
        )
    return value


def check_relation_type(value: str, where: str) -> str:
    if not value.strip():
        raise BadArgument(
            f"{where}: relationType must not be empty (use an active-voice verb such as `works_at`)"
        )
    return check_type(value, where, "relationType")


def check_observation_size(text: str, where: str) -> str:
    size = utf8_size(text)
    if size > MAX_OBSERVATION_BYTES:
        raise LimitExceeded(
            f"{where}: the observation is {size:,} bytes; observations are limited to {MAX_OBSERVATION_BYTES:,} bytes (UTF-8)"
        )
    return text


def check_observation(text: str, where: str) -> str:
    if not text.strip():
        raise BadArgument(f"{where}: an observation must not be empty or only whitespace")
    return check_observation_size(text, where)


def check_stored_name(name: str, where: str) -> str:
    """An entity name either tool family accepts: the memory tools' characters or the graph's bytes."""
    if not name.strip():
        raise BadArgument(f"{where}: an entity name must not be empty or only whitespace")
    if len(name) > MAX_ENTITY_NAME and utf8_size(name) > MAX_NAME_BYTES:
        raise LimitExceeded(
            f"{where}: the name is {utf8_size(name):,} bytes ({len(name):,} characters); entity names are "
            f"limited to {MAX_NAME_BYTES:,} bytes (UTF-8) or {MAX_ENTITY_NAME:,} characters"
        )
    return name


def check_metadata_text(text: str, where: str) -> str:
    size = utf8_size(text)
    if size > MAX_METADATA_BYTES:
        raise LimitExceeded(
            f"{where}: the metadata is {size:,} bytes as JSON; relation metadata is limited to {MAX_METADATA_BYTES:,} bytes"
        )
    return text


def check_metadata(value: dict[str, Any] | None, where: str) -> dict[str, Any] | None:
    """Relation metadata a tool call gives: its JSON within `MAX_METADATA_BYTES`."""
    if value:
        try:
            text = json.dumps(value, sort_keys=True)
        except (ValueError, RecursionError):
            raise BadArgument(f"{where}: the metadata is nested too deeply") from None
        check_metadata_text(text, where)
    return value
