"""Item 4 of issue 29: ``memtrio mcp`` attached to whatever ``run/serve.json`` named.

A forged runtime file (another user's, one in a directory others can write, one
pointing at a port taken over after the server died) got the client's
``initialize``, its tool arguments and the memory text relayed to a hostile
listener, and the child handed that listener the token from the file. Now the
file is believed only when no one else could have written it, and the listener
must prove it holds the file's secret before the child sends it anything but a
random nonce (``actors.net.proof``); the endpoint admits only children that prove
it too.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest
import trio
import trio.testing
from memtrio.actors.net import attach, proof, runtime
from serve_helpers import serve_process
from test_attach import (
    LIGHT,
    SERVE,
    child,
    repos,
    running_owner,
    status,
    stderr_of,
    transport_ids,
)

DECLINED = "memtrio: serving embedded, not through the memtrio serve named in"
OLD_TOKEN = "old-style-bearer-token-" + "t" * 20
SECRET_HEX = "5e" * proof.SECRET_BYTES
MEMORY = "the zebra deploy key rotates weekly"


@dataclass
class Hostile:
    """A loopback listener that answers every line as if it were the server's pong."""

    port: int = 0
    connections: int = 0
    received: bytearray = field(default_factory=bytearray)

    async def handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        buffer = b""
        while True:
            try:
                data = await stream.receive_some(65536)
            except trio.BrokenResourceError:
                return
            if not data:
                return
            self.received += data
            buffer += data
            while b"\n" in buffer:
                line, _, buffer = buffer.partition(b"\n")
                try:
                    rid = json.loads(line).get("id", "memtrio-attach-probe")
                except (ValueError, AttributeError):
                    rid = "memtrio-attach-probe"
                pong = {"jsonrpc": "2.0", "id": rid, "result": {}}
                await stream.send_all(json.dumps(pong).encode() + b"\n")


@asynccontextmanager
async def hostile_listener() -> AsyncIterator[Hostile]:
    hostile = Hostile()
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            partial(trio.serve_tcp, hostile.handle, 0, host="127.0.0.1")
        )
        hostile.port = listeners[0].socket.getsockname()[1]
        yield hostile
        nursery.cancel_scope.cancel()


def forge(home: Path, port: int, host: str = "127.0.0.1") -> Path:
    """A runtime file in the form old and new servers wrote, private, naming a live pid."""
    path = runtime.runtime_path(home)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    body = {"pid": os.getpid(), "host": host, "port": port, "token": OLD_TOKEN}
    path.write_text(json.dumps({**body, "secret": SECRET_HEX}) + "\n")
    path.chmod(0o600)
    return path


async def session_of_a_child(home: Path, cwd: Path) -> tuple[dict[str, object], int]:
    """A child's status and pid after it initialized and remembered `MEMORY`."""
    async with child(home, cwd, "a") as a:
        await a.initialize()
        saved = await a.call_tool("remember", {"content": MEMORY})
        assert saved["result"]["isError"] is False, saved
        report = await status(a)
        assert await a.close() == 0
        return report, a.process.pid


def assert_embedded(report: dict[str, object], pid: int) -> None:
    assert report["pid"] == pid
    assert transport_ids(report) == ["stdio.writer", "stdio.session", "stdio.reader"]


async def test_a_forged_runtime_file_relays_nothing_to_a_hostile_listener(
    home: Path, tmp_path: Path
) -> None:
    alpha, _ = repos(tmp_path)
    async with hostile_listener() as hostile:
        path = forge(home, hostile.port)
        report, pid = await session_of_a_child(home, alpha)
    assert_embedded(report, pid)
    received = bytes(hostile.received)
    assert OLD_TOKEN.encode() not in received and SECRET_HEX.encode() not in received
    assert b"initialize" not in received and b"zebra" not in received
    # All it learned: a random nonce on each try (a live server that closes unproven is
    # asked again, `attach.CLOSED_PROBE_TRIES` times in all: a flood may have displaced the child).
    lines = received.splitlines()
    assert 1 <= len(lines) <= attach.CLOSED_PROBE_TRIES, received
    assert all(line.startswith(b"memtrio-attach/1 hello ") for line in lines), received
    assert len(set(lines)) == len(lines)  # a fresh nonce each time
    line = [s for s in stderr_of(home, "a").splitlines() if s.startswith(DECLINED)]
    assert len(line) == 1 and str(path) in line[0] and "did not prove itself" in line[0]


