"""The `handoff` command line: each command parses its options, calls the core (create,
resume, closing, standing, finish, gc, ...) and renders what it returns; what to do is decided
in the core. Besides that it holds only the conversation at a terminal (the approval prompt) and
how a foreground run's events are printed.

Exit codes (defined in handoff/errors.py, listed in docs/cli.md): 0 ok (for a run: passed),
1 failed, 2 usage, 3 not found, 4 busy (another orchestrator), 5 refused to protect work,
6 missing tool, 10 the run ended with the ticket needing a person, 11 escalated, 70 internal
error (a crash log is written), 130 stopped by Ctrl-C or a signal.

Each command imports the modules it needs when it runs: `handoff --version`, `--help` and a
shell-completion request (one per TAB) load typer alone, not libtmux, yaml or GitPython.
Output is plain text (click's help, not rich's); NO_COLOR still holds for anything echoed.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from handoff.cli import elsewhere
from handoff.cli.options import JsonOpt, RepoOpt
from handoff.errors import (
    EXIT_ESCALATED,
    EXIT_INTERRUPTED,
    EXIT_NEEDS_HUMAN,
    EXIT_OK,
    HandoffError,
    UsageError,
    describe,
)

if TYPE_CHECKING:
    from handoff.loop.workspace import Workspace
    from handoff.operations.create import PlanToStart
    from handoff.record.ticket import State


# rich_markup_mode=None: click's plain help and error formatting. typer's rich formatting
# imports rich and markdown-it, 67 ms on every --help and every mistyped option (measured):
# more than the whole `status` command.
app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Run AI coding CLIs as a small team: an implementer, testers and "
                       "reviewers side by side in tmux, git worktrees per role, a bounded review "
                       "loop.",
                  epilog="Exit codes: 0 ok (a run: passed), 1 failed, 2 usage, 3 not found, "
                         "4 busy, 5 refused to protect work, 6 missing tool, 10 needs-human, "
                         "11 escalated, 70 internal error (crash log), 130 interrupted "
                         "(docs/cli.md).")


def _ticket_ids(incomplete: str) -> list[str]:
    """Shell completion of TICKET: the ids of the tickets handoff keeps (their folders only:
    a TAB must be quick and work whatever state a ticket is in)."""
    from handoff.record.store import state_home
    from handoff.record.ticket import all_tickets

    return sorted({t.ticket for t in all_tickets(state_home()) if t.ticket.startswith(incomplete)})


def _team(incomplete: str) -> list[str]:
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


def _roles(incomplete: str) -> list[str]:
    return _team(incomplete)


def _windows(incomplete: str) -> list[str]:
    return [w for w in ("orchestrator", *_team("")) if w.startswith(incomplete)]


TicketArg = Annotated[str, typer.Argument(autocompletion=_ticket_ids, show_default=False)]
RoleArg = Annotated[str, typer.Argument(autocompletion=_roles, show_default=False)]
#: how a command that waits for a ticket's run ends: a script tells a ticket that passed from
#: one that needs a person or was escalated; a run stopped mid-way is EXIT_INTERRUPTED
OUTCOME_CODES = {"passed": EXIT_OK, "closed": EXIT_OK, "escalated": EXIT_ESCALATED,
                 "needs-human": EXIT_NEEDS_HUMAN}


def _print_version(value: bool) -> None:
    if value:
        from handoff.build import version

        typer.echo(f"handoff {version()}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _options(
    show_version: Annotated[bool, typer.Option(
        "--version", "-V", is_eager=True, callback=_print_version,
        help="Print handoff's version and exit.")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Log every subprocess (argv, exit status, ms) and every event, "
        "to stderr, or to the ticket's handoff.log while an orchestrator runs (also: "
        "HANDOFF_DEBUG=1).")] = False,
) -> None:
    # no docstring: the app's help above stays the help of `handoff --help`
    if verbose:
        from handoff import trace

        trace.enable()  # for the orchestrator this starts, too
        trace.to_stderr()


def _run(ws: Workspace) -> int:
    from handoff.loop.orchestrator import Orchestrator
    from handoff.operations.render import event_line

    state = Orchestrator(ws, lambda event: typer.echo(event_line(event))).run()
    return _outcome(ws, state)


def _outcome(ws: Workspace, state: State, after: str = "") -> int:
    """A run's end said: the final report (passed or escalated), then after; its exit code."""
    if state.phase in ("passed", "escalated"):
        typer.echo(ws.tdir.final_report.read_text(encoding="utf-8"))
    if after:
        typer.echo(after)
    return OUTCOME_CODES.get(state.phase, EXIT_INTERRUPTED)


