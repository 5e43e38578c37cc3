"""The trace log names each store read and write of the memory tools by its operation."""

from __future__ import annotations

import json
from pathlib import Path

from mcp_client import run_cli
from raw_server import initialize_request


def _call(number: int, tool: str, arguments: dict[str, object]) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": number,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


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
    lines = [initialize_request(), *(_call(i, t, a) for i, (t, a) in enumerate(calls, 1))]
    served = run_cli(
        "mcp",
        home=home,
        env={"MEMTRIO_CODE": "off"},
        input="".join(json.dumps(m) + "\n" for m in lines),
        timeout=60,
    )
    assert served.returncode == 0, served.stderr
    assert served.stdout.count('"isError":true') == 0, served.stdout
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
