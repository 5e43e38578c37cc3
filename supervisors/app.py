"""The composition root: builds the application from the features and runs its tree.

Only this module and the CLI entry (``supervisors.cli``) import ``actors``:
`default_features` lists them, `open_app` sets each up on the `AppContext`
(see ``supervisors.context``) and runs the `Component`s they return under the
root supervisor.

The root supervisor is ``rest_for_one``: a feature's actors are started before
those that depend on them (features listed later, then the transports), and a
restart of an early child restarts everything after it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from ..actors.features import ALL_FEATURES
from ..actors.store.dsn import redact
from . import faults, private, trace, trust
from .config import Config, ConfigError, log_path
from .context import AppContext, Component, Feature, FeatureDisabled, FeatureUnavailable
from .errors import UserError, find_user_error
from .supervisor import REST_FOR_ONE, ChildSpec, Escalation, Supervisor, leaves
from .threads import EXIT_SETTLE, freeze_startup, settle

if TYPE_CHECKING:
    from ..actors.stdio import StdioTransport


def default_features() -> list[Feature]:
    """The features of a full server, in supervision order."""
    return list(ALL_FEATURES)


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
    """The application context; creates the home (private) or raises `HomeError`.

    A home that someone else could change (it, or a directory above it, belongs to
    another user or is writable by others: they could replace its config, logs,
    database or runtime file) is a warning line, or `trust.LoosePermissions`
    (exit 2) under ``[serve] strict_permissions``.
    """
    prepare_home(home, home_origin)
    problem = trust.directory_problem(home)
    if problem is not None:
        remedy = (
            "others could replace its files (config, logs, store): make that directory yours "
            "and not writable by others (chmod go-w), or choose another home with --home"
        )
        trust.enforce(f"the home {home}: {problem}", remedy, strict=config.serve.strict_permissions)
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


def setup_features(app: AppContext, features: Sequence[Feature]) -> list[Component]:
    """Set each feature up on ``app``; the components of those that can run, in order."""
    ready: list[Component] = []
    for feature in features:
        try:
            component = feature.setup(app)
        except FeatureDisabled as exc:
            trace.event("app", "feature_disabled", feature=feature.name, reason=str(exc))
            app.unavailable[feature.name] = str(exc)
            continue
        except FeatureUnavailable as exc:
            trace.warning("app", "feature_unavailable", feature=feature.name, reason=str(exc))
            app.unavailable[feature.name] = str(exc)
            continue
        app.features.append(feature.name)
        ready.append(component)
    return ready


@asynccontextmanager
async def open_app(
    app: AppContext,
    features: Sequence[Feature],
    extra_children: Sequence[ChildSpec] = (),
    early: Callable[[], Awaitable[None]] | None = None,
) -> AsyncIterator[AppContext]:
    """Run the supervision tree of ``features`` (+ ``extra_children``) while the block runs.

    ``early`` (the stdio transport's `answer_early`) runs once the features are set up
    (their tools, resources and instructions known), alongside the start of the tree's
    children: it answers the client's ``initialize`` while the actors start, and the
    transport, the last child, stops it before taking the connection over.

    Error handling: a child that fails while starting, or a root escalation,
    propagates out of the block. Warnings raised while starting (a feature
    unavailable, say) reach stderr only once the tree runs: a start that fails
    is reported in one line by the caller, and the warnings are in the log.
    """
    trace.LOG.hold_stderr()
    started = False
    try:
        children: list[ChildSpec] = []
        for component in setup_features(app, features):
            children.extend(component.children())
        children.extend(extra_children)
        root = Supervisor("root", children, strategy=REST_FOR_ONE, max_restarts=5, period=10.0)
        app.root = root
        async with trio.open_nursery() as nursery:
            if early is not None:
                nursery.start_soon(early)
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


# Blocks of this size or more are always mmapped, so they go back to the system
# when freed. glibc's own threshold rises (up to 32 MiB) each time a large mmapped
# block is freed; blocks below it then come from the heap and stay in the process
# once freed: after a burst of 1 MB requests (their text, the embedder's tensors)
# the server stayed hundreds of MB larger.
MMAP_THRESHOLD = 256 * 1024
_M_MMAP_THRESHOLD = -3  # glibc <malloc.h>


def return_freed_memory() -> None:
    """Fix glibc's mmap threshold at `MMAP_THRESHOLD` (a no-op elsewhere, or when the
    user set ``MALLOC_MMAP_THRESHOLD_``)."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return  # not glibc (macOS): its allocator returns large blocks by itself
    mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def serve(
    app: AppContext,
    features: Sequence[Feature],
    transport: Callable[[], ChildSpec],
    name: str,
    after: Callable[[], Sequence[ChildSpec]] = tuple,
    early: Callable[[], Awaitable[None]] | None = None,
) -> int:
    """Run the application with ``transport()`` (then ``after()``, e.g. the attach
    endpoint of ``memtrio serve``) as its last children until the transport or a
    signal asks it to stop; the process exit code. ``early``: see `open_app`.

    Error handling: a root escalation (the tree gave up) is one line on stderr
    (kept in ``app.gave_up``) and exit code 1.
    """

    return_freed_memory()

    async def main() -> int:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_watch_signals, app)
            async with open_app(app, features, extra_children=[transport(), *after()], early=early):
                trace.event(
                    "app", "serving", transport=name, features=app.features, tools=len(app.registry)
                )
                freeze_startup()  # the features are set up: their objects stay
                await app.shutdown_requested.wait()
            nursery.cancel_scope.cancel()
        return app.exit_code

    try:
        code = trio.run(main)
    except* Escalation as group:
        failures = leaves(group)
        for exc in failures:
            trace.record("app", "gave_up", level="error", error=str(exc))
        known = find_user_error(group)
        # The one line (docs/architecture.md): the user's remedy when there is one.
        app.gave_up = redact(str(known or failures[0]))  # no password
        print(f"memtrio: {app.gave_up}", file=sys.stderr)
        code = known.code if known is not None else 1
    # Native code still running in an abandoned thread (the model loading when a client
    # left during start-up) aborts the process if the interpreter finalises under it.
    if not settle(EXIT_SETTLE):
        trace.warning("app", "threads_still_running", waited=EXIT_SETTLE)
    trace.event("app", "exit", code=code)
    trace.LOG.close()
    return code


