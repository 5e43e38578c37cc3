"""The ranker's vector indexes: items of one or more windows over a `VectorIndex` backend.

An item may have several vectors: the windows (chunks) of a text longer than
the embedding model's token limit. The backend holds one vector per *key*:
window 0 of item ``i`` under key ``i``, window ``c >= 1`` under
``EXTRA_BASE + i * WINDOWS + c``. An item's similarity to a query is the
best of its windows (max over chunks), and a search returns items, never the
same one twice.

The backend (``exact``, ``hnsw`` or ``ivf``, see ``actors.vector_index.index``) is
chosen by `IndexChoice` when the index is (re)loaded: ``hnsw`` (the default)
takes exact search below ``exact_below`` vectors (10,000) (under a millisecond there, and
always right: a graph of a few thousand uniform vectors finds 0.83-0.95 of
the true top 10) and a graph from there on; ``auto`` does the same at
``auto_threshold``. An index that grows past its threshold while the server
runs has its graph built in the background (exact meanwhile), as at a load.
Recall always compares by cosine (the model's vectors are unit length).

A built hnsw graph is saved (``$MEMTRIO_HOME/vector-index/``, one file per
kind, named after the model and the index options) and the next start loads
it and reconciles it with the table rather than building it again: minutes
at 1,000,000 vectors against seconds. The file is never the truth: after a
crash, or writes since it was saved, the reconciliation (every stored vector
compared with the table's) puts the index right; a file that cannot be read
or does not fit is ignored and the graph is built.

A stored vector the index cannot hold (not ``dim`` float32 values, a value
that is not finite or beyond the index's stored type: ``vector_index.arrays.ValueRule``)
is skipped, and so is the rest of its item: the item then counts as having no
vector, so recall embeds it again (lazy re-embedding) and the new vector
replaces the bad one. A load logs what it skipped once (``vector_rows_skipped``);
no stored row can stop the ranker.

Filtering happens inside the search (``allowed``: a boolean array indexed by
item id, turned into a key filter), so a filtered item never takes a slot of
the top k.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from ...supervisors import private, trace
from ..vector_index.arrays import MAX_REPORTED, ValueRule, value_rule
from ..vector_index.hnsw import HnswVectors
from ..vector_index.index import (
    Ids,
    Mask,
    Scores,
    StatValue,
    VectorIndex,
    Vectors,
    make_index,
    reconcile_batches,
)

WINDOWS = 256  # keys per item for its windows ([embedding] max_chunks is at most 256)
EXTRA_BASE = 1 << 56  # keys of windows 1, 2, ... start here
LOAD_BATCH = 65_536  # vectors handed to the backend at once while loading
SAVE_MIN_ROWS = 10_000  # smaller hnsw graphs are rebuilt at start rather than saved
DEFER_MIN_ROWS = 10_000  # smaller hnsw graphs are built at load (well under a second idle)
ACTOR = "ranker"


@dataclass(frozen=True)
class IndexChoice:
    """Which backend the ranker's indexes use and with what options (``[vectors]``)."""

    backend: Literal["auto", "exact", "hnsw", "ivf"] = "auto"  # the ranker passes [vectors]
    exact_below: int = 10_000
    auto_threshold: int = 100_000
    quantization: Literal["f32", "f16", "bf16", "i8"] = "f32"
    connectivity: int = 16
    expansion_add: int = 200
    expansion_search: int = 128
    ivf_nlist: int = 256
    ivf_nprobe: int = 8

    @property
    def rule(self) -> ValueRule:
        """What a stored vector must be for these indexes to hold it (cosine, this quantization)."""
        return value_rule(self.backend, "cos", self.quantization)

    def kind(self, vectors: int) -> Literal["exact", "hnsw", "ivf"]:
        """The backend for an index of ``vectors``: exact below the graph's threshold."""
        if self.backend == "auto":
            return "hnsw" if vectors >= self.auto_threshold else "exact"
        if self.backend == "hnsw":
            return "hnsw" if vectors >= self.exact_below else "exact"
        return self.backend

    @property
    def sized(self) -> bool:
        """Whether the backend depends on the index's size (``auto``, ``hnsw``)."""
        return self.backend in ("auto", "hnsw")

    def saved_path(self, directory: Path, kind: str, model: str, revision: str, dim: int) -> Path:
        """Where an hnsw graph of ``kind`` for this model and these options is kept."""
        key = (model, revision, dim, self.quantization, self.connectivity, self.expansion_add)
        digest = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
        return directory / f"recall-{kind}-{digest}.usearch"

    def make(self, dim: int, vectors: int) -> VectorIndex:
        return make_index(
            self.kind(vectors),
            dim,
            "cos",
            quantization=self.quantization,
            connectivity=self.connectivity,
            expansion_add=self.expansion_add,
            expansion_search=self.expansion_search,
            nlist=self.ivf_nlist,
            nprobe=self.ivf_nprobe,
        )


