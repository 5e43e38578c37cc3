"""The twelve vector tools end to end through the official MCP client (``--vectors``).

The corpus (3 dimensions, cosine, the exact backend), with hand-computed figures::

    alpha   [1, 0, 0]      place   "river stone"
    beta    [0.98, 0.2, 0] place   "river stone river"
    gamma   [0.6, 0.8, 0]  place   "stone"
    delta   [0, 1, 0]      place
    epsilon [0, 0, 1]      thing
    river   (no embedding) thing
    gamma -links-> alpha, beta, delta

For the query q = [1, 0.3, 0] the cosines are beta 0.9960, alpha 0.9578,
gamma 0.8046, delta 0.2873, epsilon 0.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
import stores
from gitrepo import make_repo
from mcp.shared.exceptions import MCPError
from mcp_client import ThreadedClient, call, open_client, threaded_client

VECTOR_TOOLS = {
    "vector_upsert_embedding", "vector_batch_upsert", "vector_get_embedding", "vector_search_entities",
    "vector_search_by_entity", "vector_recommend", "vector_mmr_search", "hybrid_search",
    "vector_delete_embedding", "vector_reindex", "vector_refresh_graph_cache", "vector_store_stats",
}  # fmt: skip
FLAGS = ["--vectors", "--embedding-dims", "3", "--vec-backend", "exact"]
Q = [1.0, 0.3, 0.0]
CORPUS = {
    "alpha": ([1.0, 0.0, 0.0], "place", ["river stone"]),
    "beta": ([0.98, 0.2, 0.0], "place", ["river stone river"]),
    "gamma": ([0.6, 0.8, 0.0], "place", ["stone"]),
    "delta": ([0.0, 1.0, 0.0], "place", []),
    "epsilon": ([0.0, 0.0, 1.0], "thing", []),
}


# The tests of the corpus server run on both stores (one server each: the family's smoke path);
# those that start servers of their own run on SQLite: their store path is driven on both
# backends by tests/test_storage_contract_vectors.py.
pytestmark = stores.both_stores
SQLITE_ONLY = pytest.mark.stores("sqlite")


def cos(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def names(result: dict) -> list[str]:
    return [r["entityName"] for r in result["results"]]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_repo(tmp_path_factory.mktemp("repo-one"), {"README": "one"})


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, store: str) -> Path:
    """The corpus server's home, one per store backend (so `vec` is built once for each)."""
    return tmp_path_factory.mktemp(f"vectors-home-{store}")


@pytest.fixture(scope="module")
def vec(home: Path, repo: Path) -> Iterator[ThreadedClient]:
    """A --vectors server holding the corpus, in repository one."""
    with threaded_client(home, cwd=repo, args=FLAGS) as client:
        entities = [
            {"name": n, "entityType": t, "observations": obs} for n, (_, t, obs) in CORPUS.items()
        ]
        entities.append({"name": "river", "entityType": "thing", "observations": []})
        client.ok("create_entities", entities=entities)
        client.ok(
            "create_relations",
            relations=[
                {"from": "gamma", "to": t, "relationType": "links"}
                for t in ("alpha", "beta", "delta")
            ],
        )
        stored = client.ok(
            "vector_batch_upsert",
            items=[
                {"entityName": n, "embedding": v, "model": "hand"}
                for n, (v, _, _) in CORPUS.items()
            ],
        )
        assert stored == {"upserted": 5, "failed": 0, "errors": []}
        yield client


def test_vector_search_ranks_by_cosine_with_an_optional_type_filter(vec: ThreadedClient) -> None:
    found = vec.ok("vector_search_entities", embedding=Q, topK=3)
    assert names(found) == ["beta", "alpha", "gamma"]
    for hit in found["results"]:
        assert hit["score"] == pytest.approx(cos(Q, CORPUS[hit["entityName"]][0]), abs=1e-5)
        assert hit["entityType"] == "place"
    up = vec.ok("vector_search_entities", embedding=[0, 0, 1], topK=2, entityType="place")
    assert "epsilon" not in names(up) and len(up["results"]) == 2
    assert names(vec.ok("vector_search_entities", embedding=[0, 0, 1], topK=1)) == ["epsilon"]


