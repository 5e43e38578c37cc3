"""msgspec's validation errors in words a caller can act on.

msgspec says ``Invalid enum value 'out' - at `$.direction``` and never what the
allowed values are. `describe_validation_error` finds the field the path names
in the struct that was decoded (its ``Literal`` or ``Enum`` annotation, through
``Annotated``, optional, list and nested structs) and says
``direction: 'out' is not one of: both, incoming, outgoing``; an error on any
other field keeps msgspec's text, path included. Every tool's arguments go
through it (``actors.tool_calls``), and so do the command line's and the
dashboard's.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import cast

import msgspec
import msgspec.inspect as mi

_AT = re.compile(r"^(?P<what>.*) - at `\$(?P<path>[^`]*)`$", re.DOTALL)
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")
_ENUM_VALUE = "Invalid enum value "
_GOT = re.compile(r"got (`[^`]+`)")
SHOWN = 80  # characters of a refused value repeated in the message


def describe_validation_error(
    exc: msgspec.ValidationError,
    decoded: object = None,
    name: Callable[[str], str] = str,
) -> str:
    """``exc`` in words: an enum field's error names the field and lists its values.

    ``decoded`` is the type that was decoded (a struct, a union of them); ``name``
    turns a field path (``direction``, ``relations[0].kind``) into the caller's
    word for it (the command line: its flag).
    """
    text = str(exc)
    found = _AT.match(text)
    if decoded is None or found is None:
        return text
    path = found["path"]
    values = allowed_values(decoded, path)
    if not values:
        return text
    field = name(path.removeprefix("."))
    choices = ", ".join(str(v) for v in values)
    what = found["what"]
    if what.startswith(_ENUM_VALUE):
        value = what.removeprefix(_ENUM_VALUE)
        shown = value if len(value) <= SHOWN else value[: SHOWN - 1] + "…"
        return f"{field}: {shown} is not one of: {choices}"
    got = _GOT.search(what)
    return f"{field}: must be one of: {choices}" + (f" (got {got[1]})" if got else f" ({what})")


def allowed_values(decoded: object, path: str) -> list[object]:
    """The values the ``Literal`` / ``Enum`` field at ``path`` (``.a[0].b``) of ``decoded``
    allows (a Literal's sorted, an Enum's in order); [] when the field is not an enum."""
    infos = _flat([mi.type_info(cast(type, decoded))])  # a struct, or a union of them
    for key, index in _STEP.findall(path):
        step: list[mi.Type] = []
        for info in infos:
            if key and isinstance(info, mi.StructType):
                step += [f.type for f in info.fields if f.encode_name == key]
            elif key and isinstance(info, mi.DictType):
                step.append(info.value_type)
            elif index and isinstance(
                info, mi.ListType | mi.SetType | mi.FrozenSetType | mi.VarTupleType
            ):
                step.append(info.item_type)
        infos = _flat(step)
    values: list[object] = []
    for info in infos:
        if isinstance(info, mi.LiteralType):
            values += [v for v in info.values if v not in values]
        elif isinstance(info, mi.EnumType):
            values += [m.value for m in info.cls if m.value not in values]
    return values


def _flat(infos: Iterable[mi.Type]) -> list[mi.Type]:
    """``infos`` without their metadata wrappers, unions spread into their members."""
    out: list[mi.Type] = []
    for info in infos:
        while isinstance(info, mi.Metadata):
            info = info.type
        if isinstance(info, mi.UnionType):
            out += _flat(info.types)
        else:
            out.append(info)
    return out
