"""Secrets kept out of what is written: a value screened by the ``[store] secrets`` mode.

`screen` walks a value a write is about to store (a tool's argument struct, an import
record, a plain string) and, for every string in it that holds a secret
(`secrets.find_secrets`):

- ``refuse``: raises `SecretRefused`, naming where each secret is (the argument path, the
  import line's field) and describing it without repeating it (`secrets.Finding.shown`);
- ``redact``: returns the value with each secret replaced by its marker
  (``[REDACTED:github-token]``), and one warning per string changed;
- ``allow``: returns the value as it is.

Pure: the callers (``actors.screening`` for tools, the importers) choose the mode and
report the warnings.
"""

from __future__ import annotations

import functools
from typing import TypeVar, cast

import msgspec

from .errors import BadArgument
from .secrets import MARKER, SecretsMode, find_secrets, redact

T = TypeVar("T")
MAX_LISTED = 5  # secrets a refusal names; the rest are counted
MAX_DEPTH = 64  # nesting walked (arguments are bounded by their schemas anyway)


class SecretRefused(BadArgument):
    """A write held a secret and ``[store] secrets`` is ``refuse``: nothing was stored."""

    kind = "secret"


def _path(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


class _Walk:
    def __init__(self, mode: SecretsMode, skip: frozenset[str], prefix: str) -> None:
        self.mode = mode
        self.skip = skip
        self.prefix = prefix
        self.found: list[str] = []  # refuse: every secret; redact: the warnings

    def text(self, value: str, where: str) -> str:
        findings = find_secrets(value)
        if not findings:
            return value
        label = ": ".join(part for part in (self.prefix, where) if part) or "the text"
        if self.mode == "refuse":
            self.found += [f"{label}: {f.shown(value)}" for f in findings]
            return value
        replaced = ", ".join(f"{f.shown(value)} by {MARKER.format(kind=f.kind)}" for f in findings)
        self.found.append(f"{label}: a secret was replaced: {replaced}")
        return redact(value, findings)

    def value(self, value: object, where: str, depth: int = 0) -> object:
        if isinstance(value, str):
            return self.text(value, where)
        if depth >= MAX_DEPTH:
            return value
        if isinstance(value, msgspec.Struct):
            return self.struct(value, where, depth)
        if isinstance(value, list | tuple):
            items = [self.value(v, _path(where, i), depth + 1) for i, v in enumerate(value)]
            changed = any(a is not b for a, b in zip(items, value, strict=True))
            return (type(value)(items) if isinstance(value, tuple) else items) if changed else value
        if isinstance(value, dict):
            pairs = [
                (
                    self.value(k, _path(where, str(k)), depth + 1),
                    self.value(v, _path(where, str(k)), depth + 1),
                )
                for k, v in value.items()
            ]
            changed = any(
                k is not k0 or v is not v0
                for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True)
            )
            return dict(pairs) if changed else value
        return value

    def struct(self, value: msgspec.Struct, where: str, depth: int) -> msgspec.Struct:
        changes: dict[str, object] = {}
        for name, encode_name in _fields(type(value)):
            if name in self.skip:
                continue
            old = getattr(value, name)
            new = self.value(old, _path(where, encode_name), depth + 1)
            if new is not old:
                changes[name] = new
        return msgspec.structs.replace(value, **changes) if changes else value


@functools.cache
def _fields(cls: type[msgspec.Struct]) -> tuple[tuple[str, str], ...]:
    """Each field of ``cls``: its name and the name it has on the wire. Once per type:
    `msgspec.structs.fields` evaluates the type's annotations at every call (0.4-0.6 ms
    for an argument struct, paid per entity of a ``create_entities`` call)."""
    return tuple((f.name, f.encode_name) for f in msgspec.structs.fields(cls))


def screen(
    value: T, mode: SecretsMode, where: str = "", skip: frozenset[str] = frozenset()
) -> tuple[T, list[str]]:
    """``value`` as ``mode`` lets it be stored, and the warnings to report (see the module).

    ``where`` comes before the paths named (an import's ``line 12: content``); fields in ``skip``
    are left as they are (binary payloads such as an export's base64 vectors).
    Error handling: ``refuse`` raises `SecretRefused` when a string holds a secret.
    """
    if mode == "allow":
        return value, []
    walk = _Walk(mode, skip, where)
    screened = walk.value(value, "")
    if mode == "refuse" and walk.found:
        listed = "; ".join(walk.found[:MAX_LISTED])
        more = f" (and {len(walk.found) - MAX_LISTED} more)" if len(walk.found) > MAX_LISTED else ""
        verb = "looks like a secret" if len(walk.found) == 1 else "look like secrets"
        raise SecretRefused(
            f'refused: {listed}{more} {verb}, and [store] secrets is "refuse": '
            "nothing was stored; remove the secret (keep it in a secret manager and write "
            'where it is), or set secrets to "redact" to store it replaced by a marker'
        )
    return cast(T, screened), walk.found  # the walk rebuilds each value with its own type
