"""The trace log names each store read and write of the memory tools by its operation."""

from __future__ import annotations

from pathlib import Path

from mcp_client import run_cli
from memtrio.actors.chaos.blocking import BlockingClient


def test_every_memory_tool_names_its_store_operations_in_the_trace(home: Path) -> None:
    calls = [
        ("remember", {"content": "trace me", "entities": ["Alpha"]}),
        ("recall", {"query": "trace", "use_embeddings": False}),
        ("recall", {"query": "trace", "use_embeddings": False, "max_tokens": 100}),
        ("inspect", {"id": 1}),
        ("update", {"id": 1, "importance": 0.5}),
        ("stats", {}),
        ("list_scopes", {}),
        ("forget", {"id": 1}),
    ]
    # One call at a time, each answered before the next: tool calls run concurrently, and
    # `inspect` must not overtake the `remember` it reads.
    server = BlockingClient.memtrio(home, {"MEMTRIO_CODE": "off"})
    try:
        server.initialize("trace-names")
        for tool, arguments in calls:
            server.tool(tool, arguments)  # RuntimeError when the call fails
    finally:
        assert server.close() == 0
    out = run_cli("trace", "--home", str(home), "--last", str(len(calls)), timeout=60)
    assert out.returncode == 0, out.stderr
    for span in (
        "store write [op=remember]",
        "store read [op=recall.lexical]",
        "store write [op=recall]",
        "store read [op=recall.candidates]",
        "store write [op=inspect]",
        "store write [op=update]",
        "store read [op=stats.counts]",
        "store read [op=list_scopes]",
        "store write [op=forget]",
    ):
        assert span in out.stdout, f"{span} not in\n{out.stdout}"
    assert "<lambda>" not in out.stdout
