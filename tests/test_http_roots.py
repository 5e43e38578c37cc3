"""Per-session repositories over Streamable HTTP: two sessions of one server, each with the
official SDK client declaring its own MCP roots, write and recall without seeing each other's
repository, and neither can write the other's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gitrepo import make_repo
from httpserve import serving
from mcp import Client, types
from memtrio.actors.store.domain.scopes import default_scope


def as_json(result: Any) -> dict[str, Any]:
    return json.loads(result.content[0].text)  # type: ignore[no-any-return]


def roots_of(path: Path) -> Any:
    async def list_roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=path.as_uri())])  # type: ignore[arg-type]

    return list_roots


async def test_two_http_sessions_with_different_roots_keep_their_repositories_apart(
    tmp_path: Path,
) -> None:
    repo_a = make_repo(tmp_path / "alpha", {"a.py": "x = 1\n"})
    repo_b = make_repo(tmp_path / "beta", {"b.py": "y = 2\n"})
    scope_a, scope_b = default_scope(repo_a), default_scope(repo_b)
    async with (
        serving(tmp_path) as served,
        Client(served.url, list_roots_callback=roots_of(repo_a)) as a,
        Client(served.url, list_roots_callback=roots_of(repo_b)) as b,
    ):
        assert as_json(await a.call_tool("list_scopes", {}))["current_scope"] == scope_a
        assert as_json(await b.call_tool("list_scopes", {}))["current_scope"] == scope_b
        wrote_a = as_json(await a.call_tool("remember", {"content": "alpha uses tabs for indents"}))
        wrote_b = as_json(
            await b.call_tool("remember", {"content": "beta uses spaces for indents"})
        )
        assert wrote_a["scopes"] == [scope_a] and wrote_b["scopes"] == [scope_b]
        shared = await a.call_tool(
            "remember", {"content": "every project indents consistently", "scopes": ["global"]}
        )
        assert not shared.is_error

        seen_a = json.dumps(as_json(await a.call_tool("recall", {"query": "indents"})))
        seen_b = json.dumps(as_json(await b.call_tool("recall", {"query": "indents"})))
        assert "alpha uses tabs" in seen_a and "beta uses spaces" not in seen_a
        assert "beta uses spaces" in seen_b and "alpha uses tabs" not in seen_b
        assert "indents consistently" in seen_a and "indents consistently" in seen_b

        refused = await a.call_tool(
            "remember", {"content": "sneaking into beta", "scopes": [f"repo:{repo_b}"]}
        )
        assert refused.is_error
        assert "may only write" in refused.content[0].text  # type: ignore[union-attr]
        forget = await a.call_tool("forget", {"id": wrote_b["id"], "scopes": [scope_b]})
        assert forget.is_error
        still = json.dumps(as_json(await b.call_tool("recall", {"query": "spaces"})))
        assert "beta uses spaces" in still
