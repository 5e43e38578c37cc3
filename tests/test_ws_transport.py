"""``memtrio serve --transport ws`` end to end: a real server process, raw frame clients."""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any

import pytest
import trio
import trustme
from serve_helpers import FrameClient, initialize_line, serve_process, structured, ws_client
from trio_websocket import ConnectionRejected

WS = ["--transport", "ws", "--bind", "127.0.0.1:0"]


async def status_of(client: FrameClient) -> dict[str, Any]:
    result = await client.tool("server_status")
    assert result["isError"] is False, result
    status = structured(result)
    assert isinstance(status, dict)
    return status


async def rejection(url: str, **options: Any) -> ConnectionRejected:
    with pytest.raises(ConnectionRejected) as caught:
        async with ws_client(url, **options):
            pass
    return caught.value


def header(rejected: ConnectionRejected, name: bytes) -> bytes | None:
    return next((v for k, v in rejected.headers if k.lower() == name), None)


async def test_ws_session_negotiates_mcp_lists_tools_remembers_and_recalls(home: Path) -> None:
    async with serve_process(home, WS) as served:
        assert served.url.startswith("ws://127.0.0.1:")
        async with ws_client(served.url) as first, ws_client(served.url, subprotocols=()) as second:
            assert first.ws.subprotocol == "mcp"
            assert second.ws.subprotocol is None
            await first.initialize()
            tools = (await first.request("tools/list"))["result"]["tools"]
            assert {"remember", "recall", "server_status"} <= {t["name"] for t in tools}
            stored = await first.tool(
                "remember", content="ws sessions share one store", scopes=["global"]
            )
            assert stored["isError"] is False, stored
            await second.initialize()
            found = structured(
                await second.tool("recall", query="share one store", scopes=["global"])
            )
            status = await status_of(second)
    assert [m["content"] for m in found["memories"]] == ["ws sessions share one store"]
    # The public listener, then the attach endpoint of memtrio mcp children (docs/transports.md).
    assert status["transports"]["listeners"][0] == {"transport": "ws", "url": served.url}
    assert [r["transport"] for r in status["transports"]["listeners"]] == ["ws", "attach"]
    assert status["transports"]["connections"] == 2


async def test_bad_frames_are_answered_and_the_session_keeps_serving(home: Path) -> None:
    env = {"MEMTRIO_REQUEST_LIMIT": "4096"}
    async with serve_process(home, WS, env=env) as served, ws_client(served.url) as client:
        await client.initialize()
        await client.ws.send_message("this is not json")
        bad = await client.read()
        await client.ws.send_message(b'{"jsonrpc":"2.0","id":3,"method":"ping"}')
        binary = await client.read()
        await client.ws.send_message("   ")
        empty = await client.read()
        await client.ws.send_message(
            json.dumps({"jsonrpc": "2.0", "id": 4, "method": "ping", "pad": "x" * 6000})
        )
        oversized = await client.read()
        # A pretty-printed message (newlines as JSON whitespace) is one message.
        await client.ws.send_message(
            json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"}, indent=2)
        )
        pretty = await client.read()
        # A raw newline inside a string is still malformed JSON.
        await client.ws.send_message('{"jsonrpc":"2.0","id":6,"method":"pi\nng"}')
        raw_newline = await client.read()
        # Several answers in a row: one frame each (FrameClient.read checks one object a frame).
        for rid in range(10, 15):
            await client.send({"jsonrpc": "2.0", "id": rid, "method": "ping"})
        pongs = [await client.read() for _ in range(5)]
    for reply in (bad, binary, empty):
        assert reply["id"] is None and reply["error"]["code"] == -32700, reply
    assert "binary frame" in binary["error"]["message"]
    assert oversized["id"] == 4 and oversized["error"]["code"] == -32600
    assert pretty == {"jsonrpc": "2.0", "id": 5, "result": {}}
    assert raw_newline["error"]["code"] == -32700
    assert [p["id"] for p in pongs] == list(range(10, 15))


async def test_a_session_crash_on_one_ws_connection_leaves_the_other_serving(home: Path) -> None:
    env = {"MEMTRIO_FAULTS": "session.dispatch=raise@3"}
    async with (
        serve_process(home, WS, env=env) as served,
        ws_client(served.url) as a,
        ws_client(served.url) as b,
    ):
        await a.send(initialize_line())
        assert "result" in await a.read()
        await b.send(initialize_line())
        assert "result" in await b.read()
        assert (await a.request("ping"))["error"]["code"] == -32603
        assert (await b.request("ping"))["result"] == {}
        assert (await a.request("ping"))["result"] == {}
        status = await status_of(b)
    restarts = sorted(
        next(x["restarts"] for x in c["actors"] if x["id"].endswith(".session"))
        for c in status["transports"]["live"]
    )
    assert restarts == [0, 1]


async def test_ws_bearer_token_is_checked_at_the_handshake(home: Path) -> None:
    async with serve_process(home, [*WS, "--auth-token", "ws-token"]) as served:
        missing = await rejection(served.url)
        wrong = await rejection(served.url, token="nope")
        async with ws_client(served.url, token="ws-token") as client:
            assert "result" in await client.initialize()
    for rejected in (missing, wrong):
        assert rejected.status_code == 401
        assert header(rejected, b"www-authenticate") == b'Bearer realm="memtrio"'
    assert b"the token was wrong" in (wrong.body or b"")


async def test_ws_origin_and_connection_limit(home: Path) -> None:
    env = {"MEMTRIO_SERVE_MAX_CONNECTIONS": "1"}
    async with serve_process(home, WS, env=env) as served:
        foreign = await rejection(served.url, headers=[("Origin", "https://evil.example")])
        async with ws_client(served.url, headers=[("Origin", "http://localhost:3000")]) as client:
            await client.initialize()
            full = await rejection(served.url)
            assert (await client.request("ping"))["result"] == {}
    assert foreign.status_code == 403 and b"allowed_origins" in (foreign.body or b"")
    assert full.status_code == 503
    assert b"limit of 1 connection (" in (full.body or b"")


async def test_wss_with_a_certificate(home: Path, tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    args = [*WS, "--tls-cert", str(cert_file), "--tls-key", str(key_file)]
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    async with serve_process(home, args) as served:
        assert served.url.startswith("wss://127.0.0.1:")
        async with ws_client(served.url, ssl_context=client_context) as client:
            await client.initialize()
            assert (await client.request("ping"))["result"] == {}
        # A client that does not trust the certificate cannot connect.
        with trio.fail_after(10), pytest.raises(trio.BrokenResourceError) as caught:
            stream = await trio.open_ssl_over_tcp_stream(
                "127.0.0.1", served.port, ssl_context=ssl.create_default_context()
            )
            await stream.do_handshake()
    assert isinstance(caught.value.__cause__, ssl.SSLCertVerificationError)
