"""``memtrio serve --ui`` in a repository, for the dashboard's browser tests and
``tools/ui_screenshots.py``: its dashboard URL and an MCP client on the same port; the
demo store both seed, and a page opened cold (a new tab straight on its address)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import trio
import waits
from cdp import Page
from mcp_client import server_env
from memtrio.actors.chaos.client import initialize_params, request_message

DASHBOARD = re.compile(r"memtrio serve: dashboard at (\S+)")
LISTENING = re.compile(r"memtrio serve: listening on (\S+) ")
INIT = request_message("initialize", initialize_params("ui-test"), 0)


@dataclass
class Mcp:
    """A Streamable HTTP MCP session (JSON answers) of the same server."""

    client: httpx2.AsyncClient
    url: str
    sid: str = ""
    ids: int = 0

    async def open(self) -> Mcp:
        reply = await self.client.post(self.url, json=INIT, headers={"accept": "application/json"})
        reply.raise_for_status()
        self.sid = reply.headers["mcp-session-id"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await self.client.post(self.url, json=note, headers=self.headers)
        return self

    @property
    def headers(self) -> dict[str, str]:
        return {"accept": "application/json", "mcp-session-id": self.sid}

    async def call(self, name: str, **arguments: Any) -> tuple[bool, Any]:
        """(isError, the structured result or the text) of one tool call."""
        self.ids += 1
        message = {
            "jsonrpc": "2.0",
            "id": self.ids,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        reply = await self.client.post(self.url, json=message, headers=self.headers, timeout=60)
        result = reply.json()["result"]
        if "structuredContent" in result:
            return bool(result.get("isError")), result["structuredContent"]
        text = result["content"][0]["text"]
        try:
            return bool(result.get("isError")), json.loads(text)
        except ValueError:
            return bool(result.get("isError")), text

    async def ok(self, name: str, **arguments: Any) -> Any:
        failed, value = await self.call(name, **arguments)
        assert not failed, value
        return value


@dataclass
class Served:
    dashboard: str
    mcp: Mcp
    stderr: list[str] = field(default_factory=list)


async def _drain(stream: trio.abc.ReceiveStream, into: list[str]) -> None:
    buffer = b""
    while chunk := await stream.receive_some(65536):
        buffer += chunk
        while b"\n" in buffer:
            line, _, buffer = buffer.partition(b"\n")
            into.append(line.decode(errors="replace"))


@asynccontextmanager
async def serve_ui(
    home: Path, repo: Path, env: Mapping[str, str] | None = None
) -> AsyncIterator[Served]:
    """``memtrio serve --ui`` (http, a free loopback port) run in ``repo`` until the block ends."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "memtrio.supervisors.cli", "serve", "--ui",
         "--transport", "http", "--bind", "127.0.0.1:0", "--home", str(home)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env=server_env(home, env), cwd=str(repo),
    )  # fmt: skip
    lines: list[str] = []
    try:
        async with trio.open_nursery() as nursery:
            assert process.stderr is not None
            nursery.start_soon(_drain, process.stderr, lines)

            def dashboard() -> re.Match[str] | None:
                assert process.returncode is None, "\n".join(lines)
                return next(filter(None, map(DASHBOARD.search, lines)), None)

            await waits.until(dashboard, 60)
            found = dashboard()
            assert found is not None
            mcp_url = next(filter(None, map(LISTENING.search, lines)))[1]
            async with httpx2.AsyncClient() as client:
                mcp = await Mcp(client, mcp_url).open()
                yield Served(found[1], mcp, lines)
            process.terminate()
            with trio.fail_after(30):
                await process.wait()
            nursery.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


