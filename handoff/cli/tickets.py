"""The commands that start a ticket's run, carry it on and end it: `start`, `resume`,
`answer`, `recycle`, `stop` and `close`, and `submit`, a peer's report filed. Each parses its
options, calls the core (handoff.operations: create, resume, closing, tending) and prints what
it returns; a command about a ticket on a host is run there as typed
(handoff.cli.elsewhere.OnItsHost, given by app.py), and `close` of one fetches its work here
first (handoff.operations.hosts)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from handoff.cli import elsewhere, output, running
from handoff.cli.options import RepoOpt, RoleArg, TicketArg, ticket_ids
from handoff.errors import HandoffError, UsageError
from handoff.next_steps import Verb, next_step, refused
from handoff.phases import Phase

if TYPE_CHECKING:
    from handoff.operations.create import PlanToStart

#: the tickets of one `start --plans` that start after each other: (ticket, what it waits for)
Batch = tuple[tuple[str, tuple[str, ...]], ...]

PlansArg = Annotated[list[str] | None, typer.Argument(
    metavar="TICKET | PLAN...", show_default=False,
    help="The ticket's id; with --plans, the plan files, a ticket each.")]
PlanOpt = Annotated[Path | None, typer.Option("--plan", help="The plan (Markdown).",
                                              exists=False, show_default=False)]
PlansOpt = Annotated[bool, typer.Option("--plans", help="The arguments are plans: each starts "
                                        "a ticket named by its frontmatter's 'ticket:', else "
                                        "by its file name (plans/PROJ-12.md: PROJ-12).")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Approve the plan without asking.")]
NowOpt = Annotated[bool, typer.Option("--now", help="Start at once, even when max_parallel "
                                      "tickets are at work (it still counts).")]
ForegroundOpt = Annotated[bool, typer.Option("--foreground", help="Run the orchestrator in "
                                             "this terminal instead of its tmux window.")]
MaxRoundsOpt = Annotated[int | None, typer.Option("--max-rounds", min=1)]
BaseOpt = Annotated[str, typer.Option("--base", help="Branch or commit to start from.")]
SummaryOpt = Annotated[str, typer.Option("--summary", help="What was asked (ticket.md).")]
HostOpt = Annotated[str | None, typer.Option(
    "--host", help="Where it runs: a host of config.yaml's hosts, local, or auto (the "
    "first with a free slot, this machine first); default: config.yaml's placement.",
    show_default=False)]
TicketTextOpt = Annotated[str | None, typer.Option(
    "--ticket", metavar="TEXT", help="What the ticket asks, in your words: a planner peer "
    "drafts the plan from it, for you to approve.", show_default=False)]
TicketFileOpt = Annotated[Path | None, typer.Option(
    "--ticket-file", metavar="FILE", help="The ticket's text from a file (as --ticket).",
    show_default=False)]
IssueOpt = Annotated[str | None, typer.Option(
    "--issue", metavar="N", help="The ticket is GitHub issue N of this repository (read with "
    "your own gh): its title and body are the ticket's text, its id gh-N unless given.",
    show_default=False)]
IssuesOpt = Annotated[bool, typer.Option(
    "--issues", help="The arguments are GitHub issue numbers: a ticket each (gh-N), its "
    "planner drafting its plan, each in its own window.")]
LabelOpt = Annotated[str | None, typer.Option(
    "--label", metavar="LABEL", help="A ticket (gh-N) for each open GitHub issue with this "
    "label, oldest first, as --issues.", show_default=False)]
AfterOpt = Annotated[list[str] | None, typer.Option(
    "--after", metavar="TICKET", help="A ticket it builds on (again for more, or A,B): it "
    "waits until they pass, then starts from their work (beside the plan's after:).",
    show_default=False)]


@dataclass(frozen=True)
class Starting:
    """How `start` starts each of its tickets: the same for every plan of --plans."""

    yes: bool
    now: bool
    max_rounds: int | None
    base: str
    repo: Path | None
    #: the tickets each builds on (--after)
    after: tuple[str, ...] = ()


def start(ticket: PlansArg = None, plan: PlanOpt = None, plans: PlansOpt = False,
          yes: YesOpt = False, now: NowOpt = False, foreground: ForegroundOpt = False,
          max_rounds: MaxRoundsOpt = None, base: BaseOpt = "HEAD", summary: SummaryOpt = "",
          host: HostOpt = None, after: AfterOpt = None, ticket_text: TicketTextOpt = None,
          ticket_file: TicketFileOpt = None, issue: IssueOpt = None, issues: IssuesOpt = False,
          label: LabelOpt = None, repo: RepoOpt = None) -> None:
    """Create a ticket from a plan, approve it, and start the loop (or one per plan: --plans);
    or from its text (--ticket, --ticket-file, --issue): a planner drafts the plan first, for
    you to approve. Beyond max_parallel tickets at work on this machine it waits in the queue."""
    from handoff.protocol import plan as plan_mod

    how = Starting(yes, now, max_rounds, base, repo, tuple(
        name.strip() for item in after or [] for name in item.split(",") if name.strip()))
    if issues or label is not None:
        if plan is not None or plans or host is not None or foreground or summary or any(
                given is not None for given in (ticket_text, ticket_file, issue)):
            raise UsageError("--issues and --label start a ticket per issue, each in its own "
                             "window, on this machine: no other source, --host, --foreground "
                             "or --summary", "handoff start --issues 120 121 122, or handoff "
                             "start --label handoff")
        raise typer.Exit(_start_batch(_issues_to_start(ticket or [], issues, label, repo), how,
                                      "local", ()))
    if ticket_text is not None or ticket_file is not None or issue is not None:
        if plan is not None or plans or host is not None:
            raise UsageError("a ticket started from its text gets its plan from a planner, on "
                             "this machine: --plan, --plans and --host are not for it",
                             "handoff start PROJ-12 --ticket \"what it must do\"")
        raise typer.Exit(_start_one(_ticket_to_start(ticket or [], ticket_text, ticket_file,
                                                     issue, repo), how, foreground, summary,
                                    brief=False))
    starts = _plans_to_start(ticket or [], plan, plans, foreground, summary)
    placement = elsewhere.placement(host, foreground)
    # the tickets of one --plans may start after each other, in any order
    batch = tuple((one.ticket, plan_mod.parse(one.text, str(one.path)).after + how.after)
                  for one in starts) if plans else ()
    if placement != "local" and (how.after or any(deps for _, deps in batch)):
        raise UsageError("a ticket that starts after others runs on this machine: their work "
                         "is here", "drop --host, or start it once they are merged")
    if not plans:  # its exit code says how a --foreground run ended
        if placement != "local":
            raise typer.Exit(_start_placed(placement, starts[0], how, summary))
        raise typer.Exit(_start_one(starts[0], how, foreground, summary, brief=False))
    raise typer.Exit(_start_batch(starts, how, placement, batch))


def _plans_to_start(args: list[str], plan: Path | None, plans: bool, foreground: bool,
                    summary: str) -> list[PlanToStart]:
    """The tickets `start` was given: one id and its --plan, or (--plans) a ticket a plan."""
    from handoff.operations import create

    if plans:
        if plan is not None or foreground or summary:
            raise UsageError("--plans takes the plans as its arguments, and starts each in its "
                             "own window: --plan, --summary and --foreground are for one ticket",
                             "handoff start --plans plans/*.md --yes")
        if not args:
            raise UsageError("--plans needs the plan files", "handoff start --plans plans/*.md")
        return create.plans_to_start([Path(a) for a in args])
    if len(args) != 1 or plan is None:
        raise UsageError("start takes one ticket id and its --plan (or --plans and plan "
                         "files)", "handoff start PROJ-12 --plan plan.md, or handoff start "
                         "--plans plans/*.md")
    return [create.PlanToStart(args[0], plan, create.read_plan(plan))]


def _ticket_to_start(args: list[str], text: str | None, path: Path | None, issue: str | None,
                     repo: Path | None) -> PlanToStart:
    """The ticket `start` was given as text: --ticket, --ticket-file or --issue (one of them),
    its id the one given, else the issue's (gh-N)."""
    from handoff.operations import create
    from handoff.record.store import validate_ticket_id

    if sum(given is not None for given in (text, path, issue)) != 1:
        raise UsageError("give the ticket's text once: --ticket, --ticket-file or --issue",
                         "handoff start PROJ-12 --ticket \"fix the rounding in human_size\"")
    if len(args) > 1:
        raise UsageError("start takes one ticket id", "handoff start PROJ-12 --ticket \"…\"")
    if issue is not None:
        from handoff.machinery.repo import Repo
        from handoff.trackers.github import GitHub

        found = GitHub(Repo.at(repo or Path.cwd()).top).fetch(issue)
        return create.PlanToStart(validate_ticket_id(args[0] if args else found.ticket_id),
                                  Path("-"), "", ticket_text=found.text, source=found.url)
    if not args:
        raise UsageError("start needs the ticket's id", "handoff start PROJ-12 --ticket \"…\"")
    said = text if text is not None else create.read_plan(path, "the ticket") if path else ""
    if not said.strip():
        raise UsageError("the ticket's text is empty: say what the ticket must achieve",
                         "handoff start PROJ-12 --ticket \"fix the rounding in human_size\"")
    return create.PlanToStart(validate_ticket_id(args[0]), path or Path("-"), "",
                              ticket_text=said)


