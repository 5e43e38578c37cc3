"""The chaos harness: scenario outcomes, the write ledger, load and log counting.

A scenario is ``async def scenario(run: Run) -> None``. It starts real
``memtrio mcp`` processes (``run.server(...)``), drives them, injects faults
and records what it saw in ``run.out``, its `Outcome`; any broken invariant is
a line in ``outcome.violations`` and fails the run.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import time
import traceback
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import trio

from ..net import proof
from .checks import check_store
from .client import (
    Caller,
    NoReply,
    Reply,
    ServerGone,
    ServerProcess,
    internal_failure,
    start_server,
)
from .netclient import HttpSession, TcpSession, open_tcp_session
from .serve import ServeFailed, ServeProcess, start_serve

DB_NAME = "memtrio.sqlite"


@dataclass
class Outcome:
    """What one scenario did and saw (one line of the report)."""

    name: str
    faults: int = 0  # faults injected (fault points fired, kill -9, locks, limits)
    requests: int = 0  # lines sent to servers
    malformed: int = 0  # malformed inputs tried
    errors_expected: int = 0
    errors_seen: int = 0
    errors_exact: bool = False  # expected is exact (else a minimum)
    acked: int = 0  # acknowledged writes checked after the scenario
    lost: int = 0  # acknowledged writes missing (must be 0)
    restarts: int = 0  # actor restarts (trace log) + server process restarts
    seconds: float = 0.0
    skipped: str = ""  # why the scenario could not run here (not a failure)
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations and self.lost == 0

    def line(self) -> str:
        rel = "=" if self.errors_exact else ">="
        status = "ok" if self.ok else f"FAILED ({len(self.violations)} violation(s))"
        if self.skipped and self.ok:
            return f"{self.name:<22} skipped: {self.skipped}"
        return (
            f"{self.name:<22} faults {self.faults:>4}  requests {self.requests:>5}  "
            f"malformed {self.malformed:>4}  errors {self.errors_seen:>4} (expected {rel}{self.errors_expected})  "
            f"acked {self.acked:>4}  lost {self.lost}  restarts {self.restarts:>3}  "
            f"{self.seconds:5.1f} s  {status}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "faults": self.faults,
            "requests": self.requests,
            "malformed": self.malformed,
            "errors_expected": self.errors_expected,
            "errors_exact": self.errors_exact,
            "errors_seen": self.errors_seen,
            "acked": self.acked,
            "lost": self.lost,
            "restarts": self.restarts,
            "seconds": round(self.seconds, 2),
            "ok": self.ok,
            "skipped": self.skipped,
            "violations": self.violations,
            "notes": self.notes,
        }

    def check_errors(self) -> None:
        if self.errors_exact and self.errors_seen != self.errors_expected:
            self.violations.append(
                f"expected exactly {self.errors_expected} error replies, saw {self.errors_seen}"
            )
        elif not self.errors_exact and self.errors_seen < self.errors_expected:
            self.violations.append(
                f"expected at least {self.errors_expected} error replies, saw {self.errors_seen}"
            )


@dataclass
class Ledger:
    """Every write the client attempted, by what the server answered."""

    acked: dict[int, str] = field(default_factory=dict)  # memory id -> content
    refused: list[str] = field(default_factory=list)  # failed definitively: must be absent
    unknown: list[str] = field(default_factory=list)  # no definite answer (crash, kill)
    errors: int = 0
    no_reply: int = 0
    calls: int = 0


# Error texts that say a write was refused before anything was committed.
DEFINITIVE = (
    "nothing was stored",
    "injected fault at store.commit",
    "injected fault at store.write",
    "database is locked",
    "disk is full",
    "disk I/O error",
    "readonly",
    "read-only",
)


def _content_text(result: Mapping[str, Any]) -> str:
    return " ".join(c.get("text", "") for c in result.get("content", []) if isinstance(c, dict))


def reply_error_text(reply: Mapping[str, Any]) -> str | None:
    """The error text of a reply (JSON-RPC error or isError result), None on success."""
    if "error" in reply:
        return str(reply["error"].get("message", ""))
    result = reply.get("result") or {}
    if result.get("isError"):
        return _content_text(result)
    return None


def crashed(out: Outcome, label: str, reply: Reply) -> bool:
    """Whether ``reply``, which should be a clean refusal of bad input (a -32602 / -32600 /
    -32700 or an ``isError`` naming what to do), shows a crash of the server instead
    (`client.internal_failure`): that is recorded as a violation."""
    why = internal_failure(reply)
    if why is not None:
        out.violations.append(f"{label}: not a refusal but an internal failure: {why}")
    return why is not None


def reply_text(reply: Mapping[str, Any]) -> str:
    """The text content of a tool call's result ("" for a JSON-RPC error)."""
    return _content_text(reply.get("result") or {})


