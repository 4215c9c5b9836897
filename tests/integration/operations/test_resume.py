"""handoff.operations.resume: which tickets `resume` carries on and which it refuses, what it
mends first, and which runs `resume --all` finds cut off (real ticket directories and locks;
the runs themselves are the end-to-end tests': tests/e2e/test_queue.py, test_e2e_recovery.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from handoff.errors import Busy, UsageError
from handoff.machinery.repo import Repo
from handoff.operations.resume import (
    ensure_resumable,
    in_line,
    left_behind,
    open_to_resume,
    torn_note,
)
from handoff.record import slots
from handoff.record.events import EventLog
from handoff.record.lock import TicketLock
from handoff.record.ticket import TicketDir
from tests.tickets import moved, new_ticket


def torn(path: Path) -> None:
    """A last line cut off mid-write, as a crash leaves it."""
    with path.open("a", encoding="utf-8") as log:
        log.write('{"kind": "launch", "ro')


def test_a_finished_ticket_has_nothing_to_resume(repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    moved(ws, "passed")
    ensure_resumable(ws)  # its orchestrator has still to write the final report
    ws.tdir.final_report.write_text("# passed\n", encoding="utf-8")
    with pytest.raises(UsageError) as passed:
        ensure_resumable(ws)
    assert passed.value.message == "T-1 has passed, nothing to resume"
    assert passed.value.hint == f"it passed review (its final report: {ws.tdir.final_report}):" \
                                " handoff finish T-1 (merges it) or handoff close T-1"
    moved(ws, "closed")
    with pytest.raises(UsageError) as closed:
        ensure_resumable(ws)
    assert closed.value.message == "T-1 is closed, nothing to resume"
    moved(ws, "implementing")
    ensure_resumable(ws)


def test_torn_note_names_the_unreadable_lines(repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    assert torn_note(ws.tdir) == ""
    torn(ws.tdir.events.path)
    assert torn_note(ws.tdir) == ("events.jsonl has 1 unreadable line(s) (line 2): skipped, "
                                  "every other event is kept")


def test_open_to_resume_mends_a_damaged_record_and_says_so(repo: Path,
                                                          handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    moved(ws, "implementing", round=1)
    ws.tdir.state_file.write_text("{", encoding="utf-8")
    torn(ws.tdir.events.path)
    opened, notes = open_to_resume(handoff_home, "T-1", repo)
    assert opened.state().phase == "implementing"
    assert len(notes) == 2
    assert "restored it from state.json.bak" in notes[0] and "unreadable line" in notes[1]
    assert open_to_resume(handoff_home, "T-1", repo)[1] == [torn_note(ws.tdir)]


def test_open_to_resume_refuses_before_it_mends_anything(repo: Path,
                                                         handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    moved(ws, "escalated", round=1)
    ws.tdir.state_file.write_text("{", encoding="utf-8")
    with pytest.raises(UsageError, match="--more-rounds must be at least 1"):
        open_to_resume(handoff_home, "T-1", repo, more_rounds=0)
    with TicketLock(ws.tdir.lock_file), pytest.raises(Busy):
        open_to_resume(handoff_home, "T-1", repo)
    assert ws.tdir.state_file.read_text(encoding="utf-8") == "{"  # left as it was
    moved(new_ticket(handoff_home, repo, "C-1"), "closed")
    with pytest.raises(UsageError, match="C-1 is closed, nothing to resume"):
        open_to_resume(handoff_home, "C-1", repo)


def test_left_behind_finds_the_runs_cut_off_at_work_first_then_the_queue_in_order(
        repo: Path, handoff_home: Path, tmp_path: Path) -> None:
    def ticket(name: str, phase: str, created: str, where: Path = repo) -> Path:
        made = new_ticket(handoff_home, where, name)
        moved(made, phase, created=created)
        return made.tdir.path

    later = ticket("Q-1", "queued", "2026-01-01T00:00:03")
    earlier = ticket("Q-2", "queued", "2026-01-01T00:00:01")
    at_work = ticket("R-1", "reviewing", "2026-01-01T00:00:05")
    waiting = ticket("W-1", "waiting", "2026-01-01T00:00:04")
    for name, phase in (("A-1", "awaiting-approval"), ("N-1", "needs-human"),
                        ("P-1", "passed")):
        ticket(name, phase, "2026-01-01T00:00:00")  # a person's, or done: not cut off
    held = ticket("H-1", "implementing", "2026-01-01T00:00:00")
    broken = ticket("B-1", "implementing", "2026-01-01T00:00:00")
    (broken / "state.json").write_text("{", encoding="utf-8")  # `resume B-1` mends it by name
    other = tmp_path / "other"
    other.mkdir()
    for argv in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "one"]):
        subprocess.run(["git", "-C", str(other), *argv], check=True, timeout=60)
    elsewhere = ticket("O-1", "implementing", "2026-01-01T00:00:09", other)

    stopped = ticket("S-1", "testing", "2026-01-01T00:00:00")  # by its person: not cut off
    log = EventLog(stopped / "events.jsonl")
    log.append("orchestrator", round=1)
    log.append("stopped", round=1, phase="testing")  # its orchestrator's own, on the SIGTERM
    log.append("stopped", round=1, by="hand")  # `handoff stop`'s
    restarted = ticket("S-2", "testing", "2026-01-01T00:00:07")
    log = EventLog(restarted / "events.jsonl")
    log.append("stopped", round=1, by="hand")
    log.append("orchestrator", round=1)  # resumed since: its run was cut off after that

    with TicketLock(held / "lock"):
        by_hand: list[TicketDir] = []
        assert [t.path for t in left_behind(handoff_home, by_hand=by_hand)] == [
            waiting, at_work, restarted, elsewhere, earlier, later]
        assert [t.path for t in by_hand] == [stopped]
        assert [t.path for t in left_behind(handoff_home, Repo.at(repo).key)] == [
            waiting, at_work, restarted, earlier, later]
    assert held in [t.path for t in left_behind(handoff_home)]


def test_in_line_waits_for_a_slot_or_a_place_in_the_queue(repo: Path,
                                                          handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    moved(ws, "implementing")
    assert not in_line(handoff_home, ws.tdir, bound=0.2)  # nobody took a place for it
    slot = slots.Slot(handoff_home, ws.tdir.path, "1", 1)
    try:
        assert slot.take() is None
        assert in_line(handoff_home, ws.tdir, bound=0.2)
    finally:
        slot.release()
    moved(ws, "needs-human")  # its run got as far as asking a person: done with its place
    assert in_line(handoff_home, ws.tdir, bound=0.2)
