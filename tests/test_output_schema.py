"""Every structured tool result is declared (``outputSchema``) and validated.

The schemas are generated from the handlers' result structs
(`protocol.tools.result_schema`); the official SDK client validates every
``tools/call`` result against the ``outputSchema`` it listed (``tools/list``
carries them with ``[server] output_schema = true``), and these tests check the
same results again with ``jsonschema``. Results are written for a
model to read: ISO 8601 UTC times (never epoch floats), scores to four
significant digits, ``warnings`` always in ``remember``, ``recall`` and ``relate``
(the reference's contract, ``[]`` when nothing was cut) and elsewhere only when
there is one. A session on a
revision before 2025-06-18 gets neither ``outputSchema`` nor
``structuredContent``, and every tool still works there.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
import test_inspector_args as inspector
from mcp_client import ok, open_client, result_payload, run_cli
from memtrio.actors.code.tools import TOOLS as CODE_TOOLS
from memtrio.actors.kg.tools import TOOLS as KG_TOOLS
from memtrio.actors.memory.results import score_of, time_of
from memtrio.actors.memory.tools import TOOLS as MEMORY_TOOLS
from memtrio.protocol.tools import result_schema
from raw_server import initialize_request, raw_server

repo = inspector.repo  # the checkout fixture the steps run in

# tools/list carries the outputSchemas only when asked ([server] output_schema).
OUTPUT_SCHEMAS = {"MEMTRIO_SERVER_OUTPUT_SCHEMA": "true"}
TIME_KEYS = ("created", "updated", "accessed", "time", "timestamp", "opened")
EPOCH_RANGE = (1e9, 1e10)  # 2001 to 2286 in epoch seconds
ALWAYS_WARNINGS = ("remember", "recall", "relate")  # `warnings` present, [] when empty


def validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def time_problems(value: Any, path: str = "$") -> list[str]:
    """Times that are not ISO 8601 strings with a zone, and numbers that look like epoch seconds."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}"
            timely = key.endswith("_at") or key.lower().endswith(TIME_KEYS)
            if timely and not isinstance(item, bool) and item is not None:
                if not isinstance(item, str):
                    found.append(f"{where} = {item!r} is not an ISO 8601 string")
                elif dt.datetime.fromisoformat(item).utcoffset() is None:
                    found.append(f"{where} = {item!r} has no Z or offset")
            found += time_problems(item, where)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += time_problems(item, f"{path}[{i}]")
    elif isinstance(value, float) and EPOCH_RANGE[0] < value < EPOCH_RANGE[1]:
        found.append(f"{path} = {value!r} looks like epoch seconds")
    return found


def scores(value: Any) -> list[float]:
    """Every ``score`` value in ``value``."""
    if isinstance(value, dict):
        own = [value["score"]] if isinstance(value.get("score"), float) else []
        return own + [s for item in value.values() for s in scores(item)]
    if isinstance(value, list):
        return [s for item in value for s in scores(item)]
    return []


# -- the generated schemas ---------------------------------------------------------


def test_every_structured_tool_declares_an_object_output_schema() -> None:
    for tool in [*MEMORY_TOOLS, *KG_TOOLS]:
        schema = tool.output_schema
        assert schema is not None and schema["type"] == "object", tool.name
        validator(schema)  # a valid JSON Schema
        assert tool.describe()["outputSchema"] == schema
        assert "outputSchema" not in tool.describe(structured=False), tool.name
    for tool in CODE_TOOLS:  # plain text by design: a compact outline for a model
        assert tool.output_schema is None and "outputSchema" not in tool.describe(), tool.name


def test_a_result_that_is_not_an_object_is_refused() -> None:
    class Pair(msgspec.Struct, array_like=True):
        a: int
        b: int

    with pytest.raises(TypeError, match="must be a JSON object"):
        result_schema(Pair)


def test_the_reference_shapes_are_kept() -> None:
    """read_graph answers the reference server's {entities, relations}; warnings and
    the mode-dependent keys are optional, nextOffset may be null."""
    tool = next(t for t in KG_TOOLS if t.name == "read_graph")
    check = validator(tool.output_schema or {})
    relation = {"from": "Ada", "to": "Engine", "relationType": "programs"}
    entity = {"name": "Ada", "entityType": "person", "observations": ["wrote notes"]}
    page = {"entities": [entity], "relations": [relation], "total": 1, "nextOffset": None}
    check.validate(page)
    check.validate({"entities": ["Ada"], "total": 1, "nextOffset": 1})  # mode names
    with pytest.raises(jsonschema.ValidationError):
        check.validate({**page, "relations": [{"source": "Ada", "target": "Engine"}]})
    with pytest.raises(jsonschema.ValidationError):
        check.validate({**page, "total": "1"})


def test_scores_keep_four_significant_digits() -> None:
    assert score_of(0.123456789) == 0.1235
    assert score_of(4.123456e-06) == 4.123e-06  # a small BM25 score keeps its digits
    assert score_of(12.3456) == 12.35
    assert time_of(1796072784.4152858).isoformat().endswith("+00:00")


# -- every tool over the SDK client, validation on ---------------------------------


