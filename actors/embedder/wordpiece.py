"""The BERT WordPiece tokenizer, in Python: the token ids the Hugging Face ``tokenizers``
library gives for a BERT ``tokenizer.json``, without that library (which brings
huggingface-hub and hf-xet) and without the network.

The pipeline is BERT's: the special tokens (``[CLS]``, ``[SEP]``, ...) written in
the text are taken as they are; the rest is normalized (BertNormalizer: control
characters removed, whitespace made a space, spaces around CJK ideographs, accents
stripped, lower case), split at whitespace and punctuation (BertPreTokenizer),
each word cut greedily into the longest pieces of the vocabulary (``##`` before
a piece that continues a word; a word with no cut, or longer than 100 characters,
is ``[UNK]``), and framed as ``[CLS] ... [SEP]``. No truncation or padding: the
encoder cuts token rows into windows itself.

The character classes are those of ``tokenizers`` (`unicode_tables`), so the ids
are the same to the last code point; tests/test_wordpiece.py holds ids made by
``tokenizers`` for a corpus of prose, code and Unicode edge cases.

`load_tokenizer` reads a vocabulary file (one token a line, the line number its
id) or a ``tokenizer.json`` whose pipeline is BERT's; another pipeline needs the
``tokenizers`` package, used then if it is installed.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from memtrio.actors.embedder import unicode_tables

# Words whose pieces are kept; the vocabulary of prose and code repeats a few
# thousand words, and a cached word costs a dict lookup instead of a search.
WORD_CACHE = 16384
MAX_WORD_CHARS = 100
CONTINUATION = "##"
# The special tokens of bert-base-uncased (the default model's vocabulary).
BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


class TokenizerError(ValueError):
    """A tokenizer file that cannot be read, or a pipeline this module does not implement."""


class Encoding(Protocol):
    """What the encoder reads of a tokenized text (a ``tokenizers.Encoding`` has it too)."""

    @property
    def ids(self) -> list[int]: ...
    @property
    def special_tokens_mask(self) -> list[int]: ...
    @property
    def word_ids(self) -> list[int | None]: ...


class Tokenizer(Protocol):
    def encode_batch(self, texts: list[str]) -> list[Encoding]: ...


@dataclass(frozen=True, slots=True)
class Encoded:
    """Token ids of one text, which are special (1: added around the text), and the
    word each token came from (None for the added ones)."""

    ids: list[int]
    special_tokens_mask: list[int]
    word_ids: list[int | None]


def _char_class(runs: tuple[tuple[int, int], ...]) -> str:
    """The body of a regex character class matching the code points of ``runs``."""
    return "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in runs)


_CONTROL = re.compile(f"[{_char_class(unicode_tables.CONTROL)}]")
_SPACE = re.compile(f"[{_char_class(unicode_tables.SPACE)}]")
_MARK = re.compile(f"[{_char_class(unicode_tables.NONSPACING_MARK)}]")
_CJK = re.compile(
    "[\u4e00-\u9fff\u3400-\u4dbf\U00020000-\U0002a6df\U0002a700-\U0002b73f"
    "\U0002b740-\U0002b81f\U0002b920-\U0002ceaf\uf900-\ufaff\U0002f800-\U0002fa1f]"
)
_PUNCT = _char_class(unicode_tables.PUNCTUATION)
_WORD = re.compile(f"[^{_char_class(unicode_tables.SPACE)}{_PUNCT}]+|[{_PUNCT}]")
# ASCII control characters: removed, except tab, newline and CR, which are spaces.
_ASCII_CLEAN = {cp: None for cp in (*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F)}
_ASCII_CLEAN.update({0x09: " ", 0x0A: " ", 0x0D: " "})
_LOWER = {cp: text for cp, text in unicode_tables.LOWERCASE.items()}


@dataclass(frozen=True)
class Normalizer:
    """BertNormalizer's four steps, each optional as in ``tokenizer.json``."""

    clean_text: bool = True
    handle_chinese_chars: bool = True
    strip_accents: bool = True
    lowercase: bool = True

    def __call__(self, text: str) -> str:
        if text.isascii():
            if self.clean_text:
                text = text.translate(_ASCII_CLEAN)
            return text.lower() if self.lowercase else text
        if self.clean_text:
            text = _SPACE.sub(" ", _CONTROL.sub("", text))
        if self.handle_chinese_chars:
            text = _CJK.sub(r" \g<0> ", text)
        if self.strip_accents:
            text = _MARK.sub("", unicodedata.normalize("NFD", text))
        if self.lowercase:
            # Character by character (Rust's char::to_lowercase): str.lower() alone
            # would make a final sigma "ς".
            text = text.translate(_LOWER)
            text = "".join(c.lower() for c in text) if "\u03a3" in text else text.lower()
        return text


