"""Client-adaptive tool-result content (docs/architecture.md, the session).

Claude clients get a markdown summary plus the compact JSON payload; Codex and
every other client one plain JSON item without annotations. The shape is chosen
at initialize from ``clientInfo.name``, survives a restart of the session, and
``MEMTRIO_CONTENT`` overrides it. Driven through raw JSON-RPC on the current
and the oldest supported protocol revision.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from memtrio.protocol import content, jsonrpc, mcp
from memtrio.supervisors import config
from raw_server import RawServer, initialize_request, raw_server

CURRENT = mcp.LATEST_VERSION
OLDEST = mcp.SUPPORTED_VERSIONS[-1]
CLAUDE = ("claude-code", "Claude Desktop")
OTHERS = ("codex", "some-unknown-client")


def assert_shape(result: dict[str, Any], mode: str, version: str) -> None:
    """``result`` (a successful CallToolResult) has the content shape of ``mode``."""
    assert not result["isError"], result
    items = result["content"]
    payload = items[-1]
    assert payload["type"] == "text"
    value = json.loads(payload["text"])
    if mode == "markdown":
        assert len(items) == 2, items
        summary = items[0]
        assert summary["type"] == "text"
        assert summary["annotations"] == {"audience": ["user"]}
        assert payload["annotations"] == {"audience": ["assistant"]}
        assert summary["text"].startswith("**")
        assert len(summary["text"]) <= content.SUMMARY_CHARS
        with pytest.raises(json.JSONDecodeError):
            json.loads(summary["text"])
    else:
        assert items == [{"type": "text", "text": payload["text"]}], items
    if version >= mcp.STRUCTURED_CONTENT_SINCE:
        assert result["structuredContent"] == value
    else:
        assert "structuredContent" not in result


async def start(server: RawServer, version: str, client: str) -> None:
    await server.send(initialize_request(version, client))
    assert (await server.read())["result"]["protocolVersion"] == version
    await server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


@pytest.mark.parametrize("version", [CURRENT, OLDEST])
@pytest.mark.parametrize("client", CLAUDE + OTHERS)
async def test_content_shape_per_client_survives_a_session_restart(
    home: Path, client: str, version: str
) -> None:
    mode = "markdown" if client in CLAUDE else "json"
    async with raw_server(home, env={"MEMTRIO_FAULTS": "session.dispatch=raise@4"}) as server:
        await start(server, version, client)
        before = await server.call_tool("remember", {"content": "the build uses trio"})  # hit 3
        assert_shape(before["result"], mode, version)
        crashed = await server.request("ping")  # hit 4: the session crashes and restarts
        assert crashed["error"]["code"] == jsonrpc.INTERNAL_ERROR
        after = await server.call_tool("recall", {"query": "build"})
        assert_shape(after["result"], mode, version)
        if mode == "markdown":
            summary = after["result"]["content"][0]["text"]
            assert summary.startswith("**recall**")
            assert "the build uses trio" in summary


@pytest.mark.parametrize(
    ("setting", "client", "mode"),
    [("json", "claude-code", "json"), ("markdown", "codex", "markdown")],
)
async def test_memtrio_content_overrides_the_client_name(
    home: Path, setting: str, client: str, mode: str
) -> None:
    async with raw_server(home, env={"MEMTRIO_CONTENT": setting}) as server:
        await start(server, CURRENT, client)
        reply = await server.call_tool("remember", {"content": "override"})
        assert_shape(reply["result"], mode, CURRENT)


async def test_errors_keep_one_plain_item_for_claude_clients(home: Path) -> None:
    async with raw_server(home) as server:
        await start(server, CURRENT, "claude-code")
        reply = await server.call_tool("remember", {"bogus": 1})
        result = reply["result"]
        assert result["isError"]
        assert len(result["content"]) == 1
        assert "annotations" not in result["content"][0]


@pytest.mark.parametrize(
    ("name", "claude"),
    [
        ("claude-code", True),
        ("claude-ai", True),
        ("Claude Desktop", True),
        ("claude.ai", True),
        ("CLAUDE", True),
        ("codex", False),
        ("codex-mcp-client", False),
        ("claudette", False),
        ("unknown", False),
        ("", False),
    ],
)
def test_which_client_names_are_claude_clients(name: str, claude: bool) -> None:
    assert content.is_claude_client(name) is claude
    assert content.content_mode(name) == ("markdown" if claude else "json")


def test_the_summary_is_short_whatever_the_result() -> None:
    rows = [{"id": f"m{i}", "content": "word " * 500} for i in range(100)]
    text = content.summary("recall", {"memories": rows, "ranking": "hybrid"})
    assert text.startswith("**recall** — 100 memories, ranking: hybrid")
    assert "`m0` word word" in text
    assert "92 more" in text
    assert len(text) <= content.SUMMARY_CHARS


def test_a_bad_content_setting_is_a_configuration_error_naming_its_source(tmp_path: Path) -> None:
    with pytest.raises(config.ConfigError, match=r"MEMTRIO_CONTENT=html \(environment\)"):
        config.load(tmp_path, env={"MEMTRIO_CONTENT": "html"})
    (tmp_path / "config.toml").write_text('[server]\ncontent = "rich"\n')
    with pytest.raises(config.ConfigError, match=r'content = "rich" in .* line 2'):
        config.load(tmp_path, env={})
    assert config.load(tmp_path, env={"MEMTRIO_CONTENT": "json"}).server.content == "json"
