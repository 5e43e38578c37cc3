"""The Porter stemmer of SQLite's FTS5 ``porter`` tokenizer, in Python.

``memories_fts`` is tokenized ``porter unicode61 remove_diacritics 2``, so
its vocabulary holds stems ("charities" is stored as "chariti"). FTS5 stems
the words of a MATCH query itself; this module gives the same stems to the
code that reads the vocabulary directly (document frequencies in
`lexical.plan`, for lexical recall and the ranker's seeds alike).

It is M. F. Porter's algorithm (1980, with the later "bli" and "logi"
rules of step 2) with the conventions of FTS5's implementation: it works on the UTF-8 bytes of a token that the
unicode61 tokenizer has already folded to lower case; tokens shorter than 3
or longer than 64 bytes are left alone; a byte other than ``aeiou`` (and
``y`` after a consonant) is a consonant. ``tests/test_stem.py`` checks it
word for word against SQLite on a large vocabulary.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

MIN_BYTES = 3
MAX_BYTES = 64
_VOWELS = frozenset(b"aeiou")


def _consonant(word: bytes, i: int) -> bool:
    c = word[i]
    if c in _VOWELS:
        return False
    if c == ord("y"):
        return i == 0 or not _consonant(word, i - 1)
    return True


def _measure(stem: bytes) -> int:
    """m in Porter's [C](VC){m}[V]: the number of vowel-consonant sequences."""
    m = 0
    i, n = 0, len(stem)
    while i < n and _consonant(stem, i):
        i += 1
    while i < n:
        while i < n and not _consonant(stem, i):
            i += 1
        if i >= n:
            break
        while i < n and _consonant(stem, i):
            i += 1
        m += 1
    return m


def _has_vowel(stem: bytes) -> bool:
    return any(not _consonant(stem, i) for i in range(len(stem)))


def _cvc(stem: bytes) -> bool:
    """*o: the stem ends consonant-vowel-consonant, the last not w, x or y."""
    n = len(stem)
    return (
        n >= 3
        and _consonant(stem, n - 1)
        and not _consonant(stem, n - 2)
        and _consonant(stem, n - 3)
        and stem[-1] not in b"wxy"
    )


# (suffix, replacement) tables of steps 2 to 4; at most one rule applies per step:
# the one with the longest matching suffix (then its condition decides).
_STEP2 = dict(
    [
        (b"ational", b"ate"),
        (b"tional", b"tion"),
        (b"enci", b"ence"),
        (b"anci", b"ance"),
        (b"izer", b"ize"),
        (b"bli", b"ble"),
        (b"alli", b"al"),
        (b"entli", b"ent"),
        (b"eli", b"e"),
        (b"ousli", b"ous"),
        (b"ization", b"ize"),
        (b"ation", b"ate"),
        (b"ator", b"ate"),
        (b"alism", b"al"),
        (b"iveness", b"ive"),
        (b"fulness", b"ful"),
        (b"ousness", b"ous"),
        (b"aliti", b"al"),
        (b"iviti", b"ive"),
        (b"biliti", b"ble"),
        (b"logi", b"log"),
    ]
)
_STEP3 = dict(
    [
        (b"icate", b"ic"),
        (b"ative", b""),
        (b"alize", b"al"),
        (b"iciti", b"ic"),
        (b"ical", b"ic"),
        (b"ful", b""),
        (b"ness", b""),
    ]
)
_STEP4 = [
    b"al",
    b"ance",
    b"ence",
    b"er",
    b"ic",
    b"able",
    b"ible",
    b"ant",
    b"ement",
    b"ment",
    b"ent",
    b"ion",
    b"ou",
    b"ism",
    b"ate",
    b"iti",
    b"ous",
    b"ive",
    b"ize",
]


def _longest(word: bytes, suffixes: Iterable[bytes]) -> bytes | None:
    best = None
    for suffix in suffixes:
        if len(word) > len(suffix) and word.endswith(suffix):
            if best is None or len(suffix) > len(best):
                best = suffix
    return best


def _replace(word: bytes, table: dict[bytes, bytes], min_m: int) -> bytes:
    suffix = _longest(word, table)
    if suffix is not None and _measure(word[: -len(suffix)]) >= min_m:
        return word[: -len(suffix)] + table[suffix]
    return word


def _step1ab(w: bytes) -> bytes:
    if w.endswith(b"s"):
        if (w.endswith(b"sses") and len(w) > 4) or (w.endswith(b"ies") and len(w) > 3):
            w = w[:-2]
        elif w.endswith(b"es") or not w.endswith(b"ss"):
            w = w[:-1]
    if w.endswith(b"eed") and len(w) > 3:
        if len(w) > 3 and _measure(w[:-3]) > 0:
            w = w[:-1]
        return w
    for suffix in (b"ed", b"ing"):
        if w.endswith(suffix) and len(w) > len(suffix) and _has_vowel(w[: -len(suffix)]):
            w = w[: -len(suffix)]
            break
    else:
        return w
    if len(w) > 2 and w.endswith((b"at", b"bl", b"iz")):
        return w + b"e"
    # A double consonant (``y`` counts as one here) other than l, s, z loses one letter.
    last = w[-1]
    if len(w) >= 2 and w[-2] == last and last not in _VOWELS and last not in b"lsz":
        return w[:-1]
    if _measure(w) == 1 and _cvc(w):
        return w + b"e"
    return w


@lru_cache(maxsize=4096)  # a query stems each word several times (terms, pairs, vocabulary)
def stem(token: str) -> str:
    """The stem FTS5's porter tokenizer stores for ``token`` (already lower case)."""
    word = token.encode("utf-8")
    if len(word) < MIN_BYTES or len(word) > MAX_BYTES:
        return token
    word = _step1ab(word)
    if word.endswith(b"y") and _has_vowel(word[:-1]):
        word = word[:-1] + b"i"
    word = _replace(word, _STEP2, 1)
    word = _replace(word, _STEP3, 1)
    suffix = _longest(word, _STEP4)
    if suffix is not None:
        base = word[: -len(suffix)]
        if _measure(base) > 1 and (suffix != b"ion" or base.endswith((b"s", b"t"))):
            word = base
    if word.endswith(b"e"):
        base = word[:-1]
        m = _measure(base)
        if m > 1 or (m == 1 and not _cvc(base)):
            word = base
    if word.endswith(b"ll") and _measure(word[:-1]) > 1:
        word = word[:-1]
    return word.decode("utf-8")  # suffixes are ASCII: no character was cut
