"""Grants of a shared ``memtrio serve``: ``[serve] allowed_roots`` and ``[[serve.tokens]]``.

Through real processes on every network transport (TCP, WebSocket, Streamable HTTP)
and the attach endpoint: a session outside its grant cannot choose the repository
(``_meta["memtrio/root"]``, a symlink or ``..`` into it, MCP roots), cannot write it,
and learns nothing of its memories (recall, inspect, list_scopes, stats); a read-only
token reads but writes nothing; a session inside its grant works as before.

The layout every test shares (`Site`): ``allowed/alpha`` and ``allowed/beta`` (Git
checkouts under ``[serve] allowed_roots``), ``outside/secret`` (not under it), the
symlink ``allowed/alpha-link`` -> ``allowed/beta``; tokens ``default`` (the
``--auth-token-file`` one: any repository under allowed_roots), ``alpha`` (only
``allowed/alpha*``) and ``reader`` (read-only, given as its SHA-256).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from gitrepo import git, make_repo, write
from mcp_client import run_cli
from memtrio.actors.chaos.client import INITIALIZED, request_message
from memtrio.supervisors.grants import Grant, matches
from raw_server import INIT
from serve_helpers import Served, serve_process, tcp_client, ws_client
from test_attach import child, running_owner

TRANSPORTS = ("tcp", "ws", "http")
OUTSIDE = "outside this session's grant"
SECRET = "the beta launch codes live in the blue vault"
FAST = {"MEMTRIO_EMBEDDINGS": "off", "MEMTRIO_CODE": "off"}


@dataclass
class Site:
    tmp: Path
    home: Path
    alpha: Path
    beta: Path
    secret: Path
    link: Path
    tokens: dict[str, str]

    def token_file(self, name: str) -> Path:
        return self.tmp / f"{name}.token"


@pytest.fixture
def site(tmp_path: Path, home: Path) -> Site:
    tmp = tmp_path.resolve()
    alpha = make_repo(tmp / "allowed" / "alpha", {"a.py": "def alpha_main():\n    pass\n"})
    beta = make_repo(tmp / "allowed" / "beta", {"b.py": "def beta_main():\n    pass\n"})
    secret = make_repo(tmp / "outside" / "secret", {"s.py": "x = 1\n"})
    link = tmp / "allowed" / "alpha-link"
    link.symlink_to(beta)
    tokens = {name: f"{name}-token-0123456789abcdef" for name in ("default", "alpha", "reader")}
    for name in ("default", "alpha"):
        (tmp / f"{name}.token").write_text(tokens[name] + "\n")
        os.chmod(tmp / f"{name}.token", 0o600)
    reader_hash = hashlib.sha256(tokens["reader"].encode()).hexdigest()
    (home / "config.toml").write_text(
        f'[serve]\nallowed_roots = ["{tmp}/allowed/**"]\n\n'
        f'[[serve.tokens]]\nname = "alpha"\ntoken_file = "{tmp}/alpha.token"\n'
        f'allowed_roots = ["{tmp}/allowed/alpha*"]\n\n'
        f'[[serve.tokens]]\nname = "reader"\ntoken_sha256 = "{reader_hash}"\nread_only = true\n'
    )
    return Site(tmp, home, alpha, beta, secret, link, tokens)


def serve_args(site: Site, transport: str) -> list[str]:
    return [
        "--transport", transport, "--bind", "127.0.0.1:0",
        "--auth-token-file", str(site.token_file("default")),
    ]  # fmt: skip


def init_message(root: str | None, roots_capable: bool = False) -> dict[str, Any]:
    params: dict[str, Any] = {**INIT["params"], "capabilities": {}}
    if roots_capable:
        params["capabilities"] = {"roots": {"listChanged": True}}
    if root is not None:
        params["_meta"] = {"memtrio/root": root}
    return {**INIT, "params": params}


class Client:
    """One MCP session over any of the three transports: raw JSON-RPC in and out."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self._ids = itertools.count(1)

    async def send(self, obj: dict[str, Any]) -> None:
        await self.raw.send(obj)

    async def read(self) -> dict[str, Any]:
        reply: dict[str, Any] = await self.raw.read()
        return reply

    async def initialize(self, root: str | None, roots_capable: bool = False) -> dict[str, Any]:
        """The answer to ``initialize`` (then ``notifications/initialized`` if it succeeded)."""
        await self.send(init_message(root, roots_capable))
        reply = await self.read()
        if "result" in reply:
            await self.send(INITIALIZED)
        return reply

    async def call(self, method: str, params: Any = None) -> dict[str, Any]:
        rid = next(self._ids)
        await self.send(request_message(method, params, rid))
        while True:
            reply = await self.read()
            if reply.get("id") == rid:
                return reply

    async def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        reply = await self.call("tools/call", {"name": name, "arguments": arguments})
        assert "result" in reply, reply
        result: dict[str, Any] = reply["result"]
        return result


