"""Defect 2 of issue #11: one repository must not change the graph rows another one sees.

Two real `memtrio mcp` servers (the official MCP SDK client over stdio) run in
two Git repositories A and B on one ``MEMTRIO_HOME``: each server's working
directory is its current scope. For every write tool and every writing CLI
command, A creates data, B (or a CLI command run in B) attempts the change,
and A reads its data back through its own server: it must be unchanged, and B
gets the documented result, a refusal naming A's scope or a warning that the
value was kept (docs/memory.md, "Ownership of shared rows").

One pair of servers serves every case (each case uses its own names), and
each case is a subtest: it fails on its own, named after the tool.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import stores
import trio
import zygote
from gitrepo import make_repo
from mcp import Client
from mcp_client import fails, ok, open_client, server_env
from memtrio.actors.store.domain.entities import EntitySpec, upsert_entity, upsert_relation
from memtrio.actors.store.domain.ownership import Ownership, SharedRow
from memtrio.actors.store.sqlite import schema
from memtrio.actors.store.sqlite.tx import tx as sqlite_tx

# SQLite only: which scopes own a row (foreign owners, release) is driven on both backends by
# tests/test_storage_contract_graph.py and _upkeep.py; the rules here are the feature's, above them.

Triple = tuple[str, str, str]


@dataclass
class Pair:
    """Servers A and B on one home, and B's CLI."""

    home: Path
    a: Client
    b: Client
    repo_b: Path
    a_scope: str
    b_scope: str

    async def view_of_a(
        self, entities: Sequence[str], memories: Sequence[int], triples: Sequence[Triple]
    ) -> dict[str, Any]:
        """What A sees of its rows: entities (type, observations, relations), memories, metadata."""
        nodes = await ok(self.a, "open_nodes", names=list(entities)) if entities else {}
        mems = {}
        for mid in memories:
            memory = await ok(self.a, "inspect", id=mid)
            # Reads count accesses from any repository; everything else must stay.
            mems[mid] = {
                k: v for k, v in memory.items() if k not in ("access_count", "last_accessed_at")
            }
        return {"nodes": nodes, "memories": mems, "metadata": self.metadata(triples)}

    def metadata(self, triples: Sequence[Triple]) -> dict[str, Any]:
        """Relation metadata (no read tool returns it), read from the store without writing."""
        out = {}
        for src, rel, tgt in triples:
            found = stores.rows(
                self.home,
                """SELECT r.metadata FROM relations r JOIN entities s ON s.id = r.source_id
                   JOIN entities t ON t.id = r.target_id
                   WHERE s.canonical_name = ? AND r.relation_type = ? AND t.canonical_name = ?""",
                (src.casefold(), rel, tgt.casefold()),
            )
            out[f"{src} {rel} {tgt}"] = json.loads(found[0][0]) if found else None
        return out

    @asynccontextmanager
    async def a_unchanged(
        self,
        entities: Sequence[str] = (),
        memories: Sequence[int] = (),
        triples: Sequence[Triple] = (),
    ) -> AsyncIterator[None]:
        """Assert that A's view of these rows is the same after the block as before it."""
        before = await self.view_of_a(entities, memories, triples)
        assert not before["nodes"] or before["nodes"]["missing"] == [], before
        assert None not in before["metadata"].values(), before
        yield
        after = await self.view_of_a(entities, memories, triples)
        assert after == before, f"A's view changed:\nbefore: {before}\nafter:  {after}"

    async def refused(self, tool: str, **arguments: Any) -> str:
        """B's call is an isError result naming A's scope, and says the row is read-only."""
        message = await fails(self.b, tool, **arguments)
        assert self.a_scope in message and "read-only" in message, message
        return message

    def warned(self, result: dict[str, Any], attribute: str, count: int = 1) -> None:
        """B's result warns (``count`` times) that ``attribute`` was kept because A owns it too."""
        found = [
            w
            for w in result.get("warnings", [])
            if self.a_scope in w and "was kept" in w and attribute in w
        ]
        assert len(found) == count, result

    async def cli(self, *argv: str, stdin: bytes = b"") -> tuple[int, str]:
        """A memtrio command run in repository B: (exit code, stdout + stderr)."""
        proc = await trio.run_process(
            zygote.command(argv),
            cwd=str(self.repo_b),
            env=server_env(self.home, {"MEMTRIO_CODE": "off"}),
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        return proc.returncode, (proc.stdout + proc.stderr).decode()


async def a_entity(p: Pair, name: str, kind: str = "lib", observations: Sequence[str] = ()) -> None:
    await ok(
        p.a,
        "create_entities",
        entities=[{"name": name, "entityType": kind, "observations": list(observations)}],
    )


async def a_shared_memory(p: Pair, content: str, **extra: Any) -> int:
    """A memory of A that is also `global`, so B sees it (its default type makes it an observation)."""
    made = await ok(p.a, "remember", content=content, scopes=[p.a_scope, "global"], **extra)
    return int(made["id"])


# -- memory tools ------------------------------------------------------------------------


async def remember_links_and_keeps_kind_and_metadata(p: Pair) -> None:
    rel = {"source": "RemX", "relation": "uses", "target": "RemY"}
    await ok(
        p.a, "remember", content="A uses RemY", entities=[{"name": "RemX", "kind": "lib"}],
        relations=[{**rel, "metadata": {"v": 1}}],
    )  # fmt: skip
    async with p.a_unchanged(["RemX", "RemY"], triples=[("RemX", "uses", "RemY")]):
        made = await ok(
            p.b, "remember", content="B uses RemY too", entities=[{"name": "RemX", "kind": "service"}],
            relations=[{**rel, "metadata": {"v": 2}}],
        )  # fmt: skip
    p.warned(made, "kind")
    p.warned(made, "metadata")
    assert [e["created"] for e in made["entities"]] == [False, False]


async def relate_refuses_a_metadata_change(p: Pair) -> None:
    await ok(p.a, "relate", source="RelX", relation="owns", target="RelY", metadata={"since": 1})
    async with p.a_unchanged(["RelX", "RelY"], triples=[("RelX", "owns", "RelY")]):
        await p.refused(
            "relate", source="RelX", relation="owns", target="RelY", metadata={"since": 2}
        )
    # Refused as a whole: not even the entities were linked to B.
    assert (await ok(p.b, "entity_exists", names=["RelX", "RelY"]))["missing"] == ["RelX", "RelY"]


async def relate_links_and_keeps_kinds(p: Pair) -> None:
    await ok(p.a, "relate", source="RkX", relation="owns", target="RkY", source_kind="lib")
    async with p.a_unchanged(["RkX", "RkY"], triples=[("RkX", "owns", "RkY")]):
        made = await ok(
            p.b, "relate", source="RkX", relation="owns", target="RkY", source_kind="service"
        )
    p.warned(made, "kind")
    assert made["source"]["kind"] == "lib" and made["created"] is False


async def update_is_refused(p: Pair) -> None:
    mid = await a_shared_memory(p, "A's shared convention", memory_type="convention")
    async with p.a_unchanged(memories=[mid]):
        await p.refused("update", id=mid, content="rewritten by B")
        await p.refused("update", id=mid, importance=1.0)


async def forget_is_refused(p: Pair) -> None:
    mid = await a_shared_memory(p, "A's shared decision", memory_type="decision")
    async with p.a_unchanged(memories=[mid]):
        await p.refused("forget", id=mid)


async def recall_and_inspect_only_read(p: Pair) -> None:
    mid = await a_shared_memory(p, "readable pelican fact", entities=["ReadX"])
    async with p.a_unchanged(["ReadX"], memories=[mid]):
        found = await ok(p.b, "recall", query="pelican", use_embeddings=False)
        assert mid in [m["id"] for m in found["memories"]]
        assert (await ok(p.b, "inspect", id=mid))["content"] == "readable pelican fact"


# -- graph tools ---------------------------------------------------------------------------


async def create_entities_links_and_keeps_the_type(p: Pair) -> None:
    await a_entity(p, "CeX", "lib", ["a fact"])
    async with p.a_unchanged(["CeX"]):
        made = await ok(
            p.b, "create_entities",
            entities=[{"name": "CeX", "entityType": "service", "observations": ["b fact"]}],
        )  # fmt: skip
    assert made["entities"] == [{"name": "CeX", "entityType": "lib", "observations": ["b fact"]}]
    p.warned(made, "entityType")
    # Asked again once linked (now visible here): skipped, and still warned.
    again = await ok(p.b, "create_entities", entities=[{"name": "CeX", "entityType": "service"}])
    assert again["entities"] == []
    p.warned(again, "entityType")


async def upsert_entities_refuses_a_type_change(p: Pair) -> None:
    await a_entity(p, "UpX", "lib", ["a fact"])
    async with p.a_unchanged(["UpX"]):
        message = await p.refused(
            "upsert_entities",
            entities=[
                {"name": "UpNew", "entityType": "t", "observations": ["would be created"]},
                {"name": "UpX", "entityType": "service"},
            ],
        )
        assert "entities[1]" in message
        # Without a type (or with the same one) it links the entity and adds B's observation.
        linked = await ok(
            p.b, "upsert_entities", entities=[{"name": "UpX", "observations": ["b fact"]}]
        )
        assert linked["entities"][0]["entityType"] == "lib"
        await ok(p.b, "upsert_entities", entities=[{"name": "UpX", "entityType": "lib"}])
    # The refused call changed nothing, not even the entity before the refused one.
    assert (await ok(p.b, "entity_exists", names=["UpNew"]))["missing"] == ["UpNew"]


async def create_relations_links_an_existing_triple(p: Pair) -> None:
    await ok(p.a, "relate", source="CrX", relation="calls", target="CrY", metadata={"m": 1})
    async with p.a_unchanged(["CrX", "CrY"], triples=[("CrX", "calls", "CrY")]):
        await ok(p.b, "create_entities", entities=[{"name": n, "entityType": "entity"} for n in ("CrX", "CrY")])  # fmt: skip
        made = await ok(
            p.b, "create_relations", relations=[{"from": "CrX", "to": "CrY", "relationType": "calls"}]
        )  # fmt: skip
    assert made["relations"] == [{"from": "CrX", "to": "CrY", "relationType": "calls"}]


async def add_observations_adds_only_to_b(p: Pair) -> None:
    await a_entity(p, "AoX", "lib", ["a fact"])
    async with p.a_unchanged(["AoX"]):
        await ok(p.b, "create_entities", entities=[{"name": "AoX", "entityType": "lib"}])
        await ok(p.b, "add_observations", observations=[{"entityName": "AoX", "contents": ["b"]}])
    seen_b = await ok(p.b, "open_nodes", names=["AoX"])
    assert seen_b["entities"][0]["observations"] == ["b"]


async def delete_entities_removes_only_bs_part(p: Pair) -> None:
    await a_entity(p, "DeX", "lib", ["a fact"])
    await a_entity(p, "DeY")
    await ok(p.a, "create_relations", relations=[{"from": "DeX", "to": "DeY", "relationType": "r"}])
    async with p.a_unchanged(["DeX", "DeY"], triples=[("DeX", "r", "DeY")]):
        await ok(p.b, "create_entities", entities=[{"name": "DeX", "entityType": "lib", "observations": ["b fact"]}])  # fmt: skip
        assert (await ok(p.b, "delete_entities", entityNames=["DeX"]))["deleted"] == 1
    assert (await ok(p.b, "entity_exists", names=["DeX"]))["missing"] == ["DeX"]


async def delete_entities_of_a_global_view_keeps_as_observation(p: Pair) -> None:
    mid = await a_shared_memory(p, "DgX is A's and global", entities=["DgX"])
    async with p.a_unchanged(["DgX"], memories=[mid]):
        assert (await ok(p.b, "delete_entities", entityNames=["DgX"]))["deleted"] == 1
    assert (await ok(p.b, "entity_exists", names=["DgX"]))["missing"] == ["DgX"]


async def delete_entities_of_a_global_entity_keeps_as_relations(p: Pair) -> None:
    # A global entity (a global memory mentions it) that A's own relation uses:
    # B may write `global`, but the entity is A's too through that relation.
    mid = (
        await ok(p.a, "remember", content="GlX is everyone's", memory_type="decision",
                 scopes=["global"], entities=["GlX"])
    )["id"]  # fmt: skip
    await a_entity(p, "GlY")
    await ok(p.a, "create_relations", relations=[{"from": "GlX", "to": "GlY", "relationType": "r"}])
    async with p.a_unchanged(["GlX", "GlY"], memories=[mid], triples=[("GlX", "r", "GlY")]):
        await p.refused("upsert_entities", entities=[{"name": "GlX", "entityType": "service"}])
        await p.refused("merge_entities", sources=["GlX"], target="GlZ")
        assert (await ok(p.b, "delete_entities", entityNames=["GlX"]))["deleted"] == 1
    assert (await ok(p.b, "entity_exists", names=["GlX"]))["missing"] == ["GlX"]


async def delete_observations_refuses_as_observation(p: Pair) -> None:
    mid = await a_shared_memory(p, "DoX is shared", entities=["DoX"])
    async with p.a_unchanged(["DoX"], memories=[mid]):
        await ok(p.b, "add_observations", observations=[{"entityName": "DoX", "contents": ["b's own"]}])  # fmt: skip
        message = await p.refused(
            "delete_observations",
            deletions=[{"entityName": "DoX", "observations": ["b's own", "DoX is shared"]}],
        )
        assert "deletions[0]" in message
    # Refused as a whole: B's own observation is still there, and deletable alone.
    assert "b's own" in (await ok(p.b, "open_nodes", names=["DoX"]))["entities"][0]["observations"]
    gone = await ok(
        p.b, "delete_observations", deletions=[{"entityName": "DoX", "observations": ["b's own"]}]
    )
    assert gone["deleted"] == 1


async def delete_relations_unlinks_only_b(p: Pair) -> None:
    await ok(
        p.a, "relate", source="DrX", relation="r", target="DrY", metadata={"w": 1},
        scopes=[p.a_scope, "global"],
    )  # fmt: skip
    async with p.a_unchanged(["DrX", "DrY"], triples=[("DrX", "r", "DrY")]):
        removed = await ok(
            p.b, "delete_relations", relations=[{"from": "DrX", "to": "DrY", "relationType": "r"}]
        )  # fmt: skip
        assert removed["deleted"] == 1
    assert (await ok(p.b, "search_relations", **{"from": "DrX"}))["relations"] == []


async def merge_entities_refuses_a_shared_source(p: Pair) -> None:
    await a_entity(p, "MgX", "lib", ["a fact"])
    async with p.a_unchanged(["MgX"]):
        await ok(p.b, "create_entities", entities=[{"name": "MgX", "entityType": "lib"}])
        await p.refused("merge_entities", sources=["MgX"], target="MgNew")
    assert (await ok(p.b, "entity_exists", names=["MgNew"]))["missing"] == ["MgNew"]


async def merge_entities_into_a_shared_target_keeps_its_type(p: Pair) -> None:
    await a_entity(p, "MtT", "lib", ["a fact"])
    await ok(p.b, "create_entities", entities=[{"name": "MtQ", "entityType": "x", "observations": ["q"]}])  # fmt: skip
    async with p.a_unchanged(["MtT"]):
        await p.refused("merge_entities", sources=["MtQ"], target="MtT", entityType="service")
        merged = await ok(p.b, "merge_entities", sources=["MtQ"], target="MtT")
    assert merged["target"] == {"name": "MtT", "entityType": "lib", "observations": ["q"]}


async def compact_keeps_as_duplicates(p: Pair) -> None:
    first = await a_shared_memory(p, "CpX repeated", entities=["CpX"])
    second = await a_shared_memory(p, "CpX repeated", entities=["CpX"])
    async with p.a_unchanged(["CpX"], memories=[first, second]):
        await ok(p.b, "compact")


async def b_still_changes_its_own_rows(p: Pair) -> None:
    """The control: the same calls on rows only B uses succeed."""
    await ok(p.b, "create_entities", entities=[{"name": "OwnX", "entityType": "lib"}])
    changed = await ok(p.b, "upsert_entities", entities=[{"name": "OwnX", "entityType": "svc"}])
    assert changed["entities"][0]["entityType"] == "svc" and "warnings" not in changed
    await ok(p.b, "relate", source="OwnX", relation="r", target="OwnY", metadata={"a": 1})
    again = await ok(p.b, "relate", source="OwnX", relation="r", target="OwnY", metadata={"b": 2})
    assert again["metadata"] == {"a": 1, "b": 2} and again["warnings"] == []


# -- CLI commands (run in repository B) ----------------------------------------------------


async def cli_remember_links_only(p: Pair) -> None:
    await ok(
        p.a, "remember", content="A: CliX uses CliY", entities=[{"name": "CliX", "kind": "lib"}],
        relations=[{"source": "CliX", "relation": "uses", "target": "CliY", "metadata": {"v": 1}}],
    )  # fmt: skip
    async with p.a_unchanged(["CliX", "CliY"], triples=[("CliX", "uses", "CliY")]):
        code, out = await p.cli(
            "remember", "B: CliX too", "--entity", "CliX", "--relation", "CliX:uses:CliY"
        )
        assert code == 0, out


async def cli_forget_is_refused(p: Pair) -> None:
    mid = await a_shared_memory(p, "A's shared note for the CLI")
    async with p.a_unchanged(memories=[mid]):
        code, out = await p.cli("forget", str(mid))
        assert code == 1 and p.a_scope in out and "read-only" in out, out


async def cli_flush_keeps_as_rows(p: Pair) -> None:
    mid = await a_shared_memory(p, "FlX survives a flush in B", entities=["FlX"])
    await a_entity(p, "FlY", "lib", ["a fact"])
    await ok(p.a, "relate", source="FlX", relation="r", target="FlY", metadata={"f": 1})
    async with p.a_unchanged(["FlX", "FlY"], memories=[mid], triples=[("FlX", "r", "FlY")]):
        code, out = await p.cli("flush", "--yes")
        assert code == 0, out


async def cli_import_keeps_as_rows(p: Pair) -> None:
    mid = (await ok(p.a, "remember", content="A's imported-over memory"))["id"]
    await ok(
        p.a, "relate", source="ImX", relation="uses", target="ImY", source_kind="lib",
        metadata={"v": 1},
    )  # fmt: skip
    records: list[dict[str, Any]] = [
        {"type": "header", "format": "memtrio-export", "version": 1, "schema_version": 5, "exported_at": 0},
        *(
            {"type": "entity", "id": 900 + i, "name": n, "canonical_name": n.casefold(), "kind": "svc",
             "created_at": 0, "updated_at": 0, "scopes": [p.b_scope]}
            for i, n in enumerate(("ImX", "ImY"))
        ),
        {"type": "relation", "id": 900, "source": "imx", "relation_type": "uses", "target": "imy",
         "metadata": '{"v": 2}', "created_at": 0, "scopes": [p.b_scope]},
        {"type": "memory", "id": mid, "content": "rewritten by an import", "memory_type": "observation",
         "importance": 1.0, "created_at": 0, "updated_at": 0, "last_accessed_at": None, "access_count": 0,
         "scopes": [p.b_scope], "entities": ["imx"], "relations": []},
    ]  # fmt: skip
    data = "\n".join(json.dumps(r) for r in records).encode()
    async with p.a_unchanged(["ImX", "ImY"], memories=[mid], triples=[("ImX", "uses", "ImY")]):
        code, out = await p.cli("import", "-", stdin=data)
        assert code == 0, out


async def cli_import_jsonl_keeps_as_rows(p: Pair) -> None:
    await a_entity(p, "JsX", "lib", ["a fact"])
    await ok(p.a, "relate", source="JsX", relation="r", target="JsY", metadata={"j": 1})
    lines = [
        {"type": "entity", "name": "JsX", "entityType": "svc", "observations": ["b fact"]},
        {"type": "relation", "from": "JsX", "to": "JsY", "relationType": "r"},
    ]
    data = "\n".join(json.dumps(r) for r in lines).encode()
    async with p.a_unchanged(["JsX", "JsY"], triples=[("JsX", "r", "JsY")]):
        code, out = await p.cli("import", "-", "--format", "jsonl", stdin=data)
        assert code == 0, out


# (the tools or CLI command it drives, what B gets, the case)
CASES: list[tuple[str, str, Callable[[Pair], Awaitable[None]]]] = [
    ("remember", "links A's entity and relation, keeps kind and metadata", remember_links_and_keeps_kind_and_metadata),
    ("relate", "changing the metadata of A's relation is refused", relate_refuses_a_metadata_change),
    ("relate", "links A's relation, keeps A's entity kind", relate_links_and_keeps_kinds),
    ("update", "A's shared memory is refused", update_is_refused),
    ("forget", "A's shared memory is refused", forget_is_refused),
    ("recall, inspect", "read only", recall_and_inspect_only_read),
    ("create_entities", "links A's entity, keeps its type", create_entities_links_and_keeps_the_type),
    ("upsert_entities", "changing A's entity type is refused", upsert_entities_refuses_a_type_change),
    ("create_relations", "links A's relation", create_relations_links_an_existing_triple),
    ("add_observations", "adds to B only", add_observations_adds_only_to_b),
    ("delete_entities", "removes B's part only", delete_entities_removes_only_bs_part),
    ("delete_entities", "A's observation seen through global stays", delete_entities_of_a_global_view_keeps_as_observation),
    ("delete_entities, upsert_entities, merge_entities", "a global entity A's relation uses", delete_entities_of_a_global_entity_keeps_as_relations),
    ("delete_observations", "A's shared observation is refused", delete_observations_refuses_as_observation),
    ("delete_relations", "unlinks B only", delete_relations_unlinks_only_b),
    ("merge_entities", "a source shared with A is refused", merge_entities_refuses_a_shared_source),
    ("merge_entities", "into A's entity keeps its type", merge_entities_into_a_shared_target_keeps_its_type),
    ("compact", "A's duplicates stay", compact_keeps_as_duplicates),
    ("upsert_entities, relate", "control: B changes rows only B uses", b_still_changes_its_own_rows),
    ("memtrio remember", "links only", cli_remember_links_only),
    ("memtrio forget", "A's shared memory is refused", cli_forget_is_refused),
    ("memtrio flush", "A's rows stay", cli_flush_keeps_as_rows),
    ("memtrio import", "memtrio format: A's rows stay", cli_import_keeps_as_rows),
    ("memtrio import", "--format jsonl: A's rows stay", cli_import_jsonl_keeps_as_rows),
]  # fmt: skip
# The CLI commands that write the store (the others read it, or write only the code index).
WRITING_COMMANDS = {"memtrio remember", "memtrio forget", "memtrio flush", "memtrio import"}


async def test_defect2_other_repository_cannot_change_shared_rows(
    home: Path, tmp_path: Path, subtests: pytest.Subtests
) -> None:
    repo_a = make_repo(tmp_path / "a", {"README": "a"})
    repo_b = make_repo(tmp_path / "b", {"README": "b"})
    async with open_client(home, cwd=repo_a) as a, open_client(home, cwd=repo_b) as b:
        p = Pair(home, a, b, repo_b, f"repo:{repo_a / '.git'}", f"repo:{repo_b / '.git'}")
        assert (await ok(a, "stats"))["current_scope"] == p.a_scope
        assert (await ok(b, "stats"))["current_scope"] == p.b_scope
        covered = {t for tools, _, _ in CASES for t in tools.split(", ")}
        with subtests.test(msg="every write tool and writing command has a case"):
            listed = (await a.list_tools()).tools
            writes = {
                t.name for t in listed if not (t.annotations and t.annotations.read_only_hint)
            }
            # remember, relate, update, forget, recall and inspect (they count accesses), 9 graph tools
            assert len(writes) == 15, sorted(writes)
            assert writes | WRITING_COMMANDS <= covered, sorted(writes - covered)
        for tools, what, case in CASES:
            with subtests.test(msg=f"{tools}: {what}"):
                await case(p)


def test_owners_of_a_row_include_the_scopes_of_the_rows_that_use_it(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "own.sqlite", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    schema.migrate(conn)
    a, b = ("repo:/a/.git", "global"), ("repo:/b/.git", "global")
    ids = {s: sqlite_tx(conn).scopes.ensure(s) for s in ("global", a[0], b[0])}
    own = Ownership(sqlite_tx(conn), b)
    warnings: list[str] = []
    # X is global only; A's relation X -[r]-> Y and A's memory about Y use it.
    x, _ = upsert_entity(
        sqlite_tx(conn), EntitySpec("X", "lib"), [ids["global"]], 0.0, own, warnings
    )
    y, _ = upsert_entity(sqlite_tx(conn), EntitySpec("Y"), [ids[a[0]]], 0.0, own, warnings)
    rel, _ = upsert_relation(sqlite_tx(conn), x, "r", y, None, [ids[a[0]]], 0.0, own, None)
    assert own.foreign("entity", x) == [a[0]] and not own.owned("entity", x)
    assert own.foreign("relation", rel) == [a[0]]
    assert Ownership(sqlite_tx(conn), a).owned("entity", x)  # A may write every owner scope of X
    # An explicit change is refused, naming A's scope; a link keeps the kind, with a warning.
    with pytest.raises(SharedRow, match=r"repo:/a/\.git.*read-only"):
        own.require("entity", x, "entity 'X'", "change its entityType")
    upsert_entity(sqlite_tx(conn), EntitySpec("x", "service"), [ids[b[0]]], 0.0, own, warnings)
    assert len(warnings) == 1 and "repo:/a/.git" in warnings[0]
    assert conn.execute("SELECT kind FROM entities WHERE id = ?", (x,)).fetchone()[0] == "lib"
    # Releasing X from B's side leaves it in A (never unscoped, so never visible everywhere).
    own.release("entity", x)
    scopes = conn.execute(
        "SELECT s.name FROM entity_scopes es JOIN scopes s ON s.id = es.scope_id WHERE es.entity_id = ?",
        (x,),
    ).fetchall()
    assert scopes == [(a[0],)]
    # An unscoped (legacy) row belongs to everyone.
    conn.execute("DELETE FROM relation_scopes WHERE relation_id = ?", (rel,))
    assert own.owned("relation", rel)
