"""What a store backend is: one object, chosen once (`backends.load`), with its openers,
its ``shown`` name and a frozen set of `Capability`.

A `Backend` is what the rest of the store holds instead of a URL: the `writer.Store`
handle, the `reader.Reader`, the `direct.Direct` store and the store feature ask it to
open connections, to see a connection through the storage interfaces (`tx_maker`), and
whether it can do something (`has`), never which database it is. Each backend's own
subclass lives in its package (`sqlite.backend`, `pg.backend`); a PostgreSQL backend
imports its driver only when it opens something, so a SQLite user needs no psycopg.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from . import connections
from .interfaces import StoreTx
from .messages import Change


class Capability(enum.Enum):
    """What a backend can do that another may not: code and tests ask `Backend.has`."""

    FILE_UPKEEP = "file_upkeep"
    """The store is a file memtrio keeps itself: WAL checkpoints, vacuum, full-text index
    merges (the maintenance actor and its status section; `Upkeep`'s maintenance steps)."""
    ANNOUNCES_WRITES = "announces_writes"
    """A commit is announced to the store's other processes (PostgreSQL's ``NOTIFY``), and a
    listener keeps this process's caches current with theirs (`Backend.change_listener`)."""
    WHOLE_GRAPH_READS = "whole_graph_reads"
    """A reader may hold the whole memory/entity/relation graph in memory
    (`Snapshot.keeps_graph`): the store is local to one machine."""
    STORED_VECTOR_INDEX = "stored_vector_index"
    """The store keeps a vector index of its own (pgvector): `Snapshot.nearest_memories`
    answers from it."""
    ANY_BYTES_IN_COLUMNS = "any_bytes_in_columns"
    """A column may hold a value of another type, or text that is not UTF-8 (SQLite's
    dynamic typing): readers must survive such rows."""
    EXACT_TERM_COUNTS = "exact_term_counts"
    """The full-text index counts the documents of a term exactly (PostgreSQL's planner
    estimates them)."""
    RANKS_BY_PROXIMITY = "ranks_by_proximity"
    """Full-text ranking scores the query's words close together above the same words
    scattered (SQLite's FTS5; PostgreSQL's ``ts_rank`` does not score proximity)."""


# How a committed write tells the store's other processes what changed:
# ``announce(conn, origin, changes, (mark before, mark after))``, run inside the write
# transaction (the marks: `Snapshot.change_mark` before and after the write).
Announce = Callable[[Any, str, Sequence[Change], tuple[int, int]], None]

# A change listener: ``listen(ctx, store, task_status=...)`` keeps ``store``'s caches
# current with the other processes' writes until cancelled.
Listen = Callable[..., Awaitable[None]]


class DriverMissing(connections.StoreUnavailable):
    """A backend was asked for whose driver cannot be imported: exit code 2, as for any
    configuration that a restart will not fix."""

    code = 2


class Backend(ABC):
    """One store backend: where the store is, how to open it, what it can do.

    ``name`` (``sqlite``, ``postgresql``) is for messages and the trace, never to branch
    on: ask `has` for a `Capability` instead.
    """

    name: str
    capabilities: frozenset[Capability]

    def has(self, capability: Capability) -> bool:
        return capability in self.capabilities

    @property
    @abstractmethod
    def shown(self) -> str:
        """Where the store is, for messages and logs (a URL without its password)."""

    @property
    def configured_name(self) -> str:
        """The configured store, as a report names it (``memtrio migrate``)."""
        return self.shown

    def register_secrets(self) -> None:
        """Hide the passwords of this store's address from every later message and log
        line of this process (`dsn.register`); nothing for an address without any."""
        return None

    @abstractmethod
    def check(self, origin: str) -> None:
        """`DriverMissing` or `ConfigError` (exit code 2) unless memtrio can use this
        store's address (``origin`` names where it came from, for the message)."""

    @abstractmethod
    def tx_maker(self) -> Callable[[Any], StoreTx]:
        """How a connection of this backend is seen through the storage interfaces
        (`DriverMissing` when its driver cannot be imported)."""

    @abstractmethod
    def open_writer(
        self,
        *,
        busy_timeout_ms: int,
        durability: str,
        tuning: connections.Tuning = connections.DEFAULT_TUNING,
    ) -> connections.StoreConnection:
        """The StoreWriter's connection, schema migrated (`connections.StoreUnavailable` if it
        cannot be). ``durability`` and ``tuning`` are SQLite's: another backend ignores them."""

    @abstractmethod
    def open_read_pool(
        self,
        size: int,
        busy_timeout_ms: int,
        tuning: connections.Tuning = connections.DEFAULT_TUNING,
    ) -> connections.ReadPool: ...

    @abstractmethod
    def open_reader(
        self, busy_timeout_ms: int, tuning: connections.Tuning = connections.DEFAULT_TUNING
    ) -> connections.StoreConnection:
        """One read-only connection (the ranker's own, `direct`'s)."""

    @abstractmethod
    def same_store(self, other: Backend) -> bool:
        """Whether ``other`` is this very store (``memtrio migrate`` refuses to copy onto it)."""

    def announcer(self) -> Announce | None:
        """How a commit tells the other processes of its changes (`ANNOUNCES_WRITES`), or
        None: they find the change mark moved (`coherence`)."""
        return None

    def change_listener(self) -> Listen | None:
        """The actor that keeps a store handle's caches current with the other processes'
        writes (`ANNOUNCES_WRITES`), or None."""
        return None
