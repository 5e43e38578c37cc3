"""A small Chrome DevTools Protocol client over trio-websocket, for the dashboard's browser
tests and ``tools/ui_screenshots.py``: launch the system's headless Chromium (Debian's
``chromium``; nothing is downloaded), open a page, evaluate JavaScript, take screenshots."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio
import waits
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
START_TIMEOUT = 30.0
CALL_TIMEOUT = 30.0
CLOSE_GRACE = 10.0  # s the browser's process group has to exit after SIGTERM
KILL_WAIT = 10.0  # s it has after SIGKILL
PROFILE_ATTEMPTS = 5


def find_chromium() -> str | None:
    return next((path for name in CANDIDATES if (path := shutil.which(name))), None)


@dataclass
class Browser:
    """A running headless Chromium: its DevTools port and process (the leader of its own
    process group, which its zygote, renderers and helpers join)."""

    process: subprocess.Popen[bytes]
    port: int
    path: str  # the browser's DevTools websocket path
    profile: tempfile.TemporaryDirectory[str]

    def close(self) -> None:
        """Stop the browser and every process of its group, then remove its profile.

        SIGTERM to the group, then SIGKILL to what is left after `CLOSE_GRACE` s; the
        profile is removed only once no process of the group runs (a renderer still
        writing into ``Default/`` made the removal fail with ``Directory not empty``).
        Error handling: removing the profile never raises (it is retried, then left).
        """
        group = self.process.pid
        _signal_group(group, signal.SIGTERM)
        if not _wait_group(self.process, group, CLOSE_GRACE):
            _signal_group(group, signal.SIGKILL)
            _wait_group(self.process, group, KILL_WAIT)

        def removed() -> bool:
            self.profile.cleanup()  # ignore_cleanup_errors: it never raises
            return not os.path.exists(self.profile.name)

        waits.until_sync(removed, PROFILE_ATTEMPTS * 0.1, 0.1)


def _signal_group(group: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, sig)


def group_members(group: int) -> list[int]:
    """The processes of process group ``group`` that still run (zombies excluded): from
    ``/proc`` on Linux, else whether ``killpg(group, 0)`` finds any."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        try:
            os.killpg(group, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [group]
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # it exited meanwhile
        state, _ppid, pgrp = stat[stat.rfind(")") + 2 :].split()[:3]
        if int(pgrp) == group and state not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def _wait_group(process: subprocess.Popen[bytes], group: int, timeout: float) -> bool:
    """Whether every process of ``group`` exited within ``timeout`` s (the leader reaped)."""

    def gone() -> bool:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=0.05)
        return process.returncode is not None and not group_members(group)

    return waits.until_sync(gone, timeout)


def launch(binary: str, width: int = 1400, height: int = 900) -> Browser:
    """Start ``binary`` headless (as root: without its sandbox) with DevTools on a free port,
    in a process group of its own (see `Browser.close`)."""
    profile = tempfile.TemporaryDirectory(prefix="memtrio-chromium-", ignore_cleanup_errors=True)
    process = subprocess.Popen(
        [
            binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-dev-shm-usage", "--disable-extensions", "--disable-background-networking",
            "--remote-debugging-port=0", f"--user-data-dir={profile.name}",
            f"--window-size={width},{height}", "about:blank",
        ],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    browser = Browser(process, 0, "", profile)
    marker = Path(profile.name) / "DevToolsActivePort"

    def started() -> bool:
        return process.poll() is not None or (
            marker.exists() and marker.read_text().count("\n") >= 1
        )

    if not waits.until_sync(started, START_TIMEOUT) or process.poll() is not None:
        browser.close()
        raise RuntimeError(f"{binary} did not start (exit {process.poll()})")
    port, path = marker.read_text().split("\n")[:2]
    browser.port, browser.path = int(port), path.strip()
    return browser


class Page:
    """One browser tab, driven over its DevTools websocket."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.waiting: dict[int, trio.MemorySendChannel[dict[str, Any]]] = {}
        # What went wrong in the page: uncaught exceptions, console errors, failed loads
        # (an API answer with an error status among them).
        self.errors: list[str] = []

    async def read_loop(self) -> None:
        try:
            while True:
                message = json.loads(await self.ws.get_message())
                if "id" not in message:
                    self._event(message.get("method", ""), message.get("params", {}))
                channel = self.waiting.pop(message.get("id", -1), None)
                if channel is not None:
                    channel.send_nowait(message)
        except ConnectionClosed:
            return

    def _event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.errors.append(
                f"exception: {details.get('exception', {}).get('description') or details}"
            )
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            args = params.get("args", [])
            self.errors.append("console: " + " ".join(str(a.get("value", "")) for a in args))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}".strip())

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
        value = None

        async def truthy() -> bool:
            nonlocal value
            value = await self.eval(guarded)
            return bool(value)

        await waits.until(truthy, timeout)
        return value

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", url=url)

    async def viewport(self, width: int, height: int) -> None:
        """Lay the page out (and take screenshots) at ``width`` x ``height`` CSS pixels."""
        await self.send(
            "Emulation.setDeviceMetricsOverride",
            width=width, height=height, deviceScaleFactor=1, mobile=False,
        )  # fmt: skip

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
                    for domain in ("Page", "Runtime", "Log"):
                        await page.send(f"{domain}.enable")
                    yield page
            finally:
                with trio.move_on_after(5):
                    await control.send("Target.closeTarget", targetId=target)
        nursery.cancel_scope.cancel()
