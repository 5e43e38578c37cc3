"""What gets embedded for a stored row, and how vectors are written back.

The document texts come from the store (``store.domain.documents``: `memory_document`,
`entity_document`, `relation_document`), so lazy re-embedding (the ranker)
and ``memtrio reembed`` embed exactly what ``remember`` / ``relate`` embed.

The functions here run inside one transaction of the store (a `StoreTx`, through
``tx.vectors``): ``store.read(fn)`` / ``store.write(fn)`` or `store.direct.Direct`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..store.domain.documents import entity_document, memory_document, relation_document
from ..store.domain.embeddings import ItemKind, put_vector, vecs_of
from ..store.interfaces import ReadTx, StoreTx
from ..store.messages import Change
from ..store.writer import Written
from .handle import EmbedResult

KINDS: tuple[ItemKind, ...] = ("memory", "entity", "relation")


def read_documents(tx: ReadTx, ids: Mapping[str, Sequence[int]]) -> list[tuple[str, int, str]]:
    """(kind, id, document text) of the given items that still exist."""
    vectors = tx.vectors
    out: list[tuple[str, int, str]] = []
    for kind, wanted in ids.items():
        if kind == "memory":
            out.extend(
                ("memory", m.id, memory_document(m.content)) for m in vectors.memory_texts(wanted)
            )
        elif kind == "entity":
            out.extend(
                ("entity", e.id, entity_document(e.name, e.kind))
                for e in vectors.entity_texts(wanted)
            )
        elif kind == "relation":
            out.extend(
                ("relation", r.id, relation_document(r.source, r.relation_type, r.target))
                for r in vectors.relation_texts(wanted)
            )
    return out


def stale_items(
    tx: StoreTx, kind: str, model: str, revision: str, after: int, limit: int
) -> list[int]:
    """Ids of ``kind`` after ``after`` (ascending) with no vector of ``model``/``revision``."""
    return tx.vectors.lacking(kind, model, revision, after, limit)


def count_stale(tx: ReadTx, model: str, revision: str) -> dict[str, int]:
    """How many memories, entities and relations have no vector of ``model``/``revision``."""
    vectors = tx.vectors
    return {kind: vectors.count_lacking(kind, model, revision) for kind in KINDS}


def vector_writer(
    keys: Sequence[tuple[str, int]], result: EmbedResult
) -> Callable[[StoreTx], Written[int]]:
    """A store write op saving text ``i``'s vectors (every window) for ``keys[i]``.

    Rows deleted meanwhile are skipped.
    """
    vecs = vecs_of(result)

    def op(tx: StoreTx) -> Written[int]:
        vectors = tx.vectors
        changes: list[Change] = []
        live: dict[str, set[int]] = {}
        for kind in {k for k, _ in keys}:
            live[kind] = vectors.existing(kind, [i for k, i in keys if k == kind])
        for (kind, item_id), vec in zip(keys, vecs, strict=True):
            if item_id not in live[kind]:
                continue
            put_vector(tx, kind, item_id, vec)
            changes.append(
                Change(
                    kind=kind,  # type: ignore[arg-type] # one of KINDS: keys come from read_documents
                    id=item_id,
                    vector=vec.data,
                    model=vec.model,
                    revision=vec.revision,
                )
            )
        return Written(len(changes), changes)

    return op
