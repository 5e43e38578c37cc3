"""The PostgreSQL store from the command line: --store, clear errors, migrations, migrate.

Each test gets a fresh database of the session's private PostgreSQL server
(`stores.PgServer`); the commands run as a user runs them (`run_cli`).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import stores
from mcp_client import run_cli
from memtrio.actors.store.pg import schema as pg_schema


@pytest.fixture
def url(pg_server: stores.PgServer) -> str:
    return pg_server.database()


def cli(home: Path, *args: str, url: str | None = None) -> subprocess.CompletedProcess[str]:
    extra = ("--store", url) if url else ()
    return run_cli(*args, *extra, home=home)


def test_every_memory_command_takes_store(home: Path, url: str) -> None:
    assert (
        cli(
            home, "remember", "Deploys run from the release branch", "--entity", "CI", url=url
        ).returncode
        == 0
    )
    assert cli(home, "remember", "Camping gear lives in the shed", url=url).returncode == 0
    found = json.loads(cli(home, "search", "deploying", "--lexical", "--json", url=url).stdout)
    assert [m["content"] for m in found["memories"]] == ["Deploys run from the release branch"]
    stats = json.loads(cli(home, "stats", "--json", url=url).stdout)
    assert stats["memories"] == 2 and stats["entities"] == 1
    doctor = json.loads(cli(home, "doctor", "--json", url=url).stdout)
    assert doctor["schema_version"] == doctor["latest_schema_version"] == pg_schema.LATEST
    assert "vector" in doctor["extensions"] and "pg_trgm" in doctor["extensions"]
    assert doctor["integrity"] == "ok"
    # Nothing went to the home's SQLite file.
    assert not (home / "memtrio.sqlite").exists()


def test_query_syntax_in_user_text_is_plain_words(home: Path, url: str) -> None:
    cli(home, "remember", "The cache's TTL is 5 minutes (not 10) & it is per-user", url=url)
    for query in ["cache's", "TTL & | !minutes", "(not <-> 10):*", "per-user\\", "'''"]:
        done = cli(home, "search", query, "--lexical", "--json", url=url)
        assert done.returncode == 0, (query, done.stderr)
    found = json.loads(
        cli(home, "search", "minutes) | !(cache", "--lexical", "--json", url=url).stdout
    )
    assert len(found["memories"]) == 1


def test_an_unreachable_store_is_one_clear_line_without_the_password(
    home: Path, tmp_path: Path
) -> None:
    url = f"postgresql://team:s3cret@/memtrio?host={tmp_path / 'nowhere'}"
    done = cli(home, "stats", url=url)
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the PostgreSQL store" in lines[0]
    assert "s3cret" not in done.stderr and "team:***@" in lines[0]
    # libpq's keyword form: the password as a query parameter is hidden too.
    keyword = f"postgresql://team@/memtrio?password=s3cret&host={tmp_path / 'nowhere'}"
    done = cli(home, "stats", url=keyword)
    assert done.returncode == 1 and "cannot reach the PostgreSQL store" in done.stderr
    assert "s3cret" not in done.stderr and "password=***" in done.stderr


def test_migrate_copies_sqlite_to_postgresql_and_back_checked(
    home: Path, url: str, tmp_path: Path
) -> None:
    for text in ["first 'quoted' fact", "second fact with 100% and ?", "third"]:
        assert cli(home, "remember", text, "--entity", "Store").returncode == 0
    assert cli(home, "forget", "1").returncode == 0  # a gap in the ids survives the trip
    cli(home, "search", "fact", "--lexical")  # a recall_log row
    there = cli(home, "migrate", "--to", url, "--json")
    assert there.returncode == 0, there.stderr
    report = json.loads(there.stdout)
    assert report["differ"] == [] and report["records"]["memory"]["count"] == 2
    assert report["records"]["recall_log"]["count"] == 1
    back_home = tmp_path / "back"
    back_home.mkdir(mode=0o700)
    back = json.loads(cli(back_home, "migrate", "--from", url, "--json").stdout)
    assert back["records"] == report["records"] and back["differ"] == []
    shown = json.loads(cli(back_home, "show", "3", "--json").stdout)
    assert shown["content"] == "third" and [e["name"] for e in shown["entities"]] == ["Store"]
    # The PostgreSQL copy serves the same store.
    listed = json.loads(cli(home, "list", "--json", url=url).stdout)
    assert sorted(m["id"] for m in listed) == [2, 3]
    again = cli(home, "migrate", "--to", url)
    assert again.returncode == 1 and "the target store is not empty" in again.stderr


def test_a_change_reaches_other_processes_only_when_it_commits(url: str) -> None:
    from memtrio.actors.store.messages import Change
    from memtrio.actors.store.pg import notify
    from memtrio.actors.store.pg.conn import PgConnection

    listener = notify._listen(url)
    writer = PgConnection.open(url)
    try:
        changed = [Change(kind="memory", id=5), Change(kind="entity", id=2, deleted=True)]
        writer.begin_write()
        notify.announce(writer, "here", changed)
        writer.rollback()
        assert notify._wait(listener) == []  # a rolled-back write announces nothing
        writer.begin_write()
        notify.announce(writer, "here", changed, (7, 9))
        writer.commit()
        (payload,) = notify._wait(listener)
        assert notify.parse(payload, "elsewhere") == notify.Notice(changed, (7, 9))
        assert notify.parse(payload, "here").changes == []  # a process ignores its own writes
        many = [Change(kind="memory", id=i) for i in range(2000)]
        reset = notify.parse(notify.payload("here", many, (3, 4)), "elsewhere")
        assert reset == notify.Notice([Change(kind="reset")], (3, 4))
    finally:
        writer.close()
        listener.close()
