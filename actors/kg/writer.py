"""`Writer`: one graph write call's state and its row-level writes.

Each write runs inside the transaction its caller opened (the StoreWriter for
the tools, the CLI's import for a file) and never commits, so one tool call is
one transaction. Writes go to the current scope. Who may change or delete a
row is ``store.domain.ownership``'s rule, checked through the Writer: a row shared
with a scope this server may not write keeps its attributes (a change is
refused before anything is written, a link keeps them with a warning), and
deleting a shared entity or relation only unlinks the writable scopes, so
another repository's view is never changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..store.domain.documents import canonical_name
from ..store.domain.embeddings import ItemKind, Vec, change_of, put_vector
from ..store.domain.memories import now
from ..store.domain.ownership import Ownership
from ..store.interfaces import StoreTx
from ..store.interfaces.anchors import Anchor
from ..store.interfaces.graph import NewEntity, NewObservation
from ..store.writer import Change
from .lookup import Ent
from .view import Scoped, View


@dataclass
class Vectors:
    """Embeddings computed before the write: by observation text and by entity name."""

    observations: dict[str, Vec] = field(default_factory=dict)
    entities: dict[str, Vec] = field(default_factory=dict)


class RowBatch:
    """New entities and observations of one call, written at `flush` with one INSERT per table.

    Each INSERT statement ends with FTS5 writing out its pending terms (the
    statement's savepoint), so a statement per row costs about twice as much
    per row as one statement for the batch (docs/benchmarks.md, "Knowledge
    graph"). Ids are given here as the id sequences would give them
    (`Graph.next_ids`): the transaction holds the write lock, so nobody else
    takes one meanwhile.
    """

    def __init__(self, tx: StoreTx) -> None:
        self.tx = tx
        self.next_entity, self.next_memory = tx.graph_writes.next_ids()
        self.entities: list[NewEntity] = []
        self.memories: list[NewObservation] = []
        self.vectors: list[tuple[str, int, Vec]] = []

    def entity(self, name: str, canon: str, kind: str) -> int:
        eid = self.next_entity
        self.next_entity += 1
        self.entities.append(NewEntity(eid, name, canon, kind))
        return eid

    def memory(self, content: str, entity_id: int) -> int:
        mid = self.next_memory
        self.next_memory += 1
        self.memories.append(NewObservation(mid, content, entity_id))
        return mid

    def flush(self, ts: float, scope_id: int) -> None:
        """Write the rows (entities, their scope links, memories, theirs, the entity links, vectors)."""
        self.tx.graph_writes.insert_batch(self.entities, self.memories, ts, scope_id)
        for kind, item, vec in self.vectors:
            put_vector(self.tx, kind, item, vec)
        self.entities, self.memories, self.vectors = [], [], []


class Writer:
    """One write call's state: the timestamp, the scope id written, the ownership rule,
    the changes and warnings to report."""

    def __init__(
        self,
        tx: StoreTx,
        view: View,
        vectors: Vectors | None,
        anchors: dict[str, list[Anchor]] | None = None,
    ) -> None:
        self.tx = tx
        self.view = view
        self.sc = Scoped(tx, view)
        self.ts = now()
        self.scope_id = tx.scopes.ensure(view.current)
        if self.scope_id not in self.sc.write_ids:
            self.sc = Scoped(tx, view)  # the current scope was just created
        self.own = Ownership(tx, view.writable)
        self.vectors = vectors or Vectors()
        self.changes: list[Change] = []
        self.warnings: list[str] = []
        self.batch: RowBatch | None = None
        # Code anchors of observation texts (found or given before the write), and the
        # new observations (memory ids) that get them once their rows are written.
        self.anchors = anchors or {}
        self.anchored: list[tuple[int, list[Anchor]]] = []

    def write_anchors(self) -> None:
        """Store the anchors of the observations this call added (after `flush`)."""
        for mid, anchors in self.anchored:
            self.tx.anchors.set(mid, anchors)
        self.anchored = []

    def start_batch(self) -> None:
        """Collect new entities and observations (`RowBatch`) until `flush`: no read of
        this call may look for them in the database before then."""
        self.batch = RowBatch(self.tx)

    def flush(self) -> None:
        """Write the rows collected since `start_batch`; later writes go straight to the database."""
        if self.batch is not None:
            self.batch.flush(self.ts, self.scope_id)
            self.batch = None

    def change(
        self, kind: ItemKind, item: int, vec: Vec | None = None, deleted: bool = False
    ) -> None:
        self.changes.append(change_of(kind, item, vec, deleted))

    def add_observation(self, entity_id: int, content: str) -> int:
        vec = self.vectors.observations.get(content)
        anchors = self.anchors.get(content)
        if self.batch is not None:
            mid = self.batch.memory(content, entity_id)
            if vec is not None:
                self.batch.vectors.append(("memory", mid, vec))
            if anchors:
                self.anchored.append((mid, anchors))
            self.change("memory", mid, vec)
            return mid
        mid = self.tx.graph_writes.add_observation(entity_id, content, self.ts, self.scope_id)
        if anchors:
            self.anchored.append((mid, anchors))
        if vec is not None:
            put_vector(self.tx, "memory", mid, vec)
        self.change("memory", mid, vec)
        return mid

    def add_new_observations(
        self, entity_id: int, contents: Sequence[str], have: set[str], repeats: bool = False
    ) -> list[str]:
        """Add the ``contents`` not in ``have`` (all of them with ``repeats``); returns those added.

        ``have`` (the entity's observation texts) grows with each one added.
        """
        added = []
        for content in contents:
            if content in have and not repeats:
                continue
            self.add_observation(entity_id, content)
            have.add(content)
            added.append(content)
        return added

    def create_entity(self, name: str, kind: str) -> Ent:
        canon = canonical_name(name)  # not the identity: the key of forgiving lookups
        vec = self.vectors.entities.get(name)
        if self.batch is not None:
            eid = self.batch.entity(name, canon, kind)
            if vec is not None:
                self.batch.vectors.append(("entity", eid, vec))
            self.change("entity", eid, vec)
            return Ent(eid, name, kind, canon)
        eid = self.tx.graph_writes.create_entity(name, canon, kind, self.ts)
        self.link_entity(eid)
        if vec is not None:
            put_vector(self.tx, "entity", eid, vec)
        self.change("entity", eid, vec)
        return Ent(eid, name, kind, canon)

    def link_entity(self, eid: int, asked_type: str | None = None, where: str = "") -> None:
        """Link an existing entity into the current scope; its type stays.

        With ``asked_type`` (the type the caller gave), a different stored type
        of an entity shared with a scope this server may not write is reported
        in `warnings`.
        """
        if asked_type is not None:
            self.note_kept_type(eid, asked_type, where)
        self.tx.graph_writes.link("entity", eid, [self.scope_id])

    def note_kept_type(self, eid: int, asked_type: str, where: str = "") -> None:
        """Warn when a shared entity keeps a type other than ``asked_type``."""
        rows = self.tx.graph.entities_by_ids([eid])
        if not rows or rows[0].kind == asked_type:
            return
        row = rows[0]
        foreign = self.own.foreign("entity", eid)
        if foreign:
            prefix = f"{where}: " if where else ""
            self.warnings.append(
                prefix
                + self.own.kept(
                    f"entity {row.name!r}",
                    "entityType",
                    f"`{row.kind}`",
                    f"`{asked_type}`",
                    foreign,
                )
            )

    def set_type(self, ent: Ent, kind: str) -> None:
        """Change an entity's type (the caller checked it is owned here)."""
        self.tx.graph_writes.set_kind(ent.id, kind, self.ts)
        ent.kind = kind

    def drop_observation(self, mid: int, entity_id: int) -> None:
        """Remove an observation (a memory owned here) from an entity.

        The memory row is deleted when this entity is its only link; otherwise
        only the link goes. Error handling: a memory
        shared with a scope this server may not write raises
        `ownership.SharedRow` (callers skip or refuse those first).
        """
        self.own.require("memory", mid, f"observation {mid}", "delete it")
        if not self.tx.graph_writes.observation_elsewhere(mid, entity_id):
            self.tx.graph_writes.delete_memory(mid)
            self.change("memory", mid, deleted=True)
            return
        self.tx.graph_writes.unlink_observation(mid, entity_id)
        self.change("memory", mid)

    def drop_relation(self, rid: int) -> None:
        """Delete a relation owned here; unlink a shared one from the writable scopes only."""
        if self.own.owned("relation", rid):
            self.tx.graph_writes.delete_relation(rid)
            self.change("relation", rid, deleted=True)
        else:
            self.own.release("relation", rid)
            self.change("relation", rid)

    def touch(self, ids: Iterable[int]) -> None:
        """Stamp ``updated_at`` of the entities owned here (a shared one's stays as it is)."""
        self.tx.graph_writes.touch([i for i in set(ids) if self.own.owned("entity", i)], self.ts)
