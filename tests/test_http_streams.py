"""Streamable HTTP sessions and streams: SSE or JSON by Accept, 202, resumption with
Last-Event-ID, cancellation, the standalone GET stream, isolation of sessions, idle expiry,
the session limit and a shutdown that lets calls finish."""

from __future__ import annotations

from pathlib import Path

import httpx2
import trio
import waits
from httpserve import BOTH, INIT, call, initialize, messages, serving, sse_events

SSE = "text/event-stream"


async def read_event(lines: object) -> dict[str, str]:
    """The next SSE event from an ``aiter_lines`` iterator."""
    fields: dict[str, str] = {}
    async for line in lines:  # type: ignore[attr-defined]
        if not line:
            if fields:
                return fields
            continue
        name, _, value = line.partition(":")
        fields[name] = value[1:] if value.startswith(" ") else value
    return fields


async def test_reply_shape_follows_accept(tmp_path: Path) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with serving(tmp_path) as served, httpx2.AsyncClient() as http:
        sid = await initialize(http, served.url)
        served.gates.gate("open").set()
        gate = call(2, "gate", {"name": "open"})
        as_json = await http.post(
            served.url, json=gate, headers={"accept": "application/json", "mcp-session-id": sid}
        )
        assert as_json.headers["content-type"] == "application/json"
        assert as_json.json()["result"]["structuredContent"] == {"passed": "open"}
        as_sse = await http.post(
            served.url, json={**gate, "id": 3}, headers={"accept": BOTH, "mcp-session-id": sid}
        )
        assert as_sse.headers["content-type"] == SSE
        events = sse_events(as_sse.text)
        assert events[0]["data"] == "" and events[0]["id"]  # the priming event
        assert [m["id"] for m in messages(as_sse.text)] == [3]
        assert len({e["id"] for e in events}) == len(events)
        quick = await http.post(
            served.url, json=ping, headers={"accept": BOTH, "mcp-session-id": sid}
        )
        assert quick.headers["content-type"] == "application/json"
        only_sse = await http.post(
            served.url, json=ping, headers={"accept": SSE, "mcp-session-id": sid}
        )
        assert only_sse.headers["content-type"] == SSE
        assert messages(only_sse.text) == [{"jsonrpc": "2.0", "id": 1, "result": {}}]


async def test_notifications_and_responses_are_202(tmp_path: Path) -> None:
    async with serving(tmp_path) as served, httpx2.AsyncClient() as http:
        sid = await initialize(http, served.url)
        headers = {"accept": BOTH, "mcp-session-id": sid}
        for body in (
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}},
            {"jsonrpc": "2.0", "id": "server-1", "result": {"roots": []}},
        ):
            accepted = await http.post(served.url, json=body, headers=headers)
            assert accepted.status_code == 202 and accepted.content == b""
        ping = await http.post(
            served.url, json={"jsonrpc": "2.0", "id": 4, "method": "ping"}, headers=headers
        )
        assert ping.json()["result"] == {}


async def test_a_dropped_sse_stream_is_resumed_with_last_event_id(tmp_path: Path) -> None:
    async with serving(tmp_path) as served, httpx2.AsyncClient() as http:
        sid = await initialize(http, served.url)
        headers = {"accept": BOTH, "mcp-session-id": sid}
        async with http.stream(
            "POST", served.url, json=call(5, "gate", {"name": "g"}), headers=headers
        ) as r:
            assert r.headers["content-type"] == SSE
            first = await read_event(r.aiter_lines())
            assert first["data"] == ""
        # The connection is gone before the reply; the call finishes after it.
        with trio.fail_after(5):
            await served.gates.reached("g").wait()
        served.gates.gate("g").set()
        resumed = await http.get(
            served.url, headers={"accept": SSE, "mcp-session-id": sid, "last-event-id": first["id"]}
        )
        assert resumed.status_code == 200
        replies = messages(resumed.text)
        assert [m["id"] for m in replies] == [5]
        assert replies[0]["result"]["structuredContent"] == {"passed": "g"}
        ids = [e["id"] for e in sse_events(resumed.text)]
        assert first["id"] not in ids  # only what came after it
        unknown = await http.get(
            served.url, headers={"accept": SSE, "mcp-session-id": sid, "last-event-id": "77-1"}
        )
        assert unknown.status_code == 404


