"""The reader's line splitting: bounded, never buffering an oversized line whole."""

from __future__ import annotations

from pathlib import Path

from memtrio.actors.stdio import LineSplitter, ReaderState, recover_id
from memtrio.protocol.messages import Inbound, Oversized
from raw_server import raw_server, trace_events, wait_for_event


def lines_of(items: list) -> list[bytes]:
    return [line for item in items if isinstance(item, Inbound) for line in item.lines]


def test_lines_split_across_reads_are_joined() -> None:
    splitter = LineSplitter(ReaderState(), limit=1024)
    out = splitter.feed(b'{"a":1}\n{"b"') + splitter.feed(b':2}\r\n\n  \n{"c":3}')
    assert lines_of(out) == [b'{"a":1}', b'{"b":2}']
    assert lines_of(splitter.finish()) == [b'{"c":3}']


def test_oversized_line_is_dropped_as_it_arrives_and_reported_with_its_id() -> None:
    state = ReaderState()
    splitter = LineSplitter(state, limit=100)
    out = splitter.feed(b'{"jsonrpc":"2.0","id":42,"method":"x","params":"' + b"y" * 150)
    assert out == [] and state.discarding and len(state.buffer) == 0
    for _ in range(10):
        assert splitter.feed(b"z" * 1000) == []
        assert len(state.buffer) == 0  # nothing of it is kept
    out = splitter.feed(b'"}\n{"ok":1}\n')
    assert isinstance(out[0], Oversized) and out[0].id_hint == 42 and out[0].size > 10000
    assert lines_of(out) == [b'{"ok":1}']


def test_recover_id() -> None:
    assert recover_id(b'{"jsonrpc":"2.0","id":"abc","method"') == "abc"
    assert recover_id(b'{"id": -3,') == -3
    assert recover_id(b"garbage") is None


async def test_reader_crash_loses_no_input(home: Path) -> None:
    # The reader crashes right before its 2nd read, holding the first half of a
    # line; the next incarnation completes it. Every read attempt is logged (a
    # zero delay), so each piece is sent once the reader has taken the last.
    # `initialize` and the call after it are read before the reader starts
    # (actors.stdio.EarlyAnswers, which the fault point does not count): the call's
    # answer means the reader runs.
    spec = "stdio.read=raise@2,stdio.read=delay:0"
    async with raw_server(home, env={"MEMTRIO_FAULTS": spec}) as server:
        await server.initialize()
        await server.send_request(0, "tools/list")  # answered early, not read by the reader
        await server.send_request(9, "tools/call", {"name": "server_status", "arguments": {}})
        assert [(await server.read())["id"] for _ in range(2)] == [0, 9]
        await wait_for_event(home, "fault_injected", point="stdio.read", hit=1)
        await server.send_bytes(b'{"jsonrpc":"2.0","id":1,"me')  # read 1
        await wait_for_event(home, "restart", child="stdio.reader")  # the 2nd read crashed
        await server.send_bytes(b'thod":"ping"}\n')
        await server.send_request(2, "ping")
        replies = [await server.read(), await server.read()]
        await server.close_stdin()
        assert await server.wait() == 0
    assert [r["id"] for r in replies] == [1, 2]
    restarts = [
        e
        for e in trace_events(home)
        if e["event"] == "restart" and e.get("child") == "stdio.reader"
    ]
    assert len(restarts) == 1