def _approve(ws: Workspace, yes: bool) -> bool:
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
    if typer.confirm(f"Approve this plan for {ws.tdir.ticket}?", default=False):
        approval.approve(ws)
        return True
    return False


def _notes(notes: Sequence[str]) -> None:
    """What handoff mended or worked around, said out loud (stderr: the output stays clean)."""
    for note in notes:
        typer.echo(f"note: {note}", err=True)


def _launch(ws: Workspace, foreground: bool) -> int:
    from handoff.operations.resume import run_approved

    if foreground:
        return _run(ws)
    typer.echo("\n".join(run_approved(ws).said))
    return 0


@app.command()
def init(repo: RepoOpt = None) -> None:
    """Write a commented .handoff.yaml into the repo (never overwriting one)."""
    from handoff.config import REPO_CONFIG, config_template
    from handoff.machinery import tools
    from handoff.machinery.repo import Repo
    from handoff.operations import doctor

    for problem in tools.problems():
        typer.echo(f"warning: {problem}", err=True)
    picked = doctor.pick()
    path = config_template(Repo.at(repo or Path.cwd()).top, picked.implementer, picked.reviewer,
                           picked.security)
    if path is None:
        typer.echo(f"{REPO_CONFIG} exists; leaving it alone")
        return
    found = ", ".join(picked.installed) if picked.installed else \
        "no coding CLI (claude, codex, gemini, opencode)"
    security = (f", security reviewer {picked.security} (a second CLI: it reviews every round "
                "beside the reviewer; remove roles.security to do without)") if picked.security \
        else ("; no security reviewer: it needs a second installed CLI to be independent (add "
              "roles.security by hand to have one anyway)" if picked.installed else "")
    typer.echo(f"found on PATH: {found}\nchose: implementer {picked.implementer}, reviewer "
               f"{picked.reviewer}{security}"
               + (" (the built-in scripted agent: install a CLI and edit the file)"
                  if not picked.installed else ""))
    typer.echo(f"wrote {path}\ncommit it with your code (handoff finish refuses a checkout with "
               f"untracked files): git add {REPO_CONFIG} && git commit -m 'handoff config'\n"
               "next: handoff doctor, then handoff start TICKET --plan plan.md")


def _repo_top(repo: Path | None) -> Path | None:
    """The repo named, else the one here; None when here is no repo (a named one must be)."""
    from handoff.machinery.repo import Repo

    try:
        return Repo.at(repo or Path.cwd()).top
    except HandoffError:
        if repo is not None:
            raise
        return None


@app.command(name="doctor")
def doctor_command(repo: RepoOpt = None, as_json: JsonOpt = False) -> None:
    """Check tmux, git, the configured CLIs and their set-up: OK, WARN or FAIL with the fix."""
    from handoff.operations import doctor
    from handoff.record.store import state_home

    top = _repo_top(repo)
    found = doctor.run(state_home(), top)
    if top is None:
        typer.echo("(not in a git repository: repo checks skipped; pass --repo PATH)",
                   err=as_json)  # the JSON on stdout stays one document
    if as_json:
        typer.echo(json.dumps([{"level": c.level, "what": c.what, "detail": c.detail,
                                "fix": c.fix} for c in found], indent=2))
        raise typer.Exit(doctor.exit_code(found))
    for check in found:
        typer.echo(f"{check.level:<4}  {check.what}: {check.detail}")
        if check.fix and check.level != "OK":
            typer.echo(f"      fix: {check.fix}")
    raise typer.Exit(doctor.exit_code(found))


