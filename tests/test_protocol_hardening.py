"""Hostile framing over the real stdio server, and the protocol logic behind it:
top-level id recovery (oversized, too deep, undecodable lines) and JSON-RPC batches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from memtrio.actors.answers import BatchAnswers
from memtrio.actors.chaos.client import INITIALIZED
from memtrio.actors.tool_calls import MAX_CALLS_IN_FLIGHT
from memtrio.protocol import jsonrpc, jsonscan, mcp
from raw_server import RawServer, initialize_request, raw_server, wait_for_event

# -- units -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "rid"),
    [
        # The id inside params (a tool argument) is not the request's.
        (b'{"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"id":999,"c":"x', None),
        (b'{"method":"tools/call","params":{"id":999},"id":5,"jsonrpc":"2.0","x":"yyy', 5),
        (b'{"params":{"a":[{"id":1},"\\"id\\":2"]},"id":"top","x":[[[', "top"),
        (b'{"x":"\\"id\\": 3, ","params":{"c":"', None),  # "id" inside a string
        (b'{"\\u0069d":7,"params":{"c":"', 7),  # an escaped key is still "id"
        (b'{"id":"a\\"b\\u00e9","params":{"c":"', 'a"b\u00e9'),  # escapes decoded
        (b'{"id":1,"id":2,"params":{"c":"', 2),  # the last one wins, as in msgspec
        (b'{"id":12', None),  # may still be 123...: not taken
        (b'{"id":12,', 12),
        (b'{"id":"unterminated', None),
        (b'{"id":true,"params":"', None),  # not a valid id
        (b'{"id":1.5,"params":"', None),
        (b'{"id":{"id":4},"params":"', None),
        (b'[{"id":1,"method":"ping"},', None),  # a batch has no one id
        (b'{"id":3 garbage', None),  # not JSON as far as it goes
        (b'garbage "id": 4', None),
    ],
)
def test_defect7_recover_id_reads_only_the_top_level(prefix: bytes, rid: object) -> None:
    assert jsonrpc.recover_id(prefix) == rid


def test_defect7_recover_id_reads_a_bounded_prefix_and_suffix() -> None:
    big = b"x" * jsonrpc.ID_PREFIX_BYTES
    line = b'{"params":{"c":"' + big + b'"},"id":5}'
    assert jsonrpc.recover_id(line) is None  # the id is beyond the first bytes kept
    assert jsonrpc.recover_id(line, line) == 5  # but within the last ones
    assert jsonrpc.recover_id(b'{"id":5,' + line[1:]) == 5
    middle = b'{"params":{"c":"' + big + b'"},"id":5,"pad":"' + big + b'"}'
    assert jsonrpc.recover_id(middle, middle) is None  # in neither end: unknown


@pytest.mark.parametrize(
    ("suffix", "rid"),
    [
        (b'xx"},"id":5}', 5),
        (b'xx"}, "id" : "a\\"b" }\r\n', 'a"b'),
        (b'xx", "id": 1}, "id": 2}', 2),  # the last top-level one
        (b'xx", "id": 1}}', None),  # only nested
        (b'xx"}, "id": 1, "x": [1, {"id": 3}, "]"]}', 1),
        (b'x\\"id\\": 4}"}', None),  # inside a string: its start is not known
        (b'xx"},"id":5', None),  # not the end of an object
        (b'xx"},"id":5}}', None),  # a stray closer: the walk hits the start inside a value
        (b'xx"},"id":5] }', None),
        (b'xx"},"id":05}', None),
    ],
)
def test_defect7_recover_id_reads_the_last_bytes_backwards(suffix: bytes, rid: object) -> None:
    assert jsonrpc.recover_id(b'{"jsonrpc":"2.0","params":{"c":"', suffix) == rid


@pytest.mark.parametrize(
    ("line", "code", "rid"),
    [
        (b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"a":' + b"[" * 5000, -32700, None),
        (
            b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"a":'
            + b"[" * 5000
            + b"]" * 4999
            + b"}}",
            -32700,
            None,
        ),
        (
            b'{"jsonrpc":"2.0","method":"ping","params":{"a":'
            + b"[" * 5000
            + b"]" * 5000
            + b'},"id":"deep"}',
            -32600,
            "deep",
        ),
        (b'{"id":8,"x":' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"}", -32600, 8),
        # Bad JSON deep inside valid-looking nesting is still a parse error.
        (b'{"id":9,"x":' + b"[" * 5000 + b"tru" + b"]" * 5000 + b"}", -32700, None),
        (b'{"id":9,"x":' + b"[" * 5000 + b"]" * 5000 + b"} x", -32700, None),
        (b'{"id":9,"x":' + b"[" * 5000 + b'"\xff"' + b"]" * 5000 + b"}", -32700, None),
        # The id itself nested: no id.
        (b'{"id":' + b"[" * 5000 + b"]" * 5000 + b"}", -32600, None),
    ],
    ids=[
        "unclosed",
        "one-bracket-short",
        "id-after-params",
        "objects",
        "bad-literal",
        "trailing",
        "bad-utf8",
        "nested-id",
    ],
)
def test_defect8_deep_json_code_and_top_level_id(line: bytes, code: int, rid: object) -> None:
    msg = jsonrpc.decode_line(line)
    assert isinstance(msg, jsonrpc.Failure)
    assert (msg.code, msg.id) == (code, rid), msg.message


def test_defect8_a_deep_response_from_the_client_is_still_a_response() -> None:
    line = b'{"jsonrpc":"2.0","id":3,"result":' + b"[" * 5000 + b"]" * 5000 + b"}"
    assert jsonrpc.decode_line(line) == jsonrpc.Response(3)


@pytest.mark.parametrize(
    ("line", "rid"),
    [
        # Valid JSON that msgspec cannot represent: an unpaired surrogate, a huge number.
        (b'{"jsonrpc":"2.0","id":4,"method":"ping","params":{"t":"a\\ud83d b"}}', 4),
        (b'{"jsonrpc":"2.0","id":5,"method":"\\udc00"}', 5),
        (b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}', None),
        (b'{"jsonrpc":"2.0","id":1e400,"method":"ping"}', None),
    ],
)
def test_valid_json_msgspec_cannot_decode_is_an_invalid_request(line: bytes, rid: object) -> None:
    msg = jsonrpc.decode_line(line)
    assert isinstance(msg, jsonrpc.Failure)
    assert (msg.code, msg.id) == (jsonrpc.INVALID_REQUEST, rid), msg.message


def test_defect9_batch_decoding() -> None:
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    batch = jsonrpc.decode_line(b" [" + ping + b", 5 ,[] ]")
    assert batch == jsonrpc.Batch([ping, b"5", b"[]"])
    assert isinstance(jsonrpc.decode_line(ping, in_batch=True), jsonrpc.Message)
    nested = jsonrpc.decode_line(b"[]", in_batch=True)
    assert isinstance(nested, jsonrpc.Failure) and "do not nest" in nested.message
    empty = jsonrpc.decode_line(b"[ ]")
    assert isinstance(empty, jsonrpc.Failure) and empty.code == jsonrpc.INVALID_REQUEST
    # At the limit it is a batch; one more and it is refused whole, however long it is.
    full = b"[" + b",".join([ping] * jsonrpc.BATCH_LIMIT) + b"]"
    assert len(jsonrpc.decode_line(full).elements) == jsonrpc.BATCH_LIMIT  # type: ignore[union-attr]
    for over in (
        b"[" + b",".join([ping] * (jsonrpc.BATCH_LIMIT + 1)) + b"]",
        b"[" + b"{}," * 1_000_000 + b"{}]",
        b"[" + b"[" * 5000 + b"]" * 5000 + b",{}" * 200 + b"]",  # too deep for msgspec too
    ):
        msg = jsonrpc.decode_line(over)
        assert isinstance(msg, jsonrpc.Failure) and msg.code == jsonrpc.INVALID_REQUEST
        assert f"at most {jsonrpc.BATCH_LIMIT}" in msg.message
    assert isinstance(jsonrpc.decode_line(b"[" + ping + b","), jsonrpc.Failure)  # not JSON
    # An element too deep for msgspec is split out and answered on its own.
    deep = b'{"jsonrpc":"2.0","id":2,"x":' + b"[" * 5000 + b"]" * 5000 + b"}"
    batch = jsonrpc.decode_line(b"[" + ping + b"," + deep + b"]")
    assert isinstance(batch, jsonrpc.Batch) and batch.elements == [ping, deep]
    msg = jsonrpc.decode_line(deep, in_batch=True)
    assert isinstance(msg, jsonrpc.Failure) and (msg.code, msg.id) == (-32600, 2)


def test_defect9_batch_answers_keep_order_and_leave_out_the_unanswered() -> None:
    answers = BatchAnswers(3)
    assert answers.fill(2, b'{"id":3}\n') is None
    assert answers.fill(1, None) is None
    assert answers.fill(0, b'{"id":1}\n') == b'[{"id":1},{"id":3}]\n'
    only_notifications = BatchAnswers(2)
    only_notifications.fill(0, None)
    assert only_notifications.fill(1, None) is None  # never an empty array


def test_defect9_batches_belong_to_2025_03_26_only() -> None:
    assert mcp.batch_refusal("2025-03-26") is None
    for version in (None, "2024-11-05", "2025-06-18", "2025-11-25"):
        assert mcp.batch_refusal(version)


def test_scan_checks_the_grammar_at_any_depth() -> None:
    deep = b"[" * 100_000 + b'{"a":[1,2,{"b":null}]}' + b"]" * 100_000
    assert list(jsonscan.top_level(deep)) == [(None, 1, len(deep) - 1)]
    for bad in (b"[" * 10 + b"]" * 9 + b"}", b'{"a" 1}', b"[1,]", b'{"a":1,}', b"[01]", b'"\\x"'):
        with pytest.raises(jsonscan.Invalid):
            list(jsonscan.top_level(bad))
    with pytest.raises(jsonscan.Truncated):
        list(jsonscan.top_level(b'{"a":[1,2'))


# -- the real server ---------------------------------------------------------

SMALL_LIMIT = {"MEMTRIO_REQUEST_LIMIT": "4096"}


def _line(obj: Any) -> bytes:
    return json.dumps(obj).encode() + b"\n"


async def _initialize(server: RawServer, version: str) -> None:
    await server.send(initialize_request(version, "t"))
    assert (await server.read())["result"]["protocolVersion"] == version
    await server.send(INITIALIZED)


async def test_defect7_oversized_line_is_answered_with_its_top_level_id_only(home: Path) -> None:
    pad = "x" * 8000
    args = {"name": "remember", "arguments": {"id": 999, "content": pad}}
    async with raw_server(home, env=SMALL_LIMIT) as server:
        await server.initialize()
        # No top-level id: the 999 in the arguments must not be answered.
        await server.send({"jsonrpc": "2.0", "method": "tools/call", "params": args})
        no_id = await server.read()
        # The top-level id after params, within the bytes kept.
        await server.send({"jsonrpc": "2.0", "method": "tools/call", "params": args, "id": 5})
        after_params = await server.read()
        # After params of more than the first bytes kept: found in the last bytes.
        big = {"name": "remember", "arguments": {"id": 999, "content": "y" * 100_000}}
        await server.send({"jsonrpc": "2.0", "method": "tools/call", "params": big, "id": 6})
        at_the_end = await server.read()
        # In neither end: unknown, so null (never 999).
        pad = "z" * 100_000
        await server.send({"jsonrpc": "2.0", "params": big, "id": 8, "method": "x", "pad": pad})
        beyond = await server.read()
        await server.send({"jsonrpc": "2.0", "id": 'a"b', "method": "tools/call", "params": args})
        escaped = await server.read()
        await server.send_request(7, "ping")
        pong = await server.read()
    for reply in (no_id, after_params, at_the_end, beyond, escaped):
        assert reply["error"]["code"] == -32600 and "request limit" in reply["error"]["message"]
    assert no_id["id"] is None
    assert after_params["id"] == 5
    assert at_the_end["id"] == 6
    assert beyond["id"] is None
    assert escaped["id"] == 'a"b'
    assert pong == {"jsonrpc": "2.0", "id": 7, "result": {}}


async def test_defect8_deep_valid_json_is_answered_with_its_id(home: Path) -> None:
    nested = "[" * 5000 + "]" * 5000
    async with raw_server(home) as server:
        await server.initialize()
        call = (
            '{"jsonrpc":"2.0","id":7,"method":"tools/call",'
            f'"params":{{"name":"server_status","arguments":{{"x":{nested}}}}}}}\n'
        )
        await server.send_bytes(call.encode())
        deep = await server.read()
        await server.send_bytes(call[: len(call) // 2].encode() + b"\n")  # cut: not JSON
        truncated = await server.read()
        tail = f'{{"jsonrpc":"2.0","method":"ping","params":{{"a":{nested}}},"id":"last"}}\n'
        await server.send_bytes(tail.encode())
        id_last = await server.read()
        surrogate = b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"remember","arguments":{"content":"half \\ud83d"}}}\n'
        await server.send_bytes(surrogate)
        unpaired = await server.read()
        # Over 1 MiB: decoded in a worker thread, same answer.
        huge = "[" * 600_000 + "]" * 600_000
        await server.send_bytes(
            f'{{"jsonrpc":"2.0","id":11,"method":"ping","params":{{"a":{huge}}}}}\n'.encode()
        )
        threaded = await server.read()
        await server.send_request(10, "ping")
        pong = await server.read()
    assert (threaded["id"], threaded["error"]["code"]) == (11, -32600)
    assert (deep["id"], deep["error"]["code"]) == (7, -32600)
    assert "nested deeper" in deep["error"]["message"]
    assert (truncated["id"], truncated["error"]["code"]) == (None, -32700)
    assert (id_last["id"], id_last["error"]["code"]) == ("last", -32600)
    assert (unpaired["id"], unpaired["error"]["code"]) == (9, -32600)
    assert "surrogate" in unpaired["error"]["message"]
    assert pong["id"] == 10


async def test_defect9_batch_is_served_after_2025_03_26(home: Path) -> None:
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "server_status"}},
        5,
        {"jsonrpc": "2.0", "id": 3},
        {"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": {}},
        {"jsonrpc": "2.0", "id": 99, "result": {}},  # a stray response: no answer
        [{"jsonrpc": "2.0", "id": 10, "method": "ping"}],
        {"jsonrpc": "2.0", "id": 11, "method": "no/such"},
    ]
    ping = {"jsonrpc": "2.0", "id": 0, "method": "ping"}
    async with raw_server(home) as server:
        await _initialize(server, "2025-03-26")
        await server.send(batch)
        answers = await server.read()
        await server.send_bytes(b"[]\n")
        empty = await server.read()
        await server.send(
            [
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 8, "result": {}},
            ]
        )
        await server.send_request(20, "ping")
        after_notifications = await server.read()  # the batch above had nothing to answer
        await server.send([{**ping, "id": i} for i in range(jsonrpc.BATCH_LIMIT)])
        full = await server.read()
        await server.send([{**ping, "id": i} for i in range(jsonrpc.BATCH_LIMIT + 1)])
        too_long = await server.read()
        await server.send_bytes(b'[{"jsonrpc":"2.0","id":1,"method":"ping"},\n')
        not_json = await server.read()
    assert isinstance(answers, list)
    assert [a["id"] for a in answers] == [1, 2, None, 3, 4, None, 11]
    assert answers[0]["result"] == {}
    assert answers[1]["result"]["isError"] is False
    codes = [a["error"]["code"] for a in answers[2:]]
    assert codes == [-32600, -32600, -32600, -32600, -32601]
    assert "MUST NOT be part of a JSON-RPC batch" in answers[4]["error"]["message"]
    assert empty == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "Invalid Request: an empty batch"},
    }
    assert after_notifications["id"] == 20
    assert isinstance(full, list) and [a["id"] for a in full] == list(range(jsonrpc.BATCH_LIMIT))
    assert isinstance(too_long, dict) and too_long["error"]["code"] == -32600
    assert str(jsonrpc.BATCH_LIMIT) in too_long["error"]["message"]
    assert isinstance(not_json, dict) and (not_json["id"], not_json["error"]["code"]) == (
        None,
        -32700,
    )


async def test_defect9_batch_answer_waits_for_its_calls_not_the_session(home: Path) -> None:
    call = {"name": "server_status", "arguments": {}}
    async with raw_server(home, env={"MEMTRIO_FAULTS": "tool.call=delay:1"}) as server:
        await _initialize(server, "2025-03-26")
        await server.send(
            [
                {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call},
                {"jsonrpc": "2.0", "id": 2, "method": "ping"},
            ]
        )
        await server.send_request(3, "ping")
        first = await server.read()
        second = await server.read()
    assert first == {"jsonrpc": "2.0", "id": 3, "result": {}}  # not held up by the batch
    assert [a["id"] for a in second] == [1, 2]  # one array, once the slow call is done
    assert second[0]["result"]["isError"] is False


async def test_defect9_cancelled_call_is_left_out_of_its_batch(home: Path) -> None:
    call = {"name": "server_status", "arguments": {}}
    async with raw_server(home, env={"MEMTRIO_FAULTS": "tool.call=hang@1"}) as server:
        await _initialize(server, "2025-03-26")
        await server.send(
            [
                {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call},
                {"jsonrpc": "2.0", "id": 2, "method": "ping"},
            ]
        )
        # The call hangs from the moment its fault point fires (logged just before).
        await wait_for_event(home, "fault_injected", point="tool.call", action="hang")
        await server.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        )
        answers = await server.read()
    assert answers == [{"jsonrpc": "2.0", "id": 2, "result": {}}]


async def test_defect9_session_crash_mid_batch_still_answers_every_element(home: Path) -> None:
    # Dispatches: initialize 1, notifications/initialized 2, then the batch: 3, 4 (crash), 5.
    env = {"MEMTRIO_FAULTS": "session.dispatch=raise@4"}
    async with raw_server(home, env=env) as server:
        await _initialize(server, "2025-03-26")
        await server.send([{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in (1, 2, 3)])
        answers = await server.read()
        await server.send([{"jsonrpc": "2.0", "id": 4, "method": "ping"}])
        after = await server.read()  # the restarted session kept the negotiated version
    assert [a["id"] for a in answers] == [1, 2, 3]
    assert answers[0]["result"] == {}
    assert [a["error"]["code"] for a in answers[1:]] == [-32603, -32603]
    assert after == [{"jsonrpc": "2.0", "id": 4, "result": {}}]


async def test_defect9_batches_refused_before_initialize_and_in_other_revisions(
    home: Path,
) -> None:
    ping = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}]
    init = {**initialize_request("2025-03-26"), "id": 2}
    refusals: list[dict[str, Any]] = []
    async with raw_server(home) as server:
        await server.send(ping)
        refusals.append(await server.read())
        await server.send([init])  # initialize MUST NOT be part of a batch
        refusals.append(await server.read())
        await server.send_request(3, "tools/list")
        still_uninitialized = await server.read()
        for version in ("2024-11-05", "2025-06-18", "2025-11-25"):
            await _initialize(server, version)
            await server.send(ping)
            refusals.append(await server.read())
    assert "before initialize" in refusals[0]["error"]["message"]
    assert still_uninitialized["error"]["code"] == -32002
    for reply in refusals:
        assert isinstance(reply, dict)
        assert (reply["id"], reply["error"]["code"]) == (None, -32600)
    assert "2025-06-18" in refusals[3]["error"]["message"]


async def test_tool_calls_running_at_once_are_bounded_and_all_answered(home: Path) -> None:
    # A client pipelining calls made the server start (and hold) all of them at once.
    count = MAX_CALLS_IN_FLIGHT + 6
    call = {"name": "server_status", "arguments": {}}
    async with raw_server(home, env={"MEMTRIO_FAULTS": "tool.call=delay:0.5"}) as server:
        await server.initialize()
        await server.send_bytes(
            b"".join(
                _line({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": call})
                for i in range(count)
            )
        )
        replies = [await server.read() for _ in range(count)]
    assert sorted(r["id"] for r in replies) == list(range(count))
    running = [r["result"]["structuredContent"]["calls_in_flight"] for r in replies]
    assert max(running) <= MAX_CALLS_IN_FLIGHT


async def test_an_answer_interrupted_while_being_sent_still_reaches_the_outbox() -> None:
    # A session crashing (or stopping) cancels a call just as it sends its answer:
    # the answer is taken, so nobody else answers that request; it must not be lost.
    from memtrio.actors.answers import Answer
    from memtrio.protocol.messages import Outbound
    from memtrio.supervisors.supervisor import Mailbox

    outbox = Mailbox("out")
    answer = Answer(outbox)
    with trio.CancelScope() as scope:
        scope.cancel()
        await answer.send(b'{"jsonrpc":"2.0","id":7,"result":{}}\n')
    assert scope.cancelled_caught
    assert outbox.receive_channel.receive_nowait() == Outbound(
        b'{"jsonrpc":"2.0","id":7,"result":{}}\n'
    )
    answer.send_nowait(b"a second answer to the same request\n")  # refused: answered once
    with pytest.raises(trio.WouldBlock):
        outbox.receive_channel.receive_nowait()
