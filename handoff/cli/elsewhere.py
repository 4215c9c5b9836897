"""The command line's side of tickets on hosts (docs/hosts.md): where a new ticket goes, a
ticket's command handed to the host it runs on, `resume --all` there, and the commands of a
host (`hosts`, and the hidden `host-info`, `host-report` and `host-forget` that the placing
machine runs over ssh). The work itself is handoff.operations.hosts'."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from handoff.cli.options import JsonOpt, RepoOpt
from handoff.errors import UsageError

if TYPE_CHECKING:
    from handoff.config import Config
    from handoff.operations.create import PlanToStart
    from handoff.record.placed import Placement


def placement(host: str | None, foreground: bool) -> str:
    """Where new tickets go: --host, else config.yaml's placement ("local" without hosts)."""
    if host is None:
        from handoff import config
        from handoff.record.store import state_home

        home = state_home()
        if not (home / "config.yaml").is_file():
            return "local"  # no config, so no placement setting: nothing to read
        host = config.load(home, None).placement
    if host != "local" and foreground:
        raise UsageError("--foreground runs the orchestrator in this terminal: a ticket on a "
                         "host runs there", "drop --foreground, or --host local")
    return host


def start_on(where: str, one: PlanToStart, yes: bool, now: bool, max_rounds: int | None,
             base: str, summary: str, repo: Path | None, here: Callable[[], int]) -> int:
    """One ticket placed by `where` (a host, or auto): on a host, or here after all (here:
    the local start); its exit status."""
    from handoff import config
    from handoff.machinery.repo import Repo
    from handoff.operations import hosts
    from handoff.record.store import state_home, validate_ticket_id
    from handoff.record.ticket import ticket_dir

    home = state_home()
    cfg = config.load(home, None)
    host = hosts.place(home, cfg, where)
    if host is None:
        return here()
    validate_ticket_id(one.ticket)
    hosts.refuse_taken(home, one.ticket)
    found = Repo.at(repo or Path.cwd())
    if ticket_dir(home, found.key, one.ticket).state_file.exists():
        raise UsageError(f"ticket {one.ticket} already exists in this repo",
                         "pick another id: ticket ids are unique across this machine and its "
                         "hosts")
    if not yes:
        typer.echo(one.text)
        if not typer.confirm(f"Start {one.ticket} on host {host.name} with this plan?",
                             default=False):
            typer.echo(f"{one.ticket} was not started", err=True)
            return 1
    options = [*(["--now"] if now else []),
               *(["--max-rounds", str(max_rounds)] if max_rounds else []),
               *(["--summary", summary] if summary else [])]
    started = hosts.start_on(home, host, found, one.ticket, one.text, base, options)
    typer.echo(started.said)
    typer.echo(f"{one.ticket}: runs on host {host.name} (its mirror of {found.top.name}: "
               f"{started.placement.mirror}); handoff status, attach {one.ticket} and the "
               "rest reach it there")
    return 0


def placed(ticket: str) -> tuple[Path, Config, Placement] | None:
    """The home, config and placement of a ticket that runs on a host; None when it runs here."""
    from handoff.record import placed as placements
    from handoff.record.store import state_home

    home = state_home()
    found = placements.load(home, ticket)
    if found is None:
        return None
    from handoff import config

    return home, config.load(home, None), found


def forward(ticket: str | None, args: list[str], terminal: bool = False) -> None:
    """When the ticket runs on a host: `handoff ARGS` run there for it, what it printed shown
    here, and this command ends with its exit status. Nothing when it runs here."""
    found = placed(ticket) if ticket is not None else None
    if found is None:
        return
    from handoff.machinery.ssh import environment
    from handoff.operations import hosts

    _, cfg, where = found
    if terminal:
        argv = hosts.terminal_argv(cfg, where, args)
        os.execvpe(argv[0], argv, {**environment(), **({"TERM": os.environ["TERM"]}
                                                        if "TERM" in os.environ else {})})
    status, said = hosts.forward(cfg, where, args)
    if said:
        typer.echo(said, err=status != 0)
    raise typer.Exit(status)


