"""An in-process memtrio serving Streamable HTTP on a free port, for the HTTP transport tests.

`serving` runs the whole application (store, graph, status; no embeddings, no
code index) with `http_listener` as an extra child, plus a test-only ``gate``
tool whose calls wait until the test opens their gate (a slow call, without
clocks).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import msgspec
import trio
from memtrio.actors.chaos.client import initialize_params, request_message
from memtrio.actors.net.connections import Connections
from memtrio.actors.net.http import http_listener
from memtrio.actors.net.listen import Listen
from memtrio.protocol.tools import Tool
from memtrio.supervisors import config as config_mod
from memtrio.supervisors.app import build_context, default_features, open_app
from memtrio.supervisors.context import AppContext, CallContext

BOTH = "application/json, text/event-stream"
INIT = request_message("initialize", initialize_params("http-test"), 0)
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


class GateArgs(msgspec.Struct, forbid_unknown_fields=True):
    name: str


@dataclass
class Gates:
    """Calls of the ``gate`` tool: each waits until its gate opens."""

    opened: dict[str, trio.Event] = field(default_factory=dict)
    entered: dict[str, trio.Event] = field(default_factory=dict)

    def gate(self, name: str) -> trio.Event:
        return self.opened.setdefault(name, trio.Event())

    def reached(self, name: str) -> trio.Event:
        return self.entered.setdefault(name, trio.Event())

    def tool(self) -> Tool:
        async def handler(ctx: CallContext, args: GateArgs) -> dict[str, str]:
            self.reached(args.name).set()
            await self.gate(args.name).wait()
            return {"passed": args.name}

        return Tool(
            name="gate", description="test: wait for a gate", args=GateArgs, handler=handler
        )


@dataclass
class Served:
    url: str
    app: AppContext
    connections: Connections
    gates: Gates


@asynccontextmanager
async def serving(
    tmp_path: Path,
    *,
    max_connections: int = 16,
    env: dict[str, str] | None = None,
    **listen: object,
) -> AsyncIterator[Served]:
    """Run memtrio with an HTTP listener on 127.0.0.1, port 0 (``listen``: `Listen` fields;
    ``env``: configuration variables, ``MEMTRIO_HTTP_REPLAY_BYTES`` for one)."""
    home = tmp_path / "home"
    cfg = config_mod.load(
        home, env={"MEMTRIO_EMBEDDINGS": "off", "MEMTRIO_CODE": "off", **(env or {})}
    )
    app = build_context(cfg, home, tmp_path)
    connections = Connections(max_connections)
    settings = Listen(transport="http", host="127.0.0.1", port=0, **listen)  # type: ignore[arg-type]
    gates = Gates()
    app.registry.add(gates.tool())
    async with open_app(app, default_features(), [http_listener(app, settings, connections)]):
        url = str(connections.listeners[0]["url"])
        yield Served(url, app, connections, gates)


def call(rid: int, name: str, arguments: dict[str, object]) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


async def initialize(
    client: httpx2.AsyncClient, url: str, headers: dict[str, str] | None = None
) -> str:
    """Open a session (initialize + initialized); its id."""
    extra = headers or {}
    reply = await client.post(url, json=INIT, headers={"accept": BOTH, **extra})
    assert reply.status_code == 200, reply.text
    assert reply.json()["result"]["protocolVersion"] == "2025-11-25"
    sid = reply.headers["mcp-session-id"]
    done = await client.post(
        url, json=INITIALIZED, headers={"accept": BOTH, "mcp-session-id": sid, **extra}
    )
    assert done.status_code == 202 and done.content == b""
    return sid


def sse_events(text: str) -> list[dict[str, str]]:
    """The events of an SSE body (each: its fields)."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            name, sep, value = line.partition(":")
            if sep and name:
                fields[name] = value[1:] if value.startswith(" ") else value
        if fields:
            events.append(fields)
    return events


def messages(text: str) -> list[dict[str, object]]:
    """The JSON-RPC messages of an SSE body (priming events have no data)."""
    return [json.loads(e["data"]) for e in sse_events(text) if e.get("data")]
