"""The tokenizer of an embedding model: Hugging Face ``tokenizers`` reading its ``tokenizer.json``.

Any pipeline ``tokenizers`` reads works (WordPiece, BPE, Unigram, with their
normalizers, pre-tokenizers and templates), and a batch is tokenized in native
code. The default model's ``tokenizer.json`` ships in this package
(``data/``, `model.DEFAULT_TOKENIZER`, built from its vocabulary by
tools/build_default_tokenizer.py);
a model directory may hold its own, or a BERT ``vocab.txt``, which is read as
bert-base-uncased's pipeline (`bert_wordpiece`).

Truncation and padding are turned off whatever the file says: the encoder cuts
token rows into windows and pads its batches itself (`model.OnnxEncoder`).

Importing this module imports ``tokenizers`` (about 15 ms); `model` imports it
when a model loads, not on the way to answering ``initialize``.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import (
    AddedToken,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
)

# bert-base-uncased's special tokens; the first three must be in a BERT vocabulary.
UNK, CLS, SEP = "[UNK]", "[CLS]", "[SEP]"
BERT_SPECIALS = ("[PAD]", UNK, CLS, SEP, "[MASK]")
MAX_WORD_CHARS = 100  # a longer word is [UNK], as in BERT
# Padding tokens by convention, for a tokenizer.json that sets no padding.
PAD_TOKENS = ("[PAD]", "<pad>", "<|endoftext|>", "</s>")


class TokenizerError(ValueError):
    """A tokenizer file that cannot be read; the message names it and says why."""


def load_tokenizer(path: Path) -> tuple[Tokenizer, int]:
    """The tokenizer in ``path`` (a ``tokenizer.json``, or a BERT vocabulary ``*.txt``)
    and the id to pad its rows with (`pad_id`).

    Error handling: raises `TokenizerError` (one line) for a file that is
    missing, unreadable, or not a tokenizer.
    """
    try:
        if path.suffix == ".txt":
            tokenizer = bert_wordpiece(models.WordPiece.read_file(str(path)))
        else:
            tokenizer = Tokenizer.from_file(str(path))
    except TokenizerError as exc:
        raise TokenizerError(f"{path}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the Rust side raises plain Exception
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise TokenizerError(f"cannot read tokenizer {path}: {reason}") from None
    pad = pad_id(tokenizer)
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer, pad


def pad_id(tokenizer: Tokenizer) -> int:
    """The id to pad rows with: the file's padding id, a conventional pad token's, or 0.

    Padding is masked out of attention and pooling, so the id only has to exist.
    """
    padding = tokenizer.padding
    if padding and isinstance(padding.get("pad_id"), int):
        return int(padding["pad_id"])
    for token in PAD_TOKENS:
        found = tokenizer.token_to_id(token)
        if found is not None:
            return found
    return 0


def bert_wordpiece(vocab: dict[str, int]) -> Tokenizer:
    """bert-base-uncased's pipeline over ``vocab`` (token -> id), as its tokenizer.json has it.

    BertNormalizer (control characters removed, whitespace made a space, spaces
    around CJK ideographs, accents stripped, lower case), BertPreTokenizer (split
    at whitespace and punctuation), WordPiece (longest pieces first, ``##`` before
    a continuation, ``[UNK]`` for a word with no cut or over 100 characters), the
    special tokens written in a text kept whole, and ``[CLS] ... [SEP]`` around it.

    Error handling: raises `TokenizerError` when ``vocab`` lacks ``[UNK]``,
    ``[CLS]`` or ``[SEP]``.
    """
    missing = [t for t in (UNK, CLS, SEP) if t not in vocab]
    if missing:
        raise TokenizerError(f"the vocabulary lacks {', '.join(missing)}")
    tokenizer = Tokenizer(
        models.WordPiece(
            vocab,
            unk_token=UNK,
            continuing_subword_prefix="##",
            max_input_chars_per_word=MAX_WORD_CHARS,
        )
    )
    tokenizer.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in BERT_SPECIALS if t in vocab]
    )
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{CLS} $A {SEP}",
        pair=f"{CLS} $A {SEP} $B:1 {SEP}:1",
        special_tokens=[(CLS, vocab[CLS]), (SEP, vocab[SEP])],
    )
    tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    return tokenizer
