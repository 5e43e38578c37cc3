"""The tool registry: each tool is a name, a description, a msgspec argument
struct (whose JSON Schema is the tool's ``inputSchema``), annotations and an
async handler.

A handler is ``async def handler(ctx, args) -> Result`` where ``ctx`` is the
call's ``CallContext`` (``supervisors.context``: the application and the calling
session) and ``args`` an instance of the tool's struct. It returns:

- a ``str``: plain text content, no structured content (the code tools: compact
  outlines a model reads as text);
- an instance of the tool's ``result`` struct: structured content, also rendered
  as JSON text. The struct's JSON Schema is the tool's ``outputSchema``
  (`result_schema`), so what a client validates is what the handler builds.

A failure raises a `DomainError` (``protocol.errors``); the session turns it
into a ``CallToolResult`` with ``isError: true`` carrying the message, never a
protocol error.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from .validation import describe_validation_error

Handler = Callable[[Any, Any], Awaitable[Any]]

# Tool groups let `[tools] enabled` / `--tools` choose what a server advertises.
GROUPS = ("core", "memory", "graph-read", "graph-write", "vectors", "code")


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args: type[msgspec.Struct]
    handler: Handler
    group: str = "memory"
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    title: str | None = None
    # What a grant sees of the tool (``supervisors.grants``): "write" tools are refused
    # to a read-only token. "auto": a write unless ``read_only``; "read" for a tool that
    # only keeps access bookkeeping (recall, inspect), not hinted read-only for it.
    access: Literal["auto", "read", "write"] = "auto"
    # The struct every successful call returns (None: the tool answers plain text).
    result: type[msgspec.Struct] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # Whether the store keeps text of the arguments, which are then screened for secrets
    # (``[store] secrets``, ``actors.screening``). None: every tool that writes, but those
    # that only delete (destructive ones name the rows to remove).
    keeps_text: bool | None = None

    @property
    def writes(self) -> bool:
        """Whether the tool changes what the store holds (a read-only grant may not call it)."""
        return not self.read_only if self.access == "auto" else self.access == "write"

    @property
    def screened(self) -> bool:
        """Whether the tool's arguments are screened for secrets before its handler runs."""
        if self.keeps_text is not None:
            return self.keeps_text
        return self.writes and not self.destructive

    @functools.cached_property
    def decoder(self) -> msgspec.json.Decoder:
        return msgspec.json.Decoder(self.args)

    @functools.cached_property
    def input_schema(self) -> dict[str, Any]:
        return struct_schema(self.args)

    @functools.cached_property
    def output_schema(self) -> dict[str, Any] | None:
        return result_schema(self.result) if self.result is not None else None

    def describe(self, structured: bool = True, output_schema: bool = True) -> dict[str, Any]:
        """The ``tools/list`` entry for this tool.

        ``structured``: the session's protocol revision has structured content and
        top-level titles (2025-06-18 and later); ``output_schema``: list the
        ``outputSchema`` then (``[server] output_schema``). The annotations carry only
        the hints that differ from MCP's defaults (`annotation_hints`); the title is
        top-level from 2025-06-18 on, an annotation before.
        """
        annotations: dict[str, bool | str] = {
            **annotation_hints(self.read_only, self.destructive, self.idempotent)
        }
        if self.title and not structured:
            annotations["title"] = self.title
        entry: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "annotations": annotations,
        }
        if self.title and structured:
            entry["title"] = self.title
        if structured and output_schema and self.output_schema is not None:
            entry["outputSchema"] = self.output_schema
        return entry


def annotation_hints(read_only: bool, destructive: bool, idempotent: bool) -> dict[str, bool]:
    """A tool's annotation hints, most of those equal to MCP's defaults left out:
    readOnlyHint (default false) and idempotentHint (default false, meaningful only for a
    tool that writes) only when true; destructiveHint, of a tool that writes, always (its
    default is true, but a client that reads a missing hint as false must not take a
    destructive tool for a harmless one); openWorldHint (default true) always false:
    memtrio's tools never reach outside the server."""
    hints: dict[str, bool] = {}
    if read_only:
        hints["readOnlyHint"] = True
    else:
        hints["destructiveHint"] = destructive
        if idempotent:
            hints["idempotentHint"] = True
    hints["openWorldHint"] = False
    return hints


