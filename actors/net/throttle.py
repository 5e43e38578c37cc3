"""A log line's rate limit for events a client can repeat at will (refusals, evictions).

A flood must not flood the log and stderr too, however fast the machine serves it: the
first `first` events are logged one by one, then at most one line every `every`
seconds, carrying the running count (so the total is never lost, only the lines).
"""

from __future__ import annotations

import time
from collections.abc import Callable

FIRST = 10
EVERY = 10.0


class Throttle:
    """``due()`` counts one event and says whether this one is to be logged."""

    __slots__ = ("first", "every", "count", "_clock", "_last")

    def __init__(
        self, first: int = FIRST, every: float = EVERY, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.first = first
        self.every = every
        self.count = 0
        self._clock = clock
        self._last = float("-inf")

    def due(self) -> bool:
        self.count += 1
        if self.count <= self.first:
            return True
        now = self._clock()
        if now - self._last >= self.every:
            self._last = now
            return True
        return False
