"""handoff.record.lock: one orchestrator per ticket, and a dead owner never blocks the next one."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import handoff.record.lock as lock_module
from handoff.errors import Busy
from handoff.record.lock import TicketLock, holder
from tests.conftest import PYTHON
from tests.faults.catalog import fault
from tests.unit.record import test_lock as unit_tests

#: the fixtures this module's unit tests define, shared
lock_path = unit_tests.lock_path

# Takes the lock, says so on stdout, then holds it until stdin closes (or it is killed).
HOLD = """
import sys
from pathlib import Path
from handoff.record.lock import TicketLock
lock = TicketLock(Path(sys.argv[1]))
lock.acquire()
print("locked", flush=True)
sys.stdin.read()
lock.release()
"""

# Tries the lock once: exit 0 when it got it, the Busy exit code when it did not.
TRY = """
import sys
from pathlib import Path
from handoff.errors import Busy
from handoff.record.lock import TicketLock
try:
    with TicketLock(Path(sys.argv[1])):
        pass
except Busy as exc:
    print(exc.message, flush=True)
    sys.exit(exc.exit_code)
"""


@pytest.fixture
def other_process(lock_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A second real process holding the lock (already holding it when the test starts)."""
    child = subprocess.Popen([PYTHON, "-c", HOLD, str(lock_path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()  # blocks until the child holds the lock (or dies)
        assert line.strip() == "locked", child.stderr.read() if child.stderr else line
        yield child
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=30)
        for stream in (child.stdin, child.stdout, child.stderr):
            if stream is not None:
                stream.close()


def test_another_process_holding_it_makes_us_busy(lock_path: Path,
                                                  other_process: subprocess.Popen[str]) -> None:
    assert holder(lock_path) == other_process.pid
    with pytest.raises(Busy) as caught:
        TicketLock(lock_path).acquire()
    assert str(other_process.pid) in caught.value.message


def test_the_lock_is_free_once_the_other_process_lets_go(lock_path: Path,
                                                         other_process: subprocess.Popen[str]) -> None:
    assert other_process.stdin is not None
    other_process.stdin.close()
    assert other_process.wait(timeout=30) == 0
    assert holder(lock_path) is None
    with TicketLock(lock_path):
        assert holder(lock_path) == os.getpid()


def test_a_killed_owner_does_not_block_the_next_one(lock_path: Path,
                                                    other_process: subprocess.Popen[str]) -> None:
    with pytest.raises(Busy):
        TicketLock(lock_path).acquire()
    os.kill(other_process.pid, signal.SIGKILL)
    assert other_process.wait(timeout=30) == -signal.SIGKILL
    # its pid is still written in the file, but nobody holds the lock any more
    assert lock_path.read_text(encoding="utf-8").strip() == str(other_process.pid)
    assert holder(lock_path) is None
    with TicketLock(lock_path):
        assert holder(lock_path) == os.getpid()


def test_a_second_process_is_refused_while_we_hold_it(lock_path: Path) -> None:
    with TicketLock(lock_path):
        tried = subprocess.run([PYTHON, "-c", TRY, str(lock_path)], capture_output=True, text=True,
                               timeout=60)
        assert tried.returncode == Busy.exit_code, tried.stderr
        assert str(os.getpid()) in tried.stdout
    tried = subprocess.run([PYTHON, "-c", TRY, str(lock_path)], capture_output=True, text=True,
                           timeout=60)
    assert tried.returncode == 0, tried.stdout + tried.stderr


# Probes the lock with holder() in a tight loop until the stop file exists, then prints how
# often it saw it held and free. argv: lock path, stop file, "ofd" or "flock".
PROBE = """
import sys
from pathlib import Path
import handoff.record.lock as lock
lock.OFD = sys.argv[3] == "ofd"
path, stop, seen = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[4])
held = free = 0
print("probing", flush=True)
while not stop.exists():
    if lock.holder(path) is None:
        free += 1
    else:
        held += 1
        if held == 1:
            seen.touch()  # the test goes on acquiring until a probe caught the lock held
print(held, free, flush=True)
"""


@fault("16", "`handoff status` (a lock probe) runs while an orchestrator takes the ticket's "
             "lock, thousands of times",
       "the probe never takes the lock, so no acquisition is refused",
       "exactly one orchestrator per ticket")
@pytest.mark.parametrize("kind", ["ofd", "flock"])
def test_probing_the_holder_never_refuses_a_concurrent_acquire(
        kind: str, lock_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 6.16: holder() used to take a shared flock for a moment, and an acquire() that
    came in that moment was refused as 'another orchestrator (pid ?)'."""
    monkeypatch.setattr(lock_module, "OFD", kind == "ofd")
    if kind == "ofd":
        assert hasattr(fcntl, "F_OFD_GETLK"), "Linux has OFD locks: the real path is tested"
    lock_path.touch()
    stop, caught = tmp_path / "stop", tmp_path / "seen-held"
    probes = [subprocess.Popen([PYTHON, "-c", PROBE, str(lock_path), str(stop), kind, str(caught)],
                               stdout=subprocess.PIPE, text=True) for _ in range(2)]
    refused, rounds, done = 0, 3000, 0
    try:
        for probe in probes:
            assert probe.stdout is not None and probe.stdout.readline().strip() == "probing"
        # at least `rounds`, and on (bounded) until a probe caught the lock held: the window
        # is microseconds wide, and a scheduler may miss it for thousands of rounds
        deadline = time.monotonic() + 30
        while done < rounds or (not caught.exists() and time.monotonic() < deadline):
            done += 1
            try:
                with TicketLock(lock_path):
                    pass
            except Busy:
                refused += 1
    finally:
        stop.touch()
        seen = [probe.communicate(timeout=30)[0].split() for probe in probes]
    assert refused == 0, f"{refused} of {done} acquisitions were refused by a mere probe"
    held = sum(int(s[0]) for s in seen)
    free = sum(int(s[1]) for s in seen)
    assert held > 0 and free > 0, f"the probes ran alongside the acquisitions ({held}, {free})"