async def remember(
    server: Caller,
    ledger: Ledger,
    content: str,
    *,
    timeout: float = 60.0,
    definitive: Iterable[str] = DEFINITIVE,
) -> str:
    """One ``remember``; records the outcome in ``ledger``: ``acked``, ``refused``, ``unknown`` or ``noreply``."""
    ledger.calls += 1
    try:
        reply = await server.call_tool("remember", {"content": content}, timeout=timeout)
    except ServerGone:
        ledger.unknown.append(content)
        return "unknown"
    except NoReply:
        ledger.unknown.append(content)
        ledger.no_reply += 1
        return "noreply"
    error = reply_error_text(reply)
    if error is None:
        mid = reply["result"].get("structuredContent", {}).get("id")
        if not isinstance(mid, int):
            ledger.unknown.append(content)
            return "unknown"
        ledger.acked[mid] = content
        return "acked"
    ledger.errors += 1
    if "result" in reply and any(d in error for d in definitive):
        ledger.refused.append(content)
        return "refused"
    ledger.unknown.append(content)
    return "unknown"


_WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike".split()


def content_for(tag: str, n: int, rng: random.Random) -> str:
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 12)))
    return f"chaos {tag} write {n} token{rng.getrandbits(40):x} {words}"


async def drive_load(  # noqa: C901
    server: Caller,
    ledger: Ledger,
    *,
    tag: str,
    calls: int,
    concurrency: int,
    rng: random.Random,
    out: Outcome,
    timeout: float = 60.0,
    reads: float = 0.25,
) -> None:
    """``calls`` tool calls from ``concurrency`` tasks: mostly writes, some recalls and stats.

    Every request must be answered (a missing reply is a violation unless the
    server exited); replies are checked for shape by the client.
    """
    counter = iter(range(calls))
    plan = [rng.random() for _ in range(calls)]

    async def call(n: int) -> bool:
        """Make call ``n``; False when the server is gone."""
        if plan[n] >= reads:
            status = await remember(server, ledger, content_for(tag, n, rng), timeout=timeout)
            if status == "noreply":
                out.violations.append(f"a remember call got no reply within {timeout:g} s")
            return True
        try:
            if plan[n] < reads * 0.7:
                query = " ".join(rng.sample(_WORDS, 2))
                reply = await server.call_tool(
                    "recall", {"query": query, "limit": 5}, timeout=timeout
                )
            else:
                reply = await server.request("ping", timeout=timeout)
        except ServerGone:
            return False
        except NoReply as exc:
            ledger.no_reply += 1
            out.violations.append(str(exc))
            return True
        if reply_error_text(reply) is not None:
            ledger.errors += 1
        return True

    async def worker() -> None:
        for n in counter:
            if server.gone or not await call(n):
                return

    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker)


@dataclass
class LogCounts:
    faults: int = 0
    restarts: int = 0
    escalations: int = 0
    points: dict[str, int] = field(default_factory=dict)


def log_counts(home: Path) -> LogCounts:
    """Faults injected (delays excepted) and restarts, from ``home``'s trace log."""
    out = LogCounts()
    path = home / "logs" / "memtrio.log"
    if not path.exists():
        return out
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if (
                '"fault_injected"' not in line
                and '"restart"' not in line
                and '"escalation"' not in line
            ):
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            event = rec.get("event")
            if event == "fault_injected" and rec.get("action") == "delay":
                continue  # a delay point slows a call down (timing), it breaks nothing
            if event == "fault_injected":
                out.faults += 1
                point = str(rec.get("point"))
                out.points[point] = out.points.get(point, 0) + 1
            elif event == "restart":
                out.restarts += 1
            elif event == "escalation":
                out.escalations += 1
    return out


