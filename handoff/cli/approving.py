"""`handoff plan`: a plan waiting for approval, shown with what it was grounded in and how it
will run, then approved, edited, drafted again (a planner's) or refused by its person. The core
is handoff.operations.drafting; `start --ticket` at a terminal waits for the draft and asks the
same here (after_drafting)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

import typer

from handoff.cli import output, running
from handoff.cli.options import RepoOpt, TicketArg
from handoff.errors import EXIT_NEEDS_HUMAN, HandoffError, UsageError
from handoff.phases import Phase

if TYPE_CHECKING:
    from handoff.loop.workspace import Workspace

#: seconds between looks at a ticket whose planner drafts, while its person waits at `start`
LOOK = 0.25
#: seconds a drafting ticket may have no orchestrator (its window starting one) before the
#: wait at `start` ends, saying so
NO_ORCHESTRATOR = 15.0


def plan(
    ticket: TicketArg,
    approve: Annotated[bool, typer.Option("--approve", help="Approve it and start the loop "
                                          "(as resume --yes).")] = False,
    edit: Annotated[bool, typer.Option("--edit", help="Edit it in $VISUAL or $EDITOR (a copy, "
                                       "checked as a plan before it is taken).")] = False,
    redraft: Annotated[str | None, typer.Option(
        "--redraft", metavar="NOTE", help="Ask its planner for another draft, with what to "
        "change.", show_default=False)] = None,
    refuse: Annotated[bool, typer.Option("--refuse", help="Say no: nothing of the ticket is "
                                         "kept.")] = False,
    repo: RepoOpt = None,
) -> None:
    """Show the plan waiting for approval, with what it was grounded in (a planner's: the files
    it read) and how it will run; or approve, edit, redraft or refuse it."""
    from handoff.operations import drafting
    from handoff.record.store import state_home

    if sum((approve, edit, redraft is not None, refuse)) > 1:
        raise UsageError("one of --approve, --edit, --redraft and --refuse at a time",
                         f"handoff plan {ticket} --edit, then handoff plan {ticket} --approve")
    home = state_home()
    ws = drafting.waiting_plan(home, ticket, repo)
    if approve:
        output.show(drafting.approve(home, ticket, repo))
    elif edit:
        output.show(drafting.edit(ws))
    elif redraft is not None:
        output.show(drafting.redraft(ws, redraft))
    elif refuse:
        output.show(drafting.refused(ws))
    else:
        output.show(drafting.show(ws))


def after_drafting(ws: Workspace) -> int:
    """`start --ticket` at a terminal: the person waits for the planner's draft, then is shown
    it (as `handoff plan` shows it) and asked: approve, edit, redraft, refuse, or later.
    Ctrl-C leaves the ticket as it is (drafting, or waiting for approval)."""
    from handoff.operations import drafting

    ticket = ws.tdir.ticket
    typer.echo(f"{ticket}: waiting for its planner's draft (Ctrl-C leaves it drafting; "
               f"handoff plan {ticket} shows it once drafted)")
    try:
        while True:
            phase = _drafted(ws)
            if phase != Phase.AWAITING_APPROVAL:
                from handoff.next_steps import hint

                typer.echo(f"{ticket} is {phase}: {hint(phase, ticket, ws.tdir.path, False)}")
                return EXIT_NEEDS_HUMAN if phase == Phase.NEEDS_HUMAN else 0
            output.show(drafting.show(ws))
            while True:
                choice = running.ask_line(
                    "Approve it? [y]es, [e]dit, [r]edraft with a note, [n]o, [l]ater: ")
                choice = choice.strip().lower()[:1]
                if choice == "y":
                    output.show(drafting.approve(ws.home, ticket, ws.repo.top))
                    return 0
                if choice == "n":
                    output.show(drafting.refused(ws))
                    return 1
                if choice == "e":
                    try:
                        output.show(drafting.edit(ws))
                    except HandoffError as exc:
                        output.failed(ticket, exc)
                    continue
                if choice == "r":
                    note = running.ask_line("What should the next draft do differently? ")
                    try:
                        output.show(drafting.redraft(ws, note))
                    except HandoffError as exc:
                        output.failed(ticket, exc)
                        continue
                    break  # the next draft is waited for, then shown
                typer.echo(f"{ticket} waits for your approval: handoff plan {ticket}")
                return 0
    except (KeyboardInterrupt, typer.Abort):
        typer.echo(f"\n{ticket} is left as it is ({ws.state().phase}): handoff plan {ticket} "
                   "once its plan is drafted", err=True)
        raise KeyboardInterrupt from None


def _drafted(ws: Workspace) -> str:
    """The ticket's phase once its planner is done (bounded: the orchestrator's life; a
    drafting ticket that no orchestrator runs ends the wait)."""
    from handoff.record.lock import holder

    alone_since: float | None = None
    while True:
        phase = ws.state().phase
        if phase != Phase.PLANNING:
            return phase
        if holder(ws.tdir.lock_file) is None:
            alone_since = alone_since or time.monotonic()
            if time.monotonic() - alone_since > NO_ORCHESTRATOR:
                return phase
        else:
            alone_since = None
        time.sleep(LOOK)
