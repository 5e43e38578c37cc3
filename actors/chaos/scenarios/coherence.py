"""A server's recall cache under another process's writes (issue #37, item 3):
``recall-other-process``.

Two ``memtrio mcp`` servers share one home, both with embeddings on: ``a`` keeps its
recall cache loaded (a recall every round), ``b`` is the other process. Each round
interleaves, in a random order, ``b``'s remembers, forgets and updates with ``a``'s own
remembers and forgets (an own write right after another process's write is what hid
that write from the cache before the store's change mark). After each round:

- every memory ``b`` wrote or rewrote in the round is ``a``'s first answer to its own
  text, and no memory forgotten by either is in ``a``'s answers (``lost`` counts the
  misses);

at the end, a fresh server is started on the home and asked the text of every live
memory: each memory of its three best answers must be among ``a``'s five best (no memory
missing from the long-running cache).
"""

from __future__ import annotations

from typing import Any

from ..client import ServerProcess
from ..harness import Run, content_for, reply_error_text

ENV = {"MEMTRIO_EMBEDDINGS": "on", "MEMTRIO_EMBEDDING_INTRA_OP_THREADS": "1"}
SEED_MEMORIES = 6
CHECKED = 20  # live memories compared with the fresh server at the end (at most)


class Memories:
    """What the scenario wrote: live memory id -> text, and the ids forgotten."""

    def __init__(self) -> None:
        self.live: dict[int, str] = {}
        self.gone: set[int] = set()
        self.counter = 0


async def _call(run: Run, server: ServerProcess, tool: str, args: dict[str, Any]) -> Any:
    """The tool's structured result; a violation (and None) for an error."""
    reply = await server.call_tool(tool, args, timeout=60)
    error = reply_error_text(reply)
    if error is not None:
        run.out.violations.append(f"{tool} {args}: {error[:200]}")
        return None
    return reply["result"].get("structuredContent") or {}


async def _remember(run: Run, server: ServerProcess, mem: Memories) -> int | None:
    mem.counter += 1
    text = content_for(run.name, mem.counter, run.rng)
    result = await _call(run, server, "remember", {"content": text})
    if result is None:
        return None
    mem.live[int(result["id"])] = text
    return int(result["id"])


async def _forget(run: Run, server: ServerProcess, mem: Memories) -> None:
    if len(mem.live) <= 2:
        return
    victim = run.rng.choice(sorted(mem.live))
    if await _call(run, server, "forget", {"id": victim}) is not None:
        del mem.live[victim]
        mem.gone.add(victim)


async def _update(run: Run, server: ServerProcess, mem: Memories) -> int | None:
    if not mem.live:
        return None
    target = run.rng.choice(sorted(mem.live))
    mem.counter += 1
    text = content_for(run.name, mem.counter, run.rng)
    if await _call(run, server, "update", {"id": target, "content": text}) is None:
        return None
    mem.live[target] = text
    return target


async def _recall(run: Run, server: ServerProcess, query: str, limit: int) -> list[int]:
    result = await _call(run, server, "recall", {"query": query, "limit": limit})
    if result is None:
        return []
    if result.get("ranking") != "semantic":
        run.out.violations.append(f"recall ranked {result.get('ranking')!r}, not semantically")
    return [int(m["id"]) for m in result.get("memories", [])]


async def recall_other_process(run: Run) -> None:  # noqa: C901
    """Interleaved writes and deletes by another server; recall compared with a fresh one's."""
    out = run.out
    home = run.home()
    a = await run.server(home, ENV, label="a")
    b = await run.server(home, ENV, label="b")
    mem = Memories()
    for _ in range(SEED_MEMORIES):
        await _remember(run, a, mem)
    rounds = 4 if run.quick else 12
    for _ in range(rounds):
        await _recall(run, a, "anything", 3)  # a's cache is current here
        written: list[int] = []
        steps = ["b-remember", "b-remember", "b-forget", "b-update", "a-remember", "a-forget"]
        run.rng.shuffle(steps)
        for step in steps:
            who, action = step.split("-")
            server = a if who == "a" else b
            if action == "remember":
                mid = await _remember(run, server, mem)
                if who == "b" and mid is not None:
                    written.append(mid)
            elif action == "forget":
                await _forget(run, server, mem)
            else:
                mid = await _update(run, server, mem)
                if mid is not None:
                    written.append(mid)
        for mid in written:
            if mid not in mem.live:
                continue  # forgotten later in the round
            out.acked += 1
            found = await _recall(run, a, mem.live[mid], 3)
            if not found or found[0] != mid:
                out.lost += 1
                out.violations.append(
                    f"memory {mid} written by the other server: a's recall of its text gave {found}"
                )
            stale = mem.gone.intersection(found)
            if stale:
                out.violations.append(f"a's recall returned forgotten memories {sorted(stale)}")
    await run.stop(b)
    fresh = await run.server(home, ENV, label="fresh")
    checked = sorted(mem.live)[:CHECKED]
    for mid in checked:
        text = mem.live[mid]
        truth = await _recall(run, fresh, text, 3)
        seen = await _recall(run, a, text, 5)
        missing = [m for m in truth if m not in seen]
        if missing:
            out.lost += len(missing)
            out.violations.append(
                f"recall of memory {mid}'s text: a fresh server gives {truth}, "
                f"the long-running one {seen} (missing {missing})"
            )
    out.notes.append(
        f"{rounds} rounds, {len(mem.live)} live and {len(mem.gone)} forgotten memories; "
        f"{len(checked)} compared with a fresh server"
    )
    await run.stop(fresh)
    await run.stop(a)
