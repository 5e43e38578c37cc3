"""The ``malformed`` scenario: every malformed line must get a well-formed answer (or, for a
notification, none), and the session must keep serving.

Raw lines are followed by a ``ping`` sentinel: the session answers lines in
order, so the replies read before the sentinel's are the replies to the line.
Tool calls with wrong arguments are generated from each tool's ``inputSchema``
(from ``tools/list``) and must come back as ``isError`` results naming the field.
The inputs themselves are in `malformed_cases`.
"""

from __future__ import annotations

import json
from typing import Any

import trio

from ..client import Reply, ServerProcess
from ..harness import Outcome, Run, crashed, make_checkout, reply_error_text
from .malformed_cases import ARGUMENT_TEXT_CASES, REQUEST_LIMIT, raw_cases, tool_cases


async def _sentinel(server: ServerProcess, n: int) -> list[Reply]:
    """Ping; the unmatched replies that came before it."""
    reply = await server.request("ping", rid=f"sentinel-{n}", timeout=30)
    if "result" not in reply:
        raise AssertionError(f"sentinel ping failed: {reply}")
    return server.take_unmatched()


async def _start(run: Run) -> ServerProcess:
    """A server with every tool group on (code tools need a Git checkout to start in)."""
    repo = run.base / "repo"
    await trio.to_thread.run_sync(make_checkout, repo, 2)
    env = {
        "MEMTRIO_REQUEST_LIMIT": str(REQUEST_LIMIT),
        "MEMTRIO_CODE": "on",
        "MEMTRIO_CODE_INDEX_THREADS": "1",
    }
    return await run.server(run.home(), env, cwd=repo, initialize=False)


async def _before_initialize(server: ServerProcess, out: Outcome) -> None:
    """Before initialize only ping and initialize are served; then initialize succeeds."""
    for method in ("tools/list", "tools/call", "resources/list", "prompts/list"):
        reply = await server.request(
            method, {"name": "stats", "arguments": {}} if method == "tools/call" else None
        )
        out.malformed += 1
        out.errors_expected += 1
        if crashed(out, f"{method} before initialize", reply):
            continue
        if reply.get("error", {}).get("code") != -32002:
            out.violations.append(
                f"{method} before initialize: expected -32002, got {str(reply)[:160]}"
            )
    reply = await server.initialize()
    if "result" not in reply:
        out.violations.append(f"initialize after pre-init requests failed: {reply}")


async def _raw_lines(run: Run, server: ServerProcess) -> None:
    """Each raw line gets the answer its case expects, and nothing else."""
    out = run.out
    for n, (label, line, expected) in enumerate(raw_cases(run.rng, run.quick), start=1):
        out.malformed += 1
        out.errors_expected += expected == "error"
        await server.send_bytes(line + b"\n")
        replies = await _sentinel(server, n)
        if any([crashed(out, label, r) for r in replies]):
            continue
        kinds = ["error" if "error" in r else "result" for r in replies]
        if expected == "any" and len(kinds) == 1:
            out.errors_expected += kinds == ["error"]
        elif kinds != ([] if expected == "none" else [expected]):
            out.violations.append(f"{label}: expected {expected}, got {str(replies)[:200]}")
        if label == "huge line" and replies and replies[0].get("id") != 48:
            out.violations.append(
                f"huge line: the error does not carry the request id 48: {str(replies[0])[:160]}"
            )


async def _bad_argument_text(server: ServerProcess, out: Outcome) -> None:
    """Bad text inside tool arguments: a parse error, or an error result from the call's task."""
    for i, (label, fragment) in enumerate(ARGUMENT_TEXT_CASES):
        rid = f"text-{i}"
        receive = server.expect(rid)
        await server.send_bytes(
            b'{"jsonrpc":"2.0","id":"'
            + rid.encode()
            + b'","method":"tools/call","params":{"name":"remember","arguments":{'
            + fragment
            + b"}}}\n"
        )
        # A parse error is answered at once with id null; a decoded call, by its task.
        parse_errors = [
            r for r in await _sentinel(server, -2 - i) if "error" in r and r.get("id") is None
        ]
        if parse_errors:
            server.forget(rid)
            out.malformed += 1
            out.errors_expected += 1
            continue
        reply = await server.wait_reply(rid, receive, 30)
        out.malformed += 1
        if crashed(out, label, reply):
            continue
        if reply_error_text(reply) is None:
            if label.startswith("NUL"):
                continue  # a NUL character is valid JSON text; storing it is fine
            out.violations.append(f"{label}: accepted: {str(reply)[:160]}")
        else:
            out.errors_expected += 1
            if "result" in reply:
                server.stats.tool_errors += 1


