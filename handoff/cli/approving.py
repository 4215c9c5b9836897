"""`handoff plan`: a plan waiting for approval, shown with what it was grounded in and how it
will run, then approved, edited, drafted again (a planner's) or refused by its person. The core
is handoff.operations.drafting."""

from __future__ import annotations

from typing import Annotated

import typer

from handoff.cli import output
from handoff.cli.options import RepoOpt, TicketArg
from handoff.errors import UsageError


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