def test_every_vector_is_checked_against_the_store_dimension(vec: ThreadedClient) -> None:
    text = vec.fails("vector_search_entities", embedding=[1, 0, 0, 0])
    assert "4 dimensions" in text and "have 3" in text
    text = vec.fails("vector_upsert_embedding", entityName="alpha", embedding=[1, 0])
    assert "2 dimensions" in text and "have 3" in text
    assert "entity 'nobody' not found" in vec.fails(
        "vector_upsert_embedding", entityName="nobody", embedding=[1, 0, 0]
    )
    assert "topK" in vec.fails("vector_search_entities", embedding=Q, topK=101)
    assert "either" in vec.fails("vector_search_entities", embedding=Q, text="river")
    # Nothing changed: alpha keeps its vector.
    assert vec.ok("vector_get_embedding", entityName="alpha")["embedding"] == [1.0, 0.0, 0.0]


def test_batch_upsert_stores_the_good_items_and_reports_each_bad_one(vec: ThreadedClient) -> None:
    vec.ok(
        "create_entities",
        entities=[{"name": f"b{i}", "entityType": "batch", "observations": []} for i in range(3)],
    )
    result = vec.ok(
        "vector_batch_upsert",
        items=[
            {"entityName": "b0", "embedding": [0.1, 0.2, 0.3]},
            {"entityName": "missing", "embedding": [1, 1, 1]},
            {"entityName": "b1", "embedding": [1, 2]},
            {"entityName": "b2", "embedding": [0.5, 0.5, 0.5], "model": "m2"},
        ],
    )
    assert result["upserted"] == 2 and result["failed"] == 2
    assert [(e["index"], e["entityName"]) for e in result["errors"]] == [(1, "missing"), (2, "b1")]
    assert (
        "not found" in result["errors"][0]["error"]
        and "2 dimensions" in result["errors"][1]["error"]
    )
    got = vec.ok("vector_get_embedding", entityName="b2")
    assert got["model"] == "m2" and got["dims"] == 3 and got["embedding"] == [0.5, 0.5, 0.5]
    assert "has no embedding" in vec.fails("vector_get_embedding", entityName="b1")
    assert names(
        vec.ok("vector_search_entities", embedding=[0.1, 0.2, 0.3], topK=1, entityType="batch")
    ) == ["b0"]
    assert "1024" in vec.fails(
        "vector_batch_upsert", items=[{"entityName": "b0", "embedding": [1, 0, 0]}] * 1025
    )
    vec.ok("delete_entities", entityNames=["b0", "b1", "b2"])


def test_more_like_this_and_recommend_leave_the_examples_out(vec: ThreadedClient) -> None:
    # gamma [0.6, 0.8, 0]: delta 0.8, beta 0.748, alpha 0.6, epsilon 0.
    like = vec.ok("vector_search_by_entity", entityName="gamma", topK=4)
    assert names(like) == ["delta", "beta", "alpha", "epsilon"]
    with_self = vec.ok("vector_search_by_entity", entityName="gamma", topK=2, excludeSelf=False)
    assert names(with_self) == ["gamma", "delta"]
    assert "no embedding" in vec.fails("vector_search_by_entity", entityName="river")
    # alpha - delta = [1, -1, 0]: beta 0.551, epsilon 0, gamma -0.141.
    rec = vec.ok("vector_recommend", positive=["alpha"], negative=["delta"], topK=5)
    assert names(rec) == ["beta", "epsilon", "gamma"]
    assert "'nobody'" in vec.fails("vector_recommend", positive=["nobody"])


def test_mmr_trades_relevance_for_novelty_as_lambda_says(vec: ThreadedClient) -> None:
    # lambda 0.5: beta first (most relevant); then delta (0.5 x 0.287 - 0.5 x 0.200 = 0.044)
    # beats gamma (0.028), epsilon (0) and alpha (-0.011, nearly beta); then gamma (0.002) > epsilon (0).
    mmr = vec.ok("vector_mmr_search", embedding=Q, topK=3, **{"lambda": 0.5})
    assert names(mmr) == ["beta", "delta", "gamma"]
    assert mmr["results"][0]["score"] == pytest.approx(cos(Q, CORPUS["beta"][0]), abs=1e-5)
    relevance_only = vec.ok("vector_mmr_search", embedding=Q, topK=3, **{"lambda": 1.0})
    assert names(relevance_only) == ["beta", "alpha", "gamma"]


