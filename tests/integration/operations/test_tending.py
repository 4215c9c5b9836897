"""handoff.operations.tending: a ticket at work answered, a peer recycled, a person attached
to its panes; real ticket directories, a real tmux session (the runs themselves are the
end-to-end tests': tests/e2e/test_recovery.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from handoff.errors import UsageError
from handoff.loop.workspace import Workspace
from handoff.machinery.tmux import Tmux
from handoff.operations.tending import answer, answer_ticket, attach_argv, recycle
from handoff.record.lock import TicketLock
from tests.tickets import moved, new_ticket

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]

#: the hint of every refusal of a ticket whose plan waits (handoff.next_steps)
APPROVAL = "its plan is waiting for approval: handoff plan T-1 (shows it, with what it was " \
    "grounded in: approve, edit, redraft or refuse it there) or handoff resume T-1 --yes " \
    "(approves it and starts the loop)"

def with_session(ws: Workspace) -> Tmux:
    """The ticket's tmux session, its orchestrator window a sleeping program."""
    state = ws.state()
    ws.peers(state).ensure_session(ws.repo.top, SLEEPER)
    return Tmux(state.socket, ws.home)


def test_an_answer_goes_only_to_a_ticket_waiting_for_one(repo: Path,
                                                         handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    with pytest.raises(UsageError) as refused:
        answer(ws, "use the second API")
    assert refused.value.message == "T-1 is not waiting for a person (phase awaiting-approval)"
    assert refused.value.hint == APPROVAL
    moved(ws, "implementing", round=1)
    with TicketLock(ws.tdir.lock_file), pytest.raises(UsageError) as at_work:
        answer(ws, "use the second API")  # a peer at work reads no answer: say what does
    assert at_work.value.hint == "it is at work, its orchestrator carries it on by itself: " \
        "handoff attach T-1 (watch it) or handoff recycle T-1 ROLE (a stuck peer, started " \
        "afresh on its brief)"
    moved(ws, "needs-human", round=2, answers_used=1)
    with pytest.raises(UsageError, match="the answer is empty"):
        answer(ws, " \n\t")
    path = answer(ws, "  use the second API\n\n")
    assert path == ws.tdir.answer(2)
    assert path.read_text(encoding="utf-8") == "use the second API\n"
    [filed] = [e for e in ws.tdir.events.read()[0] if e["kind"] == "answer"]
    assert (filed["round"], filed["role"], filed["file"]) == (2, "human", path.name)


def test_an_answer_to_a_running_orchestrator_starts_none(repo: Path,
                                                         handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    state = moved(ws, "needs-human", round=1)
    with TicketLock(ws.tdir.lock_file):  # its orchestrator waits for the answer
        answered = answer_ticket(handoff_home, "T-1", repo, "go on")
    assert (answered.path, answered.restarted) == (ws.tdir.answer(1), False)
    assert not Tmux(state.socket, handoff_home).has_session(state.session)


def test_attach_argv_brings_the_asked_window_forward(repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    state = ws.state()
    with pytest.raises(UsageError) as gone:
        attach_argv(ws, None)
    assert gone.value.message == "the peers of T-1 are not running"
    # where it stands says what starts them: its plan waits for approval
    assert gone.value.hint == APPROVAL
    moved(ws, "implementing", round=1)
    with pytest.raises(UsageError) as idle:
        attach_argv(ws, None)
    assert idle.value.hint == "no orchestrator runs it (it was stopped, or cut off): handoff " \
                              "resume T-1"
    moved(ws, "closed")
    with pytest.raises(UsageError) as closed:
        attach_argv(ws, None)
    assert closed.value.hint == f"it is closed; its record stays in {ws.tdir.path} " \
                                "(final-report.md, transcripts/): to work on it again, start a " \
                                "new ticket", "its record, never a resume that refuses it"
    moved(ws, "awaiting-approval")
    tmux = with_session(ws)
    argv = attach_argv(ws, None)
    assert argv == [*tmux.base(), "attach-session", "-t", f"={state.session}"]
    assert attach_argv(ws, "orchestrator") == argv
    with pytest.raises(UsageError, match="T-1 has no reviewer window yet"):
        attach_argv(ws, "reviewer")


def test_recycle_refuses_a_peer_with_nothing_to_redo(repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    with pytest.raises(UsageError) as idle:
        recycle(ws, "implementer")
    assert "has no work in progress (phase awaiting-approval)" in idle.value.message
    assert idle.value.hint == APPROVAL
    moved(ws, "implementing", round=1)
    with pytest.raises(UsageError, match="the implementer has not been briefed yet"):
        recycle(ws, "implementer")
    with pytest.raises(UsageError, match="the reviewer of T-1 has no work in progress"):
        recycle(ws, "reviewer")  # the reviewers' turn has not come
    brief = ws.tdir.brief("implementer", 1)
    brief.parent.mkdir(parents=True)
    brief.write_text("# round 1\n", encoding="utf-8")
    with pytest.raises(UsageError, match="the peers of T-1 are not running"):
        recycle(ws, "implementer")
    with pytest.raises(UsageError):
        recycle(ws, "../implementer")  # a role is a name, never a path
    assert not ws.tdir.recycling("implementer").exists()
    assert os.listdir(ws.tdir.path / "inbox" / "implementer") == ["brief-1.md"]
