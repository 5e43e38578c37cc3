"""The embedder's tokenizer gives the ids it always gave, and reads any model's tokenizer.json.

The expected ids in tests/data/wordpiece_ids.json were made once by ``tokenizers``
0.23.3 from the ``tokenizer.json`` of sentence-transformers/all-MiniLM-L6-v2 (the
file memtrio's own WordPiece tokenizer was checked against, before ``tokenizers``
replaced it). A wrong id changes every vector the model makes, so recall would
rank differently from the vectors already stored.

Every code point is checked with ``-m slow``; the default run checks the first two
planes only (`EVERYDAY_PLANES_END`: every script in use, symbols and emoji), an eighth
of the time.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
import zygote
from memtrio.actors.embedder import model
from memtrio.actors.embedder.tokenizer import BERT_SPECIALS, TokenizerError, load_tokenizer
from memtrio.actors.store.sqlite.db import db_path
from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = json.loads((Path(__file__).parent / "data" / "wordpiece_ids.json").read_text())


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    """The default model's tokenizer, from where the embedder finds it."""
    loaded, pad = load_tokenizer(model.resolve_spec("", 256).tokenizer_path)
    assert pad == loaded.token_to_id("[PAD]") == 0
    return loaded


def test_ids_and_words_of_prose_code_and_unicode_edge_cases(tokenizer: Tokenizer) -> None:
    wrong = []
    texts = [case["text"] for case in FIXTURE["cases"]]
    for case, got in zip(FIXTURE["cases"], tokenizer.encode_batch(texts), strict=True):
        if (got.ids, got.word_ids) != (case["ids"], case["words"]):
            wrong.append(case["text"][:60])
    assert not wrong, f"{len(wrong)} of {len(FIXTURE['cases'])} texts differ, e.g. {wrong[:5]}"


# The default run checks the code points of the first two planes, U+0000..U+1FFFF (every
# script in use, the symbols and the emoji: 32 of the 272 chunks); `-m slow` checks the
# rest too (CJK extensions, private use, unassigned: 88% of the code points, 88% of the
# time).
EVERYDAY_PLANES_END = 0x20000


@pytest.mark.parametrize(
    "planes",
    ["everyday", pytest.param("the-rest", marks=pytest.mark.slow)],
)
def test_every_code_point_is_tokenized_as_before(tokenizer: Tokenizer, planes: str) -> None:
    size = FIXTURE["chunk"]
    wrong = []
    for start_hex, expected in FIXTURE["code_point_chunks"].items():
        start = int(start_hex, 16)
        if (start < EVERYDAY_PLANES_END) != (planes == "everyday"):
            continue
        text = " ".join(
            "a" + chr(cp) + "b" for cp in range(start, start + size) if not 0xD800 <= cp <= 0xDFFF
        )
        got = tokenizer.encode(text)
        if (
            hashlib.sha256(json.dumps([got.ids, got.word_ids]).encode()).hexdigest()[:16]
            != expected
        ):
            wrong.append(f"U+{start:04X}..U+{start + size - 1:04X}")
    assert not wrong, f"code points tokenized differently in {wrong}"


def test_framing_specials_unknown_words_and_the_mask(tokenizer: Tokenizer) -> None:
    vocab = tokenizer.get_vocab()
    cls, sep, unk = vocab["[CLS]"], vocab["[SEP]"], vocab["[UNK]"]
    got = tokenizer.encode("Naïve [SEP] " + "x" * 101)
    assert got.ids == [cls, vocab["naive"], sep, unk, sep]
    assert got.special_tokens_mask == [1, 0, 0, 0, 1]  # a [SEP] in the text is not framing
    assert got.word_ids == [None, 0, 1, 2, None]
    assert tokenizer.encode("").ids == [cls, sep]
    pieces = tokenizer.encode("unbelievably").ids[1:-1]
    assert len(pieces) > 1 and all(vocab_id != unk for vocab_id in pieces)
    long = tokenizer.encode("word " * 1000)  # no truncation, whatever a tokenizer.json says
    assert len(long.ids) == 1002


def test_a_bert_vocab_txt_gives_the_same_ids_as_the_shipped_tokenizer(
    tokenizer: Tokenizer, tmp_path: Path
) -> None:
    vocab = tokenizer.get_vocab()
    path = tmp_path / "vocab.txt"
    path.write_text("".join(t + "\n" for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])))
    from_txt, pad = load_tokenizer(path)
    assert pad == 0
    texts = [case["text"] for case in FIXTURE["cases"][:300]]
    got = from_txt.encode_batch(texts)
    assert [e.ids for e in got] == [c["ids"] for c in FIXTURE["cases"][:300]]
    assert sorted(t for t in BERT_SPECIALS if from_txt.token_to_id(t) is not None) == sorted(
        BERT_SPECIALS
    )


def test_a_lone_surrogate_does_not_fail_the_batch_it_is_in() -> None:
    # tokenizers refuses a str no UTF-8 can hold; the embedder must not lose the batch.
    encoder = model.OnnxEncoder(model.resolve_spec("", 256), "cpu", intra_op_threads=1)
    rows, truncated = encoder.tokenize(["a\ud800b", "the other texts of the batch"])
    assert rows == encoder.tokenize(["a?b", "the other texts of the batch"])[0]
    assert truncated == [False, False]


