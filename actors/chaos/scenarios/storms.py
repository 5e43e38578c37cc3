"""Restart storms: a child fails on every request until its supervisors give up and the
server exits 1, saying so."""

from __future__ import annotations

import trio

from ..client import NoReply, ServerGone
from ..harness import Run


async def storm(run: Run, point: str, request: str, env: dict[str, str] | None = None) -> None:
    """A child failing on every request: its supervisors give up and the server exits 1 saying so."""
    out = run.out
    home = run.home()
    # From the 3rd hit on (initialize and its notification go through first).
    # A store crash restarts the transport too, whose calls get [server]
    # shutdown_grace to finish: keep it short so the storm is quick.
    env = {
        "MEMTRIO_FAULTS": f"{point}=raise@3+",
        "MEMTRIO_SERVER_SHUTDOWN_GRACE": "0.5",
        **(env or {}),
    }
    server = await run.server(home, env)
    sent = 0
    with trio.move_on_after(60):
        while not server.gone and sent < 500:
            sent += 1
            try:
                if request == "ping":
                    await server.request("ping", timeout=10)
                else:
                    await server.call_tool("remember", {"content": f"storm {sent}"}, timeout=10)
            except (ServerGone, NoReply):
                break
    code = await server.wait_exit(30)
    stderr = server.stderr_text()
    if code != 1:
        out.violations.append(f"restart storm at {point}: exit code {code}, expected 1")
    if "gave up" not in stderr:
        out.violations.append(
            f"restart storm at {point}: stderr does not say a supervisor gave up: {stderr[-300:]!r}"
        )
    out.errors_seen = server.stats.errors + server.stats.tool_errors
    out.errors_expected = 1
    out.notes.append(f"exited {code} after {sent} requests")


async def storm_embedder(run: Run) -> None:
    """Every embedding crashes its worker: the embedder pool gives up, then the root does."""
    await storm(
        run,
        "embedder.embed",
        "remember",
        {"MEMTRIO_EMBEDDINGS": "on", "MEMTRIO_EMBEDDING_INTRA_OP_THREADS": "1"},
    )


async def storm_session(run: Run) -> None:
    """Every dispatch crashes the session."""
    await storm(run, "session.dispatch", "ping")


async def storm_store(run: Run) -> None:
    """Every write crashes the StoreWriter."""
    await storm(run, "store.write", "remember")
