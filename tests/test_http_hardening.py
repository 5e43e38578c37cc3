"""Streamable HTTP against hostile clients (issue 29, items 2, 6 and 7).

- Item 2: one session's SSE replay log pinned unbounded memory (the last 1,000
  events whatever their size, kept after DELETE). It is bounded in events and
  bytes per session and in bytes for the listener, oldest first; a reader or a
  resume behind a dropped event is told, never given a silent gap; DELETE frees it.
- Item 6: a refused Origin (403) still got ``Access-Control-Allow-Origin``.
- Item 7: ``Last-Event-ID: 0-<5,000 digits>`` (or unicode digits) answered 500.
  Every header and query parameter the listener parses is fuzzed for "never a
  500, never a traceback" against a real ``memtrio serve --ui``.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import quote

import httpx2
import pytest
import trio
import waits
from httpserve import BOTH, INIT, call, initialize, messages, serving, sse_events
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from launch import server_env
from memtrio.actors.net.connections import Connections
from memtrio.actors.net.http_asgi import HttpServer
from memtrio.actors.net.http_session import (
    EventsLost,
    HttpSession,
    ReplayBudget,
    ReplayLimits,
)
from memtrio.actors.net.listen import Listen
from memtrio.actors.ui.asgi import UiApp
from memtrio.actors.ui.guard import Guard
from memtrio.protocol import mcp
from memtrio.supervisors import config as config_mod
from memtrio.supervisors.app import build_context, default_features, open_app
from serve_helpers import serve_process

SSE = "text/event-stream"
KIB = 1024
MIB = 1024 * 1024


def note(i: int, size: int) -> bytes:
    """A server notification of about ``size`` bytes (it goes on the standalone stream)."""
    params = {"i": i, "pad": "x" * size}
    message = {"jsonrpc": "2.0", "method": "notifications/message", "params": params}
    return json.dumps(message).encode() + b"\n"


def answer(rid: int, size: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"pad": "y" * size}}).encode() + b"\n"


class Sessions:
    """HTTP sessions sharing one replay budget, without a server (the router's view)."""

    def __init__(self, tmp_path: Path, limits: ReplayLimits) -> None:
        home = tmp_path / "home"
        cfg = config_mod.load(home, env={"MEMTRIO_EMBEDDINGS": "off"})
        self.app = build_context(cfg, home, tmp_path)
        self.connections = Connections(16)
        self.budget = ReplayBudget(limits)

    def new(self, sid: str = "sid") -> HttpSession:
        return HttpSession(self.app, sid, self.connections.open("http", "test"), self.budget)


# -- item 2: the replay log ------------------------------------------------------------


async def test_item2_the_replay_log_keeps_at_most_replay_bytes_per_session(
    tmp_path: Path,
) -> None:
    sessions = Sessions(tmp_path, ReplayLimits(events=1000, session_bytes=256 * KIB))
    session = sessions.new()
    for i in range(100):
        session.deliver(note(i, 16 * KIB))
    assert session.kept_bytes <= 256 * KIB
    assert sessions.budget.used == session.kept_bytes
    kept = [json.loads(data)["params"]["i"] for _, data in session.standalone.events]
    assert kept == list(range(100 - len(kept), 100)) and 10 <= len(kept) < 16  # oldest went
    oldest = session.event_id(session.standalone, 1)
    assert session.find_event(oldest) is None  # a resume from there would miss events


async def test_item2_replay_total_bytes_bounds_every_session_together_oldest_first(
    tmp_path: Path,
) -> None:
    sessions = Sessions(
        tmp_path, ReplayLimits(events=1000, session_bytes=MIB, total_bytes=256 * KIB)
    )
    first, second = sessions.new("a"), sessions.new("b")
    for i in range(8):
        first.deliver(note(i, 16 * KIB))
    for i in range(20):
        second.deliver(note(i, 16 * KIB))
    assert sessions.budget.used <= 256 * KIB
    assert sessions.budget.used == first.kept_bytes + second.kept_bytes
    assert not first.standalone.events  # the listener's oldest events went first
    assert len(second.standalone.events) >= 10


async def test_item2_an_answer_larger_than_every_bound_is_still_delivered(
    tmp_path: Path,
) -> None:
    limits = ReplayLimits(events=10, session_bytes=64 * KIB, total_bytes=64 * KIB)
    session = Sessions(tmp_path, limits).new()
    stream = session.open_stream([1])
    reader = object()
    stream.reader = reader
    session.deliver(answer(1, 300 * KIB))
    events = await session.next_events(stream, 0, reader)
    assert events is not None and json.loads(events[0][1])["id"] == 1
    assert stream.done


async def test_item2_a_reader_behind_a_dropped_event_is_told_not_given_a_gap(
    tmp_path: Path,
) -> None:
    session = Sessions(tmp_path, ReplayLimits(events=5)).new()
    stream = session.standalone
    reader = object()
    stream.reader = reader
    session.deliver(note(0, 10))
    first = await session.next_events(stream, 0, reader)
    assert first is not None
    position = first[-1][0]
    for i in range(1, 20):  # the client reads nothing meanwhile
        session.deliver(note(i, 10))
    with pytest.raises(EventsLost):
        await session.next_events(stream, position, reader)
    assert session.find_event(session.event_id(stream, position)) is None


async def test_item2_ending_a_session_frees_its_replay_log(tmp_path: Path) -> None:
    sessions = Sessions(tmp_path, ReplayLimits())
    session, other = sessions.new("a"), sessions.new("b")
    for i in range(50):
        session.deliver(note(i, 4 * KIB))
        other.deliver(note(i, 100))
    posted = session.open_stream([7])
    session.deliver(answer(7, 64 * KIB))
    assert posted.events
    session.retire()  # DELETE or expiry: no resume can come
    assert session.kept_bytes == 0 and not session.kept and not posted.events
    session.end()
    assert sessions.budget.used == other.kept_bytes > 0


async def test_item2_a_resume_from_an_event_that_left_the_replay_log_is_404(
    tmp_path: Path,
) -> None:
    env = {"MEMTRIO_HTTP_REPLAY_BYTES": str(64 * KIB)}
    async with serving(tmp_path, env=env) as served, httpx2.AsyncClient() as http:
        sid = await initialize(http, served.url)
        headers = {"accept": BOTH, "mcp-session-id": sid}
        stored = await http.post(
            served.url, json=call(1, "remember", {"content": "z " * 10_000}), headers=headers
        )
        memory = messages(stored.text)[0]["result"]["structuredContent"]["id"]  # type: ignore[index]
        primings = []
        for rid in range(2, 9):  # answers of about 40 KB: the first ones leave the log
            got = await http.post(
                served.url, json=call(rid, "inspect", {"id": memory}), headers=headers
            )
            primings.append(sse_events(got.text)[0]["id"])
        resume = {"accept": SSE, "mcp-session-id": sid}
        gone = await http.get(served.url, headers={**resume, "last-event-id": primings[0]})
        assert gone.status_code == 404
        assert "replay log" in gone.json()["error"]["message"]
        kept = await http.get(served.url, headers={**resume, "last-event-id": primings[-1]})
        assert kept.status_code == 200
        assert [m["id"] for m in messages(kept.text)] == [8]


async def test_item2_json_answers_leave_the_replay_log_once_sent(tmp_path: Path) -> None:
    env = {"MEMTRIO_HTTP_REPLAY_BYTES": str(64 * KIB)}
    async with serving(tmp_path, env=env) as served, httpx2.AsyncClient() as http:
        sid = await initialize(http, served.url)
        headers = {"accept": BOTH, "mcp-session-id": sid}
        stored = await http.post(
            served.url, json=call(1, "remember", {"content": "z " * 10_000}), headers=headers
        )
        memory = messages(stored.text)[0]["result"]["structuredContent"]["id"]  # type: ignore[index]
        streamed = await http.post(
            served.url, json=call(2, "inspect", {"id": memory}), headers=headers
        )
        priming = sse_events(streamed.text)[0]["id"]
        as_json = {"accept": "application/json", "mcp-session-id": sid}
        for rid in range(3, 13):  # 400 KB of JSON answers: none of it is kept
            got = await http.post(
                served.url, json=call(rid, "inspect", {"id": memory}), headers=as_json
            )
            assert got.json()["id"] == rid
        resumed = await http.get(
            served.url, headers={"accept": SSE, "mcp-session-id": sid, "last-event-id": priming}
        )
        assert resumed.status_code == 200 and [m["id"] for m in messages(resumed.text)] == [2]


AFTER_DELETE_MIB = 32
"""How far above its warm baseline a server's RSS may stay once a session streaming large
answers is deleted."""


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


async def stream_large_answers(tmp_path: Path, answers: int) -> dict[str, float]:
    """A real ``memtrio serve``: one session streams ``answers`` SSE answers of about 1 MB,
    resumes the last stream, then ends (DELETE); its RSS figures (MiB)."""
    home = tmp_path / "home"
    home.mkdir()
    args = ["--transport", "http", "--bind", "127.0.0.1:0"]
    figures: dict[str, float] = {}
    async with (
        serve_process(home, args, env={"MEMTRIO_CODE": "off"}) as served,
        httpx2.AsyncClient(timeout=60) as http,
    ):
        pid = served.pid
        sid = await initialize(http, served.url)
        headers = {"accept": BOTH, "mcp-session-id": sid}
        stored = await http.post(
            served.url, json=call(1, "remember", {"content": "replay " * 71_500}), headers=headers
        )
        memory = messages(stored.text)[0]["result"]["structuredContent"]["id"]  # type: ignore[index]
        peak = 0.0
        priming = ""
        for n in range(answers + 1):
            got = await http.post(
                served.url, json=call(10 + n, "inspect", {"id": memory}), headers=headers
            )
            events = sse_events(got.text)
            assert got.status_code == 200 and len(events[-1]["data"]) > 900_000
            priming = events[0]["id"]
            if n == 0:
                figures["baseline"] = rss_mib(pid)  # after one answer: the server is warm
            else:
                peak = max(peak, rss_mib(pid))
        figures["streaming_peak"] = peak
        resumed = await http.get(
            served.url, headers={"accept": SSE, "mcp-session-id": sid, "last-event-id": priming}
        )
        assert resumed.status_code == 200 and [m["id"] for m in messages(resumed.text)] == [
            10 + answers
        ]
        figures["after_resume"] = rss_mib(pid)
        assert (await http.delete(served.url, headers={"mcp-session-id": sid})).status_code == 204
        # The memory goes back once the session's replay log is dropped: as soon as the RSS
        # is back within bound (the callers assert it; 10 s is only how long it may take).
        with contextlib.suppress(trio.TooSlowError):
            await waits.until(lambda: rss_mib(pid) - figures["baseline"] < AFTER_DELETE_MIB, 10)
        figures["after_delete"] = rss_mib(pid)
    return figures


async def test_item2_rss_stays_bounded_while_one_session_streams_1mb_answers(
    tmp_path: Path,
) -> None:
    figures = await stream_large_answers(tmp_path, 120)
    base = figures["baseline"]
    assert figures["streaming_peak"] - base < 64, figures
    assert figures["after_resume"] - base < 64, figures
    assert figures["after_delete"] - base < AFTER_DELETE_MIB, figures


@pytest.mark.slow
async def test_item2_rss_stays_bounded_while_one_session_streams_500_answers_of_1mb(
    tmp_path: Path,
) -> None:
    figures = await stream_large_answers(tmp_path, 500)
    base = figures["baseline"]
    assert figures["streaming_peak"] - base < 64, figures
    assert figures["after_resume"] - base < 64, figures
    assert figures["after_delete"] - base < AFTER_DELETE_MIB, figures


# -- item 6: a refused origin is granted nothing ------------------------------------------

EVIL = "https://evil.example"


def grants(response: httpx2.Response) -> list[str]:
    return [name for name in response.headers if name.lower().startswith("access-control-")]


async def test_item6_a_refused_origin_gets_no_cors_grant_on_any_method(tmp_path: Path) -> None:
    async with serving(tmp_path) as served, httpx2.AsyncClient() as http:
        sid = await initialize(http, served.url)
        preflight = {"origin": EVIL, "access-control-request-method": "POST"}
        for method, headers, body in (
            ("POST", {"accept": BOTH}, json.dumps(INIT)),
            ("POST", {"accept": BOTH, "mcp-session-id": sid}, '{"jsonrpc":"2.0","id":1,"method":"ping"}'),
            ("GET", {"accept": SSE, "mcp-session-id": sid}, None),
            ("DELETE", {"mcp-session-id": sid}, None),
            ("OPTIONS", preflight, None),
            ("PUT", {}, "x"),
        ):  # fmt: skip
            got = await http.request(
                method, served.url, headers={"origin": EVIL, **headers}, content=body
            )
            assert got.status_code == 403, (method, got.status_code)
            assert grants(got) == [], (method, got.headers)
        allowed = await http.options(
            served.url, headers={**preflight, "origin": "http://localhost:5173"}
        )
        assert allowed.status_code == 204
        assert allowed.headers["access-control-allow-origin"] == "http://localhost:5173"


DASHBOARD_BASE = "http://127.0.0.1:7700"


@contextlib.asynccontextmanager
async def dashboard_client(tmp_path: Path) -> AsyncIterator[httpx2.AsyncClient]:
    """An HTTP client of ``memtrio serve --ui``'s application (the MCP endpoint and the
    dashboard, token ``tok``), in process, on a fresh home."""
    home = tmp_path / "home"
    cfg = config_mod.load(home, env={"MEMTRIO_EMBEDDINGS": "off", "MEMTRIO_CODE": "off"})
    app = build_context(cfg, home, tmp_path)
    async with open_app(app, default_features()), trio.open_nursery() as nursery:
        ui = UiApp(app, Guard("tok"))
        server = HttpServer(app, Listen(transport="http"), Connections(4), nursery, extra=ui)
        async with httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=server), base_url=DASHBOARD_BASE
        ) as http:
            yield http
        nursery.cancel_scope.cancel()


