"""What a bulk write (``memtrio import``) left without a vector, said in one line.

A recall embeds at most `BACKFILL_LIMIT` missing items of each kind per call, so a
store filled by an import ranks mostly lexically until ``memtrio reembed`` runs: the
import says how many items lack a vector of the configured model, and what to run.
The model is only named (its spec resolved), never loaded.
"""

from __future__ import annotations

from ...protocol.plural import plural
from ...supervisors.context import AppContext
from ..store.interfaces import StoreTx
from ..store.writer import STORE
from .documents import KINDS, count_stale
from .model import ModelError, resolve_spec

BACKFILL_LIMIT = 64  # per kind: items a recall embeds when they lack a vector (ranker)


async def unembedded(app: AppContext) -> dict[str, int] | None:
    """Per kind, the items without a vector of the configured model; None when embeddings
    are off or the model is not known (then no vector is expected)."""
    cfg = app.config.embedding
    if not cfg.enabled:
        return None
    try:
        spec = resolve_spec(cfg.model, cfg.max_tokens)
    except ModelError:
        return None
    store = app.service(STORE)

    def count(tx: StoreTx) -> dict[str, int]:
        return count_stale(tx, spec.model_id, spec.revision)

    counts: dict[str, int] = await store.read(count, name="embedder.count_unembedded")
    return counts


def unembedded_line(counts: dict[str, int]) -> str | None:
    """One line saying what lacks a vector and what to run, or None when nothing does."""
    if not any(counts.values()):
        return None
    parts = ", ".join(plural(counts[k], k) for k in KINDS if counts.get(k))
    verb = "has" if sum(counts.values()) == 1 else "have"
    return (
        f"not embedded: {parts} {verb} no vector of the current model; semantic recall covers "
        f"only the rest (each recall embeds at most {BACKFILL_LIMIT} of each kind): run "
        "memtrio reembed"
    )


def unembedded_warning(counts: dict[str, int]) -> str | None:
    """A recall's warning when items it searched have no vector yet, or None."""
    if not any(counts.values()):
        return None
    parts = ", ".join(plural(counts[k], k) for k in KINDS if counts.get(k))
    one = sum(counts.values()) == 1
    verb, ranks = ("has", "ranks by its") if one else ("have", "rank by their")
    return (
        f"{parts} in the searched scopes {verb} no vector of the current model yet and "
        f"{ranks} words only (each recall embeds at most {BACKFILL_LIMIT} of each "
        "kind); run memtrio reembed"
    )
