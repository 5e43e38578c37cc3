"""The dashboard's JSON API and static files (``actors.ui``), in process against the ASGI app.

Writes go through the tools' own handlers with the dashboard's session (its
repository as root), so a refusal is the tool's refusal; the token, the
origin rules (CSRF) and the static folder's confinement are checked here too.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import msgspec
import pytest
import trio
from gitrepo import make_repo
from mcp_client import run_cli, server_env
from memtrio.actors.session_state import SessionState
from memtrio.actors.store.domain.scopes import default_scope
from memtrio.actors.store.interfaces import StoreTx
from memtrio.actors.store.interfaces.anchors import Anchor
from memtrio.actors.store.tooling.services import store_of
from memtrio.actors.ui import api as api_mod
from memtrio.actors.ui.asgi import UiApp
from memtrio.actors.ui.guard import STATIC, Guard
from memtrio.protocol.errors import DomainError
from memtrio.supervisors import config as config_mod
from memtrio.supervisors.app import build_context, default_features, open_app
from memtrio.supervisors.context import AppContext, CallContext
from stores import raw

TOKEN = "test-token-123"
BASE = "http://127.0.0.1:8765"
SAME = {"origin": BASE, "x-memtrio-token": TOKEN}


@dataclass
class Dash:
    app: AppContext
    client: httpx2.AsyncClient
    ui: UiApp
    repo: Path
    other: Path

    def ctx(self, root: Path, source: str = "cwd") -> CallContext:
        return CallContext(self.app, SessionState(name="t", root=root, root_source=source))

    async def tool(self, name: str, root: Path | None = None, **arguments: Any) -> Any:
        """Call a tool as an MCP session in ``root`` (default: the dashboard's repository)."""
        tool = self.app.registry.get(name)
        assert tool is not None
        source = "cwd" if root is None else "initialize"
        args = msgspec.convert(arguments, tool.args)
        return msgspec.to_builtins(await tool.handler(self.ctx(root or self.repo, source), args))

    async def get(self, name: str, **params: Any) -> httpx2.Response:
        return await self.client.get(f"/api/{name}", params=params, headers=SAME)

    async def post(
        self, name: str, body: Any, headers: dict[str, str] | None = None
    ) -> httpx2.Response:
        return await self.client.post(f"/api/{name}", json=body, headers=headers or SAME)


@asynccontextmanager
async def dashboard(
    tmp_path: Path,
    static: Path = STATIC,
    files: dict[str, str | bytes] | None = None,
    env: dict[str, str] | None = None,
) -> AsyncIterator[Dash]:
    """The dashboard of a repository (``files`` in it: the code index runs, else it is off;
    ``env``: more configuration, as environment variables)."""
    repo = make_repo(tmp_path / "repo", {"README.md": "x\n", **(files or {})})
    other = make_repo(tmp_path / "other", {"README.md": "y\n"})
    home = tmp_path / "home"
    code = "on" if files else "off"
    cfg = config_mod.load(
        home, env={"MEMTRIO_EMBEDDINGS": "off", "MEMTRIO_CODE": code, **(env or {})}
    )
    app = build_context(cfg, home, repo)
    async with open_app(app, default_features()):
        ui = UiApp(app, Guard(TOKEN), static)
        transport = httpx2.ASGITransport(app=ui)
        async with httpx2.AsyncClient(transport=transport, base_url=BASE) as client:
            yield Dash(app, client, ui, repo, other)


async def seed(d: Dash) -> dict[str, int]:
    ids = {}
    for key, content, kind, importance in (
        ("queue", "Alpha uses Beta for its message queue", "decision", 0.9),
        ("lint", "Run ruff before every commit", "convention", 0.2),
        ("flaky", "The upload test is flaky on CI under load", "pitfall", 0.5),
    ):
        result = await d.tool(
            "remember", content=content, memory_type=kind, importance=importance,
            entities=["Alpha", "Beta"] if key == "queue" else [],
            relations=[{"source": "Alpha", "relation": "uses", "target": "Beta"}] if key == "queue" else [],
        )  # fmt: skip
        ids[key] = result["id"]
    return ids


async def test_list_search_filter_sort_page_and_show(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d:
        ids = await seed(d)
        everything = (await d.get("memories")).json()
        assert everything["total"] == 3
        assert [m["id"] for m in everything["memories"]] == sorted(ids.values(), reverse=True)
        found = (await d.get("memories", q="message queue")).json()
        assert [m["id"] for m in found["memories"]] == [ids["queue"]]
        assert found["ranking"] == "lexical" and found["memories"][0]["score"] > 0
        assert [m["id"] for m in (await d.get("memories", type="PITFALL")).json()["memories"]] == [
            ids["flaky"]
        ]
        strong = (
            await d.get("memories", min_importance="0.5", sort="importance", order="asc")
        ).json()
        assert [m["id"] for m in strong["memories"]] == [ids["flaky"], ids["queue"]]
        page = (await d.get("memories", sort="id", order="asc", limit=1, offset=1)).json()
        assert [m["id"] for m in page["memories"]] == [ids["lint"]] and page["total"] == 3
        assert (await d.get("memories", since="2999-01-01")).json()["total"] == 0
        await d.tool("recall", query="message queue")
        shown = (await d.get("memory", id=ids["queue"])).json()
        assert [e["name"] for e in shown["entities"]] == ["Alpha", "Beta"]
        assert shown["relations"][0]["relation"] == "uses"
        assert (
            shown["history"][0]["kind"] == "recall"
            and shown["history"][0]["query"] == "message queue"
        )
        assert shown["writable"] is True
        # Looking at a memory on the dashboard is not an access: recall's ranking is untouched.
        again = (await d.get("memory", id=ids["queue"])).json()
        assert again["access_count"] == shown["access_count"] == 1


async def test_recall_page_ranks_lexically_within_the_repositorys_scopes(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d:
        ids = await seed(d)
        await d.tool("remember", root=d.other, content="another repository's message queue")
        shown = (await d.get("recall", q="message queue", type="DECISION")).json()
        lexical = shown["modes"]["lexical"]
        assert lexical["ranking"] == "lexical"
        assert [m["id"] for m in lexical["memories"]] == [ids["queue"]]
        assert lexical["memories"][0]["score"] > 0


async def test_edit_and_forget_change_what_the_tools_see(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d:
        ids = await seed(d)
        edited = await d.post(
            "update",
            {
                "id": ids["lint"],
                "content": "Run ruff and mypy before every push",
                "importance": 0.7,
            },
        )
        assert edited.status_code == 200, edited.text
        assert sorted(edited.json()["changed"]) == ["content", "importance"]
        recalled = await d.tool("recall", query="mypy push", use_embeddings=False)
        assert [m["id"] for m in recalled["memories"]] == [ids["lint"]]
        assert recalled["memories"][0]["importance"] == 0.7
        gone = await d.post("forget", {"id": ids["lint"]})
        assert gone.status_code == 200 and gone.json()["forgotten"] is True
        assert (await d.get("memory", id=ids["lint"])).status_code == 404
        assert (await d.tool("recall", query="mypy push", use_embeddings=False))["memories"] == []
        bad = await d.post("update", {"id": ids["queue"], "importance": 3})
        assert bad.status_code == 400 and "importance" in bad.json()["error"]


@pytest.mark.parametrize("mode", ["refuse", "redact"])
async def test_an_edit_holding_a_secret_is_screened_as_the_tool_screens_it(
    tmp_path: Path, mode: str
) -> None:
    """Issue 37 item 6: the dashboard's edits go through the same screen as the tools."""
    token = "ghp_" + "Zq7Lk2Pw9Xc4Vb1Nm8Rt5Yh3Jd6Fs0Ga2Ke9"
    async with dashboard(tmp_path, env={"MEMTRIO_SECRETS": mode}) as d:
        ids = await seed(d)
        edited = await d.post("update", {"id": ids["lint"], "content": f"CI token {token}"})
        shown = await d.get("memory", id=ids["lint"])
        assert token not in edited.text and token not in shown.text
        if mode == "refuse":
            assert edited.status_code == 400, edited.text
            assert "content: github-token `ghp_...`" in edited.json()["error"]
            assert shown.json()["content"] == "Run ruff before every commit"
        else:
            assert edited.status_code == 200, edited.text
            assert "by [REDACTED:github-token]" in " ".join(edited.json()["warnings"])
            assert shown.json()["content"] == "CI token [REDACTED:github-token]"


async def test_export_of_a_selection(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d:
        ids = await seed(d)
        reply = await d.post("export", {"ids": [ids["queue"], ids["flaky"], 999]})
        assert reply.status_code == 200
        exported = reply.json()["memories"]
        assert [m["id"] for m in exported] == [ids["queue"], ids["flaky"]]
        assert exported[0]["relations"][0]["target"] == "Beta"


async def _tool_refusal(d: Dash, name: str, **arguments: Any) -> str:
    with pytest.raises(DomainError) as caught:
        await d.tool(name, **arguments)
    return str(caught.value)


async def test_a_dashboard_export_of_ids_out_of_range_is_refused_not_a_crash(
    tmp_path: Path,
) -> None:
    async with dashboard(tmp_path) as d:
        ids = await seed(d)
        for bad in ([2**70], [2**63], [0], [-1], [True], [1.5], "1"):
            refused = await d.post("export", {"ids": bad})
            assert refused.status_code == 400, (bad, refused.text)
            assert "`ids` must be a list of memory ids" in refused.json()["error"]
        too_many = await d.post("export", {"ids": list(range(1, 1002))})
        assert too_many.status_code == 400 and "at most 1,000" in too_many.json()["error"]
        fine = await d.post("export", {"ids": [ids["queue"], 2**63 - 1]})
        assert [m["id"] for m in fine.json()["memories"]] == [ids["queue"]]
        assert "history" not in fine.json()["memories"][0]


async def test_another_repositorys_memory_is_refused_exactly_as_the_tool_refuses(
    tmp_path: Path,
) -> None:
    async with dashboard(tmp_path) as d:
        theirs = (await d.tool("remember", root=d.other, content="Other repo secret"))["id"]
        shared = (
            await d.tool(
                "remember",
                root=d.other,
                content="Shared note",
                scopes=[f"repo:{d.other}", "global"],
            )
        )["id"]
        other_scope = (await d.tool("stats", root=d.other))["current_scope"]
        cases = [
            ("update", {"id": theirs, "content": "overwritten"}, 404),
            ("update", {"id": theirs, "content": "overwritten", "scopes": [other_scope]}, 403),
            ("forget", {"id": theirs, "scopes": [other_scope]}, 403),
            ("update", {"id": shared, "importance": 1.0}, 403),
            ("forget", {"id": shared}, 403),
        ]
        for name, body, status in cases:
            expected = await _tool_refusal(d, name, **body)
            reply = await d.post(name, body)
            assert (reply.status_code, reply.json()["error"]) == (status, expected), (name, body)
        # Nothing changed; reading another repository is allowed, as recall allows it.
        shown = (await d.get("memory", id=theirs, scopes=other_scope)).json()
        assert shown["content"] == "Other repo secret" and shown["writable"] is False
        assert (await d.get("memory", id=shared)).json()["content"] == "Shared note"


async def test_cross_origin_writes_are_refused(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d:
        ids = await seed(d)
        body = {"id": ids["queue"], "content": "forged"}
        forged = [
            ({"origin": "http://evil.example", "x-memtrio-token": TOKEN}, 403),
            ({"origin": "http://127.0.0.1:9999", "x-memtrio-token": TOKEN}, 403),
            ({"sec-fetch-site": "cross-site", "x-memtrio-token": TOKEN}, 403),
            ({"origin": BASE, "sec-fetch-site": "same-site", "x-memtrio-token": TOKEN}, 403),
            ({"x-memtrio-token": TOKEN}, 403),  # no proof of origin at all
        ]
        for headers, status in forged:
            reply = await d.post("update", body, headers)
            assert reply.status_code == status, (headers, reply.text)
        as_form = await d.client.post(
            "/api/update", content=b'{"id": 1, "content": "forged"}',
            headers={**SAME, "content-type": "text/plain"},
        )  # fmt: skip
        assert as_form.status_code == 415
        foreign_read = await d.client.get(
            "/api/memories", headers={"origin": "http://evil.example", "x-memtrio-token": TOKEN}
        )
        assert foreign_read.status_code == 403
        rebound = await d.client.get(
            "/api/memories", headers={"host": "evil.example:8765", "x-memtrio-token": TOKEN}
        )
        assert rebound.status_code == 403
        assert (await d.get("memory", id=ids["queue"])).json()["content"].startswith("Alpha uses")
        ok = await d.post(
            "update", body, {"sec-fetch-site": "same-origin", "x-memtrio-token": TOKEN}
        )
        assert ok.status_code == 200


async def test_every_api_call_needs_the_token(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d:
        ids = await seed(d)
        for headers in ({}, {"x-memtrio-token": "wrong"}, {"authorization": "Basic " + TOKEN}):
            got = await d.client.get("/api/memories", headers={"origin": BASE, **headers})
            assert got.status_code == 401, headers
            wrote = await d.client.post(
                "/api/forget", json={"id": ids["queue"]}, headers={"origin": BASE, **headers}
            )
            assert wrote.status_code == 401, headers
        assert (await d.get("memory", id=ids["queue"])).status_code == 200
        bearer = await d.client.get("/api/memories", headers={"authorization": f"Bearer {TOKEN}"})
        assert bearer.status_code == 200 and bearer.json()["total"] == 3
        assert (await d.client.get("/api/nope", headers=SAME)).status_code == 404
        assert (await d.client.get("/api/update", headers=SAME)).status_code == 405


async def asgi_get(
    ui: UiApp, path: str, raw: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    """GET with an exact ASGI path (no client-side normalisation of ``..`` or escapes)."""
    sent: list[dict[str, Any]] = []
    scope = {
        "type": "http", "method": "GET", "path": path, "raw_path": raw or path.encode(),
        "query_string": b"", "headers": [(b"host", b"127.0.0.1:8765")], "scheme": "http",
        "client": ("127.0.0.1", 5000),
    }  # fmt: skip

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await ui(scope, receive, send)
    headers = {k.decode(): v.decode() for k, v in sent[0]["headers"]}
    return sent[0]["status"], headers, b"".join(m.get("body", b"") for m in sent[1:])


TRAVERSALS = [
    "/../secret.html",
    "/../../../../../../../etc/passwd",
    "/./../secret.html",
    "/css/../../secret.html",
    "/..%2fsecret.html",  # an escape a client left undecoded
    "/%2e%2e/secret.html",
    "/%252e%252e/secret.html",  # double encoding, once decoded by the server
    "/..\\secret.html",
    "/..%5csecret.html",
    "//tmp/secret.html",
    "/link/secret.html",  # a symbolic link inside the folder pointing outside
    "/linked.html",
    "/index.html\x00.js",
    "/C:/secret.html",
    "/~root/secret.html",
]


async def test_static_paths_never_leave_the_static_folder(tmp_path: Path) -> None:
    static = tmp_path / "static"
    static.mkdir()
    (static / "index.html").write_text("<p>dashboard</p>")
    (tmp_path / "secret.html").write_text("SECRET")
    (static / "link").symlink_to(tmp_path)
    (static / "linked.html").symlink_to(tmp_path / "secret.html")
    async with dashboard(tmp_path, static) as d:
        for path in TRAVERSALS:
            status, _, body = await asgi_get(d.ui, path)
            assert status == 404 and b"SECRET" not in body, path
            # The same path as an HTTP client sends it (escapes decoded by the ASGI server).
            reply = await d.client.get(path.replace("\x00", "%00"))
            assert reply.status_code in (404, 400) and "SECRET" not in reply.text, path
        status, headers, body = await asgi_get(d.ui, "/")
        assert (status, body) == (200, b"<p>dashboard</p>")
        assert (await asgi_get(d.ui, "/nothing.html"))[0] == 404
        assert (await asgi_get(d.ui, "/index.py"))[0] == 404


async def test_content_types_and_security_headers(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d:
        expected = {
            "/": "text/html; charset=utf-8",
            "/app.js": "text/javascript; charset=utf-8",
            "/memories.js": "text/javascript; charset=utf-8",
            "/app.css": "text/css; charset=utf-8",
            "/favicon.svg": "image/svg+xml",
        }
        for path, kind in expected.items():
            reply = await d.client.get(path)
            assert reply.status_code == 200 and reply.headers["content-type"] == kind, path
            assert "script-src 'self'" in reply.headers["content-security-policy"]
            assert reply.headers["x-content-type-options"] == "nosniff"
        api = await d.get("overview")
        assert api.headers["content-type"] == "application/json"
        assert api.headers["cache-control"] == "no-store"
        assert "default-src 'none'" in api.headers["content-security-policy"]
        assert api.json()["current_scope"] == f"repo:{d.repo}/.git"
        # Nothing the page loads comes from elsewhere (it must work offline).
        for page in STATIC.iterdir():
            text = page.read_text()
            assert not re.search(r"(src|href)=\"(https?:)?//", text), page.name
            assert "import(" not in text and not re.search(r"from \"https?:", text), page.name


def test_the_static_files_ship_in_the_package() -> None:
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    data = msgspec.toml.decode(pyproject)["tool"]["setuptools"]
    assert "memtrio.actors.ui.static" in data["packages"]
    patterns = data["package-data"]["memtrio.actors.ui.static"]
    suffixes = {p.rsplit(".", 1)[1] for p in patterns}
    assert {f.suffix[1:] for f in STATIC.iterdir()} <= suffixes


async def test_memtrio_ui_prints_its_url_and_serves_the_repository(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "x\n"})
    home = tmp_path / "home"
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "memtrio.supervisors.cli", "ui", "--home", str(home)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env=server_env(home, {"MEMTRIO_CODE": "off"}), cwd=str(repo),
    )  # fmt: skip
    try:
        assert process.stderr is not None
        line = b""
        with trio.fail_after(30):
            while b"\n" not in line:
                chunk = await process.stderr.receive_some(4096)
                assert chunk, line
                line += chunk
        found = re.match(r"memtrio ui: (http://127\.0\.0\.1:\d+)/\?token=(\S+)\n", line.decode())
        assert found, line
        async with httpx2.AsyncClient(base_url=found[1]) as client:
            assert (await client.get("/")).headers["content-type"].startswith("text/html")
            assert (await client.get("/api/overview")).status_code == 401
            info = await client.get("/api/overview", headers={"x-memtrio-token": found[2]})
            assert info.json()["current_scope"] == f"repo:{repo}/.git"
    finally:
        process.terminate()
        with trio.fail_after(30):
            assert await process.wait() == 0


def test_memtrio_ui_refuses_a_public_address_without_a_token(tmp_path: Path) -> None:
    done = run_cli("ui", "--bind", "0.0.0.0:0", home=tmp_path / "home", cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    assert "without a token" in done.stderr and len(done.stderr.strip().splitlines()) == 1


async def test_graph_opens_on_the_most_connected_entities_this_repository_sees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api_mod, "GRAPH_ENTITIES", 3, raising=False)
    async with dashboard(tmp_path) as d:
        await d.tool("create_entities", entities=[
            {"name": n, "entityType": "service", "observations": []}
            for n in ("Hub", "Left", "Right", "Lonely", "Far")
        ])  # fmt: skip
        await d.tool("create_relations", relations=[
            {"from": "Hub", "relationType": "calls", "to": "Left"},
            {"from": "Hub", "relationType": "calls", "to": "Right"},
            {"from": "Left", "relationType": "calls", "to": "Right"},
            {"from": "Far", "relationType": "calls", "to": "Lonely"},
            {"from": "Far", "relationType": "calls", "to": "Hub"},
        ])  # fmt: skip
        await d.tool("create_entities", root=d.other, entities=[
            {"name": n, "entityType": "service", "observations": []} for n in ("Secret", "Vault")
        ])  # fmt: skip
        await d.tool("create_relations", root=d.other, relations=[
            {"from": "Secret", "relationType": t, "to": "Vault"} for t in ("reads", "writes", "owns")
        ])  # fmt: skip
        for entity in ("", "   "):  # an empty entity field: the overview, never an error
            reply = await d.get("graph", entity=entity)
            assert reply.status_code == 200, reply.text
            found = reply.json()
            assert found["overview"] and found["total"] == 5 and found["truncated"]
            assert [(e["name"], e["degree"]) for e in found["entities"]] == [
                ("Hub", 3),
                ("Left", 2),
                ("Right", 2),
            ]  # another repository's relations neither show nor count
            assert sorted((r["from"], r["to"]) for r in found["relations"]) == [
                ("Hub", "Left"), ("Hub", "Right"), ("Left", "Right")
            ]  # fmt: skip
        for q in ("", "  ", "---", "?!"):  # no words to search: the most connected names
            names = await d.get("entities", q=q)
            assert names.status_code == 200 and names.json()["entities"][:3] == [
                "Hub",
                "Left",
                "Right",
            ], (q, names.text)
            assert "Secret" not in names.json()["entities"]
        assert (await d.get("entities", q="lone")).json()["entities"] == ["Lonely"]
        assert (await d.get("graph", entity="nope")).status_code == 404


async def test_memories_list_the_entity_each_is_about(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d:
        ids = await seed(d)
        await d.tool("add_observations", observations=[
            {"entityName": "Beta", "contents": ["a queue broker"]}
        ])  # fmt: skip
        rows = {m["content"]: m for m in (await d.get("memories")).json()["memories"]}
        assert [e["name"] for e in rows["a queue broker"]["entities"]] == ["Beta"]
        assert [e["name"] for e in rows["Alpha uses Beta for its message queue"]["entities"]] == [
            "Alpha",
            "Beta",
        ]
        assert rows["Run ruff before every commit"]["entities"] == []
        found = (await d.get("memories", q="queue")).json()
        assert {m["id"] for m in found["memories"]} >= {ids["queue"]} and found["cut"] is None
        # A semantic search lists what recall returns (here its lexical fallback): its best
        # `limit`, whatever the page's size.
        semantic = (await d.get("memories", q="queue", mode="semantic", limit=200)).json()
        assert semantic["cut"] == api_mod.RecallArgs(query="").limit == 10


async def test_recent_recalls_leave_out_another_repositorys(tmp_path: Path) -> None:
    async with dashboard(tmp_path) as d:
        await seed(d)
        await d.tool("recall", query="message queue")
        await d.tool("recall", query="their private plans", root=d.other)
        await d.tool("recall", query="message queue")  # listed once
        await d.tool("recall", query="ruff commit")
        await d.tool("inspect", id=1)  # not a recall
        found = (await d.get("recent")).json()["queries"]
        assert [(q["query"], q["memories"]) for q in found] == [
            ("ruff commit", 1), ("message queue", 1)
        ]  # fmt: skip


async def test_a_memory_page_survives_recall_log_lines_of_another_shape(tmp_path: Path) -> None:
    # The recall log's JSON texts come from imports too (any text): a line whose ids are not
    # a list, or whose scores are not one, is skipped, never a crash of the memory page.
    async with dashboard(tmp_path) as d:
        ids = await seed(d)
        mid = ids["queue"]
        await d.tool("recall", query="message queue")
        odd = [("5", "[1.0]"), (f"[{mid}]", '{"a": 1}'), ('{"x": 1}', "2"), ("null", "null")]
        from memtrio.actors.store.tooling.services import store_of

        await store_of(d.app).write(
            raw(
                lambda c: c.executemany(
                    "INSERT INTO recall_log (ts, kind, query, scopes, ids, scores) "
                    "VALUES (1e9, 'recall', 'odd', '[\"global\"]', ?, ?)",
                    odd,
                )
            )
        )
        shown = await d.get("memory", id=mid)
        assert shown.status_code == 200, shown.text
        assert [h["query"] for h in shown.json()["history"]] == ["message queue"]
        assert (await d.get("recent")).status_code == 200


CODE_FILES: dict[str, str | bytes] = {
    "app/fine.py": "def fine():\n    pass\n\n\nclass Box:\n    def fine(self):\n        pass\n",
    "we\x01ird.py": "def fine_too():\n    pass\n",
}


async def test_code_symbols_and_outlines_are_rows(tmp_path: Path) -> None:
    async with dashboard(tmp_path, files=CODE_FILES) as d:
        status = (await d.get("code", refresh="1")).json()
        assert status["enabled"] and status["root"] == str(d.repo)
        [checkout] = status["checkouts"]
        assert checkout["indexed_files"] == 2 and checkout["languages"] == {"python": 2}
        found = (await d.get("symbols", q="fine")).json()
        assert [(m["path"], m["quoted"], m["start"], m["kind"], m["name"], m["parent"])
                for m in found["matches"]] == [
            ("app/fine.py", False, 1, "function", "fine", None),
            ("app/fine.py", False, 6, "method", "fine", "Box"),
            ('"we\\x01ird.py"', True, 1, "function", "fine_too", None),
        ]  # fmt: skip
        assert found["total"] == 3 and found["truncated"] is None
        outline = (await d.get("outline", path="app/fine.py")).json()
        assert (outline["path"], outline["language"], outline["total"]) == (
            "app/fine.py",
            "python",
            3,
        )
        assert [(s["start"], s["end"], s["depth"], s["kind"], s["name"]) for s in outline["symbols"]] == [
            (1, 2, 0, "function", "fine"), (5, 7, 0, "class", "Box"), (6, 7, 1, "method", "fine")
        ]  # fmt: skip
        # The tools' rules and messages: a path leaving the checkout, a missing file, no name.
        for path, status_code in (("../other/README.md", 403), ("nope.py", 404), ("", 400)):
            reply = await d.get("outline", path=path)
            assert reply.status_code == status_code, (path, reply.text)
            with pytest.raises(DomainError) as refused:
                await d.tool("code_outline", path=path)
            assert reply.json()["error"] == str(refused.value) or path == ""
        missing = await d.get("symbols", q="  ")
        assert missing.status_code == 400 and "`q`" in missing.json()["error"]


RETRY = (
    "class RetryPolicy:\n"
    "    def backoff(self, attempt):\n"
    "        return min(30, 2 ** attempt)\n"
    "\n"
    "    def jitter(self):\n"
    "        return 0\n"
)
HELPERS = "def helper_one():\n    return 1\n"


async def test_the_stale_filter_lists_only_this_repositorys_stale_memories_with_statuses(
    tmp_path: Path,
) -> None:
    async with dashboard(tmp_path, files={"retry.py": RETRY, "helpers.py": HELPERS}) as d:
        fresh = (
            await d.tool(
                "remember", content="helper_one returns 1",
                code=[{"path": "helpers.py", "symbol": "helper_one"}],
            )
        )["id"]  # fmt: skip
        changed = (
            await d.tool(
                "remember", content="The retry delay doubles, capped at 30 s",
                code=[{"path": "retry.py", "symbol": "RetryPolicy.backoff"}],
            )
        )["id"]  # fmt: skip
        gone = (
            await d.tool(
                "remember", content="jitter is a stub",
                code=[{"path": "retry.py", "symbol": "RetryPolicy.jitter"}],
            )
        )["id"]  # fmt: skip
        plain = (await d.tool("remember", content="Run ruff before every commit", code=[]))["id"]
        # Another repository's memory anchored to a path of this checkout with another
        # digest: were it checked here, it would be `changed`; it is not this repository's.
        theirs_scope = default_scope(d.other)

        def theirs_op(tx: StoreTx) -> int:
            mid = tx.memories.insert(
                "their retry backoff", "note", 0.5, 1000.0, [tx.scopes.ensure(theirs_scope)]
            )
            tx.anchors.set(
                mid, [Anchor("retry.py", "RetryPolicy.backoff", "method", "", "other", 1000.0)]
            )
            return mid

        theirs = await store_of(d.app).write(theirs_op, name="test.theirs")
        assert (await d.get("memories", stale="1")).json()["memories"] == []

        (d.repo / "retry.py").write_text(
            RETRY.replace("min(30, 2 ** attempt)", "min(60, 3 ** attempt)").replace(
                "\n    def jitter(self):\n        return 0\n", ""
            )
        )
        only = (await d.get("memories", stale="1")).json()
        assert [m["id"] for m in only["memories"]] == [gone, changed], only
        assert only["total"] == 2 and all(m["stale"] for m in only["memories"])
        assert [(m["id"], [a["status"] for a in m["code"]]) for m in only["memories"]] == [
            (gone, ["deleted"]),
            (changed, ["changed"]),
        ]
        # With a search, the filter keeps the stale matches only.
        searched = (await d.get("memories", stale="1", q="retry delay")).json()
        assert [m["id"] for m in searched["memories"]] == [changed], searched
        # Unfiltered, every memory of the repository, each anchored one with its status.
        listed = {m["id"]: m for m in (await d.get("memories")).json()["memories"]}
        assert set(listed) == {fresh, changed, gone, plain}, listed
        assert listed[fresh]["stale"] is False and listed[fresh]["code"][0]["status"] == "fresh"
        assert "code" not in listed[plain] and "stale" not in listed[plain]
        # The other repository's memory, read there, is not checked against this checkout.
        elsewhere = (await d.get("memories", stale="1", scopes=theirs_scope)).json()
        assert elsewhere["memories"] == [], elsewhere

        # The memory view carries each anchor: where, since when, its status.
        view = (await d.get("memory", id=changed)).json()
        assert view["stale"] is True
        [anchor] = view["code"]
        assert (anchor["path"], anchor["symbol"], anchor["kind"], anchor["status"]) == (
            "retry.py",
            "RetryPolicy.backoff",
            "method",
            "changed",
        )
        assert anchor["since"] and len(anchor["commit"]) == 40
        assert (await d.get("memory", id=fresh)).json()["stale"] is False
        shown = (await d.get("memory", id=theirs, scopes=theirs_scope)).json()
        assert "code" not in shown and "stale" not in shown, shown
