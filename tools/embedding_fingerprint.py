"""Do two versions of memtrio give the same embeddings? Dump them with each, then compare.

    python3 tools/embedding_fingerprint.py dump OUT.npz [--texts N]
        Embeds a fixed set of varied texts (prose, code, accents, CJK, emoji, control
        characters, special tokens written in the text, long texts cut at the token
        limit and long texts cut into windows) with the bundled model, through
        `OnnxEncoder` as the embedder calls it, and writes the token rows and vectors.

    python3 tools/embedding_fingerprint.py compare OLD.npz NEW.npz
        Counts the texts whose token rows differ and the largest difference between
        vectors; exit 1 if any row differs or a vector moves by more than 1e-6.

    python3 tools/embedding_fingerprint.py speed
        Wall and CPU time of tokenizing a batch (`OnnxEncoder.tokenize`, as the
        embedder does before each model run) and of loading the model.

Run ``dump`` from each checkout with its own interpreter (the text set is built
here, from a fixed seed, so both dumps embed the same texts), e.g.
``/old/venv/bin/python tools/embedding_fingerprint.py dump old.npz``.
Uses only `resolve_spec` and `OnnxEncoder.{tokenize,windows,run_rows}`, which
every version since issue #16 has.
"""

from __future__ import annotations

import argparse
import ast
import random
import statistics
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np
from memtrio.actors.embedder.model import OnnxEncoder, resolve_spec

MAX_TOKENS = 256  # [embedding] max_tokens's default
WINDOW, OVERLAP, MAX_CHUNKS = 128, 16, 4  # [embedding] chunk_tokens and a few windows

EDGE_CASES = [
    "remember that the deploy script needs the staging token",
    "x" * 99,
    "x" * 100,
    "x" * 101,
    "é" * 101,
    "e\u0301" * 51,
    "ΣΑΣ ΣΑΣ. Σ Σίσυφος ΟΔΥΣΣΕΥΣ",
    "İIıi İstanbul",
    "ﬁnancial ﬀ Ǆ ǅ ß ẞ Straße",
    "🙂👍🏽👨\u200d👩\u200d👧 🥲 🫠 emoji🎉inside",
    "\x00\x01\t\n\r\x0b\x0c\x1f\x7f\x85\u200b\u200d\ufeff\ufffd end",
    "日本語のテキスト、中文文本。한국어 텍스트",
    "[CLS][SEP][PAD][MASK][UNK]",
    "[cls] [ SEP ] [SEP a[SEP]b[SEP]",
    "naïve café résumé Ångström Ørsted Łódź",
    "C++ C# f(x)=y^2; a->b; #include <stdio.h> x_y__z 3.14e-10",
    "٣٤٥ Ⅻ ½ ² ⁴ ﾊﾝｶｸ ＡＢＣ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐁𝐨𝐥𝐝",
    "\U00020000\U0002a6df\U0002b820\U0002ceb0\U00030000 a\u00adb",
    "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǫ̗͕̂",
    "",
    "   \t\n ",
    "supercalifragilisticexpialidocious " * 3,
    "Die Straße führt über die Brücke; Ça va? ¿Qué pasa? Ωμέγα",
    "Привет, мир! Съешь же ещё этих мягких французских булок",
    "مرحبا بالعالم — שלום עולם — नमस्ते दुनिया — สวัสดีชาวโลก",
    "def f(x: int) -> list[str]:\n    return [str(i) for i in range(x)]  # 🐍",
]


def stdlib_docstrings(count: int, rng: random.Random) -> list[str]:
    docs: list[str] = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef):
                doc = ast.get_docstring(node, clean=False)
                if doc and len(doc) > 20:
                    docs.append(doc)
    rng.shuffle(docs)
    return sorted(docs[:count], key=len)


def random_unicode(count: int, rng: random.Random) -> list[str]:
    planes = [(0x20, 0x2FF), (0x370, 0x52F), (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0x1F300, 0x1FAFF)]
    out = []
    for _ in range(count):
        chars = []
        for _ in range(rng.randint(1, 60)):
            lo, hi = rng.choice(planes)
            chars.append(chr(rng.randint(lo, hi)) if rng.random() > 0.15 else " ")
        out.append("".join(chars))
    return out


def long_texts(rng: random.Random, docs: list[str]) -> list[str]:
    """Texts far over the token limit: cut at it, or cut into windows."""
    joined = "\n\n".join(docs)
    out = [joined[i * 5000 : i * 5000 + rng.randint(3000, 20000)] for i in range(8)]
    out.append("internationalization " * 3000)
    out.append("日本語のテキスト、中文文本。" * 400)
    out.append(("naïve café 🙂 " * 50 + "x" * 150 + " ") * 20)
    out.append("word " * 255)  # at the limit, with [CLS] [SEP]
    out.append("word " * 254)
    return out


def texts(count: int) -> list[str]:
    rng = random.Random(31)
    docs = stdlib_docstrings(count, rng)
    body = docs[: max(0, count - len(EDGE_CASES) - 60)]
    return EDGE_CASES + body + random_unicode(47, rng) + long_texts(rng, docs)