def _issues_to_start(args: list[str], issues: bool, label: str | None,
                     repo: Path | None) -> list[PlanToStart]:
    """`start --issues N...` or `--label L`: every issue read before any ticket starts (a
    mistake in the third leaves none started), a ticket gh-N each."""
    from handoff.machinery.repo import Repo
    from handoff.operations import create
    from handoff.trackers.github import GitHub

    if issues == (label is not None):
        raise UsageError("--issues takes the issue numbers as its arguments; --label takes "
                         "none: one of them", "handoff start --issues 120 121")
    tracker = GitHub(Repo.at(repo or Path.cwd()).top)
    refs = list(args) if issues else tracker.labelled(label or "")
    if not refs:
        raise UsageError("no issue to start" + (f": no open issue has the label {label!r}"
                                                if label is not None else ""),
                         "handoff start --issues 120 121, or label the issues")
    found = [tracker.fetch(ref) for ref in dict.fromkeys(refs)]
    return [create.PlanToStart(issue.ticket_id, Path("-"), "", ticket_text=issue.text,
                               source=issue.url) for issue in found]


def _start_placed(placement: str, one: PlanToStart, how: Starting, summary: str) -> int:
    """One ticket started where placement (a host, or auto) puts it: on a host, or here after
    all, in its tmux window."""
    return elsewhere.start_on(placement, one, how.yes, how.now, how.max_rounds, how.base,
                              summary, how.repo, here=functools.partial(
                                  _start_one, one, how, False, summary, brief=False))