def loosen(home: Path, how: str) -> None:
    """Make the runtime file of ``home`` one that someone else could have written."""
    path = runtime.runtime_path(home)
    if how == "file of another user":
        os.chown(path, 65534, 65534)
    elif how == "run/ writable by others":
        path.parent.chmod(0o777)
    elif how == "home writable by others":
        home.chmod(0o777)
    elif how == "file readable by others":
        path.chmod(0o644)
    elif how == "symbolic link":
        elsewhere = home.parent / "elsewhere.json"
        path.rename(elsewhere)
        path.symlink_to(elsewhere)
    elif how == "run/ a symbolic link":
        moved = home.parent / "run-elsewhere"
        path.parent.rename(moved)
        path.parent.symlink_to(moved)


@pytest.mark.parametrize(
    "how",
    [
        pytest.param(
            "file of another user",
            marks=pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root"),
        ),
        "run/ writable by others",
        "home writable by others",
        "file readable by others",
        "symbolic link",
        "run/ a symbolic link",
    ],
)
async def test_a_runtime_file_someone_else_could_have_written_is_not_believed(
    home: Path, tmp_path: Path, how: str
) -> None:
    alpha, _ = repos(tmp_path)
    async with hostile_listener() as hostile:
        forge(home, hostile.port)
        loosen(home, how)
        report, pid = await session_of_a_child(home, alpha)
    assert_embedded(report, pid)
    assert hostile.connections == 0 and not hostile.received
    line = [s for s in stderr_of(home, "a").splitlines() if s.startswith(DECLINED)]
    assert len(line) == 1 and "someone else may have written it" in line[0], line


async def test_a_runtime_file_naming_another_host_is_refused_in_one_line(
    home: Path, tmp_path: Path
) -> None:
    alpha, _ = repos(tmp_path)
    forge(home, 7, host="192.0.2.1")
    report, pid = await session_of_a_child(home, alpha)
    assert_embedded(report, pid)
    line = [s for s in stderr_of(home, "a").splitlines() if s.startswith(DECLINED)]
    assert len(line) == 1 and "'192.0.2.1', not a loopback address" in line[0]


async def test_a_port_taken_over_with_a_wrong_proof_makes_the_file_stale(
    home: Path, tmp_path: Path
) -> None:
    """A listener that speaks the handshake but does not hold the secret: its proof is
    wrong, the child sends nothing more and removes the file."""
    alpha, _ = repos(tmp_path)
    received = bytearray()

    async def impostor(stream: trio.SocketStream) -> None:
        received.extend(await stream.receive_some(4096))
        fake = b"memtrio-attach/1 server " + b"00" * 32 + b" " + b"ab" * 32 + b"\n"
        await stream.send_all(fake)
        with trio.move_on_after(10):
            while data := await stream.receive_some(4096):
                received.extend(data)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, impostor, 0, host="127.0.0.1"))
        path = forge(home, listeners[0].socket.getsockname()[1])
        report, pid = await session_of_a_child(home, alpha)
        nursery.cancel_scope.cancel()
    assert_embedded(report, pid)
    assert bytes(received).count(b"\n") == 1 and received.startswith(b"memtrio-attach/1 hello ")
    assert not path.exists()
    assert "its proof of the secret is wrong" in stderr_of(home, "a")


@pytest.mark.parametrize(
    "fields",
    [{"pid": 2**70}, {"pid": -1}, {"port": 70000}, {"port": 0}, {"host": ["127.0.0.1"]}],
    ids=["huge pid", "negative pid", "port over 65535", "port 0", "host not text"],
)
async def test_a_damaged_runtime_file_is_removed_and_never_crashes_the_child(
    home: Path, fields: dict[str, object]
) -> None:
    path = forge(home, 1)
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))
    assert await attach.find_owner(home) is None
    assert not path.exists()


