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

import difflib
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
_UNKNOWN = re.compile(r"^Object contains unknown field `([^`]*)`$")
_MISSING = re.compile(r"^Object missing required field `([^`]*)`$")
_EXPECTED = re.compile(r"^Expected `([^`]+)`(?P<bound>.*?)(?:, got `(?P<got>[^`]+)`)?$", re.DOTALL)
# msgspec's names of JSON types, in the words of a reader who has not read its docs.
TYPE_WORDS = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "bool": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}
# Words agents reach for that name another argument (no spelling is close): where one of
# these is unknown and its partner is accepted, the partner is the suggestion.
SYNONYMS = {
    "source": ("from", "sources"),
    "src": ("from",),
    "target": ("to", "targets"),
    "dest": ("to",),
    "destination": ("to",),
    "entity": ("name", "entities", "entity_name"),
    "entity_name": ("name",),
    "text": ("content", "query"),
    "q": ("query",),
    "type": ("memory_type", "entity_type", "relation_type"),
    "k": ("limit",),
    "top_k": ("limit",),
    "n": ("limit",),
    "depth": ("max_depth",),
    "id": ("memory_id", "ids"),
    "path": ("file", "paths"),
}


def type_words(names: str) -> str:
    """``int | null`` as ``an integer or null``."""
    return " or ".join(TYPE_WORDS.get(n.strip(), f"`{n.strip()}`") for n in names.split("|"))


def in_words(what: str, field: str, noun: str = "argument") -> str:
    """msgspec's ``what`` (``Expected `int`, got `str```) about ``field`` in words:
    ``limit: expected an integer, got a string``; a missing field names the argument."""
    missing = _MISSING.match(what)
    if missing:
        where = f"{field}: " if field else ""
        return f"{where}missing required {noun} `{missing[1]}`"
    expected = _EXPECTED.match(what)
    if expected is None:
        return f"{field}: {what}" if field else what
    said = f"expected {type_words(expected[1])}{expected['bound']}"
    if expected["got"]:
        said += f", got {type_words(expected['got'])}"
    return f"{field}: {said}" if field else said


def _unknown_field(
    unknown: str, decoded: object, path: str, name: Callable[[str], str], noun: str
) -> str:
    """``source`` is not an argument: say which are, and the one most likely meant."""
    accepted = field_names(decoded, path)
    where = f"{name(path.removeprefix('.'))}: " if path else ""
    if not accepted:
        return f"{where}unknown {noun} `{unknown}`"
    guess = [s for s in SYNONYMS.get(unknown.lower(), ()) if s in accepted]
    guess = guess or difflib.get_close_matches(unknown, accepted, n=1, cutoff=0.6)
    if not guess:
        lowered = {a.lower(): a for a in accepted}
        guess = [lowered[unknown.lower()]] if unknown.lower() in lowered else []

    def quoted(field: str) -> str:
        said = name(field) if not path else field  # a top-level field is the caller's word
        return said if said.startswith("`") else f"`{said}`"

    shown = ", ".join(quoted(a) for a in accepted)
    meant = f" (did you mean {quoted(guess[0])}?)" if guess else ""
    return f"{where}unknown {noun} `{unknown}`{meant}; accepted: {shown}"


def field_names(decoded: object, path: str) -> list[str]:
    """The names of the fields of the struct at ``path`` of ``decoded`` (in order); none
    when that can be one of several structs (a union's error does not say which)."""
    structs = [info for info in _at(decoded, path) if isinstance(info, mi.StructType)]
    return [f.encode_name for f in structs[0].fields] if len(structs) == 1 else []


def describe_validation_error(
    exc: msgspec.ValidationError,
    decoded: object = None,
    name: Callable[[str], str] = str,
    noun: str = "argument",
) -> str:
    """``exc`` in words: an enum field's error names the field and lists its values.

    ``decoded`` is the type that was decoded (a struct, a union of them); ``name``
    turns a field path (``direction``, ``relations[0].kind``) into the caller's
    word for it (the command line: its flag).
    """
    text = str(exc)
    found = _AT.match(text)
    if found is not None:
        what, path = found["what"], found["path"]
    elif decoded is not None and text.startswith(("Object contains", "Object missing")):
        what, path = text, ""  # an error of the whole object: no path
    else:
        return text
    if decoded is None:
        return in_words(what, name(path.removeprefix(".")), noun)
    unknown = _UNKNOWN.match(what)
    if unknown:
        return _unknown_field(unknown[1], decoded, path, name, noun)
    values = allowed_values(decoded, path)
    field = name(path.removeprefix("."))
    if not values:
        return in_words(what, field, noun)
    choices = ", ".join(str(v) for v in values)
    if what.startswith(_ENUM_VALUE):
        value = what.removeprefix(_ENUM_VALUE)
        shown = value if len(value) <= SHOWN else value[: SHOWN - 1] + "…"
        return f"{field}: {shown} is not one of: {choices}"
    got = _GOT.search(what)
    return f"{field}: must be one of: {choices}" + (f" (got {got[1]})" if got else f" ({what})")


def allowed_values(decoded: object, path: str) -> list[object]:
    """The values the ``Literal`` / ``Enum`` field at ``path`` (``.a[0].b``) of ``decoded``
    allows (a Literal's sorted, an Enum's in order); [] when the field is not an enum."""
    values: list[object] = []
    for info in _at(decoded, path):
        if isinstance(info, mi.LiteralType):
            values += [v for v in info.values if v not in values]
        elif isinstance(info, mi.EnumType):
            values += [m.value for m in info.cls if m.value not in values]
    return values


def _at(decoded: object, path: str) -> list[mi.Type]:
    """The types the field at ``path`` (``.a[0].b``) of ``decoded`` can have."""
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
    return infos


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
