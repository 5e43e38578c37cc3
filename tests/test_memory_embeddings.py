"""How the memory tools use the embedder and ranker services (fakes with the published interfaces)."""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
from memtrio.actors.embedder.handle import EMBEDDER
from memtrio.actors.memory import tools as T
from memtrio.actors.ranker.handle import RANKER, Ranked
from memtrio.actors.store.domain.memories import NewMemory, insert_memory
from memtrio.actors.store.feature import FEATURE
from memtrio.actors.store.writer import STORE, Change
from memtrio.protocol.errors import DomainError
from memtrio.supervisors import config as config_mod
from memtrio.supervisors.app import build_context, open_app
from memtrio.supervisors.context import AppContext
from test_store_writer import Ctx


@dataclass
class Embedding:
    vectors: np.ndarray
    truncated: list[bool]
    counts: list[int]
    model: str = "fake-model"
    revision: str = "r1"

    def rows(self, i: int) -> np.ndarray:
        start = sum(self.counts[:i])
        return self.vectors[start : start + self.counts[i]]


class FakeEmbedder:
    """Windows of 40 characters: a text of 41-80 has two, a longer one is cut after two."""

    max_tokens = 40

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.fail = False

    async def embed(self, texts: list[str], max_chunks: int = 1) -> Embedding:
        self.calls.append(list(texts))
        if self.fail:
            raise RuntimeError("model exploded")
        rows, counts, truncated = [], [], []
        for t in texts:
            windows = [t[i : i + 40] for i in range(0, len(t), 40)] or [""]
            truncated.append(len(windows) > min(max_chunks, 2))
            windows = windows[: min(max_chunks, 2)]
            counts.append(len(windows))
            rows += [[float(len(w)), 1.0, float(i)] for i, w in enumerate(windows)]
        vecs = np.array(rows, dtype=np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        return Embedding(vecs, truncated, counts)


class FakeRanker:
    def __init__(self) -> None:
        self.answer: Any = None
        self.calls: list[tuple[Any, ...]] = []

    async def recall(
        self,
        query: str,
        scope_ids: list[int],
        memory_type: str | None,
        limit: int,
        *,
        explain: bool = False,
    ) -> Ranked | None:
        self.calls.append((query, scope_ids, memory_type, limit))
        if isinstance(self.answer, Exception):
            raise self.answer
        return None if self.answer is None else Ranked(*self.answer)


@asynccontextmanager
async def app_with(
    home: Path, embedder: Any = None, ranker: Any = None
) -> AsyncIterator[AppContext]:
    repo = home.parent / "repo"
    repo.mkdir(exist_ok=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    app = build_context(config_mod.load(home, env={}), home, repo)
    async with open_app(app, [FEATURE]):
        if embedder is not None:
            app.publish(EMBEDDER, embedder)
        if ranker is not None:
            app.publish(RANKER, ranker)
        yield app


def chunks(home: Path) -> dict[tuple[str, int], int]:
    """(kind, item) -> number of rows in vector_chunks."""
    conn = sqlite3.connect(home / "memtrio.sqlite")
    try:
        return {
            (k, i): n
            for k, i, n in conn.execute(
                "SELECT kind, item_id, count(*) FROM vector_chunks GROUP BY kind, item_id"
            )
        }
    finally:
        conn.close()


def vectors(home: Path) -> dict[tuple[str, int], tuple[str, str, int, bytes]]:
    conn = sqlite3.connect(home / "memtrio.sqlite")
    try:
        return {
            (k, i): (m, r, d, v)
            for k, i, m, r, d, v in conn.execute(
                "SELECT kind, item_id, model, revision, dim, vec FROM vectors"
            )
        }
    finally:
        conn.close()


def builtins(result: msgspec.Struct) -> Any:
    """A handler's result as a client sees it (JSON types)."""
    return msgspec.to_builtins(result)


async def test_remember_and_relate_store_vectors_in_the_same_write(home: Path) -> None:
    embedder = FakeEmbedder()
    changes: list[Change] = []
    async with app_with(home, embedder) as app:
        app.service(STORE).add_listener(changes.extend)
        ctx = Ctx(app)
        first = builtins(
            await T.remember(
                ctx,
                T.RememberArgs(
                    "a short note",
                    entities=["trio"],
                    relations=[T.RelationArg("trio", "uses", "sqlite")],
                ),
            )
        )
        assert embedder.calls[-1] == ["a short note", "trio", "sqlite", "trio uses sqlite"]
        assert first["warnings"] == []
        stored = vectors(home)
        assert set(stored) == {("memory", 1), ("entity", 1), ("entity", 2), ("relation", 1)}
        assert stored[("memory", 1)][:3] == ("fake-model", "r1", 3)
        assert np.frombuffer(stored[("memory", 1)][3], dtype="<f4").shape == (3,)
        memory_change = next(c for c in changes if c.kind == "memory")
        assert (
            memory_change.vector == stored[("memory", 1)][3] and memory_change.model == "fake-model"
        )

        # Known entities with vectors are not embedded again; a text longer than one
        # window is stored as all its windows (chunk 0 in vectors, the rest in
        # vector_chunks); only text beyond the last window reports truncation.
        second = builtins(await T.remember(ctx, T.RememberArgs("x" * 50, entities=["Trio"])))
        assert embedder.calls[-1] == ["x" * 50]
        assert second["warnings"] == []
        assert chunks(home) == {("memory", second["id"]): 1}
        change = next(c for c in reversed(changes) if c.kind == "memory")
        assert len(change.vector) == 2 * 3 * 4  # both windows go to the ranker
        third = builtins(await T.remember(ctx, T.RememberArgs("y" * 90)))
        assert len(third["warnings"]) == 1 and "truncated" in third["warnings"][0]
        builtins(await T.forget(ctx, T.ForgetArgs(third["id"])))
        assert ("memory", third["id"]) not in chunks(home)  # the chunks go with the memory
        rel = builtins(await T.relate(ctx, T.RelateArgs("sqlite", "stores", "memories")))
        assert embedder.calls[-1] == ["memories", "sqlite stores memories"]  # sqlite has its vector
        calls = len(embedder.calls)
        builtins(await T.relate(ctx, T.RelateArgs("SQLite", "stores", "memories")))
        assert len(embedder.calls) == calls  # nothing new to embed
        assert ("relation", rel["id"]) in vectors(home) and rel["warnings"] == []

        # update: same content keeps the vector without embedding; new content re-embeds.
        before = len(embedder.calls)
        builtins(await T.update(ctx, T.UpdateArgs(1, importance=0.5, content="a short note")))
        assert len(embedder.calls) == before
        builtins(await T.update(ctx, T.UpdateArgs(1, content="a longer note now")))
        assert embedder.calls[-1] == ["a longer note now"]
        assert vectors(home)[("memory", 1)][3] != stored[("memory", 1)][3]
        # update replaces every window: a short text has none beyond chunk 0, a long one gains them.
        builtins(await T.update(ctx, T.UpdateArgs(second["id"], content="now short")))
        assert ("memory", second["id"]) not in chunks(home)
        builtins(await T.update(ctx, T.UpdateArgs(1, content="z" * 60)))
        assert chunks(home) == {("memory", 1): 1}

        # An embedder failure refuses the call and stores nothing.
        embedder.fail = True
        counts = len(vectors(home))
        with pytest.raises(DomainError, match="embedding failed.*nothing was stored"):
            builtins(await T.remember(ctx, T.RememberArgs("doomed")))
        with pytest.raises(DomainError, match="embedding failed"):
            builtins(await T.update(ctx, T.UpdateArgs(1, content="doomed too")))
        assert (builtins(await T.inspect(ctx, T.InspectArgs(1))))["content"] == "z" * 60
        assert (builtins(await T.stats(ctx, T.StatsArgs())))["memories"] == 2 and len(
            vectors(home)
        ) == counts


async def test_a_role_label_is_stored_but_not_embedded(home: Path) -> None:
    """A chat transcript's turn ("user: ...") is embedded as what was said: the
    label is the same in half the turns and pulled every vector towards it
    (LongMemEval role-prefixed turns). A speaker's name is content and stays."""
    embedder = FakeEmbedder()
    async with app_with(home, embedder) as app:
        ctx = Ctx(app)
        said = builtins(await T.remember(ctx, T.RememberArgs("user: I adopted a beagle")))
        assert embedder.calls[-1] == ["I adopted a beagle"]
        builtins(await T.remember(ctx, T.RememberArgs("  Assistant:  Congratulations!")))
        assert embedder.calls[-1] == ["Congratulations!"]
        builtins(await T.remember(ctx, T.RememberArgs("Caroline: I adopted a beagle")))
        assert embedder.calls[-1] == ["Caroline: I adopted a beagle"]
        builtins(await T.remember(ctx, T.RememberArgs("user:")))  # nothing after it: kept whole
        assert embedder.calls[-1] == ["user:"]
        builtins(await T.update(ctx, T.UpdateArgs(said["id"], content="human: a new text")))
        assert embedder.calls[-1] == ["a new text"]
        shown = builtins(await T.inspect(ctx, T.InspectArgs(said["id"])))
        assert shown["content"] == "human: a new text"  # the stored text is untouched


async def test_without_an_embedder_no_vectors_and_update_drops_the_stale_one(home: Path) -> None:
    async with app_with(home) as app:
        ctx = Ctx(app)
        builtins(await T.remember(ctx, T.RememberArgs("plain", entities=["e"])))
        assert vectors(home) == {}
        conn = sqlite3.connect(home / "memtrio.sqlite")
        conn.execute("INSERT INTO vectors VALUES ('memory', 1, 'm', 'r', 1, x'00000000')")
        conn.commit()
        conn.close()
        builtins(await T.update(ctx, T.UpdateArgs(1, memory_type="decision")))
        assert ("memory", 1) in vectors(home)  # content unchanged: vector kept
        builtins(await T.update(ctx, T.UpdateArgs(1, content="plain, revised")))
        assert vectors(home) == {}


async def test_recall_uses_the_ranker_when_asked_and_falls_back_to_lexical(home: Path) -> None:
    ranker = FakeRanker()
    async with app_with(home, ranker=ranker) as app:
        ctx = Ctx(app)
        a = (builtins(await T.remember(ctx, T.RememberArgs("alpha about sqlite"))))["id"]
        b = (builtins(await T.remember(ctx, T.RememberArgs("beta about trio", scopes=["global"]))))[
            "id"
        ]
        truncated = "the query was truncated to 128 tokens for embedding"
        ranker.answer = ([(b, 0.9), (a, 0.5)], [truncated])
        result = builtins(await T.recall(ctx, T.RecallArgs("anything", memory_type="Decision")))
        assert result["ranking"] == "semantic"
        assert truncated in result["warnings"]  # the ranker's warnings reach the caller
        assert [m["id"] for m in result["memories"]] == [a, b]  # repository matches first
        query, scope_ids, memory_type, limit = ranker.calls[-1]
        assert (query, memory_type, limit) == ("anything", "Decision", 10) and len(scope_ids) == 2

        store = app.service(STORE)
        foreign = await store.write(
            lambda tx: insert_memory(tx, NewMemory("elsewhere", scopes=["repo:/else/.git"]))[0][
                "id"
            ],
            name="test.insert_foreign",
        )
        ranker.answer = ([(foreign, 1.0), (a, 0.5), (a, 0.4)],)
        result = builtins(await T.recall(ctx, T.RecallArgs("anything")))
        assert [m["id"] for m in result["memories"]] == [
            a
        ]  # unselected and duplicate ids are dropped

        ranker.answer = None  # the ranker cannot answer (e.g. no model): lexical
        result = builtins(await T.recall(ctx, T.RecallArgs("sqlite")))
        assert result["ranking"] == "lexical" and [m["id"] for m in result["memories"]] == [a]
        ranker.answer = RuntimeError("boom")
        result = builtins(await T.recall(ctx, T.RecallArgs("trio")))
        assert result["ranking"] == "lexical" and [m["id"] for m in result["memories"]] == [b]
        assert "semantic ranking failed" in result["warnings"][0]
        calls = len(ranker.calls)
        result = builtins(await T.recall(ctx, T.RecallArgs("trio", use_embeddings=False)))
        assert result["ranking"] == "lexical" and len(ranker.calls) == calls
