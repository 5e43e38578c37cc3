"""The four code-navigation tools and their plain-text result formats.

``code_outline``, ``code_imports``, ``find_symbol`` and ``code_diff`` return
plain text (no structured content), in the formats of the reference
(``docs/code.md``): tab-separated lines with 1-based line ranges.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import msgspec
import trio

from ...protocol.errors import BadArgument
from ...protocol.plural import plural
from ...protocol.tools import Tool
from ...supervisors.context import CallContext
from ...supervisors.grants import check_path, check_repository, resolved_path
from .checkout import checkout_root, resolve_path, show_path
from .diff import structural_diff
from .index import MatchRow, SymbolRow
from .service import CODE

Root = Annotated[
    str | None,
    msgspec.Meta(description="absolute; default: this repo"),
]
Offset = Annotated[int, msgspec.Meta(ge=0)]
PathArg = Annotated[str, msgspec.Meta(description="relative to root, or absolute")]


class OutlineArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    path: PathArg
    offset: Offset = 0
    limit: Annotated[int, msgspec.Meta(ge=1, le=500)] = 200
    depth: Annotated[
        Annotated[int, msgspec.Meta(ge=0)] | None,
        msgspec.Meta(description="0: top level, 1: and children; omitted: all"),
    ] = None
    root: Root = None


class ImportsArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    path: PathArg
    offset: Offset = 0
    limit: Annotated[int, msgspec.Meta(ge=1, le=500)] = 200
    root: Root = None


class FindArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    query: Annotated[
        str,
        msgspec.Meta(
            min_length=1,
            description="case ignored",
        ),
    ]
    kind: Annotated[
        str | None,
        msgspec.Meta(description="function, class, import, component, ..."),
    ] = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=100)] = 20
    root: Root = None


class DiffArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    base: Annotated[
        str,
        msgspec.Meta(
            min_length=1,
            description="branch, tag or commit",
        ),
    ]
    head: Annotated[str, msgspec.Meta(min_length=1)] = "HEAD"
    limit: Annotated[int, msgspec.Meta(ge=1, le=1000, description="files")] = 200
    root: Root = None


def symbol_line(row: SymbolRow) -> str:
    kind, name, start, end, depth, _parent, signature = row
    line = f"{start}-{end}\t{'  ' * depth}{kind} {name}"
    return f"{line}\t{signature}" if signature else line


def format_outline(
    path: str,
    language: str,
    coverage: str,
    rows: list[SymbolRow],
    offset: int,
    limit: int,
    depth: int | None,
) -> str:
    if depth is not None:
        rows = [r for r in rows if r[4] <= depth]
    page = [symbol_line(r) for r in rows[offset : offset + limit]]
    return _file_page(path, language, coverage, page, offset + limit, len(rows))


def format_imports(
    path: str, language: str, coverage: str, rows: list[SymbolRow], offset: int, limit: int
) -> str:
    imports = [r for r in rows if r[0] == "import"]
    page = [f"{r[2]}-{r[3]}\t{r[1]}" for r in imports[offset : offset + limit]]
    return _file_page(path, language, coverage, page, offset + limit, len(imports))


def _file_page(
    path: str, language: str, coverage: str, page: list[str], end: int, total: int
) -> str:
    """A file's ``path<TAB>language<TAB>coverage`` line, one page of its entries, and
    ``next_offset`` when entries remain past ``end``."""
    lines = [f"{show_path(path)}\t{language}\t{coverage}", *page]
    if end < total:
        lines.append(f"next_offset {end} of {total}")
    return "\n".join(lines)


def format_matches(
    root: Path, rows: list[MatchRow], total: int, truncation: tuple[int, int], max_files: int
) -> str:
    lines = []
    for path, start, end, kind, name, parent, signature, size, mtime, _lname in rows:
        line = f"{show_path(path)}:{start}-{end}\t{kind} {name}"
        if parent:
            line += f"\tin {parent}"
        try:
            st = os.lstat(f"{root}/{path}")
            if (st.st_size, st.st_mtime_ns) != (size, mtime):
                line += "\tstale"
        except OSError:
            line += "\tmissing"
        if signature:
            line += f"\t{signature}"
        lines.append(line)
    if total > len(rows):
        lines.append(f"{len(rows)} of {plural(total, 'match')}; raise limit for more")
    sources, indexed = truncation
    if sources:
        lines.append(
            f"truncated: {indexed} of {plural(sources, 'source file')} indexed ([code] max_files = {max_files}); a definition may be missing"
        )
    return "\n".join(lines)


async def _root(ctx: CallContext, root: str | None) -> Path:
    """The checkout a call works in: its ``root`` argument, else its session's repository."""
    session = ctx.session
    if session is None:
        return await checkout_root(root, ctx.app.cwd)
    if root is None and session.root is None:
        raise BadArgument(
            "this session has no repository: pass `root` (an absolute directory inside a Git "
            'checkout), or open the session in a repository (MCP roots, or `_meta["memtrio/root"]` '
            "at initialize)"
        )
    name = "the server's directory" if session.root_source == "cwd" else "the session's repository"
    grant = getattr(session, "grant", None)
    if root is None or grant is None:
        return await checkout_root(root, session.root or ctx.app.cwd, name)
    # An explicit checkout must lie in the session's grant, as given and once resolved.
    what = f"root {root[:200]!r}"
    if os.path.isabs(root):
        check_path(grant, root, what)
    found = await checkout_root(root, session.root or ctx.app.cwd, name)
    await trio.to_thread.run_sync(resolved_path, grant, str(found), what)
    # ... and so must its repository: a linked worktree of another one is that one.
    await trio.to_thread.run_sync(check_repository, grant, str(found), what)
    return found