async def test_item6_the_dashboard_grants_no_cors_to_a_refused_origin(tmp_path: Path) -> None:
    async with dashboard_client(tmp_path) as http:
        token = {"x-memtrio-token": "tok", "origin": EVIL}
        for method, path in (
            ("GET", "/api/memories"),
            ("POST", "/api/update"),
            ("OPTIONS", "/api/memories"),
            ("GET", "/"),
            ("OPTIONS", "/mcp"),
            ("POST", "/mcp"),
        ):
            got = await http.request(method, path, headers=token, content=b"{}")
            assert got.status_code < 500, (method, path, got.status_code)
            assert grants(got) == [], (method, path, got.headers)


# -- a refusal sent before the request's body is read closes the connection, and says so --


async def read_head(stream: trio.SocketStream) -> bytes:
    data = b""
    with trio.fail_after(30):
        while b"\r\n\r\n" not in data:
            data += await stream.receive_some(4096)
    return data.split(b"\r\n\r\n", 1)[0].lower()


async def test_a_refusal_before_the_body_says_the_connection_closes(tmp_path: Path) -> None:
    # A client sent its headers, got its 401 before the body went out, then sent the body.
    # hypercorn closes such a connection once the body is in. Without `Connection: close`
    # a keep-alive client (httpx, seen in a CI run) sent its next request, with the right
    # token, on that connection and got "server disconnected" instead of an answer.
    async with serving(tmp_path, token="right-token") as served:
        port = int(served.url.rsplit(":", 1)[1].split("/", 1)[0])
        body = json.dumps(INIT).encode()
        head = (
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"accept: {BOTH}\r\nauthorization: Bearer wrong\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        ).encode()
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(head)
            got = await read_head(stream)
            assert got.startswith(b"http/1.1 401") and b"\r\nconnection: close" in got, got
            await stream.send_all(body)
        # With the right token, on a connection of its own, the same request is answered.
        async with httpx2.AsyncClient(timeout=60) as http:
            for token in ("wrong", "right-token", "wrong", "right-token"):
                answer = await http.post(
                    served.url,
                    json=INIT,
                    headers={"accept": BOTH, "authorization": f"Bearer {token}"},
                )
                assert answer.status_code == (401 if token == "wrong" else 200)
                # A refusal of a request whose body was read keeps the connection.
                assert answer.headers.get("connection") == (
                    "close" if token == "wrong" else None
                ), answer.headers


JSON_TYPE = {"content-type": "application/json"}


async def test_the_dashboard_says_a_refused_writes_connection_closes(tmp_path: Path) -> None:
    async with dashboard_client(tmp_path) as http:
        for origin, status in ((EVIL, 403), (DASHBOARD_BASE, 401)):
            refused = await http.post(
                "/api/update",
                headers={**JSON_TYPE, "x-memtrio-token": "no", "origin": origin},
                content=b"{}",
            )
            assert refused.status_code == status and refused.headers["connection"] == "close"
        read = await http.get("/api/overview", headers={"x-memtrio-token": "no"})
        assert read.status_code == 401 and "connection" not in read.headers  # no body


# -- item 7: malformed headers are 4xx ------------------------------------------------------

BAD_EVENT_IDS = [
    "0-" + "9" * 5000,  # past Python's integer-string limit
    "9" * 5000 + "-1",
    "0-²",  # str.isdigit() says yes, int() says no
    "²-1",
    "0-١",  # Arabic-Indic digit one
    "０-１",  # fullwidth
    "-1-1",
    "0--1",
    "0-1-1",
    "0-",
    "-",
    "",
    "x-1",
    "0-1e3",
    "0-0x10",
    "0 -1",
    "0-1\u00e9",
    "\u00ff\u00fe",
    "1-1",  # well formed: no stream 1
    "0-99999999999999999",  # well formed: never issued
    "999999999999999999-1",
]


def raw(value: str) -> bytes:
    """A header value as bytes: Latin-1 where it can be (the server reads headers as
    Latin-1, so "²" arrives as "²"), else UTF-8."""
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode()


@pytest.mark.parametrize("last", BAD_EVENT_IDS, ids=range(len(BAD_EVENT_IDS)))
async def test_item7_a_malformed_last_event_id_is_400_or_404_never_500(
    tmp_path: Path, last: str
) -> None:
    async with serving(tmp_path) as served, httpx2.AsyncClient() as http:
        sid = await initialize(http, served.url)
        got = await http.get(
            served.url,
            headers={"accept": SSE, "mcp-session-id": sid, "last-event-id": raw(last)},
        )
        assert got.status_code in (400, 404), (got.status_code, got.text[:300])
        message = got.json()["error"]["message"]
        assert "Last-Event-ID" in message and len(message) < 600
        ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
        again = await http.post(
            served.url, json=ping, headers={"accept": BOTH, "mcp-session-id": sid}
        )
        assert again.json() == {"jsonrpc": "2.0", "id": 9, "result": {}}  # the session goes on


# -- item 7: every parsed header and query parameter, fuzzed ---------------------------------

TOKEN = "fuzz-token-1234"
LISTENING = re.compile(rb"listening on http://127\.0\.0\.1:(\d+)/mcp")


class RawServer:
    """A ``memtrio serve --ui`` child for raw HTTP/1.1 requests (stopped by its pid)."""

    def __init__(self, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        token_file = home.parent / "token"
        token_file.write_text(TOKEN)
        token_file.chmod(0o600)
        self.log = home.parent / "serve.stderr"
        with self.log.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "memtrio.supervisors.cli", "serve", "--transport", "http",
                 "--bind", "127.0.0.1:0", "--ui", "--auth-token-file", str(token_file)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                env=server_env(home, {"MEMTRIO_CODE": "off"}), cwd=str(home),
            )  # fmt: skip

        def up() -> bool:
            return self.proc.poll() is not None or bool(LISTENING.search(self.log.read_bytes()))

        found = LISTENING.search(self.log.read_bytes()) if waits.until_sync(up, 60) else None
        if found is None:
            self.stop()
            raise AssertionError(f"memtrio serve did not start: {self.stderr()}")
        self.port = int(found[1])
        self.sid = self.session()

    def stderr(self) -> str:
        return self.log.read_bytes().decode(errors="replace")

    def session(self) -> str:
        body = json.dumps(INIT).encode()
        status, head, _ = self.exchange(
            b"POST", b"/mcp", [(b"accept", BOTH.encode()), (b"content-type", b"application/json"),
                               (b"authorization", f"Bearer {TOKEN}".encode())], body)  # fmt: skip
        assert status == 200, head
        return re.search(rb"mcp-session-id: (\S+)", head, re.IGNORECASE)[1].decode()  # type: ignore[index]

    def exchange(
        self, method: bytes, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes,
        length: bytes | None = None,
    ) -> tuple[int, bytes, bytes]:  # fmt: skip
        """One request on a new connection: (status, head, the start of the body)."""
        lines = [method + b" " + target + b" HTTP/1.1", b"connection: close"]
        if not any(name == b"host" for name, _ in headers):
            lines.append(b"host: 127.0.0.1")
        lines += [name + b": " + value for name, value in headers]
        lines.append(b"content-length: " + (str(len(body)).encode() if length is None else length))
        request = b"\r\n".join(lines) + b"\r\n\r\n" + body
        with socket.create_connection(("127.0.0.1", self.port), timeout=15) as sock:
            sock.sendall(request)
            received = b""
            while b"\r\n\r\n" not in received:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += chunk
            head, _, rest = received.partition(b"\r\n\r\n")
            if b"text/event-stream" not in head.lower():  # a stream stays open: head only
                with_length = re.search(rb"content-length: (\d+)", head, re.IGNORECASE)
                want = int(with_length[1]) if with_length else 65536
                while len(rest) < min(want, 65536):
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    rest += chunk
        status = re.match(rb"HTTP/1\.1 (\d{3})", head)
        assert status is not None, received[:300]
        return int(status[1]), head, rest

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def raw_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawServer]:
    server = RawServer(tmp_path_factory.mktemp("fuzz") / "home")
    try:
        yield server
    finally:
        server.stop()


