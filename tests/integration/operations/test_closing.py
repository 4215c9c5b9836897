"""handoff.operations.closing: `stop` and `close` from the ticket directory alone, with real
tmux sessions, real git worktrees and a repository that may be gone."""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from handoff.errors import NotFound, UsageError, WorkAtRisk
from handoff.loop.workspace import Workspace
from handoff.machinery.peers import with_env
from handoff.machinery.tmux import Tmux
from handoff.operations.approval import approve
from handoff.operations.closing import close, close_ticket, forget_ticket, stop, stop_ticket
from handoff.operations.gc import Options, collect
from tests.conftest import git
from tests.tickets import new_ticket

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def kinds(ws: Workspace, kind: str) -> list[dict[str, object]]:
    return [e for e in ws.tdir.events.read()[0] if e["kind"] == kind]


def at_work(home: Path, repo: Path) -> Workspace:
    """An approved ticket whose implementer has its worktree and its session a window."""
    ws = new_ticket(home, repo)
    state = approve(ws)
    ws.ensure_worktree(state, "implementer")
    ws.peers(state).ensure_session(repo, SLEEPER)
    return ws


def test_stop_ends_the_session_and_keeps_everything_else(repo: Path,
                                                         handoff_home: Path) -> None:
    ws = at_work(handoff_home, repo)
    state = ws.state()
    tmux = Tmux(state.socket, handoff_home)
    assert tmux.has_session(state.session)
    unread = Path(with_env({"ANTHROPIC_API_KEY": "sk-1"}, ["true"], handoff_home,
                           owner=state.session)[-1])  # a window ended before it started
    stopped = stop(ws)
    assert not unread.exists(), "its environment is not left in .launch"
    assert (stopped.ticket, stopped.orchestrator, stopped.session) == ("T-1", None, True)
    assert stopped.said == ["T-1 stopped (orchestrator: not running, peers: stopped)"]
    assert not tmux.has_session(state.session)
    assert ws.worktrees.path("implementer").is_dir() and ws.state().phase == "implementing"
    [event] = kinds(ws, "stopped")
    assert event["by"] == "hand" and event["session"] is True
    assert stop(ws).session is False  # nothing left to stop: said so


def test_stop_works_from_the_event_log_alone(repo: Path, handoff_home: Path) -> None:
    ws = at_work(handoff_home, repo)
    state = ws.state()
    for damaged in (ws.tdir.state_file, ws.tdir.backup_file):
        damaged.write_text("{", encoding="utf-8")
    stopped = stop_ticket(handoff_home, "T-1", repo)
    assert stopped.session  # the log and the ticket's id say where its peers run
    assert not Tmux(state.socket, handoff_home).has_session(state.session)
    assert any("is not valid JSON" in note for note in stopped.notes)
    assert ws.tdir.state_file.read_text(encoding="utf-8") == "{"  # stop mends nothing


def test_close_refuses_uncommitted_work_then_force_keeps_a_patch_of_it(
        repo: Path, handoff_home: Path) -> None:
    ws = at_work(handoff_home, repo)
    state = ws.state()
    checkout = ws.worktrees.path("implementer")
    (checkout / "calc.py").write_text("unfinished\n", encoding="utf-8")
    with pytest.raises(WorkAtRisk):
        close(ws)
    assert ws.state().phase == "implementing" and checkout.is_dir()
    assert Tmux(state.socket, handoff_home).has_session(state.session)  # nothing was touched

    closed = close(ws, force=True)
    assert closed.removed == ("implementer",) and not checkout.exists()
    assert closed.branch == "handoff/T-1" and git(repo, "branch", "--list", "handoff/T-1")
    assert closed.discarded_work is not None and "unfinished" in \
        closed.discarded_work.read_text(encoding="utf-8")
    assert closed.stopped is not None and closed.stopped.session
    assert ws.state().phase == "closed"
    again = close(ws)  # closed already: nothing moves, nothing is stopped
    assert again.stopped is None and again.removed == ()
    assert len([e for e in kinds(ws, "phase") if e["to"] == "closed"]) == 1


