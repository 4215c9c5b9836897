"""handoff.operations.closing: `stop` and `close` from the ticket directory alone, with real
tmux sessions, real git worktrees and a repository that may be gone."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from handoff.errors import WorkAtRisk
from handoff.loop.workspace import Workspace
from handoff.machinery.tmux import Tmux
from handoff.operations.approval import approve
from handoff.operations.closing import close, close_ticket, stop, stop_ticket
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
    stopped = stop(ws)
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
