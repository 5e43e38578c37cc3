"""A process waits at exit for native work still running in an abandoned thread.

`memtrio mcp` whose client left while the model was loading aborted at interpreter exit
("terminate called without an active exception"): onnxruntime was still running in the
thread trio had abandoned. `supervisors.threads.settle` now waits for such threads.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from launch import server_env
from memtrio.actors.chaos import client
from memtrio.supervisors.threads import finishing, settle


def test_settle_waits_for_a_finishing_thread_and_is_bounded() -> None:
    release = threading.Event()
    started = threading.Event()
    ended: list[float] = []

    def native_work() -> None:
        started.set()
        release.wait(5)
        ended.append(time.monotonic())

    thread = threading.Thread(target=finishing(native_work), daemon=True)
    thread.start()
    assert started.wait(5)
    assert settle(0.1) is False  # still running: the bound holds
    threading.Timer(0.3, release.set).start()
    assert settle(5.0) is True
    assert ended and time.monotonic() >= ended[0]  # it ended before settle returned
    thread.join(1)
    assert settle(0.0) is True  # nothing left running


# What a process runs to report how many objects the collector no longer examines once
# the command ran (`gc.get_freeze_count`), as ``memtrio ARGS`` runs it (``argv`` None).
FROZEN_AFTER = """
import gc, sys
from memtrio.supervisors.cli import main
sys.argv = ["memtrio", *sys.argv[1:]]
code = main()
print(gc.get_freeze_count(), file=sys.stderr)
sys.exit(code)
"""


def frozen_after(home: Path, *args: str, stdin: str = "") -> int:
    env = server_env(home, {"MEMTRIO_CODE": "off"})
    done = subprocess.run(
        [sys.executable, "-c", FROZEN_AFTER, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return int(done.stderr.strip().splitlines()[-1])


def test_the_start_ups_objects_are_not_collected_again_at_exit(home: Path) -> None:
    """A command and a server freeze what their start-up made (`threads.freeze_startup`):
    the interpreter's exit collects garbage several times over every object, which made a
    short ``memtrio mcp`` session end about 0.1 s later, and the suite runs thousands."""
    command = frozen_after(home, "stats")
    assert command > 10_000
    init = client.request_message("initialize", client.initialize_params(), 1)
    call = client.request_message(
        "tools/call", client.tool_call_params("remember", {"content": "frozen start-up"}), 2
    )
    lines = "".join(json.dumps(m) + "\n" for m in (init, call))
    served = frozen_after(home, "mcp", stdin=lines)
    assert served > command  # the features' objects too, once serving