def _start_batch(starts: Sequence[PlanToStart], how: Starting, placement: str,
                 batch: Batch) -> int:
    """`start --plans`: each ticket started in its own window, one that fails said and the
    rest started all the same; exit 1 when any failed."""
    from handoff import config
    from handoff.record import slots
    from handoff.record import starts as in_flight
    from handoff.record.store import state_home

    home = state_home()
    limit = config.load(home, how.repo or Path.cwd()).parallel
    before = slots.standing(home, limit)
    failed = 0
    launched: list[Path] = []
    # in flight until every orchestrator it started holds its place in the queue (a relayed
    # start is in flight till it exits anyway): the slots go in the order of the plans
    with in_flight.InFlight(home):
        for one in starts:
            try:
                failed += (_start_placed(placement, one, how, "") if placement != "local" else
                           _start_one(one, how, False, "", brief=True, batch=batch,
                                      windows=launched)) != 0
            except HandoffError as exc:
                output.failed(one.ticket, exc)
                failed += 1
        if not how.now:
            slots.wait_placed(home, launched, in_flight.BOUND * 0.75)
    started = len(starts) - failed
    typer.echo(f"{started} of {len(starts)} started; where each stands: handoff status, or "
               "handoff watch")
    free = max(0, limit - len(before.at_work) - len(before.waiting))
    # the ones that start after others wait for those, not for a slot
    later = sum(1 for _, after in batch if after)
    queued = 0 if how.now or placement != "local" else max(0, started - later - free)
    if queued:  # each one's own start said nothing: their orchestrators had not asked yet
        typer.echo(f"{queued} of them wait in the queue ({limit} tickets at work at most: "
                   "max_parallel), in the order of their plans; each starts by itself when "
                   "a slot frees")
    return 1 if failed else 0


