"""Whether an in-memory cache of the store has been told of every write since it read the store.

The store keeps a change counter (`Snapshot.change_mark`): schema triggers move it on
every write to a table a cache reads, whoever writes (this server, another server on the
same home, the CLI, a hand edit), and it never goes down; so a delete followed by an
insert, an update of a text, or a re-embedding moves it where row counts and highest ids
stay the same.

The `Store` handle records the marks of the writes whose change records it handed to its
listeners (`ToldMarks`): its own commits, and on PostgreSQL the commits other processes
announced (`pg.notify`). A cache remembers the mark its rows were read at (`CacheMark`);
when it next looks at the store it compares the mark then:

- the same mark, or every mark since was told: the change records it was given are the
  whole story (`CURRENT`);
- a mark nobody told it about: another process wrote without telling, so it reloads
  (`STALE`). On PostgreSQL a notification may still be on its way: a write stays untold
  for up to ``grace`` seconds before it counts as stale (`WAITING`), so peers that
  announce their writes do not make each other reload. A cache that is `WAITING` does
  not answer from what it holds: it waits for the notification (`CacheMark.wait_told`,
  no longer than the rest of the grace) and looks again, so a write another process
  committed before a call is always seen by that call.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Literal

import trio

# Spans kept: beyond this the oldest are dropped (a cache that old reloads, which is safe).
MAX_SPANS = 1024
# PostgreSQL: how long a write may stay untold (its notification on the way) before a
# cache reloads for it.
NOTIFY_GRACE = 1.0  # seconds

Coherence = Literal["current", "waiting", "stale"]
CURRENT: Coherence = "current"
WAITING: Coherence = "waiting"
STALE: Coherence = "stale"


class ToldMarks:
    """The change marks of the writes told to the store's listeners, as spans ``(lo, hi]``.

    `add` runs in the trio thread (after a commit, or a notification); `covers` may run in
    a cache's worker thread at the same time: the list of spans is replaced, never edited.
    """

    def __init__(self) -> None:
        self._spans: list[tuple[int, int]] = []  # sorted, disjoint, not adjacent
        self._added = trio.Event()  # set (and replaced) at each `add`

    def add(self, lo: int, hi: int) -> None:
        """The writes that moved the mark from ``lo`` to ``hi`` were told."""
        if hi <= lo:
            return
        spans = list(self._spans)
        i = bisect.bisect_left(spans, (lo, hi))
        # Merge with the spans it touches or overlaps, on either side.
        while i > 0 and spans[i - 1][1] >= lo:
            i -= 1
            lo, hi = min(lo, spans[i][0]), max(hi, spans[i][1])
            del spans[i]
        while i < len(spans) and spans[i][0] <= hi:
            lo, hi = min(lo, spans[i][0]), max(hi, spans[i][1])
            del spans[i]
        spans.insert(i, (lo, hi))
        self._spans = spans[-MAX_SPANS:]
        added, self._added = self._added, trio.Event()
        added.set()

    async def wait_covers(self, lo: int, hi: int, timeout: float) -> bool:
        """Wait (in the trio thread) until every write from mark ``lo`` to ``hi`` was told,
        at most ``timeout`` seconds; whether it was."""
        with trio.move_on_after(max(timeout, 0.0)):
            while not self.covers(lo, hi):
                await self._added.wait()
        return self.covers(lo, hi)

    def covers(self, lo: int, hi: int) -> bool:
        """Whether every write from mark ``lo`` to ``hi`` (``lo < hi``) was told."""
        if hi <= lo:
            return False
        spans = self._spans
        i = bisect.bisect_right(spans, (lo, float("inf"))) - 1
        return i >= 0 and spans[i][0] <= lo and spans[i][1] >= hi


@dataclass
class CacheMark:
    """The mark a cache's rows were read at (``base``), and since when a write past it has
    gone untold (``untold_since``, monotonic seconds)."""

    base: int
    untold_since: float | None = None

    def check(self, mark: int, told: ToldMarks | None, grace: float, now: float) -> Coherence:
        """Whether the cache, with the change records it was given, is current at ``mark``
        (the store's, read in the transaction the cache is about to use); when it is,
        ``base`` moves to ``mark``. ``told``: the store handle's (None: nothing is told,
        every write is another process's); ``grace``: see the module's docstring."""
        if mark == self.base or (
            mark > self.base and told is not None and told.covers(self.base, mark)
        ):
            self.base = mark
            self.untold_since = None
            return CURRENT
        if mark > self.base and grace > 0:
            if self.untold_since is None:
                self.untold_since = now
            if now - self.untold_since < grace:
                return WAITING
        return STALE

    async def wait_told(self, told: ToldMarks, mark: int, grace: float, now: float) -> bool:
        """While `WAITING` at the store's ``mark``: wait until the writes up to it were told,
        no longer than the rest of ``grace`` (``now``: monotonic seconds, as for `check`);
        whether they were. The caller then checks again."""
        since = self.untold_since if self.untold_since is not None else now
        return await told.wait_covers(self.base, mark, max(0.0, grace - (now - since)))
