"""The ``[hooks]`` section of the configuration: the agent-lifecycle hooks (docs/hooks.md),
``memtrio hook`` and ``memtrio context``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec


class HooksConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    context_tokens: int = 1500  # session start: the budget of memtrio context (chars/4)
    prompt_tokens: int = 600  # prompt time: the budget of the memories injected
    # Prompt time: the share of a prompt's words the best memory must hold to be injected
    # (chosen on faq-notes-dev: docs/hooks.md, "Prompt-time threshold").
    prompt_threshold: float = 0.4
    timeout: float = 5.0  # seconds a hook may take; then it prints nothing and exits 0
    digest: bool = False  # pre-compact and session-end store a digest of the session


# The limits of each key (see config._CHECKS).
CHECKS: dict[tuple[str, str], tuple[Callable[[Any], bool], str]] = {
    ("hooks", "context_tokens"): (lambda v: 1 <= v <= 1_000_000, "must be 1-1000000"),
    ("hooks", "prompt_tokens"): (lambda v: 1 <= v <= 1_000_000, "must be 1-1000000"),
    ("hooks", "prompt_threshold"): (lambda v: 0 <= v <= 1, "must be 0-1"),
    ("hooks", "timeout"): (lambda v: 0 < v <= 600, "must be > 0 and at most 600 seconds"),
}
