"""The tool calls of one session: each runs as its own task, so a slow call never
blocks the session's read loop.

`ToolCalls.start` checks a ``tools/call`` request and starts its task; the task
decodes the arguments with the tool's msgspec struct, runs the handler under
``[server] call_timeout`` and answers. ``notifications/cancelled`` cancels a
call (`ToolCalls.cancel`); stopping the session lets running calls finish
within the grace period (`ToolCalls.drain`).

Error handling: a `DomainError` from a handler is an ``isError`` result with
its message; any other exception is an ``isError`` result too, logged with its
traceback. A call still running when its session incarnation dies is answered
-32603 on the way out (`answer_interrupted`). A call that arrives while the
session's repository is being asked of the client (``roots/list``) waits for the
answer, bounded (``actors.session_roots``).

Grants (``supervisors.grants``) are enforced here, for every tool alike: a
session whose token is read-only gets an ``isError`` result for each tool that
writes (`Tool.writes`, from the tool's declaration), and a session whose
client's roots were all refused gets the refusal for each tool that uses the
repository (every group but ``core``).

Secrets (``[store] secrets``) are screened here too, for every tool that keeps text
(`screening.run_tool`): refused, or redacted with a warning in the result.
"""

from __future__ import annotations

import math

import msgspec
import trio

from ..protocol import jsonrpc, mcp
from ..protocol.errors import DomainError
from ..protocol.jsonrpc import Id
from ..protocol.plural import plural
from ..protocol.tools import Tool, format_validation_error
from ..supervisors import faults, trace
from ..supervisors.context import AppContext, CallContext
from ..supervisors.grants import Grant, read_only_refusal, scrub
from .answers import Answer, decode_params
from .screening import run_tool
from .session_roots import wait_for_root
from .session_state import CallState, SessionState

# At most this many tool calls run at once in a session. Another waits for one
# to end, and meanwhile the session reads no further input (the client's writes
# block): a client pipelining large calls cannot make the server hold them all.
MAX_CALLS_IN_FLIGHT = 64
_encoder = msgspec.json.Encoder()


class ToolCalls:
    """Starts, cancels and drains the tool calls of one session incarnation (in ``nursery``)."""

    def __init__(self, app: AppContext, state: SessionState, nursery: trio.Nursery) -> None:
        self.app = app
        self.state = state
        self.nursery = nursery
        self.grace = app.config.server.shutdown_grace
        self.call_timeout = app.config.server.call_timeout
        self._call_ended = trio.Event()

    async def start(self, msg: jsonrpc.Message, answer: Answer) -> None:
        """Check a ``tools/call`` request and start its task; a bad one is answered here."""
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
        params = await decode_params(msg, mcp.call_params, answer)
        if params is None:
            return
        tool = self.app.registry.get(params.name)
        if tool is None:
            await answer.error(
                msg.id,
                jsonrpc.INVALID_PARAMS,
                f"Unknown tool: {params.name!r}; tools/list names the "
                f"{plural(len(self.app.registry), 'available tool')}",
            )
            return
        call = CallState(trio.CancelScope(), answer)
        answer.held = True
        self.state.in_flight[msg.id] = call
        self.nursery.start_soon(self._run, msg.id, tool, params, call)

    async def cancel(self, request_id: Id, reason: str | None) -> None:
        """``notifications/cancelled``: stop the call; the spec wants no response for it."""
        call = self.state.in_flight.get(request_id)
        if call is not None and not call.answered:
            call.answered = True
            call.scope.cancel()
            await call.answer.skip()
            trace.event(self.state.name, "cancelled", request_id=request_id, reason=reason)

    async def drain(self) -> None:
        """Let running calls finish, within the grace period (shielded: the session is stopping)."""
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

    async def _run(self, rid: Id, tool: Tool, params: mcp.CallParams, call: CallState) -> None:
        token = trace.current.set(None)
        try:
            result: dict[str, object] | None = None
            with (
                trace.span(self.state.name, "tools/call", tool=tool.name, request_id=rid) as span,
                call.scope,
            ):
                timeout = self.call_timeout if self.call_timeout > 0 else math.inf
                with trio.move_on_after(timeout) as deadline:
                    result = shown_to(self.state.grant, await self._invoke(tool, params, rid, span))
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
        self, tool: Tool, params: mcp.CallParams, rid: Id, span: dict[str, object]
    ) -> dict[str, object]:
        grant = self.state.grant
        if grant is not None and grant.read_only and tool.writes:
            # Every tool that writes, by its declaration: a new one cannot forget the check.
            span["outcome"] = "forbidden"
            return mcp.tool_error(read_only_refusal(grant, tool.name))
        try:
            raw = bytes(params.arguments)
            args = tool.decoder.decode(raw if raw and raw != b"null" else b"{}")
        except msgspec.ValidationError as exc:
            span["outcome"] = "invalid_arguments"
            return mcp.tool_error(f"{tool.name}: {format_validation_error(exc, tool.args)}")
        except msgspec.DecodeError as exc:
            span["outcome"] = "invalid_arguments"
            return mcp.tool_error(f"{tool.name}: invalid arguments: {exc}")
        # The call uses its session's repository: wait while the client is asked for it.
        await wait_for_root(self.state)
        if self.state.root_refusal is not None and tool.group != "core":
            # The client's roots lie outside the grant: no silent fallback to `global`.
            span["outcome"] = "forbidden"
            return mcp.tool_error(
                f"{tool.name}: {self.state.root_refusal}; open the session in a repository "
                "the grant allows"
            )
        try:
            if faults.ACTIVE:
                await faults.hit("tool.call")
            value = await run_tool(tool, CallContext(self.app, self.state, rid), args)
        except DomainError as exc:
            span["outcome"] = exc.kind
            return mcp.tool_error(str(exc))
        except Exception as exc:  # noqa: BLE001 - a tool failure is a result, not a crash
            span["outcome"] = "error"
            trace.failure(self.state.name, "tool_failed", exc, tool=tool.name)
            return mcp.tool_failure(tool.name, exc)
        return mcp.tool_result(
            value,
            structured_ok=self.state.structured_ok,
            tool=tool.name,
            mode=self.state.content_mode,
        )


def shown_to(grant: Grant | None, result: dict[str, object]) -> dict[str, object]:
    """``result`` as a session with ``grant`` may see it: for a grant that does not cover
    every repository, no scope outside it is named (`scrub`), whatever the tool."""
    if grant is None or not grant.restricted:
        return result
    raw = _encoder.encode(result)
    if b"repo:" not in raw:
        return result
    shown = scrub(grant, msgspec.json.decode(raw))
    assert isinstance(shown, dict)
    return shown


def answer_interrupted(state: SessionState, why: str) -> None:
    """Answer every call of ``state`` still unanswered with -32603 ``why``, without waiting."""
    for rid, call in list(state.in_flight.items()):
        if not call.answered:
            call.answered = True
            call.answer.send_nowait(
                jsonrpc.error_response(rid, jsonrpc.INTERNAL_ERROR, f"Internal error: {why}")
            )
    state.in_flight.clear()
