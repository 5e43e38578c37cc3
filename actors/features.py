"""The features of a full server, in supervision order (see ``supervisors.app``).

Each feature module exposes a ``FEATURE`` object with ``name``, ``setup(app)``
and ``children(app)``. Order matters: the root supervisor is rest_for_one, so a
feature's actors come after those they use.
"""

from __future__ import annotations

import importlib

FEATURE_MODULES = [
    "memtrio.actors.status",
    "memtrio.actors.store.feature",
    "memtrio.actors.kg.feature",
    "memtrio.actors.embedder.feature",
    "memtrio.actors.ranker.feature",
    "memtrio.actors.code.feature",
]


def all_features() -> list:
    return [importlib.import_module(name).FEATURE for name in FEATURE_MODULES]
