"""Tests that must have the machine to themselves, in a parallel run (pytest-xdist).

The suite runs on two workers (``-n auto`` in pyproject.toml, at most `MAX_WORKERS`).
A test marked ``exclusive`` measures latency or waits on a short deadline (the
connection flood's p50, NOTIFY within a second); so does every ``slow`` test (the
soak tests measure memory and latency): a neighbour's test on the other core would be
measured with it. While it runs, no other
worker runs a test: a readers-writer lock over two files, with the writer first.

- Every other test holds ``room`` shared for its setup, call and teardown.
- An exclusive test takes ``door`` first and keeps it: a worker whose next test
  would take ``room`` shared must pass ``door``, so it waits; then it takes ``room``
  exclusively, once the tests already running on other workers have ended.

Without xdist (``-n 0``, or one test run alone) there is no other worker and nothing
is locked. ``flock`` locks are the kernel's: a worker that dies releases its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

MAX_WORKERS = 2
"""More workers on a bigger machine would only share the same store of servers,
PostgreSQL and subprocesses; two keep the timing tests' assumptions (two cores)."""

exclusive = pytest.mark.exclusive
"""The mark of a test that runs with no other test beside it (see the module's text)."""


ENV = "MEMTRIO_TEST_TURNS"
"""The locks' directory, made by the controller before it starts the workers (they
inherit its environment) and removed by it at the end."""


def open_run() -> None:
    """The controller's part (``pytest_configure``): the locks' directory of this run."""
    if ENV not in os.environ:
        os.environ[ENV] = tempfile.mkdtemp(prefix="memtrio-test-turns-")


def close_run() -> None:
    """The controller's part (``pytest_unconfigure``): remove the locks' directory."""
    where = os.environ.pop(ENV, None)
    if where:
        shutil.rmtree(where, ignore_errors=True)


def directory() -> Path | None:
    """The locks' directory, in a worker of a parallel run (None: not one)."""
    where = os.environ.get(ENV)
    if not where or not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    return Path(where)


@contextlib.contextmanager
def turn(where: Path, alone: bool) -> Iterator[None]:
    """Hold a turn: shared with other tests, or (``alone``) with none."""
    with open(where / "door", "a+b") as door, open(where / "room", "a+b") as room:
        fcntl.flock(door, fcntl.LOCK_EX)
        try:
            fcntl.flock(room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(door, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(room, fcntl.LOCK_UN)
            if alone:
                fcntl.flock(door, fcntl.LOCK_UN)


def workers(cpus: int | None) -> int:
    """``-n auto``: one worker a core, at most `MAX_WORKERS`."""
    return max(1, min(cpus or 1, MAX_WORKERS))
