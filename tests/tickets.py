"""Tickets made in the test's own process, as `handoff start` makes them (no terminal, so not
approved): real git, a real ticket directory under the test's HANDOFF_HOME, nothing running.
For the unit tests of the ticket verbs (handoff.operations.create, resume, closing, ...)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from handoff.loop.workspace import Workspace
from handoff.operations.create import NewTicket, create
from handoff.phases import Phase
from handoff.record.ticket import State
from tests.harness import ADD_ONLY, FIX_ADD, plan_text

#: a one-round plan of the scripted agents, with a test command (the gate)
PLAN = plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY)


def new_ticket(home: Path, repo: Path, ticket: str = "T-1", plan: str = PLAN,
               **more: Any) -> Workspace:
    """A ticket created as `start` creates it: awaiting approval, its plan and state written
    (more: NewTicket's other fields)."""
    return create(home, NewTicket(ticket=ticket, repo=repo, plan_text=plan, **more)).workspace


def moved(ws: Workspace, phase: str, **fields: object) -> State:
    """The ticket's state.json put where a run would have left it (phase and fields)."""
    state = ws.state()
    state.phase = Phase(phase)
    for name, value in fields.items():
        setattr(state, name, value)
    ws.tdir.save(state)
    return state
