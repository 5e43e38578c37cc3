"""The stdio server end to end: the official client, bad input, faults, shutdown."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import trio
from gitrepo import make_repo
from mcp_client import ok, open_client
from memtrio.actors.chaos.client import initialize_params
from memtrio.actors.net import attach
from memtrio.actors.net.relay import Relay
from memtrio.protocol.messages import Inbound, Oversized, Unanswered
from raw_server import RawServer, raw_server, trace_events, wait_for_event


async def test_official_client_initializes_lists_tools_and_calls_server_status(home: Path) -> None:
    async with open_client(home) as client:
        assert client.protocol_version == "2025-11-25"
        assert "memory" in (client.instructions or "")
        tools = await client.list_tools()
        names = [t.name for t in tools.tools]
        assert "server_status" in names
        status_tool = next(t for t in tools.tools if t.name == "server_status")
        assert status_tool.annotations.read_only_hint is True
        status = await ok(client, "server_status")
    assert status["name"] == "memtrio"
    assert status["protocol_version"] == "2025-11-25"
    assert status["data_dir"] == str(home)
    transport = next(a for a in status["actors"] if a["id"] == "transport")
    assert [c["id"] for c in transport["children"]] == [
        "stdio.writer",
        "stdio.session",
        "stdio.reader",
    ]
    assert all(c["state"] == "running" for c in transport["children"])


async def test_every_bad_line_is_answered_and_the_session_keeps_serving(home: Path) -> None:
    async with raw_server(home) as server:
        await server.initialize()
        await server.send_request(1, "ping")
        await server.send_bytes(b"this is not json\n")
        await server.send_bytes(b'{"jsonrpc": "2.0", "id": 2, "method": "pi\n')
        await server.send_bytes(b'["garbage", 1, {"x": null}]\n')
        # 20 MiB in one line: over the 16 MiB default limit, skipped without buffering.
        big = (
            b'{"jsonrpc":"2.0","id":77,"method":"ping","params":{"pad":"'
            + b"x" * (20 * 1024 * 1024)
            + b'"}}\n'
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.send_bytes, big)
            replies = [await server.read() for _ in range(4)]
        await server.send_bytes(b'{"jsonrpc":"2.0","id":3,"method":"\xff\xfe"}\n')
        await server.send_request(4, "ping")
        replies += [await server.read() for _ in range(3)]
        await server.close_stdin()
        code = await server.wait()
    assert replies[0] == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert replies[1]["error"]["code"] == -32700 and replies[1]["id"] is None
    assert replies[2]["error"]["code"] == -32700 and replies[2]["id"] is None
    assert replies[3]["error"]["code"] == -32600 and replies[3]["id"] is None
    oversized = replies[4]
    assert oversized["id"] == 77 and oversized["error"]["code"] == -32600
    assert "request limit" in oversized["error"]["message"]
    assert replies[5]["error"]["code"] == -32700 and replies[5]["id"] is None  # invalid UTF-8
    assert replies[6] == {"jsonrpc": "2.0", "id": 4, "result": {}}
    assert code == 0


async def test_crashed_session_answers_restarts_and_serves_the_next_call(home: Path) -> None:
    # The 4th dispatched message crashes the Session actor.
    async with raw_server(home, env={"MEMTRIO_FAULTS": "session.dispatch=raise@4"}) as server:
        await server.initialize()  # hits 1 and 2 (initialize, notifications/initialized)
        await server.send_request(1, "ping")  # hit 3
        assert (await server.read())["id"] == 1
        await server.send_request(
            2, "tools/call", {"name": "server_status", "arguments": {}}
        )  # hit 4: crash
        crashed = await server.read()
        await server.send_request(3, "tools/call", {"name": "server_status", "arguments": {}})
        after = await server.read()
        await server.close_stdin()
        assert await server.wait() == 0
    assert await_ok(crashed, 2, error=-32603)
    assert "injected fault" in crashed["error"]["message"]
    status = after["result"]["structuredContent"]
    session = [
        c
        for a in status["actors"]
        if a["id"] == "transport"
        for c in a["children"]
        if c["id"] == "stdio.session"
    ][0]
    assert session["restarts"] == 1 and session["state"] == "running"
    events = trace_events(home)
    restarts = [e for e in events if e["event"] == "restart" and e.get("child") == "stdio.session"]
    assert restarts and "injected fault" in restarts[0]["cause"]


def await_ok(reply: dict, rid: int, error: int) -> bool:
    return reply["id"] == rid and reply["error"]["code"] == error


async def test_slow_call_does_not_block_ping(home: Path) -> None:
    # The first call never finishes; once the trace log shows it running, a ping
    # and a second call are answered while it still runs.
    async with raw_server(home, env={"MEMTRIO_FAULTS": "tool.call=hang@1"}) as server:
        await server.initialize()
        await server.send_request(1, "tools/call", {"name": "server_status", "arguments": {}})
        await wait_for_event(home, "fault_injected", point="tool.call", action="hang")
        await server.send_request(2, "ping")
        pong = await server.read()
        await server.send_request(3, "tools/call", {"name": "server_status", "arguments": {}})
        status = await server.read()
    assert pong == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert status["id"] == 3 and status["result"]["isError"] is False
    assert status["result"]["structuredContent"]["calls_in_flight"] == 2  # the hung one and itself


async def test_cancelled_call_gets_no_reply_and_the_session_goes_on(home: Path) -> None:
    async with raw_server(home, env={"MEMTRIO_FAULTS": "tool.call=hang@1"}) as server:
        await server.initialize()
        await server.send_request(5, "tools/call", {"name": "server_status", "arguments": {}})
        await wait_for_event(home, "fault_injected", point="tool.call", action="hang")
        await server.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}
        )
        # Cancelling an unknown or finished call is harmless.
        await server.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 999}}
        )
        await wait_for_event(home, "span", name="tools/call", request_id=5)  # call 5 has ended
        await server.send_request(6, "tools/call", {"name": "server_status", "arguments": {}})
        reply = await server.read()
        await server.close_stdin()
        rest = await server.rest()
        assert await server.wait() == 0
    assert reply["id"] == 6
    assert reply["result"]["structuredContent"]["calls_in_flight"] == 1  # only itself
    assert b'"id":5' not in rest
    cancelled = [e for e in trace_events(home) if e["event"] == "cancelled"]
    assert [e["request_id"] for e in cancelled] == [5]


async def test_requests_before_initialize_get_a_clear_error(home: Path) -> None:
    async with raw_server(home) as server:
        await server.send_request(1, "tools/list")
        reply = await server.read()
        await server.send_request(2, "ping")
        pong = await server.read()
    assert reply["error"]["code"] == -32002
    assert "initialize" in reply["error"]["message"]
    assert pong["result"] == {}


async def test_version_negotiation(home: Path) -> None:
    async with raw_server(home) as server:
        for rid, (asked, answered) in enumerate(
            [
                ("2024-11-05", "2024-11-05"),
                ("2025-03-26", "2025-03-26"),
                ("1999-01-01", "2025-11-25"),
            ]
        ):
            await server.send_request(rid, "initialize", initialize_params("t", asked))
            reply = await server.read()
            assert reply["result"]["protocolVersion"] == answered
        await server.send_request(9, "no/such/method")
        missing = await server.read()
        await server.send_request(10, "tools/call", {"name": "no_such_tool", "arguments": {}})
        unknown_tool = await server.read()
    assert missing["error"]["code"] == -32601
    assert (
        unknown_tool["error"]["code"] == -32602
        and "no_such_tool" in unknown_tool["error"]["message"]
    )


async def test_bad_tool_arguments_are_an_iserror_result_naming_the_field(home: Path) -> None:
    async with raw_server(home) as server:
        await server.initialize()
        await server.send_request(
            1, "tools/call", {"name": "server_status", "arguments": {"bogus": 1}}
        )
        reply = await server.read()
    assert reply["result"]["isError"] is True
    assert "bogus" in reply["result"]["content"][0]["text"]


async def test_eof_lets_in_flight_calls_finish_and_exits_zero(home: Path) -> None:
    async with raw_server(home, env={"MEMTRIO_FAULTS": "tool.call=delay:1"}) as server:
        await server.initialize()
        await server.send_request(1, "tools/call", {"name": "server_status", "arguments": {}})
        await wait_for_event(home, "fault_injected", point="tool.call")  # the call is running
        await server.close_stdin()
        rest = await server.rest()
        code = await server.wait()
    replies = [json.loads(line) for line in rest.splitlines() if line]
    assert [r["id"] for r in replies] == [1]
    assert replies[0]["result"]["isError"] is False
    assert code == 0


async def test_sigterm_finishes_in_flight_calls_and_exits_zero(home: Path) -> None:
    async with raw_server(home, env={"MEMTRIO_FAULTS": "tool.call=delay:1"}) as server:
        await server.initialize()
        await server.send_request(1, "tools/call", {"name": "server_status", "arguments": {}})
        await wait_for_event(home, "fault_injected", point="tool.call")  # the call is running
        server.process.send_signal(signal.SIGTERM)
        rest = await server.rest()
        code = await server.wait()
    replies = [json.loads(line) for line in rest.splitlines() if line]
    assert [r["id"] for r in replies] == [1]
    assert code == 0
    assert [e["signal"] for e in trace_events(home) if e["event"] == "signal"] == ["SIGTERM"]


async def test_each_call_is_a_span_in_the_trace_log(home: Path) -> None:
    async with raw_server(home) as server:
        await server.initialize()
        await server.send_request(1, "tools/call", {"name": "server_status", "arguments": {}})
        await server.read()
        await server.send_request(
            2, "tools/call", {"name": "server_status", "arguments": {"bad": True}}
        )
        await server.read()
        await server.close_stdin()
        assert await server.wait() == 0
    spans = [
        e for e in trace_events(home) if e["event"] == "span" and e.get("name") == "tools/call"
    ]
    assert [s["request_id"] for s in spans] == [1, 2]
    assert [s["outcome"] for s in spans] == ["ok", "invalid_arguments"]
    for s in spans:
        assert len(s["trace_id"]) == 32 and len(s["span_id"]) == 16
        assert s["tool"] == "server_status" and s["duration_ms"] >= 0
    # stderr carries warnings and errors only: a clean session writes nothing there.
    assert (home / "server-stderr.txt").read_text() == ""


async def test_with_every_feature_on_eof_stops_each_child_within_its_grace(
    home: Path, tmp_path: Path
) -> None:
    """Regression: the vectors actor slept until cancelled, so every exit of a server with
    vectors on waited out its 5 s grace. Each child must stop when asked (ctx.shutdown);
    the supervisor logs `child_stop_forced` for one it had to cancel."""
    repo = make_repo(tmp_path / "repo", {"app.py": "def handler(x):\n    return x\n"})
    env = {"MEMTRIO_EMBEDDINGS": "on", "MEMTRIO_VECTORS": "on", "MEMTRIO_VECTORS_DIMS": "4"}
    async with raw_server(home, env=env, cwd=repo) as server:
        await server.initialize()
        calls = [
            ("remember", {"content": "The handler returns its argument."}),
            ("recall", {"query": "what does the handler return"}),
            ("create_entities", {"entities": [{"name": "Ada", "entityType": "person"}]}),
            ("vector_upsert_embedding", {"entityName": "Ada", "embedding": [1, 0, 0, 0]}),
            ("code_outline", {"path": "app.py", "root": str(repo)}),
            ("server_status", {}),
        ]
        for i, (name, arguments) in enumerate(calls, 1):
            await server.send_request(i, "tools/call", {"name": name, "arguments": arguments})
            reply = await server.read()
            assert reply["result"]["isError"] is False, (name, reply)
        code = await server.close()
    assert code == 0
    forced = [e for e in trace_events(home) if e["event"] == "child_stop_forced"]
    assert forced == []


# How long the store's start is held back below: long enough that an answer to
# `initialize` that waited for it could not come first even on a loaded machine.
STORE_OPEN_DELAY = 3.0


def _line(method: str, params: object = None, rid: int | None = None) -> bytes:
    msg: dict[str, object] = {"jsonrpc": "2.0", "method": method}
    if rid is not None:
        msg["id"] = rid
    if params is not None:
        msg["params"] = params
    return json.dumps(msg).encode() + b"\n"


async def test_initialize_is_answered_before_the_store_opens_and_no_request_is_lost(
    home: Path,
) -> None:
    """Regression (#42: ``initialize`` waited for every feature's actors to start, the
    store's opening included). It is answered from the features' set-up while the store
    opens; every request sent with it, in the same write, is answered once the store is
    open, in full: the tool calls too, one of them before a ``tools/list`` that the
    session serves after it."""
    entity = {"name": "early-bird", "entityType": "test", "observations": ["sent with initialize"]}
    burst = b"".join(
        [
            _line("initialize", initialize_params("early", "2025-06-18"), 0),
            _line("notifications/initialized"),
            _line("ping", rid=1),
            _line("tools/list", rid=2),
            _line(
                "tools/call", {"name": "create_entities", "arguments": {"entities": [entity]}}, 3
            ),
            _line("tools/list", rid=4),
            _line("tools/call", {"name": "server_status", "arguments": {}}, 5),
            _line("ping", rid=6),
        ]
    )
    env = {"MEMTRIO_FAULTS": f"store.open=delay:{STORE_OPEN_DELAY}"}
    async with raw_server(home, env=env) as server:
        await server.send_bytes(burst)
        replies = {}
        for _ in range(7):
            reply = await server.read()
            replies[reply["id"]] = reply
        await server.send_request(
            7, "tools/call", {"name": "open_nodes", "arguments": {"names": ["early-bird"]}}
        )
        opened = await server.read()
        await server.close_stdin()
        code = await server.wait()
    events = trace_events(home)
    answered = next(e["ts"] for e in events if e["event"] == "initialize")
    store_opened = next(e["ts"] for e in events if e["event"] == "store_opened")
    assert any(e["event"] == "fault_injected" and e["point"] == "store.open" for e in events)
    assert answered < store_opened
    assert replies[0]["result"]["protocolVersion"] == "2025-06-18"
    assert "memory" in replies[0]["result"]["instructions"]
    assert replies[1]["result"] == {} and replies[6]["result"] == {}
    assert replies[2]["result"] == replies[4]["result"]
    assert "create_entities" in {t["name"] for t in replies[2]["result"]["tools"]}
    created = replies[3]["result"]
    assert not created.get("isError"), created
    assert "early-bird" in json.dumps(created["structuredContent"])
    assert replies[5]["result"]["structuredContent"]["protocol_version"] == "2025-06-18"
    assert not opened["result"].get("isError"), opened
    assert "sent with initialize" in json.dumps(opened["result"]["structuredContent"])
    assert code == 0


# How a `memtrio mcp` that cannot serve is started: embedded with its failures answered
# (what an attaching child falls back to), or attaching only to a running owner, with
# none running (then it serves embedded, its failures answered, the same way).
REFUSING = {
    "no-attach": ({"MEMTRIO_SERVE_ATTACH": "off"}, ("--no-attach", "--answer-failures")),
    "attach-existing": ({"MEMTRIO_SERVE_ATTACH": "existing"}, ()),
}


def _damage_store(home: Path) -> None:
    (home / "memtrio.sqlite").write_bytes(b"not a database at all\n" * 400)


async def _answers_until_eof(server: RawServer) -> list[dict[str, object]]:
    """Every line the server writes until it closes stdout, decoded."""
    rest = await server.rest(timeout=30.0)
    return [json.loads(line) for line in rest.splitlines() if line.strip()]


def _assert_refused(reply: dict[str, object], rid: int | None) -> None:
    assert reply["id"] == rid, reply
    error = reply.get("error")
    assert isinstance(error, dict), reply
    assert "is damaged" in error["message"] and "memtrio doctor" in error["message"], reply


@pytest.mark.parametrize("how", list(REFUSING))
async def test_a_store_that_fails_after_the_early_answers_refuses_every_request_read_in_one_write(
    home: Path, how: str
) -> None:
    """Regression (#42's early answers): ``initialize``, ``initialized`` and a tool call in
    one write, then the store fails to open. The early answerer had read the tool call
    (and the ping after it) and the refusal, reading stdin afresh, never answered them:
    the client waited forever. Now each is answered with the failure, once, in order,
    and the process exits."""
    _damage_store(home)
    env, args = REFUSING[how]
    burst = b"".join(
        [
            _line("initialize", initialize_params("early", "2025-06-18"), 0),
            _line("notifications/initialized"),
            _line("tools/call", {"name": "server_status", "arguments": {}}, 1),
            _line("ping", rid=2),
            b'{"jsonrpc":"2.0","id":3,"method":"tools/list"',  # its end comes later
        ]
    )
    env = {**env, "MEMTRIO_FAULTS": f"store.open=delay:{STORE_OPEN_DELAY}"}
    async with raw_server(home, env=env, args=args) as server:
        await server.send_bytes(burst)
        initialized = await server.read()
        refused = [await server.read(timeout=30.0), await server.read(timeout=30.0)]
        await server.send_bytes(b"}\n" + _line("ping", rid=4))
        refused += [await server.read(timeout=30.0), await server.read(timeout=30.0)]
        await server.close_stdin()
        rest = await _answers_until_eof(server)
        code = await server.wait()
    # Answered early, while the store was held back: initialize succeeded.
    assert initialized["id"] == 0 and "result" in initialized, initialized
    for reply, rid in zip(refused, [1, 2, 3, 4], strict=True):
        _assert_refused(reply, rid)
    assert rest == []  # none answered twice
    assert code == 1


@pytest.mark.parametrize("how", list(REFUSING))
async def test_a_store_that_fails_after_the_early_answers_refuses_requests_sent_one_by_one(
    home: Path, how: str
) -> None:
    """The same with a client that waits for each early answer before it sends more, then
    sends the tool call in two writes: the call is refused, and so is the next request."""
    _damage_store(home)
    env, args = REFUSING[how]
    env = {**env, "MEMTRIO_FAULTS": f"store.open=delay:{STORE_OPEN_DELAY}"}
    call = _line("tools/call", {"name": "server_status", "arguments": {}}, 1)
    async with raw_server(home, env=env, args=args) as server:
        await server.send_bytes(_line("initialize", initialize_params("early", "2025-06-18"), 0))
        initialized = await server.read()
        await server.send_bytes(_line("notifications/initialized") + _line("ping", rid=5))
        pong = await server.read()
        await server.send_bytes(call[:20])
        await server.send_bytes(call[20:])
        refused = await server.read(timeout=30.0)
        await server.send_bytes(_line("tools/list", rid=2))
        again = await server.read(timeout=30.0)
        await server.close_stdin()
        rest = await _answers_until_eof(server)
        code = await server.wait()
    assert initialized["id"] == 0 and "result" in initialized, initialized
    assert pong == {"jsonrpc": "2.0", "id": 5, "result": {}}
    _assert_refused(refused, 1)
    _assert_refused(again, 2)
    assert rest == []
    assert code == 1


async def test_a_store_that_fails_after_the_early_answers_refuses_what_came_before_eof(
    home: Path,
) -> None:
    """A client that writes its requests and closes stdin at once (a pipe): the early
    answerer read them and the end of the input; each request is refused, and the server
    exits without waiting for more input."""
    _damage_store(home)
    env, args = REFUSING["no-attach"]
    env = {**env, "MEMTRIO_FAULTS": f"store.open=delay:{STORE_OPEN_DELAY}"}
    burst = b"".join(
        [
            _line("initialize", initialize_params("early", "2025-06-18"), 0),
            _line("notifications/initialized"),
            _line("tools/call", {"name": "server_status", "arguments": {}}, 1),
            b"not json\n",
            b'{"jsonrpc":"2.0","id":2,"method":"ping"}',  # the last line, without its newline
        ]
    )
    async with raw_server(home, env=env, args=args) as server:
        await server.send_bytes(burst)
        await server.close_stdin()
        replies = await _answers_until_eof(server)
        code = await server.wait()
    assert [r["id"] for r in replies] == [0, 1, None, 2]
    assert "result" in replies[0]
    for reply, rid in zip(replies[1:], [1, None, 2], strict=True):
        _assert_refused(reply, rid)
    assert code == 1


async def test_the_refusal_reads_on_where_the_early_answerer_left_off() -> None:
    """What `EarlyAnswers` read and left (whole lines, a line over the limit, the start of
    the next line; or the middle of a long line) is answered first, in order, and the
    rest of stdin completes the line it was in."""
    cases = [
        (
            Unanswered(
                (
                    Inbound([_line("tools/call", {"name": "stats"}, 1).strip(), b"{}"]),
                    Inbound([_line("notifications/cancelled").strip()]),
                    Oversized(500, 100, 7),
                ),
                partial=b'{"jsonrpc":"2.0","id":',
            ),
            b'3,"method":"ping"}\n',
            [1, None, 7, 3],
        ),
        (Unanswered(skipping=True), b'xx"}}\n' + _line("ping", rid=4), [None, 4]),
    ]
    for unanswered, more, ids in cases:
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        os.write(stdin_w, more)
        os.close(stdin_w)

        async def nobody() -> None:
            return None

        relay = Relay(nobody, Path(os.sep), stdin_r, stdout_w, 100)
        attach.take_over(relay, unanswered)
        try:
            assert await relay.refuse("why") == 1
        finally:
            relay.close()
        with os.fdopen(stdout_r, "rb") as out:
            replies = [json.loads(line) for line in out.read().splitlines()]
        assert [r["id"] for r in replies] == ids
        assert {r["error"]["message"] for r in replies} == {"why"}
