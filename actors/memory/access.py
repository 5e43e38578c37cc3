"""Returning ranked memories: visibility re-checked, each access counted, every recall logged."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..store.domain.memories import get_memory, now, visible
from ..store.domain.scopes import GLOBAL
from ..store.interfaces import ReadTx, StoreTx
from ..store.interfaces.recall_log import RecallEntry


def ranked_rows(
    tx: ReadTx,
    selection: Sequence[str],
    ranked: Sequence[tuple[int, float]],
) -> list[dict[str, Any]]:
    """The ranked memories that still exist and are visible in ``selection``, with their scores.

    Rows come back repository matches first (stable), then in ranked order.
    """
    rows: list[dict[str, Any]] = []
    seen: set[int] = set()
    for memory_id, score in ranked:
        if memory_id in seen:
            continue
        seen.add(memory_id)
        memory = get_memory(tx, memory_id, details=False)
        if memory is None or not visible(memory["scopes"], selection):
            continue  # deleted since it was ranked, or never to be returned here
        memory["score"] = float(score)
        # An observation says little without its entity ("runs on port 8080": which service?).
        memory["entities"] = [
            {"id": e.id, "name": e.name, "kind": e.kind} for e in tx.memories.entities_of(memory_id)
        ]
        rows.append(memory)
    repos = {s for s in selection if s != GLOBAL}
    rows.sort(key=lambda m: 0 if repos.intersection(m["scopes"]) else 1)
    return rows


def record_access(
    tx: StoreTx,
    kind: str,
    query: str,
    selection: Sequence[str],
    ranked: Sequence[tuple[int, float]],
    ts: float | None = None,
) -> list[dict[str, Any]]:
    """Count an access of each returned memory (still existing), log the call, return the rows.

    Rows come back repository matches first (stable), then in ranked order.
    """
    ts = now() if ts is None else ts
    rows = ranked_rows(tx, selection, ranked)
    for memory in rows:
        tx.recall_log.count_access(memory["id"], ts)
        memory["access_count"] += 1
        memory["last_accessed_at"] = ts
    tx.recall_log.append(
        RecallEntry(
            ts=ts,
            kind=kind,
            query=query,
            scopes=json.dumps(list(selection)),
            ids=json.dumps([m["id"] for m in rows]),
            scores=json.dumps([m["score"] for m in rows]),
        )
    )
    return rows
