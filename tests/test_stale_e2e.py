"""Code anchors end to end (issue 33): the official MCP client against ``memtrio mcp`` in a real
Git checkout whose code is edited, renamed, moved and deleted under the memories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gitrepo import git, make_repo
from mcp_client import fails, ok, open_client, run_cli
from memtrio.actors.anchors.anchoring import penalized

RETRY = (
    "class RetryPolicy:\n"
    "    def backoff(self, attempt):\n"
    "        # doubles the delay up to 30 s\n"
    "        return min(30, 2 ** attempt)\n"
    "\n"
    "    def jitter(self):\n"
    "        return 0\n"
)
LOADER = "def load_config(path):\n    with open(path) as f:\n        return f.read()\n"
UTIL = "def helper_one():\n    return 1\n\n\ndef old_name(x):\n    total = x * 40\n    return total + 2\n"
FILES = {"retry.py": RETRY, "config/loader.py": LOADER, "util.py": UTIL}


def statuses(memory: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(a["path"], a["symbol"], a.get("status", "")) for a in memory.get("code", [])]


async def test_anchors_report_changed_moved_deleted_and_update_reanchors(
    home: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    async with open_client(home, cwd=repo) as client:
        explicit = await ok(
            client,
            "remember",
            content="The retry delay doubles, capped at 30 seconds.",
            code=[{"path": "retry.py", "symbol": "RetryPolicy.backoff"}],
        )
        assert statuses(explicit) == [("retry.py", "RetryPolicy.backoff", "fresh")], explicit
        found = await ok(client, "remember", content="Config loading lives in `load_config`.")
        assert statuses(found) == [("config/loader.py", "load_config", "fresh")], found
        renamed = await ok(client, "remember", content="`old_name` returns x * 40 + 2.")
        gone = await ok(client, "remember", content="`RetryPolicy.jitter` is a stub returning 0.")
        assert [a["symbol"] for a in gone["code"]] == ["RetryPolicy.jitter"], gone
        # A bad anchor is refused, naming it, and nothing is stored.
        refused = await fails(
            client, "remember", content="x", code=[{"path": "retry.py", "symbol": "Nope"}]
        )
        assert "Nope" in refused, refused
        counted = await ok(client, "stats")
        assert (counted["memories"], counted["anchors"]) == (4, 4), counted

        # A whitespace- and comment-only edit leaves the anchor fresh.
        (repo / "config/loader.py").write_text(
            "# loading\ndef load_config(path):\n\n    with open(path) as f:   # read it\n"
            "        return f.read()\n"
        )
        shown = await ok(client, "inspect", id=found["id"])
        assert statuses(shown) == [("config/loader.py", "load_config", "fresh")], shown
        assert not shown.get("stale")

        # Edit, rename, move and delete the anchored code.
        (repo / "retry.py").write_text(
            RETRY.replace("min(30, 2 ** attempt)", "min(60, 3 ** attempt)").replace(
                "\n    def jitter(self):\n        return 0\n", ""
            )
        )
        (repo / "util.py").write_text(UTIL.replace("old_name", "new_name"))
        git(repo, "mv", "config/loader.py", "config/load.py")

        changed = await ok(client, "inspect", id=explicit["id"])
        assert statuses(changed) == [("retry.py", "RetryPolicy.backoff", "changed")], changed
        assert changed["stale"] is True
        moved = await ok(client, "inspect", id=renamed["id"])
        assert [a["status"] for a in moved["code"]] == ["moved"], moved
        assert moved["code"][0]["moved_to"] == {"path": "util.py", "symbol": "new_name"}
        assert not moved.get("stale")
        moved_file = await ok(client, "inspect", id=found["id"])
        assert moved_file["code"][0]["moved_to"]["path"] == "config/load.py", moved_file
        deleted = await ok(client, "inspect", id=gone["id"])
        assert statuses(deleted) == [("retry.py", "RetryPolicy.jitter", "deleted")], deleted

        recalled = await ok(client, "recall", query="retry delay doubles", use_embeddings=False)
        first = next(m for m in recalled["memories"] if m["id"] == explicit["id"])
        assert first["stale"] is True and first["code"][0]["status"] == "changed"

        review = await ok(client, "review_stale")
        assert [m["id"] for m in review["memories"]] == [explicit["id"], gone["id"]], review
        assert "backoff" in review["memories"][0]["diff"], review

        # Code as a way in: the memories anchored in retry.py, though the query names none.
        by_code = await ok(client, "recall", query="zzz", code="retry.py", use_embeddings=False)
        assert {m["id"] for m in by_code["memories"]} >= {explicit["id"]}, by_code

        # update re-anchors to the code as it is now: fresh, no longer stale.
        updated = await ok(
            client,
            "update",
            id=explicit["id"],
            content="The retry delay triples, capped at 60 seconds.",
            code=[{"path": "retry.py", "symbol": "RetryPolicy.backoff"}],
        )
        assert statuses(updated) == [("retry.py", "RetryPolicy.backoff", "fresh")], updated
        review = await ok(client, "review_stale")
        assert [m["id"] for m in review["memories"]] == [gone["id"]], review

    cli = run_cli("stale", "--json", home=home, cwd=repo)
    assert cli.returncode == 0, cli.stderr
    assert [m["id"] for m in json.loads(cli.stdout)] == [gone["id"]], cli.stdout


async def test_another_repositorys_session_sees_none_of_the_anchors(
    home: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "one", FILES)
    other = make_repo(tmp_path / "two", {"retry.py": RETRY})
    async with open_client(home, cwd=repo) as client:
        kept = await ok(
            client,
            "remember",
            content="The retry delay doubles.",
            code=[{"path": "retry.py", "symbol": "RetryPolicy.backoff"}],
        )
    (repo / "retry.py").write_text(RETRY.replace("min(30", "min(31"))
    scope = f"repo:{repo / '.git'}"
    async with open_client(home, cwd=other) as client:
        assert (await ok(client, "review_stale"))["memories"] == []
        # Read explicitly, the other repository's memory shows no code of this checkout.
        shown = await ok(client, "inspect", id=kept["id"], scopes=[scope])
        assert "code" not in shown and "stale" not in shown, shown
        recalled = await ok(client, "recall", query="retry delay", use_embeddings=False)
        assert recalled["memories"] == [], recalled


def test_a_stale_memory_ranks_lower_but_is_never_hidden() -> None:
    scope = "repo:/r/.git"
    rows = [
        {"id": 1, "score": 1.0, "scopes": [scope], "stale": True},
        {"id": 2, "score": 0.9, "scopes": [scope]},
        {"id": 3, "score": 0.5, "scopes": [scope]},
        {"id": 4, "score": 2.0, "scopes": ["global"], "stale": True},
    ]
    penalized(rows, 0.15, [scope, "global"])
    # 1.0 -> 0.85: below the fresh 0.9, above 0.5; the repository's memories stay first.
    assert [r["id"] for r in rows] == [2, 1, 3, 4]
    assert rows[1]["score"] == 0.85
    penalized(rows, 0.0, [scope, "global"])  # 0 turns it off
    assert [r["id"] for r in rows] == [2, 1, 3, 4]


async def test_observations_are_anchored_and_update_follows_a_rename(
    home: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    async with open_client(home, cwd=repo) as client:
        await ok(client, "create_entities", entities=[{"name": "Util", "entityType": "module"}])
        await ok(
            client,
            "add_observations",
            observations=[{"entityName": "Util", "contents": ["`old_name` returns x * 40 + 2"]}],
        )
        await ok(
            client,
            "add_observations",
            observations=[
                {
                    "entityName": "Util",
                    "contents": ["the loader reads the whole file"],
                    "code": [{"path": "config/loader.py", "symbol": "load_config"}],
                }
            ],
        )
        refused = await fails(
            client,
            "add_observations",
            observations=[{"entityName": "Util", "contents": ["x"], "code": [{"path": "nope.py"}]}],
        )
        assert "nope.py" in refused, refused
        found = await ok(client, "recall", query="old_name returns", use_embeddings=False)
        memory = next(m for m in found["memories"] if "old_name" in m["content"])
        assert statuses(memory) == [("util.py", "old_name", "fresh")], memory
        by_code = await ok(client, "recall", query="zzz", code="load_config", use_embeddings=False)
        assert [m["content"] for m in by_code["memories"]] == ["the loader reads the whole file"]

        (repo / "util.py").write_text(UTIL.replace("old_name", "new_name"))
        # update without content or code: the anchor follows its code to the new name.
        updated = await ok(client, "update", id=memory["id"], importance=0.5)
        assert statuses(updated) == [("util.py", "new_name", "fresh")], updated
        assert "code" in updated["changed"], updated
