"""The store's shared SQL, as PostgreSQL runs it.

The SQL modules of the store are written once, in the SQL both databases
understand; the few SQLite spellings they use are rewritten here, mechanically
and once per statement text (cached):

- ``?`` placeholders become ``%s`` (and a literal ``%`` becomes ``%%``);
- ``INSERT OR IGNORE INTO t ...`` becomes ``INSERT INTO t ... ON CONFLICT DO NOTHING``;
- ``a = b COLLATE NOCASE`` becomes ``lower(a) = lower(b)`` and ``GROUP BY a
  COLLATE NOCASE`` becomes ``GROUP BY lower(a)`` (no ICU collation is needed);
- ``INDEXED BY name`` (a SQLite planner hint) is dropped, ``rowid`` is ``id``,
  ``sqlite_sequence`` (the ids' high-water marks) is ``id_marks``;
- an ``INSERT`` into a table with an id gets ``RETURNING id``, so the
  connection can give the cursor's ``lastrowid`` as sqlite3 does.

What differs in meaning (full text, JSON rows, PRAGMAs, id high-water marks)
is not rewritten: those call sites ask `dialect.is_postgres` and use the
PostgreSQL statements of `fts` and `schema`.
"""

from __future__ import annotations

import functools
import re

# Tables whose rows get an id from a sequence (`lastrowid`).
ID_TABLES = frozenset({"memories", "scopes", "entities", "relations", "recall_log"})

_OR_IGNORE = re.compile(r"^\s*INSERT\s+OR\s+IGNORE\s+INTO\b", re.IGNORECASE)
_INSERT_INTO = re.compile(r"^\s*INSERT\s+INTO\s+(\w+)", re.IGNORECASE)
_NOCASE_EQ = re.compile(r"([\w.]+|\?|'[^']*')\s*=\s*([\w.]+|\?|'[^']*')\s+COLLATE\s+NOCASE", re.I)
_NOCASE_GROUP = re.compile(r"GROUP\s+BY\s+([\w.]+)\s+COLLATE\s+NOCASE", re.IGNORECASE)
_INDEXED_BY = re.compile(r"\s+INDEXED\s+BY\s+\w+", re.IGNORECASE)
_ROWID = re.compile(r"\browid\b", re.IGNORECASE)
_SEQUENCE = re.compile(r"\bsqlite_sequence\b")
_RETURNING = re.compile(r"\bRETURNING\b", re.IGNORECASE)


_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def _placeholders(sql: str) -> str:
    """``?`` and ``:name`` outside string literals to ``%s`` and ``%(name)s``; ``%`` to ``%%``."""
    out: list[str] = []
    for i, part in enumerate(sql.split("'")):
        part = part.replace("%", "%%")
        if i % 2 == 0:  # outside a literal ('' inside one splits into an empty outside part)
            part = _NAMED.sub(r"%(\1)s", part.replace("?", "%s"))
        out.append(part)
    return "'".join(out)


@functools.lru_cache(maxsize=1024)
def translate(sql: str) -> tuple[str, bool]:
    """(the PostgreSQL text of ``sql``, whether it returns the new row's id)."""
    text = sql.strip().rstrip(";")
    ignore = bool(_OR_IGNORE.match(text))
    if ignore:
        text = _OR_IGNORE.sub("INSERT INTO", text, count=1)
    text = _NOCASE_EQ.sub(r"lower(\1) = lower(\2)", text)
    text = _NOCASE_GROUP.sub(r"GROUP BY lower(\1)", text)
    text = _INDEXED_BY.sub("", text)
    text = _ROWID.sub("id", text)
    text = _SEQUENCE.sub("id_marks", text)
    returning = False
    insert = _INSERT_INTO.match(text)
    if ignore:
        text += " ON CONFLICT DO NOTHING"
    if insert and insert[1].lower() in ID_TABLES and not _RETURNING.search(text):
        text += " RETURNING id"
        returning = True
    return _placeholders(text), returning