def test_hybrid_search_fuses_with_rrf_and_boosts_by_degree(vec: ThreadedClient) -> None:
    # Vector ranks: beta 1, alpha 2, gamma 3, delta 4, epsilon 5. Text "river": river 1 (its name),
    # alpha 2, beta 3 (one observation each, ties by age). RRF k = 60, weights 0.5:
    # beta .5/61 + .5/63 = 0.016133 > alpha .5/62 + .5/62 = 0.016129 > river .5/61 > gamma .5/63 > delta.
    fused = vec.ok("hybrid_search", queryText="river", queryEmbedding=Q, topK=5)
    assert names(fused) == ["beta", "alpha", "river", "gamma", "delta"]
    top = fused["results"][0]
    assert (top["vectorRank"], top["textRank"]) == (1, 3)
    assert top["score"] == pytest.approx(0.5 / 61 + 0.5 / 63)
    assert fused["results"][2]["vectorRank"] is None
    text_only = vec.ok(
        "hybrid_search", queryText="river", queryEmbedding=Q, topK=3, vecWeight=0.0, textWeight=1.0
    )
    assert names(text_only) == ["river", "alpha", "beta"]
    # Degrees (gamma 3, the others 1): each score x (1 + degree / 3); gamma 2 x .5/63 = 0.0159 passes
    # delta 1.33 x .5/64 = 0.0104 and river 0.0082 (no relation).
    assert vec.ok("vector_refresh_graph_cache") == {"nodes": 4, "edges": 3}
    boosted = vec.ok(
        "hybrid_search", queryText="river", queryEmbedding=Q, topK=5, centralityBoost=1.0
    )
    assert names(boosted) == ["beta", "alpha", "gamma", "delta", "river"]
    assert boosted["results"][2]["degree"] == 3


def test_delete_embedding_keeps_the_entity_and_delete_entities_drops_the_vector(
    vec: ThreadedClient,
) -> None:
    vec.ok(
        "create_entities",
        entities=[
            {"name": "zeta", "entityType": "place", "observations": ["z"]},
            {"name": "eta", "entityType": "place", "observations": []},
        ],
    )
    vec.ok(
        "vector_batch_upsert",
        items=[
            {"entityName": "zeta", "embedding": [-1, 0, 0]},
            {"entityName": "eta", "embedding": [-1, -0.1, 0]},
        ],
    )
    assert names(vec.ok("vector_search_entities", embedding=[-1, 0, 0], topK=1)) == ["zeta"]
    assert vec.ok("vector_delete_embedding", entityName="zeta") == {
        "entityName": "zeta",
        "deleted": True,
    }
    assert vec.ok("vector_delete_embedding", entityName="zeta")["deleted"] is False
    assert vec.ok("get_entity", name="zeta")["observations"] == ["z"]
    assert names(vec.ok("vector_search_entities", embedding=[-1, 0, 0], topK=1)) == ["eta"]
    vec.ok("delete_entities", entityNames=["eta"])
    assert "eta" not in names(vec.ok("vector_search_entities", embedding=[-1, 0, 0], topK=10))
    stats = vec.ok("vector_store_stats")
    assert stats["embeddings"] == 5 and stats["indexSize"] == 5 and stats["dims"] == 3
    assert (stats["graphNodes"], stats["graphEdges"], stats["backend"]) == (4, 3, "exact")
    vec.ok("delete_entities", entityNames=["zeta"])


def test_merge_entities_keeps_the_index_consistent(vec: ThreadedClient) -> None:
    vec.ok(
        "create_entities",
        entities=[{"name": n, "entityType": "m", "observations": []} for n in ("m1", "m2")],
    )
    vec.ok(
        "vector_batch_upsert",
        items=[
            {"entityName": "m1", "embedding": [0, -1, 0]},
            {"entityName": "m2", "embedding": [0, -1, 0.1]},
        ],
    )
    vec.ok("merge_entities", sources=["m2"], target="m1")
    found = vec.ok("vector_search_entities", embedding=[0, -1, 0.1], topK=5, entityType="m")
    assert names(found) == ["m1"]
    reindexed = vec.ok("vector_reindex")
    assert reindexed["indexed"] == 6 and reindexed["backend"] == "exact"
    vec.ok("delete_entities", entityNames=["m1"])
    assert vec.ok("vector_store_stats")["indexSize"] == 5


