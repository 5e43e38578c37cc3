"""What a feature and its actors are given: the application context and typed service handles.

This module is part of the runtime, like the supervisor: actors import it, and
it imports nothing from ``actors``. The composition root (``supervisors.app``)
builds one `AppContext`, asks each `Feature` to set itself up on it, and runs
the `Component`s they return under the root supervisor.

A *feature* (memory store, embedder, code index, ...) plugs into the server by
providing:

- ``setup(app)``: register tools, resources and ``initialize`` instructions on
  the `AppContext`, and return the `Component` that owns the feature's state
  (its stores, pools, mailboxes) and knows its actors. Raise
  `FeatureUnavailable` to be skipped with a warning (the server then starts
  without it), `FeatureDisabled` to be skipped quietly.

Running actors publish their client handle under a typed `ServiceKey` with
`AppContext.publish` when they are ready and withdraw it when they stop, so a
restarted actor replaces its handle and a caller of `AppContext.service` gets
either a live handle or `Unavailable`.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import trio

from ..protocol.errors import Unavailable
from ..protocol.tools import Registry, Tool
from .config import Config
from .grants import Grant
from .supervisor import ChildSpec, Supervisor

VERSION = "0.1.0"

T = TypeVar("T")


class FeatureUnavailable(Exception):
    """A feature cannot run here (bad config, missing index); the server goes on without it."""


class FeatureDisabled(FeatureUnavailable):
    """The configuration switched the feature off; noted in the log, not warned about."""


class ServiceKey(Generic[T]):
    """The typed name under which a running actor publishes its client handle.

    Each feature defines its key next to its handle type (``STORE =
    ServiceKey[Store]("store")``); whoever needs the handle imports the key, so
    the call graph is visible in the imports and the handle is typed.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"ServiceKey({self.name!r})"


class Component(Protocol):
    """What `Feature.setup` returns: the owner of a feature's state, and its actors."""

    def children(self) -> Sequence[ChildSpec]: ...


class NoActors:
    """The `Component` of a feature that only registers tools (its state lives elsewhere)."""

    def children(self) -> Sequence[ChildSpec]:
        return ()


class Feature(Protocol):
    @property
    def name(self) -> str: ...

    def setup(self, app: AppContext) -> Component: ...


class SessionView(Protocol):
    """What the application sees of a running MCP session.

    ``root`` is the session's repository (None: it has none and writes only
    ``global``); ``root_source`` says where it came from: ``cwd`` (the server's
    directory, stdio), ``initialize`` (``_meta["memtrio/root"]``), ``roots`` (the
    client's MCP roots: None until they name a Git checkout), ``none``. ``grant`` is
    what the session's token opens (None: stdio, no grant applies;
    ``supervisors.grants``).
    """

    name: str
    protocol_version: str | None
    root: Path | None
    root_source: str
    grant: Grant | None

    @property
    def in_flight(self) -> Mapping[Any, object]: ...


@dataclass(frozen=True)
class Resource:
    uri: str
    name: str
    description: str
    read: Callable[[AppContext], Awaitable[str]]
    mime_type: str = "application/json"

    def describe(self) -> dict[str, str]:
        return {
            "uri": self.uri,
            "name": self.name,
            "description": self.description,
            "mimeType": self.mime_type,
        }


