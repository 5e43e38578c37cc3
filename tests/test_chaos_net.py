"""The chaos harness's network clients and the per-connection fault point they rely on.

The HTTP client is HTTP/1.1 written on trio streams: its chunked and SSE
parsing is checked byte by byte, its duplicate-reply detection on a stream
that answers twice, and its drop-and-resume against the real Streamable HTTP
listener (in process).
"""

from __future__ import annotations

import json
from pathlib import Path

import trio
import trio.testing
from httpserve import serving
from memtrio.actors.chaos.netclient import HttpResponse, HttpSession
from memtrio.supervisors import faults


def chunked(body: bytes, size: int) -> bytes:
    """``body`` in HTTP/1.1 chunked encoding, ``size`` bytes a chunk."""
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


async def response_of(raw: bytes, headers: dict[str, str]) -> HttpResponse:
    """A response whose body arrives one byte at a time."""
    send, receive = trio.testing.memory_stream_one_way_pair()
    stream = trio.StapledStream(trio.testing.memory_stream_one_way_pair()[0], receive)

    async def feed() -> None:
        for i in range(len(raw)):
            await send.send_all(raw[i : i + 1])
        await send.aclose()

    trio.lowlevel.spawn_system_task(feed)
    return HttpResponse(200, headers, stream, bytearray())


SSE_HEADERS = {"content-type": "text/event-stream", "transfer-encoding": "chunked"}


async def test_sse_events_are_parsed_across_every_chunk_and_byte_boundary() -> None:
    reply = {"jsonrpc": "2.0", "id": 3, "result": {"text": "café ✓"}}
    body = (
        b"id: 1-1\r\nretry: 1000\r\ndata: \r\n\r\n"
        + f"id: 1-2\ndata: {json.dumps(reply, ensure_ascii=False)}\n\n".encode()
    )
    response = await response_of(chunked(body, 7), SSE_HEADERS)
    events = [(e.id, e.data) async for e in response.events()]
    assert events == [("1-1", ""), ("1-2", json.dumps(reply, ensure_ascii=False))]


async def test_a_reply_delivered_twice_is_a_violation() -> None:
    reply = json.dumps({"jsonrpc": "2.0", "id": 5, "result": {}})
    body = f"id: 2-1\ndata:\n\nid: 2-2\ndata: {reply}\n\nid: 2-2\ndata: {reply}\n\n".encode()
    session = HttpSession("http://127.0.0.1:9/mcp", "twice")
    response = await response_of(chunked(body, 5), SSE_HEADERS)
    assert await session._answer(response, 5) == json.loads(reply)
    assert any("answered 2 times" in v for v in session.violations)
    assert any("event id 2-2 delivered twice" in v for v in session.violations)


async def test_a_cut_post_stream_is_resumed_and_answered_once(tmp_path: Path) -> None:
    async with serving(tmp_path) as served:
        session = HttpSession(served.url, "resumer", drop=lambda: True, redrop=lambda: True)
        await session.initialize()
        for i in range(3):
            reply = await session.call_tool("remember", {"content": f"resumed write {i}"})
            assert isinstance(reply["result"]["structuredContent"]["id"], int)
        assert (session.resume.dropped, session.resume.redropped) == (3, 3)
        assert session.resume.resumed == 6 and not session.violations
        assert await session.delete() == 204


async def test_a_connection_scoped_fault_point_crashes_that_session_only(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path) as served:
        first = HttpSession(served.url, "first")
        second = HttpSession(served.url, "second")
        await first.initialize()
        await second.initialize()
        faults.configure("session.dispatch:http-1=raise")
        try:
            crashed = await first.request("ping")
            spared = await second.request("ping")
        finally:
            faults.configure(None)
        assert crashed["error"]["code"] == -32603
        assert "session.dispatch:http-1" in crashed["error"]["message"]
        assert spared == {"jsonrpc": "2.0", "id": 1, "result": {}}
        assert served.connections.failed == 0 and len(served.connections.live) == 2
