"""The attach model: `memtrio mcp` children relay to a running `memtrio serve` of their home.

Real processes: a ``memtrio serve --transport tcp --bind 127.0.0.1:0`` owner,
``memtrio mcp`` children started in Git repositories, driven line by line
(`RawServer`). The relay's line rewriting and the runtime file's rules are
checked in process too (`InitializeRoot`, `withdraw`).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import waits
from gitrepo import make_repo
from mcp_client import server_env
from memtrio.actors.net import runtime, spawn
from memtrio.actors.net.relay import GONE
from memtrio.actors.net.relay_lines import InitializeRoot
from raw_server import RawServer, raw_server, trace_events

SERVE = ("serve", "--transport", "tcp", "--bind", "127.0.0.1:0")
# Features the attach tests do not need: no model, no code index. A child attaches to the
# memtrio serve a test runs and starts none (the owner a child starts: test_attach_owner.py).
LIGHT = {"MEMTRIO_EMBEDDINGS": "off", "MEMTRIO_CODE": "off", "MEMTRIO_SERVE_ATTACH": "existing"}
ATTACHING = "memtrio: attaching to memtrio serve pid {pid}"
# An attached child loads no feature: about 31 MiB (an interpreter, trio and the CLI's
# imports), where an embedded server is 34 MiB with embeddings off and 192 MiB with the model
# (tools/bench_attach.py).
CHILD_RSS_LIMIT = 40 * 1024 * 1024
POLL = 0.02


@dataclass
class Owner:
    process: trio.Process
    home: Path
    runtime: runtime.Runtime

    @property
    def pid(self) -> int:
        return self.process.pid


@asynccontextmanager
async def running_owner(home: Path, env: dict[str, str] | None = None) -> AsyncIterator[Owner]:
    """``memtrio serve`` of ``home``, once its runtime file names it; killed on exit."""
    errlog = open(home.parent / "serve-stderr.txt", "ab")  # noqa: SIM115 - closed below
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "memtrio.supervisors.cli", *SERVE],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=errlog,
        env=server_env(home, {**LIGHT, **(env or {})}),
        cwd=str(home),
    )
    try:

        def listed() -> bool:
            assert process.poll() is None, (home.parent / "serve-stderr.txt").read_text()
            found, _ = runtime.read(home)
            return found is not None and found.pid == process.pid

        await waits.until(listed, 60, POLL)
        found, _ = runtime.read(home)
        assert found is not None
        yield Owner(process, home, found)
    finally:
        if process.returncode is None:
            process.kill()
            with trio.move_on_after(5):
                await process.wait()
        errlog.close()


@asynccontextmanager
async def child(
    home: Path, cwd: Path, name: str, args: Sequence[str] = (), env: dict[str, str] | None = None
) -> AsyncIterator[RawServer]:
    """``memtrio mcp`` in ``cwd`` (stderr in ``home/../NAME-stderr.txt``); killed on exit."""
    env = {**LIGHT, **(env or {})}
    async with raw_server(home, env, cwd, tuple(args), stderr=stderr_path(home, name)) as kid:
        yield kid


def stderr_path(home: Path, name: str) -> Path:
    return home.parent / f"{name}-stderr.txt"


def stderr_of(home: Path, name: str) -> str:
    return stderr_path(home, name).read_text()


async def status(server: RawServer) -> dict[str, Any]:
    reply = await server.call_tool("server_status")
    return reply["result"]["structuredContent"]


def transport_ids(report: dict[str, Any]) -> list[str]:
    """The children of the root's ``transport`` actor (stdio.* for an embedded server)."""
    transport = next((a for a in report["actors"] if a["id"] == "transport"), None)
    return [c["id"] for c in transport["children"]] if transport else []


def rss_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def repos(tmp_path: Path) -> tuple[Path, Path]:
    return (
        make_repo(tmp_path / "alpha", {"README.md": "alpha\n"}),
        make_repo(tmp_path / "beta", {"README.md": "beta\n"}),
    )