@SQLITE_ONLY
async def test_vector_tools_are_served_only_with_vectors_and_the_same_home_works_both_ways(
    tmp_path: Path,
) -> None:
    async with open_client(tmp_path) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        assert not listed & VECTOR_TOOLS and "create_entities" in listed
        await call(
            client,
            "create_entities",
            entities=[{"name": "kept", "entityType": "t", "observations": []}],
        )
        with pytest.raises(MCPError, match="Unknown tool: 'vector_store_stats'"):
            await call(client, "vector_store_stats")
    async with open_client(tmp_path, args=[*FLAGS]) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        assert VECTOR_TOOLS <= listed
        assert not (
            await call(client, "vector_upsert_embedding", entityName="kept", embedding=[0, 1, 0])
        )[0]
    async with open_client(tmp_path, args=["--tools", "vectors"]) as client:
        assert not {t.name for t in (await client.list_tools()).tools} & VECTOR_TOOLS
    async with open_client(tmp_path, args=[*FLAGS, "--tools", "graph-read"]) as client:
        assert not {t.name for t in (await client.list_tools()).tools} & VECTOR_TOOLS
    async with open_client(tmp_path, args=FLAGS) as client:  # the vector survived a plain server
        is_error, got = await call(client, "vector_get_embedding", entityName="kept")
        assert not is_error and got["embedding"] == [0.0, 1.0, 0.0]


@SQLITE_ONLY
def test_another_repository_sees_none_of_these_vectors(
    vec: ThreadedClient, home: Path, tmp_path: Path
) -> None:
    other = make_repo(tmp_path / "repo-two", {"README": "two"})
    with threaded_client(home, cwd=other, args=FLAGS) as two:
        assert two.ok("vector_search_entities", embedding=Q, topK=10)["results"] == []
        assert "not found" in two.fails("vector_get_embedding", entityName="alpha")
        assert "not found" in two.fails(
            "vector_upsert_embedding", entityName="alpha", embedding=[0, 0, 1]
        )
        assert two.ok("vector_store_stats")["embeddings"] == 0
        two.ok(
            "create_entities",
            entities=[{"name": "theirs", "entityType": "place", "observations": []}],
        )
        two.ok("vector_upsert_embedding", entityName="theirs", embedding=Q)
        assert names(two.ok("vector_search_entities", embedding=Q, topK=10)) == ["theirs"]
    assert "theirs" not in names(vec.ok("vector_search_entities", embedding=Q, topK=10))


def model_vectors(home: Path) -> dict[str, list[float]]:
    """The local model's entity vectors the store computed (``vectors``, kind entity), by name."""
    rows = stores.rows(
        home,
        "SELECT e.name, v.vec FROM vectors v JOIN entities e ON e.id = v.item_id WHERE v.kind = 'entity'",
    )
    return {name: list(struct.unpack(f"<{len(blob) // 4}f", blob)) for name, blob in rows}


@SQLITE_ONLY
async def test_text_queries_use_the_local_model_only_at_its_dimension(tmp_path: Path) -> None:
    on = {"MEMTRIO_EMBEDDINGS": "on"}
    async with open_client(
        tmp_path, env=on, args=["--vectors", "--embedding-dims", "384"]
    ) as client:
        ents = [
            {"name": "cats", "entityType": "animal", "observations": []},
            {"name": "relational databases", "entityType": "technology", "observations": []},
            {"name": "rainy weather", "entityType": "climate", "observations": []},
        ]
        assert not (await call(client, "create_entities", entities=ents))[0]
        # Bring-your-own vectors that are the local model's own embeddings of these entities.
        model = model_vectors(tmp_path)
        items = [{"entityName": n, "embedding": v} for n, v in model.items()]
        assert len(items) == 3 and all(len(i["embedding"]) == 384 for i in items)
        assert not (await call(client, "vector_batch_upsert", items=items))[0]
        for text, best in (("a kitten", "cats"), ("SQL query planner", "relational databases"),
                           ("umbrella and rain", "rainy weather")):  # fmt: skip
            is_error, found = await call(client, "vector_search_entities", text=text, topK=3)
            assert not is_error and names(found)[0] == best, found
        # The same query as a vector gives the same answer.
        is_error, by_vector = await call(
            client, "vector_search_entities", embedding=model["cats"], topK=3
        )
        assert names(by_vector)[0] == "cats"
        is_error, found = await call(
            client, "hybrid_search", queryText="weather", text="umbrella and rain", topK=1
        )
        assert not is_error and names(found) == ["rainy weather"]
        is_error, text = await call(client, "vector_search_entities", embedding=[1.0, 0.0], topK=2)
        assert is_error and "2 dimensions" in str(text) and "384" in str(text)
    (tmp_path / "small").mkdir()
    (tmp_path / "off").mkdir()
    async with open_client(tmp_path / "small", env=on, args=FLAGS) as client:
        is_error, text = await call(client, "vector_search_entities", text="cats")
        assert is_error and "384 dimensions" in str(text) and "have 3" in str(text)
    async with open_client(tmp_path / "off", args=FLAGS) as client:
        is_error, text = await call(client, "vector_mmr_search", text="cats")
        assert is_error and "embeddings are off" in str(text)
