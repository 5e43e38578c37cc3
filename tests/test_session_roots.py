"""Each session of a shared server has its own repository (docs/transports.md,
"Per-session repository").

The application runs in-process with line sessions on in-memory streams, as a
network transport runs them (`transport_children` with a `SessionState` that
starts without a repository); the tests speak raw JSON-RPC lines and answer the
server's ``roots/list`` requests themselves. The last test runs the real
``memtrio mcp`` over stdio with the official SDK client.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from gitrepo import make_repo
from mcp import Client, StdioServerParameters, types
from mcp_client import call as sdk_call
from mcp_client import server_command, server_env
from memtrio.actors import session_roots
from memtrio.actors.chaos.client import INITIALIZED, LineClient, RequestId, initialize_params
from memtrio.actors.code.feature import FEATURE as CODE
from memtrio.actors.features import GRAPH, MEMORY, STATUS, STORE
from memtrio.actors.session_state import SessionState
from memtrio.actors.stdio import transport_children, transport_supervisor
from memtrio.actors.store.domain.scopes import default_scope
from memtrio.supervisors import config as config_mod
from memtrio.supervisors import faults
from memtrio.supervisors.app import build_context, open_app
from memtrio.supervisors.context import AppContext, Feature
from memtrio.supervisors.supervisor import supervisor_child
from trio.testing import memory_stream_one_way_pair, wait_all_tasks_blocked

ROOT_FIELD = '_meta["memtrio/root"]'


def uri(path: Path) -> str:
    return path.as_uri()


class Peer(LineClient):
    """The client end of one line session: the chaos line client on a memory stream pair.

    ``roots`` (file URIs) answer the server's ``roots/list`` requests while
    ``auto_roots`` is set; otherwise those requests are kept in ``asked``.
    """

    def __init__(
        self,
        send_stream: trio.abc.SendStream,
        receive_stream: trio.abc.ReceiveStream,
        state: SessionState,
    ) -> None:
        super().__init__(receive_stream)
        self.send_stream = send_stream
        self.state = state
        self.roots: list[str] = []
        self.auto_roots = True
        self.roots_error: dict[str, Any] | None = None
        self.asked: list[dict[str, Any]] = []

    async def _write(self, data: bytes) -> None:
        await self.send_stream.send_all(data)

    async def answer_roots(self, request: dict[str, Any]) -> None:
        if self.roots_error is not None:
            await self.send({"jsonrpc": "2.0", "id": request["id"], "error": self.roots_error})
        else:
            roots = [{"uri": r, "name": f"root {i}"} for i, r in enumerate(self.roots)]
            await self.send({"jsonrpc": "2.0", "id": request["id"], "result": {"roots": roots}})

    async def reply(self, rid: object, timeout: float = 10.0) -> dict[str, Any]:
        """The answer to our request ``rid`` (answering or keeping server requests meanwhile)."""
        while True:
            message = await self.read(timeout)
            if message.get("method") == "roots/list":
                if self.auto_roots:
                    await self.answer_roots(message)
                else:
                    self.asked.append(message)
                continue
            assert "method" not in message, f"unexpected server request {message}"
            if message.get("id") == rid:
                result: dict[str, Any] = message
                return result

    async def request(
        self,
        method: str,
        params: object = None,
        *,
        rid: RequestId | None = None,
        timeout: float = 10.0,
    ) -> dict[str, Any]:
        rid = self.new_id() if rid is None else rid
        await self.send_request(rid, method, params)
        return await self.reply(rid, timeout)

    async def initialize(
        self,
        timeout: float = 10.0,
        client: str = "roots-test",
        rid: RequestId | None = None,
        *,
        roots: bool = True,
        meta: dict[str, object] | None = None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = initialize_params(client)
        params["capabilities"] = {"roots": {"listChanged": True}} if roots else {}
        if meta is not None:
            params["_meta"] = meta
        answer = await self.request("initialize", params, rid=rid, timeout=timeout)
        if "result" in answer:
            await self.send(INITIALIZED)
        return answer

    async def call(self, tool: str, **arguments: object) -> tuple[bool, Any]:
        """(isError, structured content or text) of one tool call."""
        answer = await self.request("tools/call", {"name": tool, "arguments": arguments})
        assert "result" in answer, answer
        result = answer["result"]
        payload = result.get("structuredContent")
        if payload is None:
            payload = "\n".join(c["text"] for c in result["content"])
        return bool(result["isError"]), payload

    async def ok(self, tool: str, **arguments: object) -> Any:
        is_error, payload = await self.call(tool, **arguments)
        assert not is_error, f"{tool} failed: {payload}"
        return payload

    async def fails(self, tool: str, **arguments: object) -> str:
        is_error, payload = await self.call(tool, **arguments)
        assert is_error, f"{tool} unexpectedly succeeded: {payload}"
        return payload if isinstance(payload, str) else json.dumps(payload)


@asynccontextmanager
async def serving(
    home: Path,
    cwd: Path,
    sessions: int = 2,
    features: Sequence[Feature] = (STATUS, STORE, MEMORY, GRAPH),
) -> AsyncIterator[tuple[AppContext, list[Peer]]]:
    """The application in ``cwd`` with ``sessions`` network-like line sessions."""
    cfg = config_mod.load(home, env={"MEMTRIO_EMBEDDINGS": "off"})
    app = build_context(cfg, home, cwd)
    peers: list[Peer] = []
    children = []
    for i in range(sessions):
        to_server, server_in = memory_stream_one_way_pair()
        server_out, from_server = memory_stream_one_way_pair()
        closed = trio.Event()
        state = SessionState(
            name=f"net{i}.session", root=None, root_source="none", on_close=closed.set
        )
        specs = transport_children(
            app, server_in, server_out, f"net{i}", session_state=state, on_peer_gone=closed.set
        )
        children.append(
            supervisor_child(
                lambda specs=specs, i=i: transport_supervisor(specs, f"net{i}"),
                f"net{i}",
                why="one test connection",
            )
        )
        peers.append(Peer(to_server, from_server, state))
    async with open_app(app, features, extra_children=children):
        yield app, peers


@pytest.fixture
def repos(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Two Git checkouts and the server's directory (outside any repository)."""
    a = make_repo(tmp_path / "repoA", {"a.py": "def alpha():\n    return 1\n"})
    b = make_repo(tmp_path / "repoB", {"b.py": "def beta():\n    return 2\n"})
    server = tmp_path / "server"
    server.mkdir()
    return a, b, server.resolve()