# -- two agents, one server ----------------------------------------------------------


async def test_two_children_in_two_repositories_attach_to_one_server(
    home: Path, tmp_path: Path
) -> None:
    alpha, beta = repos(tmp_path)
    async with (
        running_owner(home) as owner,
        child(home, alpha, "a") as a,
        child(home, beta, "b") as b,
    ):
        await a.initialize()
        await b.initialize()
        status_a, status_b = await status(a), await status(b)
        assert ATTACHING.format(pid=owner.pid) in stderr_of(home, "a")
        assert ATTACHING.format(pid=owner.pid) in stderr_of(home, "b")
        # One process serves both: its pid, its two sessions, no embedded stdio transport.
        assert status_a["pid"] == status_b["pid"] == owner.pid
        assert status_b["sessions"] == 2
        assert transport_ids(status_a) == []
        # The children loaded nothing: small, and the store was opened once, by the owner.
        for kid in (a, b):
            assert kid.rss_bytes() < CHILD_RSS_LIMIT
            assert kid.rss_bytes() < rss_of(owner.pid)
        opened = [e for e in trace_events(home) if e.get("event") == "store_opened"]
        assert [e["pid"] for e in opened] == [owner.pid]
        assert await a.close() == 0
        assert await b.close() == 0


async def test_attached_children_keep_their_own_repository(home: Path, tmp_path: Path) -> None:
    alpha, beta = repos(tmp_path)
    async with (
        running_owner(home),
        child(home, alpha, "a") as a,
        child(home, beta, "b") as b,
    ):
        await a.initialize()
        await b.initialize()
        # The relay named each child's directory at initialize.
        for kid, repo in ((a, alpha), (b, beta)):
            session = (await status(kid))["session"]
            assert session["root"] == str(repo) and session["root_source"] == "initialize"
        saved = await a.call_tool("remember", {"content": "the zebra deploy key rotates weekly"})
        assert saved["result"]["isError"] is False, saved
        query = {"query": "zebra deploy key", "use_embeddings": False}
        in_a = (await a.call_tool("recall", query))["result"]
        in_b = (await b.call_tool("recall", query))["result"]
    assert "zebra" in json.dumps(in_a["structuredContent"])
    assert "zebra" not in json.dumps(in_b["structuredContent"])


# -- the relay keeps stdio's guarantees ----------------------------------------------


async def test_a_malformed_line_through_the_relay_gets_32700_and_the_session_goes_on(
    home: Path, tmp_path: Path
) -> None:
    alpha, _ = repos(tmp_path)
    async with running_owner(home), child(home, alpha, "a") as a:
        await a.initialize()
        await a.send_bytes(b"this is not json\n")
        bad = await a.read()
        pong = await a.request("ping")
        # EOF right after a request: its answer is written out, then the child exits 0.
        await a.send_request(7, "tools/call", {"name": "server_status", "arguments": {}})
        await a.close_stdin()
        last = await a.read()
        rest = await a.rest()
        code = await a.wait()
    assert bad["error"]["code"] == -32700 and bad["id"] is None
    assert pong["result"] == {}
    assert last["id"] == 7 and last["result"]["isError"] is False
    assert rest == b""
    assert code == 0


async def test_attach_existing_killing_the_owner_ends_each_child_with_a_clear_line(
    home: Path, tmp_path: Path
) -> None:
    """``attach = "existing"``: no new owner is started, so a child whose owner is gone
    (and no other memtrio serve comes up within seconds) exits 1 with one line."""
    alpha, beta = repos(tmp_path)
    async with (
        running_owner(home) as owner,
        child(home, alpha, "a") as a,
        child(home, beta, "b") as b,
    ):
        await a.initialize()
        await b.initialize()
        owner.process.send_signal(signal.SIGKILL)
        codes = [await a.wait(timeout=10), await b.wait(timeout=10)]
    assert codes == [1, 1]
    for name in ("a", "b"):
        assert GONE.split("{why}")[0].format(pid=owner.pid) in stderr_of(home, name)


