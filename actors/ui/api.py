"""The dashboard's JSON API (``/api/...``): each answer comes from a tool handler, called
with the dashboard's own session, or from a read of ``actors.ui.queries``.

The dashboard's session has the repository of the process as its root
(``memtrio ui``'s directory, or ``memtrio serve``'s), so every write runs
through the same handler and the same scope and ownership rules as the tool an
agent would call there: the dashboard never writes where the tools could not.
A `DomainError` becomes an HTTP error carrying the tool's own message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

import msgspec
import trio

from ...protocol.errors import (
    BadArgument,
    Conflict,
    DomainError,
    Forbidden,
    LimitExceeded,
    NotFound,
    Unavailable,
)
from ...protocol.tools import format_validation_error
from ...supervisors.config import log_path
from ...supervisors.context import AppContext, CallContext
from ..anchors.anchoring import code_states
from ..code.checkout import show_path
from ..code.service import CODE
from ..code.tools import FindArgs, OutlineArgs, _file_outline, _root
from ..memory.args import RecallArgs
from ..memory.handlers import rank
from ..memory.records import MAX_ROW_ID
from ..memory.results import memory_fields
from ..memory.stale import stale_diff, stale_ids
from ..screening import run_tool
from ..session_state import SessionState
from ..store.domain.lexical import query_terms, search_memories
from ..store.interfaces import ReadTx
from ..store.tooling.services import policy_of, scoped, store_of
from . import queries
from .explain import explain

STATUS_OF: tuple[tuple[type[DomainError], int], ...] = (
    (BadArgument, 400),
    (Forbidden, 403),
    (NotFound, 404),
    (Conflict, 409),
    (LimitExceeded, 413),
    (Unavailable, 503),
)
PAGE_LIMIT = 200
SEARCH_LIMIT = 500
# Memories one dashboard export may name (ticked rows; `memtrio export` writes everything).
EXPORT_LIMIT = 1000
# A semantic search lists what recall returns: its best `limit` (the tool's default).
# Every memory reachable in the graph has some PageRank mass, so without this cut a
# semantic search would list the whole store.
RECALL_CUT = RecallArgs(query="").limit
# What the Graph page opens on: the whole graph up to this many entities, else the
# most connected ones, with at most GRAPH_EDGES relations among them.
GRAPH_ENTITIES = 40
GRAPH_EDGES = 120
RECENT_QUERIES = 12
OUTLINE_LIMIT = 2000  # symbols of one file's outline
Query = dict[str, str]
T = TypeVar("T")
Json = Any


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def status_of(exc: DomainError) -> int:
    return next((status for kind, status in STATUS_OF if isinstance(exc, kind)), 400)


def _int(query: Query, name: str, default: int, low: int, high: int) -> int:
    raw = query.get(name, "")
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, f"`{name}` must be a whole number") from None
    return min(max(value, low), high)


def _float(query: Query, name: str) -> float | None:
    raw = query.get(name, "")
    try:
        return float(raw) if raw else None
    except ValueError:
        raise ApiError(400, f"`{name}` must be a number") from None


def _date(query: Query, name: str) -> float | None:
    raw = query.get(name, "")
    if not raw:
        return None
    try:
        return datetime.fromisoformat(raw).timestamp()
    except ValueError:
        raise ApiError(400, f"`{name}` must be a date (YYYY-MM-DD)") from None


def _scopes(query: Query) -> list[str] | None:
    raw = query.get("scopes", "")
    return [s for s in raw.split(",") if s.strip()] or None


def _rows(rows: list[dict[str, Any]]) -> list[Json]:
    return [memory_fields(row) for row in rows]


class Api:
    """The routes of ``/api/`` over one application."""

    def __init__(self, app: AppContext) -> None:
        self.app = app
        self.session = SessionState(name="ui", root=app.cwd, root_source="cwd")
        self.session.initialized = True
        self.get_routes: dict[str, Callable[[Query], Awaitable[Json]]] = {
            "overview": self.overview,
            "memories": self.memories,
            "memory": self.memory,
            "scopes": lambda q: self.tool("list_scopes", {}),
            "types": lambda q: self.read(queries.memory_types, "ui.types"),
            "graph": self.graph,
            "entity": lambda q: self.tool("describe_entity", {"name": q.get("name", "")}),
            "entities": self.entities,
            "path": self.path,
            "recall": self.recall,
            "recent": self.recent,
            "code": self.code,
            "symbols": self.symbols,
            "outline": self.outline,
            "server": self.server,
            "traces": self.traces,
        }
        self.post_routes: dict[str, Callable[[dict[str, Any]], Awaitable[Json]]] = {
            "update": lambda body: self.tool("update", body),
            "forget": lambda body: self.tool("forget", body),
            "export": self.export,
        }

    @property
    def ctx(self) -> CallContext:
        return CallContext(self.app, self.session)

    async def answer(self, method: str, name: str, query: Query, body: bytes) -> Json:
        """The answer of ``method /api/name``.

        Error handling: raises `ApiError` (status, message): 404 unknown route,
        405 wrong method, 400 bad JSON or arguments, and the status of the
        tool's `DomainError` with its message.
        """
        # The dashboard is a session of the server once it is used: `server_status` counts it.
        self.app.sessions.add(self.session)
        try:
            if method == "GET" and name in self.get_routes:
                return await self.get_routes[name](query)
            if method == "POST" and name in self.post_routes:
                try:
                    args = msgspec.json.decode(body or b"{}")
                except msgspec.DecodeError as exc:
                    raise ApiError(400, f"the body is not JSON: {exc}") from None
                if not isinstance(args, dict):
                    raise ApiError(400, "the body must be a JSON object")
                return await self.post_routes[name](args)
        except DomainError as exc:
            raise ApiError(status_of(exc), str(exc)) from None
        if name in self.get_routes or name in self.post_routes:
            raise ApiError(405, f"{method} is not allowed on /api/{name}")
        raise ApiError(404, f"no API /api/{name}")

    async def tool(self, name: str, arguments: dict[str, Any]) -> Json:
        """Call the tool ``name`` as the dashboard's session would over MCP."""
        tool = self.app.registry.get(name)
        if tool is None:
            raise ApiError(503, f"the {name} tool is not enabled on this server")
        try:
            args = msgspec.convert(arguments, tool.args)
        except msgspec.ValidationError as exc:
            raise ApiError(400, format_validation_error(exc, tool.args)) from None
        return msgspec.to_builtins(await run_tool(tool, self.ctx, args))

    async def read(self, op: Callable[[ReadTx], T], name: str) -> T:
        return await store_of(self.app).read(op, name=name)

    async def selection(self, query: Query) -> list[str]:
        return await scoped((await policy_of(self.ctx)).select, _scopes(query))

    # -- memories ------------------------------------------------------------------

    async def overview(self, query: Query) -> Json:
        policy = await policy_of(self.ctx)
        emb = self.app.config.embedding
        return {
            "version": self.app.version,
            "home": str(self.app.home),
            "root": str(self.app.cwd),
            "current_scope": policy.current,
            "writable": policy.writable,
            "features": list(self.app.features),
            "embeddings": emb.enabled and "embedder" in self.app.features,
        }

    async def memories(self, query: Query) -> Json:
        selection = await self.selection(query)
        text = query.get("q", "").strip()
        mode = query.get("mode", "lexical")
        if mode not in ("lexical", "semantic"):
            raise ApiError(400, f"mode: {mode!r} is not one of: lexical, semantic")
        limit = _int(query, "limit", 50, 1, PAGE_LIMIT)
        offset = _int(query, "offset", 0, 0, 10**9)
        chosen = queries.MemoryFilter(
            selection=selection,
            memory_type=query.get("type") or None,
            since=_date(query, "since"),
            until=_date(query, "until"),
            min_importance=_float(query, "min_importance"),
            only_scope=query.get("scope") or None,
        )
        scores: dict[int, float] = {}
        ranking = None
        semantic = mode == "semantic"
        if text:
            cut = RECALL_CUT if semantic else SEARCH_LIMIT
            ranked, ranking, _ = await rank(
                self.app, text, selection, chosen.memory_type, cut, semantic
            )
            scores = dict(ranked)
            chosen = msgspec.structs.replace(chosen, ids=list(scores))
        if query.get("stale") in ("1", "true"):  # the "stale only" filter
            stale = set(await stale_ids(self.ctx))
            keep = [i for i in chosen.ids if i in stale] if chosen.ids is not None else stale
            chosen = msgspec.structs.replace(chosen, ids=sorted(keep))
        sort = query.get("sort", "relevance" if text else "created")
        descending = query.get("order", "desc") != "asc"
        if text and sort == "relevance":
            rows, total = await self.read(
                lambda tx: queries.page_of_memories(tx, chosen, "id", True, 0, SEARCH_LIMIT),
                "ui.memories",
            )
            rows.sort(key=lambda m: scores.get(m["id"], 0.0), reverse=descending)
            rows = rows[offset : offset + limit]
        else:
            rows, total = await self.read(
                lambda tx: queries.page_of_memories(tx, chosen, sort, descending, offset, limit),
                "ui.memories",
            )
        for row in rows:
            if row["id"] in scores:
                row["score"] = scores[row["id"]]
        await code_states(self.ctx, await policy_of(self.ctx), rows, [])
        return {
            "memories": _rows(rows),
            "total": total,
            "offset": offset,
            "limit": limit,
            "ranking": ranking,
            "cut": RECALL_CUT if text and semantic else None,
            "scopes": selection,
        }

    async def memory(self, query: Query) -> Json:
        memory_id = _int(query, "id", 0, 0, 2**62)
        selection = await self.selection(query)
        found = await self.read(
            lambda tx: queries.memory_details(tx, memory_id, selection), "ui.memory"
        )
        if found is None:
            raise ApiError(404, f"memory {memory_id} not found in scopes {', '.join(selection)}")
        policy = await policy_of(self.ctx)
        found["writable"] = all(s in policy.writable for s in found["scopes"])
        await code_states(self.ctx, policy, [found], [])
        if found.get("stale"):  # what changed, as review_stale shows it
            found["diff"] = await stale_diff(self.ctx, memory_id)
        return memory_fields(found)

    async def export(self, body: dict[str, Any]) -> Json:
        ids = body.get("ids")
        if not isinstance(ids, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= MAX_ROW_ID for i in ids
        ):
            raise ApiError(
                400, f"`ids` must be a list of memory ids (whole numbers 1 to {MAX_ROW_ID})"
            )
        if len(ids) > EXPORT_LIMIT:
            raise ApiError(
                400,
                f"`ids`: at most {EXPORT_LIMIT:,} memories per export (memtrio export writes the whole store)",
            )
        selection = await scoped((await policy_of(self.ctx)).select, body.get("scopes") or None)

        def op(tx: ReadTx) -> list[Json]:
            found = (queries.memory_details(tx, i, selection, history=False) for i in ids)
            return [memory_fields({k: v for k, v in m.items() if k != "history"})
                    for m in found if m is not None]  # fmt: skip

        return {"format": "memtrio-ui-export", "memories": await self.read(op, "ui.export")}

    # -- graph -------------------------------------------------------------------------

    async def graph(self, query: Query) -> Json:
        """The paths around ``entity``; without one, the overview (`queries.graph_overview`)."""
        if not query.get("entity", "").strip():
            found = await self.graph_overview(GRAPH_ENTITIES, GRAPH_EDGES)
            return {"overview": True, **found}
        args: dict[str, Any] = {
            "entity": query.get("entity", ""),
            "max_depth": _int(query, "depth", 2, 1, 3),
            "direction": query.get("direction", "both"),
            "limit": 100,
        }
        if _scopes(query):
            args["scopes"] = _scopes(query)
        result = await self.tool("graph", args)
        wanted = {r for r in query.get("relations", "").split(",") if r}
        if wanted:
            result["paths"] = [
                p for p in result["paths"] if all(e["relation"] in wanted for e in p["edges"])
            ]
        return result

    async def graph_overview(self, limit: int, edges: int) -> dict[str, Any]:
        """`queries.graph_overview` over what this dashboard's session reads."""
        selection = list((await policy_of(self.ctx)).select(None))  # as the graph tools read
        return await self.read(
            lambda tx: queries.graph_overview(tx, selection, limit, edges), "ui.graph_overview"
        )

    async def entities(self, query: Query) -> Json:
        """Entity names for the entity field: the search's matches, or, for a text with no
        words to search (an empty field), the most connected entities."""
        text = query.get("q", "")
        if not query_terms(text):
            found = await self.graph_overview(50, 0)
            return {"entities": [e["name"] for e in found["entities"]]}
        return await self.tool("search_nodes", {"query": text, "mode": "names", "limit": 50})

    async def path(self, query: Query) -> Json:
        return await self.tool(
            "find_path", {"from": query.get("from", ""), "to": query.get("to", "")}
        )

    # -- recall ------------------------------------------------------------------------

    async def recall(self, query: Query) -> Json:
        text = query.get("q", "")
        if not text.strip():
            raise ApiError(400, "`q` (the query) is required")
        selection = await self.selection(query)
        limit = _int(query, "limit", 10, 1, 100)
        memory_type = query.get("type") or None
        modes: dict[str, Json] = {}
        for mode in ("lexical", "semantic"):
            if mode == "lexical":
                ranked = await self.read(
                    lambda tx: search_memories(tx, text, selection, memory_type, limit),
                    "ui.overview.lexical",
                )
                ranking = "lexical"
            else:
                ranked, ranking, _ = await rank(self.app, text, selection, memory_type, limit, True)
            ids = [i for i, _ in ranked]

            def op(tx: ReadTx, ids: list[int] = ids, ranking: str = ranking) -> Json:
                chosen = queries.MemoryFilter(selection=selection, ids=ids)
                rows, _ = queries.page_of_memories(tx, chosen, "id", True, 0, len(ids) or 1)
                return rows, explain(tx, text, ids, ranking)

            rows, reasons = await self.read(op, "ui.overview.rows")
            by_id = {r["id"]: r for r in rows}
            modes[mode] = {
                "ranking": ranking,
                "memories": [
                    {**memory_fields({**by_id[i], "score": s}), "why": reasons.get(i, [])}
                    for i, s in ranked
                    if i in by_id
                ],
            }
        return {"query": text, "scopes": selection, "modes": modes}

    async def recent(self, query: Query) -> Json:
        """The last distinct recall queries over the scopes this dashboard reads (what the
        Recall page opens on)."""
        selection = await self.selection({})
        limit = _int(query, "limit", RECENT_QUERIES, 1, 100)
        found = await self.read(
            lambda tx: queries.recent_queries(tx, selection, limit), "ui.recent"
        )
        return {"scopes": selection, "queries": found}

    # -- code ----------------------------------------------------------------------------

    async def code(self, query: Query) -> Json:
        """The code index per checkout; ``refresh=1`` first brings this repository's index up
        to date (what the Code page does when it opens, so its status is never stale)."""
        service = self.app.find(CODE)
        if service is None:
            why = self.app.unavailable.get("code", "the code index is not running")
            return {"enabled": False, "why": why, "checkouts": []}
        root = None
        if query.get("refresh") == "1":
            root = await _root(self.ctx, None)
            await service.refresh(root)
        checkouts = await service.db(queries.code_checkouts, service.index.conn)
        return {"enabled": True, "root": str(root or self.app.cwd), "checkouts": checkouts}

    def _args(self, kind: type[T], fields: dict[str, Any]) -> T:
        """``fields`` as the tool's argument struct (its bounds and its error messages)."""
        try:
            return msgspec.convert(fields, kind)
        except msgspec.ValidationError as exc:
            raise ApiError(400, format_validation_error(exc, kind)) from None

    async def symbols(self, query: Query) -> Json:
        """``find_symbol``'s matches as rows (the tool answers them as text lines); a path
        that is not plain UTF-8 text comes quoted and escaped (``quoted``), as the tool prints it."""
        if not query.get("q", "").strip():
            raise ApiError(400, "`q` (the symbol name to find) is required")
        fields: dict[str, Any] = {"query": query.get("q", "").strip(), "limit": 50}
        if query.get("kind"):
            fields["kind"] = query["kind"]
        args = self._args(FindArgs, fields)
        service = self.app.service(CODE)
        root = await _root(self.ctx, None)
        rows, total = await service.find(root, args.query, args.kind, args.limit)
        sources, indexed = service.truncation(root)
        return {
            "matches": [
                {"path": show_path(path), "quoted": show_path(path) != path, "start": start,
                 "end": end, "kind": kind, "name": name, "parent": parent or None,
                 "signature": signature or None}
                for path, start, end, kind, name, parent, signature, *_ in rows
            ],
            "total": total,
            "truncated": {"source_files": sources, "indexed_files": indexed} if sources else None,
        }  # fmt: skip

    async def outline(self, query: Query) -> Json:
        """``code_outline``'s symbols of one file as rows, nested by ``depth``."""
        args = self._args(OutlineArgs, {"path": query.get("path", "")})
        rel, language, coverage, rows = await _file_outline(self.ctx, None, args.path)
        return {
            "path": show_path(rel),
            "language": language,
            "coverage": coverage,
            "symbols": [
                {"kind": kind, "name": name, "start": start, "end": end, "depth": depth,
                 "parent": parent or None, "signature": signature or None}
                for kind, name, start, end, depth, parent, signature in rows[:OUTLINE_LIMIT]
            ],
            "total": len(rows),
        }  # fmt: skip

    # -- server -----------------------------------------------------------------------------

    async def server(self, query: Query) -> Json:
        status = await self.tool("server_status", {})
        emb = self.app.config.embedding
        status["embedding"] = {
            "enabled": emb.enabled and "embedder" in self.app.features,
            "model": emb.model or "all-MiniLM-L6-v2 int8 (bundled)",
            "backend": emb.backend,
            "workers": emb.workers,
        }
        status["calls"] = [
            {"session": s.name, "calls": len(s.in_flight)} for s in self.app.sessions if s.in_flight
        ]
        return status

    async def traces(self, query: Query) -> Json:
        log = log_path(self.app.config, self.app.home)
        limit = _int(query, "limit", 20, 1, 200)
        return {"traces": await trio.to_thread.run_sync(queries.recent_traces, log, limit)}
