"""Property test of every tool's argument validation, against one running server.

Any JSON ``arguments`` (random values, or objects built from the tool's own
``inputSchema`` keys with values of any type) sent to any tool get exactly one
well-formed JSON-RPC reply with the request's id, and the server keeps serving.
The server is one ``memtrio mcp`` child for the whole module, driven with
blocking line I/O (hypothesis tests are synchronous).
"""

from __future__ import annotations

import itertools
import json
import select
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gitrepo import make_repo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp_client import server_command, server_env
from memtrio.protocol.jsonrpc import well_formed_reply


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


class LineServer:
    def __init__(self, home: Path) -> None:
        self.proc = subprocess.Popen(
            server_command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(home / "stderr.txt", "wb"),  # noqa: SIM115 - closed with the process
            env=server_env(home, {"MEMTRIO_CODE": "on", "MEMTRIO_CODE_INDEX_THREADS": "1"}),
            cwd=str(_checkout(home)),
        )
        self.buffer = b""
        self.ids = itertools.count(1)

    def send(self, obj: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(obj).encode() + b"\n")
        self.proc.stdin.flush()

    def read(self, timeout: float = 30.0) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([fd], [], [], timeout)
            assert ready, f"no reply within {timeout} s"
            chunk = __import__("os").read(fd, 65536)
            assert chunk, "the server closed stdout"
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def request(self, method: str, params: Any = None) -> dict[str, Any]:
        rid = next(self.ids)
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        reply = self.read()
        assert reply.get("id") == rid, reply
        return reply


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LineServer]:
    home = tmp_path_factory.mktemp("property-tools")
    srv = LineServer(home)
    init = srv.request(
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "p", "version": "1"},
        },
    )
    assert "result" in init
    srv.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    yield srv
    assert srv.proc.stdin is not None
    srv.proc.stdin.close()
    assert srv.proc.wait(30) == 0
    text = (home / "stderr.txt").read_text(errors="replace")
    assert "Traceback" not in text, text[-2000:]


def _tools() -> list[dict[str, Any]]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        srv = LineServer(Path(tmp))
        try:
            srv.request(
                "initialize",
                {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "p", "version": "1"},
                },
            )
            return srv.request("tools/list")["result"]["tools"]
        finally:
            srv.proc.kill()
            srv.proc.wait()


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


arguments_for = st.sampled_from(TOOLS).flatmap(
    lambda tool: st.tuples(st.just(tool["name"]), st.one_of(json_values, schema_shaped(tool)))
)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(arguments_for)
def test_any_arguments_to_any_tool_get_one_well_formed_reply(
    server: LineServer, case: tuple[str, Any]
) -> None:
    name, arguments = case
    reply = server.request("tools/call", {"name": name, "arguments": arguments})
    assert well_formed_reply(reply) is None, reply
    if "result" in reply:
        result = reply["result"]
        assert isinstance(result.get("content"), list)
        assert isinstance(result.get("isError", False), bool)
        if result.get("isError"):
            text = " ".join(c.get("text", "") for c in result["content"])
            assert "Traceback" not in text
    else:
        assert reply["error"]["code"] in (-32602, -32603), reply


def test_every_tool_is_covered() -> None:
    names = {t["name"] for t in TOOLS}
    assert {"remember", "recall", "code_outline", "find_symbol"} <= names
