"""The home directory: private files whatever the umask (defect 5); a home or store that
cannot be used ends in one clear line and a documented exit code (defect 11)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import zygote
from memtrio.actors.code.index import CodeIndex, index_path
from memtrio.actors.memory import tools as store_tools
from memtrio.actors.store.feature import FEATURE as STORE
from memtrio.supervisors import config as config_mod
from memtrio.supervisors import private, trace
from memtrio.supervisors.app import build_context, configure_observability, open_app
from memtrio.supervisors.cli import main
from raw_server import initialize_request

CLI = [sys.executable, "-m", "memtrio.supervisors.cli"]


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def modes(home: Path) -> dict[str, str]:
    """Every path under ``home`` (itself included) -> its mode, as 0o octal text."""
    out = {".": f"{stat.S_IMODE(os.lstat(home).st_mode):04o}"}
    for root, dirs, files in os.walk(home):
        for name in dirs + files:
            path = Path(root) / name
            out[str(path.relative_to(home))] = f"{stat.S_IMODE(os.lstat(path).st_mode):04o}"
    return out


def assert_private(home: Path) -> None:
    """Every directory under ``home`` is 0700 and every file 0600."""
    loose = {}
    for rel, mode in modes(home).items():
        path = home / rel
        expected = "0700" if path.is_dir() else "0600"
        if mode != expected:
            loose[rel] = mode
    assert not loose, f"not private: {loose}"


def cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """``memtrio ARGS`` in a child process with umask 022 (what most shells have)."""
    full = {**os.environ, "MEMTRIO_EMBEDDINGS": "off", "MEMTRIO_CODE": "off", **(env or {})}
    full.pop("MEMTRIO_FAULTS", None)
    return subprocess.run(
        zygote.command(args),
        env=full,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.umask(0o022),
    )


# -- defect 5: private files ---------------------------------------------------------


def test_defect5_a_fresh_cli_run_under_umask_022_creates_everything_private(
    tmp_path: Path,
) -> None:
    home = tmp_path / "new" / "home"
    assert cli("remember", "secret plan", "--home", str(home)).returncode == 0
    assert cli("search", "plan", "--lexical", "--home", str(home)).returncode == 0
    export = tmp_path / "backup.jsonl"
    assert cli("export", str(export), "--home", str(home)).returncode == 0
    assert {"memtrio.sqlite", "logs", "logs/memtrio.log"} <= set(modes(home))
    assert_private(home)
    assert modes(tmp_path / "new")["."] == "0700"  # a parent memtrio created
    assert f"{stat.S_IMODE(export.stat().st_mode):04o}" == "0600"


def test_defect5_a_fresh_mcp_server_under_umask_022_creates_everything_private(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    init = initialize_request()
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "remember", "arguments": {"content": "a private note"}},
    }
    stdin = "\n".join(json.dumps(m) for m in (init, call)) + "\n"
    proc = cli("mcp", "--home", str(home), env={"MEMTRIO_CODE": "on"}, cwd=tmp_path, stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    replies = [json.loads(line) for line in proc.stdout.splitlines()]
    assert replies[-1]["id"] == 1 and not replies[-1]["result"].get("isError")
    assert {"memtrio.sqlite", "logs/memtrio.log"} <= set(modes(home))
    assert_private(home)


async def test_defect5_the_library_creates_private_files_without_the_cli_umask(
    tmp_path: Path,
) -> None:
    # Library users do not go through `memtrio` (which also sets umask 077): the
    # database with its -wal and -shm, the code index, the log are private anyway.
    home = tmp_path / "home"
    with umask(0o022):
        cfg = config_mod.load(home, env={"MEMTRIO_EMBEDDINGS": "off"})
        app = build_context(cfg, home, tmp_path)
        configure_observability(cfg, home)
        try:
            async with open_app(app, [STORE]):
                ctx = type("Ctx", (), {"app": app, "session": None})()
                await store_tools.remember(ctx, store_tools.RememberArgs(content="hush"))
                index = CodeIndex(index_path(home))
                index.checkout_id("/some/checkout")
                assert {"memtrio.sqlite-wal", "memtrio.sqlite-shm"} <= set(modes(home))
                assert {"code-v2.sqlite-wal", "logs/memtrio.log"} <= set(modes(home))
                assert_private(home)
                index.close()
        finally:
            trace.LOG.close()


def test_defect5_a_log_outside_the_home_is_private_too(tmp_path: Path) -> None:
    log = tmp_path / "elsewhere" / "deep" / "memtrio.log"
    with umask(0o022):
        sink = trace.TraceLog()
        sink.configure(log, "info")
        sink.emit("info", "test", "hello", {"query": "secret"})
        sink.close()
    assert modes(tmp_path / "elsewhere") == {
        ".": "0700",
        "deep": "0700",
        "deep/memtrio.log": "0600",
    }


def test_defect5_export_replaces_a_world_readable_file_with_a_private_one(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    assert cli("remember", "export me", "--home", str(home)).returncode == 0
    for fmt in ("memtrio", "jsonl"):
        target = tmp_path / f"out-{fmt}.jsonl"
        target.write_text("old\n")
        target.chmod(0o644)
        proc = cli("export", str(target), "--format", fmt, "--home", str(home))
        assert proc.returncode == 0, proc.stderr
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
        assert target.read_text() != "old\n"
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_defect5_doctor_reports_loose_modes_and_fix_tightens_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("MEMTRIO_EMBEDDINGS", "off")
    monkeypatch.delenv("MEMTRIO_FAULTS", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["remember", "x", "--home", str(home)]) == 0
    (home / "memtrio.sqlite").chmod(0o644)
    (home / "logs").chmod(0o755)
    outside = tmp_path / "outside.txt"
    outside.write_text("not memtrio's")
    outside.chmod(0o644)
    (home / "link").symlink_to(outside)
    capsys.readouterr()

    assert main(["doctor", "--home", str(home)]) == 1
    out = capsys.readouterr().out
    assert f"{home / 'memtrio.sqlite'}: mode 0644, expected 0600" in out
    assert f"{home / 'logs'}: mode 0755, expected 0700" in out
    assert f"{home / 'link'}: a symbolic link to {outside} (not followed, not changed)" in out
    assert "memtrio doctor --fix" in out and "status: PROBLEMS FOUND" in out

    assert main(["doctor", "--fix", "--home", str(home), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["permissions"]
    assert report["status"] == "fixed"
    assert {(p["path"], p["mode"], p["now"]) for p in report["paths"]} == {
        (str(home / "memtrio.sqlite"), "0644", "0600"),
        (str(home / "logs"), "0755", "0700"),
    }
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644  # never through a link
    (home / "link").unlink()
    assert_private(home)
    assert main(["doctor", "--home", str(home)]) == 0
    assert "permissions: ok" in capsys.readouterr().out


def test_defect5_doctor_checks_the_directory_a_symlinked_home_points_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMTRIO_EMBEDDINGS", "off")
    monkeypatch.chdir(tmp_path)
    real = tmp_path / "real"
    real.mkdir(mode=0o755)
    real.chmod(0o755)
    home = tmp_path / "home"
    home.symlink_to(real)
    assert main(["doctor", "--home", str(home)]) == 1
    out = capsys.readouterr().out
    assert f"{home}: a symbolic link to {real}" in out
    assert f"{real}: mode 0755, expected 0700" in out
    assert main(["doctor", "--fix", "--home", str(home)]) == 0
    assert stat.S_IMODE(real.stat().st_mode) == 0o700 and home.is_symlink()


def test_defect5_private_helpers_never_follow_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("x")
    target.chmod(0o644)
    link = tmp_path / "link"
    link.symlink_to(target)
    assert private.create_file(link) is False  # exists (as a link): nothing created through it
    finding = private.Finding(link, 0o644, private.FILE_MODE)
    with pytest.raises(OSError, match="symbolic link"):
        private.tighten(finding)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


# -- defect 11: one clear line ---------------------------------------------------------

# Every command that opens the home; each reads or writes the store.
COMMANDS: list[list[str]] = [
    ["mcp"],
    ["stats"],
    ["list"],
    ["search", "anything", "--lexical"],
    ["remember", "a note"],
    ["doctor"],
    ["export"],
    ["import", "{export}"],
    ["code", "index"],
    ["reembed"],
]


def _one_line(proc: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    lines = proc.stderr.splitlines()
    assert proc.returncode == code, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "supervisor" not in proc.stderr
    assert lines[0].startswith("memtrio: ")
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def export_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("export")
    out = base / "e.jsonl"
    assert cli("remember", "kept", "--home", str(base / "h")).returncode == 0
    assert cli("export", str(out), "--home", str(base / "h")).returncode == 0
    return out


def _run_all(
    home: Path, cwd: Path, export_file: Path, env: dict[str, str] | None = None
) -> list[tuple[list[str], subprocess.CompletedProcess[str]]]:
    out = []
    for command in COMMANDS:
        argv = [a.replace("{export}", str(export_file)) for a in command]
        env_all = {
            "MEMTRIO_EMBEDDINGS": "on" if command == ["reembed"] else "off",
            "MEMTRIO_CODE": "on" if command[0] == "code" else "off",
            **(env or {}),
        }
        out.append((command, cli(*argv, "--home", str(home), env=env_all, cwd=cwd, stdin="\n")))
    return out


def test_defect11_a_home_that_is_a_file_is_one_line_for_every_command(
    tmp_path: Path, export_file: Path
) -> None:
    home = tmp_path / "home"
    home.write_text("not a directory")
    for _command, proc in _run_all(home, tmp_path, export_file):
        _one_line(proc, 1, str(home), "is a file, not a directory", "--home or MEMTRIO_HOME")


def test_defect11_a_home_under_a_file_is_one_line_for_every_command(
    tmp_path: Path, export_file: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    home = blocker / "home"
    for _command, proc in _run_all(home, tmp_path, export_file):
        _one_line(proc, 1, f"{blocker} is a file, not a directory", "choose another home")


def test_defect11_a_corrupt_store_is_one_line_that_says_run_doctor(
    tmp_path: Path, export_file: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "memtrio.sqlite").write_bytes(os.urandom(64 * 1024))
    for command, proc in _run_all(home, tmp_path, export_file):
        if command == ["code", "index"]:
            # code navigation does not open the memory store
            assert "memory store" not in proc.stderr and "Traceback" not in proc.stderr
            continue
        if command == ["doctor"]:
            line = _one_line(proc, 1, "is damaged", "aside", "memtrio import")
            assert "status: PROBLEMS FOUND" in proc.stdout
        else:
            line = _one_line(proc, 1, "is damaged", "run memtrio doctor")
        assert str(home / "memtrio.sqlite") in line


def test_defect11_a_config_that_is_not_utf8_is_one_line_exit_2(
    tmp_path: Path, export_file: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_bytes(b'[retrieval]\ndamping = "\xff\xfe"\n')
    for _command, proc in _run_all(home, tmp_path, export_file):
        _one_line(proc, 2, "config.toml line 2, column 12", "not UTF-8", "save the file as UTF-8")


def _read_only_mount(path: Path) -> list[str] | None:
    """A private mount namespace where ``path`` is read-only (root with unshare), else None."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return None
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"'
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, str(path), "true"], capture_output=True, timeout=30
    )
    return ["unshare", "-m", "sh", "-c", script, str(path)] if probe.returncode == 0 else None


