"""Changes made by other processes, through PostgreSQL's LISTEN/NOTIFY.

Every write transaction that reports changes (`writer.Written`) also sends
``pg_notify(CHANNEL, payload)``: the notification is transactional, so it is
delivered when, and only if, the write commits. The payload names the
sending store handle (``origin``), the store's change marks before and after
the write (``m``: the receiver records them as told, `coherence`) and the
changed rows (kind, id, deleted), or asks for a reset when they do not fit
`MAX_PAYLOAD` (PostgreSQL's limit is 8000 bytes).

Each process with a PostgreSQL store runs `serve_change_listener`: one
connection that LISTENs, and hands the changes of *other* processes to the
store's listeners (the ranker's cache, the vector index) as `Change` records
without vectors (a listener re-reads the rows). When the listening connection
is lost, notifications may have been missed: after reconnecting, the listener
reports a reset, so every cache reloads from the store.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import NamedTuple, Protocol

import psycopg
import trio

from ....supervisors import faults, trace
from ....supervisors.supervisor import ChildContext
from ..coherence import ToldMarks
from ..dsn import redact
from ..messages import Change
from .conn import PgConnection

logger = logging.getLogger(__name__)


class ChangeSink(Protocol):
    """What the listener reports to: the store handle (`writer.Store`)."""

    origin: str
    told: ToldMarks

    def _notify(self, changes: Sequence[Change]) -> None: ...


CHANNEL = "memtrio_changes"
MAX_PAYLOAD = 7000
# How long one wait for notifications lasts in its thread (also the shutdown delay).
WAIT = 0.25
# Reconnection of the listening connection: exponential backoff between these (seconds).
RECONNECT_START = 0.1
RECONNECT_MAX = 5.0
ACTOR = "store.listener"


def payload(origin: str, changes: Sequence[Change], marks: tuple[int, int] = (0, 0)) -> str:
    rows = [[c.kind, c.id, 1 if c.deleted else 0] for c in changes]
    mark = list(marks)
    text = json.dumps({"o": origin, "m": mark, "c": rows}, separators=(",", ":"))
    if len(text) > MAX_PAYLOAD or any(c.kind == "reset" for c in changes):
        text = json.dumps({"o": origin, "m": mark, "reset": 1}, separators=(",", ":"))
    return text


def announce(
    conn: PgConnection, origin: str, changes: Sequence[Change], marks: tuple[int, int] = (0, 0)
) -> None:
    """Inside the write transaction: notify the other processes of ``changes`` at commit,
    with the store's change marks before and after them (`coherence`)."""
    conn.native("SELECT pg_notify(%s, %s)", (CHANNEL, payload(origin, changes, marks)))


class Notice(NamedTuple):
    """One notification of another process: its changes and the marks they moved."""

    changes: list[Change]
    marks: tuple[int, int] = (0, 0)


def parse(text: str, origin: str) -> Notice:
    """The changes of one notification (none when it is ours, or unreadable)."""
    try:
        body = json.loads(text)
    except ValueError:
        return Notice([])
    if not isinstance(body, dict) or body.get("o") == origin:
        return Notice([])
    mark = body.get("m")
    marks = (0, 0)
    if isinstance(mark, list) and len(mark) == 2 and all(type(m) is int for m in mark):
        marks = (mark[0], mark[1])
    if body.get("reset"):
        return Notice([Change(kind="reset")], marks)
    out = []
    for row in body.get("c", ()):
        kind, item, deleted = row
        if kind in ("memory", "entity", "relation"):
            out.append(Change(kind=kind, id=int(item), deleted=bool(deleted)))
    return Notice(out, marks)


def _listen(url: str) -> psycopg.Connection:
    raw = psycopg.connect(url, autocommit=True, connect_timeout=10)
    raw.execute(f"LISTEN {CHANNEL}")
    return raw


def _wait(conn: psycopg.Connection) -> list[str]:
    return [n.payload for n in conn.notifies(timeout=WAIT)]


async def serve_change_listener(
    ctx: ChildContext,
    store: ChangeSink,
    url: str,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """LISTEN for other processes' changes and report them to the store's listeners.

    Error handling: a lost connection is logged and reopened with exponential
    backoff (`RECONNECT_START` to `RECONNECT_MAX`); once it is back, a reset is
    reported (what was missed is unknown). Cancellation: waits at most `WAIT`.
    """
    task_status.started()
    delay = RECONNECT_START
    first = True
    with ctx.cancel_on_shutdown(trio.CancelScope()):
        while True:
            try:
                conn = await trio.to_thread.run_sync(_listen, url)
            except psycopg.Error as exc:
                trace.warning(
                    ACTOR, "listen_failed", error=redact(str(exc).strip(), url), retry_in=delay
                )
                await trio.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX)
                continue
            delay = RECONNECT_START
            if not first:
                trace.event(ACTOR, "listen_resumed", note="reloading caches: changes may be missed")
                store._notify([Change(kind="reset")])
            first = False
            try:
                while True:
                    changes: list[Change] = []
                    texts = await trio.to_thread.run_sync(_wait, conn)
                    if texts and faults.ACTIVE:
                        await faults.hit("store.notice")  # a notification late on its way
                    for text in texts:
                        notice = parse(text, store.origin)
                        store.told.add(*notice.marks)  # told before the listeners run
                        changes += notice.changes
                    if changes:
                        store._notify(changes)
            except psycopg.Error as exc:
                trace.warning(ACTOR, "listen_lost", error=redact(str(exc).strip(), url))
            finally:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(conn.close)
