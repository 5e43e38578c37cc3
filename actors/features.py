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

from ..protocol.tools import Tool
from ..supervisors.context import AppContext, Component, Feature
from .memory.feature import FEATURE as MEMORY
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


def declared_tools() -> list[Tool]:
    """Every tool of every feature, each declared once in its feature's ``tools`` module
    (status: `status.TOOLS`), whatever this configuration enables: what docs/tools.md,
    tools/gen_tools_doc.py, the Inspector table and the README's counts are checked
    against (tests/test_tool_registry.py). Imports every feature: not for a server start."""
    from .code.tools import TOOLS as code
    from .kg.tools import TOOLS as graph
    from .memory.tools import TOOLS as memory
    from .status import TOOLS as status
    from .vectors.tools import TOOLS as vectors

    return [*status, *memory, *graph, *vectors, *code]


GRAPH = Deferred("kg", _graph)
EMBEDDER = Deferred("embedder", _embedder)
RANKER = Deferred("ranker", _ranker)
VECTORS = Deferred("vectors", _vectors)
CODE = Deferred("code", _code)

ALL_FEATURES: tuple[Feature, ...] = (STATUS, STORE, MEMORY, GRAPH, EMBEDDER, RANKER, VECTORS, CODE)