def make_checkout(root: Path, files: int) -> None:
    """A small Git checkout of ``files`` Python modules (for the code tools)."""
    root.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        (root / f"mod{i}.py").write_text(
            f"import os\n\n\nclass Thing{i}:\n    def run(self) -> int:\n        return {i}\n\n\ndef helper{i}(x):\n    return x + {i}\n"
        )
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "c",
        "GIT_AUTHOR_EMAIL": "c@c",
        "GIT_COMMITTER_NAME": "c",
        "GIT_COMMITTER_EMAIL": "c@c",
    }
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):$", re.M)


def unexpected_tracebacks(stderr: str) -> list[str]:
    """The final lines of tracebacks on stderr that an injected fault does not explain.

    (A worker *process* that raises an injected fault dies with its traceback on
    the shared stderr: expected. Anything else is a bug.)
    """
    out = []
    for block in _TRACEBACK.split(stderr)[1:]:
        lines = block.strip("\n").splitlines()
        last = next((line for line in lines if line and not line.startswith(" ")), "")
        if "InjectedFault" not in last:
            out.append(last or "(empty)")
    return out


class Run:
    """The context of one scenario: its seed, its directory, its servers."""

    def __init__(
        self, name: str, seed: int, base: Path, quick: bool, nursery: trio.Nursery
    ) -> None:
        self.name = name
        self.seed = seed
        self.rng = random.Random(f"{seed}:{name}")
        self.base = base / name
        shutil.rmtree(self.base, ignore_errors=True)
        self.base.mkdir(parents=True)
        self.quick = quick
        self.nursery = nursery
        self.servers: list[ServerProcess] = []
        self.owners: list[ServeProcess] = []  # memtrio serve processes
        self.clients: list[TcpSession | HttpSession] = []  # their network sessions
        self.out = Outcome(name)

    def home(self, label: str = "home") -> Path:
        path = self.base / label
        path.mkdir(parents=True, exist_ok=True)
        return path

    async def server(
        self,
        home: Path,
        env: Mapping[str, str] | None = None,
        *,
        cwd: Path | None = None,
        preexec: Callable[[], None] | None = None,
        initialize: bool = True,
        wrap: list[str] | None = None,
        label: str | None = None,
    ) -> ServerProcess:
        """Start ``memtrio mcp`` on ``home`` (stderr in ``home/LABEL-stderr.txt``, else shared)."""
        full = {"MEMTRIO_FAULTS_SEED": str(self.seed), **(env or {})}
        stderr_name = f"{label}-stderr.txt" if label else "server-stderr.txt"
        server = await start_server(self.nursery, home, full, cwd, preexec, wrap, stderr_name)
        self.servers.append(server)
        if initialize:
            reply = await server.initialize()
            if "result" not in reply:
                self.out.violations.append(f"initialize failed: {reply}")
        return server

    async def serve(
        self,
        home: Path,
        transport: str,
        env: Mapping[str, str] | None = None,
        *,
        nofile: int | None = None,
    ) -> ServeProcess:
        """Start ``memtrio serve --transport TRANSPORT`` on ``home`` and wait until it listens
        (``nofile``: its descriptor limit)."""
        full = {"MEMTRIO_FAULTS_SEED": str(self.seed), **(env or {})}
        owner = await start_serve(home, transport, full, nofile=nofile)
        self.owners.append(owner)
        await owner.wait_ready()
        return owner

    async def tcp_session(self, owner: ServeProcess, label: str) -> TcpSession:
        """An initialized TCP session on ``owner``'s attach endpoint (the TCP transport)."""
        assert owner.attach is not None
        attach = owner.attach
        secret = proof.parse_secret(attach.secret)
        assert secret is not None, "the runtime file holds no attach secret"
        handshake = partial(proof.prove, secret=secret, pid=attach.pid, port=attach.port)
        session = await open_tcp_session(
            self.nursery, attach.host, attach.port, None, label, handshake
        )
        self.clients.append(session)
        reply = await session.initialize()
        if "result" not in reply:
            self.out.violations.append(f"{label}: initialize failed: {reply}")
        return session

    async def http_session(
        self,
        owner: ServeProcess,
        label: str,
        *,
        drop: Callable[[], bool] | None = None,
        redrop: Callable[[], bool] | None = None,
    ) -> HttpSession:
        """An initialized Streamable HTTP session on ``owner`` (serving ``--transport http``)."""
        session = HttpSession(owner.url, label, drop=drop, redrop=redrop)
        self.clients.append(session)
        reply = await session.initialize()
        if "result" not in reply:
            self.out.violations.append(f"{label}: initialize failed: {reply}")
        return session

    async def prefill(
        self, home: Path, ledger: Ledger, count: int, env: Mapping[str, str] | None = None
    ) -> None:
        """Start a server on ``home``, make ``count`` writes (in ``ledger``), stop it."""
        server = await self.server(home, env)
        for i in range(count):
            await remember(server, ledger, content_for(self.name, i, self.rng))
        await self.stop(server)

    async def stop(self, server: ServerProcess, expect_code: int | None = 0) -> int:
        """Close stdin, wait for the exit; a different exit code is a violation."""
        code = await server.close()
        if expect_code is not None and code != expect_code:
            tail = server.stderr_text()[-600:].strip().replace("\n", " | ")
            self.out.violations.append(f"server exited {code} (expected {expect_code}): {tail}")
        return code

    def verify(
        self, home: Path, ledger: Ledger, *, embeddings: bool = False, refused: bool = True
    ) -> None:
        """Check the store of ``home`` against ``ledger`` (servers must be stopped)."""
        check = check_store(
            home / DB_NAME, ledger.acked, ledger.refused if refused else (), embeddings=embeddings
        )
        self.out.acked += check.acked
        self.out.lost += check.lost
        self.out.violations.extend(check.violations)

    def collect(self) -> None:
        """Fold the servers' counters and logs into the outcome."""
        homes = {s.home for s in self.servers} | {o.home for o in self.owners}
        for server in self.servers:
            self.out.requests += server.stats.sent
            self.out.violations.extend(server.violations)
        for client in self.clients:
            self.out.requests += client.stats.sent
            self.out.violations.extend(client.violations)
        processes: list[ServerProcess | ServeProcess] = [*self.servers, *self.owners]
        for process in processes:
            for last in unexpected_tracebacks(process.stderr_text()):
                self.out.violations.append(
                    f"a Python traceback reached the server's stderr: {last[:160]}"
                )
        for home in homes:
            counts = log_counts(home)
            self.out.faults += counts.faults
            self.out.restarts += counts.restarts


