"""JSON-RPC 2.0 envelope, decoded once with msgspec.

JSON-RPC has no tag field, so a line is decoded into one permissive envelope
struct with ``params: Raw``; the per-method (or per-tool) struct decodes the
params afterwards. Error handling: `decode_line` never raises on input; it
returns a `Message`, a peer `Response`, a `Batch`, or a `Failure` that the
caller answers.
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Literal, TypeGuard, overload

import msgspec

from . import jsonscan

JSONRPC = "2.0"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# Implementation-defined server errors live in -32000..-32099.
SERVER_NOT_INITIALIZED = -32002
# resources/read of an unknown URI (the code MCP's examples use; the same number as above).
RESOURCE_NOT_FOUND = -32002

Id = int | str | None


class Envelope(msgspec.Struct, omit_defaults=True):
    """Any JSON-RPC object: request, notification, or response."""

    jsonrpc: object = msgspec.UNSET
    id: object = msgspec.UNSET
    method: object = msgspec.UNSET
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
    """A response from the peer to a request we sent (``roots/list``); stray ones are ignored.

    ``result`` / ``error``: the raw member, None when absent (or when the line was
    too deep to decode, see `_scan`).
    """

    id: Id
    result: msgspec.Raw | None = None
    error: msgspec.Raw | None = None


class Batch(msgspec.Struct, frozen=True):
    """A JSON-RPC batch: the text of each element (1 to `BATCH_LIMIT` of them), in order.

    Each element is decoded on its own with ``decode_line(element, in_batch=True)``;
    whether batches are accepted at all is the session's decision (MCP 2025-03-26 only).
    """

    elements: list[bytes]


class Failure(msgspec.Struct, frozen=True):
    """A line that cannot be served; answer it with `error_response`."""

    code: int
    message: str
    id: Id = None


Decoded = Message | Response | Batch | Failure
"""What `decode_line` makes of a line."""

# At most this many messages in one batch; a longer one is refused whole (-32600,
# id null) after reading only its first BATCH_LIMIT + 1 elements, so a line of a
# million tiny elements costs no more memory than one of BATCH_LIMIT.
BATCH_LIMIT = 100
# An oversized line's id is looked for, at the top level, in this many of its
# first bytes and of its last bytes.
ID_PREFIX_BYTES = 64 * 1024

_BatchElements = msgspec.defstruct(
    "_BatchElements",
    [(f"m{i}", msgspec.Raw, msgspec.Raw(b"")) for i in range(BATCH_LIMIT + 1)],
    array_like=True,
)

_envelope_decoder = msgspec.json.Decoder(Envelope)
# array_like: decodes the first BATCH_LIMIT + 1 elements as raw text and skips (but
# still validates) the rest without building anything.
_batch_decoder = msgspec.json.Decoder(_BatchElements)
_any_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_UNPAIRED_SURROGATE = (
    "Invalid Request: valid JSON this server cannot decode: a string holds an unpaired "
    "UTF-16 surrogate escape (\\ud800-\\udfff without its pair)"
)
_NOT_AN_OBJECT = "Invalid Request: expected a JSON-RPC object"
_TOO_DEEP = (
    "Invalid Request: valid JSON nested deeper than this server decodes "
    "(about 1000 levels); it was not served"
)


def _valid_id(value: object) -> TypeGuard[Id]:
    return value is None or (isinstance(value, (int, str)) and not isinstance(value, bool))


@overload
def decode_line(line: bytes, *, in_batch: Literal[True]) -> Message | Response | Failure: ...
@overload
def decode_line(line: bytes, *, in_batch: bool = False) -> Decoded: ...
def decode_line(line: bytes, *, in_batch: bool = False) -> Decoded:
    """Decode one line (or one batch element) into what the session serves or answers.

    Codes (JSON-RPC 2.0, section 5.1): text that is not JSON is -32700 with id null;
    JSON that is not a valid request object is -32600, with the id when the
    top-level ``id`` can be read. Valid JSON that msgspec cannot decode is -32600
    too, never -32700: nested deeper than its recursion limit, an unpaired UTF-16
    surrogate escape, a number beyond a float (the JSON grammar allows all three);
    an iterative scan then checks that it is JSON and recovers its top-level id. A
    top-level array is a `Batch` (``in_batch``: a batch element that is an array is
    -32600: batches do not nest).

    Error handling: never raises on input.
    """
    try:
        env = _envelope_decoder.decode(line)
    except msgspec.ValidationError:
        # Valid so far but not an object: an array (a batch) or a scalar.
        return _not_an_object(line, in_batch)
    except msgspec.DecodeError as exc:
        return _undecodable(line, in_batch, exc)
    except RecursionError:
        return _scan(line, in_batch, _TOO_DEEP)
    return _check_envelope(env)


def _check_envelope(env: Envelope) -> Message | Response | Failure:
    rid = env.id if env.id is not msgspec.UNSET else None
    recoverable = rid if _valid_id(rid) else None
    if env.jsonrpc != JSONRPC:
        return Failure(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', recoverable)
    if not _valid_id(rid):
        return Failure(INVALID_REQUEST, 'Invalid Request: "id" must be a string, a number or null')
    if env.method is msgspec.UNSET:
        if len(env.result) or len(env.error):
            return Response(
                rid, env.result if len(env.result) else None, env.error if len(env.error) else None
            )
        return Failure(INVALID_REQUEST, 'Invalid Request: "method" is missing', recoverable)
    if not isinstance(env.method, str):
        return Failure(INVALID_REQUEST, 'Invalid Request: "method" must be a string', recoverable)
    params = env.params if len(env.params) else None
    if params is not None and bytes(params).lstrip()[:1] not in (b"{", b"["):
        return Failure(
            INVALID_REQUEST, 'Invalid Request: "params" must be an object or array', recoverable
        )
    return Message(env.method, rid, env.id is not msgspec.UNSET, params)


def _not_an_object(line: bytes, in_batch: bool) -> Decoded:
    try:
        elements = _batch_decoder.decode(line)
    except msgspec.ValidationError:
        # Not an array either: a scalar (which cannot be nested), or bad JSON after it.
        try:
            _any_decoder.decode(line)
        except msgspec.DecodeError as exc:
            return _undecodable(line, in_batch, exc)
        return Failure(INVALID_REQUEST, _NOT_AN_OBJECT)
    except msgspec.DecodeError as exc:
        return _undecodable(line, in_batch, exc)
    except RecursionError:
        return _scan(line, in_batch, _TOO_DEEP)
    if in_batch:
        return Failure(INVALID_REQUEST, _NOT_AN_OBJECT + " (batches do not nest)")
    raws = [bytes(raw) for raw in msgspec.structs.astuple(elements) if len(raw)]
    return _batch(raws)


def _batch(elements: list[bytes]) -> Batch | Failure:
    if not elements:
        return Failure(INVALID_REQUEST, "Invalid Request: an empty batch")
    if len(elements) > BATCH_LIMIT:
        return Failure(
            INVALID_REQUEST,
            f"Invalid Request: a batch holds at most {BATCH_LIMIT} messages; it was not served",
        )
    return Batch(elements)


def _undecodable(line: bytes, in_batch: bool, exc: msgspec.DecodeError) -> Decoded:
    """msgspec refused ``line``: -32700, unless only msgspec's limits refused valid JSON.

    A number out of range (a ValidationError) and an unpaired surrogate escape
    (``"\\ud800"``) are valid JSON that msgspec cannot represent; those lines are
    scanned (`_scan`). Anything else msgspec refuses is not JSON.
    """
    if isinstance(exc, msgspec.ValidationError):
        return _scan(
            line, in_batch, f"Invalid Request: valid JSON this server cannot decode: {exc}"
        )
    if _SURROGATE_ESCAPE.search(line):
        return _scan(line, in_batch, _UNPAIRED_SURROGATE)
    return Failure(PARSE_ERROR, f"Parse error: {exc}")


def _scan(line: bytes, in_batch: bool, why: str) -> Response | Batch | Failure:
    """Valid JSON that msgspec cannot decode (``why``), or not JSON at all.

    The whole line is checked by an iterative scan (and its UTF-8): not JSON is
    -32700; a JSON object is answered -32600 with its top-level ``id``; an array is
    split into its elements, each then decoded on its own.
    """
    if not _is_utf8(line):
        return Failure(PARSE_ERROR, "Parse error: invalid UTF-8")
    head = line.lstrip(b" \t\r\n")[:1]
    members: list[tuple[bytes | None, int, int]] = []
    try:
        for member in jsonscan.top_level(line):
            members.append(member)
            if head == b"[" and not in_batch and len(members) > BATCH_LIMIT:
                break  # refused whole: the rest need not be read
    except (jsonscan.Invalid, jsonscan.Truncated) as exc:
        return Failure(PARSE_ERROR, f"Parse error: {exc}")
    if head == b"[":
        if in_batch:
            return Failure(INVALID_REQUEST, _NOT_AN_OBJECT + " (batches do not nest)")
        return _batch([line[start:end] for _, start, end in members])
    if head != b"{":
        return Failure(INVALID_REQUEST, _NOT_AN_OBJECT)
    keys = {_key(key) for key, _, _ in members}
    rid = _member_id(line, members)
    if "method" not in keys and ("result" in keys or "error" in keys):
        return Response(rid)
    return Failure(INVALID_REQUEST, why, rid)


def _is_utf8(buf: bytes) -> bool:
    if buf.isascii():
        return True
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(buf)
    try:
        for i in range(0, len(buf), 1 << 20):  # in pieces: no whole decoded copy
            decoder.decode(view[i : i + (1 << 20)])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _key(token: bytes | None) -> str | None:
    """A key token's text (escapes decoded: ``"\\u0069d"`` is ``id``)."""
    if token is None:
        return None
    if b"\\" not in token:
        return token[1:-1].decode("utf-8", "replace")
    try:
        return _any_decoder.decode(token)
    except msgspec.DecodeError:
        return None


