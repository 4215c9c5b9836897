"""The command line's side of tickets on hosts (docs/hosts.md): where a new ticket goes, a
ticket's command handed to the host it runs on as it was typed (OnItsHost, the class of
every such command), `resume --all` there, and the commands of a host (`hosts`, and the
hidden `host-info`, `host-report` and `host-forget` that the placing machine runs over ssh).
The work itself is handoff.operations.hosts' and handoff.operations.remote's."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, cast

import typer
from typer.core import TyperCommand, TyperOption

from handoff.cli import output
from handoff.cli.options import JsonOpt, RepoOpt
from handoff.errors import UsageError

if TYPE_CHECKING:  # the click typer carries (0.26-0.28, pyproject.toml): for mypy alone
    from typer._click import Context, Parameter

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
    output.show(hosts.start_on(home, host, found, one.ticket, one.text, base, options))
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


#: where OnItsHost keeps the words typed after the command's name (the meta of a context is
#: shared by every context of the command line)
TYPED = "handoff.typed"
#: OnItsHost.terminal_with of a command that always needs the terminal (attach)
ALWAYS = "always"


class OnItsHost(TyperCommand):
    """A command about one ticket that runs where the ticket runs. For a ticket placed on a
    host, the words the person typed after the command's name go to the host's handoff as they
    are, but --repo (a path of this machine: the host is given its mirror instead); what it
    printed is shown here, and this command ends with its exit status. So no command spells
    its options again for the host: the command itself runs for a ticket of this machine."""

    #: the flag with which the command needs this terminal on the host (log --follow: over
    #: ssh -t, its screen here); ALWAYS: it always does (attach)
    terminal_with: ClassVar[str] = ""
    #: the flags with which it runs here, wherever the ticket runs (resume --all names no one
    #: ticket; resume --foreground runs an orchestrator in this terminal)
    here_with: ClassVar[tuple[str, ...]] = ()

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        ctx.meta[TYPED] = list(args)  # as typed: click consumes them
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Context) -> Any:
        ticket = ctx.params.get("ticket")
        if isinstance(ticket, str) and not any(ctx.params.get(flag) for flag in self.here_with):
            terminal = self.terminal_with == ALWAYS or bool(ctx.params.get(self.terminal_with))
            run_there(ticket, [str(self.name), *for_the_host(ctx.meta[TYPED], self.params)],
                      terminal)
        return super().invoke(ctx)


def on_its_host(terminal_with: str = "", here_with: tuple[str, ...] = ()) -> type[OnItsHost]:
    """OnItsHost for a command with these rules (OnItsHost's fields say what they mean)."""
    rules = {"terminal_with": terminal_with, "here_with": here_with}
    return cast("type[OnItsHost]", type("OnItsHost", (OnItsHost,), rules))


def for_the_host(typed: Sequence[str], params: Sequence[Parameter]) -> list[str]:
    """The words typed for a command but --repo and its path, read as click reads them: the
    word after an option that takes a value is that value, whatever it looks like, and every
    word after `--` is an argument."""
    valued = {name for p in params if isinstance(p, TyperOption) and not p.is_flag
              for name in p.opts}
    kept: list[str] = []
    words = iter(typed)
    for word in words:
        if word == "--":
            return [*kept, word, *words]
        value = list(itertools.islice(words, 1)) if word in valued else []
        if word != "--repo" and not word.startswith("--repo="):
            kept += [word, *value]
    return kept


def run_there(ticket: str, args: list[str], terminal: bool = False) -> None:
    """When the ticket runs on a host: `handoff ARGS` run there for it, what it printed shown
    here, and this command ends with its exit status (terminal: in this terminal, over ssh -t,
    in place of this process). Nothing when it runs here."""
    found = placed(ticket)
    if found is None:
        return
    from handoff.machinery.ssh import environment
    from handoff.operations import remote

    _, cfg, where = found
    if terminal:
        argv = remote.terminal_argv(cfg, where, args)
        os.execvpe(argv[0], argv, {**environment(), **({"TERM": os.environ["TERM"]}
                                                        if "TERM" in os.environ else {})})
    status, said = remote.forward(cfg, where, args)
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
    from handoff.operations import remote

    cfg = config.load(home, None)
    failed = 0
    for name in sorted(names):
        try:
            status, out, err = remote.Remote(cfg.host(name)).run(["resume", "--all"],
                                                                 remote.WORK_DEADLINE)
        except (ExternalFailure, UsageError) as exc:
            typer.echo(f"{name}: {exc.message}", err=True)
            failed += 1
            continue
        failed += status != 0
        for line in remote.printable((out + err).strip()).splitlines():
            typer.echo(f"{name}: {line}")
    return failed


# ---- the commands of hosts ---------------------------------------------------------------


def hosts(as_json: JsonOpt = False) -> None:
    """The other machines tickets can run on (config.yaml's hosts): reachable, the same
    handoff, and their tickets at work. Exit 1 when one is not ready."""
    from handoff import config
    from handoff.operations import remote
    from handoff.record.store import state_home

    cfg = config.load(state_home(), None)
    states = remote.host_states(cfg)
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
    from handoff.operations import remote
    from handoff.record.store import state_home

    about = remote.about_here(state_home(), mirror)
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
    from handoff.operations import remote
    from handoff.record.store import state_home, validate_ticket_id

    remote.forget_refs(mirror, validate_ticket_id(ticket))
    remote.rest_if_idle(state_home())
