"""How the tests start a memtrio server process: its command line and its environment,
those of the chaos client (``memtrio.actors.chaos.client``) that tests and tools share,
pointed at the running test's store."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from memtrio.actors.chaos import client
from memtrio.actors.chaos.client import server_command as server_command  # re-exported
from stores import store_env


def server_env(home: Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`client.server_env` of ``home``, on the home's PostgreSQL database in a PostgreSQL
    run, then ``env``."""
    return client.server_env(home, {**store_env(home), **(env or {})})
