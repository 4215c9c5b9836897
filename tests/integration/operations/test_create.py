"""handoff.operations.create: the plans `start` reads, the ticket directory it writes, and
what it refuses before writing anything (real git repos, real ticket directories)."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.errors import UsageError
from handoff.machinery.peers import session_name
from handoff.operations.create import (
    NewTicket,
    create,
    queue_note,
    refuse_stale,
)
from handoff.record import slots
from handoff.record.ticket import ticket_dir
from tests.conftest import commit_file, git
from tests.tickets import PLAN, moved, new_ticket
from tests.unit.operations.test_create import write


def test_create_writes_a_ticket_awaiting_approval_from_the_checkouts_head(
        repo: Path, handoff_home: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    ws = new_ticket(handoff_home, repo, max_rounds=5)
    state = ws.tdir.load()
    assert (state.phase, state.round, state.base, state.base_commit) == (
        "awaiting-approval", 0, "HEAD", head)
    assert (state.max_rounds, state.repo, state.session) == (
        5, str(repo), session_name("T-1", ws.repo.key))
    assert ws.tdir.ticket_md.read_text(encoding="utf-8") == "# T-1\n\nFix calc\n"
    assert ws.tdir.plan_md.read_text(encoding="utf-8") == PLAN
    assert [e["kind"] for e in ws.tdir.events.read()[0]] == ["created"]
    assert git(repo, "branch", "--list", "handoff/*") == ""  # its branch comes with the run


def test_create_notes_uncommitted_changes_left_out(repo: Path, handoff_home: Path) -> None:
    (repo / "calc.py").write_text("changed\n", encoding="utf-8")
    made = create(handoff_home, NewTicket("N-1", repo, PLAN))
    assert len(made.notes) == 1 and "1 uncommitted change(s)" in made.notes[0]
    assert "are not part of N-1" in made.notes[0]
    quiet = create(handoff_home, NewTicket("N-2", repo, PLAN, notes=False))
    assert quiet.notes == []


@pytest.mark.parametrize(("phase", "hint"), [
    ("awaiting-approval", "waiting for approval: handoff plan T-1 (shows it, with what it was "
                          "grounded in: approve, edit, redraft or refuse it there) or handoff "
                          "resume T-1 --yes (approves it and starts the loop), or pick a new id"),
    ("passed", "handoff finish T-1 (merges it) or handoff close T-1, or pick a new id"),
    ("escalated", "handoff resume T-1 --more-rounds 1 (at a round or gate limit)"),
    ("implementing", "no orchestrator runs it (it was stopped, or cut off): handoff resume T-1"),
    ("closed", "it is closed; its record stays in"),
])
def test_a_taken_id_is_refused_with_what_to_do_by_where_it_stands(
        repo: Path, handoff_home: Path, phase: str, hint: str) -> None:
    ws = new_ticket(handoff_home, repo)
    moved(ws, phase)
    with pytest.raises(UsageError) as refused:
        new_ticket(handoff_home, repo)
    assert refused.value.message == f"ticket T-1 already exists in this repo (phase {phase})"
    assert hint in (refused.value.hint or "")


def test_a_branch_already_there_is_never_taken_over(repo: Path, handoff_home: Path) -> None:
    git(repo, "branch", "handoff/B-1")
    with pytest.raises(UsageError) as refused:
        new_ticket(handoff_home, repo, "B-1")
    assert "branch handoff/B-1 already exists" in refused.value.message
    assert "git branch -m handoff/B-1 handoff/B-1-old" in (refused.value.hint or "")
    assert not list(handoff_home.glob("*/B-1/state.json"))


def test_an_earlier_record_without_its_state_is_refused_and_left_alone(
        repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    tdir = ticket_dir(handoff_home, ws.repo.key, "S-1")
    refuse_stale(tdir)  # no folder: nothing to refuse
    tdir.path.mkdir()
    refuse_stale(tdir)  # an empty folder holds no record
    for name in ("events.jsonl", "review-report-1.md"):
        write(tdir.path / name, "old\n")
    with pytest.raises(UsageError) as refused:
        new_ticket(handoff_home, repo, "S-1")
    assert "holds an earlier record (2 entries: events.jsonl, review-report-1.md)" in \
        refused.value.message
    assert "state.json.bak" not in (refused.value.hint or "")
    write(tdir.backup_file, "{}\n")
    with pytest.raises(UsageError) as again:
        refuse_stale(tdir)
    assert "state.json.bak may hold its state" in (again.value.hint or "")
    assert sorted(p.name for p in tdir.path.iterdir()) == [
        "events.jsonl", "review-report-1.md", "state.json.bak"]  # nothing moved or removed


def test_a_max_rounds_below_one_is_refused(repo: Path, handoff_home: Path) -> None:
    with pytest.raises(UsageError, match="--max-rounds must be at least 1"):
        new_ticket(handoff_home, repo, max_rounds=-1)


def test_queue_note_says_where_a_new_ticket_waits(repo: Path, handoff_home: Path) -> None:
    handoff_home.mkdir(parents=True, exist_ok=True)
    write(handoff_home / "config.yaml", "max_parallel: 1\n")
    first, second = new_ticket(handoff_home, repo, "Q-1"), new_ticket(handoff_home, repo, "Q-2")
    new, jumps = new_ticket(handoff_home, repo, "Q-3"), new_ticket(handoff_home, repo, "Q-4",
                                                                    now=True)
    assert queue_note(new) == ""  # a slot is free
    at_work = slots.Slot(handoff_home, first.tdir.path, "1", 1)
    waiting = slots.Slot(handoff_home, second.tdir.path, "2", 1)
    try:
        assert at_work.take() is None
        assert queue_note(new) == (
            "1 of 1 tickets at work (max_parallel): it waits in the queue and starts by itself "
            "when a slot frees (handoff status shows its place)")
        assert waiting.take() is not None  # the slot is taken: Q-2 waits for it
        assert "it waits in the queue behind 1 and starts" in queue_note(new)
        assert queue_note(jumps) == ("1 of 1 tickets at work (max_parallel): --now starts it "
                                     "anyway")
    finally:
        waiting.release()
        at_work.release()


def test_a_base_branch_is_resolved_and_a_base_without_a_commit_refused(
        repo: Path, handoff_home: Path) -> None:
    git(repo, "checkout", "-q", "-b", "feature")
    tip = commit_file(repo, "feature.txt", "more\n")
    git(repo, "checkout", "-q", "main")
    ws = new_ticket(handoff_home, repo, "F-1", base="feature")
    assert (ws.tdir.load().base, ws.tdir.load().base_commit) == ("feature", tip)
    with pytest.raises(UsageError):
        new_ticket(handoff_home, repo, "F-2", base="no-such-branch")
