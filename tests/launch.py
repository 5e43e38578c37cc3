"""How the tests start a memtrio server process: its command line and its environment."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from stores import store_env

SERVER_ENV_PASSTHROUGH = ("PATH", "HOME", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "PYTHONPATH")


def server_env(home: Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """An isolated server environment: ``MEMTRIO_HOME=home``, embeddings off and a
    ``memtrio mcp`` that serves embedded (``MEMTRIO_SERVE_ATTACH=off``: it starts no owner
    that would outlive the test) unless ``env`` says otherwise, and nothing of this
    process's environment but `SERVER_ENV_PASSTHROUGH`."""
    out = {k: os.environ[k] for k in SERVER_ENV_PASSTHROUGH if k in os.environ}
    out["MEMTRIO_HOME"] = str(home)
    out.setdefault("MEMTRIO_EMBEDDINGS", "off")
    out["MEMTRIO_SERVE_ATTACH"] = "off"
    out["PYTHONUNBUFFERED"] = "1"
    out.update(store_env(home))  # the home's PostgreSQL database, in a PostgreSQL run
    out.update(env or {})
    return out


def server_command(args: Sequence[str] = ()) -> list[str]:
    return [sys.executable, "-m", "memtrio.supervisors.cli", "mcp", *args]
