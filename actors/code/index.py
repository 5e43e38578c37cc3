"""The code index: ``$MEMTRIO_HOME/code-v{N}.sqlite``.

Rebuildable from the checkouts at any time, so it is never migrated: a new
schema or extractor version uses a new file (``N`` is `VERSION`) and older
files are left alone. A file that is not a database is recreated when opened;
a damaged page found later is reported by SQLite ("malformed") and the service
recreates the file then (no full check at startup: it would cost about a
second per 150 MB on every server start).

Tables: ``checkouts`` (one row per checkout root), ``files`` (path, language,
the size and mtime it was indexed at, coverage or the reason it was skipped)
and ``symbols`` (one row per symbol, in outline order, with a lower-cased
name and its last segment for `find`, its qualified name, and its digest).
Files and symbols carry the digest of their text without whitespace and
comments (see `digest`), indexed so that code anchors find moved code with one
query.

All methods are synchronous; `CodeService` runs them in one worker thread.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

from ...supervisors import private, trace
from .symbols import Symbol, qualified_names
from .wire import ParseResult

# One file's parse result as stored: (path, language, size, mtime_ns, result).
FileRow = tuple[str, str, int, int, ParseResult]
# One symbol of a file's outline: (kind, name, start, end, depth, parent, signature).
SymbolRow = tuple[str, str, int, int, int, str, str]
# One `find` match: (path, start, end, kind, name, parent, signature, size, mtime_ns, lname).
MatchRow = tuple[str, int, int, str, str, str, str, int, int, str]
# One symbol a code anchor can name: (path, qualified name, kind, digest).
PlaceRow = tuple[str, str, str, str]

# Bump when the schema or what the extractor produces changes.
# 2: file and symbol digests, qualified names (code anchors, issue #33).
VERSION = 2

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS checkouts(
    id INTEGER PRIMARY KEY,
    root TEXT NOT NULL UNIQUE,
    source_files INTEGER NOT NULL DEFAULT 0,
    indexed_files INTEGER NOT NULL DEFAULT 0,
    refreshed_at REAL
);
CREATE TABLE IF NOT EXISTS files(
    id INTEGER PRIMARY KEY,
    checkout INTEGER NOT NULL REFERENCES checkouts(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    language TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    coverage TEXT,
    skipped TEXT,
    digest TEXT NOT NULL DEFAULT '',
    UNIQUE(checkout, path)
);
CREATE INDEX IF NOT EXISTS files_digest ON files(checkout, digest);
CREATE TABLE IF NOT EXISTS symbols(
    file INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    checkout INTEGER NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    lname TEXT NOT NULL,
    tail TEXT NOT NULL,
    start INTEGER NOT NULL,
    end INTEGER NOT NULL,
    depth INTEGER NOT NULL,
    parent TEXT NOT NULL,
    signature TEXT NOT NULL,
    qname TEXT NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY(file, seq)
) WITHOUT ROWID;
"""
# The lookup indexes of `symbols`. A large refresh drops them and builds them again
# at its end (`CodeIndex.begin_bulk`); opening the file makes any that are missing
# (a server killed in the middle of a large refresh).
LOOKUP_INDEXES = """
CREATE INDEX IF NOT EXISTS symbols_lname ON symbols(checkout, lname);
CREATE INDEX IF NOT EXISTS symbols_tail ON symbols(checkout, tail);
CREATE INDEX IF NOT EXISTS symbols_qname ON symbols(checkout, qname);
CREATE INDEX IF NOT EXISTS symbols_digest ON symbols(checkout, digest);
"""
_LOOKUP_NAMES = ("symbols_lname", "symbols_tail", "symbols_qname", "symbols_digest")

# A refresh that writes at least this many files, and at least as many as the index
# already holds (every checkout), is a bulk load: it drops the symbols' lookup indexes
# while it writes and builds them once at its end. Sorting once costs about a third of
# keeping four indexes up to date row by row (issue #42); the rebuild, which covers
# the rows already there too, is at most about twice the new rows' share.
BULK_FILES = 1000

# Kinds find_symbol returns only when asked for by `kind`.
HIDDEN_KINDS = ("import", "component", "slot", "expression")
LOOKUP_CHUNK = 400  # names or paths per batched lookup (SQLite's variable limit is higher)
_QUOTES = "\"'`<>;() "


