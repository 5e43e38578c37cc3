"""The pure protocol layer: envelope decoding, negotiation, schemas, pagination."""

from __future__ import annotations

import json
from typing import Annotated

import msgspec
import pytest
from memtrio.protocol import jsonrpc, mcp
from memtrio.protocol.tools import Registry, Tool, struct_schema


@pytest.mark.parametrize(
    ("line", "code", "rid"),
    [
        (b"garbage", jsonrpc.PARSE_ERROR, None),
        (b'{"jsonrpc":"2.0","id":1', jsonrpc.PARSE_ERROR, None),
        (b'"\xff"', jsonrpc.PARSE_ERROR, None),
        (b"[]", jsonrpc.INVALID_REQUEST, None),  # an empty batch
        (b"42", jsonrpc.INVALID_REQUEST, None),
        (b'{"jsonrpc":"1.0","id":7,"method":"ping"}', jsonrpc.INVALID_REQUEST, 7),
        (b'{"jsonrpc":"2.0","id":7}', jsonrpc.INVALID_REQUEST, 7),
        (b'{"jsonrpc":"2.0","id":7,"method":5}', jsonrpc.INVALID_REQUEST, 7),
        (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', jsonrpc.INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', jsonrpc.INVALID_REQUEST, None),
        (b'{"jsonrpc":"2.0","id":"x","method":"ping","params":3}', jsonrpc.INVALID_REQUEST, "x"),
    ],
)
def test_bad_lines_become_failures_with_the_recoverable_id(
    line: bytes, code: int, rid: object
) -> None:
    failure = jsonrpc.decode_line(line)
    assert isinstance(failure, jsonrpc.Failure)
    assert failure.code == code and failure.id == rid


def test_requests_notifications_and_responses() -> None:
    req = jsonrpc.decode_line(
        b'{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x"}}'
    )
    assert isinstance(req, jsonrpc.Message) and req.has_id and req.id == "a"
    assert bytes(req.params) == b'{"name":"x"}'
    note = jsonrpc.decode_line(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert isinstance(note, jsonrpc.Message) and not note.has_id
    assert isinstance(
        jsonrpc.decode_line(b'{"jsonrpc":"2.0","id":3,"result":{}}'), jsonrpc.Response
    )


def test_error_response_is_one_line() -> None:
    line = jsonrpc.error_response(None, jsonrpc.PARSE_ERROR, "Parse error")
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert msgspec.json.decode(line) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error"},
    }


@pytest.mark.parametrize(
    ("asked", "answered"),
    [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2024-11-05"),
        ("2030-01-01", "2025-11-25"),
        (None, "2025-11-25"),
        (7, "2025-11-25"),
    ],
)
def test_version_negotiation(asked: object, answered: str) -> None:
    assert mcp.negotiate(asked) == answered


class Args(msgspec.Struct, forbid_unknown_fields=True):
    query: str
    limit: Annotated[int, msgspec.Meta(ge=1, le=500)] = 200


async def _noop(ctx: object, args: Args) -> str:
    return ""


def test_input_schema_is_generated_from_the_struct() -> None:
    schema = struct_schema(Args)
    assert schema["type"] == "object"
    assert schema["required"] == ["query"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["limit"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 500,
        "default": 200,
    }
    tool = Tool("t", "d", Args, _noop, group="memory", read_only=True)
    described = tool.describe()
    assert described["inputSchema"] == schema
    assert described["annotations"]["readOnlyHint"] is True


def test_registry_keeps_order_and_refuses_duplicates() -> None:
    a = Tool("a", "d", Args, _noop, group="memory")
    b = Tool("b", "d", Args, _noop, group="code")
    core = Tool("c", "d", Args, _noop, group="core")
    reg = Registry([a, b, core])
    assert reg.names() == ["a", "b", "c"]
    with pytest.raises(ValueError, match="unknown group"):
        reg.add(Tool("d", "d", Args, _noop, group="nope"))
    with pytest.raises(ValueError, match="twice"):
        reg.add(a)


def test_tool_results() -> None:
    text = mcp.tool_result("plain")
    assert text == {"content": [{"type": "text", "text": "plain"}], "isError": False}
    structured = mcp.tool_result({"id": 1})
    assert structured["structuredContent"] == {"id": 1}
    assert structured["content"][0]["text"] == '{"id":1}'
    assert "structuredContent" not in mcp.tool_result({"id": 1}, structured_ok=False)


def test_a_struct_result_is_encoded_once_into_the_same_text_and_structured_content() -> None:
    class Page(msgspec.Struct, kw_only=True):
        names: list[str]
        nextOffset: int | None = None
        warnings: list[str] | msgspec.UnsetType = msgspec.UNSET

    reply = json.loads(jsonrpc.result_response(7, mcp.tool_result(Page(names=["a", "é\n"]))))
    result = reply["result"]
    assert result["structuredContent"] == {"names": ["a", "é\n"], "nextOffset": None}
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    plain = mcp.tool_result(Page(names=["a"]), structured_ok=False)
    assert "structuredContent" not in plain
    shown = mcp.tool_result(Page(names=["a"]), tool="t", mode="markdown")
    assert shown["structuredContent"] == {"names": ["a"], "nextOffset": None}
    assert len(shown["content"]) == 2  # the summary, then the JSON


def test_pagination_cursor() -> None:
    items = list(range(250))
    page, nxt = mcp.paginate(items, None, 100)
    assert page == list(range(100)) and nxt == "100"
    page, nxt = mcp.paginate(items, "200", 100)
    assert page == list(range(200, 250)) and nxt is None
    with pytest.raises(ValueError):
        mcp.paginate(items, "abc", 100)