def _save(graph: HnswVectors, path: Path) -> None:
    """Save ``graph`` at ``path`` and delete the graphs of other models or options beside it.

    Error handling: a failure is a warning in the log (the next start builds the graph).
    """
    try:
        private.make_dir(path.parent)
        graph.save(path)
        prefix = path.name.rsplit("-", 1)[0] + "-"
        for old in path.parent.glob(f"{prefix}*.usearch"):
            if old != path:
                old.unlink(missing_ok=True)
    except OSError as exc:
        trace.warning(ACTOR, "vector_index_not_saved", path=str(path), error=str(exc))


def item_of(keys: Ids) -> Ids:
    """The item of each key."""
    extra = keys >= EXTRA_BASE
    if not extra.any():
        return keys
    return np.where(extra, (keys - EXTRA_BASE) // WINDOWS, keys)


def keys_of(item_id: int, windows: int) -> Ids:
    extra = EXTRA_BASE + item_id * WINDOWS + np.arange(1, windows, dtype=np.int64)
    return np.concatenate([np.array([item_id], dtype=np.int64), extra])


def _blob(blob: object, nbytes: int) -> bool:
    """Is a stored vector ``nbytes`` of bytes (a row of another type or length is skipped)?"""
    return isinstance(blob, bytes | bytearray | memoryview) and len(blob) == nbytes


def usable(keys: Ids, vectors: Vectors, rule: ValueRule) -> tuple[Ids, Vectors, Ids]:
    """The (keys, vectors) ``rule`` accepts, and the items of the others."""
    ok = rule.usable(vectors)
    if ok.all():
        return keys, vectors, np.zeros(0, dtype=np.int64)
    return keys[ok], vectors[ok], np.unique(item_of(keys[~ok]))


def warn_skipped(kind: str, items: Iterable[int]) -> None:
    """One warning for the items a load (or an update) left out."""
    every = sorted(set(items))
    trace.warning(
        ACTOR,
        "vector_rows_skipped",
        kind=kind,
        count=len(every),
        item_ids=every[:MAX_REPORTED],
        reason="a stored vector is not dim float32 values, or a value is not finite in the "
        "index's stored type; recall embeds the item again",
    )


def key_batches(
    rows: Iterable[tuple[int, bytes]],
    dim: int,
    count: int,
    rule: ValueRule | None = None,
    skipped: set[int] | None = None,
) -> Iterator[tuple[Ids, Vectors]]:
    """Up to ``count`` (item id, float32 bytes) rows as (keys, vectors) batches (an item's
    windows numbered in the order they come); rows of another length or type, and
    vectors ``rule`` refuses, are skipped (their items added to ``skipped``)."""
    windows: dict[int, int] = {}
    nbytes = dim * 4
    keys: list[int] = []
    vectors: list[bytes] = []
    taken = 0
    rule = rule or ValueRule()
    skipped = set() if skipped is None else skipped
    for item_id, blob in rows:
        if taken >= count:
            continue
        if not _blob(blob, nbytes):
            skipped.add(item_id)
            continue
        window = windows.get(item_id, 0)
        if window >= WINDOWS:
            continue
        windows[item_id] = window + 1
        keys.append(item_id if window == 0 else EXTRA_BASE + item_id * WINDOWS + window)
        vectors.append(blob)
        taken += 1
        if len(keys) == LOAD_BATCH:
            yield _checked(_batch(keys, vectors, dim), rule, skipped)
            keys, vectors = [], []
    if keys:
        yield _checked(_batch(keys, vectors, dim), rule, skipped)


def _checked(batch: tuple[Ids, Vectors], rule: ValueRule, skipped: set[int]) -> tuple[Ids, Vectors]:
    keys, vectors, bad = usable(*batch, rule)
    skipped.update(bad.tolist())
    return keys, vectors


def _batch(keys: list[int], vectors: list[bytes], dim: int) -> tuple[Ids, Vectors]:
    matrix = np.frombuffer(b"".join(vectors), dtype=np.float32).reshape(len(keys), dim)
    return np.array(keys, dtype=np.int64), matrix


@dataclass
class DeferredBuild:
    """An hnsw graph built in the background for an `ItemIndex` that serves exact meanwhile.

    The building thread only writes ``graph`` (once, at the end) and the saved file,
    and stops early once ``cancelled``;
    the index appends to ``journal`` every change made after it started (upserts with
    their vectors, removals with None), which `ItemIndex.adopt_build` replays.
    """

    choice: IndexChoice
    dim: int
    count: int
    saved: Path | None
    journal: list[tuple[Ids, Vectors | None]] = field(default_factory=list)
    graph: VectorIndex | None = None
    cancelled: bool = False  # set by the owner: the thread stops at its next batch

    def cancel(self) -> None:
        self.cancelled = True

    def run(self, rows: Iterable[tuple[int, bytes]], count: int) -> None:
        """In a worker thread: build the graph from ``rows`` (a snapshot of the table taken
        after the journal started), save it, and hand it over in ``graph``."""
        graph = self.choice.make(self.dim, self.count)
        reserve = getattr(graph, "reserve", None)
        if reserve is not None:
            reserve(count + 1024)
        started = time.perf_counter()
        skipped: set[int] = set()
        for keys, batch in key_batches(rows, self.dim, count, self.choice.rule, skipped):
            if self.cancelled:
                return  # the index was replaced or its owner stopped
            graph.add(keys, batch)
        for item_id in skipped:  # an item with a bad window is left out whole
            graph.remove(keys_of(item_id, WINDOWS))
        trace.event(
            ACTOR,
            "vector_index_built",
            rows=len(graph),
            seconds=round(time.perf_counter() - started, 1),
        )
        if (
            isinstance(graph, HnswVectors)
            and self.saved is not None
            and len(graph) >= SAVE_MIN_ROWS
        ):
            _save(graph, self.saved)
        self.graph = graph


class _ItemFilter:
    """The keys whose item is True in a mask indexed by item id (an `IdFilter`)."""

    def __init__(self, mask: Mask, windows: dict[int, int]) -> None:
        self.mask = mask
        self.windows = windows
        self._count = int(np.count_nonzero(mask))

    def __call__(self, ids: Ids) -> Mask:
        items = item_of(ids)
        ok = np.zeros(len(ids), dtype=bool)
        inside = (items >= 0) & (items < len(self.mask))
        ok[inside] = self.mask[items[inside]]
        return ok

    def count(self) -> int:
        return self._count

    def keys(self) -> Ids:
        items = np.flatnonzero(self.mask).tolist()
        parts = [keys_of(i, self.windows[i]) for i in items if i in self.windows]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


class ItemIndex:
    """Items of one kind (memory, entity, relation), each with its windows' vectors."""

    def __init__(self, dim: int, choice: IndexChoice | None = None, kind: str = "item") -> None:
        self.dim = dim
        self.kind = kind
        self.choice = choice or IndexChoice()
        self.rule = self.choice.rule
        self.skipped: set[int] = set()  # items left out: a stored vector of theirs is unusable
        self.backend = self.choice.make(dim, 0)
        self._windows: dict[int, int] = {}  # item -> number of windows
        self._rows = 0
        self.version = 0  # bumped whenever the set of items changes
        self.build: DeferredBuild | None = None  # an hnsw graph being built in the background
        self._defer = False  # grown past the threshold: build the graph in the background
        self._saved: Path | None = None  # where the graph is kept between starts

    def __len__(self) -> int:
        """Items (not windows) in the index."""
        return len(self._windows)

    def __contains__(self, item_id: int) -> bool:
        return item_id in self._windows

    @property
    def rows(self) -> int:
        """Vectors (windows) in the index; more than `len` when items have several."""
        return self._rows

    def ids(self) -> Ids:
        """Every item id in the index."""
        return np.fromiter(self._windows, dtype=np.int64, count=len(self._windows))

    def vectors(self, item_id: int) -> Vectors | None:
        """The item's vectors, (n, dim), as the backend holds them, or None."""
        windows = self._windows.get(item_id)
        if windows is None:
            return None
        if windows == 1:  # most items: no key arithmetic, no stacking
            one = self.backend.get(int(item_id))
            return None if one is None else np.asarray(one, dtype=np.float32).reshape(1, -1)
        found = [self.backend.get(int(key)) for key in keys_of(item_id, windows)]
        return np.stack([v for v in found if v is not None]).astype(np.float32)

    def vectors_of(self, item_ids: list[int]) -> list[Vectors | None]:
        """`vectors` of each of ``item_ids``, read with one batch lookup of the backend."""
        keys: list[int] = []
        spans: list[tuple[int, int]] = []
        for item_id in item_ids:
            windows = self._windows.get(item_id, 0)
            found = [] if not windows else [item_id] if windows == 1 else keys_of(item_id, windows)
            spans.append((len(keys), len(keys) + len(found)))
            keys.extend(int(k) for k in found)
        if not keys:
            return [None] * len(item_ids)
        held, vectors = self.backend.get_many(np.asarray(keys, dtype=np.int64))
        vectors = np.asarray(vectors, dtype=np.float32)
        row = np.cumsum(held) - 1  # the row of each key held, in ``vectors``
        out: list[Vectors | None] = []
        for start, end in spans:
            rows = row[start:end][held[start:end]]
            out.append(vectors[rows] if len(rows) else None)
        return out

    def best_cosines(self, query: np.ndarray, item_ids: list[int]) -> np.ndarray:
        """Each item's best window cosine to ``query`` (0 for an item without vectors),
        read with one batch lookup of the backend."""
        keys: list[int] = []
        owner: list[int] = []
        for position, item_id in enumerate(item_ids):
            windows = self._windows.get(item_id)
            if not windows:
                continue
            found = [item_id] if windows == 1 else keys_of(item_id, windows).tolist()
            keys.extend(found)
            owner.extend([position] * len(found))
        out = np.full(len(item_ids), -np.inf, dtype=np.float32)
        if keys:
            held, vectors = self.backend.get_many(np.asarray(keys, dtype=np.int64))
            sims = np.asarray(vectors, dtype=np.float32) @ np.asarray(query, dtype=np.float32)
            np.maximum.at(out, np.asarray(owner, dtype=np.int64)[held], sims.reshape(-1))
        out[np.isneginf(out)] = 0.0
        return out

    def upsert(self, item_id: int, vectors: np.ndarray) -> None:
        """Set the item's vectors: (dim,) for one, (n, dim) for several (replaces what it had)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim == 1:
            vectors = vectors[None, :]
        if vectors.ndim != 2 or vectors.shape[1] != self.dim or not 0 < len(vectors) <= WINDOWS:
            raise ValueError(
                f"vectors of item {item_id} have shape {vectors.shape}, expected (n, {self.dim})"
            )
        if not self.rule.usable(vectors).all():
            self.remove(item_id)  # as if it had none: recall embeds it again
            self.skipped.add(item_id)
            warn_skipped(self.kind, [item_id])
            return
        self.skipped.discard(item_id)
        old = self._windows.get(item_id, 0)
        if old > len(vectors):
            self.backend.remove(keys_of(item_id, old)[len(vectors) :])
            self._journal(keys_of(item_id, old)[len(vectors) :], None)
        self.backend.add(keys_of(item_id, len(vectors)), vectors)
        self._journal(keys_of(item_id, len(vectors)), vectors)
        self._windows[item_id] = len(vectors)
        self._rows += len(vectors) - old
        if old != len(vectors):
            self.version += 1
            self._maybe_switch()

    def _maybe_switch(self) -> None:
        """``auto``, ``hnsw``: move to the backend the size now calls for. To a graph, with
        ``defer`` (see `load_rows`): built in the background (`DeferredBuild`, exact
        meanwhile); else now."""
        if not self.choice.sized or self.choice.kind(self._rows) == self.backend.kind:
            return
        if self.build is not None:
            return  # an hnsw graph is on its way
        if self._defer and self.choice.kind(self._rows) == "hnsw":
            self.build = DeferredBuild(self.choice, self.dim, self._rows, self._saved)
            return
        fresh = self.choice.make(self.dim, self._rows)
        keys = self.backend.ids()
        for start in range(0, len(keys), LOAD_BATCH):
            part = keys[start : start + LOAD_BATCH]
            found = [self.backend.get(int(key)) for key in part]
            fresh.add(part, np.stack([v for v in found if v is not None]))
        self.backend = fresh

    def remove(self, item_id: int) -> None:
        self.skipped.discard(item_id)
        windows = self._windows.pop(item_id, None)
        if windows is None:
            return
        self.backend.remove(keys_of(item_id, windows))
        self._journal(keys_of(item_id, windows), None)
        self._rows -= windows
        self.version += 1

    def _journal(self, keys: Ids, vectors: Vectors | None) -> None:
        """Keep a change for the graph being built (replayed on it before it takes over)."""
        if self.build is not None:
            self.build.journal.append((keys, None if vectors is None else vectors.copy()))

    def adopt_build(self) -> bool:
        """If the background graph is built, replay the changes made since and serve from it.

        Call from the index's owner (serialised with its other calls), never from the
        building thread. True when the graph took over.
        """
        build = self.build
        if build is None or build.graph is None:
            return False
        graph = build.graph
        for keys, vectors in build.journal:
            if vectors is None:
                graph.remove(keys)
            else:
                graph.add(keys, vectors)
        self.backend = graph
        self.build = None
        trace.event(ACTOR, "vector_index_ready", backend=graph.kind, rows=self._rows)
        return True

    def load_rows(
        self,
        rows: Iterable[tuple[int, bytes]],
        count: int,
        saved: Path | None = None,
        defer: bool = False,
    ) -> int:
        """Replace the contents with up to ``count`` (item id, float32 bytes) rows, an item's
        windows in any order; the backend is chosen for ``count`` vectors (`IndexChoice`).
        Rows of another length or type, and items with a vector `ValueRule` refuses,
        are left out (``skipped``; one warning). Returns the rows loaded.

        ``saved``: where an hnsw graph is kept between starts. If one fits, it is
        loaded and reconciled with ``rows`` (the table is the truth: ids it lacks are
        removed, missing or changed vectors upserted) instead of built from scratch;
        a graph built here is saved there (see the module doc).

        ``defer``: when an hnsw graph of at least `DEFER_MIN_ROWS` rows would have to be
        built, load the rows into an
        exact index instead (seconds, not minutes) and leave a `DeferredBuild` in
        ``self.build``: the owner builds the graph in the background
        (`DeferredBuild.run`, from its own snapshot of the table) and calls
        `adopt_build`, which replays the changes made meanwhile; searches are exact
        until then.
        """
        self.backend = self.choice.make(self.dim, count)
        self._windows = {}
        self._rows = 0
        self.version += 1
        self.build = None
        self.skipped = set()
        self._defer, self._saved = defer, saved
        graph = self.backend if isinstance(self.backend, HnswVectors) else None
        if graph is not None and saved is not None and graph.load(saved):
            counts = reconcile_batches(graph, self._batches(rows, count))
            self._drop_skipped()
            trace.event(ACTOR, "vector_index_loaded", path=str(saved), rows=self._rows, **counts)  # type: ignore[arg-type]  # its keys are added/updated/removed, never `level`
            if any(counts.values()):
                _save(graph, saved)  # the next start then has less to put right
            return self._rows
        if graph is not None and defer and count >= DEFER_MIN_ROWS:
            self.backend = make_index("exact", self.dim, "cos")
            self.build = DeferredBuild(self.choice, self.dim, count, saved)
            graph = None
        reserve = getattr(self.backend, "reserve", None)
        if reserve is not None:
            reserve(count + 1024)
        for keys, batch in self._batches(rows, count):
            self.backend.add(keys, batch)
        self._drop_skipped()
        if graph is not None and saved is not None and self._rows >= SAVE_MIN_ROWS:
            _save(graph, saved)
        return self._rows

    def _drop_skipped(self) -> None:
        """Leave out, whole, the items a load found an unusable vector of (one warning)."""
        if not self.skipped:
            return
        for item_id in self.skipped:
            windows = self._windows.pop(item_id, 0)
            if windows:
                self.backend.remove(keys_of(item_id, windows))
                self._rows -= windows
        warn_skipped(self.kind, self.skipped)

    def _batches(
        self, rows: Iterable[tuple[int, bytes]], count: int
    ) -> Iterator[tuple[Ids, Vectors]]:
        """``rows`` as (keys, vectors) batches, counting each item's windows on the way
        (the items of unusable rows go to ``skipped``)."""
        nbytes = self.dim * 4
        keys = np.zeros(LOAD_BATCH, dtype=np.int64)
        batch = np.zeros((LOAD_BATCH, self.dim), dtype=np.float32)
        filled = 0
        for item_id, blob in rows:
            if self._rows >= count:
                continue
            if not _blob(blob, nbytes):
                self.skipped.add(item_id)
                continue
            window = self._windows.get(item_id, 0)
            if window >= WINDOWS:
                continue
            self._windows[item_id] = window + 1
            keys[filled] = item_id if window == 0 else EXTRA_BASE + item_id * WINDOWS + window
            batch[filled] = np.frombuffer(blob, dtype=np.float32)
            filled += 1
            self._rows += 1
            if filled == LOAD_BATCH:
                yield _checked((keys.copy(), batch.copy()), self.rule, self.skipped)
                filled = 0
        if filled:
            yield _checked((keys[:filled].copy(), batch[:filled].copy()), self.rule, self.skipped)

    def search(self, query: np.ndarray, k: int, allowed: Mask | None = None) -> tuple[Ids, Scores]:
        """The ``k`` best items (int64 ids, distinct) and their cosines (float32), best first.

        An item's score is the best cosine of its windows. ``allowed``: a
        boolean array indexed by item id; ids beyond its end, or False in it,
        are skipped.
        """
        empty = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        if not self._windows or k <= 0:
            return empty
        k = min(k, len(self._windows))
        multi = self._rows > len(self._windows)  # some item has several windows
        keyed = None if allowed is None else _ItemFilter(allowed, self._windows)
        if keyed is not None and keyed.count() == 0:
            return empty
        take = 2 * k if multi else k
        while True:
            keys, scores = self.backend.search(query, min(take, self._rows), keyed)
            items = item_of(keys)
            if not multi:
                return items.copy(), scores.astype(np.float32)
            _, first = np.unique(items, return_index=True)
            if len(first) >= k or take >= self._rows:
                first = np.sort(first)[:k]
                return items[first].copy(), scores[first].astype(np.float32)
            take *= 2

    def stats(self) -> dict[str, StatValue]:
        return self.backend.stats()