def _member_id(buf: bytes, members: list[tuple[bytes | None, int, int]]) -> Id:
    """The value of the last top-level ``id`` member when it is a valid id, else None."""
    rid: Id = None
    for key, start, end in members:
        if _key(key) != "id":
            continue
        rid = None
        if buf[start : start + 1] in (b"[", b"{"):
            continue  # a container is no id (and may be nested too deep to decode)
        try:
            value = _any_decoder.decode(buf[start:end])
        except msgspec.DecodeError:
            continue
        rid = value if _valid_id(value) else None
    return rid


def recover_id(prefix: bytes, suffix: bytes = b"") -> Id:
    """The top-level ``id`` of a line known only by its first and last bytes (an
    oversized line, never held whole).

    Both ends are scanned as JSON: nested objects, arrays and strings are skipped,
    so an ``"id"`` inside ``params`` (a tool argument) is never taken for the
    request's. The prefix is read forwards (clients that write ``id`` early); the
    suffix backwards, for the members the object ends with (clients that write
    ``id`` after ``params``); as in msgspec, the last ``id`` wins. None when the
    line is not a JSON object, when its id is not a string or a number, when
    neither end holds it, or when either end is not JSON as far as it is read.
    """
    prefix = prefix[:ID_PREFIX_BYTES]
    if prefix.lstrip(b" \t\r\n")[:1] != b"{":
        return None
    members: list[tuple[bytes | None, int, int]] = []
    try:
        for member in jsonscan.top_level(prefix, final=False):
            members.append(member)
    except jsonscan.Truncated:
        pass
    except jsonscan.Invalid:
        return None
    suffix = suffix[-ID_PREFIX_BYTES:]
    if suffix:
        try:
            for key, start, end in jsonscan.last_members(suffix):
                if _key(key) == "id":
                    return _member_id(suffix, [(key, start, end)])
        except jsonscan.Truncated:
            pass
        except jsonscan.Invalid:
            return None
    return _member_id(prefix, members)


