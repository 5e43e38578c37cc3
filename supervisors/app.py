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

import signal
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from ..actors.features import ALL_FEATURES
from . import faults, trace
from .config import Config, log_path
from .context import AppContext, Component, Feature, FeatureDisabled, FeatureUnavailable
from .supervisor import REST_FOR_ONE, ChildSpec, Escalation, Supervisor, leaves


def default_features() -> list[Feature]:
    """The features of a full server, in supervision order."""
    return list(ALL_FEATURES)


def build_context(config: Config, home: Path, cwd: Path | None = None) -> AppContext:
    home.mkdir(parents=True, exist_ok=True)
    return AppContext(config=config, home=home, cwd=(cwd or Path.cwd()).resolve())


def configure_observability(config: Config, home: Path) -> None:
    trace.LOG.configure(log_path(config, home), config.log.level, config.log.stderr_level)
    trace.install_logging_bridge()
    faults.configure_from_env()


def setup_features(app: AppContext, features: Sequence[Feature]) -> list[Component]:
    """Set each feature up on ``app``; the components of those that can run, in order."""
    ready: list[Component] = []
    for feature in features:
        try:
            component = feature.setup(app)
        except FeatureDisabled as exc:
            trace.event("app", "feature_disabled", feature=feature.name, reason=str(exc))
            continue
        except FeatureUnavailable as exc:
            trace.warning("app", "feature_unavailable", feature=feature.name, reason=str(exc))
            continue
        app.features.append(feature.name)
        ready.append(component)
    return ready


@asynccontextmanager
async def open_app(
    app: AppContext,
    features: Sequence[Feature],
    extra_children: Sequence[ChildSpec] = (),
) -> AsyncIterator[AppContext]:
    """Run the supervision tree of ``features`` (+ ``extra_children``) while the block runs.

    Error handling: a child that fails while starting, or a root escalation,
    propagates out of the block.
    """
    children: list[ChildSpec] = []
    for component in setup_features(app, features):
        children.extend(component.children())
    children.extend(extra_children)
    root = Supervisor("root", children, strategy=REST_FOR_ONE, max_restarts=5, period=10.0)
    app.root = root
    async with trio.open_nursery() as nursery:
        await nursery.start(root.run)
        try:
            yield app
        finally:
            with trio.CancelScope(shield=True):
                await root.stop()
            nursery.cancel_scope.cancel()


def serve(
    app: AppContext,
    features: Sequence[Feature],
    transport: Callable[[], ChildSpec],
    name: str,
) -> int:
    """Run the application with ``transport()`` as its last child until the transport or a
    signal asks it to stop; the process exit code.

    Error handling: a root escalation (the tree gave up) is one line on stderr
    and exit code 1.
    """

    async def main() -> int:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_watch_signals, app)
            async with open_app(app, features, extra_children=[transport()]):
                trace.event(
                    "app", "serving", transport=name, features=app.features, tools=len(app.registry)
                )
                await app.shutdown_requested.wait()
            nursery.cancel_scope.cancel()
        return app.exit_code

    try:
        code = trio.run(main)
    except* Escalation as group:
        for exc in leaves(group):
            trace.error("app", "gave_up", error=str(exc))
            print(f"memtrio: {exc}", file=sys.stderr)
        code = 1
    trace.event("app", "exit", code=code)
    trace.LOG.close()
    return code


async def _watch_signals(app: AppContext) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            trace.event("app", "signal", signal=signal.Signals(signum).name)
            app.request_shutdown(0)