class HttpRaw:
    """`Client`'s transport over Streamable HTTP: one POST per message, JSON answers."""

    def __init__(self, http: httpx2.AsyncClient, url: str, token: str) -> None:
        self.http, self.url = http, url
        self.headers = {"authorization": f"Bearer {token}", "accept": "application/json"}
        self.sid: str | None = None
        self.replies: list[dict[str, Any]] = []

    async def send(self, obj: dict[str, Any]) -> None:
        headers = dict(self.headers)
        if self.sid is not None:
            headers["mcp-session-id"] = self.sid
        response = await self.http.post(self.url, json=obj, headers=headers)
        if response.status_code == 202:
            return
        # A refusal (400, 404) carries its JSON-RPC error as the body.
        if (
            response.status_code == 200
            and obj.get("method") == "initialize"
            and "result" in response.json()
        ):
            self.sid = response.headers["mcp-session-id"]
        self.replies.append(response.json())

    async def read(self) -> dict[str, Any]:
        return self.replies.pop(0)


@asynccontextmanager
async def session(served: Served, transport: str, token: str) -> AsyncIterator[Client]:
    if transport == "tcp":
        async with tcp_client(served.port, token=token) as raw:
            yield Client(raw)
    elif transport == "ws":
        async with ws_client(served.url, token=token) as frames:
            yield Client(frames)
    else:
        async with httpx2.AsyncClient(timeout=30) as http:
            yield Client(HttpRaw(http, served.url, token))


def text_of(result: dict[str, Any]) -> str:
    return json.dumps(result)


async def remember_secret(served: Served, transport: str, site: Site) -> int:
    """The default token writes `SECRET` in beta and one memory in ``global``; beta's id."""
    async with session(served, transport, site.tokens["default"]) as owner:
        assert "result" in await owner.initialize(str(site.beta))
        saved = await owner.tool("remember", content=SECRET)
        assert saved["isError"] is False, saved
        shared = await owner.tool(
            "remember", content="every team writes changelogs", scopes=["global"]
        )
        assert shared["isError"] is False, shared
        return int(saved["structuredContent"]["id"])


# -- matching ----------------------------------------------------------------------


def test_grant_patterns_allow_what_lies_beneath_and_nothing_that_escapes() -> None:
    grant = Grant("t", roots=("/srv/repos/*",), bound=("/srv/**",))
    assert grant.allows("/srv/repos/a") and grant.allows("/srv/repos/a/src/.git")
    assert not grant.allows("/srv/repos") and not grant.allows("/srv/other/a")
    assert not grant.allows("/srv/repos/a/../../etc")  # `..` folded before matching
    assert not grant.allows("relative/srv/repos/a")
    assert matches(("/srv/**",), "/srv") and matches(("**",), "/anything")
    assert not matches(("/srv/repos/a*",), "/srv/repos/b") and matches(("/x/[ab]",), "/x/b/c")
    assert "/srv/other" not in grant.describe() and "/srv/repos/*" in grant.describe()


def test_bad_grant_settings_stop_serve_with_one_line_and_exit_2(home: Path) -> None:
    cases = {
        '[serve]\nallowed_roots = ["repos/*"]\n': "must be an absolute path pattern",
        '[[serve.tokens]]\nname = "x"\ntoken = "inline"\n': "unknown field `token`",
        '[[serve.tokens]]\nname = "x"\n': "give exactly one of token_file",
        '[[serve.tokens]]\nname = "x"\ntoken_sha256 = "abc"\n': "64 hex digits",
    }
    for text, needle in cases.items():
        (home / "config.toml").write_text(text)
        proc = run_cli("serve", "--transport", "tcp", "--bind", "127.0.0.1:0", home=home)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and needle in proc.stderr, proc.stderr


