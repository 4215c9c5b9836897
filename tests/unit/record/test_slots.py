"""The machine's slots (handoff.record.slots): real files, real locks, real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from handoff.record import slots
from handoff.record.slots import Slot
from tests.conftest import wait_until
from tests.paths import ROOT

HOLDER = """
import sys, time
from pathlib import Path
from handoff.record.slots import Slot
slot = Slot(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
print("waits" if slot.take() is not None else "holds", flush=True)
time.sleep(300)
"""


def slot(home: Path, name: str, order: str, limit: int, now: bool = False) -> Slot:
    return Slot(home, home / "repo-1" / name, order, limit, now=now)


def test_a_limit_of_two_lets_two_work_and_the_third_waits_until_one_gives_back(
        tmp_path: Path) -> None:
    a, b, c = (slot(tmp_path, t, f"2026-01-0{i}", 2) for i, t in enumerate("ABC", 1))
    assert a.take() is None and b.take() is None
    waits = c.take()
    assert waits is not None and waits.place(c.ticket) == 1 and len(waits.at_work) == 2
    assert "2 of 2 tickets at work" in waits.why(c.ticket)
    assert c.take() is not None, "still nothing free"
    b.release()
    assert c.take() is None and c.held
    seen = slots.standing(tmp_path)
    assert sorted(h.name for h in seen.at_work) == ["A", "C"] and not seen.waiting
    assert seen.limit == 2, "status reads the limit the holders wrote"


def test_waiters_start_in_the_order_their_tickets_were_made_not_the_order_they_asked(
        tmp_path: Path) -> None:
    first = slot(tmp_path, "A", "2026-01-01", 1)
    assert first.take() is None
    late = slot(tmp_path, "Z", "2026-01-09", 1)
    assert late.take() is not None  # asks first, but was made last
    early = slot(tmp_path, "M", "2026-01-05", 1)
    queue = early.take()
    assert queue is not None and [h.name for h in queue.waiting] == ["M", "Z"]
    first.release()
    assert late.take() is not None, "M is owed the slot: it was made before Z"
    assert early.take() is None
    early.release()
    assert late.take() is None


def test_now_takes_a_slot_over_the_limit_and_still_counts(tmp_path: Path) -> None:
    a = slot(tmp_path, "A", "1", 1)
    assert a.take() is None
    urgent = slot(tmp_path, "U", "3", 1, now=True)
    assert urgent.take() is None, "--now does not wait"
    b = slot(tmp_path, "B", "2", 1)
    assert b.take() is not None
    a.release()
    assert b.take() is not None, "U counts: 1 of 1 is at work"
    urgent.release()
    assert b.take() is None


def test_a_killed_holder_gives_its_slot_back_and_a_killed_waiter_its_place(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def holder(name: str, order: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(home),
                                 str(home / "repo-1" / name), order, "1"],
                                stdout=subprocess.PIPE, text=True, env=env)
        assert proc.stdout is not None
        proc.stdout.readline()  # it has taken the slot (or its place) and says so
        return proc

    working = holder("A", "1")
    waiting = holder("B", "2")
    try:
        mine = slot(home, "C", "3", 1)
        queue = mine.take()
        assert queue is not None and [h.name for h in queue.waiting] == ["B", "C"]
        assert [h.pid for h in queue.at_work] == [working.pid]
        for proc in (working, waiting):  # no chance to tidy up
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        wait_until(lambda: mine.take() is None, 10, "the dead ones' slot and place freed")
        left = sorted(p.name for p in slots.folder(home).iterdir())
        assert left == [f"{slots.key(mine.ticket)}.run"], "their files were removed"
    finally:
        for proc in (working, waiting):
            proc.kill()
            proc.wait(timeout=10)


def test_release_gives_back_the_slot_and_the_file_and_is_harmless_twice(
        tmp_path: Path) -> None:
    a = slot(tmp_path, "A", "1", 1)
    assert a.take() is None
    a.release()
    a.release()
    assert not a.held and not list(slots.folder(tmp_path).iterdir())
    assert slots.standing(tmp_path).at_work == ()


def test_the_default_limit_follows_cores_and_memory() -> None:
    cores = os.cpu_count() or 1
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit = slots.default_limit()
    assert 1 <= limit <= 2 * cores
    assert limit <= max(1, memory // (1 << 30))
    assert limit in (2 * cores, max(1, memory // (1 << 30)))
