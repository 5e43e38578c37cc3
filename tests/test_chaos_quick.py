"""`memtrio chaos --quick` in the default suite (so CI runs it), and the harness's own checks."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import zygote
from mcp_client import run_cli
from memtrio.actors.chaos import runner
from memtrio.actors.chaos.checks import check_store
from memtrio.actors.chaos.client import LAUNCHER_ENV
from memtrio.actors.chaos.harness import Outcome
from memtrio.actors.chaos.scenarios.malformed_cases import bad_values, tool_cases
from test_pg_chaos import PG_SCENARIOS

# The quick set's PostgreSQL scenarios run in tests/test_pg_chaos.py, on the session's
# server and with assertions of their own; here they would only run a second time
# (about 15 s, each on a private server it starts). The connection flood is
# tests/test_connection_flood.py's, on every transport (about 10 s more here).
ELSEWHERE = (*PG_SCENARIOS, "net-connection-flood")


# The quick set runs in this many parts, one CLI run each, so that a parallel run
# (tests/turns.py) spreads its minute over both workers.
PARTS = 3


def quick_here() -> list[str]:
    here = [n for n in runner.select(None, quick=True) if n not in ELSEWHERE]
    assert len(here) == len(runner.select(None, quick=True)) - len(ELSEWHERE)
    return here


def launcher() -> dict[str, str]:
    """The harness's `memtrio mcp` servers forked by this worker's zygote (`zygote`): the
    same commands without an interpreter's start each (a part starts about twenty). Those
    that a wrapper or a ``preexec_fn`` must reach, and the ``serve`` servers whose pid the
    harness compares with their status, it still starts itself."""
    prefix = zygote.command([])
    return {LAUNCHER_ENV: json.dumps(prefix)} if zygote.forks(prefix) else {}


@pytest.mark.parametrize("part", range(PARTS))
def test_memtrio_chaos_quick_passes(tmp_path: Path, part: int) -> None:
    here = quick_here()[part::PARTS]
    chosen = [arg for name in here for arg in ("--scenario", name)]
    proc = run_cli(
        "chaos",
        "--quick",
        "--seed",
        "1",
        "--json",
        "--keep",
        str(tmp_path),
        *chosen,
        env=launcher(),
        timeout=400,
    )
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = {"scenarios": []}
    failed = [s for s in report["scenarios"] if not s["ok"]]
    assert proc.returncode == 0, (failed or proc.stdout[-4000:], proc.stderr[-2000:])
    totals = report["totals"]
    assert [s["name"] for s in report["scenarios"]] == here
    assert totals["lost"] == 0 and totals["failed"] == 0
    assert totals["faults"] > 3 and totals["acked"] > 30, totals
    by_name = {s["name"]: s for s in report["scenarios"]}
    # What each scenario must have done, not only passed (those of this part).
    musts = {
        "kill9-bursts": lambda s: s["acked"] > 0,
        "storm-session": lambda s: s["restarts"] >= 30,
        "malformed": lambda s: s["malformed"] > 200,
    }
    # The transport scenarios injected their faults and checked acknowledged writes.
    transports = (
        "net-drop-resume",
        "net-clients-vanish",
        "net-handler-crash",
        "net-owner-killed",
        "owner-killed-reattach",
    )
    for name in transports:
        musts[name] = lambda s: s["faults"] > 0 and s["acked"] > 0
    for name, must in musts.items():
        if name in by_name:
            assert must(by_name[name]), by_name[name]


def test_the_quick_parts_cover_the_quick_set_once() -> None:
    here = quick_here()
    parts = [here[part::PARTS] for part in range(PARTS)]
    assert sorted(name for part in parts for name in part) == sorted(here)
    assert all(parts)


def _store(tmp_path: Path) -> Path:
    from memtrio.actors.store.sqlite import db

    path = tmp_path / "memtrio.sqlite"
    db.open_write_connection(path, busy_timeout_ms=1000, durability="normal").close()
    return path


def _insert(path: Path, content: str) -> int:
    conn = sqlite3.connect(path, isolation_level=None)
    cur = conn.execute(
        "INSERT INTO memories (content, created_at, updated_at) VALUES (?, 0, 0)", (content,)
    )
    conn.close()
    return int(cur.lastrowid or 0)


def test_store_check_finds_lost_changed_and_half_written_rows(tmp_path: Path) -> None:
    path = _store(tmp_path)
    kept = _insert(path, "kept")
    _insert(path, "refused but present")
    result = check_store(path, {kept: "kept", 999: "never stored"}, ["refused but present"])
    assert result.lost == 1 and result.phantom == 1
    assert any("999" in v for v in result.violations)
    ok = check_store(path, {kept: "kept"}, ["absent"])
    assert ok.lost == 0 and ok.phantom == 0 and not ok.violations


def test_store_check_finds_fts_and_vector_disagreement(tmp_path: Path) -> None:
    path = _store(tmp_path)
    mid = _insert(path, "alpha")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("INSERT INTO vectors VALUES ('memory', 12345, 'm', 'r', 4, zeroblob(16))")
    conn.execute("INSERT INTO vectors VALUES ('memory', ?, 'm', 'r', 4, zeroblob(8))", (mid,))
    conn.execute("DELETE FROM memories_fts")  # the index loses the row
    conn.close()
    result = check_store(path, {mid: "alpha"}, embeddings=True)
    text = " | ".join(result.violations)
    assert "vectors without their row" in text
    assert "not dim float32" in text
    assert "FTS" in text


def test_outcome_errors_expectation() -> None:
    exact = Outcome("x", errors_expected=3, errors_seen=2, errors_exact=True)
    exact.check_errors()
    assert not exact.ok
    minimum = Outcome("y", errors_expected=3, errors_seen=5)
    minimum.check_errors()
    assert minimum.ok


def test_wrong_values_come_from_the_schema() -> None:
    schema = {"type": "integer", "minimum": 1, "maximum": 100}
    labels = dict(bad_values(schema, {}))
    assert labels["below minimum"] == 0 and labels["above maximum"] == 101
    assert "type integer" not in labels and "type string" in labels
    number = dict(bad_values({"type": "number"}, {}))
    assert "type integer" not in number  # an integer is a valid number
    tool = {
        "name": "t",
        "inputSchema": {
            "type": "object",
            "properties": {
                "q": {"type": "string", "minLength": 1},
                "n": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            },
            "required": ["q"],
        },
    }
    cases = tool_cases(tool)
    assert ("missing q", {}, "q") in cases
    assert any(
        label == "n: type string" and args == {"q": "a", "n": "x"} for label, args, _ in cases
    )


@pytest.mark.parametrize("names", [["nope"], ["crash-reader", "bogus"]])
def test_unknown_scenario_is_refused(names: list[str]) -> None:
    with pytest.raises(ValueError, match="unknown scenario"):
        runner.select(names, quick=True)


def test_chaos_cli_prints_a_line_per_scenario_and_the_table() -> None:
    proc = run_cli("chaos", "--scenario", "commit-fault", "--seed", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith("commit-fault") and "lost 0" in first and first.endswith("ok")
    assert "memtrio chaos (full matrix, --seed 3)" in proc.stdout
    assert "| commit-fault |" in proc.stdout and "| **total: 1 scenario** |" in proc.stdout


def test_store_check_finds_stray_vector_chunks(tmp_path: Path) -> None:
    path = _store(tmp_path)
    mid = _insert(path, "alpha")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("INSERT INTO vectors VALUES ('memory', ?, 'm', 'r', 4, zeroblob(16))", (mid,))
    conn.execute(
        "INSERT INTO vector_chunks VALUES ('memory', ?, 1, 'm', 'r', 4, zeroblob(16))", (mid,)
    )
    assert not check_store(path, {mid: "alpha"}).violations
    conn.execute("INSERT INTO vector_chunks VALUES ('memory', 777, 1, 'm', 'r', 4, zeroblob(16))")
    conn.close()
    assert any("vector chunks" in v for v in check_store(path, {mid: "alpha"}).violations)
