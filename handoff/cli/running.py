"""A ticket's run as the command line holds it (`start`, `resume`, `demo`): its plan approved,
asked at the terminal when a person is there; its orchestrator run in this terminal or its
tmux window; and its end said, with the exit code a script tells the outcomes apart by."""

from __future__ import annotations

import select
import sys
from typing import TYPE_CHECKING

import typer

from handoff.cli import output
from handoff.errors import (
    EXIT_ESCALATED,
    EXIT_INTERRUPTED,
    EXIT_NEEDS_HUMAN,
    EXIT_OK,
    HandoffError,
)
from handoff.phases import Phase

if TYPE_CHECKING:
    from handoff.loop.workspace import Workspace
    from handoff.operations.results import Told
    from handoff.record.ticket import State

class PlanRefused(HandoffError):
    """The person at the terminal said no to the plan: the ticket is closed (exit 1)."""


#: how a command that waits for a ticket's run ends: a script tells a ticket that passed from
#: one that needs a person or was escalated; a run stopped mid-way is EXIT_INTERRUPTED
OUTCOME_CODES = {Phase.PASSED: EXIT_OK, Phase.CLOSED: EXIT_OK, Phase.ESCALATED: EXIT_ESCALATED,
                 Phase.NEEDS_HUMAN: EXIT_NEEDS_HUMAN,
                 # a planner's drafted plan waits for its person's approval
                 Phase.AWAITING_APPROVAL: EXIT_NEEDS_HUMAN}


def run_here(ws: Workspace) -> int:
    """The orchestrator run in this terminal (--foreground), its events printed as they come;
    the exit code of how it ended."""
    from handoff.loop.orchestrator import Orchestrator
    from handoff.operations.render import event_line

    state = Orchestrator(ws, lambda event: typer.echo(event_line(event))).run()
    return outcome(ws, state)


def outcome(ws: Workspace, state: State, after: Told | None = None) -> int:
    """A run's end said: the final report (passed or escalated), then after; its exit code."""
    if state.phase in (Phase.PASSED, Phase.ESCALATED):
        typer.echo(ws.tdir.final_report.read_text(encoding="utf-8"))
    if after is not None:
        output.show(after)
    return OUTCOME_CODES.get(state.phase, EXIT_INTERRUPTED)


def approve(ws: Workspace, yes: bool) -> bool:
    """The ticket's plan approved: by --yes, else by the person at this terminal when there is
    one (the plan shown, then asked); with no one to ask, the ticket waits for approval
    (False). A person's no closes it (PlanRefused), and Ctrl-C too (KeyboardInterrupt)."""
    from handoff.operations import approval

    if yes:
        approval.approve(ws)
        typer.echo(approval.sandbox_line(ws))
        return True
    if sys.stdin is None or not sys.stdin.isatty():
        approval.ask_for_approval(ws)
        return False
    typer.echo(ws.tdir.plan_md.read_text(encoding="utf-8"))
    typer.echo("".join(f"  {line}\n" for line in approval.approval_summary(ws)))
    try:
        approved = _ask(f"Approve this plan for {ws.tdir.ticket}?")
    except (typer.Abort, KeyboardInterrupt):  # Ctrl-C (or the terminal's end of input)
        typer.echo(f"\n{approval.refuse(ws, 'Ctrl-C')}", err=True)
        raise KeyboardInterrupt from None  # exit 130, as any command stopped by Ctrl-C
    if not approved:
        raise PlanRefused(approval.refuse(ws, "no"))
    approval.approve(ws)
    return True


def _ask(question: str) -> bool:
    """y/N at the terminal."""
    return ask_line(f"{question} [y/N]: ").strip().lower() in ("y", "yes")


def at_terminal() -> bool:
    """A person is at this command's terminal to be asked."""
    return sys.stdin is not None and sys.stdin.isatty()


def ask_line(prompt: str) -> str:
    """One line typed at the terminal. Read only once select says a line is there: the kernel
    may give a Ctrl-C to another thread of this process (a library's timer), and a read
    blocked in C would then wait for the next keystroke; between selects Python raises it here
    at once. typer.Abort at the end of input."""
    typer.echo(prompt, nl=False)
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], 0.2)
        if ready:
            line = sys.stdin.readline()
            if not line:
                raise typer.Abort()  # the terminal's end of input
            return line


def launch(ws: Workspace, foreground: bool) -> int:
    """An approved ticket's orchestrator run: here (foreground: the run's exit code), or in its
    tmux window (0, once it runs there)."""
    from handoff.operations import resume

    if foreground:
        return run_here(ws)
    output.show(resume.run_approved(ws))
    return 0
