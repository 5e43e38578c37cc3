"""The ``memtrio`` command line: the CLI entry, part of the composition root.

It may import ``actors``. Subcommands come from this module (``mcp``) and from
the feature modules in `COMMAND_MODULES`; each of those exposes
``register(subparsers)`` that adds its parsers with
``set_defaults(func=handler)``, where ``handler(args, run) -> int`` and ``run``
is `run_with_app` (an `AppRunner`, see ``supervisors.context``).

Errors exit non-zero with one clear line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import sys
import traceback
from collections.abc import Awaitable, Callable, Collection, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from ..actors.net import serving
from ..actors.store import backends, dsn
from . import environment, trace
from .app import (
    build_context,
    configure_observability,
    default_features,
    open_app,
    serve,
    serve_stdio,
)
from .commands import (
    Parser,
    add_common,
    add_ranking_options,
    add_store_options,
    add_vector_options,
    home_origin,
    load_config,
    ranking_overrides,
    store_overrides,
    vector_overrides,
)
from .context import VERSION, AppContext, AppRunner
from .errors import find_user_error, one_line
from .hoist import hoist_options
from .supervisor import ChildSpec, Escalation, first_leaf
from .threads import EXIT_SETTLE, freeze_startup, settle

if TYPE_CHECKING:
    from ..actors.stdio import StdioTransport

# Feature modules that add subcommands (each has register(subparsers)), with the commands
# each adds. Only the module of the command being run is imported, so one command never
# loads another's modules (``memtrio mcp`` loads no dashboard, ``memtrio stats`` no
# chaos harness); no command or an unknown one (``--help``, a typo) registers them all.
# tests/test_lean_startup.py checks that these names are the ones each module registers.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "..actors.memory.cli": (
        "remember",
        "list",
        "show",
        "search",
        "graph",
        "forget",
        "flush",
        "scopes",
        "stats",
        "doctor",
        "export",
        "import",
        "migrate",
        "stale",
    ),
    "..actors.embedder.cli": ("reembed",),
    "..actors.code.cli": ("code",),
    "..actors.chaos.cli": ("chaos", "trace"),
    "..actors.ui.cli": ("ui",),
    "..actors.hooks.cli": ("context", "hook", "install"),
}
OWN_COMMANDS = ("mcp", "serve")  # this module's
COMMANDS = tuple(c for names in COMMAND_MODULES.values() for c in names)


def start(
    args: argparse.Namespace, extra_config: dict[str, dict[str, Any]] | None = None
) -> AppContext:
    """Configuration, home (created private, checked usable), trace log: the app to run.

    Error handling: `ConfigError` (exit 2) or `HomeError` (exit 1), one line each.
    """
    cfg, home = load_config(args, extra_config)
    # No log line or message shows the store URL's passwords from now on.
    backends.load(cfg.store.url).register_secrets()
    app = build_context(cfg, home, home_origin=home_origin(args))
    configure_observability(cfg, home)
    for name, closest in getattr(args, "unknown_env", ())[: environment.MAX_WARNINGS]:
        trace.record(
            "config",
            "unknown_environment_variable",
            "warning",
            variable=environment.shown(name),
            closest=closest,
        )
    return app


def run_with_app(
    args: argparse.Namespace,
    body: Callable[[AppContext], Awaitable[int]],
    *,
    features: Collection[str] | None = None,
    extra_config: dict[str, dict[str, Any]] | None = None,
) -> int:
    """Start the application tree (no transport), run ``body(app)``, stop the tree.

    ``features`` names the features to start (default: all of them). This is the
    `AppRunner` every subcommand is handed.

    The command reports its own errors in one line, so actor warnings go to the
    log file only (unless ``MEMTRIO_LOG_STDERR_LEVEL`` says otherwise).

    Error handling: a `UserError` raised by ``body`` or behind a supervisor's
    escalation (a damaged database, say) is raised as itself, out of the
    exception groups of the tree.
    """
    quiet: dict[str, dict[str, Any]] = (
        {} if os.environ.get("MEMTRIO_LOG_STDERR_LEVEL") else {"log": {"stderr_level": "error"}}
    )
    for section, values in (extra_config or {}).items():
        quiet.setdefault(section, {}).update(values)
    app = start(args, quiet)

    async def main() -> int:
        chosen = [f for f in default_features() if features is None or f.name in features]
        async with open_app(app, chosen):
            return await body(app)

    try:
        return trio.run(main)
    except (Escalation, BaseExceptionGroup) as exc:
        known = find_user_error(exc)
        if known is not None:
            raise known from None
        raise
    finally:
        settle(EXIT_SETTLE)  # see supervisors/threads.py


def cmd_mcp(args: argparse.Namespace, run: AppRunner) -> int:
    """Serve MCP over stdio (``run`` is unused: the transport is the root's last child).

    ``MEMTRIO_TRANSPORT`` selects another transport (http, tcp, ws): the command
    then serves like ``memtrio serve``; an unknown value exits 2.

    Otherwise, by ``[serve] attach`` (the attach model, ``actors.net.attach``):
    ``auto`` relays to the owner of the home, the ``memtrio serve`` that the first
    child starts when none runs; ``existing`` relays only to a running one;
    ``off`` (or ``--no-attach``, or a flag that configures this server's own
    features) serves embedded. Attached, no feature is loaded here.
    """
    from ..actors import stdio

    chosen = serving.env_transport()
    if chosen is not None and chosen != "stdio":
        return serve_network(args, chosen)
    # Flags that configure this server's own features: attaching would ignore them.
    own = (
        args.tools
        or args.store
        or args.memory_file
        or vector_overrides(args)
        or store_overrides(args)
        or ranking_overrides(args)
    )
    if args.no_attach or own:
        proto_in, proto_out = stdio.protect_stdout()
        if args.answer_failures:
            limit = load_config(args)[0].server.request_limit
            return _serve_or_refuse(args, proto_in, proto_out, limit)
        return _serve_stdio(args, proto_in, proto_out)
    cfg, home = load_config(args)
    ui = serving.mcp_ui_requested(args)
    proto_in, proto_out = stdio.protect_stdout()
    # A store file of its own (MEMTRIO_STORE_FILE, MEMORY_FILE_PATH): the owner may serve another.
    if cfg.serve.attach != "off" and not cfg.store.file:
        # The attach relay's modules: only a child that attaches needs them.
        from ..actors.net import attach, spawn
        from .app import HomeError, early_answers, prepare_home

        limit = cfg.server.request_limit
        try:
            prepare_home(home, home_origin(args))
        except HomeError as exc:  # the one line; the client gets it as its answers
            print(f"memtrio: {exc}", file=sys.stderr, flush=True)
            attach.refuse(proto_in, proto_out, limit, str(exc))
            return exc.code
        root = Path.cwd().resolve()
        code = attach.attach(
            home,
            root,
            proto_in,
            proto_out,
            cfg.server.request_limit,
            mode=cfg.serve.attach,
            launch=spawn.Launch(home, root, ui=ui, log_level=args.log_level),
            ui=ui,
            early=partial(early_answers, cfg, home, home_origin(args)),
        )
        if code is not None:
            return code
        return _serve_or_refuse(args, proto_in, proto_out, limit)
    return _serve_stdio(args, proto_in, proto_out)


def _serve_or_refuse(args: argparse.Namespace, proto_in: int, proto_out: int, limit: int) -> int:
    """The embedded server of a ``memtrio mcp`` that attaches by default and has no owner to
    attach to (or that such a child started to relay to: ``--answer-failures``). If it
    cannot start either (a newer or damaged store, a full disk, ...), its one line on
    stderr, and every request of the client answered with it until EOF
    (``actors.net.attach.refuse``), those read while it started first (answered early,
    ``initialize`` was not: `StdioTransport.leave`): the client learns why at once."""
    from ..actors.net import attach

    keep_in, keep_out = os.dup(proto_in), os.dup(proto_out)
    started: list[StdioTransport] = []
    try:
        code = _serve_stdio(args, proto_in, proto_out, started.append)
        line = started[0].early.app.gave_up
    except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - every failure: one line
        code, line = report_line(exc, "mcp")
    # None: nothing read yet, or the transport's actors took the connection over.
    unanswered = started[0].leave() if started else None
    if line and code in (1, 2) and (unanswered is not None or not started):
        attach.refuse(keep_in, keep_out, limit, line, unanswered)
        return code
    os.close(keep_in)
    os.close(keep_out)
    return code


def _serve_stdio(
    args: argparse.Namespace,
    proto_in: int,
    proto_out: int,
    serving_on: Callable[[StdioTransport], object] | None = None,
) -> int:
    """The embedded server: every feature in this process, one session on stdio
    (attach skipped: ``--no-attach``, ``[serve] attach = "off"``, ``--tools`` of its
    own, or no owner to attach to), with the dashboard under ``--ui``: `serve_stdio`."""
    app = start(args)
    ui = partial(_say_dashboard, "memtrio") if serving.mcp_ui_requested(args) else None
    return serve_stdio(app, proto_in, proto_out, ui, serving_on)


def _say_dashboard(who: str, url: str) -> None:
    print(f"{who}: dashboard at {url}", file=sys.stderr, flush=True)


def cmd_serve(args: argparse.Namespace, run: AppRunner) -> int:
    """One long-lived server for many agents, on http, tcp or ws (docs/transports.md).

    Prints ``memtrio serve: listening on <url> (pid N)`` on stderr once bound,
    serves until SIGINT/SIGTERM (or ``--idle-exit`` seconds without a session),
    then lets running calls finish (``[server] shutdown_grace``) and exits 0.
    ``--owner``: the owner a ``memtrio mcp`` child starts (`serve_owner`).
    ``--detach``: start it in the background and return once it is ready
    (``actors.net.detach``); ``--stop``: stop the one running.

    Error handling: unsafe or unusable listener settings exit 2 with one line
    (``serving.listen_from_args``); an address that cannot be bound exits 1.
    """
    if args.stop:
        from ..actors.net.detach import stop_serve

        return stop_serve(args)
    if args.detach:
        from ..actors.net.detach import serve_detached

        return serve_detached(args)
    if args.owner:
        return serve_owner(args)
    return serve_network(args, args.transport or serving.env_transport())


def serve_network(args: argparse.Namespace, transport: str | None) -> int:
    """Run the application with the listener of ``transport`` (None: ``[serve] transport``),
    and after it the attach endpoint of ``memtrio mcp`` children (``actors.net.owner``)."""
    from ..actors.net import owner
    from ..actors.net.connections import Connections
    from ..actors.ui import cli as ui_cli

    app = start(args)
    listen = serving.listen_from_args(app.config, args, transport)
    connections = Connections(listen.max_connections)
    announce = serving.announcer(listen)
    public: list[str] = []
    dashboards: list[str] = []
    ui = ui_cli.dashboard(app, listen) if serving.ui_requested(args) else None
    idle = getattr(args, "idle_exit", None)

    def listening(host: str, port: int) -> None:
        public.append(listen.url(port))
        announce(host, port)
        if ui is not None:
            url = ui_cli.dashboard_url(listen, port, ui)
            dashboards.append(url)
            print(f"memtrio serve: dashboard at {url}", file=sys.stderr, flush=True)

    def after() -> list[ChildSpec]:
        # The runtime file names the dashboard too: `memtrio serve --ui --detach` prints it
        # from there, and `memtrio mcp --ui` children show it.
        children = owner.attach_children(
            app,
            connections,
            lambda: public[-1] if public else "",
            lambda: dashboards[-1] if dashboards else "",
        )
        if idle:
            children.append(owner.idle_exit_child(app, connections, idle))
        return children

    return serve(
        app,
        default_features(),
        lambda: serving.network_listener(app, listen, connections, listening, ui),
        name=listen.transport,
        after=after,
    )


def serve_owner(args: argparse.Namespace) -> int:
    """``memtrio serve --owner``: the owner of the home that a ``memtrio mcp`` child starts
    (``actors.net.spawn``). No public listener: the attach endpoint only (and, with
    ``--ui``, the dashboard on a free loopback port, its URL in the runtime file);
    it exits 0 after ``--idle-exit`` (default ``[serve] idle_exit``) seconds without
    a session."""
    from ..actors.net import owner
    from ..actors.net.connections import Connections
    from ..actors.ui import cli as ui_cli

    app = start(args)
    connections = Connections(app.config.serve.max_connections)
    idle = args.idle_exit if args.idle_exit is not None else app.config.serve.idle_exit
    dashboards: list[str] = []

    def on_dashboard(url: str) -> None:
        dashboards.append(url)
        _say_dashboard("memtrio serve", url)

    children: list[ChildSpec] = []
    if args.ui:
        children.append(ui_cli.dashboard_child(app, on_dashboard))
    children += owner.attach_children(
        app, connections, ui_url=lambda: dashboards[-1] if dashboards else ""
    )
    if idle:
        children.append(owner.idle_exit_child(app, connections, idle))
    print(
        f"memtrio serve: the owner of {app.home} for memtrio mcp children (pid {os.getpid()}"
        + (f", exits after {idle:g} s without a session)" if idle else ")"),
        file=sys.stderr,
        flush=True,
    )
    return serve(
        app, default_features(), lambda: children[0], name="owner", after=lambda: children[1:]
    )


def _idle_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value <= 7 * 86400:
        raise argparse.ArgumentTypeError("must be 0-604800 seconds (0 = never)")
    return value


def command_of(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` runs: its first word, unless that is an option (``-h``,
    ``--version``: the full parser answers those)."""
    return argv[0] if argv and not argv[0].startswith("-") else None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand, or (``command``) of that one and the built-in ones
    only, when a known module adds it (see `COMMAND_MODULES`)."""
    known = OWN_COMMANDS + tuple(c for names in COMMAND_MODULES.values() for c in names)
    if command not in known:
        command = None
    parser = Parser(
        prog="memtrio",
        description="Local memory and code navigation for coding agents, over MCP.",
    )
    parser.add_argument("--version", action="version", version=f"memtrio {VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    mcp = sub.add_parser("mcp", help="serve MCP over stdio (what an agent launches)")
    add_common(mcp)
    mcp.add_argument(
        "--tools",
        type=lambda s: [p.strip() for p in s.split(",") if p.strip()],
        help="comma-separated tool groups to advertise (memory, graph-read, graph-write, vectors, code)",
    )
    mcp.add_argument(
        "--no-attach",
        action="store_true",
        help="serve embedded: neither attach to the home's memtrio serve nor start one "
        '([serve] attach = "off")',
    )
    mcp.add_argument(
        "--ui",
        action="store_true",
        help="the owner binds the web dashboard (or MEMTRIO_MCP_UI=1); its URL, with a "
        "per-launch token, is printed once on stderr",
    )
    # Internal: the embedded server a `memtrio mcp` child relays to when it could start no
    # owner (actors.net.spawn.embedded) answers its requests with its failure, not silence.
    mcp.add_argument("--answer-failures", action="store_true", help=argparse.SUPPRESS)
    add_vector_options(mcp)
    add_store_options(mcp)
    add_ranking_options(mcp)
    mcp.set_defaults(func=cmd_mcp)
    serve_parser = sub.add_parser(
        "serve", help="one long-lived server for many agents (http, tcp or ws)"
    )
    add_common(serve_parser)
    serving.add_serve_options(serve_parser)
    serve_parser.add_argument(
        "--owner",
        action="store_true",
        help="serve as the owner of the home that memtrio mcp starts: the attach endpoint "
        "only (no --transport listener), exits after [serve] idle_exit without a session",
    )
    serve_parser.add_argument(
        "--detach",
        action="store_true",
        help="start the server in the background and return once it is ready (memtrio mcp "
        "then attaches to it), printing its URL and pid; its log: logs/serve.log in the home",
    )
    serve_parser.add_argument(
        "--stop",
        action="store_true",
        help="stop the memtrio serve of the home (the pid in run/serve.json) as SIGTERM does, "
        "and wait until it has exited",
    )
    serve_parser.add_argument("--detached", action="store_true", help=argparse.SUPPRESS)
    serve_parser.add_argument(
        "--idle-exit",
        metavar="SECONDS",
        type=_idle_seconds,
        help="exit after this many seconds without a session (0 = never; default: never, "
        "--owner: [serve] idle_exit, 600)",
    )
    add_vector_options(serve_parser)
    add_store_options(serve_parser)
    add_ranking_options(serve_parser)
    serve_parser.set_defaults(func=cmd_serve)
    for name, commands in COMMAND_MODULES.items():
        if command is None or command in commands:
            importlib.import_module(name, __package__).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every failure ends as one line on stderr and an exit code. The umask
    is ``077`` while it runs (memtrio's own files are private anyway: `private`); run as a
    program (``argv`` None), it freezes its start-up's objects (`freeze_startup`)."""
    from_command_line = argv is None  # not a test calling it in its own process
    argv = sys.argv[1:] if argv is None else argv
    argv = hoist_options(argv, build_parser, OWN_COMMANDS + COMMANDS)
    parser = build_parser(command_of(argv))
    args = parser.parse_args(argv)
    args.argv = list(argv)
    warn_unknown_env(args)
    if from_command_line:  # the command's modules are loaded (a server freezes again, set up)
        freeze_startup()
    umask = os.umask(0o077)
    try:
        return _run_command(args)
    finally:
        os.umask(umask)


def warn_unknown_env(args: argparse.Namespace) -> None:
    """One stderr line for each ``MEMTRIO_*`` variable memtrio does not read, naming the
    closest known one; `start` records them in the trace log too, once it is open."""
    args.unknown_env = environment.unknown_env(os.environ)
    for line in environment.unknown_env_warnings(args.unknown_env):
        print(line, file=sys.stderr, flush=True)


def _run_command(args: argparse.Namespace) -> int:
    try:
        code = args.func(args, run_with_app)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Output piped into a closed reader (e.g. `| head`); not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - every failure: one line
        return report(exc, getattr(args, "command", ""))
    return int(code or 0)


def report(exc: BaseException, command: str = "") -> int:
    """Print ``exc`` as the one line of a failed command (`_report`), without any password
    (`dsn.redact`: a connection string in an unforeseen error's text); its exit code."""
    return report_line(exc, command)[0]


def report_line(exc: BaseException, command: str = "") -> tuple[int, str]:
    """`report`: its exit code, and the line it printed (without ``memtrio: ``)."""
    lines = io.StringIO()
    with contextlib.redirect_stderr(lines):
        code = _report(exc, command)
    text = dsn.redact(lines.getvalue())
    sys.stderr.write(text)
    said = text.strip().splitlines()
    return code, said[-1].removeprefix("memtrio: ") if said else ""


def _report(exc: BaseException, command: str = "") -> int:
    """Print ``exc`` as the one line of a failed command; its exit code.

    Every failure is also a ``cli failed`` event of the trace log, once it is
    open (a configuration error comes before it is): the command, the error.
    A `UserError` (behind exception groups and escalations too) is printed as it
    is. Anything else is a bug or an unforeseen environment: its type and
    message, with the traceback in the trace log (or on stderr with
    ``MEMTRIO_LOG_STDERR_LEVEL=debug``).
    """
    known = find_user_error(exc)
    if known is not None:
        print(f"memtrio: {known}", file=sys.stderr)
        trace.record(
            "cli", "failed", level="error", command=command, error=str(known), code=known.code
        )
        return known.code
    if isinstance(exc, BaseExceptionGroup):
        leaf = first_leaf(exc)
        if isinstance(leaf, (KeyboardInterrupt, BrokenPipeError)):
            return 130 if isinstance(leaf, KeyboardInterrupt) else 0
        exc = leaf
    details = "".join(traceback.format_exception(exc))
    trace.record(
        "cli",
        "failed",
        level="error",
        command=command,
        error=dsn.redact(f"{type(exc).__name__}: {exc}"),
        exc=dsn.redact(details),
    )
    if os.environ.get("MEMTRIO_LOG_STDERR_LEVEL") == "debug":
        print(details, end="", file=sys.stderr)
    if isinstance(exc, Escalation):
        print(f"memtrio: {exc}", file=sys.stderr)
        return 1
    if isinstance(exc, UnicodeDecodeError) or (
        isinstance(exc, UnicodeEncodeError) and "surrogates" in exc.reason
    ):
        # Bytes that are not UTF-8 (decoded with surrogateescape) in a file, stdin or argv.
        print(
            f"memtrio: the input is not UTF-8 text (at character {exc.start}); convert it to UTF-8",
            file=sys.stderr,
        )
        return 1
    if isinstance(exc, OSError) and exc.strerror:
        where = f" {exc.filename}" if exc.filename else ""
        print(f"memtrio: cannot use{where}: {exc.strerror}", file=sys.stderr)
        return 1
    where = (
        f"the traceback is in the trace log {trace.LOG.path}"
        if trace.LOG.enabled("error")
        else "MEMTRIO_LOG_STDERR_LEVEL=debug shows the traceback"
    )
    print(
        f"memtrio: unexpected error: {one_line(f'{type(exc).__name__}: {exc}')} "
        f"({where}; please report it)",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    # Run the importable module's main: subcommand modules raise *its* CliError,
    # which this copy (``__main__``) would not catch.
    from memtrio.supervisors.cli import main as _main

    sys.exit(_main())
