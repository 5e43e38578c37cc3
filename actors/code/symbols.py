"""What an outline of a source file is: its `Symbol`s, in an `Outline`.

Kept apart from ``extract`` (tree-sitter, which only the parser worker
processes need) so that the server and the CLI can read outlines without
loading the parsers.
"""

from __future__ import annotations

import msgspec

MAX_BYTES = 1024 * 1024  # larger files are not outlined


class Symbol(msgspec.Struct, array_like=True, frozen=True):
    kind: str
    name: str
    start: int  # 1-based first line
    end: int  # 1-based last line
    depth: int
    parent: str  # the enclosing symbol's name, "" at top level
    signature: str  # first source line when it says more than kind and name, else ""
    # hash of its text without whitespace, comments and its own name (see `digest`)
    digest: str = ""


class Outline(msgspec.Struct, array_like=True, frozen=True):
    language: str
    coverage: str  # "complete" or "partial: <reason>"
    symbols: list[Symbol]
    digest: str = ""  # hash of the whole file's text without whitespace and comments


def qualified_names(symbols: list[Symbol]) -> list[str]:
    """Each symbol's qualified name, in outline order: its ancestors' names and its own
    joined with ``.`` (``RetryPolicy.backoff``); a name that already starts with its
    parent's (nested Elixir modules, ``Parent.Child``) is not prefixed twice."""
    out: list[str] = []
    chain: list[tuple[str, str]] = []  # (name, qualified name) of the open ancestors
    for sym in symbols:
        del chain[sym.depth :]
        if not chain:
            qname = sym.name
        else:
            pname, pq = chain[-1]
            if sym.name.startswith(pname + "."):
                qname = pq[: len(pq) - len(pname)] + sym.name
            else:
                qname = f"{pq}.{sym.name}"
        out.append(qname)
        chain.append((sym.name, qname))
    return out