@app.command()
def providers(repo: RepoOpt = None, as_json: JsonOpt = False) -> None:
    """The coding CLIs handoff can run, what is installed, and which roles use them."""
    from handoff.config import load as load_config
    from handoff.operations import doctor
    from handoff.record.store import state_home

    rows = doctor.provider_rows(load_config(state_home(), _repo_top(repo)))
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    typer.echo(f"{'PROVIDER':<10} {'VERSION':<10} {'PROVEN':<20} {'ROLES':<22} {'PATH':<40} "
               "SUPPORT")
    for row in rows:
        roles = ",".join(row["roles"]) if isinstance(row["roles"], list) else ""
        typer.echo(f"{row['provider']!s:<10} {row['version'] or '-'!s:<10} "
                   f"{row['proven'] or '-'!s:<20} {roles or '-':<22} "
                   f"{row['path'] or 'not installed'!s:<40} {row['support']}")
        notes = [row["unproven"], row["reaches"] if roles else None]
        for note in filter(None, notes):
            typer.echo(f"{'':<10} {note}")


@app.command()
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


@app.command()
def start(
    ticket: Annotated[list[str] | None, typer.Argument(
        metavar="TICKET | PLAN...", show_default=False,
        help="The ticket's id; with --plans, the plan files, a ticket each.")] = None,
    plan: Annotated[Path | None, typer.Option("--plan", help="The plan (Markdown).",
                                              exists=False, show_default=False)] = None,
    plans: Annotated[bool, typer.Option("--plans", help="The arguments are plans: each starts "
                                        "a ticket named by its frontmatter's 'ticket:', else "
                                        "by its file name (plans/PROJ-12.md: PROJ-12).")]
    = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Approve the plan without asking.")]
    = False,
    now: Annotated[bool, typer.Option("--now", help="Start at once, even when max_parallel "
                                      "tickets are at work (it still counts).")] = False,
    foreground: Annotated[bool, typer.Option("--foreground", help="Run the orchestrator in this "
                                             "terminal instead of its tmux window.")] = False,
    max_rounds: Annotated[int | None, typer.Option("--max-rounds", min=1)] = None,
    base: Annotated[str, typer.Option("--base", help="Branch or commit to start from.")]
    = "HEAD",
    summary: Annotated[str, typer.Option("--summary", help="What was asked (ticket.md).")] = "",
    host: Annotated[str | None, typer.Option(
        "--host", help="Where it runs: a host of config.yaml's hosts, local, or auto (the "
        "first with a free slot, this machine first); default: config.yaml's placement.",
        show_default=False)] = None,
    after: Annotated[list[str] | None, typer.Option(
        "--after", metavar="TICKET", help="A ticket it builds on (again for more, or A,B): it "
        "waits until they pass, then starts from their work (beside the plan's after:).",
        show_default=False)] = None,
    repo: RepoOpt = None,
) -> None:
    """Create a ticket from a plan, approve it, and start the loop (or one per plan: --plans).
    Beyond max_parallel tickets at work on this machine it waits in the queue."""
    from handoff.operations.create import PlanToStart, plans_to_start, read_plan
    from handoff.protocol import plan as plan_mod

    args = ticket or []
    builds_on = tuple(name.strip() for item in after or [] for name in item.split(",")
                      if name.strip())
    if plans:
        if plan is not None or foreground or summary:
            raise UsageError("--plans takes the plans as its arguments, and starts each in its "
                             "own window: --plan, --summary and --foreground are for one ticket",
                             "handoff start --plans plans/*.md --yes")
        if not args:
            raise UsageError("--plans needs the plan files", "handoff start --plans plans/*.md")
        starts = plans_to_start([Path(a) for a in args])
    else:
        if len(args) != 1 or plan is None:
            raise UsageError("start takes one ticket id and its --plan (or --plans and plan "
                             "files)", "handoff start PROJ-12 --plan plan.md, or handoff start "
                             "--plans plans/*.md")
        starts = [PlanToStart(args[0], plan, read_plan(plan))]
    placement = elsewhere.placement(host, foreground)
    # the tickets of one --plans may start after each other, in any order
    batch = tuple((one.ticket, plan_mod.parse(one.text, str(one.path)).after + builds_on)
                  for one in starts) if plans else ()
    if placement != "local" and (builds_on or any(deps for _, deps in batch)):
        raise UsageError("a ticket that starts after others runs on this machine: their work "
                         "is here", "drop --host, or start it once they are merged")
    if not plans:  # its exit code says how a --foreground run ended
        if placement != "local":
            raise typer.Exit(elsewhere.start_on(
                placement, starts[0], yes, now, max_rounds, base, summary, repo,
                here=functools.partial(_start_one, starts[0], yes, now, False, max_rounds,
                                       base, summary, repo, brief=False)))
        raise typer.Exit(_start_one(starts[0], yes, now, foreground, max_rounds, base, summary,
                                    repo, brief=False, after=builds_on))
    failed = 0
    for one in starts:
        try:
            failed += (elsewhere.start_on(
                placement, one, yes, now, max_rounds, base, "", repo,
                here=functools.partial(_start_one, one, yes, now, False, max_rounds, base,
                                       "", repo, brief=False))
                       if placement != "local" else
                       _start_one(one, yes, now, False, max_rounds, base, "", repo,
                                  brief=True, after=builds_on, batch=batch)) != 0
        except HandoffError as exc:
            typer.echo(f"handoff: error: {one.ticket}: {exc.message}"
                       + (f"\n  hint: {exc.hint}" if exc.hint else ""), err=True)
            failed += 1
    typer.echo(f"{len(starts) - failed} of {len(starts)} started; where each stands: "
               "handoff status, or handoff watch")
    raise typer.Exit(1 if failed else 0)