@pytest.mark.parametrize("where", ["home", "parent"])
def test_defect11_a_read_only_home_is_one_line_for_every_command(
    tmp_path: Path, export_file: Path, where: str
) -> None:
    parent = tmp_path / "disk"
    parent.mkdir()
    home = parent / "home"
    if where == "home":
        assert cli("remember", "before", "--home", str(home)).returncode == 0
    wrap = _read_only_mount(home if where == "home" else parent)
    if wrap is None:
        pytest.skip("needs root and a private mount namespace (unshare) for a read-only mount")
    for command in COMMANDS:
        argv = [a.replace("{export}", str(export_file)) for a in command]
        env = {
            **os.environ,
            "MEMTRIO_EMBEDDINGS": "on" if command == ["reembed"] else "off",
            "MEMTRIO_CODE": "on" if command[0] == "code" else "off",
        }
        proc = subprocess.run(
            [*wrap, *CLI, *argv, "--home", str(home)],
            env=env,
            cwd=tmp_path,
            input="\n",
            capture_output=True,
            text=True,
            timeout=120,
        )
        _one_line(proc, 1, str(home), "read-only", "choose another home")


def test_defect11_an_unwritable_store_refuses_writes_in_one_line(
    tmp_path: Path, export_file: Path
) -> None:
    home = tmp_path / "home"
    assert cli("remember", "before", "--home", str(home)).returncode == 0
    db = home / "memtrio.sqlite"
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(db)]).returncode:
        pytest.skip("needs chattr +i (root on a file system with the immutable flag)")
    try:
        for command in (["remember", "more"], ["import", str(export_file)]):
            proc = cli(*command, "--home", str(home), cwd=tmp_path)
            _one_line(proc, 1, str(db), "is read-only", "make it and its directory writable")
        proc = cli("stats", "--home", str(home), cwd=tmp_path)
        assert proc.returncode == 0 and "memories: 1" in proc.stdout  # reads still work
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)


