"""`memtrio trace`: span trees, --last, a trace id prefix, --slow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp_client import run_cli
from memtrio.actors.chaos import traceview
from raw_server import initialize_request


def _span(
    trace_id: str,
    span_id: str,
    parent: str | None,
    name: str,
    ms: float,
    ts: float,
    actor: str,
    **fields: object,
) -> dict:
    return {
        "ts": ts,
        "level": "info",
        "pid": 1,
        "actor": actor,
        "event": "span",
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_id": parent,
        "name": name,
        "duration_ms": ms,
        "outcome": "ok",
        **fields,
    }


def _log(tmp_path: Path) -> Path:
    records = [
        {"ts": 1.0, "level": "info", "actor": "app", "event": "serving"},
        _span("aaa111", "s2", "s1", "read", 0.5, 100.001, "store", op="counts"),
        _span("aaa111", "s1", None, "tools/call", 2.0, 100.002, "stdio.session", tool="stats"),
        _span("bbb222", "e1", "r1", "embed", 40.0, 200.05, "embedder", texts=1),
        {
            "ts": 200.06,
            "level": "warning",
            "actor": "faults",
            "event": "fault_injected",
            "trace_id": "bbb222",
            "span_id": "w1",
            "point": "store.commit",
        },
        _span("bbb222", "w1", "r1", "write", 5.0, 200.07, "store", op="remember"),
        _span("bbb222", "r1", None, "tools/call", 80.0, 200.08, "stdio.session", tool="remember"),
        _span("ccc333", "x1", None, "recall", 3.0, 300.0, "ranker"),  # not a request
        "not json at all",
    ]
    path = tmp_path / "memtrio.log"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n")
    return path


def test_last_renders_requests_as_span_trees(tmp_path: Path) -> None:
    text = traceview.render(_log(tmp_path), last=5)
    assert "trace aaa111" in text and "trace bbb222" in text and "ccc333" not in text
    lines = text.splitlines()
    remember = lines.index(next(line for line in lines if line.startswith("trace bbb222")))
    tree = lines[remember + 1 : remember + 5]
    assert tree[0].startswith("stdio.session tools/call [tool=remember]  80.0 ms  ok")
    assert tree[1].startswith("├─ embedder embed [texts=1]  40.0 ms")
    assert tree[2].startswith("└─ store write [op=remember]  5.0 ms")
    assert "fault_injected" in tree[3] and "point=store.commit" in tree[3]
    assert traceview.render(_log(tmp_path), last=1).count("trace ") == 1


def test_trace_id_prefix_and_unknown_id(tmp_path: Path) -> None:
    path = _log(tmp_path)
    text = traceview.render(path, trace_id="aaa")
    assert "store read [op=counts]  0.5 ms" in text
    with pytest.raises(traceview.TraceError, match="no trace starting with"):
        traceview.render(path, trace_id="zzz")


def test_slow_lists_slow_requests_with_where_the_time_went(tmp_path: Path) -> None:
    text = traceview.render(_log(tmp_path), slow_ms=10)
    assert text.startswith("1 of 2 requests took 10 ms or more")
    assert "remember" in text and "bbb222" in text and "most in embedder embed: 40.0 ms" in text
    assert "no request took" in traceview.render(_log(tmp_path), slow_ms=1000)


def test_missing_log_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(traceview.TraceError, match="run the server first"):
        traceview.render(tmp_path / "nope.log")


def test_memtrio_trace_cli_on_a_real_server_log(home: Path) -> None:
    # A real server: two calls, then the trace of the last one shows the store hop.
    lines = [
        initialize_request(),
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "remember", "arguments": {"content": "trace me"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "stats", "arguments": {}},
        },
    ]
    served = run_cli(
        "mcp",
        home=home,
        env={"MEMTRIO_CODE": "off"},
        input="".join(json.dumps(m) + "\n" for m in lines),
        timeout=60,
    )
    assert served.returncode == 0, served.stderr
    out = run_cli("trace", "--home", str(home), "--last", "2", timeout=60)
    assert out.returncode == 0, out.stderr
    assert "stdio.session tools/call [tool=remember]" in out.stdout
    assert "store write [op=remember]" in out.stdout
    assert "store read [op=stats.counts]" in out.stdout
    missing = run_cli("trace", "--home", str(home / "empty"), timeout=60)
    assert missing.returncode == 1 and "run the server first" in missing.stderr
