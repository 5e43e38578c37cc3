"""The first ``memtrio mcp`` child of a home answers ``initialize`` and ``tools/list`` itself
while the owner it starts is not up yet, then replays the session to the owner (issue 32,
item 12: the first child made its client wait about 2.7 s for the owner before it
answered ``initialize``).

The owner is held back deterministically: the test holds the home's owner lock
(``run/owner.lock``), which the child must take before it launches the owner. Every
owner started is killed by pid at the end (``owners_ended``).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from gitrepo import make_repo
from memtrio.actors.net import relay as relay_module
from memtrio.actors.net import runtime, spawn
from memtrio.actors.net.runtime import pid_alive
from memtrio.actors.net.spawn import kill_owners, owner_pids
from raw_server import initialize_request
from test_attach import child, status, stderr_of

AUTO = {"MEMTRIO_SERVE_ATTACH": "auto"}
# Far less than the 70 s the child waits for a held lock: an answer within this came from
# the child itself.
EARLY_WITHIN = 10.0
VERSION = "2025-06-18"


@pytest.fixture
def owners_ended(home: Path) -> Iterator[None]:
    yield
    kill_owners(home)
    assert owner_pids(home) == []


class OwnerLock:
    """``run/owner.lock`` of ``home``, held as a child starting an owner holds it."""

    def __init__(self, home: Path) -> None:
        (home / runtime.RUN_DIR).mkdir(mode=0o700, exist_ok=True)
        self.fd: int | None = os.open(
            home / runtime.RUN_DIR / spawn.LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600
        )
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


@pytest.fixture
def lock(home: Path) -> Iterator[OwnerLock]:
    held = OwnerLock(home)
    yield held
    held.release()


def tool_names(reply: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in reply["result"]["tools"]]


async def test_the_first_child_answers_initialize_and_tools_list_before_its_owner_is_up(
    home: Path, tmp_path: Path, lock: OwnerLock, owners_ended: None
) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "r\n"})
    async with child(home, repo, "first", env=AUTO) as kid:
        await kid.send(initialize_request(VERSION))
        init = await kid.read(timeout=EARLY_WITHIN)
        assert init["id"] == 0 and init["result"]["protocolVersion"] == VERSION
        assert "memtrio" in init["result"]["instructions"]
        await kid.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        early = await kid.request("tools/list", timeout=EARLY_WITHIN)
        assert {"remember", "recall", "server_status"} <= set(tool_names(early))
        assert (await kid.request("ping", timeout=EARLY_WITHIN))["result"] == {}
        # No owner answered any of it: none runs yet.
        assert owner_pids(home) == [] and not runtime.runtime_path(home).exists()

        lock.release()  # the child may now start the owner
        report = await status(kid)  # waits for it: a tool call is the owner's
        owner = owner_pids(home)
        assert owner == [report["pid"]] and report["pid"] != kid.process.pid
        # The session was replayed to it as the client negotiated it.
        assert report["protocol_version"] == VERSION
        assert await kid.request("tools/list") == {**early, "id": early["id"] + 3}
        assert f"attaching to memtrio serve pid {report['pid']}" in stderr_of(home, "first")
        assert await kid.close() == 0


async def test_a_session_answered_early_goes_on_embedded_when_no_owner_can_start(
    home: Path, tmp_path: Path, lock: OwnerLock, owners_ended: None
) -> None:
    """The owner fails to start after the child answered ``initialize``: the session goes on
    with an embedded server (the child's own child), replayed; it ends with the child."""
    repo = make_repo(tmp_path / "repo", {"README.md": "r\n"})
    async with child(home, repo, "first", env=AUTO) as kid:
        await kid.send(initialize_request(VERSION))
        assert (await kid.read(timeout=EARLY_WITHIN))["result"]["protocolVersion"] == VERSION
        await kid.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        spawn.log_path(home).mkdir(parents=True)  # owner.log cannot be opened: no owner
        lock.release()
        report = await status(kid)
        embedded = report["pid"]
        assert embedded != kid.process.pid and owner_pids(home) == []
        assert report["protocol_version"] == VERSION
        remembered = await kid.call_tool("remember", {"content": "kept while embedded"})
        assert not remembered["result"].get("isError"), remembered
        assert await kid.close() == 0
        assert not pid_alive(embedded), "the embedded server ended with the child"
    said = stderr_of(home, "first")
    assert "could not be started" in said and f"serving embedded in pid {embedded}" in said


# -- the relay's early phase, in process ------------------------------------------------------

INIT_LINE = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
CALL_LINE = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"recall","arguments":{"query":"q"}}}\n'
INIT_REPLY = b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18"}}\n'


async def early_phase(
    tmp_path: Path, answer: Any, client: bytes
) -> tuple[relay_module.Relay, bytes]:
    """Run `Relay.answer_early` over pipes until it stops; the relay and what it wrote."""
    to_relay_r, to_relay_w = os.pipe()
    from_relay_r, from_relay_w = os.pipe()
    os.write(to_relay_w, client)
    os.close(to_relay_w)  # EOF after the client's lines
    relay = relay_module.Relay(no_owner, tmp_path, to_relay_r, from_relay_w, 1 << 20)
    await relay.answer_early(answer, trio.Event())
    await relay.stdout.aclose()
    written = b""
    while chunk := os.read(from_relay_r, 65536):
        written += chunk
    os.close(from_relay_r)
    await relay.stdin.aclose()
    return relay, written


async def no_owner() -> None:
    return None


async def test_the_first_tool_call_waits_for_the_owner_with_the_session_noted(
    tmp_path: Path,
) -> None:
    seen: list[bytes] = []

    async def answer(line: bytes) -> bytes | None:
        seen.append(line)
        return INIT_REPLY

    relay, written = await early_phase(tmp_path, answer, INIT_LINE + CALL_LINE)
    assert written == INIT_REPLY
    assert relay.session.acknowledged and relay.session.protocol_version == "2025-06-18"
    # The initialize it answered carries the session's repository, for the owner's replay.
    assert b"memtrio/root" in seen[0] and relay.session.initialize == seen[0]
    assert [p.data for p in relay.outbox] == [CALL_LINE]  # for the owner, untouched


async def test_an_initialize_the_child_cannot_answer_goes_to_the_owner_with_its_root(
    tmp_path: Path,
) -> None:
    async def cannot(line: bytes) -> bytes | None:
        return None

    relay, written = await early_phase(tmp_path, cannot, INIT_LINE)
    assert written == b"" and not relay.session.acknowledged
    assert [p.data for p in relay.outbox] == [INIT_LINE]
    sent = relay.next_to_send()  # what the owner gets: the root added on the way
    assert sent is not None and b"memtrio/root" in sent
