"""The embedder pool: N supervised worker actors sharing one lazily loaded model.

Callers use the published handle, `handle.EMBEDDER` (``app.find(EMBEDDER)``)::

    result = await embedder.embed(["some text", ...])
    result.vectors    # float32 (n, dim), L2-normalised
    result.truncated  # one flag per text: cut to max_tokens

    result = await embedder.embed(texts, max_chunks=16)   # long texts: several windows
    result.rows(i)    # float32 (windows of text i, dim)
    result.truncated  # one flag per text: longer than max_chunks windows

Requests go into one shared mailbox. A free worker takes the first request
and everything else already queued, up to ``[embedding] batch_size`` texts
(micro-batching: concurrent callers share one onnxruntime call), and runs the
model in a thread (onnxruntime releases the GIL, so N workers run in
parallel).

Error handling:
- the model loads on first use, or earlier in the background (`warm`, once a
  client is initialized); if it cannot (missing files, bad backend),
  every request fails with `EmbedderUnavailable` and the workers keep running
  (the load is retried after `RELOAD_AFTER_FAILURE` seconds);
- an exception while embedding a batch (fault point ``embedder.embed``) fails
  that batch's requests with `EmbedderCrashed` and crashes the worker, which
  its supervisor restarts; other requests are untouched;
- a request that takes longer than ``[embedding] timeout`` fails with
  `EmbedderTimeout` (a worker skips requests whose caller gave up).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from typing import Any

import trio

from ...protocol.plural import plural
from ...supervisors import faults, trace
from ...supervisors.config import EmbeddingConfig
from ...supervisors.supervisor import (
    ONE_FOR_ONE,
    PERMANENT,
    ChildContext,
    ChildSpec,
    Mailbox,
    Supervisor,
)
from ...supervisors.threads import finishing
from .. import loader
from .handle import (
    EmbedderCrashed,
    EmbedderTimeout,
    EmbedderUnavailable,
    EmbedResult,
)
from .messages import Embed, EmbedderRequest, Warm
from .model import DEFAULT_DIM, ModelError, ModelSpec, OnnxEncoder

RELOAD_AFTER_FAILURE = 30.0  # seconds before a failed model load is tried again
WORKER_MAX_RESTARTS = 10  # per WORKER_RESTART_PERIOD, then the pool supervisor escalates
WORKER_RESTART_PERIOD = 10.0
WORKER_GRACE = 2.0  # seconds a stopping worker gets to finish its batch

# Loaded models, shared by every pool of this process that uses the same files
# and settings (a server has one pool; tests and tools start several apps).
_ENCODERS: dict[tuple[Any, ...], OnnxEncoder] = {}
_ENCODERS_LOCK = threading.Lock()


class EmbedderPool:
    """The embedder's client handle and its workers' shared state."""

    def __init__(
        self, config: EmbeddingConfig, spec: ModelSpec | None, spec_error: str | None = None
    ) -> None:
        self.config = config
        self.spec = spec
        self.spec_error = spec_error
        self.mailbox = Mailbox[EmbedderRequest]("embedder", size=math.inf)
        self._encoder: OnnxEncoder | None = None
        self._load_lock = threading.Lock()
        self._load_error: tuple[float, str] | None = None
        self.batches = 0
        self.texts = 0

    # -- what the model is (known without loading it) -----------------------

    @property
    def model(self) -> str:
        return self.spec.model_id if self.spec else (self.config.model or "default")

    @property
    def revision(self) -> str:
        return self.spec.revision if self.spec else ""

    @property
    def dim(self) -> int:
        if self._encoder is not None and self._encoder.spec.dim:
            return self._encoder.spec.dim
        return (self.spec.dim if self.spec and self.spec.dim else None) or DEFAULT_DIM

    @property
    def max_tokens(self) -> int:
        return self.spec.max_tokens if self.spec else self.config.max_tokens

    @property
    def chunk_tokens(self) -> int:
        """Window of a stored text (special tokens included)."""
        return max(4, min(self.config.chunk_tokens, self.max_tokens))

    @property
    def loaded(self) -> bool:
        return self._encoder is not None

    def describe(self) -> dict[str, Any]:
        error = self.spec_error or (self._load_error[1] if self._load_error else None)
        return {
            "model": self.model,
            "revision": self.revision or None,
            "dimensions": self.dim,
            "max_tokens": self.max_tokens,
            "chunk_tokens": self.chunk_tokens,
            "max_chunks": self.config.max_chunks,
            "batch_size": self.config.batch_size,
            "backend": self.config.backend,
            "loaded": self.loaded,
            "providers": list(self._encoder.providers) if self._encoder else None,
            "error": error,
        }

    # -- the model, loaded once, on first use --------------------------------

    def encoder(self) -> OnnxEncoder:
        """The loaded model (loading it now if needed). Runs in a worker thread.

        Error handling: raises `ModelError` with the reason; a failure is
        remembered for `RELOAD_AFTER_FAILURE` seconds so a broken model does not
        cost a load attempt per request.
        """
        if self._encoder is not None:
            return self._encoder
        if self.spec is None:
            raise ModelError(self.spec_error or "no embedding model configured")
        with self._load_lock:
            if self._encoder is not None:
                return self._encoder
            if self._load_error and time.monotonic() - self._load_error[0] < RELOAD_AFTER_FAILURE:
                raise ModelError(self._load_error[1])
            started = time.perf_counter()
            key = (self.spec, self.config.backend, self.config.intra_op_threads)
            try:
                _ = self.spec.revision  # hashed here, in this worker thread, before the ranker asks
                with _ENCODERS_LOCK:
                    encoder = _ENCODERS.get(key)
                    if encoder is None:
                        loader.import_module("onnxruntime")  # never beside another numpy import
                        encoder = OnnxEncoder(
                            self.spec, self.config.backend, self.config.intra_op_threads
                        )
                        _ENCODERS[key] = encoder
            except ModelError as exc:
                self._load_error = (time.monotonic(), str(exc))
                trace.error(
                    "embedder",
                    "model_load_failed",
                    model=self.model,
                    error=str(exc),
                    exc=trace.format_traceback(exc),
                )
                raise
            self._encoder = encoder
            self._load_error = None
            trace.event(
                "embedder",
                "model_ready",
                model=self.model,
                revision=self.revision,
                providers=encoder.providers,
                load_ms=round((time.perf_counter() - started) * 1000, 1),
            )
            return encoder

    async def load(self) -> None:
        """Load the model now (for callers that must refuse early, like ``reembed``).

        Error handling: raises `EmbedderUnavailable` with the reason.
        """
        try:
            await trio.to_thread.run_sync(self.encoder)
        except ModelError as exc:
            raise EmbedderUnavailable(f"the embedding model cannot load: {exc}") from None

    def warm(self) -> None:
        """Have a worker load the model in the background (returns at once)."""
        if self.spec is not None and self._encoder is None:
            self.mailbox.send_nowait(Warm())

    # -- the client call ---------------------------------------------------

    async def embed(
        self, texts: list[str], max_chunks: int = 1, *, query: bool = False
    ) -> EmbedResult:
        """Embed ``texts`` (micro-batched with other callers' texts).

        ``max_chunks``: 1 (queries): one vector per text, a text longer than
        the model's ``max_tokens`` is truncated; more (stored documents): a
        text longer than ``[embedding] chunk_tokens`` is embedded as up to that
        many overlapping windows of ``chunk_tokens`` (``chunk_overlap`` tokens
        shared by neighbours), see `OnnxEncoder.windows`. ``query``: the texts
        are queries, each embedded after the model's ``query_prefix`` (if any).

        Error handling: `EmbedderUnavailable` (model cannot load),
        `EmbedderCrashed` (the worker died on this batch; retry),
        `EmbedderTimeout` (no answer within ``[embedding] timeout``).
        Cancellation: the request is abandoned; a worker skips it.
        """
        if not texts:
            import numpy as np  # not at the top: the pool is built before the first reply

            return EmbedResult(
                np.zeros((0, self.dim), dtype=np.float32),
                [],
                self.model,
                self.revision,
                [] if max_chunks > 1 else None,
                max_chunks,
            )
        if self.spec is None:
            raise EmbedderUnavailable(f"the embedding model cannot load: {self.spec_error}")
        if query and self.spec.query_prefix:
            texts = [self.spec.query_prefix + text for text in texts]
        request = Embed(
            texts=list(texts), max_chunks=max(1, int(max_chunks)), trace=trace.current.get()
        )
        reply = request.reply
        self.mailbox.send_nowait(request)
        timeout = self.config.timeout
        try:
            with trio.move_on_after(timeout):
                return await reply.wait()
        finally:
            if not reply.done:  # timed out or cancelled: a worker will skip it
                reply.fail(EmbedderTimeout("the caller gave up on this request"))
        raise EmbedderTimeout(
            f"embedding {plural(len(texts), 'text')} took longer than {timeout:g} s ([embedding] timeout); "
            "the embedder is overloaded or stuck: retry later, or raise [embedding] timeout"
        )

    # -- the workers -------------------------------------------------------

    def worker_specs(self) -> list[ChildSpec]:
        return [
            ChildSpec(
                f"embedder-worker-{i}",
                self._worker,
                restart=PERMANENT,
                shutdown=WORKER_GRACE,
                why="a crashed worker fails only its batch and is restarted for the next request",
            )
            for i in range(self.config.workers)
        ]

    def supervisor(self) -> Supervisor:
        return Supervisor(
            "embedder",
            self.worker_specs(),
            strategy=ONE_FOR_ONE,
            max_restarts=WORKER_MAX_RESTARTS,
            period=WORKER_RESTART_PERIOD,
        )

    async def _worker(
        self, ctx: ChildContext, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        receive = self.mailbox.receive_channel
        task_status.started()
        while not ctx.shutdown.is_set():
            # A graceful stop only ever interrupts waiting, never a batch.
            with ctx.cancel_on_shutdown(trio.CancelScope()) as idle:
                first = await receive.receive()
            if idle.cancelled_caught:
                break  # stopping: what is queued waits for the next incarnation
            if isinstance(first, Warm):
                await self._warm(first)
                continue
            batch = [first]
            count = len(first.texts)
            while count < self.config.batch_size:
                try:
                    more: EmbedderRequest = receive.receive_nowait()
                except trio.WouldBlock:
                    break
                if isinstance(more, Warm):  # this batch loads the model anyway
                    more.reply.set(None)
                    continue
                batch.append(more)
                count += len(more.texts)
            await self._serve(batch, ctx)

    async def _warm(self, request: Warm) -> None:
        """Load the model in a thread (a failure is logged by `encoder` and remembered)."""
        with contextlib.suppress(ModelError):
            await trio.to_thread.run_sync(finishing(self.encoder), abandon_on_cancel=True)
        request.reply.set(None)

    async def _serve(self, batch: list[Embed], ctx: ChildContext) -> None:
        live = [cmd for cmd in batch if not cmd.reply.done]
        if not live:
            return
        texts = [t for cmd in live for t in cmd.texts]
        trace.current.set(live[0].trace)  # the batch's span belongs to its first request
        try:
            with trace.span(
                "embedder", "embed", worker=ctx.id, texts=len(texts), requests=len(live)
            ):
                # Past the timeout every caller of this batch has given up: a stuck
                # encode is abandoned and the worker restarts, so the pool recovers.
                with trio.fail_after(self.config.timeout):
                    results = await trio.to_thread.run_sync(
                        self._encode, live, abandon_on_cancel=True
                    )
        except ModelError as exc:
            error = EmbedderUnavailable(f"the embedding model cannot load: {exc}")
            for cmd in live:
                cmd.reply.fail(error)
            return
        except BaseException as exc:
            reason = (
                "was stopped"
                if isinstance(exc, trio.Cancelled)
                else f"crashed ({type(exc).__name__}: {exc})"
            )
            crashed = EmbedderCrashed(
                f"the embedding worker {ctx.id} {reason} while embedding this batch of {plural(len(texts), 'text')}; "
                "it is being restarted, retry the call"
            )
            for cmd in live:
                cmd.reply.fail(crashed)
            raise
        self.batches += 1
        self.texts += len(texts)
        cut = sum(sum(r.truncated) for r in results)
        if cut:
            trace.warning(
                "embedder",
                "truncated",
                texts=cut,
                max_tokens=self.max_tokens,
                note="text beyond the last embedded window does not affect its vectors",
            )
        for cmd, result in zip(live, results, strict=True):
            cmd.reply.set(result)

    def _encode(self, jobs: list[Embed]) -> list[EmbedResult]:
        """In a thread: every job's windows in one sorted, batched run of the model."""
        encoder = self.encoder()
        if faults.ACTIVE:
            faults.hit_sync("embedder.embed")
        rows: list[list[int]] = []
        per_job: list[tuple[int, list[int], list[bool]]] = []
        for job in jobs:
            if job.max_chunks > 1:  # a stored document: windows of chunk_tokens
                ids, counts, truncated = encoder.windows(
                    job.texts, job.max_chunks, self.config.chunk_overlap, self.config.chunk_tokens
                )
            else:  # a query (or one vector per text): cut at max_tokens
                ids, counts, truncated = encoder.windows(job.texts)
            per_job.append((len(rows), counts, truncated))
            rows.extend(ids)
        vectors = encoder.run_rows(rows, self.config.batch_size)
        out: list[EmbedResult] = []
        for job, (start, counts, truncated) in zip(jobs, per_job, strict=True):
            out.append(
                EmbedResult(
                    vectors[start : start + sum(counts)],
                    truncated,
                    self.model,
                    self.revision,
                    counts if job.max_chunks > 1 else None,
                    job.max_chunks,
                )
            )
        return out