def dump(out: Path, count: int) -> int:
    corpus = texts(count)
    encoder = OnnxEncoder(resolve_spec("", MAX_TOKENS), "cpu", intra_op_threads=1)
    rows, truncated = encoder.tokenize(corpus)
    vectors = encoder.run_rows(rows)
    win_rows, counts, win_truncated = encoder.windows(corpus, MAX_CHUNKS, OVERLAP, WINDOW)
    win_vectors = encoder.run_rows(win_rows)
    np.savez_compressed(
        out,
        texts=np.array(corpus, dtype=object),
        rows=np.array([np.array(r, dtype=np.int64) for r in rows], dtype=object),
        truncated=np.array(truncated),
        vectors=vectors,
        win_rows=np.array([np.array(r, dtype=np.int64) for r in win_rows], dtype=object),
        counts=np.array(counts),
        win_truncated=np.array(win_truncated),
        win_vectors=win_vectors,
    )
    print(
        f"{out}: {len(corpus)} texts ({sum(truncated)} cut at {MAX_TOKENS} tokens), "
        f"{len(win_rows)} windows of <= {WINDOW} tokens"
    )
    return 0


def compare(old_path: Path, new_path: Path) -> int:
    old = np.load(old_path, allow_pickle=True)
    new = np.load(new_path, allow_pickle=True)
    if list(old["texts"]) != list(new["texts"]):
        print("the two dumps embed different texts")
        return 1
    bad = 0
    for key in ("rows", "win_rows"):
        differ = [
            i
            for i, (a, b) in enumerate(zip(old[key], new[key], strict=True))
            if not np.array_equal(a, b)
        ]
        print(f"{key}: {len(old[key])} rows, {len(differ)} differ")
        bad += len(differ)
    for key in ("truncated", "counts", "win_truncated"):
        same = np.array_equal(old[key], new[key])
        print(f"{key}: {'same' if same else 'DIFFERENT'}")
        bad += 0 if same else 1
    for key in ("vectors", "win_vectors"):
        delta = (
            float(np.max(np.abs(old[key] - new[key])))
            if old[key].shape == new[key].shape
            else np.inf
        )
        identical = old[key].shape == new[key].shape and np.array_equal(old[key], new[key])
        print(
            f"{key}: {old[key].shape}, max |old - new| = {delta:.3g}, bitwise identical: {identical}"
        )
        bad += 0 if delta <= 1e-6 else 1
    return 1 if bad else 0


SPEED_TEXTS = {
    "short (a recall query)": "remember that the deploy script needs the staging token",
    "prose": (
        "The store is one SQLite database in WAL mode: memories, their full-text index, "
        "entities and relations of the knowledge graph, the vectors of the embedder, and "
        "the recall log. One writer actor owns the only write connection; reads go to a "
        "small pool of read-only connections. Each tool call is one transaction, so a "
        "crash leaves either all of a call's rows or none of them. "
    )
    * 3,
    "non-ASCII (accents, CJK, Greek)": "Ångström naïve café 日本語のテキスト Σίσυφος " * 6,
}
BATCH = 32  # the embedder's batch size


def timed(fn: object, repeat: int = 7, number: int = 20) -> tuple[float, float]:
    """Median wall and CPU milliseconds of one call of ``fn`` over ``repeat`` runs."""
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(number):
            fn()  # type: ignore[operator]
        walls.append((time.perf_counter() - wall) / number * 1000)
        cpus.append((time.process_time() - cpu) / number * 1000)
    return statistics.median(walls), statistics.median(cpus)


def speed() -> int:
    spec = resolve_spec("", MAX_TOKENS)
    loads = []
    for _ in range(5):
        started = time.perf_counter()
        encoder = OnnxEncoder(spec, "cpu", intra_op_threads=1)
        loads.append((time.perf_counter() - started) * 1000)
    print(f"loading the model (tokenizer + onnxruntime session): {statistics.median(loads):.0f} ms")
    print("| batch | tokens per text | tokenize, wall | tokenize, CPU |")
    print("| --- | ---: | ---: | ---: |")
    batches = {f"{BATCH} x {name}": [text] * BATCH for name, text in SPEED_TEXTS.items()}
    docs = [d for d in stdlib_docstrings(2000, random.Random(5)) if len(d) > 1500]
    batches[f"{BATCH} different stdlib docstrings"] = docs[:BATCH]
    batches["the 200 texts of `dump`"] = texts(200)
    for name, batch in batches.items():
        rows, _ = encoder.tokenize(batch)
        tokens = statistics.median(len(r) for r in rows)
        wall, cpu = timed(lambda b=batch: encoder.tokenize(b))
        print(f"| {name} | {tokens:.0f} | {wall:.2f} ms | {cpu:.2f} ms |")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("out", type=Path)
    d.add_argument("--texts", type=int, default=200, help="how many texts (about)")
    c = sub.add_parser("compare")
    c.add_argument("old", type=Path)
    c.add_argument("new", type=Path)
    sub.add_parser("speed")
    args = parser.parse_args()
    if args.command == "speed":
        return speed()
    if args.command == "dump":
        return dump(args.out, args.texts)
    return compare(args.old, args.new)


if __name__ == "__main__":
    sys.exit(main())
