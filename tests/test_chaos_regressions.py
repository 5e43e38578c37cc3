"""Regression tests for the bugs the chaos harness found, named after what broke."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
from mcp_client import run_cli
from memtrio.protocol import jsonrpc
from raw_server import initialize_request, raw_server


async def test_store_crash_keeps_the_stdio_session_initialized(home: Path) -> None:
    # The root supervisor is rest_for_one: a StoreWriter crash restarts the
    # transport too. It used to come back with a fresh, uninitialized session
    # (every later call: "Server not initialized") and the queued input lost.
    async with raw_server(home, env={"MEMTRIO_FAULTS": "store.write=raise@2"}) as server:
        await server.initialize()
        assert "result" in await server.call_tool("remember", {"content": "first"})
        reply = await server.call_tool("remember", {"content": "second"})  # the store crashes
        assert reply["result"]["isError"]
        # A call that lands while the transport restarts may be interrupted
        # (-32603); none may be refused as "not initialized".
        for i in range(3, 6):
            reply = await server.call_tool("remember", {"content": f"after the crash {i}"})
            assert reply.get("error", {}).get("code") != jsonrpc.SERVER_NOT_INITIALIZED, reply
            if "result" in reply:
                break
        assert not reply["result"]["isError"], reply
        assert "tools" in (await server.request("tools/list"))["result"]


async def test_session_crash_mid_batch_answers_every_pipelined_request(home: Path) -> None:
    # Lines arrive in batches; a session crash on one line used to drop the rest
    # of its batch without a reply, so the client waited forever.
    async with raw_server(home, env={"MEMTRIO_FAULTS": "session.dispatch=raise@4"}) as server:
        await server.initialize()  # hits 1 (initialize) and 2 (initialized)
        batch = b"".join(
            json.dumps({"jsonrpc": "2.0", "id": i, "method": "ping"}).encode() + b"\n"
            for i in range(10, 18)
        )
        await server.send_bytes(batch)
        replies = [await server.read(timeout=20) for _ in range(8)]
        assert sorted(r["id"] for r in replies) == list(range(10, 18))
        errors = [r for r in replies if "error" in r]
        assert len(errors) == 1 and errors[0]["error"]["code"] == jsonrpc.INTERNAL_ERROR


def test_deeply_nested_json_is_answered_not_a_recursion_error() -> None:
    # msgspec raises RecursionError (not DecodeError) past ~1000 levels; decode_line let it out.
    # Truncated deep JSON is a parse error; valid deep JSON is an invalid request (defect 8).
    for line, code, rid in (
        (b"[" * 100_000, jsonrpc.PARSE_ERROR, None),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":'
            + b"[" * 5000
            + b"]" * 5000
            + b"}}",
            jsonrpc.INVALID_REQUEST,
            1,
        ),
        (b'{"a":' * 50_000 + b"1" + b"}" * 50_000, jsonrpc.INVALID_REQUEST, None),
    ):
        msg = jsonrpc.decode_line(line)
        assert isinstance(msg, jsonrpc.Failure) and (msg.code, msg.id) == (code, rid)


async def test_deeply_nested_json_does_not_crash_the_session(home: Path) -> None:
    async with raw_server(home) as server:
        await server.initialize()
        for i in range(8):  # more than the transport's restart intensity, had each crashed it
            await server.send_bytes(b"[" * 200_000 + b"\n")
            reply = await server.read()
            assert reply["error"]["code"] == jsonrpc.PARSE_ERROR
            await server.send_request(i, "ping")
            assert (await server.read())["id"] == i


@pytest.mark.parametrize("workers", [1])
async def test_hung_embedder_worker_is_abandoned_and_the_pool_recovers(
    home: Path, workers: int
) -> None:
    # A worker stuck in an encode was never abandoned: with one worker every
    # later call timed out forever.
    env = {
        "MEMTRIO_EMBEDDINGS": "on",
        "MEMTRIO_EMBEDDING_WORKERS": str(workers),
        "MEMTRIO_EMBEDDING_TIMEOUT": "2",
        "MEMTRIO_EMBEDDING_INTRA_OP_THREADS": "1",
        "MEMTRIO_FAULTS": "embedder.embed=hang@1",  # the first encode (after the model loads) hangs
    }
    async with raw_server(home, env=env) as server:
        await server.initialize()
        reply = await server.call_tool("remember", {"content": "hangs"}, timeout=60)
        assert reply["result"]["isError"]
        assert "[embedding] timeout" in reply["result"]["content"][0]["text"]
        # The pool serves again: within a bounded wait, then call after call.
        with trio.fail_after(60):
            while (await server.call_tool("remember", {"content": "recovered"}))["result"][
                "isError"
            ]:
                pass
        for i in (1, 2):
            reply = await server.call_tool("remember", {"content": f"after the hang {i}"})
            assert not reply["result"]["isError"], reply


async def test_reader_stopped_in_the_middle_of_a_send_loses_no_line() -> None:
    # A reader stopped (transport restart) after reading a line but before the
    # session took it used to drop the line: that request was never answered.
    from memtrio.actors.stdio import ReaderState, run_reader
    from memtrio.protocol.messages import Inbound
    from memtrio.supervisors.supervisor import ChildContext, ChildSpec, Mailbox
    from trio.testing import memory_stream_one_way_pair, wait_all_tasks_blocked

    send_stream, receive_stream = memory_stream_one_way_pair()
    inbox = Mailbox("inbox", 0)  # nobody receives yet: the reader blocks in its send
    state = ReaderState()
    spec = ChildSpec("reader", run_reader)
    async with trio.open_nursery() as nursery:
        first = ChildContext(spec, 0, None)  # type: ignore[arg-type]
        done = trio.Event()

        async def incarnation(ctx: ChildContext, finished: trio.Event) -> None:
            await run_reader(ctx, stream=receive_stream, inbox=inbox, state=state, limit=1024)
            finished.set()

        nursery.start_soon(incarnation, first, done)
        await send_stream.send_all(b'{"line": 1}\n')
        await wait_all_tasks_blocked()
        first.request_shutdown()
        await done.wait()
        second = ChildContext(spec, 1, None)  # type: ignore[arg-type]
        nursery.start_soon(incarnation, second, trio.Event())
        with trio.fail_after(5):
            item = await inbox.receive_channel.receive()
        assert isinstance(item, Inbound) and item.lines == [b'{"line": 1}']
        second.request_shutdown()


async def test_transport_restart_loses_no_request_in_a_restart_storm(home: Path) -> None:
    # Every ping crashes the session: the transport supervisor escalates, the
    # root restarts the transport, and so on until the root gives up. Each
    # ping must be answered until the server exits 1 saying why.
    async with raw_server(home, env={"MEMTRIO_FAULTS": "session.dispatch=raise@3+"}) as server:
        await server.initialize()
        answered = 0
        for rid in range(1, 200):
            try:
                await server.send_request(rid, "ping")
                reply = await server.read(timeout=10)
            except (EOFError, trio.BrokenResourceError):
                break
            assert reply["id"] == rid and reply["error"]["code"] == jsonrpc.INTERNAL_ERROR
            answered += 1
        assert await server.wait() == 1
        assert answered >= 30  # (5 + 1) session crashes per transport, (5 + 1) transports
    stderr = (home / "server-stderr.txt").read_text()
    assert "memtrio: supervisor 'root' gave up" in stderr


async def test_supervisor_stop_survives_a_crash_while_stopping(autojump_clock: object) -> None:
    # A child crashing while stop() was still gracefully stopping a sibling made
    # the supervisor loop return and cancel that sibling from outside; its end
    # was never signalled and stop() waited for it forever (the server then hung
    # at exit after parser-worker crashes).
    from memtrio.supervisors.supervisor import ONE_FOR_ONE, ChildContext, ChildSpec, Supervisor

    stopped_cleanly: list[str] = []

    async def crasher(ctx: ChildContext, *, task_status: object) -> None:
        task_status.started()  # type: ignore[attr-defined]
        await trio.sleep(0.5)
        raise RuntimeError("crash while the supervisor stops")

    async def slow_stopper(ctx: ChildContext, *, task_status: object) -> None:
        task_status.started()  # type: ignore[attr-defined]
        await ctx.shutdown.wait()
        await trio.sleep(1.0)  # a graceful stop that takes a while
        stopped_cleanly.append(ctx.id)

    sup = Supervisor(
        "s",
        [
            ChildSpec("crasher", crasher, shutdown=5.0),
            ChildSpec("slow", slow_stopper, shutdown=5.0),
        ],
        ONE_FOR_ONE,
        max_restarts=10,
        period=10.0,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        await trio.sleep(0.1)
        with trio.fail_after(30):
            await sup.stop()
    assert stopped_cleanly == ["slow"]


async def test_child_dying_right_after_ready_is_restarted_once(autojump_clock: object) -> None:
    # A restarted child that crashed right after task_status.started() (the
    # stdio writer retrying its line in hand) was handled twice: once by the
    # restart itself and once by its queued exit event. Two incarnations then
    # ran at once (two writers on stdout: BusyResourceError, a reply lost).
    from memtrio.supervisors.supervisor import ONE_FOR_ONE, ChildContext, ChildSpec, Supervisor

    incarnations: list[int] = []
    running = 0
    most = 0

    async def child(ctx: ChildContext, *, task_status: object) -> None:
        nonlocal running, most
        n = len(incarnations)
        incarnations.append(n)
        task_status.started()  # type: ignore[attr-defined]
        if n == 0:
            await trio.sleep(0.5)
            raise RuntimeError("first crash")
        if n == 1:
            raise RuntimeError("crashes right after it is ready")
        running += 1
        most = max(most, running)
        try:
            await ctx.shutdown.wait()
        finally:
            running -= 1

    sup = Supervisor("s", [ChildSpec("w", child)], ONE_FOR_ONE, max_restarts=10, period=10.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        await trio.sleep(5)
        assert incarnations == [0, 1, 2]
        assert most == 1
        await sup.stop()


async def test_recall_answers_when_the_disk_is_full(home: Path) -> None:
    # recall records each access in a write transaction; on a full disk that
    # write failed and recall failed with it instead of answering.
    import resource

    # The store's files only: with the code feature on, `remember` looks for code anchors
    # and builds the checkout's code index in the home, whose size would set the limit.
    quiet = {"MEMTRIO_LOG_LEVEL": "warning", "MEMTRIO_CODE": "off"}
    async with raw_server(home, env=quiet) as server:
        await server.initialize()
        for i in range(5):
            await server.call_tool("remember", {"content": f"alpha note {i}"})
        assert await server.close() == 0
    limit = max(p.stat().st_size for p in home.rglob("*") if p.is_file()) + 32 * 1024

    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    async with raw_server(home, env=quiet, preexec=preexec) as server:
        await server.initialize()
        for size in (16384, 1024, 8):  # fill the "disk" until even a small write fails
            for _ in range(200):
                reply = await server.call_tool("remember", {"content": "x" * size})
                if reply["result"]["isError"]:
                    break
            else:
                pytest.fail("the file-size limit never stopped a write")
        # Each recall records its access (a write); a write may still fit where a freed
        # page or a restarted WAL leaves room, so recall until one does not: every recall
        # answers, the one whose write failed with a warning instead of an error.
        recorded = True
        for _ in range(200):
            reply = await server.call_tool("recall", {"query": "alpha", "limit": 3})
            result = reply["result"]
            assert not result["isError"], result
            assert len(result["structuredContent"]["memories"]) == 3
            warnings = result["structuredContent"]["warnings"]
            if any("could not be recorded" in w for w in warnings):
                recorded = False
                break
        assert not recorded, "no recall's access write ever failed: the disk never filled"
        assert await server.close() == 0


def test_cli_error_raised_inside_the_app_is_one_line_not_an_exception_group(tmp_path: Path) -> None:
    # A CliError raised by a subcommand body under run_with_app came out wrapped in
    # the app nursery's ExceptionGroup: a traceback instead of one clear line.
    proc = run_cli("code", "index", "--home", str(tmp_path), "--root", str(tmp_path / "missing"))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("memtrio: --root ")
    assert "Traceback" not in proc.stderr


def test_cli_error_under_python_m_is_caught(tmp_path: Path) -> None:
    # Under `python -m memtrio.supervisors.cli` the module runs as __main__, so
    # its `except CliError` did not match the CliError subcommands import.
    proc = run_cli("chaos", "--scenario", "no-such", timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith("memtrio: unknown scenario(s) no-such")


async def test_session_restart_keeps_the_negotiated_revision_without_structured_content(
    home: Path,
) -> None:
    # The choice of structuredContent was kept on the session actor, not in its
    # restart-surviving state: after a crash, a client that negotiated 2025-03-26
    # (no structuredContent) received it anyway.
    async with raw_server(home, env={"MEMTRIO_FAULTS": "session.dispatch=raise@4"}) as server:
        await server.send(initialize_request("2025-03-26", "old-client"))
        assert (await server.read())["result"]["protocolVersion"] == "2025-03-26"
        await server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        before = await server.call_tool("stats")  # hit 3
        assert "structuredContent" not in before["result"], before
        crashed = await server.request("ping")  # hit 4: the session crashes and restarts
        assert crashed["error"]["code"] == jsonrpc.INTERNAL_ERROR
        after = await server.call_tool("stats")
        assert not after["result"]["isError"], after
        assert "structuredContent" not in after["result"], after
