"""MCP lifecycle pieces: version negotiation, method parameter structs, results.

Pure: builds and decodes values, performs no I/O.
"""

from __future__ import annotations

import re
from typing import TypeVar

import msgspec

from . import content

# Newest first. An unknown requested version is answered with the newest.
SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST_VERSION = SUPPORTED_VERSIONS[0]
STRUCTURED_CONTENT_SINCE = "2025-06-18"
# JSON-RPC batches: 2025-03-26 says servers MUST accept them; 2025-06-18 removed
# them again, and 2024-11-05 never had them.
BATCH_VERSIONS = frozenset({"2025-03-26"})

TOOLS_PAGE_SIZE = 100
# The levels of ``logging/setLevel`` (RFC 5424 severities).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

T = TypeVar("T")


def negotiate(requested: object) -> str:
    """The version the server answers for the client's requested one."""
    if isinstance(requested, str) and requested in SUPPORTED_VERSIONS:
        return requested
    return LATEST_VERSION


def batch_refusal(version: str | None) -> str | None:
    """Why a batch is refused in a session that negotiated ``version`` (None: not
    initialized yet), or None when batches are accepted."""
    if version is None:
        return (
            "Invalid Request: a JSON-RPC batch before initialize; send initialize alone "
            "(it MUST NOT be part of a batch). Batches are accepted once protocol version "
            "2025-03-26 is negotiated"
        )
    if version in BATCH_VERSIONS:
        return None
    return (
        f"Invalid Request: JSON-RPC batches are not part of MCP {version} (the negotiated "
        "version; only 2025-03-26 has them); send one JSON-RPC object per line"
    )


class ClientInfo(msgspec.Struct):
    name: str = "unknown"
    version: str = ""


class InitializeParams(msgspec.Struct):
    protocolVersion: object = None
    capabilities: dict[str, object] = msgspec.field(default_factory=dict)
    clientInfo: ClientInfo = msgspec.field(default_factory=ClientInfo)
    # memtrio reads ``_meta["memtrio/root"]``: the session's repository (docs/transports.md).
    meta: dict[str, object] | None = msgspec.field(default=None, name="_meta")


class Root(msgspec.Struct):
    """One entry of a client's ``roots/list`` answer."""

    uri: str
    name: str | None = None


class ListRootsResult(msgspec.Struct):
    roots: list[Root]


class ErrorObject(msgspec.Struct):
    """The ``error`` member of a JSON-RPC error response from the client."""

    code: int
    message: str = ""


class CallParams(msgspec.Struct):
    name: str
    arguments: msgspec.Raw = msgspec.Raw(b"")
    _meta: dict[str, object] | None = msgspec.field(default=None, name="_meta")


class CursorParams(msgspec.Struct):
    cursor: str | None = None


class ReadResourceParams(msgspec.Struct):
    uri: str


class SetLevelParams(msgspec.Struct):
    level: str


class CancelledParams(msgspec.Struct):
    requestId: int | str
    reason: str | None = None


initialize_params = msgspec.json.Decoder(InitializeParams)
call_params = msgspec.json.Decoder(CallParams)
cursor_params = msgspec.json.Decoder(CursorParams)
read_resource_params = msgspec.json.Decoder(ReadResourceParams)
list_roots_result = msgspec.json.Decoder(ListRootsResult)
error_object = msgspec.json.Decoder(ErrorObject)
cancelled_params = msgspec.json.Decoder(CancelledParams)
set_level_params = msgspec.json.Decoder(SetLevelParams)

_encoder = msgspec.json.Encoder()


def initialize_result(
    version: str, server_version: str, instructions: str, has_resources: bool
) -> dict[str, object]:
    # logging: ``logging/setLevel`` is accepted (memtrio sends no log notifications).
    capabilities: dict[str, object] = {"tools": {"listChanged": False}, "logging": {}}
    if has_resources:
        capabilities["resources"] = {"listChanged": False, "subscribe": False}
    return {
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": {"name": "memtrio", "title": "memtrio", "version": server_version},
        "instructions": instructions,
    }


def tool_result(
    value: object,
    is_error: bool = False,
    structured_ok: bool = True,
    *,
    tool: str = "",
    mode: content.ContentMode = "json",
) -> dict[str, object]:
    """A ``CallToolResult`` for a handler's return value (see protocol.tools).

    ``mode`` is the session's content shape (``protocol.content``): ``markdown``
    adds a summary item before the JSON one; an error keeps one plain item.
    """
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}], "isError": is_error}
    shape = "json" if is_error else mode
    if isinstance(value, msgspec.Struct) and shape == "json":
        # Encoded once: the text item holds the JSON, structuredContent the same bytes.
        payload = _encoder.encode(value)
        result: dict[str, object] = {
            "content": [{"type": "text", "text": payload.decode("utf-8")}],
            "isError": is_error,
        }
        if structured_ok and payload[:1] == b"{":
            result["structuredContent"] = msgspec.Raw(payload)
        return result
    if isinstance(value, msgspec.Struct):
        value = msgspec.to_builtins(value)
    text = _encoder.encode(value).decode("utf-8")
    result = {
        "content": content.items(tool, value, text, shape),
        "isError": is_error,
    }
    if structured_ok and isinstance(value, dict):
        result["structuredContent"] = value
    return result


def tool_error(message: str) -> dict[str, object]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


# How `tool_failure` words a handler's unexpected exception: "<tool> failed: <Type>: ...".
_TOOL_FAILURE = re.compile(r"^[\w.-]+ failed: [A-Za-z_][\w.]*: ")


def tool_failure(tool: str, exc: Exception) -> dict[str, object]:
    """The ``isError`` result of a tool whose handler raised an unexpected exception: a bug
    of the server, not a refusal of the caller's input (those name what to do)."""
    return tool_error(f"{tool} failed: {type(exc).__name__}: {exc}")


def is_tool_failure(text: str) -> bool:
    """Whether an ``isError`` text is a `tool_failure` (an internal error, not a refusal)."""
    return _TOOL_FAILURE.match(text) is not None


def paginate(items: list[T], cursor: str | None, page_size: int) -> tuple[list[T], str | None]:
    """Slice by an opaque cursor (the start offset as a decimal string).

    Raises ValueError for a cursor this server did not issue.
    """
    start = 0
    if cursor:
        if not cursor.isdigit():
            raise ValueError(f"invalid cursor {cursor!r}")
        start = int(cursor)
        if start > len(items):
            raise ValueError(f"invalid cursor {cursor!r}")
    page = items[start : start + page_size]
    nxt = start + page_size
    return page, (str(nxt) if nxt < len(items) else None)