# -- no owner: embedded, as before ------------------------------------------------------


async def embedded_session(
    home: Path, cwd: Path, args: Sequence[str] = (), env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Start a child, check it serves embedded (in its own process), end it; its status."""
    async with child(home, cwd, "solo", args, env) as solo:
        await solo.initialize()
        # The first call after `initialize` may be served while the transport still starts
        # its reader (the call was read before it, by actors.stdio.EarlyAnswers): the
        # second is read by the reader itself, so the transport's children are all up.
        await status(solo)
        report = await status(solo)
        assert report["pid"] == solo.process.pid
        assert transport_ids(report) == ["stdio.writer", "stdio.session", "stdio.reader"]
        assert await solo.close() == 0
    assert "attaching" not in stderr_of(home, "solo")
    return report


def dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(done.stdout)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stale(pid: int, port: int) -> runtime.Runtime:
    return runtime.Runtime(pid=pid, host="127.0.0.1", port=port, secret="ab" * 32)


async def test_without_an_owner_the_child_serves_embedded(home: Path, tmp_path: Path) -> None:
    """``attach = "existing"``: no memtrio serve runs, so none is attached to nor started."""
    alpha, _ = repos(tmp_path)
    await embedded_session(home, alpha)
    assert spawn.owner_pids(home) == []


@pytest.mark.parametrize("why", ["dead pid", "nothing listens"])
async def test_a_stale_runtime_file_is_removed_and_the_child_serves_embedded(
    home: Path, tmp_path: Path, why: str
) -> None:
    alpha, _ = repos(tmp_path)
    pid = dead_pid() if why == "dead pid" else os.getpid()
    path = runtime.publish(home, stale(pid, closed_port()))
    await embedded_session(home, alpha)
    assert not path.exists()


async def test_a_live_endpoint_that_does_not_answer_is_ignored_and_kept(
    home: Path, tmp_path: Path
) -> None:
    alpha, _ = repos(tmp_path)
    async with trio.open_nursery() as nursery:
        # Accepts connections and never answers: a server too busy to pong in time.
        listeners = await nursery.start(partial(trio.serve_tcp, _hold, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        path = runtime.publish(home, stale(os.getpid(), port))
        await embedded_session(home, alpha)
        nursery.cancel_scope.cancel()
    assert path.exists()


async def _hold(stream: trio.SocketStream) -> None:
    await trio.sleep_forever()


async def test_an_owner_killed_as_it_is_probed_is_stale_and_a_live_one_that_closes_is_kept(
    home: Path,
) -> None:
    """A child once served embedded for good after its owner was killed: the probe had
    connected while the owner died, the dying listener closed the connection unproven,
    and that read as a live server declining to prove itself. A server that is gone
    within `attach.EXIT_WAIT` of closing the probe's connection is stale; a live one
    that closes it is still declined, its file kept."""
    from memtrio.actors.net import attach

    dying = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:

        async def die_then_close(stream: trio.SocketStream) -> None:
            dying.kill()  # the owner is killed as the probe's connection arrives
            await trio.to_thread.run_sync(dying.wait)
            await stream.aclose()

        async def close(stream: trio.SocketStream) -> None:
            await stream.aclose()

        async with trio.open_nursery() as nursery:
            for handler, pid in ((die_then_close, dying.pid), (close, os.getpid())):
                listeners = await nursery.start(
                    partial(trio.serve_tcp, handler, 0, host="127.0.0.1")
                )
                path = runtime.publish(home, stale(pid, listeners[0].socket.getsockname()[1]))
                if pid == dying.pid:
                    assert await attach.find_owner(home) is None
                    assert not path.exists()  # stale: the next child starts an owner
                else:
                    with pytest.raises(attach.Declined, match="did not prove itself"):
                        await attach.find_owner(home)
                    assert path.exists()
            nursery.cancel_scope.cancel()
    finally:
        dying.kill()
        dying.wait()


@pytest.mark.parametrize(
    "how", ["--no-attach", '[serve] attach = "off"', "[serve] attach = false (earlier)"]
)
async def test_attach_can_be_turned_off(home: Path, tmp_path: Path, how: str) -> None:
    alpha, _ = repos(tmp_path)
    async with running_owner(home):
        if how == "--no-attach":
            await embedded_session(home, alpha, ["--no-attach"])
        else:
            value = '"off"' if "off" in how else "false"
            (home / "config.toml").write_text(f"[serve]\nattach = {value}\n")
            # The environment's MEMTRIO_SERVE_ATTACH (LIGHT) would win: unset it.
            await embedded_session(home, alpha, env={"MEMTRIO_SERVE_ATTACH": ""})


# -- the runtime file ----------------------------------------------------------------


async def test_the_runtime_file_is_private_and_removed_when_the_owner_stops(home: Path) -> None:
    async with running_owner(home) as owner:
        path = runtime.runtime_path(home)
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        found = owner.runtime
        assert found.host == "127.0.0.1" and found.port > 0 and len(found.secret) == 64
        assert found.url.startswith("tcp://127.0.0.1:") and not found.url.endswith(":0")
        assert found.version and found.started > 0
        owner.process.send_signal(signal.SIGTERM)
        with trio.fail_after(30):
            code = await owner.process.wait()
    assert code == 0
    assert not path.exists()


def test_withdraw_leaves_a_runtime_file_another_server_replaced(home: Path) -> None:
    ours = runtime.Runtime(pid=os.getpid(), host="127.0.0.1", port=1, secret="01" * 32)
    theirs = runtime.Runtime(pid=os.getpid(), host="127.0.0.1", port=2, secret="02" * 32)
    runtime.publish(home, theirs)
    assert runtime.withdraw(home, ours) is False
    assert runtime.read(home)[0] == theirs
    assert runtime.withdraw(home, theirs) is True
    assert not runtime.runtime_path(home).exists()


# -- the initialize rewrite -------------------------------------------------------------

ROOT = Path("/work/repo")
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "x"}}


def encode(obj: Any) -> bytes:
    return msgspec.json.encode(obj) + b"\n"


def test_the_root_is_added_to_initialize_and_nothing_else_changes() -> None:
    rewriter = InitializeRoot(ROOT, limit=1 << 20)
    ping = encode({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    data = b"not json\n" + ping + encode(INIT) + ping
    # Fed one byte at a time: lines are found across reads.
    out = b"".join(rewriter.feed(data[i : i + 1]) for i in range(len(data))) + rewriter.finish()
    lines = out.splitlines(keepends=True)
    assert lines[0] == b"not json\n" and lines[1] == ping and lines[3] == ping
    sent = json.loads(lines[2])
    assert sent["params"] == {"protocolVersion": "x", "_meta": {"memtrio/root": str(ROOT)}}


def test_a_root_the_client_set_is_kept_and_bad_params_pass_unchanged() -> None:
    own = {**INIT, "params": {"_meta": {"memtrio/root": "/elsewhere", "k": 1}}}
    assert json.loads(InitializeRoot(ROOT, 1 << 20).feed(encode(own))) == own
    bad = encode({**INIT, "params": [1, 2]})
    assert InitializeRoot(ROOT, 1 << 20).feed(bad) == bad
    broken = b'{"method": "initialize", "id": 0,\n'
    assert InitializeRoot(ROOT, 1 << 20).feed(broken) == broken


def test_a_line_over_the_limit_passes_through_as_it_arrives() -> None:
    rewriter = InitializeRoot(ROOT, limit=100)
    big = b'{"method":"initialize","pad":"' + b"x" * 300
    assert rewriter.feed(big) == big  # not held back
    assert rewriter.feed(b'"}\n') == b'"}\n'
    assert b"memtrio/root" in rewriter.feed(encode(INIT))
