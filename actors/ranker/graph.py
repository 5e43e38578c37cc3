"""The ranker's in-memory picture of the store: vectors, scopes, types and the graph.

`RecallCache` holds, for the active embedding model only:

- one `ItemIndex` per kind (memory, entity, relation), with one vector per
  stored window of an item's text (a long memory has several);
- per-item attributes in arrays indexed by id (present, scope, memory type),
  so a scope / ``memory_type`` filter becomes a boolean mask in one numpy step;
- the memory/entity/relation graph as adjacency sets: memory—entity
  (``memory_entities``), memory—relation (``memory_relations``) and
  relation—source/target entity.

It is loaded once (`load`) and then kept current by `apply`, which re-reads
from the database the rows a store change names (the store's change records
say *what* changed; the database says what it is now, so applying a change
twice is harmless).

With ``terms`` on, each memory is also linked to the terms of its text
(names, identifiers, paths, quoted terms: `terms.extract`), term nodes that
exist in the cache only.

Nodes are ints: ``id * NODE_KINDS + KIND_CODE[kind]``.

Thread-safety: none; the ranker serialises every use behind one lock.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..store.interfaces import Snapshot
from ..store.interfaces.snapshot import Kind
from .dates import Day, memory_dates
from .item_index import IndexChoice, ItemIndex
from .stored import as_number, as_text
from .terms import TermGraph, extract

KINDS = ("memory", "entity", "relation")
STORED_KINDS: tuple[Kind, ...] = ("memory", "entity", "relation")  # KINDS, as the store names them
# Node kinds: the three stored kinds, and the terms found in memories' text (`terms`).
KIND_CODE = {"memory": 0, "entity": 1, "relation": 2, "term": 3}
NODE_KINDS = len(KIND_CODE)
NO_SCOPE = -1  # an unscoped (legacy) item: visible in every selection
MULTI_SCOPE = -2  # more than one scope: see ItemTable.multi
SQL_BATCH = 500  # ids re-read per step of `apply`


def stored_kind(kind: str) -> Kind:
    """``kind`` (one of `KINDS`) as the storage interfaces name it."""
    for stored in STORED_KINDS:
        if kind == stored:
            return stored
    raise ValueError(f"not a stored kind: {kind!r}")


def node(kind: str, item_id: int) -> int:
    return item_id * NODE_KINDS + KIND_CODE[kind]


def node_kind(n: int) -> int:
    return n % NODE_KINDS


def node_id(n: int) -> int:
    return n // NODE_KINDS


class ItemTable:
    """Attributes of one kind of item, in numpy arrays indexed by item id."""

    def __init__(self, capacity: int = 1024) -> None:
        self.present = np.zeros(capacity, dtype=bool)
        self.scope = np.full(capacity, NO_SCOPE, dtype=np.int32)
        self.type = np.zeros(capacity, dtype=np.int32)
        self.created = np.zeros(capacity, dtype=np.float64)  # memories: created_at (epoch s)
        self.multi: dict[int, frozenset[int]] = {}
        self.count = 0

    def _ensure(self, item_id: int) -> None:
        cap = len(self.present)
        if item_id < cap:
            return
        new_cap = max(item_id + 1, cap * 2)
        for name, fill in (("present", False), ("scope", NO_SCOPE), ("type", 0), ("created", 0)):
            old = getattr(self, name)
            arr = np.full(new_cap, fill, dtype=old.dtype)
            arr[:cap] = old
            setattr(self, name, arr)

    def set(
        self, item_id: int, scopes: Sequence[int], type_code: int = 0, created: object = 0.0
    ) -> None:
        self._ensure(item_id)
        if not self.present[item_id]:
            self.count += 1
        self.present[item_id] = True
        self.type[item_id] = type_code
        self.created[item_id] = as_number(created)  # any stored value (ranker.stored)
        self.multi.pop(item_id, None)
        if not scopes:
            self.scope[item_id] = NO_SCOPE
        elif len(scopes) == 1:
            self.scope[item_id] = scopes[0]
        else:
            self.scope[item_id] = MULTI_SCOPE
            self.multi[item_id] = frozenset(scopes)

    def remove(self, item_id: int) -> None:
        if item_id < len(self.present) and self.present[item_id]:
            self.present[item_id] = False
            self.count -= 1
            self.multi.pop(item_id, None)

    def has(self, item_id: int) -> bool:
        return 0 <= item_id < len(self.present) and bool(self.present[item_id])

    def allowed(self, scope_ids: np.ndarray | None, type_code: int | None = None) -> np.ndarray:
        """Boolean mask by id: present, in one of ``scope_ids`` (None = any), of ``type_code``."""
        mask = self.present.copy()
        if scope_ids is not None:
            # A lookup table by scope id (shifted past MULTI_SCOPE and NO_SCOPE): one
            # gather, several times faster than np.isin over a million items.
            wanted = np.asarray(scope_ids, dtype=np.int64)
            wanted = wanted[wanted >= 0]
            top = max(int(self.scope.max(initial=0)), int(wanted.max(initial=0)))
            table = np.zeros(top + 3, dtype=bool)
            table[wanted + 2] = True
            table[NO_SCOPE + 2] = True
            in_scope = table[self.scope + 2]
            if self.multi:
                wanted_set = set(scope_ids.tolist())
                for item_id, scopes in self.multi.items():
                    in_scope[item_id] = bool(scopes & wanted_set)
            mask &= in_scope
        if type_code is not None:
            mask &= self.type == type_code
        return mask


_WORD = re.compile(r"[\w][\w.+#/-]*[\w+#]|[\w]", re.UNICODE)


def query_words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(text)]


class RecallCache:
    """Vectors, attributes and graph of one store, for one embedding model."""

    def __init__(
        self,
        model: str,
        revision: str,
        dim: int,
        choice: IndexChoice | None = None,
        index_dir: Path | None = None,
        terms: bool = False,
        dates: bool = False,
        defer_builds: bool = False,
        stored_edges: bool = True,
    ) -> None:
        """``index_dir``: where hnsw graphs are kept between starts (None: never saved);
        ``terms``: link memories to the terms of their text; ``dates``: keep the dates
        each memory's text is about; ``defer_builds``: an hnsw graph to build is left to
        the owner, exact meanwhile (`ItemIndex.load_rows`); ``stored_edges`` off: the
        stored graph is not kept (PostgreSQL: `sql_graph` reads it around the seeds),
        ``adj`` holds the term links only."""
        self.model = model
        self.stored_edges = stored_edges
        self.defer_builds = defer_builds
        self.choice = choice or IndexChoice()
        self.index_dir = index_dir
        self.revision = revision
        self.dim = dim
        self.index = {kind: ItemIndex(dim, choice, kind) for kind in KINDS}
        self.items = {kind: ItemTable() for kind in KINDS}
        self.adj: dict[int, set[int]] = {}
        self.scope_ids: dict[str, int] = {}
        self.type_codes: dict[str, int] = {}
        # canonical name -> the ids of the entities with it (names differing in case only)
        self.entity_by_name: dict[str, list[int]] = {}
        self.entity_name: dict[int, str] = {}
        self.max_name_words = 1
        self.terms: TermGraph | None = TermGraph() if terms else None
        self.dates: dict[int, frozenset[Day]] | None = {} if dates else None
        self._has_vector: dict[
            str, tuple[int, np.ndarray]
        ] = {}  # kind -> (index version, mask by id)

    # -- sizes ---------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "revision": self.revision,
            "vectors": {kind: len(self.index[kind]) for kind in KINDS},
            "vector_rows": {kind: self.index[kind].rows for kind in KINDS},
            "vector_index": {kind: self.index[kind].backend.kind for kind in KINDS},
            "items": {kind: self.items[kind].count for kind in KINDS},
            "edges": sum(len(v) for v in self.adj.values()) // 2,
            "terms": len(self.terms.keys) if self.terms is not None else None,
        }

    # -- codes ---------------------------------------------------------------

    def type_code(self, memory_type: object) -> int:
        key = as_text(memory_type).casefold()
        code = self.type_codes.get(key)
        if code is None:
            code = len(self.type_codes) + 1
            self.type_codes[key] = code
        return code

    def selected_scopes(self, scopes: Iterable[int | str] | None) -> np.ndarray | None:
        """Scope ids for a selection given as ids or names (None = every scope)."""
        if scopes is None:
            return None
        ids: list[int] = []
        for scope in scopes:
            if isinstance(scope, str):
                sid = self.scope_ids.get(scope)
                if sid is not None:
                    ids.append(sid)
            else:
                ids.append(int(scope))
        return np.array(sorted(set(ids)), dtype=np.int32)

    # -- graph edits ---------------------------------------------------------

    def _link(self, a: int, b: int) -> None:
        self.adj.setdefault(a, set()).add(b)
        self.adj.setdefault(b, set()).add(a)

    def _unlink_all(self, n: int) -> None:
        for other in self.adj.pop(n, ()):
            peers = self.adj.get(other)
            if peers is not None:
                peers.discard(n)
                if not peers:
                    del self.adj[other]

    # -- loading -------------------------------------------------------------

    def load(self, snap: Snapshot) -> None:  # noqa: C901
        """Read everything of the active model from ``snap`` (one read transaction)."""
        self.scope_ids = snap.scope_ids()
        grouped: dict[str, dict[int, list[int]]] = {k: {} for k in KINDS}
        for kind in KINDS:
            for item_id, scope_id in snap.item_scopes(stored_kind(kind)):
                grouped[kind].setdefault(item_id, []).append(scope_id)
        mem = self.items["memory"]
        for m in snap.memories():
            mem.set(
                m.id, grouped["memory"].get(m.id, ()), self.type_code(m.memory_type), m.created_at
            )
        ent = self.items["entity"]
        for e in snap.entities():
            ent.set(e.id, grouped["entity"].get(e.id, ()))
            self._name_entity(e.id, e.canonical_name)
        rel = self.items["relation"]
        for r in snap.relations():
            rel.set(r.id, grouped["relation"].get(r.id, ()))
            if self.stored_edges:
                self._link(node("relation", r.id), node("entity", r.source_id))
                self._link(node("relation", r.id), node("entity", r.target_id))
        if self.stored_edges:
            for memory_id, entity_id in snap.memory_entities():
                self._link(node("memory", memory_id), node("entity", entity_id))
            for memory_id, relation_id in snap.memory_relations():
                self._link(node("memory", memory_id), node("relation", relation_id))
        if self.reads_text:
            # Dates alone need a 4-digit year in the text (`dates.memory_dates`): the store
            # skips the rest without handing them over.
            for memory_id, content in snap.memory_texts(dated_only=self.terms is None):
                self._read_text(memory_id, content)
        for kind in KINDS:
            # Chunk 0 of every item, then the other windows of long texts (only under a
            # chunk 0 of the same model: a set is whole or absent).
            rows, count = self.vector_rows(snap, stored_kind(kind))
            saved = None
            if self.index_dir is not None:
                saved = self.choice.saved_path(
                    self.index_dir, kind, self.model, self.revision, self.dim
                )
            self.index[kind].load_rows(rows, count, saved, defer=self.defer_builds)

    def vector_rows(self, snap: Snapshot, kind: Kind) -> tuple[Iterator[tuple[int, bytes]], int]:
        """The (item id, float32 bytes) rows of ``kind`` of the cache's model, and their count."""
        model = (self.model, self.revision, self.dim)
        return snap.vector_rows(kind, *model), snap.vector_count(kind, *model)

    @property
    def reads_text(self) -> bool:
        return self.terms is not None or self.dates is not None

    def _read_text(self, memory_id: int, content: object) -> None:
        """Terms and dates of a memory's text (those that are on)."""
        content = as_text(content)
        if self.terms is not None:
            n = node("memory", memory_id)
            for key in extract(content):
                self._link(n, node("term", self.terms.id_of(key)))
        if self.dates is not None:
            found = memory_dates(content)
            if found:
                self.dates[memory_id] = found
            else:
                self.dates.pop(memory_id, None)

    def _name_entity(self, item_id: int, canonical: object) -> None:
        canonical = as_text(canonical)
        self._unname_entity(item_id)
        self.entity_name[item_id] = canonical
        self.entity_by_name.setdefault(canonical, []).append(item_id)
        self.max_name_words = max(self.max_name_words, len(canonical.split()))

    def _unname_entity(self, item_id: int) -> None:
        """Forget the name of ``item_id`` (`named_entities` no longer finds it)."""
        old = self.entity_name.pop(item_id, None)
        if old is None:
            return
        ids = self.entity_by_name.get(old, [])
        if item_id in ids:
            ids.remove(item_id)
        if not ids:
            self.entity_by_name.pop(old, None)

    # -- incremental updates ---------------------------------------------------

    def apply(self, snap: Snapshot, changes: Sequence[Any]) -> None:
        """Bring the cache up to date with store `Change` records (re-reading their rows)."""
        todo: dict[str, dict[int, Any]] = {k: {} for k in KINDS}
        for change in changes:
            if change.kind in todo:
                todo[change.kind][int(change.id)] = change
        if not any(todo.values()):
            return
        self.scope_ids = snap.scope_ids()
        for kind in KINDS:
            ids = list(todo[kind])
            for start in range(0, len(ids), SQL_BATCH):
                self._refresh(snap, kind, ids[start : start + SQL_BATCH], todo[kind])
        # A memory's entities and relations may have gained a scope (an existing entity
        # mentioned from another scope) without a change record of their own: re-read
        # the attributes of those the changed memories link to (not their links: an
        # entity may have thousands).
        linked: dict[str, set[int]] = {"entity": set(), "relation": set()}
        for kind, n in self._memory_links(snap, list(todo["memory"])):
            if node_id(n) not in todo[kind]:
                linked[kind].add(node_id(n))
        for kind, ids_set in linked.items():
            ids = sorted(ids_set)
            for start in range(0, len(ids), SQL_BATCH):
                self._touch(snap, kind, ids[start : start + SQL_BATCH])

    def _memory_links(self, snap: Snapshot, ids: list[int]) -> list[tuple[str, int]]:
        """(kind, node) of the entities and relations the memories ``ids`` link to: from the
        cached graph, or without it (``stored_edges`` off) from ``snap``."""
        if self.stored_edges:
            return [
                (KINDS[node_kind(n)], n)
                for memory_id in ids
                for n in self.adj.get(node("memory", memory_id), ())
                if node_kind(n) in (KIND_CODE["entity"], KIND_CODE["relation"])
            ]
        out: list[tuple[str, int]] = []
        for start in range(0, len(ids), SQL_BATCH):
            part = ids[start : start + SQL_BATCH]
            out += [("entity", node("entity", e)) for _, e in snap.memory_entities(part)]
            out += [("relation", node("relation", r)) for _, r in snap.memory_relations(part)]
        return out

    def _touch(self, snap: Snapshot, kind: str, ids: list[int]) -> None:
        """Re-read the scopes (and name / vector if unknown) of existing entities or relations."""
        scopes: dict[int, list[int]] = {}
        for item_id, scope_id in snap.item_scopes(stored_kind(kind), ids):
            scopes.setdefault(item_id, []).append(scope_id)
        found: list[tuple[int, object]]
        if kind == "entity":
            found = [(e.id, e.canonical_name) for e in snap.entities(ids)]
        else:
            found = [(r.id, r.source_id) for r in snap.relations(ids)]
        fresh: list[int] = []
        for item_id, value in found:
            if not self.items[kind].has(item_id):
                fresh.append(item_id)
            self.items[kind].set(item_id, scopes.get(item_id, ()))
            if kind == "entity" and self.entity_name.get(item_id) != value:
                self._name_entity(item_id, value)
        if fresh:
            self._refresh_vectors(snap, kind, fresh, {})

    def _refresh(self, snap: Snapshot, kind: str, ids: list[int], changes: dict[int, Any]) -> None:  # noqa: C901
        scopes: dict[int, list[int]] = {}
        for item_id, scope_id in snap.item_scopes(stored_kind(kind), ids):
            scopes.setdefault(item_id, []).append(scope_id)
        alive: dict[int, tuple[Any, ...]] = {}
        if kind == "memory":
            for m in snap.memories(ids, text=self.reads_text):
                alive[m.id] = (m.memory_type, m.created_at, m.content)
        elif kind == "entity":
            for e in snap.entities(ids):
                alive[e.id] = (e.canonical_name,)
        else:
            for r in snap.relations(ids):
                alive[r.id] = (r.source_id, r.target_id)
        table_items = self.items[kind]
        for item_id in ids:
            n = node(kind, item_id)
            self._unlink_all(n)
            if item_id not in alive:
                table_items.remove(item_id)
                if kind == "memory" and self.dates is not None:
                    self.dates.pop(item_id, None)
                self.index[kind].remove(item_id)
                if kind == "entity":
                    self._unname_entity(item_id)
                continue
            row = alive[item_id]
            if kind == "memory":
                table_items.set(item_id, scopes.get(item_id, ()), self.type_code(row[0]), row[1])
                if self.reads_text:
                    self._read_text(item_id, row[2])
            else:
                table_items.set(item_id, scopes.get(item_id, ()))
            if kind == "entity":
                self._name_entity(item_id, row[0])
            elif kind == "relation" and self.stored_edges:
                self._link(n, node("entity", row[0]))
                self._link(n, node("entity", row[1]))
        live = [i for i in ids if i in alive]
        if live and not self.stored_edges:
            self._refresh_vectors(snap, kind, live, changes)
        elif live:
            if kind == "memory":
                for memory_id, entity_id in snap.memory_entities(memories=live):
                    self._link(node("memory", memory_id), node("entity", entity_id))
                for memory_id, relation_id in snap.memory_relations(memories=live):
                    self._link(node("memory", memory_id), node("relation", relation_id))
            elif kind == "entity":
                for memory_id, entity_id in snap.memory_entities(entities=live):
                    self._link(node("memory", memory_id), node("entity", entity_id))
                for r in snap.relations(touching=live):
                    self._link(node("relation", r.id), node("entity", r.source_id))
                    self._link(node("relation", r.id), node("entity", r.target_id))
            else:
                for memory_id, relation_id in snap.memory_relations(relations=live):
                    self._link(node("memory", memory_id), node("relation", relation_id))
            self._refresh_vectors(snap, kind, live, changes)

    def _refresh_vectors(
        self, snap: Snapshot, kind: str, ids: list[int], changes: dict[int, Any]
    ) -> None:
        index = self.index[kind]
        width = self.dim * 4
        reread: list[int] = []
        for item_id in ids:
            change = changes.get(item_id)
            vec = getattr(change, "vector", None)
            if (
                vec is not None
                and change is not None
                and change.model == self.model
                and change.revision == self.revision
                and len(vec) >= width
                and len(vec) % width == 0
            ):
                # Every window of the text, back to back (see store.writer.Change).
                index.upsert(item_id, np.frombuffer(vec, dtype=np.float32).reshape(-1, self.dim))
            else:
                reread.append(item_id)
        if not reread:
            return
        found = snap.item_windows(stored_kind(kind), reread, self.model, self.revision, self.dim)
        for item_id in reread:
            blobs = [b for b in found.get(item_id, ()) if len(b) == width]
            if blobs:
                index.upsert(
                    item_id, np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(-1, self.dim)
                )
            else:
                index.remove(item_id)

    # -- questions -------------------------------------------------------------

    def missing_vectors(self, kind: str, allowed: np.ndarray, limit: int) -> list[int]:
        """Up to ``limit`` allowed items of ``kind`` with no vector of the active model."""
        return [int(i) for i in self._missing(kind, allowed)[:limit]]

    def count_missing(self, kind: str, allowed: np.ndarray) -> int:
        """How many allowed items of ``kind`` have no vector of the active model."""
        return len(self._missing(kind, allowed))

    def _missing(self, kind: str, allowed: np.ndarray) -> np.ndarray:
        index = self.index[kind]
        cached = self._has_vector.get(kind)
        if cached is None or cached[0] != index.version:
            have = np.zeros(len(allowed), dtype=bool)
            ids = index.ids()
            have[ids[ids < len(have)]] = True
            cached = (index.version, have)
            self._has_vector[kind] = cached
        have = cached[1]
        n = min(len(have), len(allowed))
        missing = np.flatnonzero(allowed[:n] & ~have[:n])
        if len(allowed) > n:  # ids beyond the cached mask: none of them has a vector
            missing = np.concatenate([missing, n + np.flatnonzero(allowed[n:])])
        return missing

    def named_entities(self, query: str, allowed: np.ndarray) -> list[int]:
        """Entities whose canonical name appears literally (as whole words) in ``query``."""
        if not self.entity_by_name:
            return []
        words = query_words(query)
        found: list[int] = []
        seen: set[int] = set()
        longest = min(self.max_name_words, 8)
        for size in range(1, longest + 1):
            for start in range(len(words) - size + 1):
                for entity_id in self.entity_by_name.get(" ".join(words[start : start + size]), ()):
                    if entity_id not in seen and entity_id < len(allowed) and allowed[entity_id]:
                        seen.add(entity_id)
                        found.append(entity_id)
        return found
