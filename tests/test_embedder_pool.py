"""The embedder pool: vectors, micro-batching, crash isolation, timeouts, model selection."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trio
from memtrio.actors.embedder import feature as embedder_feature
from memtrio.actors.embedder.handle import (
    EMBEDDER,
    EmbedderCrashed,
    EmbedderTimeout,
    EmbedderUnavailable,
)
from memtrio.actors.embedder.model import DEFAULT_MODEL_ID, default_files, resolve_spec
from memtrio.supervisors import config as config_mod
from memtrio.supervisors import faults
from memtrio.supervisors.app import build_context, open_app
from memtrio.supervisors.context import AppContext


@asynccontextmanager
async def running(home: Path, **embedding: Any) -> AsyncIterator[AppContext]:
    env = {f"MEMTRIO_EMBEDDING_{k.upper()}": str(v) for k, v in embedding.items()}
    cfg = config_mod.load(home, env=env)
    app = build_context(cfg, home)
    async with open_app(app, [embedder_feature.FEATURE]):
        yield app


async def test_embed_returns_normalised_vectors_of_the_default_model(home: Path) -> None:
    async with running(home) as app:
        pool = app.service(EMBEDDER)
        assert pool.model == DEFAULT_MODEL_ID and pool.dim == 384 and len(pool.revision) == 16
        assert not pool.loaded  # lazy: nothing loaded until the first call
        result = await pool.embed(
            [
                "why do logins expire",
                "the auth token refresh decision",
                "we bake sourdough bread on sundays",
            ]
        )
        assert result.vectors.shape == (3, 384) and result.vectors.dtype == np.float32
        assert np.allclose(np.linalg.norm(result.vectors, axis=1), 1.0, atol=1e-5)
        assert result.truncated == [False, False, False]
        assert (result.model, result.revision) == (pool.model, pool.revision)
        sims = result.vectors @ result.vectors.T
        assert sims[0, 1] > sims[0, 2] + 0.2  # paraphrase closer than an unrelated sentence
        # Same text alone and inside a batch of different lengths: same vector.
        alone = await pool.embed(["the auth token refresh decision"])
        assert np.allclose(alone.vectors[0], result.vectors[1], atol=1e-4)


async def test_long_text_is_truncated_and_reported(home: Path) -> None:
    async with running(home) as app:
        pool = app.service(EMBEDDER)
        result = await pool.embed(["word " * 600, "short"])
        assert result.truncated == [True, False]
        assert result.warnings and "truncated" in result.warnings[0]


async def test_long_text_is_embedded_as_overlapping_windows(home: Path) -> None:
    async with running(home, chunk_tokens=16, chunk_overlap=4, max_chunks=3) as app:
        pool = app.service(EMBEDDER)
        # 18 words of one word piece each: windows of 14 (16 with [CLS] and [SEP]).
        text = (
            "one two three four five six seven eight nine ten eleven twelve thirteen "
            "fourteen fifteen sixteen seventeen eighteen"
        )
        result = await pool.embed([text, "short", " ".join([text] * 3)], max_chunks=3)
        assert result.counts == [2, 1, 3] and result.truncated == [False, False, True]
        assert result.vectors.shape == (6, 384) and result.rows(2).shape == (3, 384)
        assert np.allclose(np.linalg.norm(result.vectors, axis=1), 1.0, atol=1e-5)
        # The first window is the first 14 word pieces, as a truncated query would be.
        first = await pool.embed([" ".join(text.split()[:14])])
        assert np.allclose(result.rows(0)[0], first.vectors[0], atol=1e-4)
        # A query (max_chunks 1) stays one vector, cut at max_tokens (256 here).
        assert (await pool.embed([text])).vectors.shape == (1, 384)


def test_window_starts_overlap_and_end_with_the_text() -> None:
    from memtrio.actors.embedder.model import window_starts

    assert window_starts(10, 14, 4, 8) == [0]
    assert window_starts(30, 14, 4, 8) == [0, 10, 16]  # the last one ends at 30
    assert window_starts(100, 14, 4, 3) == [0, 10, 20]  # capped: the rest is cut
    assert window_starts(30, 14, 100, 8) == [0, 7, 14, 16]  # overlap kept below half a window


async def test_concurrent_requests_are_micro_batched(home: Path) -> None:
    async with running(home) as app:
        pool = app.service(EMBEDDER)
        await pool.load()
        results: dict[int, Any] = {}

        async def one(i: int) -> None:
            results[i] = await pool.embed([f"memory number {i} about the build cache"])

        before = pool.batches
        async with trio.open_nursery() as nursery:
            for i in range(24):
                nursery.start_soon(one, i)
        assert len(results) == 24
        assert pool.batches - before < 24  # several requests shared one model call
        single = await pool.embed(["memory number 5 about the build cache"])
        assert np.allclose(single.vectors[0], results[5].vectors[0], atol=1e-4)


async def test_worker_crash_fails_only_its_batch_and_the_worker_restarts(home: Path) -> None:
    async with running(home) as app:
        pool = app.service(EMBEDDER)
        faults.configure("embedder.embed=raise@1")
        with pytest.raises(EmbedderCrashed, match="crashed.*retry"):
            await pool.embed(["first request hits the fault"])
        result = await pool.embed(["the next request succeeds"])
        assert result.vectors.shape == (1, 384)
        workers = app.root.snapshot()[0]["children"]
        assert workers[0]["restarts"] == 1 and workers[0]["state"] == "running"


async def test_a_slow_request_times_out_with_a_clear_error(home: Path) -> None:
    async with running(home, timeout=0.3) as app:
        pool = app.service(EMBEDDER)
        await pool.load()
        faults.configure("embedder.embed=hang@1")  # this encode never returns
        with pytest.raises(EmbedderTimeout, match=r"\[embedding\] timeout"):
            await pool.embed(["this one is stuck"])
        # The stuck batch is abandoned and its worker restarted: the pool serves
        # again (an attempt on a busy machine may itself take over 0.3 s: retry).
        with trio.fail_after(30):
            while True:
                try:
                    assert (await pool.embed(["and this one is fine"])).vectors.shape == (1, 384)
                    break
                except EmbedderTimeout:
                    continue
        assert app.root is not None
        (worker,) = app.root.snapshot()[0]["children"]
        assert worker["restarts"] >= 1 and worker["state"] == "running"


async def test_missing_model_directory_fails_every_call_clearly(home: Path, tmp_path: Path) -> None:
    async with running(home, model=tmp_path / "nope") as app:
        pool = app.service(EMBEDDER)
        with pytest.raises(EmbedderUnavailable, match="does not exist"):
            await pool.embed(["anything"])
        with pytest.raises(EmbedderUnavailable):
            await pool.load()
        assert any("cannot be used" in line for line in app.instructions)


async def test_cuda_backend_without_cuda_fails_instead_of_falling_back(home: Path) -> None:
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this machine has CUDA")
    async with running(home, backend="cuda") as app:
        with pytest.raises(EmbedderUnavailable, match="CUDA"):
            await app.service(EMBEDDER).embed(["anything"])


async def test_a_model_directory_with_config_json(home: Path, tmp_path: Path) -> None:
    model, tokenizer = default_files()
    directory = tmp_path / "my-model"
    directory.mkdir()
    os.symlink(model, directory / "model.onnx")
    os.symlink(tokenizer, directory / "tokenizer.json")
    (directory / "config.json").write_text(
        json.dumps({"name": "mini-cls", "pooling": "cls", "max_tokens": 16, "hidden_size": 384})
    )
    async with running(home, model=directory) as app:
        pool = app.service(EMBEDDER)
        assert (pool.model, pool.max_tokens) == ("mini-cls", 16)
        assert pool.revision == resolve_spec("", 256).revision  # same file, same revision
        result = await pool.embed(
            [
                "a sentence that is certainly longer than sixteen word pieces once it is tokenized by bert",
                "short",
            ]
        )
        assert result.truncated == [True, False]
        assert np.allclose(np.linalg.norm(result.vectors, axis=1), 1.0, atol=1e-5)


async def test_resource_and_instructions_with_embeddings_on_and_off(
    home: Path, tmp_path: Path
) -> None:
    async with running(home) as app:
        body = json.loads(await app.resources["memtrio://embedding"].read(app))
        assert body["model"] == DEFAULT_MODEL_ID and body["dimensions"] == 384
        assert body["max_tokens"] == 256 and len(body["revision"]) == 16
        assert (body["chunk_tokens"], body["max_chunks"]) == (128, 32)
        assert any(DEFAULT_MODEL_ID in line for line in app.instructions)
    other = tmp_path / "off"
    other.mkdir()
    async with running(other, enabled="off") as app:
        assert app.find(EMBEDDER) is None
        body = json.loads(await app.resources["memtrio://embedding"].read(app))
        assert (
            body["model"] is None
            and body["revision"] is None
            and body["max_tokens"] is None
            and body["dimensions"] is None
            and body["chunk_tokens"] is None
        )
        assert any("Embeddings are off" in line for line in app.instructions)


async def test_query_prefix_goes_before_queries_only(home: Path, tmp_path: Path) -> None:
    model, tokenizer = default_files()
    directory = tmp_path / "instructed"
    directory.mkdir()
    os.symlink(model, directory / "model.onnx")
    os.symlink(tokenizer, directory / "tokenizer.json")
    prefix = "Represent this sentence for searching relevant passages: "
    (directory / "config.json").write_text(json.dumps({"name": "q", "query_prefix": prefix}))
    async with running(home, model=directory) as app:
        pool = app.service(EMBEDDER)
        text = "where are the deploy keys kept"
        query = (await pool.embed([text], query=True)).vectors[0]
        stored = (await pool.embed([text], max_chunks=4)).vectors[0]
        plain = (await pool.embed([text])).vectors[0]
        prefixed = (await pool.embed([prefix + text])).vectors[0]
        assert np.allclose(query, prefixed, atol=1e-5)  # the query is embedded after the prefix
        assert np.allclose(stored, plain, atol=1e-5)  # a stored text is not
        assert not np.allclose(query, plain, atol=1e-3)
