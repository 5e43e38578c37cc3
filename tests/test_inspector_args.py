"""Every tool, every argument, as a simple client sends it.

The MCP Inspector CLI takes ``--tool-arg key=value`` strings and converts each
by the property's top-level JSON Schema ``type`` (number/integer: a number,
boolean: ``true``/``false``, array/object: parsed JSON, anything else, including
a property with no top-level ``type``, the raw string). `inspector_value` is
that conversion. The end-to-end tests drive every tool of ``tools/list`` with
EVERY argument it declares, written as strings in `STEPS`, converted by the
live schema, over raw JSON-RPC and over the official SDK client; every call
must succeed.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from gitrepo import git, make_repo, write
from mcp_client import call, open_client
from memtrio.actors.features import declared_tools
from raw_server import raw_server

JSON_TYPES = {"string", "number", "integer", "boolean", "array", "object"}


def inspector_value(raw: str, prop: dict[str, Any]) -> Any:
    """``raw`` converted as the Inspector CLI converts a ``--tool-arg`` value."""
    kind = prop.get("type")
    if kind in ("number", "integer"):
        number = float(raw)  # JavaScript's Number(): integral values go out as integers
        return int(number) if number.is_integer() else number
    if kind == "boolean":
        return raw == "true"
    if kind in ("array", "object"):
        return json.loads(raw)
    return raw


SERVICE = "import os\nfrom app import models\n\n\ndef load_config(path):\n    return path\n"

# (tool, arguments as typed after --tool-arg), in call order: reads before the deletes.
# `{id}` is the memory `remember` created, `{repo}` the checkout the server runs in.
SCOPES = '["global"]'
STEPS: list[tuple[str, dict[str, str]]] = [
    ("server_status", {}),
    (
        "remember",
        {
            "content": "Inspector memory: Alpha uses Beta",
            "memory_type": "decision",
            "importance": "0.5",
            "scopes": SCOPES,
            "entities": '["Alpha", {"name": "Beta", "kind": "service"}]',
            "relations": '[{"source": "Alpha", "relation": "uses", "target": "Beta",'
            ' "metadata": {"why": "test"}}]',
            "code": "[]",
        },
    ),
    (
        "recall",
        {
            "query": "Inspector",
            "scopes": SCOPES,
            "limit": "5",
            "use_embeddings": "false",
            "memory_type": "decision",
            "max_tokens": "500",
            "explain": "true",
            "code": "app/service.py",
        },
    ),
    ("stats", {}),
    ("list_scopes", {}),
    (
        "relate",
        {
            "source": "Alpha",
            "relation": "depends_on",
            "target": "Gamma",
            "source_kind": "entity",
            "target_kind": "library",
            "metadata": '{"note": "x"}',
            "scopes": SCOPES,
        },
    ),
    (
        "graph",
        {
            "entity": "Alpha",
            "direction": "outgoing",
            "max_depth": "2",
            "limit": "10",
            "scopes": SCOPES,
        },
    ),
    ("inspect", {"id": "{id}", "scopes": SCOPES}),
    (
        "update",
        {
            "id": "{id}",
            "content": "Inspector memory, updated",
            "memory_type": "convention",
            "importance": "0.75",
            "scopes": SCOPES,
            "code": "[]",
        },
    ),
    ("review_stale", {"limit": "5", "cursor": "0"}),
    (
        "create_entities",
        {
            "entities": json.dumps(
                [
                    {"name": "Ada", "entityType": "person", "observations": ["wrote notes"]},
                    {"name": "Babbage", "entityType": "person", "observations": []},
                    {"name": "Engine", "entityType": "machine", "observations": []},
                    {"name": "Old", "entityType": "machine", "observations": []},
                ]
            )
        },
    ),
    (
        "create_relations",
        {
            "relations": json.dumps(
                [
                    {"from": "Ada", "to": "Engine", "relationType": "programs"},
                    {"from": "Babbage", "to": "Engine", "relationType": "designed"},
                    {"from": "Ada", "to": "Babbage", "relationType": "knows"},
                ]
            )
        },
    ),
    (
        "add_observations",
        {
            "observations": '[{"entityName": "Ada", "contents": ["first programmer"],'
            ' "code": [{"path": "app/service.py", "symbol": "load_config"}]}]'
        },
    ),
    (
        "upsert_entities",
        {
            "entities": '[{"name": "Ada", "entityType": "person", "observations": ["mathematician"]},'
            ' {"name": "Analyst", "entityType": "machine", "observations": []}]'
        },
    ),
    ("read_graph", {"offset": "0", "limit": "10", "mode": "summary", "entityType": "person"}),
    (
        "search_nodes",
        {"query": "Ada", "offset": "0", "limit": "10", "mode": "full", "entityType": "person"},
    ),
    ("open_nodes", {"names": '["Ada"]', "offset": "0", "limit": "10", "mode": "full"}),
    (
        "batch_get_entities",
        {"names": '["Ada", "Engine"]', "offset": "0", "limit": "10", "mode": "names"},
    ),
    ("get_entity", {"name": "Ada"}),
    ("entity_exists", {"names": '["Ada", "Nobody"]'}),
    ("graph_stats", {}),
    (
        "search_relations",
        {"from": "Ada", "to": "Engine", "relationType": "programs", "offset": "0", "limit": "10"},
    ),
    ("describe_entity", {"name": "Ada", "offset": "0", "limit": "10"}),
    ("degree", {"name": "Ada"}),
    ("find_path", {"from": "Ada", "to": "Engine", "maxDepth": "3", "directed": "true"}),
    (
        "find_all_paths",
        {"from": "Ada", "to": "Engine", "maxDepth": "3", "limit": "5", "directed": "false"},
    ),
    (
        "extract_subgraph",
        {"names": '["Ada"]', "depth": "0", "offset": "0", "limit": "10", "mode": "names"},
    ),
    (
        "get_neighbors",
        {
            "name": "Ada",
            "depth": "1",
            "direction": "outgoing",
            "relationType": "programs",
            "offset": "0",
            "limit": "10",
            "mode": "summary",
        },
    ),
    ("list_entity_types", {"offset": "0", "limit": "10"}),
    ("list_relation_types", {"offset": "0", "limit": "10"}),
    ("export_graph", {"offset": "0", "limit": "100"}),
    (
        "delete_observations",
        {"deletions": '[{"entityName": "Ada", "observations": ["wrote notes"]}]'},
    ),
    (
        "delete_relations",
        {"relations": '[{"from": "Ada", "to": "Babbage", "relationType": "knows"}]'},
    ),
    ("merge_entities", {"sources": '["Analyst"]', "target": "Engine", "entityType": "machine"}),
    ("delete_entities", {"entityNames": '["Old"]'}),
    ("compact", {}),
    (
        "code_outline",
        {"path": "app/service.py", "offset": "0", "limit": "50", "depth": "0", "root": "{repo}"},
    ),
    ("code_imports", {"path": "app/service.py", "offset": "0", "limit": "10", "root": "{repo}"}),
    ("find_symbol", {"query": "load", "kind": "function", "limit": "5", "root": "{repo}"}),
    ("code_diff", {"base": "main", "head": "HEAD", "limit": "10", "root": "{repo}"}),
    ("forget", {"id": "{id}", "scopes": SCOPES}),
]

CallFn = Callable[[str, dict[str, Any]], Awaitable[tuple[bool, Any]]]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout on branch feature, one commit ahead of main."""
    root = make_repo(tmp_path / "repo", {"app/service.py": SERVICE})
    git(root, "checkout", "-q", "-b", "feature")
    write(root, {"app/service.py": SERVICE + "\n\ndef added(x):\n    return x\n"})
    git(root, "commit", "-qam", "feature")
    return root