# -- a session outside its grant, on every transport ------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_session_outside_its_grant_cannot_choose_write_or_read_the_repository(
    site: Site, transport: str
) -> None:
    async with serve_process(site.home, serve_args(site, transport), FAST) as served:
        beta_id = await remember_secret(served, transport, site)
        # The alpha token may not choose beta: named, through a symlink, through `..`.
        for root in (str(site.beta), str(site.link), f"{site.alpha}/../beta", site.beta.as_uri()):
            async with session(served, transport, site.tokens["alpha"]) as alpha:
                refused = await alpha.initialize(root)
                assert refused["error"]["code"] == -32602, refused
                message = refused["error"]["message"]
                assert OUTSIDE in message and "allowed/alpha*" in message, message
                assert "secret" not in message and str(site.beta) not in message.replace(
                    root, ""
                ), message
                # The session stays uninitialized (HTTP: none was opened): nothing is served.
                await alpha.send({"jsonrpc": "2.0", "id": 9, "method": "tools/list"})
                assert "error" in await alpha.read()
        # Inside its grant it works, and learns nothing of beta.
        async with session(served, transport, site.tokens["alpha"]) as alpha:
            assert "result" in await alpha.initialize(str(site.alpha))
            recalled = await alpha.tool("recall", query="launch codes blue vault")
            assert "vault" not in text_of(recalled)
            for scopes in ([f"repo:{site.beta}"], [f"repo:{site.link}"], [f"repo:{site.secret}"]):
                read = await alpha.tool("recall", query="launch codes", scopes=scopes)
                assert read["isError"] is True and OUTSIDE in text_of(read), read
            looked = await alpha.tool("inspect", id=beta_id)
            assert looked["isError"] is True and "vault" not in text_of(looked)
            gone = await alpha.tool("forget", id=beta_id, scopes=[f"repo:{site.beta}"])
            assert gone["isError"] is True
            listed = (await alpha.tool("list_scopes"))["structuredContent"]["scopes"]
            assert not any("beta" in s["name"] for s in listed), listed
            stats = (await alpha.tool("stats"))["structuredContent"]
            assert stats["memories"] == 1, stats  # the global one; not beta's
            wrote = await alpha.tool("remember", content="alpha ships on Fridays")
            assert wrote["isError"] is False, wrote
        # [serve] allowed_roots bounds the default token too.
        async with session(served, transport, site.tokens["default"]) as owner:
            refused = await owner.initialize(str(site.secret))
            assert refused["error"]["code"] == -32602 and OUTSIDE in text_of(refused)
            assert "result" in await owner.initialize(str(site.beta))
            kept = await owner.tool("recall", query="launch codes blue vault")
            assert "blue vault" in text_of(kept)  # nothing of beta was lost


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_read_only_token_reads_but_cannot_write(site: Site, transport: str) -> None:
    async with serve_process(site.home, serve_args(site, transport), FAST) as served:
        beta_id = await remember_secret(served, transport, site)
        async with session(served, transport, site.tokens["reader"]) as reader:
            assert "result" in await reader.initialize(str(site.beta))
            names = {t["name"] for t in (await reader.call("tools/list"))["result"]["tools"]}
            assert {"recall", "inspect", "read_graph", "stats"} <= names
            assert not names & {"remember", "forget", "update", "create_entities", "compact"}
            assert "blue vault" in text_of(await reader.tool("recall", query="blue vault"))
            for name, arguments in (
                ("remember", {"content": "written by a reader"}),
                ("forget", {"id": beta_id}),
                ("update", {"id": beta_id, "content": "changed by a reader"}),
                ("create_entities", {"entities": [{"name": "X", "entityType": "t"}]}),
            ):
                refused = await reader.tool(name, **arguments)
                assert refused["isError"] is True and "read-only" in text_of(refused), refused
            listed = (await reader.tool("list_scopes"))["structuredContent"]["scopes"]
            assert not any(s["writable"] for s in listed), listed
            assert (await reader.tool("inspect", id=beta_id))["isError"] is False
        async with session(served, transport, site.tokens["default"]) as owner:
            assert "result" in await owner.initialize(str(site.beta))
            # The reader's recall and inspect left no trace: only this inspect counts.
            seen = (await owner.tool("inspect", id=beta_id))["structuredContent"]
            assert seen["access_count"] == 1, seen
            found = text_of(await owner.tool("recall", query="blue vault reader"))
            assert "blue vault" in found and "by a reader" not in found


