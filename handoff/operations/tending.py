"""What a person does to a ticket at work: answer the question it waits on, recycle a peer
(its CLI started fresh on its brief), attach to its panes."""

from __future__ import annotations

import os
from pathlib import Path

from handoff.errors import UsageError
from handoff.loop.workspace import Workspace
from handoff.machinery.peers import ORCHESTRATOR_WINDOW
from handoff.machinery.tmux import Tmux
from handoff.next_steps import Verb, refused
from handoff.operations.opening import open_ticket, orchestrator_running
from handoff.operations.results import Answered, Recycled
from handoff.operations.resume import run_in_window
from handoff.phases import Phase, awaited
from handoff.record.store import atomic_write
from handoff.role import check_name


def answer(ws: Workspace, text: str) -> Path:
    """File the answer of a ticket that waits for a person. Only then: a peer at work reads
    no answer (the orchestrator passes one on when it has asked), so one at work is refused
    with what to do instead (attach, or recycle a stuck peer: the monitor's own way on from a
    stall is to ask a person, and the ticket then waits for the answer)."""
    state = ws.state()
    if state.phase != Phase.NEEDS_HUMAN:
        raise refused(Verb.ANSWER, state.phase, state.ticket, ws.tdir.path,
                      orchestrator_running(ws) is not None)
    if not text.strip():
        raise UsageError("the answer is empty")
    number = state.answers_used + 1
    path = ws.tdir.answer(number)
    atomic_write(path, text.strip() + "\n")
    ws.tdir.events.append("answer", round=state.round, role="human", file=path.name)
    return path


def answer_ticket(home: Path, ticket: str, repo: Path | None, text: str) -> Answered:
    """`handoff answer`: file the answer, and start the orchestrator again (in its tmux window)
    when none runs to pass it on."""
    ws = open_ticket(home, ticket, repo)
    path = answer(ws, text)
    if orchestrator_running(ws) is not None:
        return Answered(ticket, path, False)
    run_in_window(ws)
    return Answered(ticket, path, True)


def recycle_ticket(home: Path, ticket: str, repo: Path | None, role: str) -> Recycled:
    """`handoff recycle`: the role's CLI killed and started fresh on its current brief."""
    return Recycled(ticket, role, recycle(open_ticket(home, ticket, repo), role))


def recycle(ws: Workspace, role: str) -> Path:
    """Kill the role's CLI and start it fresh on its current brief (transcript kept)."""
    check_name(role)
    state = ws.state()
    working = awaited(state.roles.kind(role))
    if state.phase != working:
        raise refused(Verb.RECYCLE, state.phase, state.ticket, ws.tdir.path,
                      orchestrator_running(ws) is not None, role=role)
    brief = ws.latest_brief(role)
    if brief is None:
        raise UsageError(f"the {role} has not been briefed yet", "wait for its first round")
    if not ws.peers(state).tmux.has_session(state.session):
        raise refused(Verb.ATTACH, state.phase, state.ticket, ws.tdir.path,
                      orchestrator_running(ws) is not None)
    made = ws.ensure_worktree(state, role)
    if made:
        ws.tdir.events.append("worktree", round=state.round, role=role, **made)
    marker = ws.tdir.recycling(role)
    atomic_write(marker, str(os.getpid()))
    try:
        ws.launch(state, role, brief)
    finally:
        marker.unlink(missing_ok=True)
    ws.tdir.events.append("recycle", round=state.round, role=role, by="hand", brief=str(brief))
    return brief


def attach_argv(ws: Workspace, role: str | None) -> list[str]:
    state = ws.state()
    tmux = Tmux(state.socket, ws.home)
    if not tmux.has_session(state.session):
        raise refused(Verb.ATTACH, state.phase, state.ticket, ws.tdir.path,
                      orchestrator_running(ws) is not None)
    if role is not None:
        pane = ws.peers(state).pane(role if role != "orchestrator" else ORCHESTRATOR_WINDOW)
        if pane is None:
            raise UsageError(f"{state.ticket} has no {role} window yet")
        tmux.bring_forward(pane.id)
    return tmux.attach_argv(f"={state.session}")