def contents(recalled: dict[str, Any]) -> set[str]:
    return {m["content"] for m in recalled["memories"]}


async def test_two_sessions_each_see_their_own_repository_and_global(
    home: Path, repos: tuple[Path, Path, Path]
) -> None:
    repo_a, repo_b, server = repos
    scope_a, scope_b = default_scope(repo_a), default_scope(repo_b)
    async with serving(home, server) as (_, (a, b)):
        a.roots, b.roots = [uri(repo_a)], [uri(repo_b)]
        for peer in (a, b):
            init = await peer.initialize()
            assert "client's MCP roots" in init["result"]["instructions"]
        alpha = await a.ok("remember", content="alpha deploys with make ship")
        beta = await b.ok("remember", content="beta deploys with make release")
        await a.ok("remember", content="shared deploys need a changelog", scopes=["global"])
        assert alpha["scopes"] == [scope_a] and beta["scopes"] == [scope_b]

        seen_a = await a.ok("recall", query="deploys")
        seen_b = await b.ok("recall", query="deploys")
        assert contents(seen_a) == {
            "alpha deploys with make ship",
            "shared deploys need a changelog",
        }
        assert contents(seen_b) == {
            "beta deploys with make release",
            "shared deploys need a changelog",
        }
        assert seen_a["scopes"] == [scope_a, "global"]

        scopes_a = await a.ok("list_scopes")
        assert scopes_a["current_scope"] == scope_a
        rows = {row["name"]: row for row in scopes_a["scopes"]}
        assert rows[scope_a]["writable"] and not rows[scope_b]["writable"]
        assert (await b.ok("stats"))["current_scope"] == scope_b

        # The knowledge graph reads and writes the calling session's scope too.
        await a.ok("create_entities", entities=[{"name": "AlphaService", "entityType": "svc"}])
        graph_a = await a.ok("read_graph")
        graph_b = await b.ok("read_graph")
        assert "AlphaService" in json.dumps(graph_a)
        assert "AlphaService" not in json.dumps(graph_b)

        status_a, status_b = await a.ok("server_status"), await b.ok("server_status")
        assert status_a["session"]["root"] == str(repo_a)
        assert status_b["session"]["root"] == str(repo_b)
        assert status_a["session"]["root_source"] == "roots"


