"""OTP supervisor semantics, on trio's autojump clock."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from memtrio.protocol.messages import ActorCrashed, Request
from memtrio.supervisors.supervisor import (
    ONE_FOR_ALL,
    ONE_FOR_ONE,
    PERMANENT,
    REST_FOR_ONE,
    TEMPORARY,
    TRANSIENT,
    ChildContext,
    ChildSpec,
    Escalation,
    Mailbox,
    Supervisor,
    supervisor_child,
)


class Boom(Exception):
    pass


class Probe:
    """A controllable child: records starts and stops, crashes or exits on demand."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log
        self.crash = trio.Event()
        self.exit_normally = trio.Event()

    def arm(self) -> None:
        self.crash = trio.Event()
        self.exit_normally = trio.Event()

    async def start(
        self, ctx: ChildContext, *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        self.log.append(f"start {self.name}")
        task_status.started(self)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._wait, self.crash, nursery)
                nursery.start_soon(self._wait, self.exit_normally, nursery)
                nursery.start_soon(self._wait, ctx.shutdown, nursery)
            if self.crash.is_set():
                self.arm()
                raise Boom(self.name)
            self.arm()
        finally:
            self.log.append(f"stop {self.name}")

    @staticmethod
    async def _wait(event: trio.Event, nursery: trio.Nursery) -> None:
        await event.wait()
        nursery.cancel_scope.cancel()


def specs(probes: list[Probe], restart: Any = PERMANENT) -> list[ChildSpec]:
    return [ChildSpec(p.name, p.start, restart=restart, shutdown=1.0) for p in probes]


async def settle() -> None:
    await trio.testing.wait_all_tasks_blocked()


async def test_children_start_in_order_and_stop_in_reverse(autojump_clock: Any) -> None:
    log: list[str] = []
    probes = [Probe(n, log) for n in "abc"]
    sup = Supervisor("s", specs(probes))
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        assert log == ["start a", "start b", "start c"]
        await sup.stop()
    assert log[3:] == ["stop c", "stop b", "stop a"]


async def test_one_for_one_restarts_only_the_failed_child(autojump_clock: Any) -> None:
    log: list[str] = []
    probes = [Probe(n, log) for n in "abc"]
    sup = Supervisor("s", specs(probes), ONE_FOR_ONE)
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        log.clear()
        probes[1].crash.set()
        await settle()
        assert log == ["stop b", "start b"]
        assert [row["restarts"] for row in sup.snapshot()] == [0, 1, 0]
        await sup.stop()


async def test_one_for_all_restarts_every_child_in_order(autojump_clock: Any) -> None:
    log: list[str] = []
    probes = [Probe(n, log) for n in "abc"]
    sup = Supervisor("s", specs(probes), ONE_FOR_ALL)
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        log.clear()
        probes[1].crash.set()
        await settle()
        assert log == ["stop b", "stop c", "stop a", "start a", "start b", "start c"]
        await sup.stop()


async def test_rest_for_one_restarts_the_failed_child_and_those_after_it(
    autojump_clock: Any,
) -> None:
    log: list[str] = []
    probes = [Probe(n, log) for n in "abc"]
    sup = Supervisor("s", specs(probes), REST_FOR_ONE)
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        log.clear()
        probes[1].crash.set()
        await settle()
        assert log == ["stop b", "stop c", "start b", "start c"]
        await sup.stop()


@pytest.mark.parametrize(
    ("restart", "crash", "restarted"),
    [
        (PERMANENT, True, True),
        (PERMANENT, False, True),
        (TRANSIENT, True, True),
        (TRANSIENT, False, False),
        (TEMPORARY, True, False),
        (TEMPORARY, False, False),
    ],
)
async def test_restart_types(
    autojump_clock: Any, restart: Any, crash: bool, restarted: bool
) -> None:
    log: list[str] = []
    probe = Probe("a", log)
    sup = Supervisor("s", specs([probe], restart))
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        log.clear()
        (probe.crash if crash else probe.exit_normally).set()
        await settle()
        assert log == (["stop a", "start a"] if restarted else ["stop a"])
        state = sup.snapshot()[0]["state"]
        assert state == ("running" if restarted else ("failed" if crash else "stopped"))
        await sup.stop()


async def test_intensity_exceeded_stops_children_and_escalates(autojump_clock: Any) -> None:
    log: list[str] = []
    probes = [Probe(n, log) for n in "ab"]
    sup = Supervisor("s", specs(probes), ONE_FOR_ONE, max_restarts=2, period=10.0)
    with pytest.raises(BaseExceptionGroup) as info:
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            for _ in range(3):
                probes[1].crash.set()
                await settle()
    escalation = info.value.exceptions[0]
    assert isinstance(escalation, Escalation)
    assert escalation.child == "b"
    assert isinstance(escalation.cause, Boom)
    assert log[-2:] == ["stop b", "stop a"] or log[-1] == "stop a"
    assert sup.state == "stopped"


