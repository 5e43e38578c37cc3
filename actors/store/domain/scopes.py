"""Memory scopes: ``global`` or ``repo:/absolute/path``, and who may write them.

The server's *current* scope is its startup directory resolved to Git's
canonical common directory (``git rev-parse --git-common-dir``): linked
worktrees share it, separate clones do not, a bare repository uses its own Git
directory. Outside a repository, or without git, the current scope is
``global``.

An explicit ``repo:`` path that points at a checkout root, or at a
repository's common Git directory, resolves to that same canonical scope; any
other absolute path stays a literal scope (so a scope recorded on another
machine can still be named).

Policy (`ScopePolicy`):

- reads: no scopes (or ``[]``) select the current scope plus ``global``; an
  explicit list selects those scopes plus ``global``;
- writes go only to the current scope and ``global``.

A shared server has one policy per session: the session's repository (its
``root``: docs/transports.md) resolved the same way, once per root
(`ScopePolicies`); a session without a repository has the current scope
``global``. The CLI uses the policy of its own directory.

A session's grant (``supervisors.grants``, what its token opens) narrows its
policy: an explicit ``repo:`` scope outside the grant is refused for reading
too (checked as given, before the path is touched, and once resolved), and a
read-only grant writes nothing. ``global`` is every grant's to read.
"""

from __future__ import annotations

import functools
import os
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import trio

from ....protocol.errors import BadArgument, DomainError, Forbidden
from ....supervisors.git import git_output
from ....supervisors.grants import Grant, OutsideGrant, refusal

GLOBAL = "global"
REPO_PREFIX = "repo:"
ALLOWED = "scopes must be `global` or `repo:/absolute/path` (for example `repo:/home/me/project`)"
MAX_SCOPE_PATH_BYTES = 4096  # PATH_MAX
# How a refused write says to reach another repository: a server started in a
# directory (stdio, the CLI) versus a session of a shared server.
RESTART_HINT = "restart memtrio in that repository to write its memories"
SESSION_HINT = (
    'open the session in that repository (as its MCP root, or `_meta["memtrio/root"]` '
    "at initialize) to write its memories"
)
# Resolved roots kept by `ScopePolicies` (each holds one scope string).
MAX_CACHED_ROOTS = 1024


class ScopeError(DomainError):
    """A scope refused: malformed (`BadScope`) or one this server may not write (`ReadOnlyScope`)."""


class BadScope(ScopeError, BadArgument):
    """A scope string that is not `global` or `repo:/absolute/path`."""


class ReadOnlyScope(ScopeError, Forbidden):
    """A scope this server may not write (another repository's)."""


def git_common_dir(directory: Path) -> Path | None:
    """The canonical (absolute, symlink-free) common Git directory of ``directory``, or None."""
    out = git_output(["rev-parse", "--path-format=absolute", "--git-common-dir"], directory)
    if not out:
        return None
    path = Path(out)
    if not path.is_absolute():  # very old git ignores --path-format
        path = directory / path
    return Path(os.path.realpath(path))


def default_scope(cwd: Path) -> str:
    """The scope of a server started in ``cwd``: its repository's common Git dir, or ``global``."""
    common = git_common_dir(cwd)
    return f"{REPO_PREFIX}{common}" if common is not None else GLOBAL


@functools.lru_cache(maxsize=1024)
def _canonical_repo_path(raw: str) -> str:
    path = Path(os.path.normpath(raw))
    real = Path(os.path.realpath(path))
    if real.is_dir():
        common = git_common_dir(real)
        if common is not None:
            if common == real:
                return str(common)  # the common Git dir itself (a bare repo or a .git dir)
            toplevel = git_output(["rev-parse", "--path-format=absolute", "--show-toplevel"], real)
            if toplevel and Path(os.path.realpath(toplevel)) == real:
                return str(common)  # a checkout root (main or linked worktree)
    return str(path)


def check_syntax(scope: str) -> str:
    """One scope string's syntax, without touching the file system: the stripped scope.

    Error handling: anything that is not ``global`` or an absolute ``repo:``
    path (without control characters, at most `MAX_SCOPE_PATH_BYTES` bytes)
    raises `ScopeError` with a message saying what is allowed.
    """
    if not isinstance(scope, str):
        raise BadScope(f"invalid scope {scope!r}: {ALLOWED}")
    text = scope.strip()
    if text == GLOBAL:
        return GLOBAL
    if not text.startswith(REPO_PREFIX):
        raise BadScope(f"invalid scope {_shown(scope)}: {ALLOWED}")
    raw = text[len(REPO_PREFIX) :]
    size = len(raw.encode("utf-8", "surrogatepass"))
    if size > MAX_SCOPE_PATH_BYTES:
        raise BadScope(
            f"invalid scope {_shown(scope)}: the path is {size:,} bytes; a `repo:` path is "
            f"limited to {MAX_SCOPE_PATH_BYTES:,} bytes"
        )
    if not raw or not os.path.isabs(raw) or any(ord(c) < 32 for c in raw):
        raise BadScope(
            f"invalid scope {_shown(scope)}: the path after `repo:` must be absolute; {ALLOWED}"
        )
    return text