def _start_one(one: PlanToStart, yes: bool, now: bool, foreground: bool, max_rounds: int | None,
               base: str, summary: str, repo: Path | None, brief: bool,
               after: tuple[str, ...] = (),
               batch: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> int:
    from handoff.operations.create import NewTicket, create, queue_note
    from handoff.operations.resume import run_in_window
    from handoff.record import starts
    from handoff.record.store import state_home

    home = state_home()
    # what a person waits for goes before other tickets' orchestrators' first steps; not the
    # approval (a person's time) nor an orchestrator run here (it would wait for itself)
    with starts.InFlight(home):
        ws, notes = create(home, NewTicket(
            ticket=one.ticket, repo=repo or Path.cwd(), plan_text=one.text, summary=summary,
            base=base, max_rounds=max_rounds, now=now, notes=not brief, after=after,
            batch=batch))
    ticket = one.ticket
    _notes(notes)
    if not _approve(ws, yes):
        typer.echo(f"{ticket} is waiting for approval: 'handoff resume {ticket} --yes' "
                   "approves it and starts the loop", err=True)
        return 1
    queue = queue_note(ws)
    if queue:
        typer.echo(f"{ticket}: {queue}", err=True)
    if foreground:
        return _launch(ws, foreground)
    with starts.InFlight(home):
        if brief:
            typer.echo(f"{ticket}: the orchestrator runs in tmux session "
                       f"{run_in_window(ws)}")
            return 0
        return _launch(ws, foreground)


@app.command()
def resume(
    ticket: Annotated[str | None, typer.Argument(autocompletion=_ticket_ids,
                                                 show_default=False)] = None,
    every: Annotated[bool, typer.Option("--all", help="Every ticket whose run was cut off (a "
                                        "reboot, a kill): each in its own window, queued "
                                        "ones in their places.")] = False,
    foreground: Annotated[bool, typer.Option("--foreground")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Approve a waiting plan.")] = False,
    more_rounds: Annotated[int | None, typer.Option(
        "--more-rounds", metavar="N", help="Carry an escalated ticket on for N more rounds "
        "(its open findings go to the next round).", show_default=False)] = None,
    onto: Annotated[str | None, typer.Option(
        "--onto", metavar="BRANCH", help="Carry a passed (or escalated) ticket onto BRANCH's "
        "head: merged into its work, a round of its own, the gate and fresh reviewers (2 more "
        "rounds unless --more-rounds says).", show_default=False)] = None,
    repo: RepoOpt = None,
) -> None:
    """Carry a ticket on from its directory alone (after a crash, a stop or a reboot)."""
    from handoff.operations.resume import open_to_resume, resume_approved
    from handoff.record.store import state_home

    if every:
        if ticket is not None or foreground or yes or more_rounds is not None or onto:
            raise UsageError("--all resumes every ticket whose run was cut off, each in its "
                             "own window: it takes no ticket, --foreground, --yes, "
                             "--more-rounds or --onto", "handoff resume --all")
        raise typer.Exit(_resume_all(state_home(), repo))
    if ticket is None:
        raise UsageError("resume needs a ticket (or --all)", "handoff resume PROJ-12")
    if not foreground:
        elsewhere.forward(ticket, ["resume", ticket, *(["--yes"] if yes else []),
                            *(["--more-rounds", str(more_rounds)] if more_rounds else []),
                            *(["--onto", onto] if onto else [])])
    if onto is not None:
        from handoff.operations.onto import resume_onto

        ws, carried = resume_onto(state_home(), ticket, repo, onto, more_rounds)
        typer.echo(carried)
        raise typer.Exit(_launch(ws, foreground))
    if yes and not foreground:  # as the board's approve
        running = resume_approved(state_home(), ticket, repo, more_rounds)
        _notes(running.notes)
        typer.echo("\n".join(running.said))
        raise typer.Exit(0)
    ws, notes = open_to_resume(state_home(), ticket, repo, more_rounds)
    _notes(notes)
    if ws.state().phase == "awaiting-approval" and not _approve(ws, yes):
        raise UsageError(f"{ticket} is waiting for approval", f"handoff resume {ticket} --yes")
    raise typer.Exit(_launch(ws, foreground))


def _resume_all(home: Path, repo: Path | None) -> int:
    from handoff.machinery.repo import Repo
    from handoff.operations import resume

    failed_there = elsewhere.resume_all(home) if repo is None else 0
    found = resume.left_behind(home, Repo.at(repo).key if repo is not None else None)
    if not found:
        typer.echo("no ticket's run was cut off here: nothing to resume (handoff status shows "
                   "where each stands)")
        return 1 if failed_there else 0
    failed = 0
    for tdir in found:
        try:
            ws, notes = resume.open_to_resume(home, tdir.ticket, Path(tdir.load().repo))
            _notes(notes)
            typer.echo(f"{tdir.ticket}: resumed in tmux session {resume.run_in_window(ws)}")
            if not resume.in_line(home, tdir):
                typer.echo(f"note: {tdir.ticket} took no slot within "
                           f"{resume.IN_LINE_BOUND:.0f}s: the next may start before it "
                           f"(handoff log {tdir.ticket} says why)", err=True)
        except HandoffError as exc:
            failed += 1
            typer.echo(f"handoff: error: {tdir.ticket}: {exc.message}"
                       + (f"\n  hint: {exc.hint}" if exc.hint else ""), err=True)
    typer.echo(f"{len(found) - failed} of {len(found)} resumed")
    return 1 if failed or failed_there else 0


@app.command()
def status(ticket: Annotated[str | None, typer.Argument(autocompletion=_ticket_ids)] = None,
           repo: RepoOpt = None, as_json: JsonOpt = False) -> None:
    """Where every ticket stands (or one)."""
    from handoff.cli import status_view

    typer.echo(status_view.show(ticket, repo, as_json))


@app.command()
def watch(repo: Annotated[Path | None, typer.Option(
    "--repo", help="Only this repository's tickets (default: all of them).")] = None) -> None:
    """A live board of every ticket; keys to attach, answer, approve, recycle, stop."""
    from handoff.cli import board_app  # Textual: loaded by this command alone
    from handoff.machinery.repo import Repo
    from handoff.record.store import state_home

    board_app.run(state_home(), Repo.at(repo).key if repo is not None else None, _plain())


@app.command()
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

    elsewhere.forward(ticket, ["log", ticket, *(["--json"] if as_json else []),
                        *(["--follow"] if follow else [])], terminal=follow)

    def show(event: dict[str, Any]) -> None:
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


@app.command()
def attach(ticket: TicketArg,
           role: Annotated[str | None, typer.Option("--role", autocompletion=_windows)] = None,
           repo: RepoOpt = None) -> None:
    """Attach to the ticket's tmux session (Ctrl-b d detaches); on a host, over ssh -t."""
    elsewhere.forward(ticket, ["attach", ticket, *(["--role", role] if role else [])], terminal=True)
    from handoff.operations.opening import open_ticket
    from handoff.operations.tending import attach_argv
    from handoff.record.store import state_home

    argv = attach_argv(open_ticket(state_home(), ticket, repo), role)
    env = {k: v for k, v in os.environ.items() if k != "TMUX"}
    os.execvpe(argv[0], argv, env)


@app.command()
def recycle(ticket: TicketArg, role: RoleArg, repo: RepoOpt = None) -> None:
    """Kill a peer and start it fresh on its current brief."""
    elsewhere.forward(ticket, ["recycle", ticket, role])
    from handoff.operations import tending
    from handoff.operations.opening import open_ticket
    from handoff.record.store import state_home

    brief = tending.recycle(open_ticket(state_home(), ticket, repo), role)
    typer.echo(f"{role} of {ticket} restarted on {brief}")


@app.command()
def submit(
    report: Path,
    directory: Annotated[str | None, typer.Option("--dir", help="The ticket directory.")] = None,
    role: Annotated[str | None, typer.Option("--role")] = None,
    round_: Annotated[int | None, typer.Option("--round")] = None,
) -> None:
    """File a report (run by a peer). Prints every problem, exit 1, when it is not accepted."""
    from handoff.cli import filing

    raise typer.Exit(filing.submit(report, directory, role, round_))


@app.command()
def answer(ticket: TicketArg, text: str, repo: RepoOpt = None) -> None:
    """Answer a blocked ticket; the implementer carries on with the answer."""
    elsewhere.forward(ticket, ["answer", ticket, text])
    from handoff.operations.tending import answer_ticket
    from handoff.record.store import state_home

    path, restarted = answer_ticket(state_home(), ticket, repo, text)
    typer.echo(f"answer filed as {path}")
    if restarted:
        typer.echo(f"orchestrator restarted in tmux; watch with handoff attach {ticket}")


@app.command()
def stop(ticket: TicketArg, repo: RepoOpt = None) -> None:
    """Stop the orchestrator and the peers; 'handoff resume' carries on later."""
    elsewhere.forward(ticket, ["stop", ticket])
    from handoff.operations.closing import stop_ticket
    from handoff.record.store import state_home

    result = stop_ticket(state_home(), ticket, repo)
    _notes(result.notes)
    typer.echo(result.said)


@app.command()
def close(
    ticket: TicketArg,
    keep_worktrees: Annotated[bool, typer.Option("--keep-worktrees")] = False,
    force: Annotated[bool, typer.Option("--force", help="Discard uncommitted work in the "
                                        "worktrees.")] = False,
    repo: RepoOpt = None,
) -> None:
    """Stop the peers, remove the worktrees (refusing to lose work), keep branch and record.
    On a host: its branch and final report are fetched here first; its record stays there."""
    from handoff.operations.closing import close_ticket
    from handoff.record.store import state_home

    on_host = elsewhere.placed(ticket)
    if on_host is not None:
        from handoff.operations import hosts

        typer.echo(hosts.close_on(*on_host, keep_worktrees, force))
        return

    result = close_ticket(state_home(), ticket, repo, keep_worktrees, force)
    _notes(result.notes)
    typer.echo("\n".join(result.said))


@app.command()
def finish(
    tickets: Annotated[list[str] | None, typer.Argument(
        autocompletion=_ticket_ids, show_default=False,
        help="The passed tickets to merge, in this order (a train: tested together, the base "
             "moved once).")] = None,
    squash: Annotated[bool, typer.Option("--squash/--merge", help="One commit per ticket "
                                         "(--squash) or a merge commit (--merge, the "
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

    if remote is not None and not (push or pr):
        raise UsageError("--remote says where --push pushes", "add --push (or --pr)")
    named = tickets or []
    on_host = elsewhere.placed(named[0]) if len(named) == 1 and not all_passed else None
    if on_host is not None and (push or pr):
        raise UsageError(f"{named[0]} runs on a host: push its branch from there, or finish it "
                         "here first", f"'handoff finish {named[0]}' merges it here")
    if on_host is not None:
        from handoff.operations import hosts as hosts_mod

        typer.echo("\n".join(hosts_mod.finish_on(*on_host, "squash" if squash else "merge")))
        return
    hosted = [name for name in named if elsewhere.placed(name) is not None]
    if hosted:
        raise UsageError(f"{', '.join(hosted)} run(s) on a host: a train merges tickets of "
                         "this machine only", "finish a hosted ticket on its own: "
                         f"'handoff finish {hosted[0]}'")

    result = finish_tickets(state_home(), named, repo, "squash" if squash else "merge",
                            all_passed, Push(remote, pr) if push or pr else None)
    _notes(result.notes)
    typer.echo("\n".join(result.said))
    if result.refused is not None:
        raise result.refused


@app.command(name="gc")
def gc_command(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed; "
                                          "remove nothing.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Remove dirty worktrees too, their "
                                        "changes first saved as a patch.")] = False,
    prune_records: Annotated[bool, typer.Option("--prune-records", help="Delete the records "
                                                "of tickets whose repository is gone.")] = False,
    repo: RepoOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Remove what handoff left behind that no live ticket owns: sessions, worktrees, sockets."""
    from handoff.operations import gc as gc_mod
    from handoff.record.store import state_home

    home = state_home()
    found = [item.fields() for item in gc_mod.collect(home, gc_mod.Options(
        dry_run=dry_run, force=force, prune_records=prune_records, repo=_repo_top(repo)))]
    if (home / "config.yaml").is_file():
        from handoff import config
        from handoff.operations import hosts as hosts_mod

        found += hosts_mod.gc_on(home, config.load(home, None), dry_run, force, prune_records)
    if as_json:
        typer.echo(json.dumps(found, indent=2))
        return
    for item in found:
        done = "removed" if item["removed"] else "would remove" if item["removable"] and \
            dry_run else "not removed" if item["removable"] else "kept"
        where = f"{item['host']}: " if item.get("host") else ""
        typer.echo(f"{done:<12} {where}{item['kind']} {item['path']}: {item['why']}"
                   + (f" (changes saved as {item['saved']})" if item["saved"] else ""))
    removed = sum(bool(item["removed"]) for item in found)
    kept = sum(not item["removable"] for item in found)
    if not found:
        typer.echo("gc: nothing to clean up")
    elif dry_run:
        typer.echo(f"gc (dry run): would remove {sum(bool(i['removable']) for i in found)}, "
                   f"keep {kept}")
    else:
        typer.echo(f"gc: removed {removed}, kept {kept}")


elsewhere.register(app)


@app.command()
def demo(keep: Annotated[bool, typer.Option("--keep", help="Leave the session and worktrees "
                                            "for 'handoff attach'.")] = False) -> None:
    """Run the whole loop on a throwaway repo with the scripted agents (no AI needed)."""
    from handoff.operations import demo as demo_mod
    from handoff.operations.render import event_line
    from handoff.record.store import state_home

    result, state, ws = demo_mod.run(state_home(), keep, typer.echo,
                                     lambda event: typer.echo(event_line(event)))
    raise typer.Exit(_outcome(ws, state, "\n".join(result.said)))


def _plain() -> bool:
    """NO_COLOR set to anything but empty: no escape codes at all (https://no-color.org)."""
    return bool(os.environ.get("NO_COLOR"))


@functools.cache
def command() -> Any:
    """The click command typer builds from `app`: built once a process (about 35 ms, which the
    warm process pays once for all its children, handoff.cli.warm), then reused (each run
    makes a context of its own)."""
    return typer.main.get_command(app)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line on argv (default: this process's arguments); its exit status."""
    from handoff import trace

    trace.to_stderr()  # HANDOFF_DEBUG=1 set by the person (--verbose sets it later)
    # click's default: escape codes only to a terminal; with NO_COLOR, none at all (click
    # strips them from everything echoed, whatever made them)
    color = False if _plain() else None
    try:
        command()(args=None if argv is None else list(argv), prog_name="handoff", color=color)
    except SystemExit as done:  # how click ends every command, a successful one too
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except HandoffError as exc:
        typer.echo(describe(exc), err=True, color=color)
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return 0