# A small demo store: its memories (content, type, importance, entities, relations),
# observations and source files.
DEMO_MEMORIES = [
    ("Checkout calls Payments over gRPC; Payments stores card tokens in Vault", "decision", 0.9,
     ["Checkout", "Payments", "Vault"],
     [("Checkout", "calls", "Payments"), ("Payments", "stores_in", "Vault")]),
    ("Run ruff check and ruff format before every commit", "convention", 0.6, ["ruff", "CI"],
     [("CI", "runs", "ruff")]),
    ("The upload test is flaky on CI under load: retry it once before digging", "pitfall", 0.7,
     ["upload test", "CI"], [("CI", "runs", "upload test")]),
    ("Payments is owned by the billing team; ask them before changing its schema", "fact", 0.5,
     ["Payments", "billing team"], [("billing team", "owns", "Payments")]),
    ("Orders are written to Postgres by Checkout and read by Reporting", "fact", 0.6,
     ["Orders", "Postgres", "Checkout", "Reporting"],
     [("Checkout", "writes", "Orders"), ("Reporting", "reads", "Orders"),
      ("Orders", "stored_in", "Postgres")]),
    ("Vault tokens rotate every 30 days; Payments reloads them without a restart", "fact", 0.5,
     ["Vault", "Payments"], [("Payments", "reads", "Vault")]),
    ("Releases are tagged from main only, never from a release branch", "convention", 0.4, [], []),
]  # fmt: skip
DEMO_OBSERVATIONS = [
    {"entityName": "Payments", "contents": ["written in Python", "PCI scope"]},
    {"entityName": "Vault", "contents": ["HashiCorp Vault 1.15"]},
]
DEMO_SOURCE = {
    "payments/service.py": "class PaymentService:\n    def charge(self, card, amount):\n"
    "        return amount\n\n    def refund(self, charge_id):\n        return charge_id\n",
    "checkout/cart.py": "def total(items):\n    return sum(i.price for i in items)\n\n\n"
    "def charge_card(cart, card):\n    return total(cart.items)\n",
}


async def seed_demo(mcp: Mcp) -> None:
    """The demo store (docs/ui.md's screenshots, the cold-open test): memories with entities
    and relations, observations, two recalls."""
    for content, kind, importance, entities, relations in DEMO_MEMORIES:
        await mcp.ok(
            "remember", content=content, memory_type=kind, importance=importance,
            entities=entities,
            relations=[{"source": s, "relation": r, "target": t} for s, r, t in relations],
        )  # fmt: skip
    await mcp.ok("add_observations", observations=DEMO_OBSERVATIONS)
    for query in ("where are card tokens stored", "who owns Payments"):
        await mcp.ok("recall", query=query, use_embeddings=False)


# What each dashboard page shows on a seeded store once it has loaded, opened cold.
SHOWN = {
    "memories": "document.querySelectorAll('#m-table tbody tr[data-id]').length >= 3",
    "graph": "document.querySelectorAll('#g-svg g.node').length >= 3",
    "recall": "document.querySelectorAll('#r-recent li a').length >= 1"
    " && document.querySelectorAll('#r-lexical li[data-id]').length >= 1",
    "code": "document.getElementById('c-status').textContent === 'up to date'",
    "server": "!!document.querySelector('#s-tree [data-actor]')",
}
# The dashboard's error displays that show (the banner, a page's error lines), as texts.
SHOWN_ERRORS = (
    "[...document.querySelectorAll('.error')]"
    ".filter(e => !e.hidden && e.offsetParent !== null && e.textContent.trim())"
    ".map(e => e.textContent.trim())"
)


async def open_cold(page: Page, url: str, name: str, width: int = 1400, height: int = 900) -> None:
    """Load the dashboard (its printed URL, with the token) straight on page ``name`` in
    ``page`` (a new tab: nothing typed first) and wait until it shows its content (`SHOWN`).

    Error handling: fails (AssertionError) with the page's shown errors and browser errors
    when the content does not come within 30 s.
    """
    await page.viewport(width, height)
    await page.goto(f"{url}#{name}")
    try:
        await page.wait_for("document.body.dataset.ready === '1'", timeout=30)
        await page.wait_for(f"document.body.dataset.page === {json.dumps(name)}", timeout=5)
        await page.wait_for(SHOWN[name], timeout=30)
    except trio.TooSlowError:
        shown = await page.eval(SHOWN_ERRORS)
        why = f"#{name} did not show its content; errors: {shown}, {page.errors}"
        raise AssertionError(why) from None