# Header values h11 lets through: visible ASCII, obs-text (0x80-0xff), inner spaces/tabs.
value_chars = st.characters(codec="latin-1", exclude_categories=("Cc",)) | st.sampled_from(" \t")
fuzz_text = st.text(value_chars, max_size=40).map(lambda v: v.strip(" \t"))
tricky = st.sampled_from(
    ["0-" + "9" * 5000, "9" * 5000, "²", "١", "-1", "0", "1-1", "0-1", "*/*", "text/*",
     "application/json", "text/event-stream", "application/json, text/event-stream",
     "2025-11-25", "2024-11-05", "bearer", f"Bearer {TOKEN}", f"bearer  {TOKEN} ",
     "http://localhost:1", "null", "http://[::1", "[::1", "127.0.0.1:99999999", "é"]
)  # fmt: skip


def values(*valid: str) -> st.SearchStrategy[str]:
    return (
        st.one_of(st.sampled_from(valid), tricky, fuzz_text)
        if valid
        else st.one_of(tricky, fuzz_text)
    )


HEADERS = {
    b"authorization": values(f"Bearer {TOKEN}"),
    b"mcp-session-id": values("SID"),
    b"mcp-protocol-version": values("2025-11-25"),
    b"accept": values(BOTH, SSE, "application/json"),
    b"content-type": values("application/json"),
    b"last-event-id": values("0-1", "SID-1"),
    b"origin": values("http://127.0.0.1:7700", "http://localhost"),
    b"host": values("127.0.0.1:7700", "localhost", "[::1"),
    b"x-memtrio-token": values(TOKEN),
    b"sec-fetch-site": values("same-origin"),
    b"access-control-request-method": values("POST"),
}
QUERY_KEYS = ["q", "limit", "offset", "id", "since", "until", "min_importance", "scopes",
              "depth", "mode", "sort", "order", "type", "scope", "from", "to", "entity"]  # fmt: skip