def grouped_tool(
    group: str,
    name: str,
    title: str,
    description: str,
    args: type[msgspec.Struct],
    handler: Handler,
    result: type[msgspec.Struct],
    read_only: bool = False,
    destructive: bool = False,
    idempotent: bool = False,
    keeps_text: bool | None = None,
) -> Tool:
    """A `Tool` of ``group`` built from positional fields: what the long tool tables of the
    graph and vector features use (``functools.partial(grouped_tool, GROUP, ...)``)."""
    return Tool(
        name=name, title=title, description=description, args=args, handler=handler,
        result=result, group=group, read_only=read_only, destructive=destructive,
        idempotent=idempotent, keeps_text=keeps_text,
    )  # fmt: skip


def struct_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """Inline JSON Schema of a struct (no ``$ref`` to the root), as MCP wants.

    Every property gets a plain top-level ``type``, since simple clients (the
    MCP Inspector CLI) convert a typed-in value by it: an optional ``X | None``
    field, which msgspec declares ``anyOf: [X, null]``, is declared as ``X``
    (its constraints kept), and a string ``enum`` gets ``type: string``. An
    optional property without a ``default`` means "not given" when omitted; the
    struct still accepts an explicit ``null`` for it, as the same "not given".
    """
    schema = msgspec.json.schema(struct)
    defs = schema.pop("$defs", {})
    ref = schema.get("$ref")
    if ref:
        name = ref.rsplit("/", 1)[-1]
        root = dict(defs.pop(name))
        if defs:
            root["$defs"] = defs
        schema = root
    schema.pop("title", None)
    schema.pop("description", None)  # the struct's docstring: the tool's description says it
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    for obj in (schema, *schema.get("$defs", {}).values()):
        obj.pop("title", None)  # the struct's class name: nothing a caller fills in
        if obj.get("required") == []:
            del obj["required"]  # msgspec's empty list: absent means the same, in fewer bytes
        props = obj.get("properties", {})
        for name, prop in props.items():
            props[name] = plain_property(prop)
    return schema


def result_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """The ``outputSchema`` of a result struct: a JSON Schema whose root is the
    struct itself (``"type": "object"``, as MCP requires), nested structs in
    ``$defs`` referenced as ``#/$defs/Name``.

    Unlike `struct_schema`, nullable fields stay ``anyOf: [X, null]``: a result
    may carry a null (``nextOffset`` on the last page) and must still validate.
    """
    (root,), defs = msgspec.json.schema_components([struct], ref_template="#/$defs/{name}")
    name = root["$ref"].rsplit("/", 1)[-1]
    schema = dict(defs.pop(name))
    if defs:
        schema["$defs"] = defs
    if schema.get("type") != "object":
        raise TypeError(f"{struct.__name__}: a result must be a JSON object, not {schema}")
    return schema


def plain_property(prop: dict[str, Any]) -> dict[str, Any]:
    """``prop`` with ``anyOf: [X, null]`` flattened to ``X`` and string enums typed."""
    branches = prop.get("anyOf")
    if branches:
        non_null = [b for b in branches if b.get("type") != "null"]
        if len(non_null) == 1 and len(non_null) < len(branches):
            outer = {k: v for k, v in prop.items() if k not in ("anyOf", "default")}
            flat = {**outer, **non_null[0]}
            if prop.get("default") is not None:
                flat["default"] = prop["default"]
            prop = flat
    values = prop.get("enum", [prop["const"]] if "const" in prop else None)
    if values and "type" not in prop and all(isinstance(v, str) for v in values):
        prop = {"type": "string", **prop}
    return prop


class Registry:
    """An ordered set of tools, filtered by the enabled groups."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} registered twice")
        if tool.group not in GROUPS:
            raise ValueError(f"tool {tool.name!r} has unknown group {tool.group!r}")
        self._tools[tool.name] = tool

    def extend(self, tools: Iterable[Tool]) -> None:
        for tool in tools:
            self.add(tool)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __iter__(self):
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        return list(self._tools)


def json_type(value: object) -> str:
    """The JSON Schema type name of a decoded JSON value (``integer`` for whole numbers)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def format_validation_error(exc: msgspec.ValidationError, args: object = None) -> str:
    """msgspec says ``Expected `int`, got `str` - at `$.limit` ``; keep the path. An enum
    field of ``args`` (the struct decoded) is named with its allowed values
    (``direction: 'out' is not one of: both, incoming, outgoing``)."""
    return f"Invalid arguments: {describe_validation_error(exc, args)}"