async def test_an_http_session_answers_only_the_token_that_opened_it(site: Site) -> None:
    async with (
        serve_process(site.home, serve_args(site, "http"), FAST) as served,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        raw = HttpRaw(http, served.url, site.tokens["reader"])
        client = Client(raw)
        assert "result" in await client.initialize(str(site.beta))
        ping = {"jsonrpc": "2.0", "id": 5, "method": "ping"}
        for token in ("alpha", "default"):
            other = {
                "authorization": f"Bearer {site.tokens[token]}",
                "accept": "application/json",
                "mcp-session-id": raw.sid or "",
            }
            answer = await http.post(served.url, json=ping, headers=other)
            assert answer.status_code == 404, answer.text
        assert (await client.call("ping"))["result"] == {}


async def test_mcp_roots_outside_the_grant_are_refused_and_tool_calls_say_so(
    site: Site,
) -> None:
    async with (
        serve_process(site.home, serve_args(site, "tcp"), FAST) as served,
        session(served, "tcp", site.tokens["alpha"]) as alpha,
    ):

        async def answer_roots(path: Path) -> None:
            request = await alpha.read()
            assert request["method"] == "roots/list", request
            roots = [{"uri": path.as_uri()}]
            await alpha.send({"jsonrpc": "2.0", "id": request["id"], "result": {"roots": roots}})

        assert "result" in await alpha.initialize(None, roots_capable=True)
        await answer_roots(site.beta)
        refused = await alpha.tool("remember", content="should not land in global")
        assert refused["isError"] is True and OUTSIDE in text_of(refused), refused
        assert (await alpha.tool("server_status"))["isError"] is False
        await alpha.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
        await answer_roots(site.alpha)
        wrote = await alpha.tool("remember", content="alpha builds with make")
        assert wrote["isError"] is False and wrote["structuredContent"]["scopes"] != ["global"]


async def test_code_tools_refuse_a_checkout_outside_the_grant(site: Site) -> None:
    env = {"MEMTRIO_EMBEDDINGS": "off"}
    async with (
        serve_process(site.home, serve_args(site, "tcp"), env) as served,
        session(served, "tcp", site.tokens["alpha"]) as alpha,
    ):
        assert "result" in await alpha.initialize(str(site.alpha))
        for root in (str(site.beta), str(site.link), str(site.secret)):
            refused = await alpha.tool("find_symbol", query="beta_main", root=root)
            assert refused["isError"] is True and OUTSIDE in text_of(refused), refused
            assert "beta_main" not in text_of(refused)
        own = await alpha.tool("find_symbol", query="alpha_main", root=str(site.alpha))
        assert own["isError"] is False and "alpha_main" in text_of(own), own


async def test_code_tools_refuse_a_linked_worktree_of_a_repository_outside_the_grant(
    site: Site,
) -> None:
    """Regression (issue #37, item 10): a linked worktree of ``outside/secret`` placed
    inside ``allowed/alpha`` passed the code tools' path checks, and ``code_outline`` and
    ``code_diff`` returned the other repository's symbols and history. Its Git common
    directory is outside the grant: as a ``root``, as a path under the session's
    checkout and as the session's repository, it is refused."""
    write(site.secret, {"plan.py": "def secret_plan():\n    return 'launch'\n"})
    git(site.secret, "add", "-A")
    git(site.secret, "commit", "-q", "-m", "the plan")
    worktree = site.alpha / "wt"
    git(site.secret, "worktree", "add", "-q", "-b", "wt", str(worktree))
    env = {"MEMTRIO_EMBEDDINGS": "off"}
    calls: list[tuple[str, dict[str, Any]]] = [
        ("code_outline", {"path": "plan.py", "root": str(worktree)}),
        ("code_imports", {"path": "plan.py", "root": str(worktree)}),
        ("find_symbol", {"query": "secret_plan", "root": str(worktree)}),
        ("code_diff", {"base": "HEAD~1", "root": str(worktree)}),
        ("code_outline", {"path": "wt/plan.py"}),
        ("code_outline", {"path": str(worktree / "plan.py")}),
        ("code_imports", {"path": "wt/plan.py"}),
    ]
    async with serve_process(site.home, serve_args(site, "tcp"), env) as served:
        async with session(served, "tcp", site.tokens["alpha"]) as alpha:
            refused = await alpha.initialize(str(worktree))
            assert refused["error"]["code"] == -32602 and OUTSIDE in text_of(refused), refused
        await code_calls_refused(served, site, calls)


async def code_calls_refused(
    served: Served, site: Site, calls: list[tuple[str, dict[str, Any]]]
) -> None:
    """Each of ``calls`` refused to an alpha session, which still reads its own code."""
    async with session(served, "tcp", site.tokens["alpha"]) as alpha:
        assert "result" in await alpha.initialize(str(site.alpha))
        for name, arguments in calls:
            answer = await alpha.tool(name, **arguments)
            assert answer["isError"] is True and OUTSIDE in text_of(answer), (name, answer)
            assert "secret_plan" not in text_of(answer) and "the plan" not in text_of(answer)
        own = await alpha.tool("code_outline", path="a.py")
        assert own["isError"] is False and "alpha_main" in text_of(own), own
        found = await alpha.tool("find_symbol", query="secret_plan")
        assert found["isError"] is False and "secret_plan" not in text_of(found), found


# -- attach ---------------------------------------------------------------------------


async def test_an_attached_child_outside_serve_allowed_roots_cannot_choose_its_repository(
    site: Site,
) -> None:
    async with (
        running_owner(site.home),
        child(site.home, site.secret, "outside") as outside,
        child(site.home, site.beta, "inside") as inside,
    ):
        await outside.send(INIT)
        refused = await outside.read()
        assert refused["error"]["code"] == -32602 and OUTSIDE in refused["error"]["message"]
        await inside.initialize()
        saved = await inside.call_tool("remember", {"content": SECRET})
        assert saved["result"]["isError"] is False, saved
        status = (await inside.call_tool("server_status"))["result"]["structuredContent"]
        assert status["session"]["root"] == str(site.beta)
        with trio.fail_after(30):
            assert await inside.close() == 0


async def test_a_row_shared_with_a_repository_outside_the_grant_is_never_named(
    site: Site,
) -> None:
    async with serve_process(site.home, serve_args(site, "tcp"), FAST) as served:
        async with session(served, "tcp", site.tokens["default"]) as owner:
            assert "result" in await owner.initialize(str(site.beta))
            made = await owner.tool("create_entities", entities=[
                {"name": "Deploy", "entityType": "service", "observations": ["beta deploys"]}
            ])  # fmt: skip
            assert made["isError"] is False, made
        async with session(served, "tcp", site.tokens["alpha"]) as alpha:
            assert "result" in await alpha.initialize(str(site.alpha))
            for name, arguments in (
                ("search_nodes", {"query": "Deploy"}),
                ("open_nodes", {"names": ["Deploy"]}),
                ("read_graph", {}),
                ("graph_stats", {}),
            ):
                read = await alpha.tool(name, **arguments)
                assert "beta deploys" not in text_of(read) and "service" not in text_of(read)
            answers = [
                await alpha.tool(
                    "create_entities",
                    entities=[
                        {"name": "Deploy", "entityType": "pipeline", "observations": ["alpha"]}
                    ],
                ),  # fmt: skip
                await alpha.tool("delete_entities", entityNames=["Deploy"]),
                await alpha.tool("merge_entities", sources=["Deploy"], target="Release"),
            ]
        for answer in answers:
            assert "beta" not in text_of(answer), answer
        assert any("outside this session's grant" in text_of(a) for a in answers), answers
