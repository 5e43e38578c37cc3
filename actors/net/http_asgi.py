"""The ASGI application of the Streamable HTTP transport (MCP 2025-11-25), on ``/mcp``.

- ``POST`` carries one JSON-RPC message (or a batch, when the session negotiated
  2025-03-26). Only notifications and responses: ``202 Accepted``. Requests:
  their answers, as ``application/json`` or as an SSE stream (`wants_sse`).
- ``GET`` (``Accept: text/event-stream``) opens the session's standalone stream
  (server requests and notifications), or resumes any stream of the session
  after its ``Last-Event-ID``.
- ``DELETE`` ends the session.

Checks, in order: ``Origin`` (403), bearer token (401), path (404), method
(405), then per method: ``Mcp-Session-Id`` (400 missing, 404 unknown),
``MCP-Protocol-Version`` (400 unsupported), body size (413), JSON (400 with
-32700 or -32600). docs/transports.md says it all for users.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

import trio

from ...protocol import jsonrpc, mcp
from ...protocol.messages import Inbound
from ...protocol.plural import plural
from ...supervisors import trace
from ...supervisors.context import AppContext
from ...supervisors.grants import Grant
from ..session import DECODE_IN_THREAD_BYTES
from .auth import CHALLENGE, BearerAuth
from .connections import Connections
from .http_session import (
    BadEventId,
    EventsLost,
    HttpSession,
    ReplayBudget,
    ReplayLimits,
    Stream,
    new_session_id,
)
from .http_wire import (
    ALLOW,
    CORS_HEADERS,
    PATH,
    REQUEST_CANCELLED,
    SESSION_NOT_FOUND,
    BodyWatch,
    Disconnected,
    Receive,
    Refusal,
    Request,
    Scope,
    Send,
    cancelled_ids,
    lifespan,
    media,
    origin_allowed,
    read_body,
    respond,
    shown,
    sse_event,
    wants_sse,
    watch_disconnect,
)
from .listen import Listen

Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]
# Copies of an SSE frame in memory while it is written: the frame, and hypercorn's HTTP/1.1
# chunk of it (h11 joins the chunk's size line, the frame and its end into one bytes).
FRAME_COPIES = 2


class HttpServer:
    """The ASGI application: the sessions of one listener and how each request is served."""

    def __init__(
        self,
        app: AppContext,
        listen: Listen,
        connections: Connections,
        nursery: trio.Nursery,
        extra: Asgi | None = None,
    ) -> None:
        self.app = app
        # Served every path but /mcp (the dashboard of ``memtrio serve --ui``), None: 404.
        self.extra = extra
        self.listen = listen
        self.connections = connections
        self.nursery = nursery
        self.auth = BearerAuth(listen.token, listen.grants, listen.allowed_roots)
        self.sessions: dict[str, HttpSession] = {}
        # The replay logs of all the sessions, bounded together (``[http]``).
        self.replay = ReplayBudget(ReplayLimits.of(app.config.http))
        self.accepting = True
        self.requests_in_flight = 0
        self.idle = trio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        request = Request.of(scope)
        if self.extra is not None and request.path.rstrip("/") != PATH:
            await self.extra(scope, receive, send)
            return
        watch = BodyWatch(receive, request)
        try:
            await self.route(request, watch, send)
        except Refusal as refusal:
            await self.refuse(send, request, refusal, watch.closing())
        except Disconnected:
            return

    async def refuse(
        self,
        send: Send,
        request: Request,
        refusal: Refusal,
        closing: list[tuple[str, str]] | None = None,
    ) -> None:
        trace.event(
            "http",
            "refused",
            level="info",
            status=refusal.status,
            method=request.method,
            peer=request.peer,
            why=refusal.message[:200],
        )
        body = jsonrpc.error_response(refusal.rid, refusal.code, refusal.message)
        headers = [*self.cors(request), *refusal.headers, *(closing or [])]
        await respond(send, refusal.status, body, headers)

    def cors(self, request: Request) -> list[tuple[str, str]]:
        """CORS headers for an allowed browser origin: none without ``Origin``, and none for
        an origin that is refused (its 403 grants nothing)."""
        origin = request.header("origin")
        if origin is None or not origin_allowed(origin, self.listen.allowed_origins):
            return []
        return [
            ("access-control-allow-origin", origin),
            ("access-control-expose-headers", "mcp-session-id, mcp-protocol-version"),
            ("vary", "origin"),
        ]

    async def route(self, request: Request, receive: Receive, send: Send) -> None:
        origin = request.header("origin")
        if origin is not None and not origin_allowed(origin, self.listen.allowed_origins):
            raise Refusal(
                403, f"Forbidden: origin {shown(origin)} is not allowed ([serve] allowed_origins)"
            )
        if request.path.rstrip("/") != PATH:
            raise Refusal(404, f"Not Found: the MCP endpoint is {PATH}")
        if request.method == "OPTIONS":
            headers = [
                *self.cors(request),
                ("access-control-allow-methods", ALLOW),
                ("access-control-allow-headers", CORS_HEADERS),
                ("access-control-max-age", "600"),
            ]
            await respond(send, 204, headers=headers)
            return
        if not self.auth.check_header(request.header("authorization")):
            raise Refusal(
                401,
                "Unauthorized: send Authorization: Bearer <token>",
                headers=(("www-authenticate", CHALLENGE),),
            )
        if request.method == "POST":
            await self.post(request, receive, send)
        elif request.method == "GET":
            await self.get(request, receive, send)
        elif request.method == "DELETE":
            session = self.session_of(request)
            self.end_session(session, "deleted")
            await respond(send, 204, headers=self.cors(request))
        else:
            raise Refusal(405, f"Method Not Allowed: {request.method}", headers=(("allow", ALLOW),))

    # -- sessions -------------------------------------------------------------

    def session_of(self, request: Request) -> HttpSession:
        """The session a request names (400 without the header, 404 unknown or ended)."""
        sid = request.header("mcp-session-id")
        if sid is None:
            raise Refusal(
                400,
                "Bad Request: Mcp-Session-Id header is required (a session starts with an "
                "initialize request without it)",
                jsonrpc.INVALID_REQUEST,
            )
        session = self.sessions.get(sid.strip())
        # A session is used with the token's grant that opened it; another token's
        # request learns nothing of it (404 as for an unknown id).
        if session is None or session.ended or session.state.grant != self.grant_of(request):
            raise Refusal(
                404,
                "Session not found: it ended, expired or never existed; send initialize again",
                SESSION_NOT_FOUND,
            )
        version = request.header("mcp-protocol-version")
        if version is not None and version.strip() not in mcp.SUPPORTED_VERSIONS:
            raise Refusal(
                400,
                f"Bad Request: unsupported MCP-Protocol-Version {shown(version.strip())} "
                f"(supported: {', '.join(mcp.SUPPORTED_VERSIONS)})",
                jsonrpc.INVALID_REQUEST,
            )
        return session

    def grant_of(self, request: Request) -> Grant | None:
        """The grant the request's token opens (checked already: None only if refused)."""
        return self.auth.grant_for_header(request.header("authorization"))

    def start_session(self, peer: str, grant: Grant | None) -> HttpSession:
        if not self.accepting:
            raise Refusal(503, "Service Unavailable: the server is shutting down")
        if self.connections.full:
            self.connections.refuse("http", peer, "max_connections")
            raise Refusal(
                503,
                f"Service Unavailable: {plural(self.connections.limit, 'session')} "
                f"{'is' if self.connections.limit == 1 else 'are'} open "
                "([serve] max_connections); end one (DELETE) or retry later",
            )
        conn = self.connections.open("http", peer)
        session = HttpSession(self.app, new_session_id(), conn, self.replay, grant=grant)
        self.sessions[session.id] = session
        self.nursery.start_soon(self._run_session, session)
        return session

    async def _run_session(self, session: HttpSession) -> None:
        try:
            await self.connections.run(session.conn, session.children)
        finally:
            self.sessions.pop(session.id, None)
            session.end()

    def end_session(self, session: HttpSession, why: str) -> None:
        """Forget the session (later requests: 404) and stop its actors."""
        trace.event(session.conn.id, "http_session_end", why=why)
        self.sessions.pop(session.id, None)
        session.retire()  # no resume can come: free its replay log now
        session.conn.closed.set()

    async def expire_idle(self) -> None:
        """End the sessions idle (no request, no open stream) for ``idle_timeout`` seconds."""
        timeout = self.listen.idle_timeout
        period = min(max(timeout / 4, 0.02), 30.0)
        while True:
            await trio.sleep(period)
            now = trio.current_time()
            for session in list(self.sessions.values()):
                if session.busy == 0 and now - session.last_active >= timeout:
                    self.end_session(session, "idle")

    # -- POST -------------------------------------------------------------------

    async def post(self, request: Request, receive: Receive, send: Send) -> None:  # noqa: C901
        json_ok, sse_ok = media(request.header("accept"))
        if not (json_ok or sse_ok):
            raise Refusal(406, "Not Acceptable: accept application/json and text/event-stream")
        body = await read_body(receive, self.listen.body_limit, request.header("content-length"))
        if len(body) > DECODE_IN_THREAD_BYTES:
            msg = await trio.to_thread.run_sync(jsonrpc.decode_line, body)
        else:
            msg = jsonrpc.decode_line(body)
        if isinstance(msg, jsonrpc.Failure):
            raise Refusal(400, msg.message, msg.code, msg.id)
        created = request.header("mcp-session-id") is None
        if created:
            if not (isinstance(msg, jsonrpc.Message) and msg.has_id and msg.method == "initialize"):
                self.session_of(request)  # raises: 400, the header is required
            session = self.start_session(request.peer, self.grant_of(request))
        else:
            session = self.session_of(request)
        ids, methods, failures = self.classify(session, msg)
        if failures and not ids:
            # Only bad elements (and notifications): answer them here, serve the rest.
            for element in msg.elements if isinstance(msg, jsonrpc.Batch) else ():
                if not isinstance(jsonrpc.decode_line(element, in_batch=True), jsonrpc.Failure):
                    await session.inbox.send(Inbound([element]))
            await respond(send, 400, b"[" + b",".join(f.rstrip() for f in failures) + b"]")
            return
        taken = session.in_flight(ids)
        if taken:
            raise Refusal(
                400,
                f"Invalid Request: id {taken[0]!r} is already used by a request in progress",
                jsonrpc.INVALID_REQUEST,
                taken[0],
            )
        session.touch()
        if not ids:
            await session.inbox.send(Inbound([body]))
            for rid in cancelled_ids(msg):
                session.cancel(rid)
            await respond(send, 202, headers=self.cors(request))
            return
        headers = self.cors(request)
        if created:
            headers.append(("mcp-session-id", session.id))
        sse = wants_sse(request.header("accept"), methods)
        stream = session.open_stream(ids, replay=sse)
        session.busy += 1
        try:
            if sse:
                session.prime(stream)  # first, before any answer can be
            await session.inbox.send(Inbound([body]))
            if sse:
                await self.stream(send, receive, session, stream, 0, headers, prime=False)
            else:
                await self.answer_json(
                    send, session, stream, ids, isinstance(msg, jsonrpc.Batch), headers
                )
        finally:
            session.busy -= 1
            session.touch()

    def classify(
        self, session: HttpSession, msg: jsonrpc.Decoded
    ) -> tuple[list[jsonrpc.Id], list[str], list[bytes]]:
        """(request ids, request methods, error answers of bad batch elements) of a body."""
        if isinstance(msg, jsonrpc.Batch):
            state = session.state
            refusal = mcp.batch_refusal(state.protocol_version if state.initialized else None)
            if refusal is not None:
                raise Refusal(400, refusal, jsonrpc.INVALID_REQUEST)
            elements = [jsonrpc.decode_line(e, in_batch=True) for e in msg.elements]
        else:
            elements = [msg]
        ids: list[jsonrpc.Id] = []
        methods: list[str] = []
        failures: list[bytes] = []
        for element in elements:
            if isinstance(element, jsonrpc.Message) and element.has_id:
                ids.append(element.id)
                methods.append(element.method)
            elif isinstance(element, jsonrpc.Failure):
                failures.append(jsonrpc.error_response(element.id, element.code, element.message))
        return ids, methods, failures

    async def answer_json(
        self,
        send: Send,
        session: HttpSession,
        stream: Stream,
        ids: list[jsonrpc.Id],
        batch: bool,
        headers: list[tuple[str, str]],
    ) -> None:
        """Wait for every answer of the POST, then send them as one JSON body."""
        reader = object()
        stream.reader = reader
        lines: list[bytes] = []
        after = 0
        # Its events are outside the replay log (`HttpSession.open_stream`): none is lost.
        while (events := await session.next_events(stream, after, reader)) is not None:
            lines.extend(data for _, data in events if data)
            after = events[-1][0]
        session.forget(stream)
        session.close_stream(stream)
        if not lines:  # cancelled by the client, or the session ended before answering
            code, why = (
                (jsonrpc.INTERNAL_ERROR, "Internal error: the session ended before answering")
                if session.ended
                else (REQUEST_CANCELLED, "Request cancelled by the client")
            )
            missing = [jsonrpc.error_response(rid, code, why).rstrip() for rid in ids]
            lines = [b"[" + b",".join(missing) + b"]"] if batch else missing
        await respond(send, 200, lines[0], headers)

    # -- SSE ---------------------------------------------------------------------

    async def stream(
        self,
        send: Send,
        receive: Receive,
        session: HttpSession,
        stream: Stream,
        after: int,
        headers: list[tuple[str, str]],
        *,
        prime: bool,
    ) -> None:
        """Send ``stream``'s events after ``after`` as SSE until it is done, the session ends,
        another reader takes it over, or the client disconnects (it may resume)."""
        reader = object()
        stream.reader = reader
        start = [("content-type", "text/event-stream"), ("cache-control", "no-cache"), *headers]
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in start],
            }
        )
        finished = False
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch_disconnect, receive, nursery.cancel_scope)
                if prime and not any(seq > after for seq, _ in stream.events):
                    session.prime(stream)
                try:
                    while (events := await session.next_events(stream, after, reader)) is not None:
                        chunk = b"".join(
                            sse_event(session.event_id(stream, seq), data) for seq, data in events
                        )
                        # The frame and hypercorn's copy of it (its HTTP/1.1 chunk) count
                        # against [http] replay_total_bytes until written.
                        with session.budget.hold(FRAME_COPIES * len(chunk)):
                            await send(
                                {"type": "http.response.body", "body": chunk, "more_body": True}
                            )
                        del chunk
                        after = events[-1][0]
                except EventsLost as lost:
                    # The client read too slowly: end the stream; a resume from its last
                    # event id is refused (404), so the gap is never silent.
                    trace.event(session.conn.id, "sse_events_lost", level="warning", why=str(lost))
                finished = True
                nursery.cancel_scope.cancel()
        finally:
            if stream.reader is reader:
                stream.reader = None
        if finished:  # else the client went away: it may resume with Last-Event-ID
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            session.close_stream(stream)

    async def get(self, request: Request, receive: Receive, send: Send) -> None:
        if "text/event-stream" not in (request.header("accept") or "").lower():
            raise Refusal(
                406, "Not Acceptable: a GET opens an SSE stream; accept text/event-stream"
            )
        session = self.session_of(request)
        last = request.header("last-event-id")
        if last is not None:
            try:
                found = session.find_event(last)
            except BadEventId as exc:
                raise Refusal(
                    400, f"Bad Request: {exc} (got {shown(last)})", jsonrpc.INVALID_REQUEST
                ) from None
            if found is None:
                raise Refusal(
                    404,
                    f"Not Found: Last-Event-ID {shown(last)} names no event of this session "
                    "that can be resumed from: its stream ended and its events left the replay "
                    "log, or events after it did ([http] replay_events, replay_bytes); "
                    "send the request again",
                    jsonrpc.INVALID_REQUEST,
                )
            stream, after = found
            prime = False
        else:
            stream = session.standalone
            if stream.reader is not None:
                raise Refusal(
                    409,
                    "Conflict: this session's standalone SSE stream is already open "
                    "(one per session; resume a dropped one with Last-Event-ID)",
                )
            # Events before the ones a reader got, or that left the log unread, are not
            # the new reader's: it starts after them.
            after, prime = max(stream.delivered, stream.lost), True
        session.busy += 1
        session.touch()
        try:
            await self.stream(
                send, receive, session, stream, after, self.cors(request), prime=prime
            )
        finally:
            session.busy -= 1
            session.touch()

    # -- shutdown ------------------------------------------------------------------

    async def drain(self, grace: float) -> None:
        """Stop taking sessions, let every session's calls finish (within ``grace``), end them."""
        self.accepting = False
        sessions = list(self.sessions.values())
        for session in sessions:
            session.conn.closed.set()
        with trio.move_on_after(grace + 3.0 if math.isfinite(grace) else 10.0):
            while self.sessions:
                await trio.sleep(0.01)