Scenario = Callable[[Run], Awaitable[None]]


async def run_scenario(
    name: str, fn: Scenario, seed: int, base: Path, quick: bool, budget: float
) -> Outcome:
    """Run one scenario with a time budget; never raises (failures are violations)."""
    started = time.monotonic()
    async with trio.open_nursery() as nursery:
        run = Run(name, seed, base, quick, nursery)
        try:
            with trio.fail_after(budget):
                await fn(run)
        except trio.TooSlowError:
            run.out.violations.append(
                f"the scenario did not finish within its budget of {budget:g} s"
            )
        except (ServerGone, NoReply, ServeFailed) as exc:
            run.out.violations.append(f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001 - a harness failure is reported, not raised
            run.out.violations.append(f"harness error: {type(exc).__name__}: {exc}")
            run.out.notes.append("".join(traceback.format_exception(exc))[-2000:])
        finally:
            processes: list[ServerProcess | ServeProcess] = [*run.servers, *run.owners]
            for process in processes:
                if process.process.returncode is None:
                    process.kill9()
            with trio.CancelScope(shield=True), trio.move_on_after(10):
                for process in processes:
                    await process.process.wait()
            nursery.cancel_scope.cancel()
    run.collect()
    if not run.out.skipped:
        run.out.check_errors()
    run.out.seconds = time.monotonic() - started
    return run.out