def result_response(rid: Id, result: object) -> bytes:
    """Encode a success response as one line (with the trailing newline)."""
    return _encoder.encode({"jsonrpc": JSONRPC, "id": rid, "result": result}) + b"\n"


def request_line(rid: Id, method: str, params: object = None) -> bytes:
    """Encode a request of ours to the peer (``roots/list``) as one line."""
    message: dict[str, object] = {"jsonrpc": JSONRPC, "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return _encoder.encode(message) + b"\n"


def error_response(rid: Id, code: int, message: str, data: object = None) -> bytes:
    """Encode an error response as one line (with the trailing newline)."""
    error: dict[str, object] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return _encoder.encode({"jsonrpc": JSONRPC, "id": rid, "error": error}) + b"\n"


def well_formed_reply(obj: object) -> str | None:
    """Why ``obj`` is not a well-formed JSON-RPC 2.0 response (None when it is)."""
    if not isinstance(obj, dict):
        return f"not a JSON object: {str(obj)[:80]}"
    if obj.get("jsonrpc") != "2.0":
        return 'missing "jsonrpc": "2.0"'
    if "method" in obj:
        return None if isinstance(obj["method"], str) else "notification with a non-string method"
    if "id" not in obj:
        return 'response without "id"'
    rid = obj["id"]
    if rid is not None and (isinstance(rid, bool) or not isinstance(rid, (int, str))):
        return f"response id of type {type(rid).__name__}"
    if ("result" in obj) == ("error" in obj):
        return 'response must have exactly one of "result" and "error"'
    if "error" in obj:
        err = obj["error"]
        if (
            not isinstance(err, dict)
            or not isinstance(err.get("code"), int)
            or not isinstance(err.get("message"), str)
        ):
            return f"malformed error object: {str(err)[:80]}"
    return None


def read_reply_line(line: bytes) -> tuple[dict[str, object] | None, str | None]:
    """A line a server wrote, as a well-formed JSON-RPC message: ``(message, None)``,
    or ``(None, why)`` saying what is wrong with it (for a client checking a server)."""
    try:
        obj = json.loads(line)
    except ValueError:
        return None, f"stdout line that is not JSON: {line[:80]!r}"
    why = well_formed_reply(obj)
    if why is not None:
        return None, f"malformed reply ({why}): {line[:120]!r}"
    return obj, None