def test_defect11_a_bad_command_line_is_one_line_exit_2(tmp_path: Path) -> None:
    for argv in (["list", "--limit", "many"], ["nonsense"], ["mcp", "--log-level", "loud"], []):
        proc = cli(*argv, "--home", str(tmp_path / "h"))
        _one_line(proc, 2, "(see memtrio", "--help)")


def test_defect11_bad_fault_injection_variables_are_one_line_exit_2(tmp_path: Path) -> None:
    for env, needle in (
        ({"MEMTRIO_FAULTS": "bogus"}, "MEMTRIO_FAULTS item 'bogus'"),
        ({"MEMTRIO_FAULTS_SEED": "abc"}, "MEMTRIO_FAULTS_SEED='abc'"),
    ):
        full = {k: v for k, v in os.environ.items() if k != "MEMTRIO_FAULTS"}
        proc = subprocess.run(
            [*CLI, "stats", "--home", str(tmp_path / "h")],
            env={**full, "MEMTRIO_EMBEDDINGS": "off", **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        _one_line(proc, 2, "configuration error", needle, "(environment)")


def test_defect11_export_to_an_unusable_path_is_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for target, needle in (
        (tmp_path, "is a directory"),
        (blocker / "out.jsonl", "is not an existing directory"),
        (tmp_path / "missing" / "out.jsonl", "is not an existing directory"),
    ):
        proc = cli("export", str(target), "--home", str(home))
        _one_line(proc, 1, "cannot write the export", needle)


def test_defect11_an_unexpected_failure_is_one_line_with_the_traceback_in_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from memtrio.actors.memory import cli as store_cli

    def broken(args: object, run: object) -> int:
        trace.LOG.configure(tmp_path / "log" / "memtrio.log", "info")
        raise RuntimeError("a bug\nover two lines")

    monkeypatch.setattr(store_cli, "cmd_stats", broken)
    try:
        assert main(["stats", "--home", str(tmp_path / "h")]) == 1
    finally:
        trace.LOG.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unexpected error: RuntimeError: a bug over two lines" in err
    logged = (tmp_path / "log" / "memtrio.log").read_text()
    assert "Traceback" in logged and "a bug" in logged


def test_defect11_the_root_escalation_prints_one_line(tmp_path: Path) -> None:
    # The store fails to start (a damaged database): before, the child's crash, the
    # supervisor's escalation and the application's "gave up" each printed a line.
    home = tmp_path / "home"
    home.mkdir()
    (home / "memtrio.sqlite").write_bytes(b"SQLite format 3\x00" + os.urandom(4096))
    proc = cli("mcp", "--home", str(home), env={"MEMTRIO_LOG_STDERR_LEVEL": "warning"}, stdin="\n")
    _one_line(proc, 1, "is damaged", "run memtrio doctor")
    logged = (home / "logs" / "memtrio.log").read_text()
    assert '"event":"gave_up"' in logged and '"event":"child_crashed"' in logged


async def test_defect11_an_escalation_names_the_failure_and_what_to_do() -> None:
    from memtrio.supervisors.supervisor import ChildSpec, Escalation, Supervisor

    async def broken(ctx: object, *, task_status: object) -> None:
        raise RuntimeError("kaput")

    sup = Supervisor("root", [ChildSpec("worker", broken)])
    caught: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
    except BaseException as exc:  # noqa: BLE001 - inspected below
        caught = exc
    while isinstance(caught, BaseExceptionGroup):
        caught = caught.exceptions[0]
    assert isinstance(caught, Escalation)
    message = str(caught)
    assert message.startswith("supervisor 'root' gave up: child 'worker' could not start")
    assert "RuntimeError: kaput" in message and "restart memtrio" in message
    assert "\n" not in message


def test_defect11_odd_homes_and_stores_are_one_line(tmp_path: Path) -> None:
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    _one_line(cli("stats", "--home", str(dangling)), 1, "is a symbolic link to", "fix the link")
    home = tmp_path / "home"
    (home / "memtrio.sqlite").mkdir(parents=True)
    for command in (["stats"], ["mcp"]):
        proc = cli(*command, "--home", str(home), stdin="\n")
        _one_line(proc, 1, "is a directory, not a database", "move it away")


def test_defect11_a_full_disk_is_one_line(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and a private mount namespace (unshare) for a tiny tmpfs")
    script = 'mount -t tmpfs -o size=64k tmpfs "$0" && exec "$@"'
    env = {**os.environ, "MEMTRIO_EMBEDDINGS": "off", "MEMTRIO_CODE": "off"}
    for command in (["remember", "a note"], ["mcp"]):
        proc = subprocess.run(
            ["unshare", "-m", "sh", "-c", script, str(disk), *CLI, *command],
            env={**env, "MEMTRIO_HOME": str(disk / "home")},
            input="\n",
            capture_output=True,
            text=True,
            timeout=120,
        )
        if "mount" in proc.stderr and proc.returncode not in (0, 1):
            pytest.skip(f"no tmpfs here: {proc.stderr.strip()}")
        _one_line(proc, 1, "is full", "free some space")


async def test_defect11_startup_warnings_show_only_when_the_start_succeeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memtrio.supervisors.context import FeatureUnavailable
    from memtrio.supervisors.supervisor import ChildContext, ChildSpec

    class Missing:
        name = "missing"

        def setup(self, app: object) -> None:
            raise FeatureUnavailable("not installed here")

    class Worker:
        name = "worker"

        def __init__(self, fail: bool) -> None:
            self.fail = fail

        def setup(self, app: object) -> Worker:
            return self

        def children(self) -> list[ChildSpec]:
            async def start(ctx: ChildContext, *, task_status: trio.TaskStatus[None]) -> None:
                if self.fail:
                    raise RuntimeError("cannot start")
                task_status.started()
                await ctx.shutdown.wait()

            return [ChildSpec("worker", start)]

    cfg = config_mod.load(tmp_path, env={"MEMTRIO_EMBEDDINGS": "off"})
    trace.LOG.configure(None, "info", stderr_level="warning")
    from memtrio.supervisors.supervisor import Escalation

    with pytest.raises(Exception) as info:  # noqa: PT011 - an Escalation, maybe in a group
        async with open_app(build_context(cfg, tmp_path / "a"), [Missing(), Worker(True)]):
            pass
    leaf: BaseException = info.value
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    assert isinstance(leaf, Escalation) and "could not start" in str(leaf)
    assert capsys.readouterr().err == ""  # the caller prints the one line
    async with open_app(build_context(cfg, tmp_path / "b"), [Missing(), Worker(False)]):
        assert "feature_unavailable feature=missing" in capsys.readouterr().err


def test_defect11_no_permission_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Root ignores file modes, so the refusals are simulated where the system makes them.
    from memtrio.supervisors import app as app_mod

    def denied(path: Path) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(app_mod.private, "make_dir", denied)
    assert main(["stats", "--home", str(tmp_path / "new")]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"memtrio: cannot create the home {tmp_path / 'new'} (from --home): permission denied; "
        "choose another home with --home or MEMTRIO_HOME\n"
    )
    monkeypatch.undo()
    monkeypatch.setattr(app_mod.os, "access", lambda path, mode: False)
    assert main(["stats", "--home", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"the home {tmp_path} (from --home) is not writable" in err


def test_defect11_non_utf8_input_is_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*CLI, "remember", "-", "--home", str(tmp_path / "h")],
        input=b"caf\xe9\n",
        capture_output=True,
        env={**os.environ, "MEMTRIO_EMBEDDINGS": "off"},
        timeout=60,
    )
    assert proc.returncode == 1 and b"Traceback" not in proc.stderr
    assert proc.stderr.count(b"\n") == 1 and b"not UTF-8" in proc.stderr
    proc = subprocess.run(
        [*CLI, "remember", os.fsdecode(b"caf\xe9"), "--home", str(tmp_path / "h")],
        capture_output=True,
        env={**os.environ, "MEMTRIO_EMBEDDINGS": "off"},
        timeout=60,
    )
    assert proc.returncode == 1 and proc.stderr.count(b"\n") == 1
    assert b"`content` is not valid UTF-8 text" in proc.stderr
