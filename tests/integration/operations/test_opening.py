"""handoff.operations.opening: a ticket found by its id, whether an orchestrator holds it, and
a damaged state.json put back before `resume` or `close` (real ticket directories)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from handoff.errors import Busy, NotFound, UsageError
from handoff.operations.opening import ensure_idle, open_ticket, orchestrator_running, restore_state
from handoff.record.lock import TicketLock
from tests.tickets import moved, new_ticket

DAMAGED = "{ not json"


def test_open_ticket_finds_it_in_its_repo_and_anywhere_by_a_unique_id(
        repo: Path, handoff_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = new_ticket(handoff_home, repo)
    assert open_ticket(handoff_home, "T-1", repo).tdir == made.tdir
    elsewhere = tmp_path / "elsewhere"  # no repo: the id alone finds it
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert open_ticket(handoff_home, "T-1", None).tdir == made.tdir
    with pytest.raises(NotFound):
        open_ticket(handoff_home, "T-2", repo)


def test_a_held_lock_is_a_running_orchestrator_and_refuses_another(
        repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    moved(ws, "implementing")  # at work: the refusal's hint is to watch it, not to start it
    assert orchestrator_running(ws) is None
    ensure_idle(ws.tdir)  # nobody holds it: no refusal
    with TicketLock(ws.tdir.lock_file):
        assert orchestrator_running(ws) == os.getpid()
        with pytest.raises(Busy) as refused:
            ensure_idle(ws.tdir)
        assert f"pid {os.getpid()}" in refused.value.message
        assert "handoff attach T-1" in (refused.value.hint or "")
    assert orchestrator_running(ws) is None


def test_a_readable_state_is_left_as_it_is(repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    before = ws.tdir.state_file.read_bytes()
    assert restore_state(ws.tdir, rebuild=False) == ""
    assert ws.tdir.state_file.read_bytes() == before
    assert not list(ws.tdir.path.glob("state.json.corrupt-*"))


def test_a_damaged_state_comes_back_from_its_backup_and_is_kept(
        repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    moved(ws, "implementing", round=2)
    ws.tdir.state_file.write_text(DAMAGED, encoding="utf-8")
    note = restore_state(ws.tdir, rebuild=False)
    assert "is not valid JSON" in note and "restored it from state.json.bak" in note
    assert "kept as state.json.corrupt-1" in note
    back = ws.tdir.load()
    assert (back.phase, back.round) == ("implementing", 2)
    assert (ws.tdir.path / "state.json.corrupt-1").read_text(encoding="utf-8") == DAMAGED
    restored = [e for e in ws.tdir.events.read()[0] if e["kind"] == "state-restored"]
    assert [(e["source"], e["kept"]) for e in restored] == [("state.json.bak",
                                                             "state.json.corrupt-1")]


def test_without_a_backup_only_close_rebuilds_from_the_event_log(
        repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    for damaged in (ws.tdir.state_file, ws.tdir.backup_file):
        damaged.write_text(DAMAGED, encoding="utf-8")
    with pytest.raises(UsageError) as refused:
        restore_state(ws.tdir, rebuild=False)  # resume: the loop needs more than the log
    assert "state.json.bak cannot be read either" in refused.value.message
    assert "handoff close T-1" in (refused.value.hint or "")
    assert ws.tdir.state_file.read_text(encoding="utf-8") == DAMAGED  # nothing changed

    note = restore_state(ws.tdir, rebuild=True)  # close: enough to find the peers and end it
    assert "restored it from events.jsonl" in note
    rebuilt = ws.tdir.load()
    assert (rebuilt.ticket, rebuilt.repo, rebuilt.phase) == ("T-1", str(repo),
                                                              "awaiting-approval")
    assert rebuilt.base_commit == ws.repo.resolve("HEAD")
