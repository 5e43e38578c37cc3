"""The Python Porter stemmer gives FTS5's stems, word for word (the vocabulary lookups rely on it)."""

from __future__ import annotations

import re
import sqlite3
import sysconfig
from pathlib import Path

from memtrio.actors.store.domain.lexical import query_words
from memtrio.actors.store.domain.stem import stem

# Short and long tokens pass through; plurals, -ed/-ing, -y, steps 2 to 5; accents, non-ASCII.
EDGE_CASES = (
    """
    a is as ies sses eed ed ing ated bled sized caresses ponies ties caress cats feed
    agreed plastered bled motoring sing conflated troubled sized hopping tanned falling
    hissing fizzed failing filing happy sky relational conditional rational valenci
    hesitanci digitizer conformabli radicalli differentli vileli analogousli
    vietnamization predication operator feudalism decisiveness hopefulness callousness
    formaliti sensitiviti sensibiliti triplicate formative formalize electriciti
    electrical hopeful goodness revival allowance inference airliner gyroscopic
    adjustable defensible irritant replacement adjustment dependent adoption homologou
    communism activate angulariti homologous effective bowdlerize probate rate cease
    controll roll technology possibly charities camping yelled syzygy café naïvetés
    über straße 日本語
""".split()
    + ["x" * 64, "x" * 65 + "ing"]
)


def sqlite_stems(words: list[str]) -> list[str]:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE f USING fts5 (t, tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab (f, 'instance')")
    out: list[str] = []
    for start in range(0, len(words), 500):
        chunk = words[start : start + 500]
        conn.execute("DELETE FROM f")
        conn.execute("INSERT INTO f (rowid, t) VALUES (1, ?)", (" ".join(chunk),))
        by_offset = {offset: term for term, _doc, _col, offset in conn.execute("SELECT * FROM v")}
        assert len(by_offset) == len(chunk), "each test word must be exactly one FTS5 token"
        out += [by_offset[i] for i in range(len(chunk))]
    return out


def test_edge_cases_match_sqlite() -> None:
    """Tokens folded the way queries are (`query_words`), then stemmed, as FTS5 does."""
    words = [query_words(w, frozenset())[0] for w in EDGE_CASES]
    expected = sqlite_stems(EDGE_CASES)
    assert [stem(w) for w in words] == expected
    # Spot checks of what the index relies on.
    assert stem("charities") == stem("charity") == "chariti"
    assert stem("camping") == stem("camp") == "camp"
    assert stem("kits") == "kit" != stem("kitchen")


def test_a_large_vocabulary_matches_sqlite() -> None:
    """Every distinct ASCII word of the standard library's documentation strings and code."""
    words: set[str] = set()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.glob("*.py"))[:150]:
        words.update(
            w.casefold() for w in re.findall(r"[A-Za-z]+", path.read_text(errors="ignore"))
        )
    vocabulary = sorted(words)
    assert len(vocabulary) > 5_000
    expected = sqlite_stems(vocabulary)
    mismatches = [
        (w, e, stem(w)) for w, e in zip(vocabulary, expected, strict=True) if stem(w) != e
    ]
    assert mismatches == []
