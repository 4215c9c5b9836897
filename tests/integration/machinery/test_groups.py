"""handoff.machinery.groups: ending a process group of ours (TERM, a grace, then KILL) and the
handoff process that holds a lock, never another program. Real processes, real locks."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoff.errors import UsageError
from handoff.machinery.groups import end_group, end_lock_holder
from handoff.processes import alive, group_alive
from handoff.record.lock import holder, try_lock
from tests.conftest import wait_until

#: a child that holds lock (argv[1]) until it is ended; "handoff" is in its command line
HOLD = ("import sys, time\nfrom handoff.record.lock import TicketLock\n"
        "lock = TicketLock(__import__('pathlib').Path(sys.argv[1])); lock.acquire()\n"
        "print('held', flush=True)\ntime.sleep(120)\n")


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    """The test's children, killed and reaped after it whatever it did."""
    found: list[subprocess.Popen[str]] = []
    yield found
    for child in found:
        child.kill()
        child.wait(timeout=10)


def test_a_group_that_goes_on_term_gets_nothing_more(
        started: list[subprocess.Popen[str]]) -> None:
    leader = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                              start_new_session=True, text=True)
    started.append(leader)
    assert end_group(leader.pid, grace=10) == "SIGTERM"
    assert leader.wait(timeout=10) == -15


def test_a_group_that_ignores_term_is_killed_after_its_grace(
        started: list[subprocess.Popen[str]]) -> None:
    leader = subprocess.Popen([sys.executable, "-c", "import signal, time\n"
                               "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                               "print('ready', flush=True); time.sleep(120)"],
                              start_new_session=True, stdout=subprocess.PIPE, text=True)
    started.append(leader)
    assert leader.stdout is not None and leader.stdout.readline() == "ready\n"
    assert end_group(leader.pid, grace=0.5) == "SIGKILL"
    assert leader.wait(timeout=10) == -9


def test_a_gone_group_is_left_alone(started: list[subprocess.Popen[str]]) -> None:
    leader = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True, text=True)
    started.append(leader)
    leader.wait(timeout=30)
    assert not group_alive(leader.pid)
    assert end_group(leader.pid) == ""


def hold(lock: Path, argv: list[str], started: list[subprocess.Popen[str]]) -> int:
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    started.append(child)
    assert child.stdin is not None and child.stdout is not None
    if argv[-2:] == ["-", str(lock)]:
        child.stdin.write(HOLD)
    child.stdin.close()
    assert child.stdout.readline() == "held\n"
    wait_until(lambda: holder(lock) == child.pid, 10, "the child to hold the lock")
    return child.pid


def test_the_handoff_process_holding_a_lock_is_ended(
        tmp_path: Path, started: list[subprocess.Popen[str]]) -> None:
    lock = tmp_path / "orchestrator.lock"
    pid = hold(lock, [sys.executable, "-c", HOLD, str(lock)], started)
    assert end_lock_holder(lock, "the ticket's lock", timeout=10) == pid
    assert started[0].wait(timeout=10) == -15, "TERM was enough"
    assert holder(lock) is None


def test_a_lock_held_by_another_program_is_refused_and_its_holder_spared(
        tmp_path: Path, started: list[subprocess.Popen[str]]) -> None:
    """Its command line does not say handoff (the code comes on stdin): a pid reused by
    whatever else must never be signalled."""
    lock = tmp_path / "orchestrator.lock"
    pid = hold(lock, [sys.executable, "-", str(lock)], started)
    with pytest.raises(UsageError, match=f"the ticket's lock names pid {pid}, which is not"):
        end_lock_holder(lock, "the ticket's lock", timeout=1)
    assert alive(pid) and holder(lock) == pid


def test_a_held_lock_whose_owner_cannot_be_read_signals_nobody(tmp_path: Path) -> None:
    """Held, but its pid emptied by hand: there is nobody to name, and nobody is signalled."""
    lock = tmp_path / "emptied.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        assert try_lock(fd)
        assert holder(lock) == -1
        assert end_lock_holder(lock, "the lock", timeout=1) is None
    finally:
        os.close(fd)