def _shown(scope: str) -> str:
    return repr(scope) if len(scope) <= 200 else repr(scope[:200]) + "..."


def canonical(scope: str) -> str:
    """Validate (`check_syntax`) and canonicalise one explicit scope string."""
    text = check_syntax(scope)
    if text == GLOBAL:
        return GLOBAL
    return REPO_PREFIX + _canonical_repo_path(text[len(REPO_PREFIX) :])


def _dedupe(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)


@dataclass(frozen=True)
class ScopePolicy:
    """The read selection and write permissions of one server or session.

    ``who`` and ``hint`` word a refused write: "this server" / restart there
    (stdio, CLI), or "this session" / open the session there (shared server).
    """

    current: str
    who: str = "this server"
    hint: str = RESTART_HINT
    grant: Grant | None = None

    @classmethod
    def for_directory(cls, cwd: Path) -> ScopePolicy:
        return cls(default_scope(cwd))

    @property
    def writable(self) -> list[str]:
        if self.grant is not None and self.grant.read_only:
            return []
        return _dedupe([self.current, GLOBAL])

    def describe_writable(self) -> str:
        return " and ".join(f"`{s}`" for s in self.writable) or "nothing (its token is read-only)"

    def may_read(self, scope: str) -> bool:
        """Whether the grant lets this policy read ``scope`` (a stored or canonical name)."""
        if self.grant is None or scope == GLOBAL or not scope.startswith(REPO_PREFIX):
            return True
        return self.grant.allows(scope[len(REPO_PREFIX) :])

    def _readable(self, scope: str) -> str:
        """One explicit scope, canonical, once the grant lets this policy read it.

        Error handling: `ScopeError` for a malformed scope; `OutsideGrant` for one outside
        the grant, checked before the path is resolved and again after.
        """
        text = check_syntax(scope)
        if not self.may_read(text) or not self.may_read(chosen := canonical(text)):
            assert self.grant is not None
            raise OutsideGrant(refusal(self.grant, f"scope {_shown(scope)}"))
        return chosen

    def select(self, scopes: Sequence[str] | None) -> list[str]:
        """The scopes a read looks in: explicit ones (or the current one) plus ``global``."""
        if not scopes:
            return _dedupe([self.current, GLOBAL])
        return _dedupe([*(self._readable(s) for s in scopes), GLOBAL])

    def check_writable(self, scopes: Iterable[str], what: str = "write to") -> None:
        for scope in scopes:
            if scope not in self.writable:
                raise ReadOnlyScope(
                    f"cannot {what} scope `{scope}`: {self.who} may only write "
                    f"{self.describe_writable()} ({self.hint})"
                )

    def write_scopes(self, scopes: Sequence[str] | None) -> list[str]:
        """Target scopes of a new memory/relation: explicit (validated) or the current one."""
        if not scopes:
            self.check_writable([self.current])
            return [self.current]
        chosen = _dedupe(self._readable(s) for s in scopes)
        self.check_writable(chosen)
        return chosen

    def write_selection(self, scopes: Sequence[str] | None) -> list[str]:
        """Selection for update/forget: explicit scopes must all be writable."""
        if scopes:
            self.check_writable(
                _dedupe(self._readable(s) for s in scopes), what="modify memories in"
            )
        return self.select(scopes)


class ScopePolicies:
    """The policy of each session's repository, its scope resolved once per root.

    ``known`` seeds the cache (the server's own directory, already resolved).
    Resolving runs git, so it happens in a worker thread, never on the event loop.
    """

    def __init__(self, known: dict[Path, str] | None = None) -> None:
        self._scopes: OrderedDict[Path, str] = OrderedDict(known or {})

    async def scope_of(self, root: Path | None) -> str:
        """The current scope of a session whose repository is ``root`` (None: ``global``)."""
        if root is None:
            return GLOBAL
        scope = self._scopes.get(root)
        if scope is None:
            scope = await trio.to_thread.run_sync(default_scope, root)
            self._scopes[root] = scope
            while len(self._scopes) > MAX_CACHED_ROOTS:
                self._scopes.popitem(last=False)
        else:
            self._scopes.move_to_end(root)
        return scope

    async def of(self, root: Path | None, source: str, grant: Grant | None = None) -> ScopePolicy:
        """The policy of a session with ``root`` (``source``: where it came from; "cwd" is
        the server's own directory, whose refusals say to restart memtrio there) and
        ``grant`` (None: no grant applies)."""
        scope = await self.scope_of(root)
        if source == "cwd":
            return ScopePolicy(scope, grant=grant)
        return ScopePolicy(scope, who="this session", hint=SESSION_HINT, grant=grant)
