"""What the board's keys do (handoff.cli.board_app): each calls the core function its command
calls (handoff/operations/), and says the result in one line (cli.output.line); a ticket on a
host has the command run there."""

from __future__ import annotations

from pathlib import Path

from handoff.cli import output
from handoff.errors import HandoffError

# the verbs (and libtmux with them) are imported now, not when a key is pressed: libtmux reads
# sys.stdout.encoding as it loads, and inside the app sys.stdout is Textual's capture
from handoff.operations import closing, resume, tending
from handoff.operations.board import Row
from handoff.phases import Phase


def repo_of(row: Row) -> Path | None:
    return Path(row.repo) if row.repo else None


def on_host(home: Path, row: Row, args: list[str],
             terminal: bool = False) -> tuple[list[str], str]:
    """A ticket on a host: the command run there for it (what it printed), or with terminal
    the ssh argv that runs it in this terminal."""
    from handoff import config
    from handoff.errors import ExternalFailure
    from handoff.operations import remote
    from handoff.record import placed

    placement = placed.load(home, row.ticket)
    if placement is None:
        raise ExternalFailure(f"{row.ticket} is no longer placed on {row.host}")
    cfg = config.load(home, None)
    if terminal:
        return remote.terminal_argv(cfg, placement, args), ""
    status, said = remote.forward(cfg, placement, args)
    if status != 0:
        raise ExternalFailure(f"on {row.host}: {said}")
    return [], said


def answer(home: Path, row: Row, text: str) -> str:
    """As `handoff answer`: file it, and start the orchestrator again if none runs."""
    if row.host:
        return on_host(home, row, ["answer", row.ticket, text])[1]
    return output.line(tending.answer_ticket(home, row.ticket, repo_of(row), text))


def approve(home: Path, row: Row) -> str:
    """As `handoff resume TICKET --yes`."""
    if row.host:
        return on_host(home, row, ["resume", row.ticket, "--yes"])[1]
    return output.line(resume.resume_approved(home, row.ticket, repo_of(row)))


def recycle(home: Path, row: Row, role: str) -> str:
    if row.host:
        return on_host(home, row, ["recycle", row.ticket, role])[1]
    return output.line(tending.recycle_ticket(home, row.ticket, repo_of(row), role))


def view(home: Path, row: Row, what: str) -> tuple[str, str]:
    """The text the board shows for the view chosen (plan, diff, last report): its title and
    its text. A ticket on a host shows its diff from there; its plan and reports stay there."""
    from handoff.operations import viewing

    if row.host:
        if what != "diff":
            raise HandoffError(f"{row.ticket} runs on {row.host}: its {what} is there",
                               f"'handoff attach {row.ticket}' reaches it")
        return f"{row.ticket} on {row.host}: its change", on_host(
            home, row, ["diff", row.ticket])[1]
    from handoff.loop.workspace import Workspace
    from handoff.operations.standing import find_ticket

    # its plan and reports are in its record: readable with its repository gone
    ws = Workspace.open(home, find_ticket(home, row.ticket, repo_of(row)), repo_may_be_gone=True)
    if what == "plan":
        if not ws.tdir.plan_md.is_file():
            raise HandoffError(f"{row.ticket} has no plan yet: its planner drafts it",
                               f"'handoff attach {row.ticket}' shows the planner at work")
        if ws.state().phase == Phase.AWAITING_APPROVAL:  # what `handoff plan` shows
            from handoff.operations import drafting

            return (f"{row.ticket}: its plan, waiting for approval ({ws.tdir.plan_md})",
                    output.page(drafting.show(ws)))
        return f"{row.ticket}: its plan ({ws.tdir.plan_md})", viewing.plan(ws)
    if what == "diff":
        found, text = viewing.diff(ws)
        return found.what, text or "(no change)"
    last = viewing.last_report(ws)
    if last is None:
        raise HandoffError(f"{row.ticket} has no report yet")
    return f"{row.ticket}: {last[0].name}", last[1]


def stop(home: Path, row: Row) -> str:
    if row.host:
        return on_host(home, row, ["stop", row.ticket])[1]
    return output.line(closing.stop_ticket(home, row.ticket, repo_of(row)))


def ticket_from_plan(home: Path, plan: str, repo: Path) -> str:
    """A ticket made from a plan file (its id: the plan's `ticket:`, else the file's name, as
    `start --plans` names them) in repo, left awaiting the person's approval on the board,
    where `v` shows its plan and `y` approves it."""
    from handoff.operations import create

    [one] = create.plans_to_start([Path(plan.strip()).expanduser()])
    create.create(home, create.NewTicket(ticket=one.ticket, repo=repo, plan_text=one.text))
    return (f"{one.ticket} made from {one.path} in {repo.name}: awaiting your approval "
            "(v shows its plan, y approves it)")
