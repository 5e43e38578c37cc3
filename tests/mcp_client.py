"""End-to-end helpers: the official MCP Python SDK client against `memtrio mcp`.

``open_client`` launches the real server as a stdio child (``python -m
memtrio.supervisors.cli mcp``) with an isolated ``MEMTRIO_HOME``; the SDK's
stdio client passes only a whitelist of environment variables, so everything
the server needs is passed explicitly.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

SERVER_ENV_PASSTHROUGH = ("PATH", "HOME", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "PYTHONPATH")


def server_env(home: Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    out = {k: os.environ[k] for k in SERVER_ENV_PASSTHROUGH if k in os.environ}
    out["MEMTRIO_HOME"] = str(home)
    out.setdefault("MEMTRIO_EMBEDDINGS", "off")
    out["PYTHONUNBUFFERED"] = "1"
    out.update(env or {})
    return out


def server_command(args: Sequence[str] = ()) -> list[str]:
    return [sys.executable, "-m", "memtrio.supervisors.cli", "mcp", *args]


@asynccontextmanager
async def open_client(
    home: Path,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    args: Sequence[str] = (),
    timeout: float = 60.0,
) -> AsyncIterator[Client]:
    """An initialized official MCP client talking to a fresh `memtrio mcp` child.

    Embeddings are off unless ``env`` sets ``MEMTRIO_EMBEDDINGS``.
    """
    command = server_command(args)
    params = StdioServerParameters(
        command=command[0],
        args=command[1:],
        env=server_env(home, env),
        cwd=str(cwd) if cwd else str(home),
    )
    async with Client(params, read_timeout_seconds=timeout, mode="auto") as client:
        yield client


def result_payload(result: Any) -> Any:
    """The structured content of a tool result, else its text (JSON-decoded when it is JSON)."""
    if getattr(result, "structured_content", None) is not None:
        return result.structured_content
    texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
    text = "\n".join(texts)
    try:
        return json.loads(text)
    except ValueError:
        return text


async def call(client: Client, tool: str, **arguments: Any) -> tuple[bool, Any]:
    """Call ``tool``; (is_error, structured content or text)."""
    result = await client.call_tool(tool, arguments)
    return bool(result.is_error), result_payload(result)


async def ok(client: Client, tool: str, **arguments: Any) -> Any:
    """Call ``tool`` and assert it succeeded; its payload."""
    is_error, payload = await call(client, tool, **arguments)
    assert not is_error, f"{tool} failed: {payload}"
    return payload


async def fails(client: Client, tool: str, **arguments: Any) -> str:
    """Call ``tool`` and assert it returned an isError result; its text."""
    is_error, payload = await call(client, tool, **arguments)
    assert is_error, f"{tool} unexpectedly succeeded: {payload}"
    return payload if isinstance(payload, str) else json.dumps(payload)
