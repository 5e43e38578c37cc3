"""memtrio's WordPiece tokenizer gives the ids the Hugging Face ``tokenizers`` library gives.

The expected ids in tests/data/wordpiece_ids.json were made once by ``tokenizers``
(tools/wordpiece_vs_tokenizers.py fixture); this test does not need it. A wrong id
changes every vector the model makes, so recall would rank differently from
the vectors already stored.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from memtrio.actors.embedder import model, wordpiece

FIXTURE = json.loads((Path(__file__).parent / "data" / "wordpiece_ids.json").read_text())


@pytest.fixture(scope="module")
def tokenizer() -> wordpiece.WordPiece:
    loaded = wordpiece.load_tokenizer(model.DEFAULT_VOCAB)
    assert isinstance(loaded, wordpiece.WordPiece)
    return loaded


def test_ids_and_words_of_prose_code_and_unicode_edge_cases(
    tokenizer: wordpiece.WordPiece,
) -> None:
    wrong = []
    for case in FIXTURE["cases"]:
        got = tokenizer.encode(case["text"])
        if (got.ids, got.word_ids) != (case["ids"], case["words"]):
            wrong.append(case["text"][:60])
    assert not wrong, f"{len(wrong)} of {len(FIXTURE['cases'])} texts differ, e.g. {wrong[:5]}"


def test_every_code_point_is_classified_as_tokenizers_does(
    tokenizer: wordpiece.WordPiece,
) -> None:
    size = FIXTURE["chunk"]
    wrong = []
    for start_hex, expected in FIXTURE["code_point_chunks"].items():
        start = int(start_hex, 16)
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


def test_framing_specials_unknown_words_and_the_mask(tokenizer: wordpiece.WordPiece) -> None:
    vocab = tokenizer.vocab
    cls, sep, unk = vocab["[CLS]"], vocab["[SEP]"], vocab["[UNK]"]
    got = tokenizer.encode("Naïve [SEP] " + "x" * 101)
    assert got.ids == [cls, vocab["naive"], sep, unk, sep]
    assert got.special_tokens_mask == [1, 0, 0, 0, 1]  # a [SEP] in the text is not framing
    assert got.word_ids == [None, 0, 1, 2, None]
    assert tokenizer.encode("").ids == [cls, sep]
    pieces = tokenizer.encode("unbelievably").ids[1:-1]
    assert len(pieces) > 1 and all(vocab_id != unk for vocab_id in pieces)


def test_a_bert_tokenizer_json_gives_the_same_ids_as_the_vocabulary(
    tokenizer: wordpiece.WordPiece, tmp_path: Path
) -> None:
    config = {
        "added_tokens": [
            {"id": tokenizer.vocab[t], "content": t, "normalized": False, "special": True}
            for t in wordpiece.BERT_SPECIALS
        ],
        "normalizer": {"type": "BertNormalizer", "lowercase": True, "strip_accents": None},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "BertProcessing", "cls": ["[CLS]", 101], "sep": ["[SEP]", 102]},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": tokenizer.vocab},
    }
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(config))
    from_json = wordpiece.load_tokenizer(path)
    for case in FIXTURE["cases"][:200]:
        assert from_json.encode_batch([case["text"]])[0].ids == case["ids"]


def test_a_tokenizer_json_it_cannot_read_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"model": {"type": "BPE", "vocab": {}, "merges": []}}))
    monkeypatch.setitem(__import__("sys").modules, "tokenizers", None)  # not installed
    with pytest.raises(wordpiece.TokenizerError, match="pip install tokenizers"):
        wordpiece.load_tokenizer(path)