def resume_all(home: Path) -> int:
    """`resume --all` on each host with a ticket of ours (a host that rebooted); what each
    said, its name first. How many failed or did not answer."""
    from handoff.record import placed as placements

    names = {p.host for p in placements.every(home)}
    if not names:
        return 0
    from handoff import config
    from handoff.errors import ExternalFailure
    from handoff.operations import hosts as hosts_mod

    cfg = config.load(home, None)
    failed = 0
    for name in sorted(names):
        try:
            status, out, err = hosts_mod.Remote(cfg.host(name)).run(
                ["resume", "--all"], hosts_mod.WORK_DEADLINE)
        except (ExternalFailure, UsageError) as exc:
            typer.echo(f"{name}: {exc.message}", err=True)
            failed += 1
            continue
        failed += status != 0
        for line in hosts_mod.printable((out + err).strip()).splitlines():
            typer.echo(f"{name}: {line}")
    return failed


# ---- the commands of hosts ---------------------------------------------------------------


def hosts(as_json: JsonOpt = False) -> None:
    """The other machines tickets can run on (config.yaml's hosts): reachable, the same
    handoff, and their tickets at work. Exit 1 when one is not ready."""
    from handoff import config
    from handoff.operations import hosts as hosts_mod
    from handoff.record.store import state_home

    cfg = config.load(state_home(), None)
    states = hosts_mod.host_states(cfg)
    if as_json:
        typer.echo(json.dumps([{"name": h.name, "ready": not h.problem(), "problem": h.problem(),
                                "handoff": h.handoff, "code": h.code, "at_work": h.at_work,
                                "waiting": h.waiting, "max_parallel": h.max_parallel}
                               for h in states], indent=2))
    elif not states:
        typer.echo("no hosts: add them to $HANDOFF_HOME/config.yaml, "
                   + config.HOSTS_HINT)
    for h in [] if as_json else states:
        problem = h.problem()
        typer.echo(f"{h.name:<16} " + (f"NOT READY: {problem}" if problem else
                                      f"ready: handoff {h.handoff}, {h.at_work} of "
                                      f"{h.max_parallel} at work, {h.waiting} waiting"))
    raise typer.Exit(1 if any(h.problem() for h in states) else 0)


def host_info(as_json: JsonOpt = False,
              mirror: Annotated[str, typer.Option("--mirror")] = "") -> None:
    """What this machine says of itself as a host (asked over ssh by the machine placing
    tickets here); --mirror NAME makes that repository's mirror here first."""
    from handoff.operations import hosts as hosts_mod
    from handoff.record.store import state_home

    about = hosts_mod.about_here(state_home(), mirror)
    typer.echo(json.dumps(about) if as_json else "\n".join(f"{k}: {v}" for k, v in about.items()))


def host_report(ticket: str, repo: RepoOpt = None) -> None:
    """A ticket's final report as it stands here, nothing when it has none yet (asked over ssh
    by `close` and `finish` on the machine that placed it, which keeps a copy)."""
    from handoff.inputs import REPORT_LIMIT, read_text
    from handoff.operations.standing import find_ticket
    from handoff.record.store import state_home

    report = find_ticket(state_home(), ticket, repo).final_report
    if report.exists():
        typer.echo(read_text(report, REPORT_LIMIT, "the final report"), nl=False)


def host_forget(mirror: Path, ticket: str) -> None:
    """Delete a closed ticket's refs from its mirror here (asked over ssh by `close`)."""
    from handoff.operations import hosts as hosts_mod
    from handoff.record.store import state_home, validate_ticket_id

    hosts_mod.forget_refs(mirror, validate_ticket_id(ticket))
    hosts_mod.rest_if_idle(state_home())


def register(app: typer.Typer) -> None:
    """The commands of hosts, added to app where it calls this (help lists them there)."""
    app.command()(hosts)
    app.command(name="host-info", hidden=True)(host_info)
    app.command(name="host-report", hidden=True)(host_report)
    app.command(name="host-forget", hidden=True)(host_forget)
