"""Counts in words: ``1 memory``, ``0 memories``, ``2 memories``.

Every count memtrio prints (tool results and errors, command output) goes
through `plural` (or `noun`, for a count written apart from its noun), so none
says "1 memories" or "1 times".

Pure: no I/O.
"""

from __future__ import annotations

_VOWELS = frozenset("aeiou")


def plural(n: int, one: str, many: str | None = None) -> str:
    """``n`` and its noun: ``plural(1, "memory")`` is ``1 memory``, ``plural(2, "memory")``
    ``2 memories``; ``many`` spells an irregular plural."""
    return f"{n} {noun(n, one, many)}"


def noun(n: int, one: str, many: str | None = None) -> str:
    """The noun ``one`` as ``n`` of it takes: ``one`` for exactly 1, else its plural."""
    return one if n == 1 else (many or plural_of(one))


def plural_of(word: str) -> str:
    """The regular English plural: memory -> memories, match -> matches, file -> files."""
    if word.endswith("y") and len(word) > 1 and word[-2] not in _VOWELS:
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    return word + "s"


def singular_of(word: str) -> str:
    """The singular of a regular plural (`plural_of` undone): memories -> memory."""
    if word.endswith("ies") and len(word) > 3:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "zes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us")):
        return word[:-1]
    return word