def check_plain_types(name: str, schema: dict[str, Any]) -> None:
    """Every property of ``schema`` (and of its ``$defs``) has a plain top-level type."""
    for obj in (schema, *schema.get("$defs", {}).values()):
        for prop_name, prop in obj.get("properties", {}).items():
            where = f"{name}.{prop_name}: {prop}"
            assert prop.get("type") in JSON_TYPES, where
            assert "anyOf" not in prop and "oneOf" not in prop, where
            assert prop.get("default", "") is not None, where


def test_every_property_has_a_plain_top_level_type() -> None:
    tools = declared_tools()  # the vector tools too: a client may enable them
    assert len(tools) > 30
    for tool in tools:
        check_plain_types(tool.name, tool.input_schema)


def test_optional_arguments_still_take_null_as_not_given() -> None:
    """The schema no longer says null, but the struct still takes it, as "not given"."""
    checked = 0
    for tool in declared_tools():
        schema = tool.input_schema
        fields = {f.encode_name: f for f in msgspec.inspect.type_info(tool.args).fields}
        for name, prop in schema["properties"].items():
            if name in schema.get("required", []) or "default" in prop:
                continue
            info = fields[name]
            assert info.default is None, f"{tool.name}.{name}"
            kind = info.type
            while isinstance(kind, msgspec.inspect.Metadata):
                kind = kind.type
            assert isinstance(kind, msgspec.inspect.UnionType), f"{tool.name}.{name}"
            assert any(isinstance(t, msgspec.inspect.NoneType) for t in kind.types)
            checked += 1
    assert checked > 10


