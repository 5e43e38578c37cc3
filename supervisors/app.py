"""The application: its context, its features and its supervision tree.

A *feature* (memory store, embedder, code index, ...) plugs into the server by
providing, before the tree starts:

- ``setup(app)``: register tools, resources and ``initialize`` instructions on
  the `AppContext`; raise `FeatureUnavailable` to be skipped with a warning
  (the server then starts without it);
- ``children(app)``: the `ChildSpec`s of its actors, placed in the root
  supervisor in feature order, before the transports.

The root supervisor is ``rest_for_one``: a feature's actors are started before
those that depend on them (features listed later, then the transports), and a
restart of an early child restarts everything after it.

Running actors publish the handles tools use on ``app.services`` (for example
``app.services["store"]``) from their start function, so a restarted actor
replaces its handle.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import trio

from ..protocol.tools import Registry, Tool
from . import faults, private, trace
from .config import Config, ConfigError, log_path
from .errors import UserError
from .supervisor import REST_FOR_ONE, ChildSpec, Supervisor

VERSION = "0.1.0"


class FeatureUnavailable(Exception):
    """A feature cannot run here (bad config, missing index); the server goes on without it."""


class FeatureDisabled(FeatureUnavailable):
    """The configuration switched the feature off; noted in the log, not warned about."""


@dataclass(frozen=True)
class Resource:
    uri: str
    name: str
    description: str
    read: Callable[[AppContext], Awaitable[str]]
    mime_type: str = "application/json"

    def describe(self) -> dict[str, Any]:
        return {
            "uri": self.uri,
            "name": self.name,
            "description": self.description,
            "mimeType": self.mime_type,
        }


class Feature(Protocol):
    name: str

    def setup(self, app: AppContext) -> None: ...

    def children(self, app: AppContext) -> Sequence[ChildSpec]: ...


@dataclass
class AppContext:
    config: Config
    home: Path
    cwd: Path
    registry: Registry = field(default_factory=Registry)
    resources: dict[str, Resource] = field(default_factory=dict)
    instructions: list[str] = field(default_factory=list)
    services: dict[str, Any] = field(default_factory=dict)
    features: list[str] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)  # feature -> why it did not start
    root: Supervisor | None = None
    sessions: set[Any] = field(default_factory=set)
    version: str = VERSION
    shutdown_requested: trio.Event = field(default_factory=trio.Event)
    exit_code: int = 0

    def add_tools(self, tools: Sequence[Tool]) -> None:
        enabled = set(self.config.tools.enabled) | {"core"}
        for tool in tools:
            if tool.group in enabled:
                self.registry.add(tool)

    def add_resource(self, resource: Resource) -> None:
        self.resources[resource.uri] = resource

    def service(self, name: str) -> Any:
        """A running actor's handle; a clear error if that feature is off or down."""
        try:
            return self.services[name]
        except KeyError:
            from ..protocol.tools import ToolError

            raise ToolError(
                f"the {name} service is not running (disabled in config, or still starting)"
            ) from None

    def request_shutdown(self, code: int = 0) -> None:
        if not self.shutdown_requested.is_set():
            self.exit_code = code
            self.shutdown_requested.set()

    def calls_in_flight(self) -> int:
        return sum(len(getattr(s, "in_flight", ())) for s in self.sessions)


def default_features() -> list[Feature]:
    """The features of a full server, in supervision order."""
    from ..actors import features

    return features.all_features()


class HomeError(UserError):
    """The home (data directory) cannot be created or used; the message says what to do."""


_CHOOSE = "choose another home with --home or MEMTRIO_HOME"


def prepare_home(home: Path, origin: str = "") -> None:
    """Create the home private (``0700``) if it is missing; check that memtrio can use it.

    ``origin`` says where the path came from (``--home``, ``MEMTRIO_HOME``) for
    the message. An existing home keeps its permissions (``memtrio doctor``
    reports loose ones).

    Error handling: raises `HomeError` (one line: what is wrong, what to do)
    when the home is a file, lies under a file, cannot be created, or is not
    writable (permissions, a read-only file system).
    """
    named = f"the home {home}" + (f" (from {origin})" if origin else "")
    if os.path.lexists(home) and not home.is_dir():
        if os.path.islink(home):
            raise HomeError(
                f"{named} is a symbolic link to {os.readlink(home)}, which is not a directory; "
                f"fix the link or {_CHOOSE}"
            )
        raise HomeError(f"{named} is a file, not a directory; move it away or {_CHOOSE}")
    try:
        private.make_dir(home)
    except OSError as exc:
        blocker = _file_above(home)
        if blocker is not None:
            raise HomeError(
                f"cannot create {named}: {blocker} is a file, not a directory; {_CHOOSE}"
            ) from None
        raise HomeError(f"cannot create {named}: {_reason(exc, home)}; {_CHOOSE}") from None
    if not os.access(home, os.R_OK | os.W_OK | os.X_OK):
        raise HomeError(f"{named} is not writable: {_reason(None, home)}; {_CHOOSE}")