def test_a_ticket_closed_before_approval_never_had_a_branch(repo: Path,
                                                            handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    closed = close(ws)
    assert (closed.branch, closed.removed, closed.repo_gone) == ("", (), False)
    assert closed.said[0].startswith("T-1 closed; worktrees removed: none; it had no branch")


def test_close_with_the_repository_gone_keeps_the_record(repo: Path, handoff_home: Path) -> None:
    ws = at_work(handoff_home, repo)
    shutil.rmtree(repo)
    closed = close_ticket(handoff_home, "T-1", repo)
    assert closed.repo_gone and closed.branch == ""
    assert any(f"the repository {repo} is gone" in note for note in closed.notes)
    assert ws.tdir.load().phase == "closed" and ws.tdir.events.path.is_file()


def test_close_mends_a_damaged_state_before_it_closes(repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    ws.tdir.state_file.write_text("{", encoding="utf-8")
    closed = close_ticket(handoff_home, "T-1", repo)
    assert any("restored it from state.json.bak" in note for note in closed.notes)
    assert ws.tdir.load().phase == "closed"
    assert (ws.tdir.path / "state.json.corrupt-1").read_text(encoding="utf-8") == "{"


def test_forget_deletes_a_closed_tickets_record_and_refuses_any_other(
        repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    approve(ws)
    with pytest.raises(UsageError) as open_one:
        forget_ticket(handoff_home, "T-1", repo)
    assert open_one.value.message == ("T-1 is implementing, not closed: only a closed ticket's "
                                      "record is forgotten")
    assert ws.tdir.path.is_dir(), "nothing removed"
    close_ticket(handoff_home, "T-1", repo)
    planted = handoff_home.parent / "kept.txt"
    planted.write_text("a person's file\n", encoding="utf-8")
    (ws.tdir.path / "cli").mkdir(exist_ok=True)
    (ws.tdir.path / "cli" / "link").symlink_to(planted)  # as a peer could plant one
    forgotten = forget_ticket(handoff_home, "T-1", repo)
    assert forgotten.said == [f"T-1 forgotten: its record {ws.tdir.path} is deleted"]
    assert not ws.tdir.path.exists() and planted.read_text() == "a person's file\n"
    with pytest.raises(NotFound):
        forget_ticket(handoff_home, "T-1", repo)


def test_gc_older_than_forgets_only_the_long_closed(repo: Path, handoff_home: Path) -> None:
    old, recent, working = (new_ticket(handoff_home, repo, name) for name in ("O-1", "R-1", "W-1"))
    for ws in (old, recent):
        close_ticket(handoff_home, ws.tdir.ticket, repo)
    state = old.state()
    state.updated = "2026-01-01T00:00:00+00:00"
    old.tdir.path.joinpath("state.json").write_text(json.dumps(asdict(state)),
                                                     encoding="utf-8")
    state = working.state()
    state.updated = "2026-01-01T00:00:00+00:00"
    working.tdir.save(state)
    dry = collect(handoff_home, Options(dry_run=True, older_than=30))
    [would] = [item for item in dry if item.kind == "record"]
    assert would.path == str(old.tdir.path) and not would.removed and old.tdir.path.is_dir()
    assert "ticket O-1 was closed" in would.why and "(--older-than 30)" in would.why
    done = [item for item in collect(handoff_home, Options(older_than=30))
            if item.kind == "record"]
    assert [(i.path, i.removed) for i in done] == [(str(old.tdir.path), True)]
    assert not old.tdir.path.exists() and recent.tdir.path.is_dir() and working.tdir.path.is_dir()
    assert [i for i in collect(handoff_home, Options()) if i.kind == "record"] == [], \
        "without --older-than, no record is forgotten"