def _start_one(one: PlanToStart, how: Starting, foreground: bool, summary: str, brief: bool,
               batch: Batch = (), windows: list[Path] | None = None) -> int:
    from handoff.operations import create, resume
    from handoff.record import starts
    from handoff.record.store import state_home

    home = state_home()
    # what a person waits for goes before other tickets' orchestrators' first steps; not the
    # approval (a person's time) nor an orchestrator run here (it would wait for itself)
    with starts.InFlight(home):
        ws, notes = create.create(home, create.NewTicket(
            ticket=one.ticket, repo=how.repo or Path.cwd(), plan_text=one.text, summary=summary,
            base=how.base, max_rounds=how.max_rounds, now=how.now, notes=not brief,
            after=how.after, batch=batch, ticket_text=one.ticket_text,
            approve_drafted=how.yes, source=one.source))
    ticket = one.ticket
    output.notes(notes)
    if one.ticket_text:  # its planner drafts the plan first: approved once it is there
        typer.echo(f"{ticket}: its planner ({ws.spec('planner').provider}) drafts the plan; "
                   + ("it is approved once it validates (--yes)" if how.yes else
                      f"approve it once drafted: {next_step(Phase.AWAITING_APPROVAL, ticket)}"),
                   err=True)
    elif not running.approve(ws, how.yes):
        typer.echo(f"{ticket} is waiting for approval: "
                   f"{next_step(Phase.AWAITING_APPROVAL, ticket)}", err=True)
        return 1
    queue = create.queue_note(ws)
    if queue:
        typer.echo(f"{ticket}: {queue}", err=True)
    if foreground:
        return running.launch(ws, foreground)
    with starts.InFlight(home):
        if brief:
            typer.echo(f"{ticket}: the orchestrator runs in tmux session "
                       f"{resume.run_in_window(ws)}")
            if windows is not None:  # its orchestrator's window: the batch waits for it
                windows.append(ws.tdir.path)
            return 0
        launched = running.launch(ws, foreground)
    if one.ticket_text and not how.yes and running.at_terminal():
        from handoff.cli.approving import after_drafting

        return after_drafting(ws)  # its person is here: asked once the plan is drafted
    return launched