def test_the_shipped_tokenizer_json_is_what_the_build_tool_builds() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_default_tokenizer.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_unreadable_tokenizer_json_is_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"model": {"type": "NoSuchModel"}}))
    with pytest.raises(TokenizerError, match=r"cannot read tokenizer .*tokenizer\.json") as info:
        load_tokenizer(path)
    assert "\n" not in str(info.value)
    bad_vocab = tmp_path / "vocab.txt"
    bad_vocab.write_text("hello\nworld\n")
    with pytest.raises(TokenizerError, match=r"lacks \[UNK\], \[CLS\], \[SEP\]"):
        load_tokenizer(bad_vocab)


# -- a model of one's own, with a tokenizer that is not BERT's ---------------------------

CORPUS = [
    "the deploy script needs the staging token",
    "staging mirrors production data every night",
    "feature flags guard risky changes to the deploy",
    "the token rotates weekly; the script reads it from the vault",
] * 20


def bpe_tokenizer() -> Tokenizer:
    """A tiny byte-pair-encoding tokenizer trained here (no download), framed like RoBERTa."""
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.Whitespace()
    bpe.train_from_iterator(
        CORPUS,
        trainers.BpeTrainer(
            vocab_size=120, special_tokens=["<s>", "<pad>", "</s>", "<unk>"], show_progress=False
        ),
    )
    bpe.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    return bpe


def unigram_tokenizer() -> Tokenizer:
    """A tiny Unigram tokenizer trained here (the kind of e5-multilingual and bge-m3)."""
    unigram = Tokenizer(models.Unigram())
    unigram.pre_tokenizer = pre_tokenizers.Metaspace()
    unigram.train_from_iterator(
        CORPUS,
        trainers.UnigramTrainer(
            vocab_size=200,
            special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
            unk_token="<unk>",
            show_progress=False,
        ),
    )
    unigram.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    return unigram


def model_dir(tmp_path: Path, own: Tokenizer, name: str) -> Path:
    """A model directory: the bundled model.onnx with ``own`` as its tokenizer.json."""
    directory = tmp_path / name
    directory.mkdir()
    onnx, _ = model.default_files()
    os.symlink(onnx, directory / "model.onnx")
    own.save(str(directory / "tokenizer.json"))
    (directory / "config.json").write_text(json.dumps({"name": name}))
    return directory


def cli(home: Path, directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTRIO_")}
    env |= {
        "MEMTRIO_HOME": str(home),
        "MEMTRIO_EMBEDDINGS": "on",
        "MEMTRIO_EMBEDDING_MODEL": str(directory),
    }
    return subprocess.run(
        zygote.command(args), env=env, capture_output=True, text=True, timeout=120, check=False
    )


def stored_vector(home: Path, model_id: str) -> np.ndarray:
    conn = sqlite3.connect(str(db_path(home)))
    try:
        rows = conn.execute("SELECT model, dim, vec FROM vectors WHERE kind = 'memory'").fetchall()
    finally:
        conn.close()
    assert [(m, d) for m, d, _ in rows] == [(model_id, 384)]
    return np.frombuffer(rows[0][2], dtype="<f4")


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_a_custom_model_with_a_bpe_or_unigram_tokenizer_json_needs_no_extra_install(
    tmp_path: Path, kind: str
) -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.startswith("tokenizers") for d in declared)  # installed with memtrio
    own = bpe_tokenizer() if kind == "bpe" else unigram_tokenizer()
    directory = model_dir(tmp_path, own, f"own-{kind}")
    home = tmp_path / "home"
    text = "the deploy script reads the staging token"
    done = cli(home, directory, "remember", text)
    assert done.returncode == 0, done.stderr
    # The stored vector is the model run on this tokenizer's ids, not on BERT's.
    encoder = model.OnnxEncoder(model.resolve_spec(str(directory), 256), "cpu")
    ids = own.encode(text).ids
    assert ids[0] == 0 and ids[-1] == 2  # framed by <s> ... </s>, as its template says
    expected = encoder.run([ids])[0]
    got = stored_vector(home, f"own-{kind}")
    assert np.allclose(got, expected, atol=1e-6)
    assert encoder._pad_id == own.token_to_id("<pad>") == 1
    together = encoder.encode([text, "token"])[0]  # padded with <pad> in one batch
    assert np.allclose(together[0], expected, atol=1e-5)
    bert = model.OnnxEncoder(model.resolve_spec("", 256), "cpu").encode([text])[0][0]
    assert not np.allclose(got, bert, atol=1e-3)


def test_a_custom_model_without_a_tokenizer_json_is_refused_in_one_line(tmp_path: Path) -> None:
    directory = tmp_path / "no-tokenizer"
    directory.mkdir()
    os.symlink(model.default_files()[0], directory / "model.onnx")
    done = cli(tmp_path / "home", directory, "reembed")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert "has no tokenizer.json" in done.stderr and "next to its model.onnx" in done.stderr
