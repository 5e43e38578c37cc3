"""The Session actor: one MCP session over any line transport.

The session is the single exception-to-wire boundary. It answers lifecycle
methods itself (initialize, ping, tools/list, resources/*) and hands each tool
call to `ToolCalls` (``actors.tool_calls``), which runs it as its own task, so
a slow call never blocks the read loop; ``notifications/cancelled`` cancels
that task. A JSON-RPC batch (accepted when MCP 2025-03-26 is negotiated) is
answered as one array once all its elements are (``actors.answers``).
The session's repository (``initialize`` ``_meta["memtrio/root"]``, or the
client's roots asked with ``roots/list``; answers to our requests come back
through the inbox) is ``actors.session_roots``.

Error handling: a bad line gets its JSON-RPC error and the loop goes on; a
tool failure is an ``isError`` result; an unexpected exception inside a tool
becomes an ``isError`` result too (logged with its traceback). If the session
actor itself crashes, every call it was running is answered with -32603 before
the supervisor restarts it; the `SessionState` (negotiated version, client,
content shape, repository, ``actors.session_state``) is kept outside the
actor, so the restarted session serves the same client.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import trio

from ..protocol import content, jsonrpc, mcp
from ..protocol.messages import Closed, Inbound, Outbound, Oversized, SessionInput
from ..supervisors import faults, trace
from ..supervisors.context import AppContext
from ..supervisors.supervisor import ChildContext, Mailbox
from . import session_roots
from .answers import Answer, BatchAnswers, decode_params
from .session_state import SessionState
from .tool_calls import ToolCalls, answer_interrupted

# Methods a client may send before `initialize` completes.
_PRE_INIT_METHODS = frozenset({"initialize", "ping"})
# A longer line is decoded in a worker thread, so the event loop keeps serving while
# it is (a line nested too deep for msgspec is scanned in Python: up to seconds).
DECODE_IN_THREAD_BYTES = 1024 * 1024


class Session:
    """One incarnation of the Session actor (its lasting state is `SessionState`)."""

    def __init__(self, app: AppContext, state: SessionState, outbox: Mailbox[Outbound]) -> None:
        self.app = app
        self.state = state
        self.outbox = outbox
        # False once a batch has begun: a stopped session must not handle it again.
        self._requeue = True

    async def send_error(self, rid: jsonrpc.Id, code: int, message: str) -> None:
        await self.outbox.send(Outbound(jsonrpc.error_response(rid, code, message)))

    # -- the read loop -----------------------------------------------------

    async def serve(
        self,
        ctx: ChildContext,
        inbox: Mailbox[SessionInput],
        task_status: trio.TaskStatus[Session],
    ) -> None:
        """Serve ``inbox`` until EOF or shutdown; then let running calls finish and
        ask the application to stop (EOF: the client is gone)."""
        self.app.sessions.add(self.state)
        try:
            async with trio.open_nursery() as nursery:
                self.calls = ToolCalls(self.app, self.state, nursery)
                task_status.started(self)
                with ctx.cancel_on_shutdown(trio.CancelScope()):
                    await self.handle_pending()
                    item: SessionInput
                    async for item in inbox.receive_channel:
                        if not await self._take(item):
                            break
                # EOF or shutdown: let running calls finish, within the grace period.
                await self.calls.drain()
                nursery.cancel_scope.cancel()
            if not ctx.shutdown.is_set():
                if self.state.on_close is not None:
                    self.state.on_close()
                else:
                    self.app.request_shutdown(0)
                await ctx.shutdown.wait()
        finally:
            answer_interrupted(self.state, "the session stopped before the call finished")

    async def _take(self, item: SessionInput) -> bool:
        """Serve one item from the transport; False at EOF."""
        match item:
            case Inbound(lines=lines):
                self.state.pending.extend(lines)
                await self.handle_pending()
            case Oversized(size=size, limit=limit, id_hint=rid):
                trace.event(
                    self.state.name, "oversized_line", level="warning", size=size, limit=limit
                )
                await self.send_error(
                    rid,
                    jsonrpc.INVALID_REQUEST,
                    f"Invalid Request: line of {size} bytes exceeds the request limit of "
                    f"{limit} bytes ([server] request_limit); it was skipped",
                )
            case Closed():
                trace.event(self.state.name, "eof", in_flight=len(self.state.in_flight))
                return False
        return True

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
            trace.event(
                self.state.name, "bad_frame", level="info", code=msg.code, message=msg.message[:200]
            )
            await answer.error(msg.id, msg.code, msg.message)
            return
        if isinstance(msg, jsonrpc.Response):
            # The answer to a request of ours (roots/list); a stray response is ignored.
            await session_roots.take_response(self.state, msg)
            await answer.skip()
            return
        try:
            if faults.ACTIVE:
                await faults.hit("session.dispatch")
                # One connection's session only: session.dispatch:tcp-3, :http-2, :stdio.
                await faults.hit("session.dispatch:" + self.state.name.removesuffix(".session"))
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
            _answer_unserved(messages[served:], slots[served:])
            raise

    async def dispatch(self, msg: jsonrpc.Message, answer: Answer) -> None:  # noqa: C901
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
            await self.calls.start(msg, answer)
        elif method == "initialize":
            await self.initialize(msg, answer)
        elif method == "tools/list":
            # outputSchema only where the revision has structured content (2025-06-18+)
            # and [server] output_schema asks for it. A read-only grant is not offered the
            # tools that write (calling one is refused).
            structured = self.state.structured_ok
            schemas = self.app.config.server.output_schema
            grant = self.state.grant
            read_only = grant is not None and grant.read_only
            tools = [
                tool.describe(structured, schemas)
                for tool in self.app.registry
                if not (read_only and tool.writes)
            ]
            await self._list_page(msg, answer, "tools", tools)
        elif method == "resources/list":
            resources: list[dict[str, object]] = [
                dict(r.describe()) for r in self.app.resources.values()
            ]
            await self._list_page(msg, answer, "resources", resources)
        elif method == "resources/read":
            await self.read_resource(msg, answer)
        elif method == "resources/templates/list":
            await answer.result(msg.id, {"resourceTemplates": []})
        elif method in ("prompts/list",):
            await answer.result(msg.id, {"prompts": []})
        elif method == "logging/setLevel":
            await self.set_log_level(msg, answer)
        else:
            await answer.error(msg.id, jsonrpc.METHOD_NOT_FOUND, f"Method not found: {method}")

    async def set_log_level(self, msg: jsonrpc.Message, answer: Answer) -> None:
        """``logging/setLevel``: a known level is accepted (memtrio sends no log messages)."""
        params = await decode_params(msg, mcp.set_level_params, answer)
        if params is None:
            return
        if params.level not in mcp.LOG_LEVELS:
            await answer.error(
                msg.id,
                jsonrpc.INVALID_PARAMS,
                f"Invalid params: level {params.level!r} is not one of {', '.join(mcp.LOG_LEVELS)}",
            )
            return
        await answer.result(msg.id, {})

    async def notification(self, msg: jsonrpc.Message) -> None:
        if msg.method in ("notifications/initialized", "notifications/roots/list_changed"):
            # The session's repository comes from the client's roots: ask (again).
            if self.state.initialized and session_roots.wants_roots(self.state):
                await session_roots.request_roots(self.state, self.outbox)
            return
        if msg.method == "notifications/cancelled" and msg.params is not None:
            try:
                params = mcp.cancelled_params.decode(msg.params)
            except msgspec.DecodeError:
                return
            await self.calls.cancel(params.requestId, params.reason)
        # Other notifications are ignored, as the spec asks.

    # -- lifecycle ---------------------------------------------------------

    async def initialize(self, msg: jsonrpc.Message, answer: Answer) -> None:
        params = await decode_params(msg, mcp.initialize_params, answer)
        if params is None:
            return
        meta = params.meta or {}
        try:
            root = (
                await trio.to_thread.run_sync(session_roots.root_param, meta, self.state.grant)
                if session_roots.ROOT_META in meta
                else None
            )
        except ValueError as exc:
            await answer.error(msg.id, jsonrpc.INVALID_PARAMS, f"Invalid params: {exc}")
            return
        version = mcp.negotiate(params.protocolVersion)
        state = self.state
        state.roots_capable = "roots" in params.capabilities
        if root is not None:
            state.root, state.root_source, state.root_refusal = root, "initialize", None
        elif session_roots.wants_roots(state):
            state.root_source = "roots"  # asked once the client sends notifications/initialized
        state.initialized = True
        state.protocol_version = version
        state.client_name = params.clientInfo.name
        state.client_version = params.clientInfo.version
        state.structured_ok = version >= mcp.STRUCTURED_CONTENT_SINCE
        state.content_mode = content.content_mode(state.client_name, self.app.config.server.content)
        trace.event(
            state.name,
            "initialize",
            requested=params.protocolVersion,
            negotiated=version,
            client=state.client_name,
            client_version=state.client_version,
            content=state.content_mode,
            root=str(state.root) if state.root is not None else None,
            root_source=state.root_source,
        )
        result = mcp.initialize_result(
            version, self.app.version, await self.instructions(), bool(self.app.resources)
        )
        await answer.result(msg.id, result)
        self.app.client_ready()  # after the answer is queued, so warming never delays it

    async def instructions(self) -> str:
        parts = [
            "memtrio keeps a persistent local memory for coding agents and navigates code.",
            *[await part(self.state) for part in self.app.session_instructions],
            *self.app.instructions,
        ]
        return "\n".join(parts)

    async def _list_page(
        self, msg: jsonrpc.Message, answer: Answer, key: str, entries: list[dict[str, object]]
    ) -> None:
        """Answer a paginated ``*/list`` request with one page of ``entries``."""
        try:
            cursor = mcp.cursor_params.decode(msg.params).cursor if msg.params else None
            page, nxt = mcp.paginate(entries, cursor, mcp.TOOLS_PAGE_SIZE)
        except (msgspec.DecodeError, ValueError) as exc:
            await answer.error(msg.id, jsonrpc.INVALID_PARAMS, f"Invalid params: {exc}")
            return
        result: dict[str, object] = {key: page}
        if nxt is not None:
            result["nextCursor"] = nxt
        await answer.result(msg.id, result)

    async def read_resource(self, msg: jsonrpc.Message, answer: Answer) -> None:
        params = await decode_params(msg, mcp.read_resource_params, answer)
        if params is None:
            return
        resource = self.app.resources.get(params.uri)
        if resource is None:
            known = ", ".join(self.app.resources) or "none"
            await answer.error(
                msg.id,
                jsonrpc.RESOURCE_NOT_FOUND,
                f"Resource not found: {params.uri} (known: {known})",
                {"uri": params.uri},
            )
            return
        try:
            text = await resource.read(self.app)
        except Exception as exc:  # noqa: BLE001 - answered, logged
            trace.failure(self.state.name, "resource_failed", exc, uri=params.uri)
            await answer.error(msg.id, jsonrpc.INTERNAL_ERROR, f"Internal error: {exc}")
            return
        result = {"contents": [{"uri": resource.uri, "mimeType": resource.mime_type, "text": text}]}
        await answer.result(msg.id, result)


async def run_session(
    ctx: ChildContext,
    *,
    app: AppContext,
    state: SessionState,
    inbox: Mailbox[SessionInput],
    outbox: Mailbox[Outbound],
    task_status: trio.TaskStatus[Session] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Child start function of a Session actor."""
    session = Session(app, state, outbox)
    try:
        await session.serve(ctx, inbox, task_status)
    finally:
        app.sessions.discard(state)


def _answer_unserved(messages: Sequence[jsonrpc.Decoded], slots: list[Answer]) -> None:
    """The session stops in the middle of a batch: answer the elements not served yet
    (-32603; nothing for a notification), so the batch's array still goes out."""
    for msg, slot in zip(messages, slots, strict=True):
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
