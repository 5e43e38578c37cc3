"""Where the embedding model loads (issue 37, item 4): at ``initialize`` in a server many
sessions share (``memtrio serve``, the owner of attached children), on the first embedding
in an embedded ``memtrio mcp`` (one client, which may never embed).

Before: every process loaded it once its first client was initialized (``model_ready``
in the trace log 0.8 s after ``initialize``, no call made), about 160 MiB that an
embedded child that never embeds held for nothing, while docs/recall.md said the model
loaded on the first embedding.
"""

from __future__ import annotations

from pathlib import Path

import trio
from raw_server import raw_server, trace_events, wait_for_event
from test_attach import child, running_owner

ON = {"MEMTRIO_EMBEDDINGS": "on", "MEMTRIO_CODE": "off", "MEMTRIO_LOG_LEVEL": "info"}
# Long enough for a load started at initialize to be done even on two busy cores (it took
# 0.4-5 s in tools/bench_warm.py runs).
IDLE = 8.0
# An interpreter with memtrio's serving modules, no onnxruntime, no model: about 35 MiB.
WITHOUT_MODEL = 100 * 1024 * 1024


def model_loads(home: Path) -> list[dict[str, object]]:
    return [e for e in trace_events(home) if e.get("event") == "model_ready"]


async def test_an_embedded_mcp_loads_the_model_on_its_first_embedding_not_at_initialize(
    home: Path,
) -> None:
    async with raw_server(home, {**ON, "MEMTRIO_SERVE_ATTACH": "off"}, fork=False) as server:
        await server.initialize()
        reply = await server.call_tool("stats", {})
        assert not reply["result"]["isError"], reply
        await trio.sleep(IDLE)
        assert model_loads(home) == [], "the model loaded with no embedding asked for"
        assert server.rss_bytes() < WITHOUT_MODEL
        reply = await server.call_tool("remember", {"content": "the nightly job runs at two"})
        assert not reply["result"]["isError"], reply
        await wait_for_event(home, "model_ready", timeout=60)
        assert server.rss_bytes() > WITHOUT_MODEL


async def test_a_shared_server_loads_the_model_once_its_first_client_is_initialized(
    home: Path, tmp_path: Path
) -> None:
    async with running_owner(home, ON) as owner:
        async with child(home, tmp_path, "warm", env=ON) as attached:
            await attached.initialize()
            assert (
                f"attaching to memtrio serve pid {owner.pid}"
                in (tmp_path / "warm-stderr.txt").read_text()
            )
            await wait_for_event(home, "model_ready", timeout=60)  # no call made
