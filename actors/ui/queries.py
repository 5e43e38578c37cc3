"""The dashboard's own reads: what no tool answers (a filtered, sorted page of memories
with the entities each is about, a memory's access history, the distinct types, the
graph's most connected entities, this repository's recent recalls, the code index per
checkout, recent traces). Reads only; every write goes through a tool handler
(``actors.ui.api``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from ..chaos import traceview
from ..code.overview import checkouts
from ..memory.results import memory_fields
from ..store.domain.memories import get_memory, visible
from ..store.interfaces import ReadTx
from ..store.interfaces.browse import SORTS, BrowsedMemory, MemoryFilter, Sort

__all__ = ["SORTS", "MemoryFilter"]

# recall_log rows scanned (newest first) for one memory's access history.
HISTORY_SCAN = 5000
HISTORY_LIMIT = 50
# recall_log rows scanned (newest first) for this repository's recent recall queries.
RECENT_SCAN = 2000


def _as_dict(memory: BrowsedMemory) -> dict[str, Any]:
    """A listed memory in the shape ``get_memory`` gives it (entities: id, name, kind)."""
    out: dict[str, Any] = msgspec.structs.asdict(memory)
    out["entities"] = [msgspec.structs.asdict(e) for e in memory.entities]
    return out


def page_of_memories(
    tx: ReadTx,
    chosen: MemoryFilter,
    sort: str,
    descending: bool,
    offset: int,
    limit: int,
) -> tuple[list[dict[str, Any]], int]:
    """One page of the memories ``chosen`` selects, sorted; and how many there are in all."""
    key: Sort = next((s for s in SORTS if s == sort), "id")
    page = tx.browse.page(chosen, key, descending, offset, limit)
    return [_as_dict(m) for m in page.memories], page.total


def graph_overview(tx: ReadTx, selection: list[str], limit: int, edges: int) -> dict[str, Any]:
    """What the Graph page opens on: the whole visible graph when it has at most ``limit``
    entities, else the ``limit`` most connected ones (by relation count); with the
    relations among them (at most ``edges``) and each one's degree."""
    found = tx.browse.graph_overview(selection, limit, edges)
    return {
        "entities": [
            {"name": n.name, "entityType": n.kind, "degree": n.degree} for n in found.nodes
        ],
        "relations": [
            {"from": r.source, "relationType": r.relation_type, "to": r.target} for r in found.links
        ],
        "total": found.total,
        "truncated": found.truncated,
    }


def recent_queries(tx: ReadTx, selection: Sequence[str], limit: int) -> list[dict[str, Any]]:
    """The last ``limit`` distinct recall queries (newest first) that read only scopes of
    ``selection`` (this repository's and ``global``: another repository's recalls are not
    shown), with when and how many memories each returned."""
    found: dict[str, dict[str, Any]] = {}
    readable = set(selection)
    for entry in tx.recall_log.newest(RECENT_SCAN, "recall"):
        try:
            selected, returned = json.loads(entry.scopes), json.loads(entry.ids)
        except ValueError:
            continue
        if not (isinstance(selected, list) and isinstance(returned, list)):
            continue
        query = entry.query
        if not set(map(str, selected)) <= readable or not query.strip() or query in found:
            continue
        at = memory_fields({"created_at": entry.ts})["created_at"]
        found[query] = {"query": query, "at": at, "memories": len(returned)}
        if len(found) >= limit:
            break
    return list(found.values())


def memory_details(
    tx: ReadTx, memory_id: int, selection: Sequence[str], history: bool = True
) -> dict[str, Any] | None:
    """A memory with its scopes, entities, relations and (``history``) its access history
    (None: not visible).

    Unlike ``inspect`` this does not count as an access: looking at the dashboard
    must not change what recall ranks.
    """
    memory = get_memory(tx, memory_id)
    if memory is None or not visible(memory["scopes"], selection):
        return None
    if history:
        memory["history"] = access_history(tx, memory_id)
    return memory


