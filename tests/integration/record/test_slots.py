"""The machine's slots (handoff.record.slots): real files, real locks, real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from handoff.record import slots
from tests.conftest import wait_until
from tests.paths import ROOT
from tests.unit.record.test_slots import slot

HOLDER = """
import sys, time
from pathlib import Path
from handoff.record.slots import Slot
slot = Slot(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
print("waits" if slot.take() is not None else "holds", flush=True)
time.sleep(300)
"""


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
