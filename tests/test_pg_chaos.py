"""Faults of a shared PostgreSQL store: a server killed mid-burst, the database restarted mid-burst.

What must hold: every acknowledged write is in the store; a call during the
outage is an error that says the store is unreachable (never a success for a
write that was not committed); the process stays up and serves again once
the database is back (it reconnects with backoff), and the other processes
are not held up by the dead one's locks. (Four processes starting at once
against a fresh database: tests/test_pg_store.py.)
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import stores
import trio
from serve_helpers import LineClient, serve_process, structured, tcp_client

TCP = ["--transport", "tcp", "--bind", "127.0.0.1:0"]
OFF = {"MEMTRIO_EMBEDDINGS": "off", "MEMTRIO_CODE": "off"}


async def remember(client: LineClient, text: str) -> tuple[bool, str]:
    """(acknowledged, the error text if not)."""
    result = await client.tool("remember", content=text)
    if result.get("isError"):
        return False, result["content"][0]["text"]
    assert structured(result)["id"] > 0
    return True, ""


def stored(home: Path, url: str) -> set[str]:
    with stores.selected_store(url):
        return {r[0] for r in stores.rows(home, "SELECT content FROM memories")}


async def test_postgresql_stopped_and_restarted_mid_burst_loses_nothing_acknowledged(
    home: Path,
) -> None:
    server = stores.PgServer()  # its own server: this test stops it
    try:
        url = server.database()
        acked: list[str] = []
        refusals: list[str] = []
        async with serve_process(home, TCP, env={**OFF, "MEMTRIO_STORE": url}) as served:
            async with tcp_client(served.port) as client:
                await client.initialize()
                for i in range(10):
                    ok, _ = await remember(client, f"before the outage {i}")
                    assert ok
                    acked.append(f"before the outage {i}")
                await trio.to_thread.run_sync(server.stop)
                for i in range(5):
                    ok, error = await remember(client, f"during the outage {i}")
                    assert not ok, "a write was acknowledged while the database was down"
                    refusals.append(error)
                await trio.to_thread.run_sync(server.start)
                resumed_after = None
                started = time.monotonic()
                with trio.fail_after(30):
                    i = 0
                    while len(acked) < 20:
                        text = f"after the outage {i}"
                        ok, error = await remember(client, text)
                        if ok:
                            acked.append(text)
                            resumed_after = resumed_after or time.monotonic() - started
                        else:
                            refusals.append(error)
                            await trio.sleep(0.05)
                        i += 1
                assert served.process.returncode is None  # it never went down
        assert all("PostgreSQL store is unreachable" in r for r in refusals), refusals
        assert resumed_after is not None and resumed_after < 10
        assert set(acked) <= stored(home, url)
        assert not any(t.startswith("during") for t in stored(home, url))
    finally:
        server.close()


async def test_a_server_killed_mid_burst_loses_nothing_acknowledged_and_blocks_nobody(
    tmp_path: Path, pg_server: stores.PgServer
) -> None:
    url = pg_server.database()
    homes = [tmp_path / "a", tmp_path / "b"]
    for h in homes:
        h.mkdir(mode=0o700)
    env = {**OFF, "MEMTRIO_STORE": url}
    acked: list[str] = []
    async with (
        serve_process(homes[0], TCP, env=env) as victim,
        serve_process(homes[1], TCP, env=env) as survivor,
    ):

        async def burst(port: int, name: str) -> None:
            async with tcp_client(port) as client:
                await client.initialize()
                for i in range(400):
                    try:
                        ok, _ = await remember(client, f"{name} {i}")
                    except (EOFError, OSError, trio.BrokenResourceError):
                        return  # the server died under this client
                    if ok:
                        acked.append(f"{name} {i}")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(burst, victim.port, "victim")
            nursery.start_soon(burst, survivor.port, "survivor")
            while sum(t.startswith("victim") for t in acked) < 20:
                await trio.sleep(0.01)
            victim.process.send_signal(signal.SIGKILL)
        # The survivor finished its whole burst: the dead process held no lock for long.
        assert sum(t.startswith("survivor") for t in acked) == 400
    assert set(acked) <= stored(tmp_path, url)