def resume(
    ticket: Annotated[str | None, typer.Argument(autocompletion=ticket_ids,
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
    from handoff.operations import resume
    from handoff.record.store import state_home

    if every:
        if ticket is not None or foreground or yes or more_rounds is not None or onto:
            raise UsageError("--all resumes every ticket whose run was cut off, each in its "
                             "own window: it takes no ticket, --foreground, --yes, "
                             "--more-rounds or --onto", "handoff resume --all")
        raise typer.Exit(_resume_all(state_home(), repo))
    if ticket is None:
        raise UsageError("resume needs a ticket (or --all)", "handoff resume PROJ-12")
    if onto is not None:
        from handoff.operations.onto import resume_onto

        ws, carried = resume_onto(state_home(), ticket, repo, onto, more_rounds)
        typer.echo(carried)
        raise typer.Exit(running.launch(ws, foreground))
    if yes and not foreground:  # as the board's approve
        output.show(resume.resume_approved(state_home(), ticket, repo, more_rounds))
        raise typer.Exit(0)
    ws, notes = resume.open_to_resume(state_home(), ticket, repo, more_rounds)
    output.notes(notes)
    if ws.state().phase == Phase.AWAITING_APPROVAL and not running.approve(ws, yes):
        raise refused(Verb.RESUME, Phase.AWAITING_APPROVAL, ticket, ws.tdir.path, False)
    raise typer.Exit(running.launch(ws, foreground))


def _resume_all(home: Path, repo: Path | None) -> int:
    from handoff.machinery.repo import Repo
    from handoff.operations import resume
    from handoff.record.ticket import TicketDir

    failed_there = elsewhere.resume_all(home) if repo is None else 0
    by_hand: list[TicketDir] = []
    found = resume.left_behind(home, Repo.at(repo).key if repo is not None else None, by_hand)
    for tdir in by_hand:
        typer.echo(f"note: {tdir.ticket} was stopped by hand: left stopped ('handoff resume "
                   f"{tdir.ticket}' carries it on)", err=True)
    if not found:
        typer.echo("no ticket's run was cut off here: nothing to resume (handoff status shows "
                   "where each stands)")
        return 1 if failed_there else 0
    failed = 0
    for tdir in found:
        try:
            ws, notes = resume.open_to_resume(home, tdir.ticket, Path(tdir.load().repo))
            output.notes(notes)
            typer.echo(f"{tdir.ticket}: resumed in tmux session {resume.run_in_window(ws)}")
            if not resume.in_line(home, tdir):
                typer.echo(f"note: {tdir.ticket} took no slot within "
                           f"{resume.IN_LINE_BOUND:.0f}s: the next may start before it "
                           f"(handoff log {tdir.ticket} says why)", err=True)
        except HandoffError as exc:
            failed += 1
            output.failed(tdir.ticket, exc)
    typer.echo(f"{len(found) - failed} of {len(found)} resumed")
    return 1 if failed or failed_there else 0


def recycle(ticket: TicketArg, role: RoleArg, repo: RepoOpt = None) -> None:
    """Kill a peer and start it fresh on its current brief."""
    from handoff.operations import tending
    from handoff.record.store import state_home

    output.show(tending.recycle_ticket(state_home(), ticket, repo, role))


def forget(tickets: Annotated[list[str], typer.Argument(
        autocompletion=ticket_ids, show_default=False, help="The closed tickets.")],
        repo: RepoOpt = None) -> None:
    """Delete closed tickets' records (their branches stay); 'gc --older-than DAYS' forgets
    the long closed."""
    from handoff.operations import closing
    from handoff.record.store import state_home

    for ticket in tickets:
        output.show(closing.forget_ticket(state_home(), ticket, repo))


def submit(
    report: Path,
    directory: Annotated[str | None, typer.Option("--dir", help="The ticket directory.")] = None,
    role: Annotated[str | None, typer.Option("--role")] = None,
    round_: Annotated[int | None, typer.Option("--round")] = None,
) -> None:
    """File a report (run by a peer). Prints every problem, exit 1, when it is not accepted."""
    from handoff.cli import filing

    raise typer.Exit(filing.submit(report, directory, role, round_))


def answer(ticket: TicketArg, text: str, repo: RepoOpt = None) -> None:
    """Answer a blocked ticket; the implementer carries on with the answer."""
    from handoff.operations import tending
    from handoff.record.store import state_home

    output.show(tending.answer_ticket(state_home(), ticket, repo, text))


def stop(ticket: TicketArg, repo: RepoOpt = None) -> None:
    """Stop the orchestrator and the peers; 'handoff resume' carries on later."""
    from handoff.operations import closing
    from handoff.record.store import state_home

    output.show(closing.stop_ticket(state_home(), ticket, repo))


def close(
    ticket: TicketArg,
    keep_worktrees: Annotated[bool, typer.Option("--keep-worktrees")] = False,
    force: Annotated[bool, typer.Option("--force", help="Discard uncommitted work in the "
                                        "worktrees.")] = False,
    repo: RepoOpt = None,
) -> None:
    """Stop the peers, remove the worktrees (refusing to lose work), keep branch and record.
    On a host: its branch and final report are fetched here first; its record stays there."""
    from handoff.operations import closing
    from handoff.record.store import state_home

    on_host = elsewhere.placed(ticket)
    if on_host is not None:
        from handoff.operations import hosts

        output.show(hosts.close_on(*on_host, keep_worktrees, force))
        return

    output.show(closing.close_ticket(state_home(), ticket, repo, keep_worktrees, force))
