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


class Outline(msgspec.Struct, array_like=True, frozen=True):
    language: str
    coverage: str  # "complete" or "partial: <reason>"
    symbols: list[Symbol]
