"""Progress of a long CLI job on stderr: one implementation for every job.

On a terminal, a bar redrawn in place: count/total, rate and time left (tqdm).
Anywhere else (a pipe, a log file), one plain line every `interval` seconds
(``MEMTRIO_PROGRESS_INTERVAL``, default `PIPE_INTERVAL`), and a last line
when the job ends if any was written (and it is not the last), so a log shows the job moving without
filling up. ``MEMTRIO_PROGRESS=off`` silences both. stdout is never written:
it belongs to the command's result (and to the protocol under ``memtrio mcp``).

tqdm is imported when a job starts, never when the CLI starts (tests/test_lean_startup.py).
A job counts one unit for its whole run (``reembed`` counts texts, whether memories,
entities or relations), so the rate and the time left stay meaningful.

Thread safety: `advance` may be called from a worker thread (a store transaction)
while the trio thread waits; one job's `Progress` is advanced by one thread at a time.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Any, TextIO, TypeVar

T = TypeVar("T")

PIPE_INTERVAL = 5.0  # seconds between two progress lines when stderr is not a terminal
TTY_INTERVAL = 0.1  # seconds between two redraws of the bar on a terminal
FALLBACK_COLUMNS = 80  # the bar's width on a terminal that reports none
PIPE_FORMAT = "{desc}: {n_fmt}/{total_fmt}{unit} ({percentage:.0f}%), {rate_fmt}, {remaining} left"
PIPE_FORMAT_OPEN = "{desc}: {n_fmt}{unit}, {rate_fmt}"  # no total known


def _interval() -> float:
    raw = os.environ.get("MEMTRIO_PROGRESS_INTERVAL", "")
    try:
        return max(0.0, float(raw)) if raw else PIPE_INTERVAL
    except ValueError:
        return PIPE_INTERVAL


def _tqdm() -> Any:
    """tqdm's bar class, imported when a job starts: the CLI's start-up stays lean."""
    from tqdm import tqdm  # type: ignore[import-untyped]  # tqdm ships no type hints

    return tqdm


class Progress:
    """The progress of one job: ``label`` (what it does), ``total`` units (None: unknown).

    Use it as a context manager (`close` ends the line), call `advance` as units are done.
    ``enabled=False`` makes it silent (a job run for its JSON, or inside another job).
    """

    def __init__(
        self,
        label: str,
        total: int | None,
        unit: str,
        *,
        stream: TextIO | None = None,
        enabled: bool = True,
    ) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.stream = stream if stream is not None else sys.stderr
        self.done = 0
        self.enabled = enabled and os.environ.get("MEMTRIO_PROGRESS", "").lower() != "off"
        self.started = time.monotonic()
        self.last = self.started
        self.lines = 0
        self.shown = 0  # the count the last line showed
        self.interval = _interval()
        self._bar: Any = None
        if not self.enabled:
            return
        try:
            tty = self.stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        if tty:
            try:
                columns = os.get_terminal_size(self.stream.fileno()).columns
            except (AttributeError, ValueError, OSError):
                columns = 0
            self._bar = _tqdm()(
                total=total,
                desc=label,
                unit=f" {unit}",
                file=self.stream,
                mininterval=TTY_INTERVAL,
                # A terminal that does not tell its width (0 columns) gets a standard one.
                ncols=None if columns else FALLBACK_COLUMNS,
                dynamic_ncols=bool(columns),
                leave=True,
            )

    def set_total(self, total: int | None) -> None:
        """The total, once it is known (or when it changes)."""
        if total == self.total:
            return
        self.total = total
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def advance(self, n: int = 1) -> None:
        """``n`` more units done."""
        self.done += n
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self._line(now)

    def _line(self, now: float) -> None:
        known = self.total is not None and self.total > 0
        text = _tqdm().format_meter(
            self.done,
            self.total if known else None,
            now - self.started,
            prefix=self.label,
            unit=f" {self.unit}",
            bar_format=PIPE_FORMAT if known else PIPE_FORMAT_OPEN,
        )
        self.stream.write(text + "\n")
        self.stream.flush()
        self.lines += 1
        self.shown = self.done

    def close(self) -> None:
        """End the bar (a terminal), or write the last line if any was written (a pipe)."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.lines and self.shown != self.done:
            self._line(time.monotonic())
        self.enabled = False

    def track(self, items: Iterable[T]) -> Iterator[T]:
        """``items``, advancing by one for each."""
        for item in items:
            yield item
            self.advance()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
