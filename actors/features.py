"""The features of a full server, in supervision order (the composition root,
``supervisors.app``, runs them).

Order matters: the root supervisor is rest_for_one, so a feature's actors come
after those they use.
"""

from __future__ import annotations

from .code.feature import FEATURE as CODE
from .embedder.feature import FEATURE as EMBEDDER
from .kg.feature import FEATURE as GRAPH
from .ranker.feature import FEATURE as RANKER
from .status import FEATURE as STATUS
from .store.feature import FEATURE as STORE

ALL_FEATURES = (STATUS, STORE, GRAPH, EMBEDDER, RANKER, CODE)
