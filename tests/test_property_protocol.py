"""Property tests of the JSON-RPC decoder: any bytes give a message, a peer
response or a failure whose answer is a well-formed JSON-RPC error; never an
exception."""

from __future__ import annotations

import json

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memtrio.actors.stdio import LineSplitter, ReaderState
from memtrio.protocol import jsonrpc, jsonscan
from memtrio.protocol.jsonrpc import well_formed_reply
from memtrio.protocol.messages import Inbound, Oversized

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
envelope_keys = st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "extra"])
envelopes = st.dictionaries(envelope_keys, json_values, max_size=6).map(
    lambda d: {**d, "jsonrpc": d.get("jsonrpc", "2.0")}
)

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check(line: bytes, in_batch: bool = False) -> None:
    msg = jsonrpc.decode_line(line, in_batch=in_batch)
    if isinstance(msg, jsonrpc.Batch):
        assert not in_batch  # batches do not nest
        assert 1 <= len(msg.elements) <= jsonrpc.BATCH_LIMIT
        for element in msg.elements:
            _check(element, in_batch=True)
        return
    assert isinstance(msg, (jsonrpc.Message, jsonrpc.Response, jsonrpc.Failure))
    if isinstance(msg, jsonrpc.Failure):
        reply = json.loads(jsonrpc.error_response(msg.id, msg.code, msg.message))
        assert well_formed_reply(reply) is None
        assert msg.code in (jsonrpc.PARSE_ERROR, jsonrpc.INVALID_REQUEST)
    elif isinstance(msg, jsonrpc.Message):
        assert isinstance(msg.method, str)
        reply = json.loads(jsonrpc.result_response(msg.id, {}))
        assert well_formed_reply(reply) is None
        if msg.params is not None:
            assert bytes(msg.params).lstrip()[:1] in (b"{", b"[")


@SETTINGS
@given(st.binary(max_size=300))
def test_any_bytes_decode_to_a_message_or_an_answerable_failure(line: bytes) -> None:
    _check(line)


@SETTINGS
@given(json_values)
def test_any_json_value_decodes_to_a_message_or_an_answerable_failure(value: object) -> None:
    _check(json.dumps(value).encode())


@SETTINGS
@given(envelopes, st.integers(min_value=0, max_value=200))
def test_envelopes_whole_and_truncated(envelope: dict, cut: int) -> None:
    line = msgspec.json.encode(envelope)
    _check(line)
    _check(line[: min(cut, len(line))])