async def run_steps(tools: dict[str, dict[str, Any]], repo: Path, send: CallFn) -> set[str]:
    """Call every step, arguments converted by the live schemas; the tools called."""
    assert {name for name, _ in STEPS} == set(tools), "STEPS must cover tools/list exactly"
    memory_id = ""
    for name, raw_args in STEPS:
        schema = tools[name]
        assert set(raw_args) == set(schema.get("properties", {})), f"{name}: not every argument"
        args = {
            key: inspector_value(
                value.replace("{id}", memory_id).replace("{repo}", str(repo)),
                schema["properties"][key],
            )
            for key, value in raw_args.items()
        }
        is_error, payload = await send(name, args)
        assert not is_error, f"{name}({args}) failed: {payload}"
        if name == "remember":
            memory_id = str(payload["id"])
        if name == "update":  # its importance arrived as a number
            is_error, shown = await send("inspect", {"id": int(memory_id), "scopes": ["global"]})
            assert not is_error and shown["importance"] == 0.75, shown
        if name == "find_symbol":
            assert "load_config" in payload
    return {name for name, _ in STEPS}


def raw_payload(result: dict[str, Any]) -> Any:
    if result.get("structuredContent") is not None:
        return result["structuredContent"]
    text = "\n".join(c["text"] for c in result.get("content", []) if c.get("type") == "text")
    try:
        return json.loads(text)
    except ValueError:
        return text


async def test_every_tool_with_every_argument_as_the_inspector_sends_it(
    repo: Path, home: Path
) -> None:
    async with raw_server(home, cwd=repo) as server:
        await server.initialize()
        listed = (await server.request("tools/list"))["result"]["tools"]
        tools = {tool["name"]: tool["inputSchema"] for tool in listed}
        for name, schema in tools.items():
            check_plain_types(name, schema)

        async def send(name: str, args: dict[str, Any]) -> tuple[bool, Any]:
            reply = await server.call_tool(name, args)
            assert "result" in reply, f"{name}: {reply}"
            return bool(reply["result"].get("isError")), raw_payload(reply["result"])

        called = await run_steps(tools, repo, send)
        assert len(called) == len(tools) > 30


async def test_every_tool_with_every_argument_over_the_sdk_client(repo: Path, home: Path) -> None:
    async with open_client(home, cwd=repo) as client:
        listed = (await client.list_tools()).tools
        tools = {tool.name: tool.input_schema for tool in listed}

        async def send(name: str, args: dict[str, Any]) -> tuple[bool, Any]:
            return await call(client, name, **args)

        assert len(await run_steps(tools, repo, send)) == len(tools)
