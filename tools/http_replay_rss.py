#!/usr/bin/env python3
"""Memory of a ``memtrio serve`` whose one HTTP session streams many large answers.

Usage: python tools/http_replay_rss.py [--answers 500] [--size 1000000] [--json FILE]
       python tools/http_replay_rss.py --sessions 24 --answers 5 [--parallel] [--json FILE]

Starts ``memtrio serve --transport http --bind 127.0.0.1:0`` on a fresh
``MEMTRIO_HOME`` (embeddings and the code index off), opens one Streamable HTTP
session, stores one memory of ``--size`` characters and reads it back with
``inspect`` ``--answers`` times, each answer on its own SSE stream (about
``--size`` bytes of JSON each). Then it resumes the last stream with
``Last-Event-ID`` (its priming event: the answer is replayed), resumes the first
stream (its events left the replay log long ago: 404), ends the session
(``DELETE``) and reads the RSS again.

Reported (from /proc/<pid>/status): the RSS after the warm-up (the session open,
the memory stored, one answer read: the baseline), the highest RSS sampled after
each answer, the RSS after the resumptions, one and three seconds after the
``DELETE``, and the peak (VmHWM). Exit status 1 when the RSS while streaming or
after the resumption exceeds the baseline by more than ``--budget-mb`` (64).

With ``--sessions N`` (more than one) it measures many sessions instead (issue 37,
item 12): N sessions are opened, then each reads ``--answers`` streamed answers of the
memory (one session after the other, or with ``--parallel`` all sessions at once,
one thread each), and none is ever deleted. The baseline is the RSS once the
sessions are open and one answer was read; reported are the RSS before the sessions,
the baseline, the peak sampled every 20 ms while answering, the RSS right after and
three seconds later, and VmHWM. Exit status 1 when the peak exceeds the baseline by
more than ``--budget-mb`` (64: ``[http] replay_total_bytes``).

Everything runs on loopback; the server is stopped (SIGTERM, then killed) by its
pid before the script exits.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
from memtrio.actors.chaos.client import initialize_params, request_message, server_env

LISTENING = re.compile(rb"listening on (\S+) \(pid (\d+)\)")
PROTOCOL = "2025-11-25"
BOTH = "application/json, text/event-stream"


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """A memory figure of ``pid`` from /proc (``VmRSS``, ``VmHWM``), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for pid {pid}")


