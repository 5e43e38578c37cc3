"""One HTTP session's router and streams (``actors.net.http_session``), and a crash inside
one session's actors, which the other sessions and the listener never notice."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
from httpserve import BOTH, initialize, serving
from memtrio.actors.net import http_session
from memtrio.actors.net.connections import Connections
from memtrio.actors.net.http_session import HttpSession
from memtrio.supervisors import config as config_mod
from memtrio.supervisors import faults
from memtrio.supervisors.app import build_context


def new_session(tmp_path: Path) -> HttpSession:
    home = tmp_path / "home"
    app = build_context(config_mod.load(home, env={"MEMTRIO_EMBEDDINGS": "off"}), home, tmp_path)
    return HttpSession(app, "sid", Connections(4).open("http", "test"))


def line(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def datas(session: HttpSession, stream: http_session.Stream) -> list[object]:
    return [json.loads(data) for _, data in stream.events if data]


async def test_router_sends_answers_to_their_post_and_server_messages_to_the_get_stream(
    tmp_path: Path,
) -> None:
    session = new_session(tmp_path)
    one = session.open_stream([1])
    batch = session.open_stream(["a", "b"])
    roots = {"jsonrpc": "2.0", "id": "srv-1", "method": "roots/list"}
    session.deliver(line(roots))  # no GET open: it waits on the standalone stream
    session.deliver(line({"jsonrpc": "2.0", "id": 1, "result": {}}))
    session.deliver(
        line(
            [
                {"jsonrpc": "2.0", "id": "b", "result": {}},
                {"jsonrpc": "2.0", "id": "a", "result": {}},
            ]
        )
    )
    assert datas(session, one) == [{"jsonrpc": "2.0", "id": 1, "result": {}}] and one.done
    assert len(datas(session, batch)[0]) == 2 and batch.done  # type: ignore[arg-type]
    assert datas(session, session.standalone) == [roots]
    reader = object()
    session.standalone.reader = reader
    backlog = await session.next_events(session.standalone, session.standalone.delivered, reader)
    assert backlog is not None and json.loads(backlog[0][1]) == roots


async def test_a_cancelled_request_ends_its_stream_and_its_late_answer_is_dropped(
    tmp_path: Path,
) -> None:
    session = new_session(tmp_path)
    stream = session.open_stream([7])
    session.cancel(7)
    assert stream.done and not session.in_flight([7])
    session.deliver(line({"jsonrpc": "2.0", "id": 7, "result": {}}))
    assert datas(session, stream) == [] and datas(session, session.standalone) == []


async def test_the_event_log_keeps_the_last_events_of_the_session(tmp_path: Path) -> None:
    session = new_session(tmp_path)
    total = session.limits.events + 50
    for i in range(total):
        session.deliver(
            line({"jsonrpc": "2.0", "method": "notifications/message", "params": {"i": i}})
        )
    kept = [json.loads(data)["params"]["i"] for _, data in session.standalone.events]
    assert kept == list(range(50, total))
    first_kept = session.standalone.events[0][0]
    found = session.find_event(session.event_id(session.standalone, first_kept))
    assert found == (session.standalone, first_kept)
    assert session.find_event("99-1") is None


async def test_a_crashing_session_restarts_alone(tmp_path: Path) -> None:
    def ping(rid: int) -> dict[str, object]:
        return {"jsonrpc": "2.0", "id": rid, "method": "ping"}

    async with serving(tmp_path) as served, httpx2.AsyncClient() as http:
        first = await initialize(http, served.url)
        second = await initialize(http, served.url)
        faults.configure("session.dispatch=raise@1")
        crashed = await http.post(
            served.url, json=ping(5), headers={"accept": BOTH, "mcp-session-id": first}
        )
        faults.configure(None)
        assert crashed.json()["error"]["code"] == -32603
        for sid in (first, second):
            again = await http.post(
                served.url, json=ping(6), headers={"accept": BOTH, "mcp-session-id": sid}
            )
            assert again.json() == {"jsonrpc": "2.0", "id": 6, "result": {}}
        assert served.connections.failed == 0 and len(served.connections.live) == 2
