"""A small Chrome DevTools Protocol client over trio-websocket, for the dashboard's browser
tests and ``tools/ui_screenshots.py``: launch the system's headless Chromium (Debian's
``chromium``; nothing is downloaded), open a page, evaluate JavaScript, take screenshots."""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
START_TIMEOUT = 30.0
CALL_TIMEOUT = 30.0


def find_chromium() -> str | None:
    return next((path for name in CANDIDATES if (path := shutil.which(name))), None)


@dataclass
class Browser:
    """A running headless Chromium: its DevTools port and process."""

    process: subprocess.Popen[bytes]
    port: int
    path: str  # the browser's DevTools websocket path
    profile: tempfile.TemporaryDirectory[str]

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.profile.cleanup()


def launch(binary: str, width: int = 1400, height: int = 900) -> Browser:
    """Start ``binary`` headless (as root: without its sandbox) with DevTools on a free port."""
    profile = tempfile.TemporaryDirectory(prefix="memtrio-chromium-")
    process = subprocess.Popen(
        [
            binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-dev-shm-usage", "--disable-extensions", "--disable-background-networking",
            "--remote-debugging-port=0", f"--user-data-dir={profile.name}",
            f"--window-size={width},{height}", "about:blank",
        ],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    marker = Path(profile.name) / "DevToolsActivePort"
    deadline = time.monotonic() + START_TIMEOUT
    while not (marker.exists() and marker.read_text().count("\n") >= 1):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            profile.cleanup()
            raise RuntimeError(f"{binary} did not start (exit {process.poll()})")
        time.sleep(0.05)
    port, path = marker.read_text().split("\n")[:2]
    return Browser(process, int(port), path.strip(), profile)


class Page:
    """One browser tab, driven over its DevTools websocket."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.waiting: dict[int, trio.MemorySendChannel[dict[str, Any]]] = {}

    async def read_loop(self) -> None:
        try:
            while True:
                message = json.loads(await self.ws.get_message())
                channel = self.waiting.pop(message.get("id", -1), None)
                if channel is not None:
                    channel.send_nowait(message)
        except ConnectionClosed:
            return

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        rid = next(self.ids)
        send, receive = trio.open_memory_channel[dict[str, Any]](1)
        self.waiting[rid] = send
        await self.ws.send_message(json.dumps({"id": rid, "method": method, "params": params}))
        with trio.fail_after(CALL_TIMEOUT):
            reply = await receive.receive()
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    async def eval(self, expression: str) -> Any:
        """The value of ``expression`` in the page (a promise is awaited)."""
        result = await self.send(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, timeout: float = 20.0) -> Any:
        """Poll ``expression`` until it is truthy (an exception counts as false: the page may
        still be loading); its value (fails after ``timeout`` s)."""
        guarded = f"(() => {{ try {{ return ({expression}); }} catch (e) {{ return false; }} }})()"
        with trio.fail_after(timeout):
            while not (value := await self.eval(guarded)):
                await trio.sleep(0.05)
        return value

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", url=url)

    async def screenshot(self, path: Path) -> Path:
        shot = await self.send("Page.captureScreenshot", format="png")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    async def fill(self, selector: str, value: str) -> None:
        await self.eval(
            f"(() => {{ const el = document.querySelector({json.dumps(selector)});"
            f" el.value = {json.dumps(value)}; el.dispatchEvent(new Event('input')); }})()"
        )

    async def click(self, selector: str) -> None:
        await self.eval(f"document.querySelector({json.dumps(selector)}).click()")


@asynccontextmanager
async def open_page(browser: Browser) -> AsyncIterator[Page]:
    """A new tab (closed at the end of the block)."""
    base = f"ws://127.0.0.1:{browser.port}"
    async with trio.open_nursery() as nursery:
        async with open_websocket_url(base + browser.path) as control_ws:
            control = Page(control_ws)
            nursery.start_soon(control.read_loop)
            target = (await control.send("Target.createTarget", url="about:blank"))["targetId"]
            try:
                async with open_websocket_url(f"{base}/devtools/page/{target}") as ws:
                    page = Page(ws)
                    nursery.start_soon(page.read_loop)
                    await page.send("Page.enable")
                    yield page
            finally:
                with trio.move_on_after(5):
                    await control.send("Target.closeTarget", targetId=target)
        nursery.cancel_scope.cancel()
