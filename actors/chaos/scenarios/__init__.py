"""The chaos scenarios, one module per kind of fault; each scenario takes a `Run` and fills its
`Outcome`.

- `anchors`: ``stale-refresh-crash``, the parser worker dies during a code anchor's status
  check (nothing lost, statuses recomputed on the next call);
- `crashes`: actors crash at injected fault points under load (and with the official SDK client);
- `kills`: the process dies (kill -9, an exit right before COMMIT) in the middle of writes;
- `vectors`: kill -9 in the middle of vector_batch_upsert bursts (the vector table and index),
  and ``poisoned-vector-row`` (values no float32 holds through the tools, unusable rows written
  into the file: a restart serves, reports them, and the good vectors answer);
- `disk`: a held write lock, a full disk, a read-only home;
- `malformed`: malformed JSON-RPC lines and wrong tool arguments;
- `security`: hostile ``memtrio import`` files and a hostile Git checkout;
- `storms`: restart storms, until the supervisors give up;
- `transports`: a real ``memtrio serve`` (HTTP, TCP, attached ``memtrio mcp`` children)
  whose clients misbehave or whose process dies: ``net-drop-resume`` (HTTP POST
  streams cut after the priming event and resumed with ``Last-Event-ID``: each reply
  exactly once), ``net-clients-vanish`` (TCP and HTTP clients dropping their
  connections mid-call, round after round, while other sessions write: the live
  connections come back to the survivors), ``net-handler-crash`` (one TCP and one
  HTTP connection's Session crash, ``session.dispatch:<connection id>``, while 10+
  other sessions write unharmed), ``net-owner-killed`` (``kill -9`` of a serve
  started by hand under children attached with ``attach = "existing"``: each exits 1
  with the gone-away line, the stale runtime file is handled, a restarted serve takes
  new children), ``owner-killed-reattach`` (``kill -9`` of the owner the first of
  three children started, mid-burst: each child serves again from a new owner within
  5 s, its calls in flight answered "not acknowledged, retry"; the last owner exits
  on its own after its idle time), ``net-connection-flood`` (1,000
  connections that never authenticate against a serve with RLIMIT_NOFILE 400: an
  authorised client's pings all succeed, attached sessions keep writing, the pending
  connections are gone once the flood ends).
- `owners`: ``owner-cannot-start``, a ``memtrio mcp`` child whose owner cannot start
  (a newer or damaged store, a full disk, a hostile ``run/`` or ``logs/``, an older
  runtime file): answered within 10 s, served or refused in one line, at most 3 owners;
- `coherence`: ``recall-other-process``, a second server forgets, remembers and updates
  memories interleaved with the first's own writes: the first's recall finds every memory
  the other wrote and none it forgot, and agrees with a fresh server's recall;
- `postgres`: a shared PostgreSQL store (``MEMTRIO_CHAOS_PG_URL``, else a private
  ``pgserver``, else skipped): ``pg-kill9-burst`` (one of two servers on one database
  killed mid-burst), ``pg-restart-burst`` (PostgreSQL stopped and restarted mid-burst),
  ``pg-migrate-race`` (four processes migrating a fresh database at once).

``QUICK`` is what ``memtrio chaos --quick`` runs (CI, under 3 minutes on two
cores); ``FULL`` is the development matrix (``tools/chaos.py``). Scenarios run
in the order listed.
"""

from __future__ import annotations

from ..harness import Scenario
from .anchors import stale_refresh_crash
from .coherence import recall_other_process
from .crashes import (
    commit_fault,
    crash_code_workers,
    crash_embedder,
    crash_everything,
    crash_maintenance,
    crash_ranker,
    crash_reader,
    crash_session,
    crash_store,
    crash_writer,
    sdk_client_crashes,
)
from .disk import disk_full, readonly_home, sqlite_busy, sqlite_full
from .flood import net_connection_flood
from .kills import exit_at_commit, kill9_bursts, kill9_embeddings
from .malformed import run_malformed
from .owners import owner_cannot_start
from .postgres import pg_kill9_burst, pg_migrate_race, pg_restart_burst
from .security import hostile_checkout, import_limits
from .storms import storm_embedder, storm_session, storm_store
from .transports import (
    net_clients_vanish,
    net_drop_resume,
    net_handler_crash,
    net_owner_killed,
    owner_killed_reattach,
)
from .vectors import kill9_vectors, poisoned_vector_row

QUICK: dict[str, Scenario] = {
    "crash-reader": crash_reader,
    "crash-session": crash_session,
    "crash-writer": crash_writer,
    "crash-store": crash_store,
    "commit-fault": commit_fault,
    "crash-embedder": crash_embedder,
    "crash-code-workers": crash_code_workers,
    "stale-refresh-crash": stale_refresh_crash,
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
    "net-drop-resume": net_drop_resume,
    "net-clients-vanish": net_clients_vanish,
    "net-handler-crash": net_handler_crash,
    "net-owner-killed": net_owner_killed,
    "poisoned-vector-row": poisoned_vector_row,
    "net-connection-flood": net_connection_flood,
    "owner-killed-reattach": owner_killed_reattach,
    "owner-cannot-start": owner_cannot_start,
    "recall-other-process": recall_other_process,
    # A shared PostgreSQL store (skipped without one; a few seconds each):
    "pg-kill9-burst": pg_kill9_burst,
    "pg-restart-burst": pg_restart_burst,
    "pg-migrate-race": pg_migrate_race,
}

FULL: dict[str, Scenario] = {
    **QUICK,
    "crash-ranker": crash_ranker,
    "crash-maintenance": crash_maintenance,
    "crash-everything": crash_everything,
    "storm-embedder": storm_embedder,
    "kill9-embeddings": kill9_embeddings,
    "kill9-vectors": kill9_vectors,  # ~16 s even in --quick (server starts): FULL only
    "sdk-client-crashes": sdk_client_crashes,
}

# Generous per-scenario time budgets (seconds); a scenario over budget fails.
BUDGET_QUICK = 90.0
BUDGET_FULL = 300.0
