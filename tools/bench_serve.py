#!/usr/bin/env python3
"""Load on one long-lived ``memtrio serve``: many concurrent sessions doing remember/recall.

Usage: python tools/bench_serve.py [--sessions 50] [--seconds 30] [--mode http|attach|both]
                                   [--embeddings on|off] [--json FILE]

``http``: one ``memtrio serve --transport http`` (a fresh ``MEMTRIO_HOME``),
``--sessions`` concurrent Streamable HTTP sessions (raw JSON-RPC over
HTTP/1.1 with httpx2, no SDK in the timing), each alternating ``remember``
(a new, unique memory) and ``recall`` for ``--seconds``.

``attach``: the same workload through ``--sessions`` ``memtrio mcp`` stdio
children that attach to a running ``memtrio serve`` (each speaks raw JSON-RPC
over its stdin/stdout; the relay is in the timing, as an agent would see it).

Each mode reports calls per second, p50/p99/max latency per tool, the number of
errors (HTTP errors, JSON-RPC errors, ``isError`` results, children exiting),
and then, with the server stopped, checks the store: every ``remember`` that was
acknowledged (its id returned) must be in the database.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import trio
from memtrio.actors.chaos.client import (
    PROTOCOL_VERSION,
    initialize_params,
    request_message,
    server_env,
)

LISTENING = re.compile(rb"listening on (\S+) \(pid (\d+)\)")
PROTOCOL = PROTOCOL_VERSION
INIT = request_message("initialize", initialize_params("bench-serve", PROTOCOL), 0)
WORDS = (
    "parser cache invalidation retry budget schema migration token bucket "
    "websocket heartbeat sqlite wal checkpoint embedding batch tree-sitter grammar "
    "deploy pipeline flaky test timeout lock contention index rebuild"
).split()


def memtrio_cmd() -> list[str]:
    return [sys.executable, "-m", "memtrio.supervisors.cli"]


@dataclass
class Stats:
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    acknowledged: list[int] = field(default_factory=list)

    def add(self, tool: str, seconds: float) -> None:
        self.latencies.setdefault(tool, []).append(seconds)

    def error(self, what: str) -> None:
        if len(self.errors) < 20:
            self.errors.append(what[:300])
        else:
            self.errors.append("...")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    index = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[index]


def memory_text(session: int, n: int) -> str:
    picks = [WORDS[(session * 7 + n * 3 + i) % len(WORDS)] for i in range(6)]
    return f"session {session} note {n}: " + " ".join(picks)


def tool_request(rid: int, name: str, arguments: dict[str, object]) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def workload(session: int, n: int) -> tuple[str, dict[str, object]]:
    if n % 2 == 0:
        return "remember", {"content": memory_text(session, n), "scopes": ["global"]}
    return "recall", {"query": " ".join(WORDS[(session + n) % len(WORDS) :][:3]), "limit": 5}


def check_answer(stats: Stats, tool: str, reply: dict[str, object]) -> None:
    if "error" in reply:
        stats.error(f"{tool}: JSON-RPC error {reply['error']}")
        return
    result = reply.get("result")
    if not isinstance(result, dict) or result.get("isError"):
        stats.error(f"{tool}: {json.dumps(result)[:200]}")
        return
    if tool == "remember":
        structured = result.get("structuredContent")
        if isinstance(structured, dict) and isinstance(structured.get("id"), int):
            stats.acknowledged.append(structured["id"])
        else:
            text = result["content"][0]["text"]  # type: ignore[index]
            stats.acknowledged.append(int(json.loads(text)["id"]))


# -- the server ---------------------------------------------------------------


class Server:
    """One ``memtrio serve`` subprocess; its URL from the line it prints."""

    def __init__(self, home: Path, env: dict[str, str], transport: str) -> None:
        self.home = home
        self.proc = subprocess.Popen(
            [*memtrio_cmd(), "serve", "--transport", transport, "--bind", "127.0.0.1:0"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 60
        seen = b""
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                raise SystemExit(f"memtrio serve exited: {seen.decode(errors='replace')}")
            seen += line
            match = LISTENING.search(line)
            if match:
                self.url = match.group(1).decode()
                self.pid = int(match.group(2))
                return
        raise SystemExit("memtrio serve did not say it was listening within 60 s")

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


# -- HTTP sessions ------------------------------------------------------------


def parse_http_reply(response: object) -> dict[str, object]:
    """The JSON-RPC reply in a JSON or SSE response body."""
    body: str = response.text  # type: ignore[attr-defined]
    kind = response.headers.get("content-type", "")  # type: ignore[attr-defined]
    if kind.startswith("text/event-stream"):
        for line in body.splitlines():
            if line.startswith("data:") and line[5:].strip():
                message = json.loads(line[5:])
                if "id" in message and "method" not in message:
                    return message  # type: ignore[no-any-return]
        raise ValueError(f"no reply in the event stream: {body[:200]}")
    return json.loads(body)  # type: ignore[no-any-return]


async def http_session(url: str, index: int, until: float, stats: Stats) -> None:
    import httpx2

    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(timeout=120.0, headers=headers) as client:
        init = INIT
        response = await client.post(url, json=init)
        if response.status_code != 200:
            stats.error(f"initialize: HTTP {response.status_code} {response.text[:200]}")
            return
        session_headers = {
            "Mcp-Session-Id": response.headers["mcp-session-id"],
            "MCP-Protocol-Version": PROTOCOL,
        }
        await client.post(
            url,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=session_headers,
        )
        n = 0
        while trio.current_time() < until:
            tool, arguments = workload(index, n)
            n += 1
            started = time.perf_counter()
            try:
                response = await client.post(
                    url, json=tool_request(n, tool, arguments), headers=session_headers
                )
                elapsed = time.perf_counter() - started
                if response.status_code != 200:
                    stats.error(f"{tool}: HTTP {response.status_code} {response.text[:200]}")
                    continue
                reply = parse_http_reply(response)
            except Exception as exc:  # noqa: BLE001 - counted as an error of the run
                stats.error(f"{tool}: {type(exc).__name__}: {exc}")
                continue
            stats.add(tool, elapsed)
            check_answer(stats, tool, reply)
        await client.delete(url, headers=session_headers)


# -- attached stdio children ----------------------------------------------------


async def child_session(
    env: dict[str, str], cwd: Path, index: int, until: float, stats: Stats
) -> None:
    proc = await trio.lowlevel.open_process(
        [*memtrio_cmd(), "mcp"],
        env=env,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    buffer = bytearray()

    async def send(message: dict[str, object]) -> None:
        await proc.stdin.send_all(json.dumps(message).encode() + b"\n")  # type: ignore[union-attr]

    async def receive() -> dict[str, object]:
        while b"\n" not in buffer:
            data = await proc.stdout.receive_some(65536)  # type: ignore[union-attr]
            if not data:
                raise EOFError("the child closed its stdout")
            buffer.extend(data)
        line, _, rest = bytes(buffer).partition(b"\n")
        buffer[:] = rest
        return json.loads(line)  # type: ignore[no-any-return]

    try:
        await send(INIT)
        await receive()
        await send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        n = 0
        while trio.current_time() < until:
            tool, arguments = workload(index, n)
            n += 1
            started = time.perf_counter()
            await send(tool_request(n, tool, arguments))
            reply = await receive()
            stats.add(tool, time.perf_counter() - started)
            check_answer(stats, tool, reply)
    except (EOFError, trio.BrokenResourceError, ValueError) as exc:
        stats.error(f"child {index}: {type(exc).__name__}: {exc}")
    finally:
        await proc.stdin.aclose()
        with trio.move_on_after(30):
            code = await proc.wait()
            if code != 0:
                err = await proc.stderr.receive_some(4096)
                stats.error(f"child {index} exited {code}: {err.decode(errors='replace')}")
        if proc.returncode is None:
            proc.kill()


def children_attached(env: dict[str, str], home: Path) -> None:
    """Wait until a probe child reports that it attached (the serve is up)."""
    probe = subprocess.run(
        [*memtrio_cmd(), "mcp"],
        env=env,
        input=b"",
        capture_output=True,
        timeout=60,
    )
    if b"attaching to memtrio serve" not in probe.stderr:
        raise SystemExit(
            "a memtrio mcp child did not attach to the running memtrio serve: "
            + probe.stderr.decode(errors="replace")
        )


# -- a run ----------------------------------------------------------------------


def acknowledged_present(home: Path, ids: list[int]) -> tuple[int, int]:
    """(present, missing) of ``ids`` in the store of ``home``."""
    from memtrio.actors.store.sqlite.db import db_path

    conn = sqlite3.connect(f"file:{db_path(home)}?mode=ro", uri=True)
    try:
        present = {row[0] for row in conn.execute("SELECT id FROM memories")}
    finally:
        conn.close()
    found = sum(1 for i in ids if i in present)
    return found, len(ids) - found


def run_mode(mode: str, sessions: int, seconds: float, embeddings: bool) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="memtrio-bench-serve-") as tmp:
        home = Path(tmp) / "home"
        work = Path(tmp) / "work"
        work.mkdir()
        # children attach to this serve, start none
        settings = {"MEMTRIO_SERVE_ATTACH": "existing"}
        env = server_env(home, {"MEMTRIO_EMBEDDINGS": "on" if embeddings else "off", **settings})
        server = Server(home, env, "http" if mode == "http" else "tcp")
        stats = Stats()

        async def main() -> float:
            if mode == "attach":
                await trio.to_thread.run_sync(children_attached, env, home)
            start = trio.current_time()
            until = start + seconds
            async with trio.open_nursery() as nursery:
                for i in range(sessions):
                    if mode == "http":
                        nursery.start_soon(http_session, server.url, i, until, stats)
                    else:
                        nursery.start_soon(child_session, env, work, i, until, stats)
            return trio.current_time() - start

        try:
            elapsed = trio.run(main)
        finally:
            code = server.stop()
        present, missing = acknowledged_present(home, stats.acknowledged)
        calls = sum(len(v) for v in stats.latencies.values())
        per_tool = {
            tool: {
                "calls": len(values),
                "p50_ms": round(statistics.median(values) * 1000, 1),
                "p99_ms": round(percentile(values, 0.99) * 1000, 1),
                "max_ms": round(max(values) * 1000, 1),
            }
            for tool, values in sorted(stats.latencies.items())
        }
        return {
            "mode": mode,
            "sessions": sessions,
            "seconds": round(elapsed, 1),
            "embeddings": embeddings,
            "calls": calls,
            "calls_per_second": round(calls / elapsed, 1),
            "tools": per_tool,
            "errors": len(stats.errors),
            "error_samples": stats.errors[:5],
            "acknowledged_writes": len(stats.acknowledged),
            "present_after": present,
            "missing_after": missing,
            "server_exit_code": code,
        }


def show(result: dict[str, object]) -> None:
    print(
        f"{result['mode']}: {result['sessions']} sessions x {result['seconds']} s, "
        f"embeddings {'on' if result['embeddings'] else 'off'}: {result['calls']} calls, "
        f"{result['calls_per_second']} calls/s, errors {result['errors']}, "
        f"acknowledged writes {result['acknowledged_writes']}, missing afterwards "
        f"{result['missing_after']}, server exit {result['server_exit_code']}"
    )
    for tool, row in result["tools"].items():  # type: ignore[attr-defined]
        print(
            f"  {tool:10} {row['calls']:6} calls  p50 {row['p50_ms']:7.1f} ms  "
            f"p99 {row['p99_ms']:7.1f} ms  max {row['max_ms']:7.1f} ms"
        )
    for sample in result["error_samples"]:  # type: ignore[attr-defined]
        print(f"  error: {sample}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--mode", choices=("http", "attach", "both"), default="both")
    parser.add_argument("--embeddings", choices=("on", "off"), default="on")
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    args = parser.parse_args()
    modes = ("http", "attach") if args.mode == "both" else (args.mode,)
    results = []
    for mode in modes:
        result = run_mode(mode, args.sessions, args.seconds, args.embeddings == "on")
        show(result)
        results.append(result)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    failed = any(r["errors"] or r["missing_after"] or r["server_exit_code"] for r in results)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
