"""Print a digest of what a code index holds, to compare two indexes of one tree.

Rows are compared by content, not by internal ids: each file row as
(checkout root, path, language, size, mtime_ns, coverage, skipped) and each
symbol row as (checkout root, path, seq, kind, name, lname, tail, start, end,
depth, parent, signature). Two indexes of the same unchanged tree, built by
different versions of the indexer, must print the same digests.

Run: ``python tools/code_index_digest.py INDEX.sqlite [INDEX2.sqlite]`` (with
two files it also says whether they hold the same rows and exits 1 if not).
"""

from __future__ import annotations

import hashlib
import sqlite3
import sys

FILES_SQL = (
    "SELECT c.root, f.path, f.language, f.size, f.mtime_ns, f.coverage, f.skipped"
    " FROM files f JOIN checkouts c ON c.id = f.checkout ORDER BY c.root, f.path"
)
SYMBOLS_SQL = (
    "SELECT c.root, f.path, s.seq, s.kind, s.name, s.lname, s.tail, s.start, s.end,"
    " s.depth, s.parent, s.signature FROM symbols s JOIN files f ON f.id = s.file"
    " JOIN checkouts c ON c.id = s.checkout ORDER BY c.root, f.path, s.seq"
)


def digest(path: str) -> dict[str, str | int]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    out: dict[str, str | int] = {}
    for name, sql in (("files", FILES_SQL), ("symbols", SYMBOLS_SQL)):
        h = hashlib.sha256()
        count = 0
        for row in conn.execute(sql):
            h.update(repr(row).encode("utf-8", "surrogateescape") + b"\n")
            count += 1
        out[name] = count
        out[f"{name}_sha256"] = h.hexdigest()
    conn.close()
    return out


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print(__doc__, file=sys.stderr)
        return 2
    digests = [digest(p) for p in argv]
    for path, d in zip(argv, digests, strict=True):
        print(path)
        for key, value in d.items():
            print(f"  {key:<15} {value}")
    if len(digests) == 2:
        same = digests[0] == digests[1]
        print("same rows" if same else "DIFFERENT rows")
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