def serve_stdio(
    app: AppContext,
    proto_in: int,
    proto_out: int,
    dashboard: Callable[[str], None] | None = None,
    serving_on: Callable[[StdioTransport], object] | None = None,
) -> int:
    """`serve` one MCP session on the protocol's descriptors (``actors.stdio.protect_stdout``):
    the embedded ``memtrio mcp``, with a dashboard whose address goes to ``dashboard``
    when given. Its transport answers ``initialize`` while the features' actors start
    (`StdioTransport.answer_early`); ``serving_on`` gets it first: if the tree fails to
    start, what the client sent meanwhile and no one answered is the caller's to answer
    (`StdioTransport.leave`)."""
    from ..actors import stdio

    after: list[ChildSpec] = []
    if dashboard is not None:
        from ..actors.ui import cli as ui_cli

        after.append(ui_cli.dashboard_child(app, dashboard))
    # One client, which may never embed: the model loads on its first embedding, not at
    # initialize (a server shared by many sessions warms it: AppContext.warm_on_initialize).
    app.warm_on_initialize = False
    transport = stdio.StdioTransport(app, proto_in, proto_out)
    if serving_on is not None:
        serving_on(transport)
    return serve(
        app,
        default_features(),
        transport.child,
        name="stdio",
        after=lambda: after,
        early=transport.answer_early,
    )


async def _watch_signals(app: AppContext) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            trace.event("app", "signal", signal=signal.Signals(signum).name)
            app.request_shutdown(0)


def early_answers(
    config: Config, home: Path, home_origin: str = ""
) -> Callable[[bytes], Awaitable[bytes | None]]:
    """What the first ``memtrio mcp`` child of a home answers its client with while the owner
    it started is not there yet (``actors.net.relay.Relay.answer_early``): a Session of this
    child's own application, every feature set up as the owner sets them up (same home,
    configuration and directory) but no actor started and no model loaded, so
    ``initialize`` and ``tools/list`` say what the owner will say."""
    from ..actors.session import Session
    from ..actors.session_state import SessionState
    from ..protocol.messages import Outbound
    from .supervisor import Mailbox

    app = build_context(config, home, home_origin=home_origin)
    setup_features(app, default_features())
    app.warm_ups.clear()  # the owner loads the model; this child never does
    outbox: Mailbox[Outbound] = Mailbox("early.outbox", 64)
    session = Session(app, SessionState(name="early.session"), outbox)

    async def answer(line: bytes) -> bytes | None:
        if b"notifications/initialized" in line:
            return b""  # noted by the relay and replayed to the owner, which acts on it
        failed = False
        try:
            await session.handle_line(line.strip())
        except Exception:  # noqa: BLE001 - not answered here: the owner answers it
            failed = True
        out = []
        while True:
            try:
                out.append(outbox.receive_channel.receive_nowait().line)
            except trio.WouldBlock:
                return None if failed else b"".join(out)

    return answer
