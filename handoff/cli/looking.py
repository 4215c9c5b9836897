"""The commands that look at tickets and change nothing: `status` (where each stands), `watch`
(the live board), `log` (a ticket's events) and `attach` (its tmux session). `log` and
`attach` of a ticket on a host run there (handoff.cli.elsewhere.OnItsHost, given by app.py)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import typer

from handoff.cli import output
from handoff.cli.options import JsonOpt, RepoOpt, TicketArg, ticket_ids, windows
from handoff.errors import UsageError


def status(ticket: Annotated[str | None, typer.Argument(autocompletion=ticket_ids)] = None,
           repo: RepoOpt = None, as_json: JsonOpt = False,
           every: Annotated[bool, typer.Option("--all", help="The closed tickets too.")] = False,
           ) -> None:
    """Where every open ticket stands, what waits for you first (or one ticket)."""
    from handoff.cli import status_view

    typer.echo(status_view.show(ticket, repo, as_json, every))


def watch(repo: Annotated[Path | None, typer.Option(
    "--repo", help="Only this repository's tickets (default: all of them).")] = None) -> None:
    """A live board of every ticket; keys to attach, answer, approve, recycle, stop."""
    from handoff.cli import board_app  # Textual: loaded by this command alone
    from handoff.machinery.repo import Repo
    from handoff.record.store import state_home

    board_app.run(state_home(), Repo.at(repo).key if repo is not None else None, output.plain())


def log(
    ticket: TicketArg,
    as_json: JsonOpt = False,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new events.")]
    = False,
    repo: RepoOpt = None,
) -> None:
    """The handoff chain of a ticket: every event, in order (from the ticket directory alone:
    it works with state.json unreadable and with the repo gone)."""
    from handoff.operations import standing
    from handoff.operations.render import event_line
    from handoff.record.store import state_home

    def show(event: Mapping[str, object]) -> None:
        # --json --follow: JSON Lines, one event a line as it comes (an array cannot grow)
        typer.echo(json.dumps(event) if as_json else event_line(event))

    tdir = standing.find_ticket(state_home(), ticket, repo)
    events, bad = tdir.events.read()
    if as_json and not follow:
        typer.echo(json.dumps(events, indent=2))
    else:
        for event in events:
            show(event)
    if bad:
        typer.echo(f"(skipped {len(bad)} unreadable line(s) of events.jsonl: {bad[:5]})", err=True)
    if follow:
        for event in standing.follow(tdir, len(events)):
            show(event)


def attach(ticket: TicketArg,
           role: Annotated[str | None, typer.Option("--role", autocompletion=windows)] = None,
           repo: RepoOpt = None) -> None:
    """Attach to the ticket's tmux session (Ctrl-b d detaches); on a host, over ssh -t."""
    from handoff.operations import opening, tending
    from handoff.record.store import state_home

    argv = tending.attach_argv(opening.open_ticket(state_home(), ticket, repo), role)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):  # tmux would only say "not a terminal"
        raise UsageError(f"attach needs a terminal to show {ticket}'s panes in, and this is not "
                         "one", f"run it in a terminal; from a script, 'handoff status {ticket}' "
                         f"and 'handoff log {ticket}' say where it stands")
    env = {k: v for k, v in os.environ.items() if k != "TMUX"}
    os.execvpe(argv[0], argv, env)


def diff(ticket: TicketArg,
         round_: Annotated[int | None, typer.Option("--round", min=1, help="Only this round's "
                                                    "change (default: the whole of it).")]
         = None,
         repo: RepoOpt = None) -> None:
    """The ticket's change as a diff: from its base to its newest accepted commit, or one
    round's (what that round added)."""
    from handoff.operations import opening, viewing
    from handoff.record.store import state_home

    found, text = viewing.diff(opening.open_ticket(state_home(), ticket, repo), round_)
    typer.echo(f"# {found.what}", err=True)
    typer.echo(text, nl=not text.endswith("\n") and bool(text))
