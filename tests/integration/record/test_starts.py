"""handoff.record.starts: an orchestrator's first step waits for the starts in flight, within a
bound, and a start that died holds nobody back. Holders are real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from handoff.record.starts import wait_for_starts

# holds a start in flight until its stdin closes; says "held" once it does
HOLDER = """
import sys
from pathlib import Path
from handoff.record.starts import InFlight
with InFlight(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()
"""


def _holder(home: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(home)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    return child


def test_a_start_InFlight_is_waited_for_until_it_ends(tmp_path: Path) -> None:
    holder = _holder(tmp_path)
    ended = threading.Event()
    waited: list[float] = []

    def wait() -> None:
        waited.append(wait_for_starts(tmp_path, bound=30.0))
        ended.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    try:
        assert not ended.wait(0.3), "it went ahead of a start in flight"
        released = time.monotonic()
        assert holder.stdin is not None
        holder.stdin.close()
        assert holder.wait(timeout=10) == 0
        assert ended.wait(10), "it kept waiting after the start ended"
        assert time.monotonic() - released < 5.0
        assert 0.3 <= waited[0] < 30.0
    finally:
        holder.kill()
        waiter.join(timeout=40)


def test_the_wait_is_bounded_and_a_killed_start_holds_nobody(tmp_path: Path) -> None:
    holder = _holder(tmp_path)
    try:
        began = time.monotonic()
        waited = wait_for_starts(tmp_path, bound=0.5)
        assert 0.5 <= waited < 5.0
        assert time.monotonic() - began < 5.0
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
        assert wait_for_starts(tmp_path, bound=5.0) < 0.5
    finally:
        holder.kill()
        holder.wait(timeout=10)