async def test_every_tool_over_the_sdk_client_validates_against_its_output_schema(
    repo: Path, home: Path
) -> None:
    async with open_client(home, cwd=repo, env=OUTPUT_SCHEMAS) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        results: dict[str, Any] = {}

        async def send(name: str, args: dict[str, Any]) -> tuple[bool, Any]:
            # The SDK validates structuredContent against the listed outputSchema
            # (a mismatch raises RuntimeError before anything returns here).
            result = results[name] = await client.call_tool(name, args)
            return bool(result.is_error), result_payload(result)

        schemas = {name: tool.input_schema for name, tool in listed.items()}
        await inspector.run_steps(schemas, repo, send)

        structured = 0
        for name, tool in listed.items():
            result = results[name]
            if tool.output_schema is None:
                assert result.structured_content is None, name
                continue
            structured += 1
            assert tool.output_schema["type"] == "object"
            content = result.structured_content
            assert content is not None, name
            validator(tool.output_schema).validate(content)
            assert time_problems(content) == [], name
            assert all(float(f"{s:.4g}") == s for s in scores(content)), content
            if name in ALWAYS_WARNINGS:  # the reference's contract: [] when nothing was cut
                assert isinstance(content.get("warnings"), list), name
            else:  # elsewhere an empty list is never sent
                assert "warnings" not in content or content["warnings"], name
        assert structured == len(listed) - len(CODE_TOOLS) > 30

        # The SDK's validation is live: a result that breaks the listed schema fails.
        good = results["read_graph"]
        await client.session.validate_tool_result("read_graph", good)
        bad = good.model_copy(
            update={"structured_content": {**good.structured_content, "total": "8"}}
        )
        with pytest.raises(RuntimeError, match="Invalid structured content"):
            await client.session.validate_tool_result("read_graph", bad)
        missing = good.model_copy(update={"structured_content": {"entities": []}})
        with pytest.raises(RuntimeError, match="Invalid structured content"):
            await client.session.validate_tool_result("read_graph", missing)


async def test_memory_times_are_iso_and_scores_rounded(repo: Path, home: Path) -> None:
    async with open_client(home, cwd=repo) as client:
        made = await ok(client, "remember", content="tea is steeped for three minutes")
        assert made["warnings"] == []  # nothing to warn about: the empty list, always there
        await ok(client, "remember", content="tea leaves: green tea, black tea")
        found = await ok(client, "recall", query="tea", use_embeddings=False)
        assert len(found["memories"]) == 2 and time_problems(found) == []
        first = found["memories"][0]
        created = dt.datetime.fromisoformat(first["created_at"])
        accessed = dt.datetime.fromisoformat(first["last_accessed_at"])
        now = dt.datetime.now(dt.UTC)
        assert created.utcoffset() == dt.timedelta(0) and first["created_at"].endswith("Z")
        assert abs((now - created).total_seconds()) < 600 and accessed >= created
        assert all(float(f"{s:.4g}") == s for s in scores(found)) and scores(found)
        shown = await ok(client, "inspect", id=made["id"])
        assert shown["updated_at"] == shown["created_at"] and time_problems(shown) == []
        changed = await ok(client, "update", id=made["id"], importance=0.5)
        assert changed["changed"] == ["importance"] and "warnings" not in changed
        assert changed["updated_at"] >= changed["created_at"]  # ISO UTC strings sort by time


# -- the older revision ------------------------------------------------------------


async def test_2025_03_26_gets_no_output_schema_nor_structured_content(
    repo: Path, home: Path
) -> None:
    async with raw_server(home, cwd=repo) as server:
        await server.send(initialize_request("2025-03-26"))
        assert (await server.read())["result"]["protocolVersion"] == "2025-03-26"
        await server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = (await server.request("tools/list"))["result"]["tools"]
        assert all("outputSchema" not in tool for tool in listed)
        replies: dict[str, dict[str, Any]] = {}

        async def send(name: str, args: dict[str, Any]) -> tuple[bool, Any]:
            reply = await server.call_tool(name, args)
            result = replies[name] = reply["result"]
            assert "structuredContent" not in result, name
            return bool(result.get("isError")), inspector.raw_payload(result)

        await inspector.run_steps({t["name"]: t["inputSchema"] for t in listed}, repo, send)
        # The JSON text carries what structuredContent would: validate it all the same.
        schemas = {t.name: t.output_schema for t in [*MEMORY_TOOLS, *KG_TOOLS]}
        for name, schema in schemas.items():
            assert schema is not None
            (item,) = replies[name]["content"]
            validator(schema).validate(json.loads(item["text"]))


# -- the CLI and the export format ---------------------------------------------------


def test_cli_json_times_are_iso_and_export_keeps_epoch_seconds(tmp_path: Path) -> None:
    home, other = tmp_path / "home", tmp_path / "other"
    home.mkdir()
    other.mkdir()
    made = run_cli("remember", "the kettle is electric", "--scope", "global", "--json", home=home)
    assert made.returncode == 0, made.stderr
    memory_id = json.loads(made.stdout)["id"]
    shown = json.loads(
        run_cli("show", str(memory_id), "--json", "--scope", "global", home=home).stdout
    )
    listed = json.loads(run_cli("list", "--json", "--scope", "global", home=home).stdout)
    assert time_problems(shown) == [] and time_problems(listed) == []
    assert listed[0]["created_at"] == shown["created_at"]
    human = run_cli("show", str(memory_id), "--scope", "global", home=home).stdout
    local = dt.datetime.fromisoformat(shown["created_at"]).astimezone()
    assert f"created:  {local:%Y-%m-%d %H:%M}" in human

    # The export file keeps epoch seconds; importing it (old files alike) gives the same time.
    dump = tmp_path / "dump.jsonl"
    done = run_cli("export", "-o", str(dump), home=home)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in dump.read_text().splitlines()]
    stored = next(r for r in records if r.get("type") == "memory")
    assert isinstance(stored["created_at"], float)
    assert run_cli("import", str(dump), home=other).returncode == 0
    again = json.loads(
        run_cli("show", str(memory_id), "--json", "--scope", "global", home=other).stdout
    )
    assert again["created_at"] == time_of(stored["created_at"]).isoformat().replace("+00:00", "Z")
