"""The dashboard as an ASGI application: ``/`` and its static files, ``/api/...``.

Served by hypercorn's trio worker (``memtrio ui``: its own listener;
``memtrio serve --ui``: the Streamable HTTP listener hands it every path but
``/mcp``). Every answer carries `guard.SECURITY_HEADERS` (a strict CSP); API
answers are never cached.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl

import msgspec
import trio

from ...supervisors import trace
from ...supervisors.context import AppContext
from ..net.http_wire import (
    BodyWatch,
    Disconnected,
    Receive,
    Refusal,
    Request,
    Scope,
    Send,
    lifespan,
    read_body,
)
from .api import Api, ApiError
from .guard import SECURITY_HEADERS, STATIC, Denied, Guard, static_file

# Largest body of an API write (an edited memory's content and a few fields).
BODY_LIMIT = 2 * 1024 * 1024
ACTOR = "ui"


class UiApp:
    """ASGI application of the dashboard over one running application."""

    def __init__(self, app: AppContext, guard: Guard, static: Path = STATIC) -> None:
        self.guard = guard
        self.api = Api(app)
        self.static = static

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        request = Request.of(scope)
        watch = BodyWatch(receive, request)
        try:
            if request.path == "/api" or request.path.startswith("/api/"):
                await self.serve_api(scope, request, watch, send)
            else:
                await self.serve_static(request, send)
        except Denied as denied:
            trace.event(ACTOR, "refused", status=denied.status, path=request.path[:200],
                        peer=request.peer, why=denied.message)  # fmt: skip
            await self.send(send, denied.status, {"error": denied.message}, watch.closing())
        except Refusal as refusal:  # a body over BODY_LIMIT
            await self.send(send, refusal.status, {"error": refusal.message}, watch.closing())
        except Disconnected:
            return

    async def serve_api(self, scope: Scope, request: Request, receive: Receive, send: Send) -> None:
        write = request.method not in ("GET", "HEAD")
        self.guard.check_origin(request.headers, scope.get("scheme", "http"), write)
        self.guard.check_token(request.headers)
        body = (
            await read_body(receive, BODY_LIMIT, request.header("content-length")) if write else b""
        )
        name = request.path[len("/api/") :].strip("/")
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        try:
            with trace.span(ACTOR, "api", route=name, method=request.method):
                result = await self.api.answer(request.method, name, query, body)
        except ApiError as exc:
            await self.send(send, exc.status, {"error": exc.message})
            return
        await self.send(send, 200, result)

    async def serve_static(self, request: Request, send: Send) -> None:
        if request.method not in ("GET", "HEAD"):
            raise Denied(405, f"{request.method} is not allowed here")
        path, kind = static_file(request.path, self.static)
        body = await trio.to_thread.run_sync(path.read_bytes)
        headers = [("content-type", kind), ("cache-control", "no-cache"), *SECURITY_HEADERS]
        await _respond(send, 200, b"" if request.method == "HEAD" else body, headers)

    async def send(
        self,
        send: Send,
        status: int,
        payload: object,
        closing: list[tuple[str, str]] | None = None,
    ) -> None:
        headers = [
            ("content-type", "application/json"),
            ("cache-control", "no-store"),
            *SECURITY_HEADERS,
            *(closing or []),
        ]
        await _respond(send, status, msgspec.json.encode(payload), headers)


async def _respond(send: Send, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body, "more_body": False})
