"""handoff.operations.standing: where a ticket stands, read from its directory alone (the rows
of `handoff status`), and its state recovered whatever happened to state.json. Real tickets,
made in the test's process; nothing runs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from handoff.errors import NotFound
from handoff.loop.workspace import Workspace
from handoff.operations.standing import (
    find_ticket,
    last_run,
    recovered_state,
    status,
)
from handoff.phases import Phase
from handoff.record.lock import TicketLock
from tests.tickets import moved, new_ticket


def run_of(ws: Workspace) -> str:
    return last_run(ws.tdir, ws.state(), None).run


def test_a_ticket_is_found_in_this_repository_first_then_anywhere_if_its_id_is_unique(
        repo: Path, handoff_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = new_ticket(handoff_home, repo, "T-1")
    other = tmp_path / "other"
    shutil.copytree(repo, other)
    there = new_ticket(handoff_home, other, "T-1")
    assert here.tdir.path != there.tdir.path
    assert find_ticket(handoff_home, "T-1", repo) == here.tdir
    assert find_ticket(handoff_home, "T-1", other) == there.tdir
    alone = new_ticket(handoff_home, other, "T-2")
    monkeypatch.chdir(tmp_path)
    assert find_ticket(handoff_home, "T-2", None) == alone.tdir, "unique: found anywhere"
    with pytest.raises(NotFound):
        find_ticket(handoff_home, "T-9", None)


def test_a_deleted_repository_still_finds_its_tickets(repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo, "T-1")
    shutil.rmtree(repo)
    assert find_ticket(handoff_home, "T-1", repo) == ws.tdir


def test_a_damaged_state_is_recovered_from_its_backup_then_its_event_log(
        repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    moved(ws, "implementing", round=2)
    found = recovered_state(ws.tdir)
    assert (found.source, found.note, found.state.round) == ("state.json", "", 2)
    ws.tdir.state_file.write_text("{torn")
    backup = recovered_state(ws.tdir)
    assert backup.source == "state.json.bak" and backup.state.round == 2
    assert "is not valid JSON" in backup.note and "the last state handoff wrote" in backup.note
    ws.tdir.backup_file.unlink()
    ws.tdir.events.append("phase", round=3, to="reviewing")
    logged = recovered_state(ws.tdir)
    assert logged.source == "events.jsonl" and "what the event log records" in logged.note
    assert (logged.state.phase, logged.state.round) == (Phase.REVIEWING, 3)
    assert logged.state.repo == str(repo.resolve()) and logged.state.ticket == "T-1"


def test_how_the_orchestrator_stands_is_read_from_its_events(
        repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    assert run_of(ws) == "not started"
    assert "handoff" in last_run(ws.tdir, ws.state(), None).hint
    ws.tdir.events.append("starting")
    assert run_of(ws) == "starting"
    ws.tdir.events.append("orchestrator")
    assert run_of(ws) == "died", "it left no word"
    ws.tdir.events.append("error", message="boom")
    crashed = last_run(ws.tdir, ws.state(), None)
    assert (crashed.run, crashed.error) == ("crashed", "boom")
    ws.tdir.events.append("orchestrator")
    ws.tdir.events.append("stopped")
    assert run_of(ws) == "stopped", "an error of an earlier run is not this one's"
    ws.tdir.events.append("orchestrator")
    assert run_of(ws) == "died", "nor is an earlier run's stop"
    running = last_run(ws.tdir, ws.state(), os.getpid())
    assert (running.run, running.hint) == ("running", "")
    moved(ws, "closed")
    assert run_of(ws) == "finished"


def test_status_lists_every_ticket_and_a_broken_one_without_hiding_the_others(
        repo: Path, handoff_home: Path) -> None:
    good = new_ticket(handoff_home, repo, "T-1")
    broken = new_ticket(handoff_home, repo, "T-2")
    moved(broken, "implementing", round=1)
    broken.tdir.state_file.write_text("{torn")
    rows = {row["ticket"]: row for row in status(handoff_home)}
    assert rows["T-1"]["phase"] == Phase.AWAITING_APPROVAL and rows["T-1"]["run"] == \
        "not started"
    assert rows["T-1"]["dir"] == str(good.tdir.path)
    assert (rows["T-2"]["phase"], rows["T-2"]["run"]) == ("unreadable", "unknown")
    assert "state.json.bak says phase implementing, round 1" in rows["T-2"]["hint"]
    held = TicketLock(good.tdir.lock_file)
    held.acquire()
    try:
        [row] = status(handoff_home, "T-1", repo)
    finally:
        held.release()
    assert (row["orchestrator"], row["run"]) == (os.getpid(), "running")
