"""The features of a full server, in supervision order (the composition root,
``supervisors.app``, runs them).

Order matters: the root supervisor is rest_for_one, so a feature's actors come
after those they use.

The graph tools, the embedder (numpy, onnxruntime), the ranker (numpy, igraph),
the vector tools (numpy, usearch) and the code index (tree-sitter) are
`Deferred`: their modules are imported when they are set up, so a command that
runs only the store (``memtrio list``) never loads them. The embedder and the
ranker load their libraries later still, after ``initialize`` (their features).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..supervisors.context import AppContext, Component, Feature
from .status import FEATURE as STATUS
from .store.feature import FEATURE as STORE


@dataclass(frozen=True)
class Deferred:
    """A feature known by its name until it is set up, then imported by ``load``."""

    name: str
    load: Callable[[], Feature]

    def setup(self, app: AppContext) -> Component:
        return self.load().setup(app)


def _graph() -> Feature:
    from .kg.feature import FEATURE  # the graph tools: not for a command that runs the store only

    return FEATURE


def _embedder() -> Feature:
    from .embedder.feature import FEATURE  # numpy and the model: only when embeddings run

    return FEATURE


def _ranker() -> Feature:
    from .ranker.feature import FEATURE  # numpy and igraph: only when ranking runs

    return FEATURE


def _vectors() -> Feature:
    from .vectors.feature import FEATURE  # the vector tools: numpy only when --vectors is on

    return FEATURE


def _code() -> Feature:
    from .code.feature import FEATURE  # the code index: only when code tools run

    return FEATURE


GRAPH = Deferred("kg", _graph)
EMBEDDER = Deferred("embedder", _embedder)
RANKER = Deferred("ranker", _ranker)
VECTORS = Deferred("vectors", _vectors)
CODE = Deferred("code", _code)

ALL_FEATURES: tuple[Feature, ...] = (STATUS, STORE, GRAPH, EMBEDDER, RANKER, VECTORS, CODE)