class WordPiece:
    """A BERT WordPiece tokenizer over a vocabulary (token -> id)."""

    def __init__(
        self,
        vocab: dict[str, int],
        normalizer: Normalizer | None = None,
        unk: str = "[UNK]",
        prefix: tuple[str, ...] = ("[CLS]",),
        suffix: tuple[str, ...] = ("[SEP]",),
        specials: tuple[str, ...] = BERT_SPECIALS,
        max_word_chars: int = MAX_WORD_CHARS,
        continuation: str = CONTINUATION,
    ) -> None:
        missing = [t for t in (unk, *prefix, *suffix) if t not in vocab]
        if missing:
            raise TokenizerError(f"the vocabulary lacks {', '.join(missing)}")
        self.vocab = vocab
        self.normalize = normalizer or Normalizer()
        self._unk = (vocab[unk],)
        self._prefix = [vocab[t] for t in prefix]
        self._suffix = [vocab[t] for t in suffix]
        self._max_word_chars = max_word_chars
        self._continuation = continuation
        self.pad_id = vocab.get("[PAD]", 0)
        present = sorted((t for t in specials if t in vocab), key=len, reverse=True)
        self._specials = re.compile("|".join(map(re.escape, present))) if present else None
        self._special_starts = frozenset(t[0] for t in present if t)
        self.pieces = functools.lru_cache(maxsize=WORD_CACHE)(self._pieces)

    def _pieces(self, word: str) -> tuple[int, ...]:
        """The ids of ``word``'s longest-first pieces, or ``[UNK]`` if it has no cut."""
        vocab = self.vocab
        whole = vocab.get(word)
        if whole is not None:
            return (whole,)
        if len(word) > self._max_word_chars:
            return self._unk
        out: list[int] = []
        start, length = 0, len(word)
        while start < length:
            end = length
            while end > start:
                piece = word[start:end] if start == 0 else self._continuation + word[start:end]
                found = vocab.get(piece)
                if found is not None:
                    out.append(found)
                    break
                end -= 1
            else:
                return self._unk
            start = end
        return tuple(out)

    def encode(self, text: str) -> Encoded:
        """The ids of ``text`` between the special tokens that frame it."""
        ids = list(self._prefix)
        words: list[int | None] = [None] * len(ids)
        word = 0
        pieces = self.pieces
        for segment, special in self._segments(text):
            if special is not None:
                ids.append(special)
                words.append(word)
                word += 1
                continue
            for match in _WORD.finditer(self.normalize(segment)):
                found = pieces(match.group())
                ids.extend(found)
                words.extend([word] * len(found))
                word += 1
        body = len(ids) - len(self._prefix)
        ids.extend(self._suffix)
        words.extend([None] * len(self._suffix))
        mask = [1] * len(self._prefix) + [0] * body + [1] * len(self._suffix)
        return Encoded(ids, mask, words)

    def _segments(self, text: str) -> list[tuple[str, int | None]]:
        """``text`` cut at the special tokens written in it: (text, None) or (token, id)."""
        if self._specials is None or not any(c in text for c in self._special_starts):
            return [(text, None)]
        out: list[tuple[str, int | None]] = []
        head = 0
        for match in self._specials.finditer(text):
            if match.start() > head:
                out.append((text[head : match.start()], None))
            out.append((match.group(), self.vocab[match.group()]))
            head = match.end()
        if head < len(text):
            out.append((text[head:], None))
        return out

    def encode_batch(self, texts: list[str]) -> list[Encoding]:
        return [self.encode(text) for text in texts]


def read_vocab(path: Path) -> dict[str, int]:
    """A vocabulary file: one token a line, its id the line's number from 0."""
    with open(path, encoding="utf-8", newline="\n") as fh:
        tokens = fh.read().split("\n")
    if tokens and tokens[-1] == "":
        tokens.pop()
    return {token: i for i, token in enumerate(tokens)}


