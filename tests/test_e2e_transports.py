"""The end-to-end helper on every transport: the official client's session survives malformed
messages written on its own connection (a stdio line, an HTTP POST body, a TCP line, a
WebSocket frame), and each transport serves the session in its own repository."""

from __future__ import annotations

from pathlib import Path

from gitrepo import make_repo
from mcp_client import every_transport, ok, open_session
from memtrio.actors.store.domain.scopes import default_scope

pytestmark = [every_transport]  # the transports do not depend on the store

MALFORMED = [
    ('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {', -32700, None),
    ("\u00e9t\u00e9 is not JSON", -32700, None),
    ("[1, 2", -32700, None),
    ('{"jsonrpc": "2.0", "id": "raw-1", "method": 17}', -32600, "raw-1"),
    ('{"jsonrpc": "1.0", "id": "raw-2", "method": "ping"}', -32600, "raw-2"),
]


async def test_malformed_messages_are_answered_and_the_session_goes_on(
    home: Path, tmp_path: Path, transport: str
) -> None:
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    async with open_session(home, cwd=repo) as session:
        client = session.client
        before = await ok(client, "remember", content="written before the bad messages")
        for text, code, rid in MALFORMED:
            reply = await session.send_raw(text)
            assert reply["error"]["code"] == code and reply["id"] == rid, (text, reply)
            # The same session answers the next good request.
            assert (await ok(client, "stats"))["memories"] == 1
        after = await ok(client, "remember", content="written after the bad messages")
        found = await ok(client, "recall", query="written bad messages")
        assert {m["id"] for m in found["memories"]} == {before["id"], after["id"]}
        scopes = await ok(client, "list_scopes")
        assert scopes["current_scope"] == default_scope(repo), transport
        assert after["scopes"] == [default_scope(repo)]
