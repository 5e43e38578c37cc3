"""Entities found without an LLM: the names, identifiers, paths and quoted terms of a text.

A memory stored without ``entities`` still names things: people and places
("Caroline went to the Pride parade in Boston"), code identifiers
(``refresh_token``, ``AuthService.renew``), file paths (``src/auth/jwt.py``),
quoted titles ("Charlotte's Web"). `extract` finds them with a few rules
(no model, no dictionary) and `TermGraph` links each memory to the *terms* it
mentions, so Personalized PageRank can walk memory -> term -> memory: a
question about one of two memories that name the same person or file can
reach the other, which shares no other word with it.

Rules (`extract`), each giving casefolded keys:

- **proper names**: runs of capitalised words (``New York``, ``LGBTQ``) that
  without the first word of a sentence (capitalised anyway: "Thanks Mel"),
  split at function words (``I``, ``I'm``, ``The``), months and weekdays,
  which never count. A run also gives each of its words (``Caroline Smith``
  -> ``caroline smith``, ``caroline``, ``smith``), so a question naming one
  of them meets it;
- **code identifiers**: words with an inner ``_``, ``::`` or a dot between
  letters (``user_id``, ``os.path``), camelCase and PascalCase words with an
  inner capital (``getUser``, ``AuthService``), a name followed by ``()``;
- **file paths**: words with a ``/`` and a letter, or ending in a short
  extension (``README.md``, ``src/app.py``);
- **quoted terms**: text between double quotes (or typographic single quotes)
  of one to `MAX_QUOTED_WORDS` words.

Terms live in the ranker's cache only (derived from the memories' text when
the cache loads and whenever a memory is written or changed), not in the
store: they are a ranking signal, not entities a client asked for, and
turning them off (``[retrieval] terms = false``) leaves nothing behind.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..store.domain.lexical import FUNCTION_WORDS

MAX_QUOTED_WORDS = 6
MAX_TERM_CHARS = 60
MAX_TEXT_CHARS = 20_000  # of a memory read for terms (a long memory: its beginning)

# Every pattern below reads a text in time linear in its length, whatever the text:
# no two quantifiers may share characters they could trade (`[ \t]+x?[ \t]*`, `\w*_\w+`,
# `[\w.-]*[A-Za-z][\w.-]*` once were, and a line of spaces or underscores took
# seconds to minutes, holding the GIL); `tests/test_text_scans_linear.py` checks it.
_SENTENCE_END = re.compile(r"[.!?:;\n]")
_ALNUM = re.compile(r"[^\W_]")  # str.isalnum, as a pattern
_CAP_RUN = re.compile(
    r"(?<![\w'’])([A-Z][\w'’&-]*+(?:[ \t]++(?:(?:of|de|la|von|van|the|and|&)[ \t]*+)?[A-Z][\w'’&-]*+)*+)"
)
_WORD = re.compile(r"[^\s,;!?()\[\]{}<>\"“”]+")
_QUOTED = re.compile(r"\"([^\"\n]{1,80})\"|“([^”\n]{1,80})”|(?<!\w)‘([^’\n]{1,80})’(?!\w)")
_IDENT = re.compile(
    r"^(?:[A-Za-z_]\w*+(?:(?:\.|::)[A-Za-z_]\w*+)++|[A-Za-z](?=\w*_\w)\w++|_\w++|[a-z]++[A-Z]\w*+|[A-Z][a-z0-9]++[A-Z]\w*+)(?:\(\))?$"
)
_PATH = re.compile(
    r"^(?:[~.]{0,2}/)?(?:[\w.@-]++/)++(?=[\w.@-]*[A-Za-z])[\w.@-]*+$|^[\w-]++\.[A-Za-z]{1,5}$"
)
_EXTENSIONS = frozenset(
    """py pyi js ts tsx jsx md rst txt json toml yaml yml ini cfg c h cc cpp hpp rs go java kt rb php
    sh sql html css csv xml lock log conf""".split()
)
# Capitalised for other reasons than naming something: dates are not names here.
NOT_NAMES = FUNCTION_WORDS | frozenset(
    """january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday""".split()
)
_POSSESSIVE = re.compile(r"['’]s$")
_CONTRACTION = re.compile(r"['’](?:m|ve|ll|d|re|s|t)$", re.IGNORECASE)
_EDGE_PUNCT = ".,;:!?'’\"“”()[]{}<>*`"


def _canonical(text: str) -> str:
    return " ".join(text.split()).casefold()


def _sentence_starts(text: str) -> set[int]:
    """Offsets of the first word of each sentence (after start, . ! ? : ; a newline or a quote)."""
    starts = {0}
    for m in _SENTENCE_END.finditer(text):
        starts.add(m.end())
    out: set[int] = set()
    first = -1  # the first alphanumeric at or after the last start looked from
    for s in sorted(starts):
        if first < s:  # else none lies between s and `first`: one scan serves both
            found = _ALNUM.search(text, s)
            first = found.start() if found is not None else len(text)
        out.add(first)
    return out


def _is_name(word: str) -> bool:
    base = _CONTRACTION.sub("", word).casefold()
    return len(word) > 1 and base not in NOT_NAMES


def _names(text: str, starts: set[int]) -> Iterable[str]:
    for m in _CAP_RUN.finditer(text):
        words = [_POSSESSIVE.sub("", w.strip(_EDGE_PUNCT)) for w in m.group(1).split()]
        if m.start() in starts:
            # A sentence's first word is capitalised anyway ("Thanks Mel"): not a name.
            words = words[1:]
        run: list[str] = []
        for word in [*words, ""]:
            if word and _is_name(word):
                run.append(word)
                continue
            if len(run) > 1:
                yield " ".join(run)
            yield from run
            run = []


def _quoted(text: str) -> Iterable[str]:
    for m in _QUOTED.finditer(text):
        inner = next(g for g in m.groups() if g is not None).strip(_EDGE_PUNCT + " ")
        if inner and len(inner.split()) <= MAX_QUOTED_WORDS:
            yield inner


def _code(text: str) -> Iterable[str]:
    for m in _WORD.finditer(text):
        word = m.group(0).strip(_EDGE_PUNCT)
        if len(word) < 3 or not any(c.isalpha() for c in word):
            continue
        if _IDENT.match(word):
            if not any(len(part) < 2 for part in re.split(r"\.|::", word)):  # not "e.g"
                yield word.removesuffix("()")
        elif _PATH.match(word) and (
            "/" in word or word.rsplit(".", 1)[-1].casefold() in _EXTENSIONS
        ):
            yield word


def extract(text: str) -> set[str]:
    """The terms of ``text`` as casefolded keys (see the module docstring for the rules)."""
    text = text[:MAX_TEXT_CHARS]
    found: set[str] = set()
    for raw in (*_names(text, _sentence_starts(text)), *_quoted(text), *_code(text)):
        key = _canonical(raw)
        if 1 < len(key) <= MAX_TERM_CHARS and key not in FUNCTION_WORDS:
            found.add(key)
    return found


class TermGraph:
    """Term ids by key, and the keys' longest length in words (for matching a query)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.keys: list[str] = []
        self.max_words = 1

    def id_of(self, key: str) -> int:
        term_id = self.ids.get(key)
        if term_id is None:
            term_id = len(self.keys)
            self.ids[key] = term_id
            self.keys.append(key)
            self.max_words = max(self.max_words, len(key.split()))
        return term_id

    def named_in(self, words: list[str]) -> list[int]:
        """Terms whose key is a run of ``words`` (casefolded query words), in order of appearance."""
        found: list[int] = []
        seen: set[int] = set()
        for size in range(1, min(self.max_words, 4) + 1):
            for start in range(len(words) - size + 1):
                term_id = self.ids.get(" ".join(words[start : start + size]))
                if term_id is not None and term_id not in seen:
                    seen.add(term_id)
                    found.append(term_id)
        return found