@dataclass
class AppContext:
    config: Config
    home: Path
    cwd: Path
    registry: Registry = field(default_factory=Registry)
    resources: dict[str, Resource] = field(default_factory=dict)
    instructions: list[str] = field(default_factory=list)
    # Parts of the ``initialize`` instructions that depend on the session (its memory
    # scope), placed after the generic line and before `instructions`.
    session_instructions: list[Callable[[SessionView], Awaitable[str]]] = field(
        default_factory=list
    )
    features: list[str] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)  # feature -> why it did not start
    root: Supervisor | None = None
    sessions: set[SessionView] = field(default_factory=set)
    version: str = VERSION
    shutdown_requested: trio.Event = field(default_factory=trio.Event)
    exit_code: int = 0
    gave_up: str = ""  # the one line of a tree that gave up (`supervisors.app.serve`)
    # Called once, when the first client has been answered `initialize`: features warm
    # what their first call would otherwise wait for (the embedding model) without
    # delaying the server's start or that answer. Each must return at once.
    warm_ups: list[Callable[[], None]] = field(default_factory=list)
    # Whether `client_ready` runs the `warm_ups`. Yes for a server many sessions share
    # (``memtrio serve``, the owner of attached children: one load, and no session's first
    # recall waits for it); no for an embedded ``memtrio mcp``, one client that may never
    # embed, whose model then loads on its first embedding (about 160 MiB it would hold
    # for nothing otherwise; docs/recall.md, "Lazy loading").
    warm_on_initialize: bool = True
    # Extra sections of ``server_status`` (``transports``: the network listeners and
    # their connections), each a callable returning a JSON-able value.
    status_sections: dict[str, Callable[[], object]] = field(default_factory=dict)
    _services: dict[str, object] = field(default_factory=dict)
    _warmed: bool = False

    def add_tools(self, tools: Sequence[Tool]) -> None:
        enabled = set(self.config.tools.enabled) | {"core"}
        for tool in tools:
            if tool.group in enabled:
                self.registry.add(tool)

    def add_resource(self, resource: Resource) -> None:
        self.resources[resource.uri] = resource

    # -- service handles ----------------------------------------------------

    def publish(self, key: ServiceKey[T], handle: T) -> None:
        """Make ``handle`` the live handle of ``key`` (an actor that just became ready)."""
        self._services[key.name] = handle

    def withdraw(self, key: ServiceKey[T], handle: T) -> None:
        """Remove ``handle`` if it is still the published one (a newer incarnation keeps its own)."""
        if self._services.get(key.name) is handle:
            del self._services[key.name]

    def find(self, key: ServiceKey[T]) -> T | None:
        """The live handle of ``key``, or None when that actor is off or not running."""
        return self._services.get(key.name)  # type: ignore[return-value]  # published under its key: a T

    def service(self, key: ServiceKey[T]) -> T:
        """The live handle of ``key``.

        Error handling: raises `Unavailable` when the feature is off or its actor is down.
        """
        handle = self.find(key)
        if handle is None:
            raise Unavailable(
                f"the {key.name} service is not running (disabled in config, or still starting)"
            )
        return handle

    # -- lifecycle ------------------------------------------------------------

    def request_shutdown(self, code: int = 0) -> None:
        if not self.shutdown_requested.is_set():
            self.exit_code = code
            self.shutdown_requested.set()

    def client_ready(self) -> None:
        """A client is initialized: run the `warm_ups` (the first time only, and only if
        `warm_on_initialize`)."""
        if not self._warmed and self.warm_on_initialize:
            self._warmed = True
            for warm in self.warm_ups:
                warm()

    def calls_in_flight(self) -> int:
        return sum(len(s.in_flight) for s in self.sessions)


@dataclass
class CallContext:
    """What a tool handler receives as ``ctx``: the application, and the session calling
    (None when the CLI calls the handler directly)."""

    app: AppContext
    session: SessionView | None = None
    request_id: int | str | None = None


class AppRunner(Protocol):
    """Runs ``body(app)`` with the application tree started (no transport): what a CLI
    subcommand is handed by the CLI entry, so that feature code never imports the
    composition root.

    ``features`` names the features to start (default: all); ``extra_config`` is
    merged over the loaded configuration.
    """

    def __call__(
        self,
        args: argparse.Namespace,
        body: Callable[[AppContext], Awaitable[int]],
        *,
        features: Collection[str] | None = None,
        extra_config: dict[str, dict[str, Any]] | None = None,
    ) -> int: ...
