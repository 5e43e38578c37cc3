"""The chaos scenarios, one module per kind of fault; each scenario takes a `Run` and fills its
`Outcome`.

- `crashes`: actors crash at injected fault points under load (and with the official SDK client);
- `kills`: the process dies (kill -9, an exit right before COMMIT) in the middle of writes;
- `vectors`: kill -9 in the middle of vector_batch_upsert bursts (the vector table and index);
- `disk`: a held write lock, a full disk, a read-only home;
- `malformed`: malformed JSON-RPC lines and wrong tool arguments;
- `security`: hostile ``memtrio import`` files and a hostile Git checkout;
- `storms`: restart storms, until the supervisors give up.

``QUICK`` is what ``memtrio chaos --quick`` runs (CI, under 3 minutes on two
cores); ``FULL`` is the development matrix (``tools/chaos.py``). Scenarios run
in the order listed.
"""

from __future__ import annotations

from ..harness import Scenario
from .crashes import (
    commit_fault,
    crash_code_workers,
    crash_embedder,
    crash_everything,
    crash_ranker,
    crash_reader,
    crash_session,
    crash_store,
    crash_writer,
    sdk_client_crashes,
)
from .disk import disk_full, readonly_home, sqlite_busy, sqlite_full
from .kills import exit_at_commit, kill9_bursts, kill9_embeddings
from .malformed import run_malformed
from .security import hostile_checkout, import_limits
from .storms import storm_embedder, storm_session, storm_store
from .vectors import kill9_vectors

QUICK: dict[str, Scenario] = {
    "crash-reader": crash_reader,
    "crash-session": crash_session,
    "crash-writer": crash_writer,
    "crash-store": crash_store,
    "commit-fault": commit_fault,
    "crash-embedder": crash_embedder,
    "crash-code-workers": crash_code_workers,
    "kill9-bursts": kill9_bursts,
    "exit-at-commit": exit_at_commit,
    "malformed": run_malformed,
    "sqlite-busy": sqlite_busy,
    "disk-full": disk_full,
    "sqlite-full": sqlite_full,
    "readonly-home": readonly_home,
    "import-limits": import_limits,
    "storm-session": storm_session,
    "storm-store": storm_store,
    "hostile-checkout": hostile_checkout,
}

FULL: dict[str, Scenario] = {
    **QUICK,
    "crash-ranker": crash_ranker,
    "crash-everything": crash_everything,
    "storm-embedder": storm_embedder,
    "kill9-embeddings": kill9_embeddings,
    "kill9-vectors": kill9_vectors,  # ~16 s even in --quick (server starts): FULL only
    "sdk-client-crashes": sdk_client_crashes,
}

# Generous per-scenario time budgets (seconds); a scenario over budget fails.
BUDGET_QUICK = 90.0
BUDGET_FULL = 300.0
