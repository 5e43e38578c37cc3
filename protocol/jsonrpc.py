"""JSON-RPC 2.0 envelope, decoded once with msgspec.

JSON-RPC has no tag field, so a line is decoded into one permissive envelope
struct with ``params: Raw``; the per-method (or per-tool) struct decodes the
params afterwards. Error handling: `decode_line` never raises on input; it
returns either a `Message` or a `Failure` that the caller answers.
"""

from __future__ import annotations

from typing import Any

import msgspec

JSONRPC = "2.0"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# Implementation-defined server errors live in -32000..-32099.
SERVER_NOT_INITIALIZED = -32002
REQUEST_CANCELLED = -32800
REQUEST_TOO_LARGE = -32001

Id = int | str | None


class Envelope(msgspec.Struct, omit_defaults=True):
    """Any JSON-RPC object: request, notification, or response."""

    jsonrpc: Any = msgspec.UNSET
    id: Any = msgspec.UNSET
    method: Any = msgspec.UNSET
    params: msgspec.Raw = msgspec.Raw(b"")
    result: msgspec.Raw = msgspec.Raw(b"")
    error: msgspec.Raw = msgspec.Raw(b"")


class Message(msgspec.Struct, frozen=True):
    """A well-formed request (``has_id``) or notification."""

    method: str
    id: Id
    has_id: bool
    params: msgspec.Raw | None


class Response(msgspec.Struct, frozen=True):
    """A response from the peer (we send no requests yet, so it is ignored)."""

    id: Id


class Failure(msgspec.Struct, frozen=True):
    """A line that cannot be served; answer it with `error_response`."""

    code: int
    message: str
    id: Id = None
    answer: bool = True


_envelope_decoder = msgspec.json.Decoder(Envelope)
_any_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, (int, str)) and not isinstance(value, bool))


def decode_line(line: bytes) -> Message | Response | Failure:
    """Decode one line into a message, a peer response, or a failure to answer."""
    try:
        env = _envelope_decoder.decode(line)
    except msgspec.ValidationError:
        # Valid JSON but not an object (an array, a number, ...), or fields of the
        # wrong type that the envelope cannot hold.
        try:
            value = _any_decoder.decode(line)
        except (msgspec.DecodeError, RecursionError) as exc:  # RecursionError: nested too deeply
            return Failure(PARSE_ERROR, f"Parse error: {exc}")
        if isinstance(value, list):
            msg = "Invalid Request: batches are not supported; send one JSON-RPC object per line"
            return Failure(INVALID_REQUEST, msg)
        return Failure(INVALID_REQUEST, "Invalid Request: expected a JSON-RPC object")
    except (msgspec.DecodeError, RecursionError) as exc:  # RecursionError: nested too deeply
        return Failure(PARSE_ERROR, f"Parse error: {exc}")

    rid = env.id if env.id is not msgspec.UNSET else None
    recoverable = rid if _valid_id(rid) else None
    if env.jsonrpc != JSONRPC:
        return Failure(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', recoverable)
    if not _valid_id(rid):
        return Failure(INVALID_REQUEST, 'Invalid Request: "id" must be a string, a number or null')
    if env.method is msgspec.UNSET:
        if len(env.result) or len(env.error):
            return Response(rid)
        return Failure(INVALID_REQUEST, 'Invalid Request: "method" is missing', recoverable)
    if not isinstance(env.method, str):
        return Failure(INVALID_REQUEST, 'Invalid Request: "method" must be a string', recoverable)
    params = env.params if len(env.params) else None
    if params is not None and bytes(params).lstrip()[:1] not in (b"{", b"["):
        return Failure(
            INVALID_REQUEST, 'Invalid Request: "params" must be an object or array', recoverable
        )
    return Message(env.method, rid, env.id is not msgspec.UNSET, params)


def result_response(rid: Id, result: Any) -> bytes:
    """Encode a success response as one line (with the trailing newline)."""
    return _encoder.encode({"jsonrpc": JSONRPC, "id": rid, "result": result}) + b"\n"


def error_response(rid: Id, code: int, message: str, data: Any = None) -> bytes:
    """Encode an error response as one line (with the trailing newline)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return _encoder.encode({"jsonrpc": JSONRPC, "id": rid, "error": error}) + b"\n"


def notification(method: str, params: Any) -> bytes:
    return _encoder.encode({"jsonrpc": JSONRPC, "method": method, "params": params}) + b"\n"


def encode(obj: Any) -> bytes:
    return _encoder.encode(obj)
