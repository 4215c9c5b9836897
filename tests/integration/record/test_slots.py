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


IN_LINE_LATER = """
import sys
from pathlib import Path
from handoff.record.slots import Slot
slot = Slot(Path(sys.argv[1]), Path(sys.argv[2]), "1", 1)
sys.stdin.readline()  # an orchestrator that begins late: after the batch's start looked
slot.stand_in_line()
print("in line", flush=True)
sys.stdin.readline()
"""


def test_a_batch_waits_for_each_orchestrator_to_hold_its_place_and_only_for_those_that_will(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    late, asking, dead = (home / "repo-1" / name for name in ("B-1", "B-2", "B-3"))
    for ticket, phase in ((late, "implementing"), (asking, "awaiting-approval"),
                          (dead, "queued")):
        ticket.mkdir(parents=True)
        (ticket / "state.json").write_text(f'{{"phase": "{phase}"}}', encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", IN_LINE_LATER, str(home), str(late)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert not slots.placed(home, late)
        # nobody stands for B-3 (its orchestrator died first): the wait ends at its bound and
        # names it; B-2 waits for a person, not in the queue, and is not waited for
        assert slots.wait_placed(home, [late, asking, dead], 0.3) == [late, dead]
        proc.stdin.write("go\n")
        proc.stdin.flush()
        # the wait holds on until the late one stands in line, well within its bound
        assert slots.wait_placed(home, [late, asking], 60) == []
        assert proc.stdout.readline().strip() == "in line"
        assert slots.placed(home, late) and not slots.placed(home, dead)
    finally:
        proc.kill()
        proc.wait(timeout=10)