# The text items of tool results in a raw body.
TOOL_TEXT = re.compile(rb'"type":"text","text":"((?:[^"\\]|\\.)*)"')
BODIES = [
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
    b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"stats","arguments":{}}}',
    b'[{"jsonrpc":"2.0","id":3,"method":"ping"}]',
    b'{"content":"x"}',
    b"",
    b"\xff\xfe{",
]

requests = st.fixed_dictionaries(
    {
        "method": st.sampled_from([b"GET", b"POST", b"DELETE", b"OPTIONS", b"PUT", b"HEAD"]),
        "path": st.sampled_from(["/mcp", "/mcp/", "/", "/index.html", "/api/memories",
                                 "/api/memory", "/api/graph", "/api/search", "/api/update",
                                 "/api/%2e%2e/x", "/nope"]),  # fmt: skip
        "query": st.dictionaries(st.sampled_from(QUERY_KEYS), st.one_of(tricky, fuzz_text), max_size=3),
        "headers": st.dictionaries(st.sampled_from(list(HEADERS)), st.just(None), max_size=7).flatmap(
            lambda names: st.fixed_dictionaries({name: HEADERS[name] for name in names})
        ),
        "body": st.one_of(st.sampled_from(BODIES), st.binary(max_size=64)),
        "length": st.sampled_from([None, b"0" * 3, b"9" * 30, b"9" * 5000, b"\xc2\xb2", b"+1", b"-1"]),
    }
)  # fmt: skip


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(requests)
def test_item7_fuzzed_headers_and_query_never_get_a_500_or_a_traceback(
    raw_server: RawServer, case: dict[str, object]
) -> None:
    path = str(case["path"])
    query = case["query"]
    assert isinstance(query, dict)
    if query:
        path += "?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in query.items())
    headers = case["headers"]
    assert isinstance(headers, dict)
    raw = [(name, value.replace("SID", raw_server.sid).encode()) for name, value in headers.items()]
    body = case["body"]
    length = case["length"]
    if length is not None and length not in (b"0" * 3,):
        body = b""  # a length that is not the body's: send nothing after it
    elif length is not None:
        length = str(len(body)).zfill(3).encode()
    assert isinstance(body, bytes)
    status, head, rest = raw_server.exchange(
        case["method"],  # type: ignore[arg-type]
        path.encode(),
        raw,
        body,
        length,  # type: ignore[arg-type]
    )
    assert status != 500 and status < 600, (status, head, rest[:300])
    assert b"Traceback" not in rest
    # A JSON-RPC answer in the body (JSON or SSE) is no internal failure either.
    assert b'"code":-32603' not in rest, rest[:300]
    texts = (json.loads(b'"' + t + b'"') for t in TOOL_TEXT.findall(rest))
    assert not any(map(mcp.is_tool_failure, texts)), rest[:300]


def test_item7_the_fuzzed_server_logged_no_traceback(raw_server: RawServer) -> None:
    """Runs after the fuzz (same module server): nothing it sent made an exception escape."""
    status, _, _ = raw_server.exchange(
        b"GET", b"/mcp", [(b"accept", SSE.encode()), (b"last-event-id", b"0-" + b"9" * 5000),
                          (b"authorization", f"Bearer {TOKEN}".encode()),
                          (b"mcp-session-id", raw_server.sid.encode())], b"")  # fmt: skip
    # 400: the bad Last-Event-ID; 404: a fuzzed DELETE with the session's id (Hypothesis
    # draws one in some runs) ended the session first. Either way nothing escaped:
    assert status in (400, 404), status
    log = raw_server.stderr()
    assert "Traceback" not in log and "Error in ASGI" not in log, log[-3000:]
