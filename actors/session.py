"""The Session actor: one MCP session over any line transport.

The session is the single exception-to-wire boundary. It answers lifecycle
methods itself (initialize, ping, tools/list, resources/*), validates tool
arguments against their msgspec struct, and runs each tool call as its own
task, so a slow call never blocks the read loop; ``notifications/cancelled``
cancels that task. A JSON-RPC batch (accepted when MCP 2025-03-26 is
negotiated) is answered as one array once all its elements are (`Answer`,
`BatchAnswers`).

Error handling: a bad line gets its JSON-RPC error and the loop goes on; a
tool failure is an ``isError`` result; an unexpected exception inside a tool
becomes an ``isError`` result too (logged with its traceback). If the session
actor itself crashes, every call it was running is answered with -32603 before
the supervisor restarts it; the `SessionState` (negotiated version, client) is
kept outside the actor, so the restarted session serves the same client.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import msgspec
import trio

from ..protocol import jsonrpc, mcp
from ..protocol.errors import DomainError
from ..protocol.messages import Closed, Inbound, Outbound, Oversized, SessionInput
from ..protocol.tools import format_validation_error
from ..supervisors import faults, trace
from ..supervisors.context import AppContext, CallContext
from ..supervisors.supervisor import ChildContext, Mailbox

# Methods a client may send before `initialize` completes.
_PRE_INIT_METHODS = frozenset({"initialize", "ping"})
# A longer line is decoded in a worker thread, so the event loop keeps serving while
# it is (a line nested too deep for msgspec is scanned in Python: up to seconds).
DECODE_IN_THREAD_BYTES = 1024 * 1024
# At most this many tool calls run at once in a session. Another waits for one
# to end, and meanwhile the session reads no further input (the client's writes
# block): a client pipelining large calls cannot make the server hold them all.
MAX_CALLS_IN_FLIGHT = 64


class BatchAnswers:
    """The answers of one JSON-RPC batch, sent as one array once all are in.

    Element ``i`` is answered with a line or with nothing (a notification, a stray
    response, a call the client cancelled); the array keeps the batch's order and
    leaves out the elements answered with nothing. If none has an answer, nothing
    is sent (JSON-RPC: never an empty array).
    """

    def __init__(self, size: int) -> None:
        self.parts: list[bytes | None] = [None] * size
        self.left = size

    def fill(self, index: int, line: bytes | None) -> bytes | None:
        """Record one answer; the array line once the last one is in, else None."""
        self.parts[index] = line
        self.left -= 1
        if self.left:
            return None
        parts = [part.rstrip(b"\n") for part in self.parts if part is not None]
        self.parts = []
        return b"[" + b",".join(parts) + b"]\n" if parts else None


class Answer:
    """Where the one answer to one request goes: the outbox, or its slot in a batch.

    Used once: `send` a response line or `skip` (no response); later uses are
    ignored, so a request can never be answered twice. ``held`` marks an answer a
    running tool call owns.
    """

    __slots__ = ("outbox", "batch", "index", "used", "held")

    def __init__(self, outbox: Mailbox, batch: BatchAnswers | None = None, index: int = 0) -> None:
        self.outbox = outbox
        self.batch = batch
        self.index = index
        self.used = False
        self.held = False

    def _take(self, line: bytes | None) -> bytes | None:
        if self.used:
            return None
        self.used = True
        if self.batch is None:
            return line
        return self.batch.fill(self.index, line)

    async def send(self, line: bytes) -> None:
        await self._deliver(self._take(line))

    async def skip(self) -> None:
        await self._deliver(self._take(None))

    async def _deliver(self, out: bytes | None) -> None:
        """Send ``out`` (the answer, or a completed batch array) to the outbox.

        Error handling: once taken, an answer is never lost. If the send is
        interrupted (the session crashing or stopping cancels it), the line is
        handed over without waiting instead; the outbox outlives the session.
        """
        if out is None:
            return
        try:
            await self.outbox.send(Outbound(out))
        except BaseException:
            with contextlib.suppress(
                trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError
            ):
                self.outbox.send_nowait(Outbound(out))
            raise

    def send_nowait(self, line: bytes | None) -> None:
        """Answer (``None``: skip) without waiting; dropped if the outbox is full or gone."""
        out = self._take(line)
        if out is not None:
            try:
                self.outbox.send_nowait(Outbound(out))
            except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
                pass

    async def error(self, rid: Any, code: int, message: str, data: Any = None) -> None:
        await self.send(jsonrpc.error_response(rid, code, message, data))

    async def result(self, rid: Any, result: Any) -> None:
        await self.send(jsonrpc.result_response(rid, result))


@dataclass
class CallState:
    method: str
    tool: str
    scope: trio.CancelScope
    started: float
    answer: Answer
    answered: bool = False


@dataclass(eq=False)
class SessionState:
    """What survives a restart of the Session actor (owned by its supervisor)."""

    name: str = "session"
    initialized: bool = False
    protocol_version: str | None = None
    client_name: str = "unknown"
    client_version: str = ""
    # Whether results may carry structuredContent (the negotiated revision has it).
    structured_ok: bool = True
    in_flight: dict[Any, CallState] = field(default_factory=dict)
    closing: bool = False
    requests: int = 0
    bad_frames: int = 0
    # Lines received but not handled yet: a crash in the middle of a batch leaves
    # the rest here for the next incarnation (none is dropped unanswered).
    pending: deque[bytes] = field(default_factory=deque)


class Session:
    def __init__(self, app: AppContext, state: SessionState, outbox: Mailbox) -> None:
        self.app = app
        self.state = state
        self.outbox = outbox
        self.grace = app.config.server.shutdown_grace
        self.call_timeout = app.config.server.call_timeout
        # False once a batch has begun: a stopped session must not handle it again.
        self._requeue = True
        self._call_ended = trio.Event()

    async def send(self, line: bytes) -> None:
        await self.outbox.send(Outbound(line))

    async def send_error(self, rid: Any, code: int, message: str, data: Any = None) -> None:
        await self.send(jsonrpc.error_response(rid, code, message, data))

    # -- the read loop -----------------------------------------------------

    async def serve(self, ctx: ChildContext, inbox: Mailbox, task_status: Any) -> None:
        state = self.state
        self.app.sessions.add(state)
        try:
            async with trio.open_nursery() as calls:
                self.calls = calls
                task_status.started(self)
                with ctx.cancel_on_shutdown(trio.CancelScope()):
                    await self.handle_pending()
                    item: SessionInput
                    async for item in inbox.receive_channel:
                        match item:
                            case Inbound(lines=lines):
                                state.pending.extend(lines)
                                await self.handle_pending()
                            case Oversized(size=size, limit=limit, id_hint=rid):
                                state.bad_frames += 1
                                trace.event(
                                    self.state.name,
                                    "oversized_line",
                                    level="warning",
                                    size=size,
                                    limit=limit,
                                )
                                await self.send_error(
                                    rid,
                                    jsonrpc.INVALID_REQUEST,
                                    f"Invalid Request: line of {size} bytes exceeds the request limit of "
                                    f"{limit} bytes ([server] request_limit); it was skipped",
                                )
                            case Closed():
                                state.closing = True
                                trace.event(self.state.name, "eof", in_flight=len(state.in_flight))
                                break
                # EOF or shutdown: let running calls finish, within the grace period.
                state.closing = True
                await self._drain_calls()
                calls.cancel_scope.cancel()
            if not ctx.shutdown.is_set():
                self.app.request_shutdown(0)
                await ctx.shutdown.wait()
        finally:
            self._answer_interrupted("the session stopped before the call finished")

    async def _drain_calls(self) -> None:
        if not self.state.in_flight:
            return
        with trio.move_on_after(self.grace) as scope:
            scope.shield = True
            while self.state.in_flight:
                await trio.sleep(0.01)
        if self.state.in_flight:
            trace.warning(
                self.state.name,
                "calls_abandoned",
                count=len(self.state.in_flight),
                grace=self.grace,
            )

    def _answer_interrupted(self, why: str) -> None:
        for rid, call in list(self.state.in_flight.items()):
            if not call.answered:
                call.answered = True
                call.answer.send_nowait(
                    jsonrpc.error_response(rid, jsonrpc.INTERNAL_ERROR, f"Internal error: {why}")
                )
        self.state.in_flight.clear()

    async def handle_pending(self) -> None:
        pending = self.state.pending
        while pending:
            line = pending.popleft()
            self._requeue = True
            try:
                await self.handle_line(line)
            except trio.Cancelled:
                # Stopped (not crashed) before answering: the next incarnation
                # handles the line (a crash drops it: it was answered with -32603).
                # A batch already begun was answered in full on the way out.
                if self._requeue:
                    pending.appendleft(line)
                raise

    async def handle_line(self, line: bytes) -> None:
        if len(line) > DECODE_IN_THREAD_BYTES:
            msg = await trio.to_thread.run_sync(jsonrpc.decode_line, line)
        else:
            msg = jsonrpc.decode_line(line)
        if isinstance(msg, jsonrpc.Batch):
            await self.handle_batch(msg)
        else:
            await self.handle_message(msg, Answer(self.outbox))

    async def handle_message(
        self,
        msg: jsonrpc.Message | jsonrpc.Response | jsonrpc.Failure,
        answer: Answer,
        in_batch: bool = False,
    ) -> None:
        """Serve one message (a line, or one element of a batch); ``answer`` gets its answer."""
        if isinstance(msg, jsonrpc.Failure):
            self.state.bad_frames += 1
            trace.event(
                self.state.name, "bad_frame", level="info", code=msg.code, message=msg.message[:200]
            )
            await answer.error(msg.id, msg.code, msg.message)
            return
        if isinstance(msg, jsonrpc.Response):
            await answer.skip()  # we send no requests; a stray response is ignored
            return
        self.state.requests += 1
        try:
            if faults.ACTIVE:
                await faults.hit("session.dispatch")
            if in_batch and msg.method == "initialize" and msg.has_id:
                await answer.error(
                    msg.id,
                    jsonrpc.INVALID_REQUEST,
                    "Invalid Request: initialize MUST NOT be part of a JSON-RPC batch; send it alone",
                )
                return
            await self.dispatch(msg, answer)
        except Exception as exc:
            # The session itself is broken: answer this request, then crash so the
            # supervisor restarts a clean incarnation.
            if msg.has_id:
                await answer.error(
                    msg.id,
                    jsonrpc.INTERNAL_ERROR,
                    f"Internal error: {type(exc).__name__}: {exc}",
                )
            else:
                await answer.skip()
            raise

    async def handle_batch(self, batch: jsonrpc.Batch) -> None:
        """Serve a JSON-RPC batch (MCP 2025-03-26): one answer array once every element is
        answered; notifications and stray responses have no place in it.

        Elements are served in order like lines (a tool call runs as its own task, so the
        array waits for the slowest call). Error handling: each bad element gets its own
        error in the array. If the session crashes or stops in the middle, the elements not
        served yet are answered -32603, and running calls are answered when they end or
        when the session answers them on its way out, so the array still goes out.
        """
        state = self.state
        refusal = mcp.batch_refusal(state.protocol_version if state.initialized else None)
        if refusal is not None:
            state.bad_frames += 1
            trace.event(state.name, "batch_refused", level="info", size=len(batch.elements))
            await self.send_error(None, jsonrpc.INVALID_REQUEST, refusal)
            return
        self._requeue = False
        messages = [jsonrpc.decode_line(element, in_batch=True) for element in batch.elements]
        answers = BatchAnswers(len(messages))
        slots = [Answer(self.outbox, answers, i) for i in range(len(messages))]
        trace.event(state.name, "batch", size=len(messages))
        served = 0
        try:
            for msg, slot in zip(messages, slots, strict=True):
                await self.handle_message(msg, slot, in_batch=True)
                served += 1
        except BaseException:
            for msg, slot in zip(messages[served:], slots[served:], strict=True):
                if slot.used or slot.held:
                    continue
                if isinstance(msg, jsonrpc.Message) and msg.has_id:
                    slot.send_nowait(
                        jsonrpc.error_response(
                            msg.id,
                            jsonrpc.INTERNAL_ERROR,
                            "Internal error: the session stopped before serving this batch element",
                        )
                    )
                else:
                    slot.send_nowait(None)
            raise

    async def dispatch(self, msg: jsonrpc.Message, answer: Answer) -> None:
        method = msg.method
        state = self.state
        if not msg.has_id:
            await self.notification(msg)
            await answer.skip()
            return
        if not state.initialized and method not in _PRE_INIT_METHODS:
            await answer.error(
                msg.id,
                jsonrpc.SERVER_NOT_INITIALIZED,
                f"Server not initialized: send 'initialize' before {method!r}",
            )
            return
        if method == "ping":
            await answer.result(msg.id, {})
        elif method == "tools/call":
            await self.start_call(msg, answer)
        elif method == "initialize":
            await self.initialize(msg, answer)
        elif method == "tools/list":
            await self._list_page(msg, answer, "tools", list(self.app.registry))
        elif method == "resources/list":
            await self._list_page(msg, answer, "resources", list(self.app.resources.values()))
        elif method == "resources/read":
            await self.read_resource(msg, answer)
        elif method == "resources/templates/list":
            await answer.result(msg.id, {"resourceTemplates": []})
        elif method in ("prompts/list",):
            await answer.result(msg.id, {"prompts": []})
        else:
            await answer.error(msg.id, jsonrpc.METHOD_NOT_FOUND, f"Method not found: {method}")

    async def notification(self, msg: jsonrpc.Message) -> None:
        if msg.method == "notifications/initialized":
            return
        if msg.method == "notifications/cancelled" and msg.params is not None:
            try:
                params = mcp.cancelled_params.decode(msg.params)
            except msgspec.DecodeError:
                return
            call = self.state.in_flight.get(params.requestId)
            if call is not None and not call.answered:
                call.answered = True  # the spec: no response for a cancelled request
                call.scope.cancel()
                await call.answer.skip()
                trace.event(
                    self.state.name, "cancelled", request_id=params.requestId, reason=params.reason
                )
        # Other notifications are ignored, as the spec asks.

    # -- lifecycle ---------------------------------------------------------

    async def initialize(self, msg: jsonrpc.Message, answer: Answer) -> None:
        try:
            params = mcp.initialize_params.decode(msg.params or b"{}")
        except msgspec.DecodeError as exc:
            await answer.error(msg.id, jsonrpc.INVALID_PARAMS, f"Invalid params: {exc}")
            return
        version = mcp.negotiate(params.protocolVersion)
        state = self.state
        state.initialized = True
        state.protocol_version = version
        state.client_name = params.clientInfo.name
        state.client_version = params.clientInfo.version
        self.state.structured_ok = version >= mcp.STRUCTURED_CONTENT_SINCE
        trace.event(
            state.name,
            "initialize",
            requested=params.protocolVersion,
            negotiated=version,
            client=state.client_name,
            client_version=state.client_version,
        )
        result = mcp.initialize_result(
            version, self.app.version, self.instructions(), bool(self.app.resources)
        )
        await answer.result(msg.id, result)

    def instructions(self) -> str:
        parts = [
            "memtrio keeps a persistent local memory for coding agents and navigates code.",
            *self.app.instructions,
        ]
        return "\n".join(parts)

    async def _list_page(
        self, msg: jsonrpc.Message, answer: Answer, key: str, items: list[Any]
    ) -> None:
        """Answer a paginated ``*/list`` request with one page of ``items``."""
        try:
            cursor = mcp.cursor_params.decode(msg.params).cursor if msg.params else None
            page, nxt = mcp.paginate(items, cursor, mcp.TOOLS_PAGE_SIZE)
        except (msgspec.DecodeError, ValueError) as exc:
            await answer.error(msg.id, jsonrpc.INVALID_PARAMS, f"Invalid params: {exc}")
            return
        result: dict[str, Any] = {key: [item.describe() for item in page]}
        if nxt is not None:
            result["nextCursor"] = nxt
        await answer.result(msg.id, result)

    async def read_resource(self, msg: jsonrpc.Message, answer: Answer) -> None:
        try:
            params = mcp.read_resource_params.decode(msg.params or b"{}")
        except msgspec.DecodeError as exc:
            await answer.error(msg.id, jsonrpc.INVALID_PARAMS, f"Invalid params: {exc}")
            return
        resource = self.app.resources.get(params.uri)
        if resource is None:
            known = ", ".join(self.app.resources) or "none"
            await answer.error(
                msg.id,
                jsonrpc.SERVER_NOT_INITIALIZED,
                f"Resource not found: {params.uri} (known: {known})",
                {"uri": params.uri},
            )
            return
        try:
            text = await resource.read(self.app)
        except Exception as exc:  # noqa: BLE001 - answered, logged
            trace.error(
                self.state.name,
                "resource_failed",
                uri=params.uri,
                error=f"{type(exc).__name__}: {exc}",
            )
            await answer.error(msg.id, jsonrpc.INTERNAL_ERROR, f"Internal error: {exc}")
            return
        result = {"contents": [{"uri": resource.uri, "mimeType": resource.mime_type, "text": text}]}
        await answer.result(msg.id, result)

    # -- tool calls --------------------------------------------------------

    async def start_call(self, msg: jsonrpc.Message, answer: Answer) -> None:
        while len(self.state.in_flight) >= MAX_CALLS_IN_FLIGHT:
            self._call_ended = trio.Event()
            await self._call_ended.wait()
        if msg.id in self.state.in_flight:
            await answer.error(
                msg.id,
                jsonrpc.INVALID_REQUEST,
                f"Invalid Request: id {msg.id!r} is already in use by a running call",
            )
            return
        try:
            params = mcp.call_params.decode(msg.params or b"{}")
        except msgspec.DecodeError as exc:
            await answer.error(msg.id, jsonrpc.INVALID_PARAMS, f"Invalid params: {exc}")
            return
        tool = self.app.registry.get(params.name)
        if tool is None:
            await answer.error(
                msg.id,
                jsonrpc.INVALID_PARAMS,
                f"Unknown tool: {params.name!r}; tools/list names the {len(self.app.registry)} available tools",
            )
            return
        call = CallState("tools/call", tool.name, trio.CancelScope(), time.monotonic(), answer)
        answer.held = True
        self.state.in_flight[msg.id] = call
        self.calls.start_soon(self.run_call, msg.id, tool, params, call)

    async def run_call(self, rid: Any, tool: Any, params: mcp.CallParams, call: CallState) -> None:
        token = trace.current.set(None)
        try:
            result: dict[str, Any] | None = None
            with (
                trace.span(self.state.name, "tools/call", tool=tool.name, request_id=rid) as span,
                call.scope,
            ):
                timeout = self.call_timeout if self.call_timeout > 0 else math.inf
                with trio.move_on_after(timeout) as deadline:
                    result = await self._invoke(tool, params, rid, span)
                if deadline.cancelled_caught:
                    span["outcome"] = "timeout"
                    result = mcp.tool_error(
                        f"{tool.name} did not finish within {timeout:g} s ([server] call_timeout) and was abandoned"
                    )
            if result is not None and not call.answered:
                await call.answer.result(rid, result)
            call.answered = True
        finally:
            trace.current.reset(token)
            # Interrupted from outside (session crash or stop) before answering: the
            # entry stays, so the session answers it with an error on its way out.
            if call.answered and self.state.in_flight.get(rid) is call:
                del self.state.in_flight[rid]
                self._call_ended.set()

    async def _invoke(
        self, tool: Any, params: mcp.CallParams, rid: Any, span: dict[str, Any]
    ) -> dict[str, Any]:
        try:
            raw = bytes(params.arguments)
            args = tool.decoder.decode(raw if raw and raw != b"null" else b"{}")
        except msgspec.ValidationError as exc:
            span["outcome"] = "invalid_arguments"
            return mcp.tool_error(f"{tool.name}: {format_validation_error(exc)}")
        except msgspec.DecodeError as exc:
            span["outcome"] = "invalid_arguments"
            return mcp.tool_error(f"{tool.name}: invalid arguments: {exc}")
        try:
            if faults.ACTIVE:
                await faults.hit("tool.call")
            value = await tool.handler(CallContext(self.app, self.state, rid), args)
        except DomainError as exc:
            span["outcome"] = exc.kind
            return mcp.tool_error(str(exc))
        except Exception as exc:  # noqa: BLE001 - a tool failure is a result, not a crash
            span["outcome"] = "error"
            trace.error(
                self.state.name,
                "tool_failed",
                tool=tool.name,
                error=f"{type(exc).__name__}: {exc}",
                exc=trace.format_traceback(exc),
            )
            return mcp.tool_error(f"{tool.name} failed: {type(exc).__name__}: {exc}")
        return mcp.tool_result(value, structured_ok=self.state.structured_ok)


async def run_session(
    ctx: ChildContext,
    *,
    app: AppContext,
    state: SessionState,
    inbox: Mailbox,
    outbox: Mailbox,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Child start function of a Session actor."""
    session = Session(app, state, outbox)
    try:
        await session.serve(ctx, inbox, task_status)
    finally:
        app.sessions.discard(state)
