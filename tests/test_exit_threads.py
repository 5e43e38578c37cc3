"""A process waits at exit for native work still running in an abandoned thread.

`memtrio mcp` whose client left while the model was loading aborted at interpreter exit
("terminate called without an active exception"): onnxruntime was still running in the
thread trio had abandoned. `supervisors.threads.settle` now waits for such threads.
"""

from __future__ import annotations

import threading
import time

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
