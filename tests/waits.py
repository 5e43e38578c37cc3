"""Waiting in a test for something another process or thread does: poll a condition.

A fixed real-clock sleep ("the server has surely started by now") is too short on a busy
machine and too long on an idle one. A test that waits for another process (a server's
log line, its runtime file, a child restarted) polls the condition instead, with a
deadline, through the two functions here; in-process waits use an event or trio's
virtual clock. The tests' other real-clock sleeps are fixed waits that need real time
to pass in another process (idle longer than a timeout, memory given back);
tests/test_architecture.py counts them all and keeps the count from growing.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable

import trio

POLL = 0.02
"""Seconds between two looks at the condition."""


async def until(
    condition: Callable[[], object | Awaitable[object]], timeout: float, every: float = POLL
) -> None:
    """Return once ``condition()`` (a function, or a coroutine function) is truthy.

    Error handling: raises `trio.TooSlowError` after ``timeout`` seconds.
    """
    with trio.fail_after(timeout):
        while True:
            held = condition()
            if inspect.isawaitable(held):
                held = await held
            if held:
                return
            await trio.sleep(every)


def until_sync(condition: Callable[[], object], timeout: float, every: float = POLL) -> bool:
    """Block (outside trio) until ``condition()`` is true: True, or False after ``timeout``
    seconds (the caller says what failed)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(every)
    return True