# -- the endpoint's side ------------------------------------------------------------------


async def read_line(stream: trio.SocketStream) -> bytes:
    buffer = b""
    with trio.fail_after(15):
        while b"\n" not in buffer:
            data = await stream.receive_some(4096)
            if not data:
                break
            buffer += data
    return buffer


async def test_the_attach_endpoint_admits_only_a_child_that_proves_the_secret(
    home: Path,
) -> None:
    async with running_owner(home) as owner:
        found = owner.runtime
        secret = proof.parse_secret(found.secret)
        assert secret is not None
        ping = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n'
        # A bearer line (the old protocol), or a wrong proof: refused, no session.
        for opening in (b"Bearer " + found.secret.encode() + b"\n", None):
            stream = await trio.open_tcp_stream(found.host, found.port)
            if opening is None:
                await stream.send_all(b"memtrio-attach/1 hello " + b"11" * 32 + b"\n")
                assert (await read_line(stream)).startswith(b"memtrio-attach/1 server ")
                opening = b"memtrio-attach/1 client " + b"ab" * 32 + b"\n"
            await stream.send_all(opening + ping)
            refusal = json.loads(await read_line(stream))
            assert refusal["error"]["code"] == -32000 and "prove" in refusal["error"]["message"]
            await stream.aclose()
        # The real proof: then a session.
        stream = await trio.open_tcp_stream(found.host, found.port)
        with trio.fail_after(15):
            rest = await proof.prove(stream, secret, found.pid, found.port)
        await stream.send_all(ping)
        assert rest == b""
        assert json.loads(await read_line(stream)) == {"jsonrpc": "2.0", "id": 1, "result": {}}
        await stream.aclose()


async def test_serve_does_not_publish_into_a_run_directory_others_can_write(home: Path) -> None:
    run = home / runtime.RUN_DIR
    run.mkdir(mode=0o700)
    run.chmod(0o777)
    async with serve_process(home, SERVE[1:], LIGHT) as served:
        with trio.fail_after(60):
            while "runtime_file_failed" not in served.stderr_text():
                await trio.sleep(0.05)
        assert "is writable by group or others" in served.stderr_text()
        assert not runtime.runtime_path(home).exists()
    assert stat.S_IMODE(run.stat().st_mode) == 0o777  # reported, not changed


# -- the handshake itself -----------------------------------------------------------------


async def handshake(
    server_secret: bytes, client_secret: bytes, server_port: int, client_port: int
) -> tuple[bytes | None, bytes | BaseException]:
    """Run both sides over a memory stream pair: (the server's result, the client's)."""
    left, right = trio.testing.memory_stream_pair()
    results: dict[str, object] = {}

    async def server() -> None:
        results["server"] = await proof.answer(left, server_secret, 42, server_port, timeout=5)
        await left.aclose()

    async def client() -> None:
        try:
            results["client"] = await proof.prove(right, client_secret, 42, client_port)
        except (proof.NoProof, trio.BrokenResourceError) as exc:
            results["client"] = exc
        await right.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(server)
        nursery.start_soon(client)
    return results["server"], results["client"]  # type: ignore[return-value]


async def test_the_handshake_proves_both_sides_and_binds_the_port() -> None:
    secret = proof.new_secret()
    server, client = await handshake(secret, secret, 5000, 5000)
    assert client == b"" and server is not None
    # Another secret (a listener that did not read the file): the child refuses it.
    server, client = await handshake(proof.new_secret(), secret, 5000, 5000)
    assert server is None and isinstance(client, proof.NoProof) and client.wrong
    # The real endpoint's answer relayed by a listener on another port does not verify.
    server, client = await handshake(secret, secret, 5000, 6000)
    assert server is None and isinstance(client, proof.NoProof) and client.wrong