def _file_above(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` when it is not a directory."""
    for parent in path.parents:
        if os.path.lexists(parent):
            return None if parent.is_dir() else parent
    return None


def _reason(exc: OSError | None, path: Path) -> str:
    """Why ``path`` cannot be written, in words (a read-only disk is named as such)."""
    with contextlib.suppress(OSError):
        existing = next(p for p in (path, *path.parents) if os.path.exists(p))
        if os.statvfs(existing).f_flag & os.ST_RDONLY:
            return "the file system is read-only"
    if exc is not None and exc.strerror:
        return exc.strerror[0].lower() + exc.strerror[1:]
    return "permission denied"


def build_context(
    config: Config, home: Path, cwd: Path | None = None, home_origin: str = ""
) -> AppContext:
    """The application context; creates the home (private) or raises `HomeError`."""
    prepare_home(home, home_origin)
    return AppContext(config=config, home=home, cwd=(cwd or Path.cwd()).resolve())


def configure_observability(config: Config, home: Path) -> None:
    """Open the trace log (a private file), bridge `logging`, arm ``MEMTRIO_FAULTS``.

    Error handling: a bad ``MEMTRIO_FAULTS`` or ``MEMTRIO_FAULTS_SEED`` raises
    `ConfigError` naming the variable.
    """
    trace.LOG.configure(log_path(config, home), config.log.level, config.log.stderr_level)
    trace.install_logging_bridge()
    seed = os.environ.get("MEMTRIO_FAULTS_SEED", "")
    try:
        faults.configure(os.environ.get("MEMTRIO_FAULTS"), int(seed) if seed.strip() else None)
    except faults.FaultSpecError as exc:
        raise ConfigError(f"{exc} (environment)") from None
    except ValueError:
        raise ConfigError(
            f"MEMTRIO_FAULTS_SEED={seed!r} (environment) must be a whole number"
        ) from None


def setup_features(app: AppContext, features: Sequence[Feature]) -> list[Feature]:
    ready = []
    for feature in features:
        try:
            feature.setup(app)
        except FeatureDisabled as exc:
            trace.event("app", "feature_disabled", feature=feature.name, reason=str(exc))
            continue
        except FeatureUnavailable as exc:
            trace.warning("app", "feature_unavailable", feature=feature.name, reason=str(exc))
            app.unavailable[feature.name] = str(exc)
            continue
        app.features.append(feature.name)
        ready.append(feature)
    return ready


@asynccontextmanager
async def open_app(
    app: AppContext,
    features: Sequence[Feature],
    extra_children: Sequence[ChildSpec] = (),
) -> AsyncIterator[AppContext]:
    """Run the supervision tree of ``features`` (+ ``extra_children``) while the block runs.

    Error handling: a child that fails while starting, or a root escalation,
    propagates out of the block. Warnings raised while starting (a feature
    unavailable, say) reach stderr only once the tree runs: a start that fails
    is reported in one line by the caller, and the warnings are in the log.
    """
    trace.LOG.hold_stderr()
    started = False
    try:
        ready = setup_features(app, features)
        children: list[ChildSpec] = []
        for feature in ready:
            children.extend(feature.children(app))
        children.extend(extra_children)
        root = Supervisor("root", children, strategy=REST_FOR_ONE, max_restarts=5, period=10.0)
        app.root = root
        async with trio.open_nursery() as nursery:
            await nursery.start(root.run)
            started = True
            trace.LOG.release_stderr(show=True)
            try:
                yield app
            finally:
                with trio.CancelScope(shield=True):
                    await root.stop()
                nursery.cancel_scope.cancel()
    finally:
        if not started:
            trace.LOG.release_stderr(show=False)
