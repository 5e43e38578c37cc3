"""A supervisor with Erlang/OTP semantics, on trio.

Vocabulary:

- `ChildSpec(id, start, restart=PERMANENT|TRANSIENT|TEMPORARY, shutdown=grace)`.
  ``start`` is ``async def start(ctx: ChildContext, *, task_status)``: it calls
  ``task_status.started()`` when ready and then serves until it returns, raises
  or is stopped. A child that should stop gracefully watches ``ctx.shutdown``.
- Strategies: `ONE_FOR_ONE` restarts the failed child; `ONE_FOR_ALL` stops the
  others (in reverse order) and restarts all in order; `REST_FOR_ONE` stops and
  restarts the children started after the failed one.
- Restart types: ``PERMANENT`` is always restarted; ``TRANSIENT`` only after an
  abnormal exit (an exception); ``TEMPORARY`` never.
- Intensity: at most ``max_restarts`` restarts within ``period`` seconds. One
  more and the supervisor stops all its children (in reverse order) and raises
  `Escalation`, which its own parent treats as this supervisor crashing.

Children start in order and stop in reverse, each with ``shutdown`` seconds of
grace (``ctx.shutdown`` is set) before it is cancelled.

Requests: an actor serving a `Request` wraps the work in ``ctx.serving(reply)``;
if the incarnation dies (crash or cancel) the reply fails with `ActorCrashed`,
so a caller never hangs. Mailboxes are created outside the children (by the
application) and handed to every incarnation, so a restart does not close its
peers' channel ends; when a child stops for good, the requests still queued in
its mailboxes are failed.
"""

from __future__ import annotations

import contextlib
import enum
import math
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import trio

from ..protocol.messages import ActorCrashed, Reply, Request
from . import trace
from .errors import find_user_error, one_line


class Restart(enum.Enum):
    PERMANENT = "permanent"
    TRANSIENT = "transient"
    TEMPORARY = "temporary"


PERMANENT = Restart.PERMANENT
TRANSIENT = Restart.TRANSIENT
TEMPORARY = Restart.TEMPORARY


class Strategy(enum.Enum):
    ONE_FOR_ONE = "one_for_one"
    ONE_FOR_ALL = "one_for_all"
    REST_FOR_ONE = "rest_for_one"


ONE_FOR_ONE = Strategy.ONE_FOR_ONE
ONE_FOR_ALL = Strategy.ONE_FOR_ALL
REST_FOR_ONE = Strategy.REST_FOR_ONE

DEFAULT_GRACE = 5.0


class Escalation(Exception):
    """A supervisor exceeded its restart intensity (or a child could not start) and gave up.

    Its message is the one line the process prints when the root gives up: the
    failure's own message when it is a `UserError` (it says what to do), else
    which child failed, why, and where the details are.
    """

    def __init__(
        self,
        supervisor: str,
        child: str,
        cause: BaseException | None,
        starting: bool = False,
    ) -> None:
        self.supervisor, self.child, self.cause = supervisor, child, cause
        known = find_user_error(cause) if cause is not None else None
        if known is not None:
            super().__init__(str(known))
            return
        root = cause
        while isinstance(root, Escalation) and root.cause is not None:
            root = root.cause
        why = one_line(f"{type(root).__name__}: {root}") if root is not None else "exited"
        what = "could not start" if starting else "failed too often"
        log = f"the trace log {trace.LOG.path}" if trace.LOG.enabled("error") else "the trace log"
        super().__init__(
            f"supervisor {supervisor!r} gave up: child {child!r} {what} (last: {why}); "
            f"restart memtrio, and if it happens again see {log}"
        )


M = TypeVar("M")
T = TypeVar("T")


class Mailbox(Generic[M]):
    """A channel pair owned outside any one actor incarnation, carrying ``M`` messages.

    Senders call `call` (request/reply) or `send`; the owning actor iterates
    ``receive`` without ever closing it.
    """

    def __init__(self, name: str, size: int | float = 1024) -> None:
        self.name = name
        self.send_channel, self.receive_channel = trio.open_memory_channel[M](size)

    async def send(self, message: M) -> None:
        await self.send_channel.send(message)

    def send_nowait(self, message: M) -> None:
        self.send_channel.send_nowait(message)

    async def call(self, request: Request[T], timeout: float = math.inf) -> T:
        """Send ``request`` and wait for its reply (raises what the actor raised).

        Error handling: past ``timeout`` the reply fails (the actor skips the
        request) and `TimeoutError` is raised.
        """
        reply = request.reply
        await self.send_channel.send(request)  # type: ignore[arg-type]  # M holds requests
        if timeout == math.inf:
            return await reply.wait()
        with trio.move_on_after(timeout):
            return await reply.wait()
        reply.fail(TimeoutError(f"{self.name}: no reply within {timeout:g} s"))
        raise TimeoutError(f"{self.name} did not answer within {timeout:g} s")

    def fail_pending(self, error: BaseException) -> int:
        """Fail every queued request (the reader is gone for good)."""
        count = 0
        while True:
            try:
                message = self.receive_channel.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                return count
            if isinstance(message, Request):
                message.reply.fail(error)
                count += 1

    def pending(self) -> int:
        return self.receive_channel.statistics().current_buffer_used


