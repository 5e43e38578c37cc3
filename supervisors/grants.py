"""Grants of ``memtrio serve``: which repositories a session may choose, and whether it may write.

A network session opens with a bearer token, and the token names its *grant*
(docs/transports.md, "Grants"): a name, the glob patterns of the repository
paths its sessions may choose (``allowed_roots``) and a read-only flag. Every
grant is also bounded by ``[serve] allowed_roots``, which no token can widen.
A stdio session has no grant (None): its only client is the process that
started the server, with the same user's rights.

Patterns are absolute paths whose segments may hold ``*`` (any characters
within one segment), ``?`` (one character), ``[...]`` (one of a class) and
segments ``**`` (any number of segments, none included); ``**`` alone allows
every path. A pattern names directories *and everything beneath them*: a path
is allowed when it or one of its ancestors matches. Paths are matched as given
(normalised, ``..`` folded) and again after resolving symbolic links, by the
callers (`check_path` is the lexical half, `resolved_path` the other), so
neither ``..`` nor a symlink leads out of a pattern.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import posixpath
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

import msgspec

from ..protocol.errors import Forbidden
from .git import git_output

# The pattern that allows every path (the default of ``[serve] allowed_roots``).
ANY = "**"
# Limits of one pattern list: a config file is not a place for thousands of them.
MAX_PATTERNS = 256
MAX_PATTERN_BYTES = 4096


class OutsideGrant(Forbidden):
    """A repository, scope or checkout outside the calling session's grant."""


def pattern_problem(pattern: object) -> str | None:
    """Why ``pattern`` is not a valid ``allowed_roots`` pattern, or None when it is."""
    if not isinstance(pattern, str):
        return f"must be a string, not {type(pattern).__name__}"
    if pattern == ANY:
        return None
    if not pattern or "\0" in pattern or any(ord(c) < 32 for c in pattern):
        return "must be a non-empty path without control characters"
    if len(pattern.encode("utf-8", "surrogatepass")) > MAX_PATTERN_BYTES:
        return f"is longer than {MAX_PATTERN_BYTES} bytes"
    if not pattern.startswith("/"):
        return 'must be an absolute path pattern (for example "/srv/repos/*") or "**" (any)'
    if any(part in (".", "..") for part in pattern.split("/")):
        return 'must not contain "." or ".." segments'
    return None


def patterns_problem(patterns: Sequence[object]) -> str | None:
    """What is wrong with an ``allowed_roots`` list, or None."""
    if len(patterns) > MAX_PATTERNS:
        return f"{len(patterns)} patterns; at most {MAX_PATTERNS}"
    for pattern in patterns:
        problem = pattern_problem(pattern)
        if problem is not None:
            shown = repr(pattern)[:80]
            return f"the pattern {shown} {problem}"
    return None


_GRANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# What an operator hashes by mistake for a token: nothing (``printf %s "$UNSET" |
# sha256sum``), or a line break or blank (``echo "$UNSET" | sha256sum``). A presented
# token is trimmed, so a blank one is the empty token: a grant for the SHA-256 of a
# blank would open the server to ``Authorization: Bearer`` with nothing after it.
BLANK_TOKENS: dict[str, str] = {
    "": 'an empty token (printf %s "$UNSET" | sha256sum)',
    "\n": 'an empty line (echo "$UNSET" | sha256sum)',
    "\r\n": "an empty line (CRLF)",
    " ": "a space",
    "\t": "a tab",
}
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
# Names the server gives its own grants.
RESERVED_NAMES = frozenset({"default", "open", "attach"})


def token_table_problem(
    name: str,
    token_file: str,
    token_sha256: str,
    allowed_roots: Sequence[object],
    taken: Collection[str],
) -> str | None:
    """What is wrong with one ``[[serve.tokens]]`` table (``taken``: the names before it),
    or None."""
    if not _GRANT_NAME.fullmatch(name):
        return f"name {name[:80]!r} must be 1-64 letters, digits, '.', '_' or '-'"
    if name in taken or name in RESERVED_NAMES:
        why = "used twice" if name in taken else "reserved"
        return f"the name {name!r} is {why}; give each token its own name"
    if bool(token_file) == bool(token_sha256):
        return (
            f"{name!r}: give exactly one of token_file (a file holding the token) and "
            "token_sha256 (the token's SHA-256 in hex); never the token itself"
        )
    if "\0" in token_file:
        return f"{name!r}: token_file must not contain a NUL character"
    if token_sha256 and not _SHA256.fullmatch(token_sha256):
        return (
            f"{name!r}: token_sha256 must be 64 hex digits (for example the output of "
            "`printf %s TOKEN | sha256sum`)"
        )
    blank = blank_digest(bytes.fromhex(token_sha256)) if token_sha256 else None
    if blank is not None:
        return (
            f"{name!r}: token_sha256 is the SHA-256 of {blank}, not of a token: it would "
            "let in a request whose Authorization header is 'Bearer' alone; hash the token "
            "itself (printf %s TOKEN | sha256sum, with TOKEN set)"
        )
    problem = patterns_problem(allowed_roots)
    return f"{name!r}: allowed_roots: {problem}" if problem is not None else None


