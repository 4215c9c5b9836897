"""The commands that bring tickets' work into their base branch: `finish` (merge passed
tickets here, a train of them, or push them for a pull request) and `conflicts` (which open
tickets would conflict when merged). The work is handoff.operations.finish's, and for a ticket
on a host handoff.operations.hosts'."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from handoff.cli import elsewhere, output
from handoff.cli.options import JsonOpt, RepoOpt, ticket_ids
from handoff.errors import UsageError


def conflicts(repo: RepoOpt = None, as_json: JsonOpt = False) -> None:
    """Which open tickets change the same files, and which would conflict (with their base
    branch, or with each other) when merged: worked out by git without touching a checkout.
    Exit 1 when any would."""
    from handoff.machinery.repo import Repo
    from handoff.operations import conflicts as conflicts_mod
    from handoff.record.store import state_home

    found = conflicts_mod.survey(state_home(), Repo.at(repo or Path.cwd()))
    if as_json:
        typer.echo(json.dumps(found.fields(), indent=2))
    else:
        typer.echo("\n".join(conflicts_mod.lines(found)))
    if found.conflicting:
        raise typer.Exit(1)


def finish(
    tickets: Annotated[list[str] | None, typer.Argument(
        autocompletion=ticket_ids, show_default=False,
        help="The passed tickets to merge, in this order (a train: tested together, the base "
             "moved once).")] = None,
    squash: Annotated[bool, typer.Option("--squash", help="One commit per ticket.")] = False,
    merge: Annotated[bool, typer.Option("--merge", help="A merge commit per ticket (the "
                                        "default).")] = False,
    all_passed: Annotated[bool, typer.Option("--all-passed", help="Every passed ticket of the "
                                             "repository, in the order they passed.")] = False,
    push: Annotated[bool, typer.Option("--push", help="Instead of merging here: push each "
                                       "ticket's reviewed commit as its branch (never the base, "
                                       "never forced), once its merge passes.")] = False,
    remote: Annotated[str | None, typer.Option(
        "--remote", metavar="NAME", help="The remote --push pushes to (default: the base "
        "branch's own, or the only one).", show_default=False)] = None,
    pr: Annotated[bool, typer.Option("--pr", help="--push, then open a pull request with your "
                                     "own gh (title from the plan, body the final report).")]
    = False,
    repo: RepoOpt = None,
) -> None:
    """Merge passed tickets into their base branch, locally, once the merged result passes the
    gate, and close them; or push them for a pull request (--push, --pr)."""
    from handoff.operations.finish import Push, finish_tickets
    from handoff.record.store import state_home

    if squash and merge:  # the two ways are one choice: the last one given is no answer
        raise UsageError("--squash and --merge are two ways to merge: give one",
                         "--merge (the default) keeps each ticket's commits under a merge "
                         "commit; --squash makes one commit of each")
    if remote is not None and not (push or pr):
        raise UsageError("--remote says where --push pushes", "add --push (or --pr)")
    named = tickets or []
    mode = "squash" if squash else "merge"
    if len(named) == 1 and not all_passed and _finished_on_its_host(named[0], mode, push or pr):
        return
    hosted = [name for name in named if elsewhere.placed(name) is not None]
    if hosted:
        raise UsageError(f"{', '.join(hosted)} run(s) on a host: a train merges tickets of "
                         "this machine only", "finish a hosted ticket on its own: "
                         f"'handoff finish {hosted[0]}'")

    result = finish_tickets(state_home(), named, repo, mode, all_passed,
                            Push(remote, pr) if push or pr else None)
    output.show(result)
    if result.refused is not None:
        raise result.refused


def _finished_on_its_host(ticket: str, mode: str, pushing: bool) -> bool:
    """`finish TICKET` of a ticket on a host: merged here from there (True); False when it runs
    here. Pushing one is refused: its branch is pushed from the host."""
    on_host = elsewhere.placed(ticket)
    if on_host is None:
        return False
    if pushing:
        raise UsageError(f"{ticket} runs on a host: push its branch from there, or finish it "
                         "here first", f"'handoff finish {ticket}' merges it here")
    from handoff.operations import hosts

    output.show(hosts.finish_on(*on_host, mode))
    return True
