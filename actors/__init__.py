"""memtrio's actors.

**BLAS threads.** Importing the package sets ``OPENBLAS_NUM_THREADS=1`` (unless
it is set): numpy's OpenBLAS reads it once, when numpy is first imported, and
every actor module imports numpy after this. A recall makes dozens of small
matrix products (cosines of a hundred candidates, the entities' exact search,
maximal marginal relevance); with a second BLAS thread each one is handed to it
and back, and on a busy 2-core machine that thread's waiting cost ten times the
product itself (about 20 ms of CPU a recall instead of 2, `tools/profile_recall.py`).
The results are the same: a thread computes whole rows.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