class ServeToken(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """One ``[[serve.tokens]]`` table: a token of ``memtrio serve`` and its grant
    (docs/transports.md, "Grants"). The token is in ``token_file`` (trimmed), or only its
    SHA-256 is given (``token_sha256``, hex), never the token itself."""

    name: str
    token_file: str = ""
    token_sha256: str = ""
    allowed_roots: list[str] = msgspec.field(default_factory=lambda: [ANY])
    read_only: bool = False


def serve_grants(
    allowed_roots: Sequence[object], tokens: Sequence[object]
) -> tuple[tuple[str, ...], list[ServeToken]]:
    """``[serve] allowed_roots`` and the ``[[serve.tokens]]`` tables, checked: the patterns
    and the tables as `ServeToken` s.

    Error handling: raises `ValueError` with one line naming the setting (the table, by
    its number) and what to change.
    """
    problem = patterns_problem(allowed_roots)
    if problem is not None:
        raise ValueError(f"serve.allowed_roots: {problem}")
    try:
        tables = msgspec.convert(list(tokens), list[ServeToken], strict=True)
    except msgspec.ValidationError as exc:
        raise ValueError(
            f"[[serve.tokens]]: {exc} (a table takes name, token_file or token_sha256, "
            "allowed_roots, read_only)"
        ) from None
    seen: set[str] = set()
    for number, entry in enumerate(tables, 1):
        problem = token_table_problem(
            entry.name, entry.token_file, entry.token_sha256, entry.allowed_roots, seen
        )
        if problem is not None:
            raise ValueError(f"[[serve.tokens]] #{number}: {problem}")
        seen.add(entry.name)
    return tuple(str(p) for p in allowed_roots), tables


def _segments(path: str) -> tuple[str, ...]:
    return tuple(part for part in path.split("/") if part)


def _prefix_match(pattern: tuple[str, ...], path: tuple[str, ...]) -> bool:
    """Whether ``pattern`` matches ``path`` or one of its ancestors (segment by segment)."""
    memo: dict[tuple[int, int], bool] = {}

    def match(i: int, j: int) -> bool:
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(pattern):
            found = True  # the rest of the path lies beneath the matched directory
        elif pattern[i] == ANY:
            found = any(match(i + 1, k) for k in range(j, len(path) + 1))
        else:
            found = j < len(path) and fnmatchcase(path[j], pattern[i]) and match(i + 1, j + 1)
        memo[key] = found
        return found

    return match(0, 0)


def matches(patterns: Sequence[str], path: str) -> bool:
    """Whether the absolute, normalised ``path`` lies under one of ``patterns``."""
    segments = _segments(path)
    return any(p == ANY or _prefix_match(_segments(p), segments) for p in patterns)


@dataclass(frozen=True)
class Grant:
    """What one token opens: repositories matching ``roots`` (and ``bound``, the server's
    ``[serve] allowed_roots``), read-write unless ``read_only``."""

    name: str
    roots: tuple[str, ...] = (ANY,)
    read_only: bool = False
    bound: tuple[str, ...] = (ANY,)

    @property
    def restricted(self) -> bool:
        """Whether some repository is outside this grant."""
        return ANY not in self.roots or ANY not in self.bound

    def allows(self, path: str) -> bool:
        """Whether the absolute ``path`` (a repository, a checkout, a scope's directory) is in."""
        if not posixpath.isabs(path):
            return False
        normal = posixpath.normpath(path)
        return matches(self.roots, normal) and matches(self.bound, normal)

    def describe(self) -> str:
        """The repositories this grant allows, as a refusal shows them: the token's own
        patterns (the server's bound only when the token has none of its own)."""
        shown = self.roots if ANY not in self.roots else self.bound
        patterns = ", ".join(shown) if shown else "none"
        return f"the token {self.name!r} may use repositories under: {patterns}"


def with_bound(grant: Grant, bound: Iterable[str]) -> Grant:
    return Grant(grant.name, grant.roots, grant.read_only, tuple(bound))


def allows(grant: Grant | None, path: str) -> bool:
    """`Grant.allows`, with no grant (stdio, the CLI) allowing everything."""
    return grant is None or grant.allows(path)


def check_path(grant: Grant | None, raw: str, what: str) -> None:
    """Refuse ``raw`` (an absolute path as a caller gave it) when, folded but unresolved, it
    lies outside ``grant``; checked before the path is touched, so a refusal tells nothing
    about what exists there.

    Error handling: raises `OutsideGrant` naming ``what`` and what the grant allows.
    """
    if grant is not None and not grant.allows(raw):
        raise OutsideGrant(refusal(grant, what))


def resolved_path(grant: Grant | None, raw: str, what: str) -> str:
    """``raw`` with its symbolic links resolved, refused when that lies outside ``grant``
    (blocking: call it off the event loop).

    Error handling: raises `OutsideGrant`, worded as `check_path` words it.
    """
    check_path(grant, raw, what)
    real = os.path.realpath(raw)
    if grant is not None and not grant.allows(real):
        raise OutsideGrant(refusal(grant, what))
    return real


def check_repository(grant: Grant | None, directory: str, what: str) -> None:
    """Refuse the Git repository ``directory`` lies in when its common Git directory (its
    history, shared by its linked worktrees) is outside ``grant``: a linked worktree of
    another repository placed inside a granted one is not that repository (blocking: runs
    git; call it off the event loop). Nothing is checked without a restricted grant, or
    outside a repository.

    Error handling: raises `OutsideGrant` naming ``what``, as `check_path` words it.
    """
    if grant is None or not grant.restricted:
        return
    common = git_output(
        ["rev-parse", "--path-format=absolute", "--git-common-dir"], Path(directory)
    )
    if common and not grant.allows(os.path.realpath(os.path.join(directory, common))):
        raise OutsideGrant(refusal(grant, what))


def refusal(grant: Grant, what: str) -> str:
    return f"{what} is outside this session's grant: {grant.describe()}"


def read_only_refusal(grant: Grant, tool: str) -> str:
    return (
        f"{tool} writes, and this session's token ({grant.name!r}) is read-only: "
        "it may call the tools that only read; use a token with write access to change memories"
    )


# A scope named in a message or a result: ``repo:`` and its path, up to a quote or space.
_SCOPE = re.compile(r"repo:(/[^\s`'\"\\]*)")
HIDDEN_SCOPE = "repo:<a repository outside this session's grant>"


def scrub(grant: Grant, value: object) -> object:
    """``value`` (decoded JSON) with every ``repo:`` scope outside ``grant`` replaced by
    `HIDDEN_SCOPE`: what the session boundary applies to a restricted grant's results,
    so no message, warning or field names another repository (a shared row's owners)."""

    def hide(match: re.Match[str]) -> str:
        path = match.group(1).rstrip(".,;:)]}")
        return match.group(0) if grant.allows(path) else HIDDEN_SCOPE

    if isinstance(value, str):
        return _SCOPE.sub(hide, value) if "repo:" in value else value
    if isinstance(value, list):
        return [scrub(grant, item) for item in value]
    if isinstance(value, dict):
        return {key: scrub(grant, item) for key, item in value.items()}
    return value


def token_digest(token: str | bytes) -> bytes:
    """The SHA-256 of a token (what `TokenGrant` keeps and ``token_sha256`` names in hex)."""
    raw = token.encode() if isinstance(token, str) else bytes(token)
    return hashlib.sha256(raw).digest()


_BLANK_DIGESTS = {token_digest(text): why for text, why in BLANK_TOKENS.items()}


def blank_digest(digest: bytes) -> str | None:
    """What blank ``digest`` is the SHA-256 of (`BLANK_TOKENS`), or None for any other."""
    return _BLANK_DIGESTS.get(digest)


@dataclass(frozen=True)
class TokenGrant:
    """One token of ``memtrio serve``, kept as its SHA-256, and the grant it opens."""

    digest: bytes
    grant: Grant

    def matches(self, digest: bytes) -> bool:
        return hmac.compare_digest(self.digest, digest)