def access_history(tx: ReadTx, memory_id: int) -> list[dict[str, Any]]:
    """The recalls and inspections that returned ``memory_id``, newest first."""
    found = []
    for entry in tx.recall_log.newest(HISTORY_SCAN):
        try:
            id_list, score_list = json.loads(entry.ids), json.loads(entry.scores)
        except ValueError:
            continue
        if not (isinstance(id_list, list) and isinstance(score_list, list)):
            continue
        if memory_id in id_list:
            at = id_list.index(memory_id)
            score = score_list[at] if at < len(score_list) else None
            found.append(
                {"at": memory_fields({"created_at": entry.ts})["created_at"], "kind": entry.kind,
                 "query": entry.query, "rank": at + 1, "score": score}
            )  # fmt: skip
            if len(found) >= HISTORY_LIMIT:
                break
    return found


def memory_types(tx: ReadTx) -> list[dict[str, Any]]:
    return [{"name": t.name, "memories": t.memories} for t in tx.browse.memory_types()]


def code_checkouts(conn: Any) -> list[dict[str, Any]]:
    """Each indexed checkout of the code index's own database (`code.overview`), its last
    refresh shown as the dashboard shows times."""
    out = checkouts(conn)
    for row in out:
        refreshed = row["refreshed_at"]
        row["refreshed_at"] = (
            memory_fields({"created_at": refreshed})["created_at"] if refreshed else None
        )
    return out


# Not shown as activity: the Server page's own refresh (every 3 s) and the header every
# page loads; they would push every other request out of the list.
QUIET_ROUTES = ("server", "traces", "overview")


def dashboard_route(trace: traceview.Trace) -> str | None:
    """The ``/api/...`` route of a dashboard request's trace (None: not one, or one of
    `QUIET_ROUTES`)."""
    rec = trace.root.record
    route = rec.get("route")
    if rec.get("actor") != "ui" or rec.get("name") != "api" or not isinstance(route, str):
        return None
    return None if route in QUIET_ROUTES else route


def recent_traces(log: Path, limit: int) -> list[dict[str, Any]]:
    """The last ``limit`` requests of the trace log as span timelines (offsets in ms from
    the request's start), newest first: the MCP sessions' tool calls and the dashboard's
    own requests (``dashboard /api/memories``)."""
    try:
        built = traceview.build(traceview.read_records(log))
    except traceview.TraceError:
        return []
    routes = {t.trace_id: dashboard_route(t) for t in built.values()}
    tools = {t.trace_id for t in traceview.requests(built)}
    traces = sorted(
        (t for t in built.values() if t.trace_id in tools or routes[t.trace_id]),
        key=lambda t: t.end,
    )
    out = []
    for trace in reversed(traces[-limit:]):
        origin = min(s.start for s in trace.roots)
        spans: list[dict[str, Any]] = []
        for root in trace.roots:
            _walk(root, 0, origin, spans)
        route = routes[trace.trace_id]
        out.append(
            {"trace_id": trace.trace_id,
             "tool": f"dashboard /api/{route}" if route else trace.root.record.get("tool"),
             "duration_ms": round(trace.root.duration, 3),
             "outcome": trace.root.record.get("outcome", "ok"),
             "at": memory_fields({"created_at": trace.end})["created_at"], "spans": spans}
        )  # fmt: skip
    return out


def _walk(span: traceview.Span, depth: int, origin: float, into: list[dict[str, Any]]) -> None:
    """``span`` and its children, depth first, as timeline rows."""
    rec = span.record
    into.append(
        {"actor": rec.get("actor", "?"), "name": rec.get("name", "?"), "tool": rec.get("tool"),
         "depth": depth, "start_ms": round((span.start - origin) * 1000, 3),
         "duration_ms": round(span.duration, 3), "outcome": rec.get("outcome", "ok"),
         "error": rec.get("error")}
    )  # fmt: skip
    for child in span.children:
        _walk(child, depth + 1, origin, into)
