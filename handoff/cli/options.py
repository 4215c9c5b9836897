"""The options and arguments many commands share, spelled once, with what a TAB completes
them to. A completion runs on every TAB: it reads the tickets' folders alone and never fails."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

RepoOpt = Annotated[Path | None, typer.Option("--repo", help="The repository (default: here).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output (docs/cli.md).")]


def ticket_ids(incomplete: str) -> list[str]:
    """Shell completion of TICKET: the ids of the tickets handoff keeps (their folders only:
    a TAB must be quick and work whatever state a ticket is in)."""
    from handoff.record.store import state_home
    from handoff.record.ticket import all_tickets

    return sorted({t.ticket for t in all_tickets(state_home()) if t.ticket.startswith(incomplete)})


def roles(incomplete: str) -> list[str]:
    """The roles of the team the configuration here gives (the two of every ticket when it
    cannot be read: a TAB never fails)."""
    from handoff import config as config_mod
    from handoff.errors import HandoffError
    from handoff.machinery.repo import Repo
    from handoff.record.store import state_home
    from handoff.role import DEFAULT

    try:
        names = config_mod.load(state_home(), Repo.at(Path.cwd()).top).team.names
    except (HandoffError, OSError):
        names = DEFAULT.names
    return [r for r in names if r.startswith(incomplete)]


def windows(incomplete: str) -> list[str]:
    """The windows of a ticket's tmux session: the orchestrator's and each role's."""
    return [w for w in ("orchestrator", *roles("")) if w.startswith(incomplete)]


TicketArg = Annotated[str, typer.Argument(autocompletion=ticket_ids, show_default=False)]
RoleArg = Annotated[str, typer.Argument(autocompletion=roles, show_default=False)]
