"""``memtrio trace``: requests from the structured log as trees of timed spans.

The trace log (``supervisors/trace.py``) holds one JSON object per line. A
span line has ``event: "span"``, ``trace_id``, ``span_id``, ``parent_id``,
``name``, ``duration_ms`` and ``outcome`` and is written when the span ends
(``ts`` is its end). Other events inside a request carry the ``trace_id`` and
``span_id`` of the span they happened in. A request is a trace whose root span
(no parent) was opened by a session (``tools/call``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...protocol.plural import plural

# Fields shown in brackets after a span's name, when present.
DETAIL_FIELDS = (
    "tool",
    "op",
    "texts",
    "requests",
    "worker",
    "limit",
    "results",
    "backfilled",
    "sql",
    "error",
)
SKIP_FIELDS = {
    "ts",
    "level",
    "pid",
    "actor",
    "event",
    "trace_id",
    "span_id",
    "parent_id",
    "name",
    "duration_ms",
    "outcome",
    "request_id",
}


class TraceError(Exception):
    """The log is missing or holds no matching trace (the message says what to do)."""


@dataclass
class Span:
    record: dict[str, Any]
    children: list[Span] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def duration(self) -> float:
        return float(self.record.get("duration_ms") or 0.0)

    @property
    def start(self) -> float:
        return float(self.record.get("ts") or 0.0) - self.duration / 1000

    def label(self) -> str:
        rec = self.record
        details = [f"{k}={rec[k]}" for k in DETAIL_FIELDS if k in rec and k != "error"]
        extra = f" [{', '.join(details)}]" if details else ""
        outcome = rec.get("outcome", "ok")
        err = f"  {rec['error']}" if "error" in rec and outcome != "ok" else ""
        return f"{rec.get('actor', '?')} {rec.get('name', '?')}{extra}  {self.duration:.1f} ms  {outcome}{err}"


@dataclass
class Trace:
    trace_id: str
    roots: list[Span]
    events: list[dict[str, Any]]

    @property
    def root(self) -> Span:
        return max(self.roots, key=lambda s: s.duration)

    @property
    def end(self) -> float:
        return max(float(s.record.get("ts") or 0) for s in self.roots)


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    if not path.exists():
        raise TraceError(
            f"no trace log at {path}; run the server first (log level info or debug), or pass --home/--log"
        )
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if '"trace_id"' not in line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("trace_id"):
                yield rec


def build(records: Iterator[dict[str, Any]]) -> dict[str, Trace]:
    """Group records by trace and link spans to their parents (orphans become roots)."""
    spans: dict[str, dict[str, Span]] = {}
    events: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        tid = str(rec["trace_id"])
        if rec.get("event") == "span":
            spans.setdefault(tid, {})[str(rec.get("span_id"))] = Span(rec)
        else:
            events.setdefault(tid, []).append(rec)
    traces: dict[str, Trace] = {}
    for tid, by_id in spans.items():
        roots = []
        for span in by_id.values():
            parent = by_id.get(str(span.record.get("parent_id")))
            if parent is not None and parent is not span:
                parent.children.append(span)
            else:
                roots.append(span)
        for span in by_id.values():
            span.children.sort(key=lambda s: s.start)
        loose: list[dict[str, Any]] = []
        for ev in events.get(tid, []):
            owner = by_id.get(str(ev.get("span_id")))
            (owner.events if owner is not None else loose).append(ev)
        traces[tid] = Trace(tid, sorted(roots, key=lambda s: s.start), loose)
    return traces


def requests(traces: dict[str, Trace]) -> list[Trace]:
    """Traces that are client requests (a root span opened by a session), oldest first."""
    out = [t for t in traces.values() if any(r.record.get("name") == "tools/call" for r in t.roots)]
    return sorted(out, key=lambda t: t.end)


def _event_line(ev: dict[str, Any]) -> str:
    fields = " ".join(f"{k}={v}" for k, v in ev.items() if k not in SKIP_FIELDS and k != "exc")
    return f"· {ev.get('actor', '?')} {ev.get('event', '?')} {fields}".rstrip()


def render_tree(trace: Trace) -> str:
    root = trace.root
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(root.start))
    lines = [
        f"trace {trace.trace_id}  {stamp}  {root.record.get('tool', root.record.get('name'))}  {root.duration:.1f} ms"
    ]

    def walk(span: Span, prefix: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└─ " if last else "├─ ")
        lines.append(f"{prefix}{branch}{span.label()}")
        inner = prefix + ("" if top else ("   " if last else "│  "))
        items: list[tuple[float, Any]] = [(c.start, c) for c in span.children]
        items += [(float(e.get("ts") or 0), e) for e in span.events]
        items.sort(key=lambda x: x[0])
        for i, (_, item) in enumerate(items):
            is_last = i == len(items) - 1
            if isinstance(item, Span):
                walk(item, inner, is_last, False)
            else:
                lines.append(f"{inner}{'└─ ' if is_last else '├─ '}{_event_line(item)}")

    for span in trace.roots:
        walk(span, "", True, True)
    for ev in trace.events:
        lines.append(_event_line(ev))
    return "\n".join(lines)


def self_times(trace: Trace) -> dict[str, float]:
    """Milliseconds per ``actor name`` not covered by child spans (where the time went)."""
    out: dict[str, float] = {}

    def walk(span: Span) -> None:
        own = span.duration - sum(c.duration for c in span.children)
        key = f"{span.record.get('actor', '?')} {span.record.get('name', '?')}"
        out[key] = out.get(key, 0.0) + max(own, 0.0)
        for c in span.children:
            walk(c)

    for r in trace.roots:
        walk(r)
    return out


def render(
    path: Path,
    *,
    trace_id: str | None = None,
    last: int | None = None,
    slow_ms: float | None = None,
    as_json: bool = False,
) -> str:
    """The text ``memtrio trace`` prints."""
    traces = build(read_records(path))
    reqs = requests(traces)
    if trace_id:
        chosen = [t for tid, t in traces.items() if tid.startswith(trace_id)]
        if not chosen:
            raise TraceError(
                f"no trace starting with {trace_id!r} in {path}; `memtrio trace --last 20` lists recent ones"
            )
    elif slow_ms is not None:
        slow = [t for t in reqs if t.root.duration >= slow_ms]
        if as_json:
            return json.dumps([_trace_json(t) for t in slow], indent=2)
        if not slow:
            return (
                f"no request took {slow_ms:g} ms or more ({plural(len(reqs), 'request')} in {path})"
            )
        lines = [f"{len(slow)} of {plural(len(reqs), 'request')} took {slow_ms:g} ms or more:"]
        for t in sorted(slow, key=lambda t: -t.root.duration):
            rec = t.root.record
            stamp = time.strftime("%H:%M:%S", time.localtime(t.root.start))
            hot = max(self_times(t).items(), key=lambda kv: kv[1])
            lines.append(
                f"{t.root.duration:9.1f} ms  {stamp}  {rec.get('tool', rec.get('name', '?')):<18} "
                f"{rec.get('outcome', 'ok'):<10} {t.trace_id}  (most in {hot[0]}: {hot[1]:.1f} ms)"
            )
        return "\n".join(lines)
    else:
        if not reqs:
            raise TraceError(f"no requests in {path} yet (tool calls are logged at level info)")
        chosen = reqs[-(last or 5) :]
    if as_json:
        return json.dumps([_trace_json(t) for t in chosen], indent=2)
    return "\n\n".join(render_tree(t) for t in chosen)


def _trace_json(trace: Trace) -> dict[str, Any]:
    def span(s: Span) -> dict[str, Any]:
        return {**s.record, "children": [span(c) for c in s.children], "events": s.events}

    return {
        "trace_id": trace.trace_id,
        "spans": [span(r) for r in trace.roots],
        "events": trace.events,
    }
