"""handoff.operations.gc.found: the ticket records gc reads (state.json, else its backup, else
the event log), what it skips under HANDOFF_HOME, and how a failed removal is said."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from handoff.errors import HandoffError
from handoff.operations.gc.found import Leftover, Record, failing, read_records
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