@dataclass(frozen=True)
class ChildSpec:
    id: str
    start: Callable[..., Awaitable[Any]]
    restart: Restart = PERMANENT
    shutdown: float = DEFAULT_GRACE
    mailboxes: Sequence[Mailbox[Any]] = ()
    why: str = ""  # why this restart type (shown in server_status and docs)


class ChildContext:
    """What one incarnation of a child is handed."""

    def __init__(self, spec: ChildSpec, restarts: int, supervisor: Supervisor) -> None:
        self.id = spec.id
        self.spec = spec
        self.restarts = restarts
        self.supervisor = supervisor
        self.shutdown = trio.Event()
        self._in_flight: set[Reply] = set()
        # Weak: a scope that has ended (and is dropped) leaves the set by itself.
        self._soft_scopes: weakref.WeakSet[trio.CancelScope] = weakref.WeakSet()

    def cancel_on_shutdown(self, scope: trio.CancelScope) -> trio.CancelScope:
        """Cancel ``scope`` when a graceful stop is requested (the child then tidies up)."""
        if self.shutdown.is_set():
            scope.cancel()
        self._soft_scopes.add(scope)
        return scope

    def request_shutdown(self) -> None:
        self.shutdown.set()
        for scope in list(self._soft_scopes):
            scope.cancel()

    @contextlib.contextmanager
    def serving(self, reply: Reply) -> Iterator[None]:
        """Track a request while this incarnation works on it.

        If the block raises, the reply fails with `ActorCrashed` before the
        exception propagates to the supervisor.
        """
        self._in_flight.add(reply)
        try:
            yield
        except BaseException as exc:
            reply.fail(
                ActorCrashed(
                    f"{self.id} crashed while serving the request: {type(exc).__name__}: {exc}"
                )
            )
            raise
        finally:
            self._in_flight.discard(reply)

    def fail_in_flight(self, why: str) -> None:
        for reply in list(self._in_flight):
            reply.fail(ActorCrashed(f"{self.id} {why}"))
        self._in_flight.clear()


class _Status:
    """The ``task_status`` given to a child; records that it is ready."""

    def __init__(self, state: _ChildState) -> None:
        self._state = state

    def started(self, value: object = None) -> None:
        self._state.value = value
        self._state.state = "running"
        self._state.ready.set()


class _ChildState:
    def __init__(self, spec: ChildSpec) -> None:
        self.spec = spec
        self.restarts = 0
        self.state = "starting"
        self.value: object = None
        self.scope: trio.CancelScope | None = None
        self.ctx: ChildContext | None = None
        self.ready = trio.Event()
        self.done = trio.Event()
        self.stopping = False
        self.error: BaseException | None = None
        self.last_error: str | None = None


