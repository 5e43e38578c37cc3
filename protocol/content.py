"""Client-adaptive tool-result content: which shape a client gets, and the markdown
summary Claude clients show in their transcript.

The shape is chosen once, at ``initialize``, from ``clientInfo.name``
(`content_mode`), unless ``[server] content`` (``MEMTRIO_CONTENT``) forces it:

- ``markdown``: Claude clients get two text items, a short markdown summary for
  the person reading the transcript (``audience: ["user"]``) and the compact
  JSON payload for the model (``audience: ["assistant"]``);
- ``json``: Codex and every other or unknown client get one plain JSON text
  item with no annotations (Codex's strict client rejects annotations).

A Claude client is one whose name, lower-cased, is ``claude`` or starts with
``claude`` followed by a character that is not a letter or a digit:
``claude-code`` (Claude Code), ``claude-ai`` (Claude Desktop and claude.ai),
``Claude Desktop``, ``claude.ai``. ``claudette`` is not one.

Pure: builds values, performs no I/O.
"""

from __future__ import annotations

import re
from typing import Literal

from .plural import plural, singular_of

ContentMode = Literal["markdown", "json"]
CONTENT_SETTINGS = ("auto", "markdown", "json")

_CLAUDE = re.compile(r"claude(?:[^a-z0-9]|$)")
# Limits of the markdown summary: items listed, characters per line, characters in all.
SUMMARY_ITEMS = 8
SUMMARY_LINE = 120
SUMMARY_CHARS = 1200
# Fields that name an item, in order of preference, and the lists that hold a
# result's main items (any other list-valued field is used when none of these is).
_LABEL_FIELDS = ("name", "title", "content", "text", "path", "qualified_name", "uri", "id")
_MAIN_LISTS = (
    "memories",
    "results",
    "entities",
    "relations",
    "symbols",
    "matches",
    "items",
    "hits",
    "paths",
)


def is_claude_client(name: str) -> bool:
    """Whether ``clientInfo.name`` is a Claude client (Claude Code, Claude Desktop, claude.ai)."""
    return _CLAUDE.match(name.strip().lower()) is not None


def content_mode(client_name: str, setting: str = "auto") -> ContentMode:
    """The content shape for a client: ``setting`` unless it is ``auto``, else by name."""
    if setting == "markdown":
        return "markdown"
    if setting == "json":
        return "json"
    return "markdown" if is_claude_client(client_name) else "json"


def items(tool: str, value: object, payload: str, mode: ContentMode) -> list[dict[str, object]]:
    """The content items of a successful result: ``payload`` is ``value`` as compact JSON."""
    if mode == "json" or not isinstance(value, dict | list):
        return [{"type": "text", "text": payload}]
    return [
        {"type": "text", "text": summary(tool, value), "annotations": {"audience": ["user"]}},
        {"type": "text", "text": payload, "annotations": {"audience": ["assistant"]}},
    ]


def summary(tool: str, value: dict[str, object] | list[object]) -> str:
    """A short markdown rendering of a structured result: a headline naming the tool
    and the result's scalar fields, then its main list, a few items long."""
    rows: list[object] | None
    if isinstance(value, list):
        scalars: dict[str, object] = {}
        key, rows = "items", value
    else:
        scalars = {k: v for k, v in value.items() if _is_scalar(v)}
        key, rows = _main_list(value)
    head = f"**{tool}**"
    facts = [f"{k}: {_short(v, 40)}" for k, v in list(scalars.items())[:6]]
    if rows is not None:
        facts.insert(0, plural(len(rows), singular_of(key), key))
    lines = [_clip(f"{head} — {', '.join(facts)}" if facts else head)]
    for row in (rows or [])[:SUMMARY_ITEMS]:
        lines.append(_clip(f"- {_label(row)}"))
    if rows is not None and len(rows) > SUMMARY_ITEMS:
        lines.append(f"- … {len(rows) - SUMMARY_ITEMS} more")
    text = "\n".join(lines)
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def _is_scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _main_list(value: dict[str, object]) -> tuple[str, list[object] | None]:
    for key in _MAIN_LISTS:
        found = value.get(key)
        if isinstance(found, list):
            return key, found
    for key, found in value.items():
        if isinstance(found, list):
            return key, found
    return "", None


def _label(row: object) -> str:
    """One item in a line: its naming field (with its id in front when it has another)."""
    if not isinstance(row, dict):
        return _short(row, SUMMARY_LINE)
    for field in _LABEL_FIELDS:
        label = row.get(field)
        if label is not None and _is_scalar(label):
            ident = row.get("id")
            prefix = f"`{ident}` " if field != "id" and _is_scalar(ident) and ident else ""
            return prefix + _short(label, SUMMARY_LINE)
    pairs = [f"{k}: {_short(v, 30)}" for k, v in row.items() if _is_scalar(v)]
    return ", ".join(pairs[:4]) or "{…}"


def _short(value: object, limit: int) -> str:
    if value is None or isinstance(value, bool):
        return "null" if value is None else str(value).lower()
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip(line: str) -> str:
    return line if len(line) <= SUMMARY_LINE + 20 else line[: SUMMARY_LINE + 19] + "…"
