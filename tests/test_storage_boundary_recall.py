"""The recall log, upkeep and browse callers reach the store only through `StoreTx`: no SQL,
no connection, no backend check, no transitional `read_conn`/`write_conn`. The uses of
`tx.conn` left are calls into other concepts' modules not yet behind their interfaces,
listed here one by one (the list may only shrink)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULES = [
    *(
        f"actors/store/{name}.py"
        for name in (
            "access", "export", "transfer", "import_file", "maintenance", "doctor", "cli",
            "migrate",
        )
    ),
    *(str(p.relative_to(ROOT)) for p in sorted((ROOT / "actors/ui").glob("*.py"))),
]  # fmt: skip
FORBIDDEN = re.compile(
    r"read_conn\(|write_conn\(|\.execute\(|\.executemany\(|^\s*import sqlite3|^\s*import psycopg"
    r"|from psycopg|is_postgres|\.url is None|\.url is not None",
    re.MULTILINE,
)
# (module, the other concept's function called with tx.conn)
TRANSITIONAL = {
    ("actors/store/access.py", "get_memory"),
    ("actors/store/transfer.py", "put_vector"),
    ("actors/store/doctor.py", "audit"),
    ("actors/store/cli.py", "list_memories"),
    ("actors/ui/queries.py", "get_memory"),
}


def test_no_sql_connection_or_backend_check_in_the_converted_modules() -> None:
    found = [
        f"{name}: {m.group(0).strip()}"
        for name in MODULES
        for m in FORBIDDEN.finditer((ROOT / name).read_text())
    ]
    assert found == []


def test_tx_conn_only_for_the_listed_calls_into_other_concepts() -> None:
    uses = set()
    for name in MODULES:
        text = (ROOT / name).read_text()
        for m in re.finditer(r"(\w+)\(\s*(?:self\.)?tx\.conn\b", text):
            uses.add((name, m.group(1)))
        assert text.count("tx.conn") == len(re.findall(r"\w+\(\s*(?:self\.)?tx\.conn\b", text)), (
            name
        )
    assert uses <= TRANSITIONAL, uses - TRANSITIONAL
