"""handoff.operations.gc.found: the ticket records gc reads (state.json, else its backup, else
the event log), what it skips under HANDOFF_HOME, and how a failed removal is said."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from handoff.errors import HandoffError
from handoff.operations.gc.found import Leftover, Record, failing, read_records, repo_at
from handoff.phases import Phase
from handoff.record.ticket import State, TicketDir

KEY = "repo-0123456789"


def saved(home: Path, ticket: str, repo: str = "", phase: Phase = Phase.IMPLEMENTING,
          socket: str = "handoff", session: str = "") -> Record:
    """A ticket record as the orchestrator writes it, and what gc reads of it."""
    tdir = TicketDir(home / KEY / ticket)
    tdir.path.mkdir(parents=True)
    tdir.save(State(ticket=ticket, repo=repo, repo_key=KEY, phase=phase, socket=socket,
                    session=session))
    [record] = [r for r in read_records(home) if r.ticket == ticket]
    return record


def test_a_record_is_read_from_its_state_and_names_its_repository(
        handoff_home: Path, repo: Path) -> None:
    live = saved(handoff_home, "T-1", str(repo.resolve()))
    assert live.repo is not None and live.repo.top == repo.resolve() and not live.closed
    closed = saved(handoff_home, "T-2", str(repo.resolve()), Phase.CLOSED)
    assert closed.closed and closed.state.phase == Phase.CLOSED


def test_a_damaged_state_falls_back_on_its_backup_then_its_event_log(
        handoff_home: Path, repo: Path) -> None:
    record = saved(handoff_home, "T-1", str(repo.resolve()), Phase.CLOSED)
    record.tdir.state_file.write_text("{torn")
    [again] = read_records(handoff_home)
    assert again.closed, "state.json.bak still says closed"
    record.tdir.backup_file.unlink()
    record.tdir.state_file.unlink()
    record.tdir.events.append("created", repo=str(repo.resolve()), base="main")
    record.tdir.events.append("phase", to="closed")
    [from_log] = read_records(handoff_home)
    assert from_log.closed and from_log.repo is not None and from_log.repo.top == repo.resolve()


def test_what_is_no_ticket_record_is_not_read(handoff_home: Path, tmp_path: Path) -> None:
    saved(handoff_home, "T-1")
    (handoff_home / KEY / "notes").mkdir()  # no record file in it
    (handoff_home / KEY / "bad id!").mkdir()
    (handoff_home / KEY / "bad id!" / "state.json").write_text("{}")
    elsewhere = tmp_path / "elsewhere" / "T-9"
    elsewhere.mkdir(parents=True)
    shutil.copy(handoff_home / KEY / "T-1" / "state.json", elsewhere / "state.json")
    (handoff_home / KEY / "T-9").symlink_to(elsewhere)
    (handoff_home / KEY / "loose.json").write_text("{}")
    assert [r.ticket for r in read_records(handoff_home)] == ["T-1"]
    assert read_records(tmp_path / "no-home") == []


def test_a_repository_counts_only_where_its_top_folder_still_is(repo: Path,
                                                                tmp_path: Path) -> None:
    found = repo_at(str(repo))
    assert found is not None and found.top == repo.resolve()
    inner = repo / "sub"
    inner.mkdir()
    assert repo_at(str(inner)) is None, "git finds the repository around it: not its top"
    assert repo_at(str(tmp_path / "gone")) is None and repo_at("") is None
    plain = tmp_path / "plain"
    plain.mkdir()
    assert repo_at(str(plain)) is None


def test_a_removal_that_fails_is_said_on_its_item_and_gc_goes_on() -> None:
    item = Leftover("worktree", "/x", "ticket T-1 is closed", removable=True)
    with failing(item):
        raise HandoffError("git said no")
    assert not item.removable and item.why == \
        "ticket T-1 is closed; removing it failed: git said no"
    assert json.loads(json.dumps(item.fields()))["why"] == item.why, "what --json prints"
    other = Leftover("session", "s:x", "gone", removable=True)
    with failing(other):
        pass
    assert other.removable and other.why == "gone"
