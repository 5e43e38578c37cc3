"""``memtrio serve --transport tcp`` end to end: a real server process, raw line clients."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
import trio
import waits
from raw_server import wait_for_event
from serve_helpers import LineClient, initialize_line, serve_process, structured, tcp_client

TCP = ["--transport", "tcp", "--bind", "127.0.0.1:0"]


async def status_of(client: LineClient) -> dict[str, Any]:
    result = await client.tool("server_status")
    assert result["isError"] is False, result
    status = structured(result)
    assert isinstance(status, dict)
    return status


async def wait_for_connections(client: LineClient, count: int, timeout: float = 15.0) -> None:
    """Poll ``server_status`` (through ``client``) until ``count`` connections are live."""

    async def live() -> bool:
        return (await status_of(client))["transports"]["connections"] == count

    await waits.until(live, timeout)


async def test_tcp_session_lists_tools_remembers_and_another_session_recalls(home: Path) -> None:
    async with serve_process(home, TCP) as served:
        assert served.url.startswith("tcp://127.0.0.1:")
        async with tcp_client(served.port) as first, tcp_client(served.port) as second:
            init = await first.initialize()
            assert init["result"]["serverInfo"]["name"] == "memtrio"
            tools = (await first.request("tools/list"))["result"]["tools"]
            assert {"remember", "recall", "server_status"} <= {t["name"] for t in tools}
            stored = await first.tool(
                "remember", content="the deploy key lives in vault", scopes=["global"]
            )
            assert stored["isError"] is False, stored
            await second.initialize()
            found = structured(await second.tool("recall", query="deploy key", scopes=["global"]))
            status = await status_of(second)
    assert [m["content"] for m in found["memories"]] == ["the deploy key lives in vault"]
    assert status["pid"] == served.pid
    transports = status["transports"]
    # The public listener, and the attach endpoint of memtrio mcp children (docs/transports.md).
    assert transports["listeners"][0] == {"transport": "tcp", "url": served.url}
    assert [r["transport"] for r in transports["listeners"]] == ["tcp", "attach"]
    assert transports["connections"] == 2 and transports["accepted"] == 2
    assert {c["transport"] for c in transports["live"]} == {"tcp"}
    assert len([line for line in served.stderr if "listening on" in line]) == 1


async def test_tcp_bad_lines_are_answered_and_the_session_keeps_serving(home: Path) -> None:
    async with (
        serve_process(home, TCP, env={"MEMTRIO_REQUEST_LIMIT": "4096"}) as served,
        tcp_client(served.port) as client,
    ):
        await client.initialize()
        await client.send_bytes(b"this is not json\n")
        bad = await client.read()
        await client.send_bytes(b'{"jsonrpc":"2.0","id":7,"method":"ping","pad":"' + b"x" * 8000)
        await client.send_bytes(b'"}\n')
        oversized = await client.read()
        await client.send_bytes(b'{"jsonrpc": "2.0", "id": 8, "method": "pi\n')
        truncated = await client.read()
        pong = await client.request("ping")
    assert bad["error"]["code"] == -32700 and bad["id"] is None
    assert oversized["error"]["code"] == -32600 and oversized["id"] == 7
    assert "request_limit" in oversized["error"]["message"]
    assert truncated["error"]["code"] == -32700
    assert pong["result"] == {}


async def test_a_session_crash_on_one_connection_leaves_the_other_serving(home: Path) -> None:
    # The third dispatch of the process crashes the session that makes it (connection a).
    env = {"MEMTRIO_FAULTS": "session.dispatch=raise@3"}
    async with (
        serve_process(home, TCP, env=env) as served,
        tcp_client(served.port) as a,
        tcp_client(served.port) as b,
    ):
        await a.send(_init(0))
        assert "result" in await a.read()
        await b.send(_init(0))
        assert "result" in await b.read()
        crashed = await a.request("ping")
        assert crashed["error"]["code"] == -32603
        assert (await b.request("ping"))["result"] == {}
        assert (await a.request("ping"))["result"] == {}  # a's session was restarted
        status = await status_of(b)
    restarts = {c["id"]: _session_restarts(c) for c in status["transports"]["live"]}
    assert sorted(restarts.values()) == [0, 1]
    assert status["transports"]["failed"] == 0


def _init(rid: int) -> dict[str, Any]:
    return {**initialize_line(), "id": rid}


def _session_restarts(conn: dict[str, Any]) -> int:
    session = next(a for a in conn["actors"] if a["id"].endswith(".session"))
    return int(session["restarts"])


async def test_a_connection_over_the_limit_gets_one_error_line(home: Path) -> None:
    env = {"MEMTRIO_SERVE_MAX_CONNECTIONS": "2"}
    async with serve_process(home, TCP, env=env) as served:
        async with tcp_client(served.port) as a, tcp_client(served.port) as b:
            await a.initialize()
            await b.initialize()
            async with tcp_client(served.port) as third:
                refusal = await third.read()
                try:
                    await third.read_line(timeout=5)
                    raise AssertionError("the refused connection stayed open")
                except EOFError:
                    pass
            assert (await a.request("ping"))["result"] == {}
        # Both closed: a new connection is served again.

        async def served_again() -> bool:
            async with tcp_client(served.port) as again:
                await again.send(_init(0))
                return "result" in await again.read()

        await waits.until(served_again, 15)
    assert refusal["id"] is None and refusal["error"]["code"] == -32000
    message = refusal["error"]["message"]
    assert "limit of 2 connections" in message and "[serve] max_connections" in message


async def test_ten_concurrent_tcp_sessions_each_get_their_own_answers(home: Path) -> None:
    async with serve_process(home, TCP) as served:
        found: dict[int, list[str]] = {}
        everyone_in = trio.Event()
        opened = 0
        seen_open: list[int] = []

        async def agent(n: int) -> None:
            nonlocal opened
            async with tcp_client(served.port) as client:
                await client.initialize()
                opened += 1
                if opened == 10:
                    everyone_in.set()
                await everyone_in.wait()
                text = f"agent {n} prefers tabs-{n}x"
                stored = await client.tool("remember", content=text, scopes=["global"])
                assert stored["isError"] is False, stored
                hits = structured(
                    await client.tool("recall", query=f"tabs-{n}x", scopes=["global"])
                )
                found[n] = [m["content"] for m in hits["memories"]]
                seen_open.append((await status_of(client))["transports"]["connections"])

        async with trio.open_nursery() as nursery:
            for n in range(10):
                nursery.start_soon(agent, n)
    assert sorted(found) == list(range(10))
    for n, contents in found.items():
        assert contents[0] == f"agent {n} prefers tabs-{n}x"
    assert max(seen_open) == 10


async def test_a_peer_vanishing_mid_call_ends_its_session_only(home: Path) -> None:
    env = {"MEMTRIO_FAULTS": "tool.call=hang@1", "MEMTRIO_SERVER_SHUTDOWN_GRACE": "0.5"}
    async with serve_process(home, TCP, env=env) as served:
        async with tcp_client(served.port) as other:
            await other.initialize()
            async with tcp_client(served.port) as leaving:
                await leaving.initialize()
                await leaving.send(
                    {
                        "jsonrpc": "2.0",
                        "id": 5,
                        "method": "tools/call",
                        "params": {"name": "server_status", "arguments": {}},
                    }
                )
                await wait_for_event(home, "fault_injected", point="tool.call", action="hang")
            # `leaving` is gone with its call still running: the other session serves on.
            assert (await other.request("ping"))["result"] == {}
            await wait_for_connections(other, 1)
            status = await status_of(other)
        assert served.process.returncode is None
        served.process.send_signal(signal.SIGTERM)
        assert await served.wait() == 0
    assert status["transports"]["failed"] == 0
    assert status["transports"]["accepted"] == 2


async def test_sigterm_during_a_call_delivers_its_answer_then_exits_0(home: Path) -> None:
    env = {"MEMTRIO_FAULTS": "tool.call=delay:1"}
    async with serve_process(home, TCP, env=env) as served, tcp_client(served.port) as client:
        await client.initialize()
        await client.send(
            {
                "jsonrpc": "2.0",
                "id": 9,
                "method": "tools/call",
                "params": {"name": "server_status", "arguments": {}},
            }
        )
        await wait_for_event(home, "fault_injected", point="tool.call")
        served.process.send_signal(signal.SIGTERM)
        reply = await client.read()
        assert await served.wait() == 0
    assert reply["id"] == 9 and reply["result"]["isError"] is False


async def test_tcp_token_first_line(home: Path) -> None:
    args = [*TCP, "--auth-token", "s3cret-token"]
    async with serve_process(home, args) as served:
        async with tcp_client(served.port) as anonymous:
            await anonymous.send(_init(0))  # no token: this line is taken for it
            wrong_line = await anonymous.read()
        async with tcp_client(served.port, token="not-it") as wrong:
            await wrong.send(_init(0))
            wrong_token = await wrong.read()
        async with tcp_client(served.port) as silent:
            await silent.stream.send_eof()
            missing = await silent.read()
        async with tcp_client(served.port, token="s3cret-token") as bearer:
            assert "result" in await bearer.initialize()
        async with tcp_client(served.port) as bare:
            await bare.send_bytes(b"s3cret-token\n" + _line(_init(0)))  # in one segment
            assert "result" in await bare.read()
            assert (await bare.request("ping"))["result"] == {}
    for refusal in (wrong_line, wrong_token, missing):
        assert refusal["id"] is None and refusal["error"]["code"] == -32000
        assert "bearer token" in refusal["error"]["message"]
    assert "it was wrong" in wrong_token["error"]["message"]
    assert "none was sent" in missing["error"]["message"]


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode() + b"\n"


async def test_sigterm_does_not_wait_for_a_connection_that_never_sends_its_token(
    home: Path,
) -> None:
    # The token line may take up to 10 s to arrive; a stopping server must not wait for it.
    async with (
        serve_process(home, [*TCP, "--auth-token", "tok"]) as served,
        tcp_client(served.port) as silent,
    ):
        async with tcp_client(served.port, token="tok") as ready:
            await ready.initialize()  # the server has accepted connections by now
        await wait_for_event(home, "connection_closed")
        served.process.send_signal(signal.SIGTERM)
        with trio.fail_after(5):
            assert await served.process.wait() == 0
        with pytest.raises(EOFError):
            await silent.read_line(timeout=5)  # closed without a line
