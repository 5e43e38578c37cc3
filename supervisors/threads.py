"""Worker threads the process lets finish before the interpreter exits.

Native code running in a thread when the interpreter finalises can abort the whole
process: onnxruntime loading the model ("terminate called without an active
exception", then SIGABRT) when a client disconnects during start-up, for instance.
A thread body wrapped by `finishing` is tracked, and `settle` (called after the trio
run ends) waits for the ones still running, up to a bound.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Seconds the process waits at exit for such threads (a model load takes about one).
EXIT_SETTLE = 30.0

_RUNNING: set[threading.Event] = set()
_LOCK = threading.Lock()


def finishing(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` as a thread body that `settle` waits for."""

    def run(*args: object) -> T:
        done = threading.Event()
        with _LOCK:
            _RUNNING.add(done)
        try:
            return fn(*args)
        finally:
            done.set()
            with _LOCK:
                _RUNNING.discard(done)

    return run


def settle(timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for the `finishing` bodies still running; whether
    every one has ended."""
    deadline = time.monotonic() + timeout
    with _LOCK:
        pending = list(_RUNNING)
    return all(done.wait(max(0.0, deadline - time.monotonic())) for done in pending)


def freeze_startup() -> None:
    """Move every object made so far (the modules, the parser, the features' tables) out
    of the garbage collector's sight (`gc.freeze`), as long-running servers do after their
    start-up: they live until the process ends anyway.

    The interpreter's exit collects garbage several times while it tears the modules
    down, each time over every object; with the start-up's objects frozen that took
    35 ms instead of 100-140 ms after a short ``memtrio mcp`` session on a quiet 2-core
    machine (and a full collection while serving skips them too). Each CLI command and
    each server pays it once, and the test suite starts thousands of them.
    """
    gc.freeze()
