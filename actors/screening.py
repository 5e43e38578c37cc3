"""Every tool call that stores text goes through `run_tool`: its arguments are screened for
secrets (``protocol.screening``) by ``[store] secrets`` before the handler sees them.

The MCP sessions (``tool_calls``), the dashboard's API (``ui.api``) and the CLI commands
that call a tool's handler all call it, so no write path can forget the screen; a tool
says whether the store keeps its arguments' text (`Tool.screened`: every tool that writes
but the deletions). ``redact`` adds its warnings to the result's ``warnings``;
``refuse`` fails the call (`SecretRefused`, an ``isError`` result) before anything is
embedded or written.

Text the store keeps besides tool arguments is screened where it is written: the recall
log's queries (`logged_query`), the import files (``memory.transfer``, ``kg.jsonl``).

Cost: the scan is linear in the text (``protocol.secrets``); arguments of more than
`THREAD_BYTES` are scanned on a worker thread so the event loop keeps serving.
"""

from __future__ import annotations

from typing import TypeVar, cast

import msgspec
import trio

from ..protocol.screening import screen
from ..protocol.secrets import SecretsMode, find_secrets, redact
from ..protocol.tools import Tool
from ..supervisors.context import AppContext, CallContext

S = TypeVar("S")
THREAD_BYTES = 32 * 1024  # arguments larger than this (as JSON) are screened off the event loop
_encoder = msgspec.json.Encoder()


def mode_of(app: AppContext) -> SecretsMode:
    """The ``[store] secrets`` mode of this server."""
    return app.config.store.secrets


async def screened(app: AppContext, tool: Tool, args: S) -> tuple[S, list[str]]:
    """``args`` of ``tool`` as the store may keep them, and the warnings of what was replaced.

    Error handling: ``refuse`` raises `SecretRefused` naming each secret's argument path.
    """
    mode = mode_of(app)
    if not tool.screened or mode == "allow":
        return args, []
    if len(_encoder.encode(args)) > THREAD_BYTES:
        return await trio.to_thread.run_sync(screen, args, mode)
    return screen(args, mode)


def with_warnings(value: S, warnings: list[str]) -> S:
    """A tool's result ``value`` with ``warnings`` added to its own ``warnings`` field."""
    if not warnings or not isinstance(value, msgspec.Struct):
        return value
    present = getattr(value, "warnings", msgspec.UNSET)
    before = [] if present is msgspec.UNSET or present is None else list(present)
    return cast(S, msgspec.structs.replace(value, warnings=[*before, *warnings]))


async def run_tool(tool: Tool, ctx: CallContext, args: object) -> object:
    """``tool``'s handler called with ``args`` screened (see the module); its result, with
    the screen's warnings. Error handling: the handler's, and `screened`'s refusal."""
    args, warnings = await screened(ctx.app, tool, args)
    return with_warnings(await tool.handler(ctx, args), warnings)


def logged_query(app: AppContext, query: str) -> tuple[str, list[str]]:
    """``query`` as the recall log keeps it: with its secrets replaced, unless ``allow``
    (a read is never refused: ``refuse`` redacts the log too), and the warning to give."""
    if mode_of(app) == "allow":
        return query, []
    findings = find_secrets(query)
    if not findings:
        return query, []
    shown = ", ".join(f.shown(query) for f in findings)
    return redact(query, findings), [
        f"query: {shown} looks like a secret; the recall log keeps the query with a "
        "[REDACTED:...] marker in its place"
    ]