async def test_a_session_cannot_write_another_sessions_repository(
    home: Path, repos: tuple[Path, Path, Path]
) -> None:
    repo_a, repo_b, server = repos
    scope_b = default_scope(repo_b)
    async with serving(home, server) as (_, (a, b)):
        a.roots, b.roots = [uri(repo_a)], [uri(repo_b)]
        await a.initialize()
        await b.initialize()
        theirs = await b.ok("remember", content="beta uses tabs")

        refused = await a.fails("remember", content="sneaky", scopes=[f"repo:{repo_b}"])
        assert f"`{scope_b}`" in refused and "this session may only write" in refused
        assert "open the session in that repository" in refused
        assert "restart memtrio" not in refused
        refused = await a.fails("update", id=theirs["id"], content="changed", scopes=[scope_b])
        assert "cannot modify memories in scope" in refused
        refused = await a.fails("forget", id=theirs["id"], scopes=[scope_b])
        assert "cannot modify memories in scope" in refused
        # Without scopes B's memory is not even visible to A.
        assert "not found" in (await a.fails("forget", id=theirs["id"])).lower()
        assert contents(await b.ok("recall", query="tabs")) == {"beta uses tabs"}


async def test_the_initialize_root_parameter_wins_and_bad_values_are_refused(
    home: Path, repos: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    repo_a, repo_b, server = repos
    not_a_dir = tmp_path / "file.txt"
    not_a_dir.write_text("x")
    async with serving(home, server) as (_, (a, b)):
        bad_values: list[object] = [
            "relative/dir",
            str(tmp_path / "missing"),
            42,
            None,
            "file://elsewhere/tmp",
            str(not_a_dir),
        ]
        for bad in bad_values:
            answer = await a.initialize(meta={"memtrio/root": bad})
            assert answer["error"]["code"] == -32602, answer
            assert ROOT_FIELD in answer["error"]["message"]
            assert not a.state.initialized
        # The failed initializes left the session serving, and uninitialized.
        assert (await a.request("tools/list"))["error"]["code"] == -32002

        # A plain path, on a client that also declares roots: no roots/list is asked.
        a.auto_roots = False
        init = await a.initialize(meta={"memtrio/root": str(repo_a)})
        assert f"`{default_scope(repo_a)}`" in init["result"]["instructions"]
        assert (await a.request("ping"))["result"] == {}
        assert a.asked == []
        assert (await a.ok("list_scopes"))["current_scope"] == default_scope(repo_a)
        status = (await a.ok("server_status"))["session"]
        assert (status["root"], status["root_source"]) == (str(repo_a), "initialize")

        # A file:// URI, on a client without roots.
        await b.initialize(roots=False, meta={"memtrio/root": uri(repo_b / ".")})
        assert (await b.ok("remember", content="b via uri"))["scopes"] == [default_scope(repo_b)]


async def test_a_session_without_roots_writes_only_global(
    home: Path, repos: tuple[Path, Path, Path]
) -> None:
    repo_a, _, server = repos
    async with serving(home, server, sessions=1) as (_, (a,)):
        init = await a.initialize(roots=False)
        assert "This session has no repository" in init["result"]["instructions"]
        assert (await a.ok("remember", content="anywhere"))["scopes"] == ["global"]
        listed = await a.ok("list_scopes")
        assert listed["current_scope"] == "global"
        assert [r["name"] for r in listed["scopes"] if r["writable"]] == ["global"]
        refused = await a.fails("remember", content="x", scopes=[f"repo:{repo_a}"])
        assert "this session may only write `global`" in refused
        status = (await a.ok("server_status"))["session"]
        assert (status["root"], status["root_source"]) == (None, "none")


async def test_code_tools_use_the_session_repository_or_ask_for_root(
    home: Path, repos: tuple[Path, Path, Path]
) -> None:
    repo_a, repo_b, server = repos
    async with serving(home, server, features=(STATUS, STORE, MEMORY, CODE)) as (_, (a, b)):
        a.roots = [uri(repo_a)]
        await a.initialize()
        await b.initialize(roots=False)
        assert "alpha" in await a.ok("find_symbol", query="alpha")
        refused = await b.fails("find_symbol", query="beta")
        assert "this session has no repository" in refused and "pass `root`" in refused
        assert "beta" in await b.ok("find_symbol", query="beta", root=str(repo_b))


async def test_roots_list_changed_switches_the_repository(
    home: Path, repos: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    repo_a, repo_b, server = repos
    plain = tmp_path / "plain"
    plain.mkdir()
    async with serving(home, server, sessions=1) as (_, (a,)):
        # Roots outside a Git checkout (and not file://) are skipped: the first checkout wins.
        a.roots = ["https://example.invalid/x", uri(plain), uri(repo_a), uri(repo_b)]
        await a.initialize()
        assert (await a.ok("list_scopes"))["current_scope"] == default_scope(repo_a)
        a.roots = [uri(repo_b)]
        await a.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
        assert (await a.ok("list_scopes"))["current_scope"] == default_scope(repo_b)
        assert (await a.ok("remember", content="now in b"))["scopes"] == [default_scope(repo_b)]
        a.roots = [uri(plain)]
        await a.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
        assert (await a.ok("list_scopes"))["current_scope"] == "global"


async def test_an_error_or_malformed_roots_answer_leaves_no_repository(
    home: Path, repos: tuple[Path, Path, Path]
) -> None:
    repo_a, _, server = repos
    async with serving(home, server, sessions=2) as (_, (a, b)):
        a.roots_error = {"code": -32601, "message": "roots not supported here"}
        await a.initialize()
        assert (await a.ok("remember", content="fallback"))["scopes"] == ["global"]
        status = (await a.ok("server_status"))["session"]
        assert (status["root"], status["root_source"]) == (None, "roots")

        b.auto_roots = False
        await b.initialize()
        assert (await b.request("ping"))["result"] == {}
        (asked,) = b.asked
        assert asked["id"].startswith("memtrio-roots-")
        # A stray response is ignored; then the malformed answer to the real request.
        await b.send({"jsonrpc": "2.0", "id": "not-ours", "result": {"roots": [uri(repo_a)]}})
        await b.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"roots": "nope"}})
        assert (await b.ok("list_scopes"))["current_scope"] == "global"
        assert (await b.request("ping"))["result"] == {}


