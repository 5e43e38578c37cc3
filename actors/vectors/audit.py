"""``memtrio doctor``'s look at the stored vectors: the rows a load would skip, and why.

A load never stops on a row it cannot use (``VectorService``, the ranker's
``ItemIndex``): it skips it. This finds the same rows without starting a
server, in every table of vectors: ``entity_embeddings`` (the clients' own,
checked against ``[vectors]``: its dimension's rows under the index's
`ValueRule`) and ``vectors`` / ``vector_chunks`` (the local model's windows of
memories, entities and relations, under the ranker's rule). The count is
whole; the rows listed are the first `MAX_REPORTED`.

Runs in one read transaction of the store (either backend), a batch of rows
at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..store.interfaces import ReadTx
from ..store.interfaces.vectors import StoredWindow
from ..vector_index.arrays import MAX_REPORTED, ValueRule
from .table import LOAD_BATCH, scan, usable_rows

REMEDY = (
    "memtrio skips them when it loads; vector_upsert_embedding replaces an entity's "
    "embedding (vector_delete_embedding removes it), and recall embeds a memory, entity "
    "or relation again when it reaches one"
)


@dataclass
class Findings:
    """Unusable stored vectors: how many, and the first few (table, id, why)."""

    count: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)

    def add(self, table: str, key: str, bad: dict[int, str]) -> None:
        self.count += len(bad)
        for item, why in sorted(bad.items()):
            if len(self.rows) < MAX_REPORTED:
                self.rows.append({"table": table, key: item, "reason": why})

    def report(self) -> dict[str, Any]:
        status = "ok" if not self.count else "unusable rows"
        out: dict[str, Any] = {"status": status, "unusable": self.count, "rows": self.rows}
        if self.count:
            out["remedy"] = REMEDY
        return out


def _embedding_rows(tx: ReadTx) -> Iterator[list[tuple[int, object, object]]]:
    """(entity id, dim, vec) of ``entity_embeddings``, a batch at a time."""
    batch: list[tuple[int, object, object]] = []
    for row in scan(tx, None):
        batch.append((int(row.entity_id), row.dim, row.vec))
        if len(batch) >= LOAD_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _model_rows(tx: ReadTx, table: str) -> Iterator[list[StoredWindow]]:
    """The windows of ``vectors`` or ``vector_chunks``, a batch at a time."""
    if table == "vector_chunks":
        after: tuple[str, int, int] | None = None
        while batch := tx.vectors.chunks_after(after, LOAD_BATCH):
            yield batch
            after = (batch[-1].kind, batch[-1].item_id, batch[-1].chunk)
        return
    first: tuple[str, int] | None = None
    while batch := tx.vectors.windows_after(first, LOAD_BATCH):
        yield batch
        first = (batch[-1].kind, batch[-1].item_id)


def _by_dim(rows: list[tuple[int, object, object]]) -> dict[object, list[tuple[int, object]]]:
    groups: dict[object, list[tuple[int, object]]] = {}
    for item, dim, vec in rows:
        groups.setdefault(dim, []).append((item, vec))
    return groups


def _check(
    rows: list[tuple[int, object, object]], rule: ValueRule, dims: int | None
) -> dict[int, str]:
    """The rows (id, dim, vec) that cannot be used; ``dims``: the dimension ``rule`` is for
    (rows of another are checked as float32 only); None: every dimension."""
    bad: dict[int, str] = {}
    for dim, group in _by_dim(rows).items():
        if not isinstance(dim, int) or not 1 <= dim <= 65_536:
            bad.update({item: f"its dimension is stored as {dim!r}" for item, _ in group})
            continue
        _, _, found = usable_rows(group, dim, rule if dims in (None, dim) else ValueRule())
        bad.update(found)
    return bad


def audit(tx: ReadTx, dims: int, rule: ValueRule, model_rule: ValueRule) -> dict[str, Any]:
    """The unusable stored vectors of the store (see the module doc), as doctor reports them.

    ``dims``/``rule``: ``[vectors] dims`` and the tools' index rule; ``model_rule``:
    the ranker's.
    """
    found = Findings()
    for rows in _embedding_rows(tx):
        found.add("entity_embeddings", "entity_id", _check(rows, rule, dims))
    for table in ("vectors", "vector_chunks"):
        for model_rows in _model_rows(tx, table):
            kinds: dict[str, list[tuple[int, object, object]]] = {}
            for w in model_rows:
                kinds.setdefault(w.kind, []).append((w.item_id, w.dim, w.vec))
            for kind, rows in kinds.items():
                bad = _check(rows, model_rule, None)
                found.add(table, f"{kind}_id", bad)
    return found.report()
