"""handoff.record.lock: one orchestrator per ticket, and a dead owner never blocks the next one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import handoff.record.lock as lock_module
from handoff.errors import Busy
from handoff.record.lock import TicketLock, holder


@pytest.fixture
def lock_path(tmp_path: Path) -> Path:
    folder = tmp_path / "ticket"
    folder.mkdir()
    return folder / "lock"


def test_a_second_lock_is_busy_while_the_first_is_held(lock_path: Path) -> None:
    first = TicketLock(lock_path)
    first.acquire()
    try:
        with pytest.raises(Busy) as caught:
            TicketLock(lock_path).acquire()
        assert caught.value.exit_code == 4
        assert str(os.getpid()) in caught.value.message
    finally:
        first.release()


def test_the_lock_can_be_taken_again_after_release(lock_path: Path) -> None:
    first = TicketLock(lock_path)
    first.acquire()
    first.release()
    second = TicketLock(lock_path)
    second.acquire()
    try:
        with pytest.raises(Busy):
            TicketLock(lock_path).acquire()
    finally:
        second.release()


def test_the_context_manager_releases_even_on_error(lock_path: Path) -> None:
    with pytest.raises(RuntimeError), TicketLock(lock_path):
        assert holder(lock_path) == os.getpid()
        raise RuntimeError("boom")
    assert holder(lock_path) is None
    with TicketLock(lock_path):
        pass


def test_a_busy_attempt_does_not_disturb_the_owner(lock_path: Path) -> None:
    with TicketLock(lock_path):
        for _ in range(3):
            with pytest.raises(Busy):
                TicketLock(lock_path).acquire()
        assert holder(lock_path) == os.getpid()


def test_release_twice_is_harmless(lock_path: Path) -> None:
    lock = TicketLock(lock_path)
    lock.acquire()
    lock.release()
    lock.release()
    assert holder(lock_path) is None


def test_holder_is_none_without_a_lock_file(lock_path: Path) -> None:
    assert holder(lock_path) is None


def test_holder_is_none_when_the_file_exists_but_nobody_holds_it(lock_path: Path) -> None:
    lock_path.write_text("12345\n", encoding="utf-8")  # a pid left behind by a dead owner
    assert holder(lock_path) is None


def test_holder_is_our_pid_while_we_hold_it(lock_path: Path) -> None:
    with TicketLock(lock_path):
        assert holder(lock_path) == os.getpid()
    assert holder(lock_path) is None


def test_holder_is_minus_one_when_the_pid_cannot_be_read(lock_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lock_module, "PID_WAIT", 0.1)
    with TicketLock(lock_path):
        lock_path.write_text("not a pid\n", encoding="utf-8")
        assert holder(lock_path) == -1


def test_the_lock_file_is_private(lock_path: Path) -> None:
    lock_path.write_text("", encoding="utf-8")
    lock_path.chmod(0o644)  # as an older handoff left it
    with TicketLock(lock_path):
        assert lock_path.stat().st_mode & 0o777 == 0o600