class IndexUnavailable(Exception):
    """The code index file cannot be opened or created."""


def index_path(home: Path) -> Path:
    return home / f"code-v{VERSION}.sqlite"


def name_tail(name: str, kind: str) -> str:
    """The last segment of a lower-cased name: what `.query` / `/query` suffixes match."""
    return _tail(name.lower(), kind)


def _tail(lname: str, kind: str) -> str:
    """`name_tail` of an already lower-cased name."""
    text = lname.strip(_QUOTES)
    cut = max(text.rfind("."), text.rfind(":"), text.rfind("\\"))
    if kind == "import":
        cut = max(cut, text.rfind("/"))
    return text[cut + 1 :] if cut >= 0 else text


class CodeIndex:
    """The SQLite code index (one connection, used from one thread at a time)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = self._open()

    # -- opening ---------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        # Private from the start (0600; SQLite gives -wal and -shm the same mode).
        private.create_file(self.path)
        conn = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None, timeout=30.0
        )
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.executescript(SCHEMA + LOOKUP_INDEXES)
        conn.execute(
            "INSERT OR IGNORE INTO meta(key, value) VALUES ('version', ?)", (str(VERSION),)
        )
        return conn

    def _open(self) -> sqlite3.Connection:
        try:
            private.make_dir(self.path.parent)
        except OSError as exc:
            raise IndexUnavailable(f"cannot create {self.path.parent}: {exc}") from None
        try:
            return self._connect()
        except OSError as exc:
            raise IndexUnavailable(f"cannot create the code index {self.path}: {exc}") from None
        except sqlite3.OperationalError as exc:
            # cannot open, locked, read-only: the file may be fine, so it is kept
            raise IndexUnavailable(f"cannot open the code index {self.path}: {exc}") from None
        except sqlite3.DatabaseError as first:
            trace.warning("code", "index_recreated", path=str(self.path), reason=str(first))
            try:
                self._delete_files()
                return self._connect()
            except (sqlite3.Error, OSError) as exc:
                raise IndexUnavailable(
                    f"cannot recreate the code index {self.path}: {exc}"
                ) from None

    def _delete_files(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    def recreate(self) -> None:
        """Drop the (corrupt) file and start an empty index."""
        with contextlib.suppress(sqlite3.Error):
            self.conn.close()
        self._delete_files()
        self.conn = self._open()

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.conn.close()

    # -- writing -----------------------------------------------------------

    def begin_bulk(self, files: int) -> bool:
        """Whether writing ``files`` new files is a bulk load (see `BULK_FILES`); if so the
        lookup indexes of `symbols` are dropped, and the caller must build them again
        (`create_lookup_indexes`) when the load ends, however it ends."""
        if (
            files < BULK_FILES
            or files < self.conn.execute("SELECT count(*) FROM files").fetchone()[0]
        ):
            return False
        self.drop_lookup_indexes()
        return True

    def drop_lookup_indexes(self) -> None:
        for name in _LOOKUP_NAMES:
            self.conn.execute(f"DROP INDEX IF EXISTS {name}")

    def create_lookup_indexes(self) -> None:
        """Build the lookup indexes of `symbols` that are missing."""
        self.conn.executescript(LOOKUP_INDEXES)

    def checkout_id(self, root: str) -> int:
        # OR IGNORE: another server process may add the same checkout at the same time.
        self.conn.execute("INSERT OR IGNORE INTO checkouts(root) VALUES (?)", (root,))
        return self.conn.execute("SELECT id FROM checkouts WHERE root = ?", (root,)).fetchone()[0]

    def file_map(self, cid: int) -> dict[str, tuple[int, int]]:
        """path -> (size, mtime_ns) of every file indexed in a checkout."""
        rows = self.conn.execute(
            "SELECT path, size, mtime_ns FROM files WHERE checkout = ?", (cid,)
        )
        return {path: (size, mtime) for path, size, mtime in rows}

    def apply(
        self,
        cid: int,
        results: Iterable[FileRow],
        deleted: Iterable[str] = (),
    ) -> None:
        """Store parse results (path, language, size, mtime_ns, result) and drop ``deleted``, in one transaction."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for path in deleted:
                row = conn.execute(
                    "SELECT id FROM files WHERE checkout = ? AND path = ?", (cid, path)
                ).fetchone()
                if row:
                    conn.execute("DELETE FROM symbols WHERE file = ?", (row[0],))
                    conn.execute("DELETE FROM files WHERE id = ?", (row[0],))
            outlines: dict[int, list[Symbol]] = {}
            for result in results:
                fid, symbols = self._store_file(cid, result)
                outlines[fid] = symbols  # a file given twice keeps its last result
            # One statement for the symbols of every file, their rows made one at a time.
            conn.executemany(
                "INSERT INTO symbols(file, seq, checkout, kind, name, lname, tail, start, end, depth, parent, signature, qname, digest)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    (
                        fid,
                        seq,
                        cid,
                        s.kind,
                        s.name,
                        (lname := s.name.lower()),
                        _tail(lname, s.kind),
                        s.start,
                        s.end,
                        s.depth,
                        s.parent,
                        s.signature,
                        qname,
                        s.digest,
                    )
                    for fid, symbols in outlines.items()
                    for seq, (s, qname) in enumerate(
                        zip(symbols, qualified_names(symbols), strict=True)
                    )
                ),
            )
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    def _store_file(self, cid: int, row: FileRow) -> tuple[int, list[Symbol]]:
        """Replace one file's entry and delete its symbols (inside `apply`'s
        transaction); its id and the symbols to insert."""
        conn = self.conn
        path, language, size, mtime_ns, result = row
        outline = result.outline
        coverage = outline.coverage if outline is not None else None
        skipped = result.skipped if outline is None else None
        digest = outline.digest if outline is not None else ""
        found = conn.execute(
            "SELECT id FROM files WHERE checkout = ? AND path = ?", (cid, path)
        ).fetchone()
        if found:
            fid = found[0]
            conn.execute("DELETE FROM symbols WHERE file = ?", (fid,))
            conn.execute(
                "UPDATE files SET language = ?, size = ?, mtime_ns = ?, coverage = ?, skipped = ?, digest = ? WHERE id = ?",
                (language, size, mtime_ns, coverage, skipped, digest, fid),
            )
        else:
            fid = conn.execute(
                "INSERT INTO files(checkout, path, language, size, mtime_ns, coverage, skipped, digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (cid, path, language, size, mtime_ns, coverage, skipped, digest),
            ).lastrowid
        return fid, outline.symbols if outline is not None else []

    def set_counts(self, cid: int, source_files: int, indexed_files: int, now: float) -> None:
        self.conn.execute(
            "UPDATE checkouts SET source_files = ?, indexed_files = ?, refreshed_at = ? WHERE id = ?",
            (source_files, indexed_files, now, cid),
        )

    # -- reading -------------------------------------------------------------

    def counts(self, cid: int) -> tuple[int, int]:
        row = self.conn.execute(
            "SELECT source_files, indexed_files FROM checkouts WHERE id = ?", (cid,)
        ).fetchone()
        return (row[0], row[1]) if row else (0, 0)

    def file_entry(
        self, cid: int, path: str
    ) -> tuple[int, str, int, int, str | None, str | None] | None:
        """(id, language, size, mtime_ns, coverage, skipped) of one indexed file."""
        return self.conn.execute(
            "SELECT id, language, size, mtime_ns, coverage, skipped FROM files WHERE checkout = ? AND path = ?",
            (cid, path),
        ).fetchone()

    def file_symbols(self, fid: int) -> list[SymbolRow]:
        """(kind, name, start, end, depth, parent, signature) in outline order."""
        return self.conn.execute(
            "SELECT kind, name, start, end, depth, parent, signature FROM symbols WHERE file = ? ORDER BY seq",
            (fid,),
        ).fetchall()

    def skipped_files(self, cid: int) -> list[tuple[str, str]]:
        return self.conn.execute(
            "SELECT path, skipped FROM files WHERE checkout = ? AND skipped IS NOT NULL ORDER BY path",
            (cid,),
        ).fetchall()

    def find(
        self, cid: int, query: str, kind: str | None, limit: int
    ) -> tuple[list[MatchRow], int]:
        """Matches of ``query`` and their total: exact names first (an Elixir ``name``
        also matches ``name/arity``), then names ending in ``.query`` (``/query``
        for imports), then prefixes; each group by path and line."""
        q = query.lower()
        if kind is not None:
            kind_sql, kind_args = "s.kind = ?", [kind.lower()]
        else:
            kind_sql, kind_args = (
                f"s.kind NOT IN ({', '.join('?' * len(HIDDEN_KINDS))})",
                list(HIDDEN_KINDS),
            )
        cols = "f.path, s.start, s.end, s.kind, s.name, s.parent, s.signature, f.size, f.mtime_ns, s.lname"
        where = f"s.checkout = ? AND {kind_sql}"
        common = [cid, *kind_args]
        conn = self.conn
        high = q + "\U0010ffff"
        # A range on lname (so the index is used) narrowed to the name or name/arity.
        exact_sql = "(s.lname >= ? AND s.lname < ? AND (s.lname = ? OR s.lname GLOB ?))"
        exact_args = [q, q + "0", q, _glob_escape(q) + "/[0-9]*"]

        def group(cond: str, args: Sequence[object], room: int) -> tuple[list[MatchRow], int]:
            count = conn.execute(
                f"SELECT count(*) FROM symbols s WHERE {where} AND {cond}", (*common, *args)
            ).fetchone()[0]
            if room <= 0 or count == 0:
                return [], count
            rows = conn.execute(
                f"SELECT {cols} FROM symbols s JOIN files f ON f.id = s.file WHERE {where} AND {cond}"
                " ORDER BY f.path, s.start LIMIT ?",
                (*common, *args, room),
            ).fetchall()
            return rows, count

        exact, exact_total = group(exact_sql, exact_args, limit)
        # Same last segment but outside the exact/prefix range; the suffix itself is checked here.
        tail = name_tail(q, "import" if kind == "import" else "")
        suffixes = ("." + q, "::" + q, "\\" + q) + (("/" + q,) if kind == "import" else ())
        suffix = [
            r
            for r in conn.execute(
                f"SELECT {cols} FROM symbols s JOIN files f ON f.id = s.file WHERE {where}"
                " AND s.tail = ? AND NOT (s.lname >= ? AND s.lname < ?) ORDER BY f.path, s.start",
                (*common, tail, q, high),
            )
            if r[9].strip(_QUOTES) == q or r[9].strip(_QUOTES).endswith(suffixes)
        ]
        room = limit - len(exact)
        prefix, prefix_total = group(
            f"s.lname > ? AND s.lname < ? AND NOT {exact_sql}",
            [q, high, *exact_args],
            room - len(suffix),
        )
        rows = (exact + suffix[: max(0, room)] + prefix)[:limit]
        return rows, exact_total + len(suffix) + prefix_total

    # -- code anchors ------------------------------------------------------------
    # Symbols of the kinds in HIDDEN_KINDS (imports, template usages) are never anchors.

    def file_state(self, cid: int, path: str) -> tuple[str, str | None, str] | None:
        """(language, skipped reason, digest) of one file of the index."""
        return self.conn.execute(
            "SELECT language, skipped, digest FROM files WHERE checkout = ? AND path = ?",
            (cid, path),
        ).fetchone()

    def file_states(self, cid: int, paths: Sequence[str]) -> dict[str, tuple[str, str | None, str]]:
        """`file_state` of each of ``paths`` the index holds, in one query per
        `LOOKUP_CHUNK` paths."""
        out: dict[str, tuple[str, str | None, str]] = {}
        for at in range(0, len(paths), LOOKUP_CHUNK):
            part = paths[at : at + LOOKUP_CHUNK]
            for path, language, skipped, digest in self.conn.execute(
                "SELECT path, language, skipped, digest FROM files WHERE checkout = ?"
                f" AND path IN ({', '.join('?' * len(part))})",
                (cid, *part),
            ):
                out[path] = (language, skipped, digest)
        return out

    def places_at(
        self, cid: int, wanted: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], list[PlaceRow]]:
        """`places` of each (path, qname) of ``wanted`` that has any, in one query per
        `LOOKUP_CHUNK` names (by the qualified-name index, then the paths kept)."""
        out: dict[tuple[str, str], list[PlaceRow]] = {}
        keep = set(wanted)
        names = sorted({qname for _, qname in wanted})
        for at in range(0, len(names), LOOKUP_CHUNK):
            part = names[at : at + LOOKUP_CHUNK]
            for row in self.conn.execute(
                "SELECT f.path, s.qname, s.kind, s.digest FROM symbols s JOIN files f ON f.id = s.file"
                f" WHERE s.checkout = ? AND s.qname IN ({', '.join('?' * len(part))}) AND {_SHOWN}"
                " ORDER BY s.seq",
                (cid, *part, *HIDDEN_KINDS),
            ):
                if (row[0], row[1]) in keep:
                    out.setdefault((row[0], row[1]), []).append(row)
        return out

    def places(self, cid: int, path: str, qname: str) -> list[PlaceRow]:
        """The anchorable symbols named ``qname`` in ``path``, in outline order."""
        return self.conn.execute(
            "SELECT f.path, s.qname, s.kind, s.digest FROM symbols s JOIN files f ON f.id = s.file"
            f" WHERE s.checkout = ? AND s.qname = ? AND f.path = ? AND {_SHOWN} ORDER BY s.seq",
            (cid, qname, path, *HIDDEN_KINDS),
        ).fetchall()

    def places_in(self, cid: int, path: str) -> list[PlaceRow]:
        """The anchorable symbols of ``path``, in outline order."""
        return self.conn.execute(
            "SELECT f.path, s.qname, s.kind, s.digest FROM symbols s JOIN files f ON f.id = s.file"
            f" WHERE f.checkout = ? AND f.path = ? AND {_SHOWN} ORDER BY s.seq",
            (cid, path, *HIDDEN_KINDS),
        ).fetchall()

    def places_named(self, cid: int, qname: str, limit: int) -> list[PlaceRow]:
        """Anchorable symbols whose qualified name is exactly ``qname``, by path and line."""
        return self.conn.execute(
            "SELECT f.path, s.qname, s.kind, s.digest FROM symbols s JOIN files f ON f.id = s.file"
            f" WHERE s.checkout = ? AND s.qname = ? AND {_SHOWN} ORDER BY f.path, s.seq LIMIT ?",
            (cid, qname, *HIDDEN_KINDS, limit),
        ).fetchall()

    def places_tailed(self, cid: int, tail: str, limit: int) -> list[PlaceRow]:
        """Anchorable symbols whose name's last segment is ``tail`` (lower case), by path and line."""
        return self.conn.execute(
            "SELECT f.path, s.qname, s.kind, s.digest FROM symbols s JOIN files f ON f.id = s.file"
            f" WHERE s.checkout = ? AND s.tail = ? AND {_SHOWN} ORDER BY f.path, s.seq LIMIT ?",
            (cid, tail, *HIDDEN_KINDS, limit),
        ).fetchall()

    def places_with_digest(self, cid: int, digest: str, limit: int) -> list[PlaceRow]:
        """Anchorable symbols whose digest is ``digest``, by path and line (an index lookup)."""
        return self.conn.execute(
            "SELECT f.path, s.qname, s.kind, s.digest FROM symbols s JOIN files f ON f.id = s.file"
            f" WHERE s.checkout = ? AND s.digest = ? AND {_SHOWN} ORDER BY f.path, s.seq LIMIT ?",
            (cid, digest, *HIDDEN_KINDS, limit),
        ).fetchall()

    def files_with_digest(self, cid: int, digest: str, limit: int) -> list[str]:
        """Paths of the indexed files whose digest is ``digest``, sorted (an index lookup)."""
        rows = self.conn.execute(
            "SELECT path FROM files WHERE checkout = ? AND digest = ? AND skipped IS NULL"
            " ORDER BY path LIMIT ?",
            (cid, digest, limit),
        )
        return [row[0] for row in rows]

    def imports_tailed(self, cid: int, tails: Sequence[str], limit: int) -> list[tuple[str, str]]:
        """(path, import as written) of the imports whose last segment is one of ``tails``."""
        if not tails:
            return []
        return self.conn.execute(
            "SELECT f.path, s.name FROM symbols s JOIN files f ON f.id = s.file"
            f" WHERE s.checkout = ? AND s.tail IN ({', '.join('?' * len(tails))})"
            " AND s.kind = 'import' ORDER BY f.path, s.seq LIMIT ?",
            (cid, *tails, limit),
        ).fetchall()


_SHOWN = f"s.kind NOT IN ({', '.join('?' * len(HIDDEN_KINDS))})"


def _glob_escape(text: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)