def from_tokenizer_json(config: dict[str, object]) -> WordPiece:
    """A `WordPiece` from a ``tokenizer.json`` describing BERT's pipeline.

    Error handling: raises `TokenizerError` naming the first part that is not BERT's.
    """
    model = config.get("model")
    normalizer = config.get("normalizer")
    pre = config.get("pre_tokenizer")
    post = config.get("post_processor")
    if not isinstance(model, dict) or model.get("type") != "WordPiece":
        raise TokenizerError(f"model is {_kind(model)}, not WordPiece")
    if not isinstance(normalizer, dict) or normalizer.get("type") != "BertNormalizer":
        raise TokenizerError(f"normalizer is {_kind(normalizer)}, not BertNormalizer")
    if not isinstance(pre, dict) or pre.get("type") != "BertPreTokenizer":
        raise TokenizerError(f"pre_tokenizer is {_kind(pre)}, not BertPreTokenizer")
    vocab = model.get("vocab")
    if not isinstance(vocab, dict):
        raise TokenizerError("model.vocab is not an object")
    lowercase = bool(normalizer.get("lowercase", True))
    strip = normalizer.get("strip_accents")
    added = config.get("added_tokens") or []
    specials = tuple(
        str(t["content"])
        for t in added  # type: ignore[union-attr]
        if isinstance(t, dict) and not t.get("normalized", True) and not t.get("single_word")
    )
    if any(
        isinstance(t, dict) and (t.get("normalized", True) or t.get("lstrip") or t.get("rstrip"))
        for t in added  # type: ignore[union-attr]
    ):
        raise TokenizerError("added_tokens other than plain special tokens")
    prefix, suffix = _template(post)
    return WordPiece(
        {str(k): int(v) for k, v in vocab.items()},
        Normalizer(
            clean_text=bool(normalizer.get("clean_text", True)),
            handle_chinese_chars=bool(normalizer.get("handle_chinese_chars", True)),
            strip_accents=lowercase if strip is None else bool(strip),
            lowercase=lowercase,
        ),
        unk=str(model.get("unk_token", "[UNK]")),
        prefix=prefix,
        suffix=suffix,
        specials=specials,
        max_word_chars=int(model.get("max_input_chars_per_word", MAX_WORD_CHARS)),
        continuation=str(model.get("continuing_subword_prefix", CONTINUATION)),
    )


def _kind(part: object) -> str:
    return repr(part.get("type")) if isinstance(part, dict) else "missing"


def _template(post: object) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The special tokens before and after a single text (BertProcessing or TemplateProcessing)."""
    if isinstance(post, dict) and post.get("type") == "BertProcessing":
        return (str(post["cls"][0]),), (str(post["sep"][0]),)
    if isinstance(post, dict) and post.get("type") == "TemplateProcessing":
        before: list[str] = []
        after: list[str] = []
        seen_text = False
        for item in post.get("single") or []:
            if "Sequence" in item:
                seen_text = True
            elif "SpecialToken" in item:
                (after if seen_text else before).append(str(item["SpecialToken"]["id"]))
        return tuple(before), tuple(after)
    raise TokenizerError(
        f"post_processor is {_kind(post)}, not BertProcessing or TemplateProcessing"
    )


def load_tokenizer(path: Path) -> Tokenizer:
    """The tokenizer in ``path``: a ``.txt`` vocabulary (bert-base-uncased's pipeline) or a
    ``tokenizer.json``; a non-BERT ``tokenizer.json`` goes to the ``tokenizers`` package.

    Error handling: raises `TokenizerError` saying what is wrong or what to install.
    """
    if path.suffix == ".txt":
        try:
            return WordPiece(read_vocab(path))
        except (OSError, UnicodeDecodeError) as exc:
            raise TokenizerError(f"cannot read vocabulary {path}: {exc}") from None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TokenizerError(f"cannot read tokenizer {path}: {exc}") from None
    if not isinstance(config, dict):
        raise TokenizerError(f"{path}: expected a JSON object")
    try:
        return from_tokenizer_json(config)
    except TokenizerError as unsupported:
        return _library_tokenizer(path, unsupported)
    except (KeyError, TypeError, ValueError) as exc:
        raise TokenizerError(f"{path}: malformed BERT tokenizer ({exc!r})") from None


def _library_tokenizer(path: Path, why: TokenizerError) -> Tokenizer:
    """A non-BERT pipeline, through the ``tokenizers`` package when it is installed."""
    try:
        from tokenizers import Tokenizer as Library
    except ImportError:
        raise TokenizerError(
            f"{path}: {why}; memtrio reads BERT WordPiece tokenizers itself, "
            "others need the tokenizers package (pip install tokenizers)"
        ) from None
    try:
        library = Library.from_file(str(path))
    except Exception as exc:  # noqa: BLE001 - the Rust error types are not importable
        raise TokenizerError(f"cannot read tokenizer {path}: {exc}") from None
    library.no_padding()
    library.no_truncation()
    return library  # type: ignore[return-value]
