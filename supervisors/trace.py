"""Structured trace logging: one JSON object per line.

Every event carries a timestamp, the actor, the event name and, inside a
request, the trace id and span id of the current span (kept in a context
variable, so trio tasks inherit it). Events go to ``$MEMTRIO_HOME/logs/memtrio.log``
by default; stderr receives warnings and errors only, as one readable line.

Error handling: logging never raises into the caller; a failed write is counted
and reported once on stderr.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import msgspec

from ..protocol.messages import TraceContext
from . import private

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "off": 100}

current: contextvars.ContextVar[TraceContext | None] = contextvars.ContextVar(
    "memtrio_trace", default=None
)

_encoder = msgspec.json.Encoder()


class TraceLog:
    """The process-wide trace sink. Thread-safe; writes whole lines."""

    def __init__(self) -> None:
        self.level = LEVELS["info"]
        self._file: IO[Any] | None = None
        self._lock = threading.Lock()
        self.path: Path | None = None
        self.stderr_level = LEVELS["warning"]
        self._failed = False
        self._held: list[str] | None = None
        # Applied to every line (log and stderr) once set: the store sets it to its
        # redaction when it is handed a connection string (actors.store.dsn.register).
        self.scrub: Callable[[str], str] | None = None

    def configure(
        self, path: Path | None, level: str = "info", stderr_level: str = "warning"
    ) -> None:
        self.close()
        self.level = LEVELS[level]
        self.stderr_level = LEVELS[stderr_level]
        self.path = path
        if path is not None and self.level < LEVELS["off"]:
            try:
                # Private (0700 directory, 0600 file): the log holds queries and memory text.
                private.make_dir(path.parent)
                self._file = private.open_file(path, "a", encoding="utf-8", buffering=1)
            except OSError as exc:
                print(
                    f"memtrio: cannot open the log file {path} ({exc.strerror or exc}); "
                    "going on without it (set [log] path or MEMTRIO_LOG_PATH to a writable file)",
                    file=sys.stderr,
                )
                self._file = None

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                with contextlib.suppress(OSError):
                    self._file.close()
                self._file = None

    def enabled(self, level: str = "info") -> bool:
        return LEVELS[level] >= self.level and self._file is not None

    def emit(
        self, level: str, actor: str, event: str, fields: dict[str, object], echo: bool = True
    ) -> None:
        """Write one event to the log; also to stderr at ``stderr_level`` and above if ``echo``."""
        lvl = LEVELS[level]
        record: dict[str, object] | None = None
        if lvl >= self.level and self._file is not None:
            record = {
                "ts": round(time.time(), 6),
                "level": level,
                "pid": os.getpid(),
                "actor": actor,
                "event": event,
            }
            ctx = current.get()
            if ctx is not None and "trace_id" not in fields:
                record["trace_id"] = ctx.trace_id
                record["span_id"] = ctx.span_id
            record.update(fields)
            try:
                line = _encoder.encode(record).decode("utf-8", "replace")
            except (TypeError, msgspec.EncodeError, UnicodeEncodeError):
                record = {k: _plain(v) for k, v in record.items()}
                line = _encoder.encode(record).decode()
            if self.scrub is not None:
                line = self.scrub(line)
            try:
                with self._lock:
                    if self._file is not None:
                        self._file.write(line + "\n")
            except OSError as exc:
                if not self._failed:
                    self._failed = True
                    self._stderr(
                        f"memtrio: writing the log {self.path} failed ({exc.strerror or exc}); "
                        "later events are lost until it works again"
                    )
        if echo and lvl >= self.stderr_level:
            detail = " ".join(f"{k}={v}" for k, v in fields.items() if k not in ("exc",))
            self._stderr(f"memtrio {level}: {actor}: {event} {detail}".rstrip())

    def _stderr(self, text: str) -> None:
        if self.scrub is not None:
            text = self.scrub(text)
        if self._held is not None:
            self._held.append(text)
        else:
            print(text, file=sys.stderr)

    def hold_stderr(self) -> None:
        """Keep the stderr lines of events back until `release_stderr` (while starting up)."""
        self._held = []

    def release_stderr(self, show: bool) -> None:
        """Print the held lines (``show``), or drop them: a failed start says why in one line,
        and the events are in the log file."""
        held, self._held = self._held, None
        if show:
            for text in held or ():
                print(text, file=sys.stderr)


LOG = TraceLog()


def _plain(value: object) -> object:
    """``value`` as JSON can hold it: a scalar as it is, else its repr; text that is not
    UTF-8 (bytes decoded with surrogateescape, from argv or a file) with escapes."""
    if isinstance(value, (int, float, bool, type(None))):
        return value
    text = value if isinstance(value, str) else repr(value)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def format_traceback(exc: BaseException, limit: int = 4000) -> str:
    """``exc`` with its traceback, as the ``exc`` field of a trace event (the last ``limit`` characters)."""
    return "".join(traceback.format_exception(exc))[-limit:]


def event(actor: str, name: str, level: str = "info", **fields: object) -> None:
    """Record one event of ``actor`` in the trace log."""
    LOG.emit(level, actor, name, fields)


def record(actor: str, name: str, level: str = "info", **fields: object) -> None:
    """Record an event in the log only, never on stderr: the caller reports it to the user
    itself (as the one line a fatal error gets)."""
    LOG.emit(level, actor, name, fields, echo=False)


def failure(
    actor: str, name: str, exc: BaseException, level: str = "error", **fields: object
) -> None:
    """Record that something failed with ``exc``: ``fields``, then its one-line ``error``
    and its traceback (``exc``, in the log only)."""
    fields["error"] = f"{type(exc).__name__}: {exc}"
    fields["exc"] = format_traceback(exc)
    LOG.emit(level, actor, name, fields)


def warning(actor: str, name: str, **fields: object) -> None:
    LOG.emit("warning", actor, name, fields)


def error(actor: str, name: str, **fields: object) -> None:
    LOG.emit("error", actor, name, fields)


@contextlib.contextmanager
def span(
    actor: str, name: str, level: str = "info", **fields: object
) -> Iterator[dict[str, object]]:
    """A timed span: a child of the current one (or a new trace), logged when it ends.

    The yielded dict collects extra fields (``outcome`` defaults to ``ok``, or
    ``error`` when the block raises).
    """
    parent = current.get()
    ctx = parent.child() if parent is not None else TraceContext.new()
    token = current.set(ctx)
    extra: dict[str, object] = {}
    start = time.perf_counter()
    outcome = "ok"
    try:
        yield extra
    except BaseException as exc:
        outcome = "cancelled" if type(exc).__name__ == "Cancelled" else "error"
        extra.setdefault("error", f"{type(exc).__name__}: {exc}")
        raise
    finally:
        current.reset(token)
        if LEVELS[level] >= LOG.level and LOG._file is not None:
            record = {
                "trace_id": ctx.trace_id,
                "span_id": ctx.span_id,
                "parent_id": parent.span_id if parent is not None else None,
                "name": name,
                "duration_ms": round((time.perf_counter() - start) * 1000, 3),
                "outcome": extra.pop("outcome", outcome),
            }
            record.update(fields)
            record.update(extra)
            LOG.emit(level, actor, "span", record)


class _StdlibHandler(logging.Handler):
    """Routes the standard `logging` module into the trace log."""

    def emit(self, record: logging.LogRecord) -> None:
        level = (
            "debug"
            if record.levelno < 20
            else "info"
            if record.levelno < 30
            else "warning"
            if record.levelno < 40
            else "error"
        )
        fields: dict[str, object] = {"message": record.getMessage()}
        if record.exc_info:
            fields["exc"] = logging.Formatter().formatException(record.exc_info)
        LOG.emit(level, record.name, "log", fields)


def install_logging_bridge() -> None:
    root = logging.getLogger("memtrio")
    if not any(isinstance(h, _StdlibHandler) for h in root.handlers):
        root.addHandler(_StdlibHandler())
    root.setLevel(logging.DEBUG)
    root.propagate = False
