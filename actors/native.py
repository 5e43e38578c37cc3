"""Native libraries whose settings and load order matter, loaded here first.

- **igraph and OpenMP.** igraph's PageRank uses OpenMP; on a busy 2-core
  machine (onnxruntime threads, other processes) idle OpenMP threads spinning
  for work turned a 3 ms PPR into 100+ ms outliers. The graphs the ranker
  builds are small: one thread, waiting passively. OpenMP reads these
  settings when its library loads, so they are set before igraph is imported.
- **usearch before onnxruntime.** usearch 2.26's compiled module, loaded
  before onnxruntime's, makes onnxruntime's own import crash the process
  (SIGSEGV in libstdc++'s ``codecvt`` while its static initialisers run);
  with igraph's libraries loaded first it does not. So the hnsw backend
  imports this module before usearch: every server loads igraph anyway (the
  ranker), and a process that needs only the vectors pays igraph's import
  (about 50 ms). ``tests/test_vector_index.py`` checks the order in a fresh
  process.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import igraph  # noqa: E402 - after the OpenMP settings above

__all__ = ["igraph"]
