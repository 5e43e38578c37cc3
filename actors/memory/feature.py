"""The memory feature: the ten memory tools (`tools.TOOLS`) and the instructions that tell a
session where its memories go (its repository's scope, or `global`)."""

from __future__ import annotations

from ...supervisors.context import AppContext, SessionView
from ..status import NoActors
from ..store.domain.scopes import GLOBAL
from ..store.feature import POLICIES
from .tools import TOOLS


def where(scope: str, session: SessionView) -> str:
    """Where the session's default memory scope ``scope`` comes from, in a sentence or two."""
    root, source = session.root, session.root_source
    if source == "cwd":
        if scope == GLOBAL:
            return "This server was started outside a Git repository, so its default memory scope is `global`."
        return (
            f"Default memory scope: `{scope}` (the Git repository this server was started in); "
            'memories are written there unless you pass `scopes: ["global"]` for knowledge useful in every project.'
        )
    if root is not None and scope != GLOBAL:
        given = (
            "your client's MCP roots" if source == "roots" else 'initialize `_meta["memtrio/root"]`'
        )
        return (
            f"Default memory scope: `{scope}` (this session's repository {root}, from {given}); "
            'memories are written there unless you pass `scopes: ["global"]` for knowledge useful in every project.'
        )
    if root is not None:
        return f"This session's directory {root} is not inside a Git repository, so its default memory scope is `global`."
    if source == "roots":
        return (
            "This session's repository comes from your client's MCP roots (the first `file://` root inside a "
            "Git checkout), asked for once the session is initialized; `list_scopes` shows the current scope "
            "(`global` until a root inside a Git checkout is known)."
        )
    return (
        "This session has no repository (the client declared no MCP roots and passed no "
        '`_meta["memtrio/root"]` at initialize), so its default memory scope is `global`.'
    )


def reach(scope: str, session: SessionView) -> str:
    """Which scopes the session reads and writes, agreeing with `where`: a session with no
    repository reads and writes `global` alone (no "current repository" to speak of)."""
    if scope != GLOBAL:
        return (
            "Reads cover the current repository plus `global`; use `list_scopes` and pass a scope name "
            "to `recall` or `inspect` to read another repository. Writes may only go to the current "
            "repository and `global`."
        )
    if session.root_source == "roots" and session.root is None:
        return (
            "Once the repository is known, reads cover it plus `global` and writes may go to either; "
            "until then both are `global` alone."
        )
    return (
        "Reads and writes cover `global` alone; use `list_scopes` and pass a repository's scope name "
        "to `recall` or `inspect` to read that repository's memories."
    )


def instructions(scope: str, session: SessionView) -> str:
    return (
        "memtrio memory: `remember` what you learn (decisions, conventions, pitfalls) and `recall` it in later "
        f"sessions. {where(scope, session)} {reach(scope, session)}"
    )


class _MemoryFeature:
    name = "memory"

    def setup(self, app: AppContext) -> NoActors:
        app.add_tools(TOOLS)
        policies = app.service(POLICIES)

        async def scope_instructions(session: SessionView) -> str:
            return instructions(await policies.scope_of(session.root), session)

        app.session_instructions.append(scope_instructions)
        return NoActors()


FEATURE = _MemoryFeature()
