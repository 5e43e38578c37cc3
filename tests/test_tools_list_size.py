"""``tools/list`` stays small enough to hand a model (issue 32, item 10).

With every feature on (``memtrio mcp --vectors``, embeddings and code on) the
whole ``tools/list`` result is at most 32 KB on every protocol revision, while
every tool keeps its description and every argument its schema. The budget is
the JSON bytes of the result as the server sends it. The ``outputSchema`` of
each tool, which would double it, is listed only with ``[server] output_schema
= true``; results carry ``structuredContent`` either way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from memtrio.actors.code.tools import TOOLS as CODE_TOOLS
from memtrio.actors.kg.tools import TOOLS as KG_TOOLS
from memtrio.actors.memory.tools import TOOLS as MEMORY_TOOLS
from memtrio.actors.vectors.tools import TOOLS as VECTOR_TOOLS
from memtrio.protocol.mcp import SUPPORTED_VERSIONS
from raw_server import initialize_request, raw_server

BUDGET = 32 * 1024  # bytes of the tools/list result, every tool enabled
ROOT = Path(__file__).resolve().parent.parent
EVERY_TOOL = {
    "server_status",
    *(t.name for t in [*MEMORY_TOOLS, *KG_TOOLS, *VECTOR_TOOLS, *CODE_TOOLS]),
}
EVERYTHING_ON = {"MEMTRIO_EMBEDDINGS": "on", "MEMTRIO_CODE": "on"}


async def listed(
    home: Path, version: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    """The bytes of the ``tools/list`` result of a fresh ``memtrio mcp --vectors``, and the result."""
    async with raw_server(
        home, {**EVERYTHING_ON, **(env or {})}, args=("--no-attach", "--vectors")
    ) as server:
        await server.send(initialize_request(version))
        await server.read()
        await server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await server.send_request(1, "tools/list")
        line = await server.read_line()
        await server.close()
    reply = json.loads(line)
    result = reply["result"]
    size = len(json.dumps(result, separators=(",", ":"), ensure_ascii=False).encode())
    return size, result


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
async def test_tools_list_with_every_tool_is_at_most_32_kb(home: Path, version: str) -> None:
    size, result = await listed(home, version)
    tools = {tool["name"]: tool for tool in result["tools"]}
    assert set(tools) == EVERY_TOOL and "nextCursor" not in result
    assert size <= BUDGET, f"tools/list is {size:,} bytes on {version}, over {BUDGET:,}"
    for tool in tools.values():
        assert len(tool["description"]) >= 15, tool["name"]
        assert "outputSchema" not in tool, tool["name"]


async def test_every_argument_keeps_its_schema_and_output_schemas_come_back_on_request(
    home: Path,
) -> None:
    size, result = await listed(home, "2025-11-25", {"MEMTRIO_SERVER_OUTPUT_SCHEMA": "true"})
    by_name = {tool["name"]: tool for tool in result["tools"]}
    for tool in [*MEMORY_TOOLS, *KG_TOOLS, *VECTOR_TOOLS, *CODE_TOOLS]:
        entry = by_name[tool.name]
        assert entry["inputSchema"] == tool.input_schema
        assert entry.get("outputSchema") == tool.output_schema
    assert size > BUDGET  # what listing them costs: why they are off by default


@pytest.mark.parametrize(
    ("groups", "tools", "figure"),
    [
        ("memory", 11, "`--tools memory` lists the 11 memory tools in about {} KB"),
        ("memory,graph-read", 28, "`--tools memory,graph-read` 28 tools in about {} KB"),
        ("memory,graph-read,graph-write,code", 41, "(about {} KB without the vector tools)"),
    ],
)
async def test_the_readme_says_how_tools_shrinks_the_list(
    home: Path, groups: str, tools: int, figure: str
) -> None:
    """The README's figures are what ``--tools`` gives, to the nearest KB."""
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert (
        "`tools/list` with every tool (`memtrio mcp --vectors`, 53 tools) is at most 32 KB"
        in readme
    )
    size, result = await listed(
        home, "2025-11-25", {"MEMTRIO_TOOLS": groups, "MEMTRIO_VECTORS": "off"}
    )
    assert len(result["tools"]) == tools
    assert figure.format(round(size / 1024)) in readme, (groups, size)
