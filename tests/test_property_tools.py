"""Property test of every tool's argument validation, against one running server.

Any JSON ``arguments`` (random values, or objects built from the tool's own
``inputSchema`` keys with values of any type) sent to any tool get exactly one
well-formed JSON-RPC reply with the request's id, that reply is never an internal
failure (-32603, or an ``isError`` result of a handler's unexpected exception: bad
input is refused, not crashed on), and the server keeps serving. The server is one
``memtrio mcp`` child for the whole module, driven with the blocking line client
(hypothesis tests are synchronous).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gitrepo import make_repo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from launch import server_command, server_env
from memtrio.actors.chaos.blocking import BlockingClient
from memtrio.actors.chaos.client import internal_failure
from memtrio.protocol.jsonrpc import INVALID_PARAMS, well_formed_reply
from raw_server import trace_events


def _checkout(home: Path) -> Path:
    """A one-file Git checkout to start in, so the code tools are there too."""
    repo = home / "repo"
    if not repo.exists():
        make_repo(
            repo,
            {
                "mod0.py": "import os\n\n\nclass Thing0:\n    def run(self) -> int:\n        return 0\n"
            },
        )
    return repo


def start(home: Path) -> BlockingClient:
    return BlockingClient(
        server_command(),
        server_env(home, {"MEMTRIO_CODE": "on", "MEMTRIO_CODE_INDEX_THREADS": "1"}),
        _checkout(home),
        stderr=open(home / "stderr.txt", "wb"),  # noqa: SIM115 - closed with the process
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BlockingClient]:
    home = tmp_path_factory.mktemp("property-tools")
    srv = start(home)
    try:
        assert "result" in srv.initialize(client="p")
        yield srv
        assert srv.close() == 0
    finally:
        srv.kill()
    text = (home / "stderr.txt").read_text(errors="replace")
    assert "Traceback" not in text, text[-2000:]
    failed = [e for e in trace_events(home) if e.get("event") == "tool_failed"]
    assert not failed, failed[:3]


def _tools() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        srv = start(Path(tmp))
        try:
            srv.initialize(client="p")
            return list(srv.request("tools/list")["result"]["tools"])
        finally:
            srv.kill()


TOOLS = _tools()

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)


def schema_shaped(tool: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    props = list(tool.get("inputSchema", {}).get("properties", {}))
    keys = st.sampled_from(props) if props else st.just("unexpected")
    return st.dictionaries(
        st.one_of(keys, st.text(max_size=6)), json_values, max_size=len(props) + 1
    )


# Strings a valid call carries: short text, words the tools may match, a scope name.
words = st.sampled_from(["alpha", "Alpha", "mod0.py", "Thing0", "run", "global", "os", "x y"])
strings = st.one_of(st.text(max_size=12), words)


def valid(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[Any]:  # noqa: C901
    """Values that pass ``schema`` (the subset of JSON Schema the tools' structs produce),
    so a call reaches its handler instead of stopping at argument validation."""
    if "$ref" in schema:
        return st.deferred(lambda: valid(defs[schema["$ref"].rsplit("/", 1)[-1]], defs))
    if "anyOf" in schema:
        return st.one_of([valid(s, defs) for s in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        low, high = schema.get("minLength", 0), min(schema.get("maxLength", 40), 40)
        return strings.filter(lambda v: low <= len(v) <= high) | st.text(
            min_size=low, max_size=max(low, min(high, 12))
        )
    if kind == "integer":
        low, high = schema.get("minimum", -5), schema.get("maximum", 10**6)
        return st.integers(low, min(high, low + 50)) | st.sampled_from([low, high])
    if kind == "number":
        low, high = schema.get("minimum", -5.0), schema.get("maximum", 100.0)
        return st.floats(low, high, allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        low, high = schema.get("minItems", 0), min(schema.get("maxItems", 3), 3)
        return st.lists(valid(schema.get("items", {}), defs), min_size=low, max_size=max(low, high))
    if kind == "object" and "properties" in schema:
        props, required = schema["properties"], set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {k: valid(v, defs) for k, v in props.items() if k in required},
            optional={k: valid(v, defs) for k, v in props.items() if k not in required},
        )
    return json_values


def schema_valid(tool: dict[str, Any]) -> st.SearchStrategy[Any]:
    schema = tool.get("inputSchema", {})
    return valid(schema, schema.get("$defs", {}))


arguments_for = st.sampled_from(TOOLS).flatmap(
    lambda tool: st.tuples(
        st.just(tool["name"]),
        st.one_of(json_values, schema_shaped(tool), schema_valid(tool), schema_valid(tool)),
    )
)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(arguments_for)
def test_any_arguments_to_any_tool_get_one_well_formed_reply(
    server: BlockingClient, case: tuple[str, Any]
) -> None:
    name, arguments = case
    reply = server.request("tools/call", {"name": name, "arguments": arguments})
    assert well_formed_reply(reply) is None, reply
    # Bad input is refused in words that say what to do; a handler that crashed on it
    # (-32603, or "recall failed: KeyError: ...") is a bug of the server, whatever its text.
    assert internal_failure(reply) is None, (name, arguments, reply)
    if "result" in reply:
        result = reply["result"]
        assert isinstance(result.get("content"), list)
        assert isinstance(result.get("isError", False), bool)
    else:
        assert reply["error"]["code"] == INVALID_PARAMS, reply


def test_every_tool_is_covered() -> None:
    names = {t["name"] for t in TOOLS}
    assert {"remember", "recall", "code_outline", "find_symbol"} <= names


def test_a_crashing_handler_is_an_internal_failure_not_a_refusal(tmp_path: Path) -> None:
    """The property above must fail on a crash: a handler that raises (here the fault
    point before every handler) is told from a refusal of bad input, which is not."""
    home = tmp_path / "home"
    home.mkdir()
    srv = BlockingClient(
        server_command(), server_env(home, {"MEMTRIO_FAULTS": "tool.call=raise"}), home
    )
    try:
        srv.initialize(client="p")
        crashed = srv.call_tool("recall", {"query": "anything"})
        refused = srv.call_tool("recall", {"query": 7})
    finally:
        srv.kill()
    assert internal_failure(crashed) is not None, crashed
    assert refused["result"]["isError"] and internal_failure(refused) is None, refused