async def test_a_tool_call_waits_for_the_roots_answer(
    home: Path, repos: tuple[Path, Path, Path]
) -> None:
    repo_a, _, server = repos
    async with serving(home, server, sessions=1) as (_, (a,)):
        a.auto_roots = False
        a.roots = [uri(repo_a)]
        await a.initialize()
        await a.send(
            {
                "jsonrpc": "2.0",
                "id": "early",
                "method": "tools/call",
                "params": {"name": "list_scopes", "arguments": {}},
            }
        )
        request = await a.read()
        assert request["method"] == "roots/list"
        await wait_all_tasks_blocked()
        assert "early" in a.state.in_flight  # still waiting for the answer
        await a.answer_roots(request)
        answer = await a.reply("early")
        assert answer["result"]["structuredContent"]["current_scope"] == default_scope(repo_a)


async def test_a_tool_call_proceeds_without_a_repository_when_roots_never_come(
    home: Path, repos: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, server = repos
    monkeypatch.setattr(session_roots, "ROOTS_WAIT", 0.2)
    async with serving(home, server, sessions=1) as (_, (a,)):
        a.auto_roots = False
        await a.initialize()
        assert (await a.ok("list_scopes"))["current_scope"] == "global"
        assert len(a.asked) == 1


async def test_the_root_survives_a_session_actor_restart(
    home: Path, repos: tuple[Path, Path, Path]
) -> None:
    repo_a, _, server = repos
    async with serving(home, server, sessions=1) as (_, (a,)):
        a.roots = [uri(repo_a)]
        await a.initialize()
        assert (await a.ok("list_scopes"))["current_scope"] == default_scope(repo_a)
        faults.configure("session.dispatch=raise@1")  # the next message crashes the session
        assert (await a.request("ping"))["error"]["code"] == -32603  # the session crashed
        a.auto_roots = False
        assert (await a.ok("list_scopes"))["current_scope"] == default_scope(repo_a)
        assert a.asked == []  # the restarted session did not ask again


async def test_stdio_keeps_the_server_directory_whatever_the_client_roots(
    home: Path, repos: tuple[Path, Path, Path]
) -> None:
    """`memtrio mcp` with the official SDK client declaring roots: the server's
    directory stays the session's repository and roots/list is never asked."""
    repo_a, repo_b, _ = repos
    asked: list[int] = []

    async def list_roots(context: Any) -> types.ListRootsResult:
        asked.append(1)
        return types.ListRootsResult(roots=[types.Root(uri=uri(repo_b))])  # type: ignore[arg-type]

    command = server_command()
    params = StdioServerParameters(
        command=command[0], args=command[1:], env=server_env(home), cwd=str(repo_a)
    )
    async with Client(
        params, read_timeout_seconds=60, mode="auto", list_roots_callback=list_roots
    ) as client:
        is_error, listed = await sdk_call(client, "list_scopes")
        assert not is_error and listed["current_scope"] == default_scope(repo_a)
        is_error, status = await sdk_call(client, "server_status")
        assert not is_error
        assert status["session"]["root"] == str(repo_a)
        assert status["session"]["root_source"] == "cwd"
    assert asked == []


@pytest.mark.parametrize(
    ("scope", "root", "source"),
    [
        ("global", Path("/tmp/plain"), "cwd"),
        ("global", Path("/tmp/plain"), "initialize"),
        ("global", None, "none"),
        ("global", None, "roots"),
        ("repo:/src/app/.git", Path("/src/app"), "cwd"),
        ("repo:/src/app/.git", Path("/src/app"), "roots"),
    ],
)
def test_the_instructions_never_contradict_the_sessions_scope(
    scope: str, root: Path | None, source: str
) -> None:
    """Outside a Git repository the instructions said both "its default memory scope is
    `global`" and "reads cover the current repository plus `global`"."""
    from types import SimpleNamespace

    from memtrio.actors.memory.feature import instructions

    session = SimpleNamespace(
        name="s", protocol_version=None, root=root, root_source=source, grant=None
    )
    text = instructions(scope, session)  # type: ignore[arg-type]  # a SessionView's fields
    if scope == "global" and source != "roots":
        assert "current repository" not in text
        assert "cover `global` alone" in text
    elif scope == "global":
        assert "Once the repository is known" in text
    else:
        assert f"`{scope}`" in text and "current repository plus `global`" in text
