"""An authorised client of ``memtrio serve`` that measures ``ping`` (`Probe`): on a kept
session and on fresh connections, over TCP (the token line, or the attach endpoint's
proof), Streamable HTTP (`HttpLink`: HTTP/1.1 kept alive, by hand) and WebSocket. Used by
`actors.chaos.flood` while a flood runs."""

from __future__ import annotations

import json
import time
from typing import Any

import trio
from trio_websocket import WebSocketConnection, connect_websocket

from ..net.attach import CLOSED_PROBE_PAUSE, CLOSED_PROBE_TRIES
from ..net.proof import NoProof, prove
from .client import initialize_params, request_message

# The attach endpoint's proof: (its secret, the server's pid, the endpoint's port).
Attach = tuple[bytes, int, int]

# Seconds the measuring client waits for one answer.
ANSWER_TIMEOUT = 10.0
PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
INITIALIZE = request_message("initialize", initialize_params("flood-probe"), 0)
STATUS = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"server_status","arguments":{}}}'
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'


class HttpLink:
    """HTTP/1.1 requests on one kept-alive connection (answers with ``Content-Length`` or
    chunked)."""

    def __init__(self, stream: trio.SocketStream, host: str, port: int, token: str) -> None:
        self.stream = stream
        self.address = (host, port)
        self.host = host
        self.token = token
        self.buffer = b""

    async def post(
        self, body: bytes, session: str | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """One request; on a kept-alive connection the server closed meanwhile (its
        keep-alive timeout), once more on a new connection, as HTTP clients do."""
        try:
            return await self._post(body, session)
        except (trio.BrokenResourceError, EOFError):
            await trio.aclose_forcefully(self.stream)
            self.stream = await trio.open_tcp_stream(*self.address)
            self.buffer = b""
            return await self._post(body, session)

    async def _post(
        self, body: bytes, session: str | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        headers = (
            f"POST /mcp HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Bearer {self.token}\r\n"
            "Content-Type: application/json\r\nAccept: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
        )
        if session is not None:
            headers += f"Mcp-Session-Id: {session}\r\n"
        await self.stream.send_all(headers.encode() + b"\r\n" + body)
        while b"\r\n\r\n" not in self.buffer:
            await self._more()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        fields = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        if fields.get("transfer-encoding", "").lower() == "chunked":
            return status, fields, await self._chunks()
        size = int(fields.get("content-length", "0"))
        return status, fields, await self._take(size)

    async def _take(self, size: int) -> bytes:
        while len(self.buffer) < size:
            await self._more()
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    async def _chunks(self) -> bytes:
        body = b""
        while True:
            while b"\r\n" not in self.buffer:
                await self._more()
            line, _, self.buffer = self.buffer.partition(b"\r\n")
            size = int(line.split(b";")[0], 16)
            chunk = await self._take(size + 2)
            if size == 0:
                return body
            body += chunk[:-2]

    async def _more(self) -> None:
        data = await self.stream.receive_some(65536)
        if not data:
            raise EOFError("the server closed the connection")
        self.buffer += data


class Probe:
    """An authorised client of one transport: a session kept open (`ping`) and pings on
    fresh connections (`fresh_ping`: connect, authenticate, ping, close)."""

    def __init__(
        self, kind: str, host: str, port: int, token: str, attach: Attach | None = None
    ) -> None:
        self.kind = kind
        self.host = host
        self.port = port
        self.token = token
        # The attach endpoint's proof (``actors.net.proof``) in place of the token line.
        self.attach = attach
        self.tcp: trio.SocketStream | None = None
        self.tcp_buffer = b""
        self.http: HttpLink | None = None
        self.session: str | None = None
        self.ws: WebSocketConnection | None = None

    async def open(self, nursery: trio.Nursery) -> None:
        """Open the kept session (initialized)."""
        init = json.dumps(INITIALIZE).encode()
        if self.kind == "tcp":
            self.tcp = await trio.open_tcp_stream(self.host, self.port)
            if self.attach is not None:
                self.tcp_buffer = await prove(self.tcp, *self.attach)
                await self.tcp.send_all(init + b"\n")
            else:
                await self.tcp.send_all(f"Bearer {self.token}\n".encode() + init + b"\n")
            await self._tcp_line()
            await self.tcp.send_all(INITIALIZED + b"\n")
        elif self.kind == "http":
            self.http = await self._http_link()
            status, fields, _ = await self.http.post(init)
            if status != 200:
                raise RuntimeError(f"initialize answered {status}")
            self.session = fields.get("mcp-session-id")
            await self.http.post(INITIALIZED, self.session)
        else:
            self.ws = await self._ws(nursery)
            await self.ws.send_message(init.decode())
            await self.ws.get_message()
            await self.ws.send_message(INITIALIZED.decode())

    async def _tcp_line(self, stream: trio.SocketStream | None = None, rest: bytes = b"") -> bytes:
        target = stream or self.tcp
        assert target is not None
        buffer = self.tcp_buffer if stream is None else rest
        while b"\n" not in buffer:
            data = await target.receive_some(65536)
            if not data:
                raise EOFError("the server closed the connection")
            buffer += data
        line, _, rest = buffer.partition(b"\n")
        if stream is None:
            self.tcp_buffer = rest
        return line

    async def _http_link(self) -> HttpLink:
        stream = await trio.open_tcp_stream(self.host, self.port)
        return HttpLink(stream, self.host, self.port, self.token)

    async def _ws(self, nursery: trio.Nursery) -> WebSocketConnection:
        return await connect_websocket(
            nursery,
            self.host,
            self.port,
            "/",
            use_ssl=False,
            extra_headers=[(b"Authorization", f"Bearer {self.token}".encode())],
        )

    async def ping(self) -> float:
        """Seconds one ping takes on the kept session."""
        start = time.perf_counter()
        with trio.fail_after(ANSWER_TIMEOUT):
            if self.tcp is not None:
                await self.tcp.send_all(PING + b"\n")
                await self._tcp_line()
            elif self.http is not None:
                status, _, _ = await self.http.post(PING, self.session)
                if status != 200:
                    raise RuntimeError(f"ping answered {status}")
            else:
                assert self.ws is not None
                await self.ws.send_message(PING.decode())
                await self.ws.get_message()
        return time.perf_counter() - start

    async def _fresh_stream(self) -> tuple[trio.SocketStream, bytes]:
        """A new TCP connection, proven on the attach endpoint as a ``memtrio mcp`` child
        proves it: a live server that closes it unproven (a flood displaced it) is asked
        again, `attach.CLOSED_PROBE_TRIES` times in all, as `attach.find_owner` does."""
        for attempt in range(CLOSED_PROBE_TRIES):
            stream = await trio.open_tcp_stream(self.host, self.port)
            if self.attach is None:
                return stream, b""
            try:
                return stream, await prove(stream, *self.attach)
            except NoProof as exc:
                await trio.aclose_forcefully(stream)
                if exc.wrong or attempt + 1 == CLOSED_PROBE_TRIES:
                    raise
            await trio.sleep(CLOSED_PROBE_PAUSE)
        raise AssertionError("unreachable")

    async def fresh_ping(self, nursery: trio.Nursery) -> float:
        """Seconds from connecting to the answer of a ping on a new connection."""
        start = time.perf_counter()
        with trio.fail_after(ANSWER_TIMEOUT):
            if self.kind == "tcp":
                stream, rest = await self._fresh_stream()
                try:
                    if self.attach is not None:
                        await stream.send_all(PING + b"\n")
                    else:
                        await stream.send_all(f"Bearer {self.token}\n".encode() + PING + b"\n")
                    reply = await self._tcp_line(stream, rest)
                finally:
                    await trio.aclose_forcefully(stream)
                if b'"result"' not in reply:
                    raise RuntimeError(f"ping answered {reply[:200]!r}")
            elif self.kind == "http":
                link = await self._http_link()
                try:
                    status, _, _ = await link.post(PING, self.session)
                finally:
                    await trio.aclose_forcefully(link.stream)
                if status != 200:
                    raise RuntimeError(f"ping answered {status}")
            else:
                async with trio.open_nursery() as own:
                    ws = await self._ws(own)
                    await ws.send_message(PING.decode())
                    await ws.get_message()
                    answered = time.perf_counter() - start
                    # The closing handshake is not the ping's latency: bounded, then dropped.
                    with trio.move_on_after(1.0):
                        await ws.aclose()
                    own.cancel_scope.cancel()
                return answered
        return time.perf_counter() - start

    async def status(self) -> dict[str, Any]:
        """``server_status``'s ``transports`` section, on the kept session."""
        with trio.fail_after(ANSWER_TIMEOUT):
            if self.tcp is not None:
                await self.tcp.send_all(STATUS + b"\n")
                reply = json.loads(await self._tcp_line())
            elif self.http is not None:
                _, _, body = await self.http.post(STATUS, self.session)
                reply = json.loads(body)
            else:
                assert self.ws is not None
                await self.ws.send_message(STATUS.decode())
                reply = json.loads(await self.ws.get_message())
        return dict(reply["result"]["structuredContent"]["transports"])

    async def aclose(self) -> None:
        if self.tcp is not None:
            await trio.aclose_forcefully(self.tcp)
        if self.http is not None:
            await trio.aclose_forcefully(self.http.stream)
        if self.ws is not None:
            with trio.move_on_after(2):
                await self.ws.aclose()