async def _nested_arguments(server: ServerProcess, out: Outcome) -> None:
    """Deep nesting inside tool arguments is refused."""
    reply = await server.call_tool("recall", {"query": "x", "scopes": [[[[[[[[[[[]]]]]]]]]]]})
    out.malformed += 1
    out.errors_expected += 1
    if crashed(out, "nested arguments", reply):
        return
    if reply_error_text(reply) is None:
        out.violations.append("nested arguments were accepted")


async def _duplicate_ids(server: ServerProcess, out: Outcome) -> None:
    """A second call with the id of a running call is refused (or served once the first is done)."""
    slow = {
        "jsonrpc": "2.0",
        "id": "dup",
        "method": "tools/call",
        "params": {"name": "recall", "arguments": {"query": "dup"}},
    }
    receive = server.expect("dup")
    await server.send_bytes((json.dumps(slow) + "\n" + json.dumps(slow) + "\n").encode())
    out.malformed += 1
    got: list[Reply] = [await server.wait_reply("dup", receive, 30)]
    receive = server.expect("dup")
    with trio.move_on_after(10):
        got.append(await server.wait_reply("dup", receive, 10))
    got += [r for r in server.take_unmatched() if r.get("id") == "dup"]
    for reply in got:
        crashed(out, "duplicate id", reply)
    if len(got) != 2:
        out.violations.append(f"duplicate id: {len(got)} replies to two requests with id 'dup'")
    # The second is refused while the first runs (or served if the first already
    # finished): both are well-formed; count what happened.
    out.errors_expected += sum("error" in r for r in got)


async def _cancel_finished_calls(server: ServerProcess, out: Outcome) -> None:
    """Cancelling calls that already finished gets no reply, and the session goes on."""
    reply = await server.call_tool("stats", {})
    finished = 2_000_000
    await server.send(
        {
            "jsonrpc": "2.0",
            "id": finished,
            "method": "tools/call",
            "params": {"name": "stats", "arguments": {}},
        }
    )
    await trio.sleep(0.2)
    for rid in (finished, reply["id"], finished):
        await server.notify("notifications/cancelled", {"requestId": rid, "reason": "chaos"})
        out.malformed += 1
    leftovers = await _sentinel(server, -1)
    stray = [r for r in leftovers if r.get("id") != finished]
    if stray:
        out.violations.append(f"cancelling finished calls produced replies: {str(stray)[:200]}")


async def _wrong_arguments(
    server: ServerProcess, out: Outcome, tools: list[dict[str, Any]]
) -> None:
    """Wrong arguments for every field of every tool: refused, naming the field."""
    if not any(t["name"].startswith("code_") for t in tools):
        out.violations.append("the code tools are missing: their arguments were not tried")
    out.notes.append(f"{len(tools)} tools")
    for tool in tools:
        for label, arguments, field in tool_cases(tool):
            out.malformed += 1
            out.errors_expected += 1
            reply = await server.call_tool(tool["name"], arguments, timeout=30)
            error = reply_error_text(reply)
            if crashed(out, f"{tool['name']} {label}", reply):
                continue
            if error is None:
                out.violations.append(
                    f"{tool['name']} {label}: accepted {json.dumps(arguments)[:120]}"
                )
            elif field is not None and field not in error:
                out.violations.append(
                    f"{tool['name']} {label}: the error does not name `{field}`: {error[:160]}"
                )


async def run_malformed(run: Run) -> None:
    """Malformed lines, bad argument text, duplicate ids, stray cancellations and wrong tool
    arguments, in one session that must answer each as expected and keep serving."""
    out = run.out
    server = await _start(run)
    await _before_initialize(server, out)
    await _raw_lines(run, server)
    await _bad_argument_text(server, out)
    await _nested_arguments(server, out)
    tools = await server.tools()
    await _duplicate_ids(server, out)
    await _cancel_finished_calls(server, out)
    await _wrong_arguments(server, out, tools)
    # Still serving.
    reply = await server.call_tool("stats", {})
    if (problem := reply_error_text(reply)) is not None:
        out.violations.append(f"stats after the malformed traffic failed: {problem[:200]}")
    out.errors_seen = server.stats.errors + server.stats.tool_errors
    out.errors_exact = True
    await run.stop(server)