async def test_restarts_spread_over_time_stay_within_intensity(autojump_clock: Any) -> None:
    log: list[str] = []
    probe = Probe("a", log)
    sup = Supervisor("s", specs([probe]), ONE_FOR_ONE, max_restarts=2, period=10.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        for _ in range(6):
            probe.crash.set()
            await settle()
            await trio.sleep(6)  # two restarts never fall within one 10 s window... three do not
        assert sup.snapshot()[0]["restarts"] == 6
        assert sup.state == "running"
        await sup.stop()


async def test_escalation_through_two_levels(autojump_clock: Any) -> None:
    log: list[str] = []
    leaf = Probe("leaf", log)
    sibling = Probe("sibling", log)

    def inner() -> Supervisor:
        return Supervisor("inner", specs([leaf]), ONE_FOR_ONE, max_restarts=1, period=10.0)

    middle_spec = supervisor_child(inner, "inner")

    def middle() -> Supervisor:
        return Supervisor("middle", [middle_spec], ONE_FOR_ONE, max_restarts=1, period=10.0)

    top = Supervisor(
        "top",
        [ChildSpec("sibling", sibling.start, shutdown=1.0), supervisor_child(middle, "middle")],
        ONE_FOR_ONE,
        max_restarts=0,
        period=10.0,
    )
    with pytest.raises(BaseExceptionGroup) as info:
        async with trio.open_nursery() as nursery:
            await nursery.start(top.run)
            # Each inner escalation makes middle restart inner; the second time
            # middle gives up, and top (intensity 0) gives up at once.
            for _ in range(8):
                leaf.crash.set()
                await settle()
    leaves = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for sub in exc.exceptions:
                walk(sub)
        else:
            leaves.append(exc)

    walk(info.value)
    assert isinstance(leaves[0], Escalation) and leaves[0].supervisor == "top"
    assert leaves[0].child == "middle"
    assert "stop sibling" in log  # top stopped its other children before escalating


class Work(Request, tag=True):
    """A request of the test worker: double ``value`` (or crash on "crash")."""

    value: int | str


async def test_request_in_flight_on_crashing_child_gets_error_reply(autojump_clock: Any) -> None:
    mailbox = Mailbox("work")
    served: list[int] = []

    async def worker(ctx: ChildContext, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async for cmd in mailbox.receive_channel:
            with ctx.serving(cmd.reply):
                if cmd.value == "crash":
                    await trio.sleep(1)
                    raise Boom("worker died mid-request")
                served.append(cmd.value)
                cmd.reply.set(cmd.value * 2)

    sup = Supervisor("s", [ChildSpec("worker", worker, mailboxes=[mailbox])], ONE_FOR_ONE)
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        with pytest.raises(ActorCrashed, match="worker crashed"):
            await mailbox.call(Work(value="crash"), timeout=30)
        # The mailbox survived the restart: the next request is served.
        assert await mailbox.call(Work(value=21), timeout=30) == 42
        assert sup.snapshot()[0]["restarts"] == 1
        await sup.stop()


async def test_queued_requests_fail_when_the_child_stops_for_good(autojump_clock: Any) -> None:
    mailbox = Mailbox("work")

    async def worker(ctx: ChildContext, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await trio.sleep(1)
        raise Boom("gone")

    sup = Supervisor("s", [ChildSpec("worker", worker, restart=TEMPORARY, mailboxes=[mailbox])])
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        with pytest.raises(ActorCrashed):
            await mailbox.call(Work(value="never served"), timeout=30)
        await sup.stop()


async def test_graceful_stop_waits_for_grace_then_cancels(autojump_clock: Any) -> None:
    events: list[str] = []

    async def stubborn(ctx: ChildContext, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            await trio.sleep_forever()  # ignores ctx.shutdown
        finally:
            events.append(f"cancelled at {trio.current_time():.0f}")

    async def polite(ctx: ChildContext, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await ctx.shutdown.wait()
        events.append(f"polite stop at {trio.current_time():.0f}")

    sup = Supervisor(
        "s",
        [ChildSpec("polite", polite, shutdown=5.0), ChildSpec("stubborn", stubborn, shutdown=3.0)],
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        start = trio.current_time()
        await sup.stop()
    assert events[0] == f"cancelled at {start + 3:.0f}"
    assert events[1] == f"polite stop at {start + 3:.0f}"


async def test_child_failing_at_first_start_fails_the_supervisor(autojump_clock: Any) -> None:
    async def broken(ctx: ChildContext, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        raise Boom("cannot open")

    sup = Supervisor("s", [ChildSpec("broken", broken)])
    with pytest.raises(BaseExceptionGroup) as info:
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
    assert "cannot open" in str(info.value.exceptions[0])
