"""Code anchors under faults: the parser worker dies during a status check.

``stale-refresh-crash``: memories anchored to symbols of a Git checkout; the
anchored file is edited, and the one parser worker process exits (exit 137) on
the re-parse that the next status check's incremental refresh asks for. That
call must be answered (an error, or statuses left out with a warning); no memory
or anchor is lost; the next call re-parses with a fresh worker and reports the
anchor ``changed``, and ``review_stale`` lists the memory.
"""

from __future__ import annotations

from typing import Any

import trio

from ..client import Reply
from ..harness import Run, make_checkout, reply_error_text

FILES = 4


def _structured(reply: Reply) -> dict[str, Any]:
    result = reply.get("result") or {}
    found = result.get("structuredContent")
    return found if isinstance(found, dict) else {}


def _status(reply: Reply) -> str:
    code = _structured(reply).get("code") or [{}]
    return str(code[0].get("status", "")) if isinstance(code[0], dict) else ""


async def stale_refresh_crash(run: Run) -> None:
    """The parser worker exits during a status check: nothing lost, statuses recomputed."""
    out = run.out
    home = run.home()
    repo = run.base / "repo"
    await trio.to_thread.run_sync(make_checkout, repo, FILES)
    env = {
        "MEMTRIO_CODE": "on",
        "MEMTRIO_CODE_INDEX_THREADS": "1",  # one worker process: its hits are counted in order
        # mod1.py's first parse (the first index) passes; the worker dies on its re-parse.
        "MEMTRIO_FAULTS": "code.parse:mod1.py=exit@2",
    }
    server = await run.server(home, env, cwd=repo)
    ids: list[int] = []
    for i in range(FILES):
        reply = await server.call_tool(
            "remember",
            {
                "content": f"helper{i} adds {i}",
                "code": [{"path": f"mod{i}.py", "symbol": f"helper{i}"}],
            },
            timeout=120,
        )
        if (error := reply_error_text(reply)) is not None:
            out.violations.append(f"remember anchored to helper{i} failed: {error[:160]}")
            continue
        ids.append(int(_structured(reply)["id"]))
        out.acked += 1
    if len(ids) != FILES:
        await run.stop(server)
        return
    text = (repo / "mod1.py").read_text().replace("return x + 1", "return x * 100 + 1")
    await trio.to_thread.run_sync((repo / "mod1.py").write_text, text)

    first = await server.call_tool("inspect", {"id": ids[1]}, timeout=120)
    out.faults += 1  # fires in the worker process, which keeps no trace log
    if reply_error_text(first) is not None:
        out.errors_seen += 1
    out.notes.append(f"status during the crash: {_status(first) or 'not computed'}")
    again = await server.call_tool("inspect", {"id": ids[1]}, timeout=120)
    if _status(again) != "changed":
        out.violations.append(
            f"after the worker crash the next status check says {_status(again) or reply_error_text(again)!r}, not 'changed'"
        )
    for i, memory_id in enumerate(ids):
        reply = await server.call_tool("inspect", {"id": memory_id}, timeout=120)
        want = "changed" if i == 1 else "fresh"
        if reply_error_text(reply) is not None or _status(reply) != want:
            out.lost += 1
            out.violations.append(
                f"memory #{memory_id} (helper{i}): {reply_error_text(reply) or _status(reply)!r}, expected {want}"
            )
    review = _structured(await server.call_tool("review_stale", {}, timeout=120))
    if [m.get("id") for m in review.get("memories", [])] != [ids[1]]:
        out.violations.append(f"review_stale lists {review.get('memories')!r:.200}, not #{ids[1]}")
    await run.stop(server)