async def test_cancelling_a_request_ends_its_stream_without_an_answer(tmp_path: Path) -> None:
    async with serving(tmp_path) as served, httpx2.AsyncClient() as http:
        sid = await initialize(http, served.url)
        headers = {"accept": BOTH, "mcp-session-id": sid}
        got: list[httpx2.Response] = []

        async def slow_call() -> None:
            got.append(
                await http.post(
                    served.url, json=call(8, "gate", {"name": "never"}), headers=headers
                )
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow_call)
            with trio.fail_after(5):
                await served.gates.reached("never").wait()
            cancel = {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 8},
            }
            assert (await http.post(served.url, json=cancel, headers=headers)).status_code == 202
        assert got[0].status_code == 200 and messages(got[0].text) == []
        await waits.until(lambda: not served.app.calls_in_flight(), 5)


async def test_standalone_get_stream(tmp_path: Path) -> None:
    async with serving(tmp_path) as served, httpx2.AsyncClient() as http:
        sid = await initialize(http, served.url)
        headers = {"accept": SSE, "mcp-session-id": sid}
        async with http.stream("GET", served.url, headers=headers) as stream:
            assert stream.status_code == 200 and stream.headers["content-type"] == SSE
            lines = stream.aiter_lines()
            assert (await read_event(lines))["data"] == ""
            second = await http.get(served.url, headers=headers)
            assert second.status_code == 409
            assert (
                await http.delete(served.url, headers={"mcp-session-id": sid})
            ).status_code == 204
            with trio.fail_after(5):
                rest = [line async for line in lines]
            assert rest == []  # the stream ended with the session


async def test_two_sessions_are_isolated(tmp_path: Path) -> None:
    async with serving(tmp_path) as served, httpx2.AsyncClient() as http:
        first = await initialize(http, served.url)
        second = await initialize(http, served.url)
        answers: list[httpx2.Response] = []

        async def blocked() -> None:
            answers.append(
                await http.post(
                    served.url,
                    json=call(1, "gate", {"name": "a"}),
                    headers={"accept": "application/json", "mcp-session-id": first},
                )
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(blocked)
            with trio.fail_after(5):
                await served.gates.reached("a").wait()
            headers = {"accept": "application/json", "mcp-session-id": second}
            with trio.fail_after(5):
                stored = await http.post(
                    served.url, json=call(1, "remember", {"content": "b's note"}), headers=headers
                )
                status = await http.post(
                    served.url, json=call(2, "server_status", {}), headers=headers
                )
            assert not stored.json()["result"]["isError"]
            transports = status.json()["result"]["structuredContent"]["transports"]
            assert transports["connections"] == 2
            assert not answers  # the first session's call is still waiting
            served.gates.gate("a").set()
        assert answers[0].json()["result"]["structuredContent"] == {"passed": "a"}


async def test_idle_sessions_expire(tmp_path: Path) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with serving(tmp_path, idle_timeout=0.3) as served, httpx2.AsyncClient() as http:
        sid = await initialize(http, served.url)
        headers = {"accept": BOTH, "mcp-session-id": sid}
        assert (await http.post(served.url, json=ping, headers=headers)).status_code == 200
        await waits.until(
            lambda: not served.connections.live, 5
        )  # polling the table, not the session: a request is activity
        assert (await http.post(served.url, json=ping, headers=headers)).status_code == 404


async def test_session_limit_is_503(tmp_path: Path) -> None:
    async with serving(tmp_path, max_connections=1) as served, httpx2.AsyncClient() as http:
        sid = await initialize(http, served.url)
        full = await http.post(served.url, json=INIT, headers={"accept": BOTH})
        assert full.status_code == 503
        assert "max_connections" in full.json()["error"]["message"]
        assert "mcp-session-id" not in full.headers
        await http.delete(served.url, headers={"mcp-session-id": sid})
        await waits.until(lambda: not served.connections.live, 5)
        assert (await http.post(served.url, json=INIT, headers={"accept": BOTH})).status_code == 200


async def test_shutdown_lets_a_running_call_finish(tmp_path: Path) -> None:
    got: list[str] = []
    async with httpx2.AsyncClient() as http, trio.open_nursery() as nursery:
        async with serving(tmp_path) as served:
            sid = await initialize(http, served.url)

            async def slow_call() -> None:
                reply = await http.post(
                    served.url,
                    json=call(3, "gate", {"name": "late"}),
                    headers={"accept": BOTH, "mcp-session-id": sid},
                )
                got.append(reply.text)

            async def open_when_stopping() -> None:
                conn = next(iter(served.connections.live.values()))
                await conn.closed.wait()
                served.gates.gate("late").set()

            nursery.start_soon(slow_call)
            with trio.fail_after(5):
                await served.gates.reached("late").wait()
            nursery.start_soon(open_when_stopping)
        # The server has stopped: the call that was running when it began to was answered.
    assert [m["id"] for m in messages(got[0])] == [3]