async def _file_outline(
    ctx: CallContext, root_arg: str | None, path: str
) -> tuple[str, str, str, list[SymbolRow]]:
    """(checkout-relative path, language, coverage, symbol rows) of a caller's file."""
    service = ctx.app.service(CODE)
    root = await _root(ctx, root_arg)
    rel = resolve_path(root, path)
    grant = getattr(ctx.session, "grant", None)
    if "/" in rel and grant is not None and grant.restricted:
        # A file inside another repository's worktree placed in this checkout.
        where = str(root / rel.rsplit("/", 1)[0])
        await trio.to_thread.run_sync(check_repository, grant, where, f"path {path[:200]!r}")
    return (rel, *await service.file_outline(root, rel))


async def code_outline(ctx: CallContext, args: OutlineArgs) -> str:
    rel, language, coverage, rows = await _file_outline(ctx, args.root, args.path)
    return format_outline(rel, language, coverage, rows, args.offset, args.limit, args.depth)


async def code_imports(ctx: CallContext, args: ImportsArgs) -> str:
    rel, language, coverage, rows = await _file_outline(ctx, args.root, args.path)
    return format_imports(rel, language, coverage, rows, args.offset, args.limit)


async def find_symbol(ctx: CallContext, args: FindArgs) -> str:
    service = ctx.app.service(CODE)
    root = await _root(ctx, args.root)
    query = args.query.strip()
    if not query:
        raise BadArgument("query must name a symbol")
    rows, total = await service.find(root, query, args.kind, args.limit)
    return format_matches(root, rows, total, service.truncation(root), service.max_files)


async def code_diff(ctx: CallContext, args: DiffArgs) -> str:
    service = ctx.app.service(CODE)
    root = await _root(ctx, args.root)
    return await structural_diff(service.pool, root, args.base, args.head, args.limit)


TOOLS = [
    Tool(
        name="code_outline",
        description=(
            "A source file's definitions (and imports), nested, with line ranges and signatures; use it "
            "instead of reading the file."
        ),
        args=OutlineArgs,
        handler=code_outline,
        group="code",
        read_only=True,
        idempotent=True,
        title="Outline a source file",
    ),
    Tool(
        name="code_imports",
        description=(
            "A source file's imports as written (not resolved to files), with their line ranges."
        ),
        args=ImportsArgs,
        handler=code_imports,
        group="code",
        read_only=True,
        idempotent=True,
        title="List a file's imports",
    ),
    Tool(
        name="find_symbol",
        description=(
            "Definitions of a name in the checkout, a line each: exact (also Elixir name/arity), then "
            "ending in .query, then prefix matches; imports, HEEx components, EEx only with kind."
        ),
        args=FindArgs,
        handler=find_symbol,
        group="code",
        read_only=True,
        idempotent=True,
        title="Find a symbol definition",
    ),
    Tool(
        name="code_diff",
        description=(
            "Symbols added (+), removed (-), modified (~) per file from the merge base of base and head "
            "to head (rename: removal plus addition)."
        ),
        args=DiffArgs,
        handler=code_diff,
        group="code",
        read_only=True,
        idempotent=True,
        title="Structural diff of two revisions",
    ),
]

INSTRUCTIONS = (
    "Code navigation: before reading whole files, use code_outline (what a file defines), find_symbol "
    "(where a name is defined), code_imports (what a file imports) and code_diff (which symbols changed "
    "since a base revision). They read a tree-sitter index of the Git checkout, refreshed on demand."
)
