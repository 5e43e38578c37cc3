"""Importing heavy native libraries in worker threads, one import at a time.

A server imports numpy, onnxruntime and igraph only after it has answered
``initialize``, in worker threads: the embedder with its model, the ranker with
its modules (``actors.ranker.feature``). Two threads importing numpy at once
can each hold a module the other needs (CPython locks each module while it
imports): one of them then gets a partly initialised numpy ("cannot import name
... from partially initialized module"). `import_module` takes one
process-wide lock around such an import.
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType

_LOCK = threading.RLock()


def import_module(name: str, package: str | None = None) -> ModuleType:
    """`importlib.import_module` under the process-wide lock (from a worker thread: it
    may take a few hundred milliseconds)."""
    with _LOCK:
        return importlib.import_module(name, package)
