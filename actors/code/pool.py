"""The parser pool: supervised worker actors, each owning one worker process.

Parsing runs in separate processes (``python -m memtrio.actors.code.worker``)
so the parse of many files uses every core and a parser that crashes or hangs
takes down one worker process, never the server. Each worker actor owns one
process and serves batches of `ParseJob`s from a mailbox shared by all
workers; it talks to its process over that process's private stdin/stdout
pipes (its stderr is the server's stderr): one frame per batch, one answer
frame per file (see `wire`). The processes start on the first `ParserPool.parse`, not
at boot: a session that never calls a code tool never pays for them.

Supervision (see `ParserPool.children`)::

    code.parsers (one_for_one)      nested in the root as a TEMPORARY child
    ├── parser-0                    PERMANENT
    ├── ...
    └── parser-{M-1}

A worker whose process dies or does not answer within ``[code] file_timeout``
kills it, answers that file with the reason (the file is reported as not
indexed), puts the rest of its batch back in the mailbox, and then exits with
`WorkerLost`, so the supervisor replaces it with a fresh process; the other
files keep flowing through the other workers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import signal
import subprocess
import sys
from collections import deque
from dataclasses import dataclass

import trio

from ...protocol.messages import ActorCrashed
from ...supervisors import trace
from ...supervisors.supervisor import (
    ONE_FOR_ONE,
    PERMANENT,
    TEMPORARY,
    ChildContext,
    ChildSpec,
    Mailbox,
    Supervisor,
    first_leaf,
    supervisor_child,
)
from .messages import Parse, ParserRequest
from .wire import MAX_FRAME, READY, ParseJob, ParseResult, frame, job_encoder, result_decoder

WORKER_MODULE = "memtrio.actors.code.worker"
# Seconds a worker process gets to exit after its stdin closes before it is killed.
EXIT_GRACE = 1.0
# Restart intensity of the parser supervisor, per worker: see `ParserPool.children`.
RESTARTS_PER_WORKER = 20
RESTART_PERIOD = 30.0
# Batches written ahead into a worker's pipe: while it parses one batch the next
# is already there, so a busy server process never leaves a worker idle.
PIPELINE = 2
# Seconds a new worker process gets to import its grammars and say it is ready.
STARTUP_TIMEOUT = 30.0


class WorkerLost(Exception):
    """A parser worker process crashed or hung; the actor exits to be replaced."""


def default_workers(setting: int | str) -> int:
    if setting == "auto":
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not on Linux
            return max(1, os.cpu_count() or 1)
    return max(1, int(setting))


class _FrameReader:
    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buf = bytearray()

    async def _fill(self) -> None:
        data = await self._stream.receive_some(1 << 16)
        if not data:
            raise EOFError("worker closed its output")
        self._buf += data

    async def receive(self) -> bytes:
        while len(self._buf) < 4:
            await self._fill()
        size = int.from_bytes(self._buf[:4], "big")
        if size > MAX_FRAME:
            raise EOFError(f"worker sent a {size}-byte frame")
        while len(self._buf) < 4 + size:
            await self._fill()
        body = bytes(self._buf[4 : 4 + size])
        del self._buf[: 4 + size]
        return body


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


async def _stop_process(proc: trio.Process, kill: bool = False) -> int | None:
    code: int | None = None
    with trio.CancelScope(shield=True):
        if proc.stdin is not None:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await proc.stdin.aclose()
        if not kill:
            with trio.move_on_after(EXIT_GRACE):
                return await proc.wait()
        with contextlib.suppress(OSError):
            proc.kill()
        code = await proc.wait()
    return code


class ParserPool:
    """Client of the parser workers: `parse` one file (or blob) or `parse_batch`
    several, from many tasks at once; `children` are the actors to supervise."""

    def __init__(self, workers: int, file_timeout: float) -> None:
        self.workers = workers
        self.file_timeout = file_timeout
        self.mailbox = Mailbox[ParserRequest]("code.parse", size=math.inf)
        self.down: str | None = None  # why the pool gave up, once it has
        self._started = False  # the nested supervisor of this incarnation has started
        self._running = False  # a worker process of this incarnation has said it is ready
        # Set by the first `parse`: worker processes start then, not at boot, so a
        # server whose client never navigates code never pays for them.
        self._wanted = trio.Event()

    async def parse(self, job: ParseJob) -> ParseResult:
        """The outline of one file; never raises for a bad file or a lost worker."""
        return (await self.parse_batch([job]))[0]

    async def parse_batch(self, jobs: list[ParseJob]) -> list[ParseResult]:
        """The outlines of several files, in order, parsed one after the other by one
        worker process (one frame and one wake-up for them all); never raises for a
        bad file or a lost worker."""
        if self.down is not None:
            return [ParseResult(skipped=f"parser workers are down ({self.down})")] * len(jobs)
        self._wanted.set()
        # A batch may wait behind one slow file per worker, then a worker restart.
        timeout = (len(jobs) + 1) * self.file_timeout + 30.0
        request = Parse(jobs=jobs, trace=trace.current.get())
        try:
            return await self.mailbox.call(request, timeout=timeout)
        except ActorCrashed as exc:
            if self.down is not None:  # the workers could not start: say so as above
                why = f"parser workers are down ({self.down})"
            else:
                why = f"parser worker stopped ({exc})"
        except TimeoutError:
            why = f"no parser worker answered within {timeout:g} s"
        done = request.results[: len(jobs)]
        return done + [ParseResult(skipped=why)] * (len(jobs) - len(done))

    def children(self) -> list[ChildSpec]:
        """The nested parser supervisor, run as one child of the root.

        Why these restart types and this intensity:
        - each worker is PERMANENT: a lost worker (crash, hang) is always replaced,
          the pool must keep M processes to stay useful;
        - one_for_one: workers share nothing but the mailbox, so one failure
          never needs the others restarted;
        - intensity RESTARTS_PER_WORKER * M restarts in RESTART_PERIOD s: a checkout
          with a few files that crash the parser costs one restart each (~50 ms),
          far below that, while a worker that cannot start at all (broken
          interpreter, unreadable package) fails in milliseconds and trips it within
          a second instead of looping forever;
        - the pool supervisor itself is TEMPORARY in the root: the code tools are
          optional, so when it gives up it stays down (the tools then say so)
          instead of escalating into a rest_for_one restart of the transports.
        """
        nested = supervisor_child(
            self._supervisor,
            "code.parsers",
            restart=TEMPORARY,
            shutdown=5.0,
            why="optional feature: when its workers keep failing it stays down instead of restarting the transports",
            on_ready=self._mark_started,
        )

        async def start(
            ctx: ChildContext,
            *,
            task_status: trio.TaskStatus[Supervisor | None] = trio.TASK_STATUS_IGNORED,
        ) -> None:
            """Run the nested supervisor; when its workers cannot even start, stay up
            without them (the server runs on, the code tools say why they cannot parse)."""
            self.down = None
            self._running = self._started = False
            try:
                await nested.start(ctx, task_status=task_status)
            except Exception as exc:
                self._mark_down(first_leaf(exc))
                if self._running:
                    raise
                trace.error("code", "parsers_unavailable", reason=self.down)
                if not self._started:
                    task_status.started(None)
                await ctx.shutdown.wait()

        return [dataclasses.replace(nested, start=start)]

    def _supervisor(self) -> Supervisor:
        specs = [
            ChildSpec(
                f"parser-{i}",
                self._run_worker,
                restart=PERMANENT,
                shutdown=2.0,
                why="a lost parser process is always replaced",
            )
            for i in range(self.workers)
        ]
        return Supervisor(
            "code.parsers",
            specs,
            strategy=ONE_FOR_ONE,
            max_restarts=RESTARTS_PER_WORKER * self.workers,
            period=RESTART_PERIOD,
        )

    def _mark_started(self) -> None:
        self._started = True

    def _mark_down(self, cause: BaseException) -> None:
        """Record why the workers are gone and fail the requests waiting for them."""
        self.down = f"{type(cause).__name__}: {cause}"
        self.mailbox.fail_pending(ActorCrashed(f"parser workers are down: {self.down}"))

    async def _run_worker(
        self, ctx: ChildContext, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """One parser worker: its process starts on the pool's first `parse` (the actor
        reports itself started before that, so the tree starts without processes)."""
        if not self._wanted.is_set():
            task_status.started()
            task_status = trio.TASK_STATUS_IGNORED
            with ctx.cancel_on_shutdown(trio.CancelScope()):
                await self._wanted.wait()
            if ctx.shutdown.is_set():
                return
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", WORKER_MODULE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None
            reader = _FrameReader(proc.stdout)
            await _wait_ready(ctx, proc, reader)
            self._running = True
            trace.event(
                "code", "parser_started", worker=ctx.id, worker_pid=proc.pid, restarts=ctx.restarts
            )
            task_status.started()
            with ctx.cancel_on_shutdown(trio.CancelScope()):
                await self._serve(ctx, proc, reader)
        finally:
            await _stop_process(proc)

    async def _serve(self, ctx: ChildContext, proc: trio.Process, reader: _FrameReader) -> None:
        """Feed batches to the process and answer them in order, keeping up to
        `PIPELINE` batches in its pipe so it never waits for this process between
        two files.

        Error handling: when the process dies or exceeds ``file_timeout`` on a file,
        the file it was working on (the first unanswered one) is answered with the
        reason, the rest of its batch and the batches queued behind it go back to
        the mailbox for another worker, and `WorkerLost` ends this incarnation (the
        supervisor starts a new one). Batches still unanswered when the actor stops
        (shutdown, a bug) are put back the same way, so no caller is left waiting.
        """
        assert proc.stdin is not None
        pending: deque[_InPipe] = deque()
        try:
            while True:
                await self._fill_pipe(proc.stdin, pending)
                await self._answer_oldest(ctx, proc, reader, pending)
        except (EOFError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            code = await _stop_process(proc, kill=True)
            if not pending:
                raise WorkerLost(f"{ctx.id} exited while idle: {_describe_exit(code)}") from exc
            why = f"parser worker crashed ({_describe_exit(code)}) and was replaced"
            path = _give_up(
                ctx, pending[0].request, why, "parser_crashed", exit=_describe_exit(code)
            )
            raise WorkerLost(f"{ctx.id} crashed on {path}: {_describe_exit(code)}") from exc
        finally:
            for item in pending:
                if not item.request.reply.done:
                    self.mailbox.send_nowait(item.request)

    async def _fill_pipe(self, stdin: trio.abc.SendStream, pending: deque[_InPipe]) -> None:
        """Write batches from the mailbox into the pipe until `PIPELINE` are in it;
        wait for one only when the process has nothing to do. A batch another
        worker was lost on is written from its first unanswered file."""
        receive = self.mailbox.receive_channel
        while len(pending) < PIPELINE:
            request: ParserRequest
            if pending:
                try:
                    request = receive.receive_nowait()
                except trio.WouldBlock:
                    return
            else:
                request = await receive.receive()
            if request.reply.done:
                continue  # the caller gave up on it
            match request:
                case Parse(jobs=jobs, results=results):
                    pending.append(_InPipe(request, trio.current_time()))
                    await stdin.send_all(frame(job_encoder.encode(jobs[len(results) :])))

    async def _answer_oldest(
        self, ctx: ChildContext, proc: trio.Process, reader: _FrameReader, pending: deque[_InPipe]
    ) -> None:
        """Answer the oldest batch with the process's results, or kill a process that
        spent more than ``file_timeout`` on one of its files (`WorkerLost`)."""
        oldest = pending[0]
        request = oldest.request
        results = request.results
        with trio.move_on_at(oldest.started + self.file_timeout) as waited:
            while len(results) < len(request.jobs):
                results.append(result_decoder.decode(await reader.receive()))
                oldest.started = trio.current_time()  # the process starts on the next file now
                waited.deadline = oldest.started + self.file_timeout
        if waited.cancelled_caught:
            await _stop_process(proc, kill=True)
            why = f"parser worker timed out after {self.file_timeout:g} s and was replaced"
            path = _give_up(ctx, request, why, "parser_hung", timeout=self.file_timeout)
            raise WorkerLost(f"{ctx.id} hung on {path}")
        pending.popleft()
        request.reply.set(results)
        if pending:
            pending[0].started = oldest.started


@dataclass
class _InPipe:
    """A batch written to a worker process, and when the process started on its
    first unanswered file (when it was written to an idle process, or when the
    file before was answered)."""

    request: Parse
    started: float


async def _wait_ready(ctx: ChildContext, proc: trio.Process, reader: _FrameReader) -> None:
    """Wait for a new process's ready frame: a worker that cannot even start fails
    here (`WorkerLost`), before any file is given to it."""
    try:
        with trio.fail_after(STARTUP_TIMEOUT):
            hello = await reader.receive()
    except (EOFError, trio.TooSlowError):
        code = await _stop_process(proc, kill=True)
        raise WorkerLost(f"{ctx.id} did not start ({_describe_exit(code)})") from None
    if hello != READY:
        raise WorkerLost(f"{ctx.id} sent {hello[:40]!r} instead of its ready frame")


def _give_up(ctx: ChildContext, request: Parse, why: str, event: str, **details: object) -> str:
    """Answer the file a lost process was working on (the first unanswered one of
    ``request``) with the reason, log it, and return its path. The batch is
    answered when that was its last file; otherwise `_serve` puts it back in the
    mailbox, still unanswered, for another worker to resume."""
    path = request.jobs[len(request.results)].path
    request.results.append(ParseResult(skipped=why))
    if len(request.results) == len(request.jobs):
        request.reply.set(request.results)
    trace.warning("code", event, worker=ctx.id, path=path, **details)
    return path