@SETTINGS
@given(
    st.integers(min_value=1, max_value=3000),
    st.sampled_from([b"[", b'{"a":', b'{"jsonrpc":"2.0","id":1,"method":"x","params":[']),
)
def test_deep_nesting_never_raises(depth: int, opener: bytes) -> None:
    _check(opener * depth)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=40), max_size=12), st.integers(min_value=1, max_value=64), st.data()
)
def test_line_splitter_yields_the_same_lines_however_the_stream_is_cut(
    pieces: list[bytes], limit: int, data: st.DataObject
) -> None:
    stream = b"\n".join(pieces) + b"\n"
    cuts = sorted(data.draw(st.lists(st.integers(min_value=0, max_value=len(stream)), max_size=6)))

    def run(chunks: list[bytes]) -> list[object]:
        splitter = LineSplitter(ReaderState(), limit)
        out: list[object] = []
        for chunk in chunks:
            for item in splitter.feed(chunk):
                if isinstance(item, Inbound):
                    out.extend(item.lines)
                else:
                    assert isinstance(item, Oversized)
                    out.append(("oversized", item.size))
        out.extend(x for item in splitter.finish() for x in getattr(item, "lines", [item]))
        return out

    bounds = [0, *cuts, len(stream)]
    chunks = [stream[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    whole = run([stream])
    assert run(chunks) == whole
    for item in whole:
        if isinstance(item, bytes):
            assert len(item) <= limit and b"\n" not in item


# -- top-level id recovery (defects 7 and 8) ---------------------------------

# Ids planted inside params never collide with the top-level ids drawn below.
inner_ids = st.one_of(
    st.integers(min_value=-(10**6), max_value=10**6),
    st.text(alphabet=st.characters(blacklist_characters="§"), max_size=8),
)
planted = st.recursive(
    st.one_of(json_scalars, inner_ids),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(["id", "params", "arguments", "x"]) | st.text(max_size=6),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=20,
)
top_ids = st.one_of(
    st.integers(min_value=10**12, max_value=10**15), st.text(max_size=8).map(lambda t: "§" + t)
)


def _member(key: str, value: object, escaped: bool, ascii_only: bool) -> bytes:
    name = "\\u0069d" if key == "id" and escaped else key
    try:
        text = json.dumps(value, ensure_ascii=ascii_only).encode()
    except UnicodeEncodeError:  # a lone surrogate: only its escape is JSON
        text = json.dumps(value).encode()
    return f'"{name}": '.encode() + text


@SETTINGS
@given(
    top_ids,
    planted,
    st.permutations(["jsonrpc", "id", "method", "params"]),
    st.integers(min_value=0, max_value=400),
    st.integers(min_value=0, max_value=400),
    st.booleans(),
    st.booleans(),
)
def test_recovered_id_is_the_top_level_id_never_one_from_params(
    top: object,
    arguments: object,
    order: list[str],
    cut: int,
    tail_cut: int,
    escaped: bool,
    ascii_only: bool,
) -> None:
    values = {
        "jsonrpc": "2.0",
        "id": top,
        "method": "tools/call",
        "params": {"name": "remember", "arguments": arguments, "id": 5},
    }
    line = b"{"
    id_start = id_end = 0
    for i, key in enumerate(order):
        line += b", " if i else b""
        id_start = len(line) if key == "id" else id_start
        line += _member(key, values[key], escaped, ascii_only)
        id_end = len(line) if key == "id" else id_end
    line += b"}"
    assert jsonrpc.recover_id(line) == top
    assert jsonrpc.recover_id(line, line) == top
    # Any prefix (an oversized line is known by its first bytes only) gives the top-level
    # id or nothing; once the id and the byte after it are in, the id.
    prefix = line[: min(cut, len(line))] if cut < len(line) else line
    got = jsonrpc.recover_id(prefix)
    assert got in (top, None)
    if len(prefix) > id_end:
        assert got == top
    # ... and with the line's last bytes, read backwards: once they hold the id's key.
    suffix = line[min(tail_cut, len(line)) :]
    got = jsonrpc.recover_id(b"{", suffix)
    assert got in (top, None)
    if len(line) - len(suffix) < id_start:
        assert got == top
    # The same object, nested too deep for msgspec: -32600 with the same top-level id.
    deep = line[:-1] + b', "deep": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    msg = jsonrpc.decode_line(deep)
    assert isinstance(msg, jsonrpc.Failure)
    assert (msg.code, msg.id) == (jsonrpc.INVALID_REQUEST, top)
    # Cut short, it is not JSON: -32700 and no id.
    msg = jsonrpc.decode_line(deep[:-1])
    assert isinstance(msg, jsonrpc.Failure)
    assert (msg.code, msg.id) == (jsonrpc.PARSE_ERROR, None)


@SETTINGS
@given(planted, st.integers(min_value=0, max_value=300))
def test_no_id_is_recovered_without_a_top_level_id(arguments: object, cut: int) -> None:
    line = json.dumps(
        {"jsonrpc": "2.0", "method": "tools/call", "params": {"arguments": arguments, "id": 3}}
    ).encode()
    assert jsonrpc.recover_id(line[:cut]) is None
    assert jsonrpc.recover_id(line) is None
    assert jsonrpc.recover_id(b"{", line[cut:]) is None


@SETTINGS
@given(
    st.dictionaries(st.text(max_size=6), json_values, max_size=5),
    st.integers(min_value=0, max_value=300),
    st.sampled_from([None, 1]),
    st.booleans(),
)
def test_members_read_backwards_from_any_suffix_are_the_last_members(
    obj: dict, cut: int, indent: int | None, ascii_only: bool
) -> None:
    line = json.dumps(obj, indent=indent, ensure_ascii=ascii_only).encode()
    whole = [(json.loads(k), json.loads(line[a:b])) for k, a, b in jsonscan.top_level(line)]
    suffix = line[min(cut, len(line)) :]
    offset = len(line) - len(suffix)
    seen = []
    try:
        for key, a, b in jsonscan.last_members(suffix):
            seen.append((json.loads(key), json.loads(suffix[a:b])))
    except jsonscan.Truncated:
        assert offset > 0  # the whole line is always read to its start
    assert seen == whole[::-1][: len(seen)]
    if offset == 0:
        assert len(seen) == len(whole)
