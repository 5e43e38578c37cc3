"""The code index per checkout, as the dashboard's Code page shows it (a read of the code
index's own database)."""

from __future__ import annotations

import sqlite3
from typing import Any


def checkouts(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Each indexed checkout: files, indexed files, languages, coverage, last refresh."""
    out = []
    for cid, root, source, indexed, refreshed in conn.execute(
        "SELECT id, root, source_files, indexed_files, refreshed_at FROM checkouts ORDER BY root"
    ).fetchall():
        languages = {
            lang: n
            for lang, n in conn.execute(
                "SELECT language, count(*) FROM files WHERE checkout = ? GROUP BY language "
                "ORDER BY count(*) DESC",
                (cid,),
            )
        }
        coverage = {
            str(cov or "full"): n
            for cov, n in conn.execute(
                "SELECT coverage, count(*) FROM files WHERE checkout = ? GROUP BY coverage", (cid,)
            )
        }
        skipped = conn.execute(
            "SELECT count(*) FROM files WHERE checkout = ? AND skipped IS NOT NULL", (cid,)
        ).fetchone()[0]
        out.append(
            {"root": root, "source_files": source, "indexed_files": indexed,
             "languages": languages, "coverage": coverage, "skipped": skipped,
             "refreshed_at": refreshed}
        )  # fmt: skip
    return out
