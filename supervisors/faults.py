"""Named fault points, switched on by ``MEMTRIO_FAULTS``.

Syntax: comma-separated ``point=action`` items, for example
``embedder.embed=raise@3,session.dispatch=delay:0.5``.

Actions:
- ``raise``: raise `InjectedFault` at every hit; ``raise@N``: only at the Nth
  hit; ``raise@N+``: at the Nth hit and after; ``raise%P``: with probability P
  (0..1, seeded by ``MEMTRIO_FAULTS_SEED``).
- ``delay:S``: sleep S seconds (async points) or block S seconds (sync points),
  with the same ``@N`` / ``@N+`` / ``%P`` selectors.
- ``hang``: never return (until cancelled).
- ``exit``: terminate the process at once (``os._exit(137)``), like ``kill -9``.

Zero cost when off: call sites test the module flag ``ACTIVE`` first::

    if faults.ACTIVE:
        await faults.hit("store.commit")
"""

from __future__ import annotations

import os
import random
import threading
import time

# trio and the trace logger are imported when a fault fires, not here: the parser
# worker processes import this module and would otherwise pay ~0.1 s of CPU at
# each start for trio (which they never use).

ACTIVE = False


class InjectedFault(RuntimeError):
    """Raised by a fault point switched on in ``MEMTRIO_FAULTS``."""


class FaultSpecError(ValueError):
    pass


class _Rule:
    __slots__ = ("point", "action", "arg", "nth", "from_nth", "prob", "hits")

    def __init__(
        self,
        point: str,
        action: str,
        arg: float,
        nth: int | None,
        from_nth: bool,
        prob: float | None,
    ) -> None:
        self.point, self.action, self.arg = point, action, arg
        self.nth, self.from_nth, self.prob = nth, from_nth, prob
        self.hits = 0

    def fires(self, rng: random.Random) -> bool:
        self.hits += 1
        if self.nth is not None:
            return self.hits >= self.nth if self.from_nth else self.hits == self.nth
        if self.prob is not None:
            return rng.random() < self.prob
        return True


_rules: dict[str, list[_Rule]] = {}
_lock = threading.Lock()
_rng = random.Random()
_hits: dict[str, int] = {}


def parse(spec: str) -> list[_Rule]:
    rules = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        point, sep, action = item.partition("=")
        if not sep or not point or not action:
            raise FaultSpecError(
                f"MEMTRIO_FAULTS item {item!r}: expected point=action (e.g. store.commit=raise@3)"
            )
        nth: int | None = None
        from_nth = False
        prob: float | None = None
        if "@" in action:
            action, _, sel = action.partition("@")
            from_nth = sel.endswith("+")
            try:
                nth = int(sel.rstrip("+"))
            except ValueError:
                raise FaultSpecError(
                    f"MEMTRIO_FAULTS item {item!r}: @N needs a whole number"
                ) from None
        elif "%" in action:
            action, _, sel = action.partition("%")
            try:
                prob = float(sel)
            except ValueError:
                raise FaultSpecError(
                    f"MEMTRIO_FAULTS item {item!r}: %P needs a probability"
                ) from None
        name, _, arg = action.partition(":")
        if name not in ("raise", "delay", "hang", "exit"):
            raise FaultSpecError(
                f"MEMTRIO_FAULTS item {item!r}: action must be raise, delay:S, hang or exit"
            )
        try:
            value = float(arg) if arg else 0.0
        except ValueError:
            raise FaultSpecError(f"MEMTRIO_FAULTS item {item!r}: delay needs seconds") from None
        rules.append(_Rule(point.strip(), name, value, nth, from_nth, prob))
    return rules


def configure(spec: str | None, seed: int | None = None) -> None:
    """Install the rules of ``spec`` (replacing any), or switch faults off."""
    global ACTIVE
    with _lock:
        _rules.clear()
        _hits.clear()
        for rule in parse(spec or ""):
            _rules.setdefault(rule.point, []).append(rule)
        if seed is not None:
            _rng.seed(seed)
        ACTIVE = bool(_rules)


def configure_from_env() -> None:
    seed = os.environ.get("MEMTRIO_FAULTS_SEED")
    configure(os.environ.get("MEMTRIO_FAULTS"), int(seed) if seed else None)


def _select(point: str) -> _Rule | None:
    with _lock:
        _hits[point] = _hits.get(point, 0) + 1
        for rule in _rules.get(point, ()):
            if rule.fires(_rng):
                return rule
    return None


def _record(point: str, rule: _Rule) -> None:
    from . import trace

    trace.event(
        "faults",
        "fault_injected",
        level="warning" if rule.action != "delay" else "info",
        point=point,
        action=rule.action,
        hit=rule.hits,
    )


def _trip(point: str) -> _Rule | None:
    """Count a hit of ``point``; raise or exit if its rule says so. The rule when it
    waits instead (``delay``, ``hang``), which the caller does its own way."""
    rule = _select(point)
    if rule is None:
        return None
    _record(point, rule)
    if rule.action == "raise":
        raise InjectedFault(f"injected fault at {point} (hit {rule.hits})")
    if rule.action == "exit":
        os._exit(137)
    return rule


async def hit(point: str) -> None:
    """An async fault point."""
    import trio

    rule = _trip(point)
    if rule is None:
        return
    if rule.action == "delay":
        await trio.sleep(rule.arg)
    elif rule.action == "hang":
        await trio.sleep_forever()


def hit_sync(point: str) -> None:
    """A fault point in synchronous code (worker threads and processes)."""
    rule = _trip(point)
    if rule is None:
        return
    if rule.action == "delay":
        time.sleep(rule.arg)
    elif rule.action == "hang":
        while True:
            time.sleep(3600)


def hits(point: str) -> int:
    return _hits.get(point, 0)