class Server:
    """One ``memtrio serve`` child on loopback; stderr drained by a thread."""

    def __init__(self, home: Path, extra_env: dict[str, str]) -> None:
        env = server_env(home, {"MEMTRIO_CODE": "off", **extra_env})
        command = [sys.executable, "-m", "memtrio.supervisors.cli", "serve"]
        self.proc = subprocess.Popen(
            [*command, "--transport", "http", "--bind", "127.0.0.1:0"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stderr is not None
        self.stderr: list[bytes] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                self.stop()
                raise SystemExit(f"memtrio serve exited: {b''.join(self.stderr).decode()}")
            self.stderr.append(line)
            match = LISTENING.search(line)
            if match:
                self.url = match.group(1).decode()
                self.pid = int(match.group(2))
                break
        else:
            self.stop()
            raise SystemExit("memtrio serve did not say it was listening within 60 s")
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def sse_events(text: str) -> list[dict[str, str]]:
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


def call(rid: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def measure(answers: int, size: int, extra_env: dict[str, str]) -> dict[str, Any]:
    """Run the workload on a fresh server; the figures (MiB, seconds, statuses)."""
    with tempfile.TemporaryDirectory(prefix="memtrio-replay-rss-") as tmp:
        server = Server(Path(tmp), extra_env)
        try:
            return _workload(server, answers, size)
        finally:
            server.stop()


def _workload(server: Server, answers: int, size: int) -> dict[str, Any]:
    url, pid = server.url, server.pid
    out: dict[str, Any] = {"answers": answers, "size": size}
    with httpx2.Client(timeout=120.0, headers={"accept": BOTH}) as http:
        init = request_message("initialize", initialize_params("http-replay-rss", PROTOCOL), 0)
        reply = http.post(url, json=init)
        reply.raise_for_status()
        session = {"mcp-session-id": reply.headers["mcp-session-id"]}
        http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                  headers=session)  # fmt: skip
        words = "replay log bound bytes session stream event answer "
        content = (words * (size // len(words) + 1))[:size]
        stored = http.post(url, json=call(1, "remember", {"content": content}), headers=session)
        text = stored.text
        memory_id = next(
            json.loads(e["data"])["result"]["structuredContent"]["id"]
            for e in sse_events(text)
            if e.get("data")
        )
        first_priming = ""
        last_priming = ""
        answer_bytes = 0
        peak = 0.0
        started = time.perf_counter()
        for n in range(answers + 1):
            got = http.post(url, json=call(10 + n, "inspect", {"id": memory_id}), headers=session)
            events = sse_events(got.text)
            if got.status_code != 200 or not any(e.get("data") for e in events):
                raise SystemExit(f"answer {n}: HTTP {got.status_code} {got.text[:300]}")
            last_priming = events[0]["id"]
            if n == 0:  # the warm-up answer
                first_priming = last_priming
                answer_bytes = max(len(e.get("data", "")) for e in events)
                out["baseline_mb"] = rss_mb(pid)
            else:
                peak = max(peak, rss_mb(pid))
        out["stream_seconds"] = round(time.perf_counter() - started, 2)
        out["answer_bytes"] = answer_bytes
        out["streaming_peak_mb"] = peak
        resume = {**session, "accept": "text/event-stream"}
        last = http.get(url, headers={**resume, "last-event-id": last_priming})
        replayed = [e for e in sse_events(last.text) if e.get("data")]
        out["resume_last_status"] = last.status_code
        out["resume_last_replayed"] = len(replayed)
        first = http.get(url, headers={**resume, "last-event-id": first_priming})
        out["resume_first_status"] = first.status_code
        out["after_resume_mb"] = rss_mb(pid)
        out["delete_status"] = http.delete(url, headers=session).status_code
        time.sleep(1.0)
        out["after_delete_1s_mb"] = rss_mb(pid)
        time.sleep(2.0)
        out["after_delete_3s_mb"] = rss_mb(pid)
        out["peak_hwm_mb"] = rss_mb(pid, "VmHWM")
    return out


def measure_sessions(
    sessions: int, answers: int, size: int, parallel: bool, extra_env: dict[str, str]
) -> dict[str, Any]:
    """``sessions`` sessions each reading ``answers`` streamed answers, never deleted, on a
    fresh server; the figures (MiB, seconds)."""
    with tempfile.TemporaryDirectory(prefix="memtrio-replay-rss-") as tmp:
        server = Server(Path(tmp), extra_env)
        try:
            return _sessions_workload(server, sessions, answers, size, parallel)
        finally:
            server.stop()


def _open_session(http: httpx2.Client, url: str) -> dict[str, str]:
    init = request_message("initialize", initialize_params("http-replay-rss", PROTOCOL), 0)
    reply = http.post(url, json=init)
    reply.raise_for_status()
    session = {"mcp-session-id": reply.headers["mcp-session-id"]}
    http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
              headers=session)  # fmt: skip
    return session


def _streamed(http: httpx2.Client, url: str, session: dict[str, str], rid: int, memory: int) -> int:
    """One streamed ``inspect`` answer read whole; its size in bytes."""
    got = http.post(url, json=call(rid, "inspect", {"id": memory}), headers=session)
    data = [e["data"] for e in sse_events(got.text) if e.get("data")]
    if got.status_code != 200 or not data:
        raise SystemExit(f"answer {rid}: HTTP {got.status_code} {got.text[:300]}")
    return max(len(d) for d in data)


def _sessions_workload(  # noqa: C901
    server: Server, sessions: int, answers: int, size: int, parallel: bool
) -> dict[str, Any]:
    url, pid = server.url, server.pid
    out: dict[str, Any] = {"sessions": sessions, "answers": answers, "size": size,
                           "parallel": parallel}  # fmt: skip
    out["before_sessions_mb"] = rss_mb(pid)
    clients = [httpx2.Client(timeout=300.0, headers={"accept": BOTH}) for _ in range(sessions)]
    try:
        opened = [_open_session(http, url) for http in clients]
        words = "replay log bound bytes session stream event answer "
        content = (words * (size // len(words) + 1))[:size]
        stored = clients[0].post(url, json=call(1, "remember", {"content": content}),
                                 headers=opened[0])  # fmt: skip
        memory = next(
            json.loads(e["data"])["result"]["structuredContent"]["id"]
            for e in sse_events(stored.text)
            if e.get("data")
        )
        out["answer_bytes"] = _streamed(clients[0], url, opened[0], 2, memory)
        out["baseline_mb"] = rss_mb(pid)
        peak = [out["baseline_mb"]]
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.wait(0.02):
                peak[0] = max(peak[0], rss_mb(pid))

        def one_session(index: int) -> None:
            for n in range(answers):
                _streamed(clients[index], url, opened[index], 10 + n, memory)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.perf_counter()
        if parallel:
            workers = [threading.Thread(target=one_session, args=(i,)) for i in range(sessions)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        else:
            for n in range(answers):
                for index in range(sessions):
                    _streamed(clients[index], url, opened[index], 10 + n, memory)
        out["stream_seconds"] = round(time.perf_counter() - started, 2)
        sampling.set()
        sampler.join()
        out["streaming_peak_mb"] = max(peak[0], rss_mb(pid))
        out["after_answers_mb"] = rss_mb(pid)
        time.sleep(3.0)
        out["after_3s_mb"] = rss_mb(pid)
        out["peak_hwm_mb"] = rss_mb(pid, "VmHWM")
    finally:
        for http in clients:
            http.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=500)
    parser.add_argument("--size", type=int, default=1_000_000, help="characters of the memory")
    parser.add_argument(
        "--sessions",
        type=int,
        default=1,
        help="sessions (more than one: none is deleted, see above)",
    )
    parser.add_argument(
        "--parallel", action="store_true", help="with --sessions: all sessions answered at once"
    )
    parser.add_argument("--budget-mb", type=float, default=64.0)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--env", action="append", default=[], help="KEY=VALUE for the server (repeatable)"
    )
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.env)
    if args.sessions > 1:
        figures = measure_sessions(args.sessions, args.answers, args.size, args.parallel, extra)
    else:
        figures = measure(args.answers, args.size, extra)
    base = figures["baseline_mb"]
    for key, value in figures.items():
        shown = f"{value:.1f}" if isinstance(value, float) else str(value)
        delta = f"  (+{value - base:.1f})" if key.endswith("_mb") and key != "baseline_mb" else ""
        print(f"{key:24} {shown}{delta}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    over = max(figures["streaming_peak_mb"], figures.get("after_resume_mb", 0.0)) - base
    if over > args.budget_mb:
        print(f"over budget: RSS grew {over:.1f} MiB > {args.budget_mb:g} MiB", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