class Supervisor:
    """Runs children under a strategy and a restart intensity.

    Start it with ``await nursery.start(sup.run)``; it is ready when every child
    is. `stop` stops the children in reverse order and makes `run` return.
    """

    def __init__(
        self,
        name: str,
        children: Sequence[ChildSpec],
        strategy: Strategy = ONE_FOR_ONE,
        max_restarts: int = 3,
        period: float = 5.0,
    ) -> None:
        ids = [c.id for c in children]
        if len(set(ids)) != len(ids):
            raise ValueError(f"supervisor {name!r}: duplicate child ids in {ids}")
        self.name = name
        self.strategy = strategy
        self.max_restarts = max_restarts
        self.period = period
        self._states = [_ChildState(spec) for spec in children]
        self._restart_times: deque[float] = deque()
        self._events_send, self._events_recv = trio.open_memory_channel[_ChildState | None](
            math.inf
        )
        self._nursery: trio.Nursery | None = None
        self._stopped = trio.Event()
        self.state = "starting"

    # -- introspection -----------------------------------------------------

    def child(self, child_id: str) -> object:
        """The value the running incarnation passed to ``task_status.started``."""
        for st in self._states:
            if st.spec.id == child_id:
                return st.value
        raise KeyError(child_id)

    def snapshot(self) -> list[dict[str, object]]:
        """Each child with its state and restart count (nested supervisors too)."""
        rows = []
        for st in self._states:
            row: dict[str, object] = {
                "id": st.spec.id,
                "state": st.state,
                "restarts": st.restarts,
                "restart": st.spec.restart.value,
            }
            if st.last_error:
                row["last_error"] = st.last_error
            if isinstance(st.value, Supervisor):
                row["strategy"] = st.value.strategy.value
                row["children"] = st.value.snapshot()
            rows.append(row)
        return rows

    # -- running -----------------------------------------------------------

    async def run(
        self, *, task_status: trio.TaskStatus[Supervisor] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Start the children in order, then supervise until stopped or escalated."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for index in range(len(self._states)):
                    if not await self._start(index):
                        st = self._states[index]
                        await self._stop_range(0, index)
                        raise Escalation(self.name, st.spec.id, st.error, starting=True)
                self.state = "running"
                task_status.started(self)
                trace.event(
                    self.name, "supervisor_started", children=[s.spec.id for s in self._states]
                )
                await self._supervise()
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # Surface our own escalation as itself, not wrapped by our nursery.
            escalations, rest = group.split(Escalation)
            if escalations is not None and rest is None:
                raise first_leaf(escalations) from None
            raise
        finally:
            self.state = "stopped"
            for st in self._states:
                if st.ctx is not None:
                    st.ctx.fail_in_flight("stopped")
                for mb in st.spec.mailboxes:
                    mb.fail_pending(ActorCrashed(f"{st.spec.id} is not running"))

    async def stop(self) -> None:
        """Stop the children in reverse order with their grace periods; `run` returns."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.state = "stopping"
        await self._stop_range(0, len(self._states))
        self._events_send.send_nowait(None)  # wake the loop

    async def _supervise(self) -> None:
        while True:
            st = await self._events_recv.receive()
            if st is None or self._stopped.is_set():
                # Return on stop()'s own wake-up only: an exit event that arrives
                # while stop() is still stopping the others must not cut it short.
                if st is None and self._stopped.is_set():
                    return
                continue
            if st.stopping:
                continue
            await self._on_exit(st)

    async def _on_exit(self, st: _ChildState) -> None:  # noqa: C901
        spec = st.spec
        abnormal = st.error is not None
        if spec.restart is TEMPORARY or (spec.restart is TRANSIENT and not abnormal):
            st.state = "stopped" if not abnormal else "failed"
            trace.event(
                self.name,
                "child_exited",
                child=spec.id,
                abnormal=abnormal,
                restart_type=spec.restart.value,
            )
            for mb in spec.mailboxes:
                mb.fail_pending(ActorCrashed(f"{spec.id} has stopped"))
            return
        now = trio.current_time()
        self._restart_times.append(now)
        while self._restart_times and self._restart_times[0] < now - self.period:
            self._restart_times.popleft()
        if len(self._restart_times) > self.max_restarts:
            # In the log only: the parent reports it (a restart, or the one line at exit).
            trace.record(
                self.name,
                "escalation",
                level="error",
                child=spec.id,
                max_restarts=self.max_restarts,
                period=self.period,
                cause=st.last_error,
            )
            await self._stop_range(0, len(self._states))
            raise Escalation(self.name, spec.id, st.error)
        index = self._states.index(st)
        if self.strategy is ONE_FOR_ONE:
            targets = [index]
        elif self.strategy is ONE_FOR_ALL:
            targets = list(range(len(self._states)))
        else:
            targets = list(range(index, len(self._states)))
        # Stop the others that the strategy takes down with it, in reverse order.
        for other in reversed(targets):
            if other != index:
                await self._stop_child(self._states[other])
        for i in targets:
            peer = self._states[i]
            if peer.spec.restart is TEMPORARY and i != index:
                peer.state = "stopped"
                continue
            if i == index or peer.spec.restart is not TEMPORARY:
                peer.restarts += 1
                trace.event(
                    self.name,
                    "restart",
                    level="warning" if i == index and abnormal else "info",
                    child=peer.spec.id,
                    restarts=peer.restarts,
                    cause=st.last_error if i == index else f"{self.strategy.value} after {spec.id}",
                )
                if not await self._start(i):
                    # Died before it was ready: its exit event is already queued and
                    # is handled next (handling it here as well started a second
                    # incarnation beside the first).
                    return

    async def _start(self, index: int) -> bool:
        """Start child ``index``; False if it died before it was ready."""
        assert self._nursery is not None
        st = self._states[index]
        st.ready = trio.Event()
        st.done = trio.Event()
        st.stopping = False
        st.error = None
        st.value = None
        st.state = "starting"
        ctx = ChildContext(st.spec, st.restarts, self)
        st.ctx = ctx
        self._nursery.start_soon(self._run_child, st, ctx, name=f"{self.name}/{st.spec.id}")
        await st.ready.wait()
        return not st.done.is_set()

    async def _run_child(self, st: _ChildState, ctx: ChildContext) -> None:
        status = _Status(st)
        try:
            await self._run_start(st, ctx, status)
        finally:
            # Even when cancelled from outside: whoever waits for this child's end
            # (a shielded _stop_child) must see it.
            st.done.set()
            st.ready.set()

    async def _run_start(self, st: _ChildState, ctx: ChildContext, status: _Status) -> None:
        with trio.CancelScope() as scope:
            st.scope = scope
            try:
                await st.spec.start(ctx, task_status=status)
            except Exception as exc:  # noqa: BLE001 - the supervisor decides
                error = st.error = _single(exc)
                st.last_error = f"{type(error).__name__}: {error}"
                if not st.stopping:
                    # A child that dies before it is ready is reported by what follows
                    # (a restart, or the escalation's one line): the log only, here.
                    log = trace.event if st.ready.is_set() else trace.record
                    log(
                        self.name,
                        "child_crashed",
                        level="warning",
                        child=st.spec.id,
                        error=st.last_error,
                        exc=trace.format_traceback(error),
                    )
        ctx.fail_in_flight("stopped" if st.stopping else "crashed")
        st.state = "stopped" if st.stopping else "exited"
        st.done.set()
        st.ready.set()
        if not st.stopping:
            self._events_send.send_nowait(st)

    async def _stop_child(self, st: _ChildState) -> None:
        if st.done.is_set() or st.ctx is None:
            return
        st.stopping = True
        st.state = "stopping"
        st.ctx.request_shutdown()
        with trio.move_on_after(st.spec.shutdown) as grace:
            grace.shield = True
            await st.done.wait()
        if not st.done.is_set() and st.scope is not None:
            # A child that ignores ctx.shutdown holds every stop (and a server's exit) for
            # its whole grace: say so in the log, where a test looks for it.
            trace.record(
                self.name, "child_stop_forced", "warning", child=st.spec.id, grace=st.spec.shutdown
            )
            st.scope.cancel()
            with trio.CancelScope(shield=True):
                await st.done.wait()
        st.state = "stopped"

    async def _stop_range(self, start: int, stop: int) -> None:
        for st in reversed(self._states[start:stop]):
            await self._stop_child(st)


def _single(exc: BaseException) -> BaseException:
    """``exc`` without the groups that wrap it alone (a group of several stays a group)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def leaves(exc: BaseException) -> list[BaseException]:
    """Every exception inside ``exc``'s (nested) groups, in order; ``[exc]`` for a plain one."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaves(sub)]
    return [exc]


def first_leaf(exc: BaseException) -> BaseException:
    """The first exception inside ``exc``'s (nested) groups; ``exc`` itself for a plain one."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def root_cause(exc: BaseException) -> BaseException:
    """The innermost failure behind a supervisor escalation, through exception groups."""
    while True:
        exc = first_leaf(exc)
        if isinstance(exc, Escalation) and exc.cause is not None:
            exc = exc.cause
        else:
            return exc


def supervisor_child(
    sup_factory: Callable[[], Supervisor],
    child_id: str,
    restart: Restart = PERMANENT,
    why: str = "",
    shutdown: float = 30.0,
    mailboxes: Sequence[Mailbox[Any]] = (),
    on_ready: Callable[[], None] | None = None,
    on_stop: Callable[[], None] | None = None,
) -> ChildSpec:
    """A child spec that runs a nested supervisor (built anew per incarnation).

    ``on_ready`` runs once the nested supervisor has started its children (to
    publish a handle), ``on_stop`` when this incarnation ends, however it ends.
    """

    async def start(
        ctx: ChildContext, *, task_status: trio.TaskStatus[Supervisor] = trio.TASK_STATUS_IGNORED
    ) -> None:
        sup = sup_factory()
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            try:
                if on_ready is not None:
                    on_ready()
                task_status.started(sup)
                await ctx.shutdown.wait()
            finally:
                if on_stop is not None:
                    on_stop()
                with trio.CancelScope(shield=True):
                    await sup.stop()

    return ChildSpec(
        child_id, start, restart=restart, shutdown=shutdown, mailboxes=list(mailboxes), why=why
    )
