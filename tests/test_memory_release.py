"""Memory a burst of large requests takes is given back: the real server's RSS
returns near its baseline (defect 10). Embeddings are on: the growth was native
(onnxruntime's arena, the tokenizer on whole 1 MB texts, glibc's heap)."""

from __future__ import annotations

import contextlib
import random
import string
from pathlib import Path
from typing import Any

import pytest
import trio
import waits
from memtrio.actors.embedder import model
from raw_server import RawServer, raw_server

EMBEDDINGS_ON = {"MEMTRIO_EMBEDDINGS": "on"}


def rss_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS")


def prose(size: int, seed: int) -> str:
    """``size`` characters of made-up words (many tokens: every window is filled)."""
    rng = random.Random(seed)
    words = [
        "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9)))
        for _ in range(5000)
    ]
    out: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(words)
        out.append(word)
        length += len(word) + 1
    return " ".join(out)[:size]


class RecordingTokenizer:
    """Delegates to the real tokenizer and records the length of every text it is given."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.lengths: list[int] = []

    def encode_batch(self, texts: list[str]) -> Any:
        self.lengths.extend(len(t) for t in texts)
        return self.inner.encode_batch(texts)


@pytest.fixture(scope="module")
def encoder() -> model.OnnxEncoder:
    return model.OnnxEncoder(model.resolve_spec("", 256), "cpu", intra_op_threads=1)


def test_defect10_a_long_text_is_tokenized_only_as_far_as_its_windows_reach(
    encoder: model.OnnxEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = [
        prose(1_000_000, 3),
        "x" * 50_000,  # one word: the cut keeps nothing, so longer cuts are tried
        "\u8bb0\u5fc6" * 20_000,  # CJK: a token per character
        "a, b; (c) " * 3000,
        "short",
    ]
    recorder = RecordingTokenizer(encoder._tokenizer)
    monkeypatch.setattr(encoder, "_tokenizer", recorder)
    bounded = encoder.windows(texts, 32, 32, 128)
    assert max(recorder.lengths) < 100_000  # never the 1 MB text whole
    # The same windows and truncation as from whole texts (cuts made longer than any text).
    monkeypatch.setattr(model, "CHARS_PER_TOKEN", 10**9)
    assert bounded == encoder.windows(texts, 32, 32, 128)
    assert bounded[1] == [32, 1, 32, 32, 1] and bounded[2] == [True, False, True, True, False]


async def remember(server: RawServer, rid: int, content: str) -> None:
    await server.send_request(
        rid, "tools/call", {"name": "remember", "arguments": {"content": content}}
    )


async def warm_up(server: RawServer) -> int:
    """Load the model and serve a recall; the server's RSS (MB) then."""
    await server.initialize()
    await remember(server, 1, "warm up: loads the embedding model " * 4)
    assert not (await server.read(timeout=120))["result"]["isError"]
    await server.send_request(
        2, "tools/call", {"name": "recall", "arguments": {"query": "warm up"}}
    )
    assert not (await server.read(timeout=120))["result"]["isError"]
    return rss_mb(server.process.pid)


async def settled_rss(pid: int, bound: int, within: float = 20.0) -> int:
    """The RSS once it is at most ``bound`` MB, or the last reading after ``within`` s."""
    with contextlib.suppress(trio.TooSlowError):
        await waits.until(lambda: rss_mb(pid) <= bound, within, 0.2)
    return rss_mb(pid)


async def test_defect10_one_long_memory_does_not_keep_the_server_larger(home: Path) -> None:
    # One 64 KB memory fills 32 windows of 128 tokens: one batch of the model's biggest
    # shape, which left onnxruntime's arena ~220 MB larger for good.
    async with raw_server(home, env=EMBEDDINGS_ON, fork=False) as server:
        baseline = await warm_up(server)
        await remember(server, 3, prose(64_000, 1))
        reply = await server.read(timeout=120)
        assert not reply["result"]["isError"], reply
        after = await settled_rss(server.process.pid, baseline + 100, within=10.0)
    assert after <= baseline + 100, f"RSS {baseline} MB -> {after} MB"


@pytest.mark.slow
async def test_defect10_memory_returns_after_burst(home: Path) -> None:
    # Five concurrent ~1 MB memories took the server from ~260 to ~860 MB for good.
    async with raw_server(home, env=EMBEDDINGS_ON, fork=False) as server:
        baseline = await warm_up(server)
        for round_ in range(2):  # a second burst must not ratchet it up either
            for k in range(5):
                await remember(server, 10 * round_ + 10 + k, prose(1_000_000, 10 * round_ + k))
            for _ in range(5):
                reply = await server.read(timeout=300)
                assert not reply["result"]["isError"], reply
            after = await settled_rss(server.process.pid, baseline + 150)
            assert after <= baseline + 150, f"round {round_}: RSS {baseline} MB -> {after} MB"
