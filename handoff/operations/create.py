"""`handoff start`: a new ticket's plan read and checked, its directory written (phase
awaiting-approval), and what `start` says of the queue. The approval itself is
handoff.operations.approval; running its orchestrator is handoff.operations.resume."""

from __future__ import annotations

import errno
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from handoff import config as config_mod
from handoff.errors import ExternalFailure, MissingTool, UsageError
from handoff.inputs import PLAN_LIMIT, need_folder, read_text
from handoff.loop import after
from handoff.loop.workspace import Workspace
from handoff.machinery import tools
from handoff.machinery.peers import session_name
from handoff.machinery.repo import Repo, short_sha
from handoff.machinery.repo_worktrees import WORKTREES_DIR
from handoff.machinery.ticket_branch import branch_name
from handoff.machinery.tmux import Tmux, socket_name
from handoff.machinery.worktrees import TicketWorktrees
from handoff.next_steps import Verb, refused
from handoff.operations.doctor import ready_to_start
from handoff.phases import Phase
from handoff.protocol import plan as plan_mod
from handoff.record import placed, slots
from handoff.record.lock import holder
from handoff.record.store import (
    atomic_write,
    keep_private,
    private_dir,
    validate_ticket_id,
    write_failed,
)
from handoff.record.ticket import State, TicketDir, ticket_dir


@dataclass(frozen=True)
class NewTicket:
    ticket: str
    repo: Path
    plan_text: str
    summary: str = ""
    base: str = "HEAD"
    max_rounds: int | None = None
    socket: str | None = None
    #: take a slot over max_parallel rather than wait in the queue
    now: bool = False
    #: count the checkout's uncommitted changes for `Created.notes`
    notes: bool = True
    #: the tickets it builds on, beside its plan's `after:` (handoff.loop.after)
    after: tuple[str, ...] = ()
    #: the `after:` of each ticket of the same `start --plans` (they may name each other)
    batch: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: the ticket's text (--ticket, --issue): a planner drafts its plan (plan_text unused)
    ticket_text: str = ""
    #: with ticket_text: the drafted plan approved once it validated (start --yes)
    approve_drafted: bool = False
    #: the tracker's issue the text came from (its address)
    source: str = ""


@dataclass(frozen=True)
class PlanToStart:
    ticket: str
    path: Path
    text: str
    #: no plan yet: a planner drafts it from this text (--ticket, --ticket-file, --issue)
    ticket_text: str = ""
    #: the tracker's issue the text came from (its address; --issue)
    source: str = ""


def read_plan(path: Path, label: str = "the plan") -> str:
    """A plan's text (a binary file, /dev/zero or an oversized one refused clearly)."""
    return read_text(path, PLAN_LIMIT, label)


def plans_to_start(paths: list[Path]) -> list[PlanToStart]:
    """`start --plans`: each plan with the ticket it starts (its frontmatter's `ticket:`, else
    its file name), all read and checked before any starts, so a mistake in the fifth does not
    leave four started and the rest not."""
    found: list[PlanToStart] = []
    seen: dict[str, Path] = {}
    for path in paths:
        text = read_plan(path, f"the plan {path}")
        plan = plan_mod.parse(text, str(path))
        ticket = plan.ticket or path.stem
        try:
            validate_ticket_id(ticket)
        except UsageError as exc:
            raise UsageError(f"{path}: {exc.message}" + ("" if plan.ticket else
                             " (taken from the file's name)"),
                             f"name the ticket in the plan's frontmatter (ticket: PROJ-12), or "
                             f"rename the file; {exc.hint}") from None
        if ticket in seen:
            raise UsageError(f"{seen[ticket]} and {path} both start ticket {ticket}",
                             "give one of them its own id: ticket: ID in its frontmatter")
        seen[ticket] = path
        found.append(PlanToStart(ticket, path, text))
    return found


def queue_note(ws: Workspace) -> str:
    """What `start` says when the ticket will wait for a slot ('' when one is free). The
    orchestrator decides; this only reads the queue, so it may be a moment out of date."""
    limit = ws.config.parallel
    now = slots.standing(ws.home, limit)
    if len(now.at_work) + len(now.waiting) < limit:
        return ""
    if ws.state().jumps_queue:
        return (f"{len(now.at_work)} of {limit} tickets at work (max_parallel): --now starts "
                "it anyway")
    return (f"{len(now.at_work)} of {limit} tickets at work (max_parallel): it waits in the "
            f"queue{f' behind {len(now.waiting)}' if now.waiting else ''} and starts by itself "
            "when a slot frees (handoff status shows its place)")


class Created(NamedTuple):
    workspace: Workspace
    #: what a person starting it should know (as `open_to_resume`'s notes): uncommitted
    #: changes in their checkout are not part of it
    notes: list[str]


def create(home: Path, new: NewTicket) -> Created:
    """Validate everything, then write the ticket directory (phase awaiting-approval)."""
    ticket = validate_ticket_id(new.ticket)
    keep_private()
    too_old = tools.problems()
    if too_old:
        raise MissingTool("; ".join(too_old), "install or upgrade it, then run the command again")
    repo = Repo.at(new.repo)
    need_folder(repo.top / WORKTREES_DIR / ticket, repo.top, "for the ticket's worktrees")
    cfg = config_mod.load(home, repo.top)
    planned = bool(new.ticket_text.strip())
    plan = plan_mod.Plan(text="") if planned else plan_mod.parse(new.plan_text, "the plan")
    ready_to_start(cfg, repo.top)
    tmux = Tmux(new.socket or socket_name(), home)
    checkout = repo.checkout() if new.base == "HEAD" or new.notes else None
    # HEAD from the status a person is told of anyway; rev-parse for a branch with no commit
    # yet (its clear error) and any other base
    base_commit = checkout.head if checkout and new.base == "HEAD" and checkout.head else \
        repo.resolve(new.base)
    tdir = ticket_dir(home, repo.key, ticket)
    if tdir.state_file.exists():
        raise refused(Verb.START, tdir.load().phase, ticket, tdir.path,
                      holder(tdir.lock_file) is not None)
    refuse_stale(tdir)
    elsewhere = placed.load(home, ticket)
    if elsewhere is not None:  # ids are unique across this machine and its hosts
        raise UsageError(f"ticket {ticket} already runs on host {elsewhere.host}",
                         f"pick another id, or close it there: handoff close {ticket}")
    refuse_taken_branch(repo, ticket)
    after_ = list(dict.fromkeys((*plan.after, *new.after)))
    for name in after_:
        validate_ticket_id(name)
    after.check(home, repo.key, ticket, after_, dict(new.batch))
    max_rounds = new.max_rounds or cfg.max_rounds
    if max_rounds < 1:
        raise UsageError("--max-rounds must be at least 1")
    for folder in (home, tdir.path.parent):  # the user's alone, whatever the umask
        private_dir(folder)
    title = new.summary or _title(new.ticket_text if planned else plan.text) or \
        f"Ticket {ticket}"
    team = cfg.team.with_planner() if planned else cfg.team
    state = State(ticket=ticket, repo=str(repo.top), repo_key=repo.key, base=new.base,
                  base_commit=base_commit, socket=tmux.socket,
                  session=session_name(ticket, repo.key), max_rounds=max_rounds,
                  max_gate_bounces=cfg.max_gate_bounces, max_relaunches=cfg.max_relaunches,
                  team=team.records(), jumps_queue=new.now, after=after_,
                  approve_drafted=planned and new.approve_drafted, source=new.source)
    if planned:  # its planner drafts the plan first: the orchestrator starts at once
        state.phase, state.round = Phase.PLANNING, 1
    write_record(tdir, state, f"# {ticket}\n\n{title.strip()}\n" + (
        f"\n{new.ticket_text.strip()}\n" if planned else ""), "" if planned else plan.text)
    notes = [f"{checkout.changes} uncommitted change(s) in {repo.top} are not part of {ticket}: "
             f"it starts from {new.base} ({short_sha(base_commit)})"] \
        if new.notes and checkout and checkout.changes else []
    if new.notes and not planned and plan.test is None and not cfg.test and \
            not cfg.scanners:  # --yes hid it
        notes.append(f"{ticket} has no gate: its plan names no test command and the repository "
                     "sets no test: (in .handoff.yaml), so only its reviewers judge the work")
    return Created(Workspace(home=home, tdir=tdir, repo=repo, config=cfg), notes)


#: the folder a new ticket's record is written in before it takes its name: a start that is
#: killed, or meets a full disk, leaves no half-made ticket (gc removes what a killed one left)
STAGING = ".{ticket}.new-{pid}"


def write_record(tdir: TicketDir, state: State, ticket_md: str, plan: str) -> None:
    """The ticket's record made whole beside its place, then renamed into it: every reader
    sees no ticket, or all of it (its state and its `created` event). A write that fails
    leaves nothing, and says so."""
    staging = TicketDir(tdir.path.parent / STAGING.format(ticket=tdir.ticket, pid=os.getpid()))
    try:
        private_dir(staging.path)
        atomic_write(staging.ticket_md, ticket_md)
        if plan:  # none yet for a ticket whose planner drafts it
            atomic_write(staging.plan_md, plan)
        staging.save(state)
        staging.events.append("created", base=state.base, base_commit=state.base_commit,
                              repo=state.repo)
        os.rename(staging.path, tdir.path)  # refused when another start made it meanwhile
    except (ExternalFailure, OSError) as exc:
        shutil.rmtree(staging.path, ignore_errors=True)
        if isinstance(exc, ExternalFailure):
            raise ExternalFailure(exc.message, exc.hint.replace(
                "then 'handoff resume' the ticket: nothing was half written",
                f"then start it again: nothing of {tdir.ticket} was kept")) from None
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise UsageError(f"ticket {tdir.ticket} was made meanwhile by another start",
                             f"look at it: handoff status {tdir.ticket}") from None
        raise write_failed(tdir.path, exc) from None


def refuse_taken_branch(repo: Repo, ticket: str) -> None:
    """A new ticket makes its branch itself: one that is there already (a ticket's of an
    earlier life of this id, a person's, or one a peer of another ticket planted with a
    backdoor in it) is never taken over. Named, and nothing is changed."""
    tip = TicketWorktrees(repo, ticket).branch_tip()
    if tip:
        branch = branch_name(ticket)
        raise UsageError(f"branch {branch} already exists (at {short_sha(tip)}): a new ticket "
                         "starts its branch itself and never takes one over",
                         f"look at it ('git log {branch}'), then rename it ('git branch -m "
                         f"{branch} {branch}-old') or delete it, or pick another ticket id")


def refuse_stale(tdir: TicketDir) -> None:
    """A folder with files but no state.json is the record of an earlier ticket (its state was
    removed or lost): a new ticket there would take the old reports as its own. Refused, and
    nothing is moved or deleted: the person decides what the old record is worth."""
    if not tdir.path.is_dir():
        return
    entries = sorted(p.name for p in tdir.path.iterdir())
    if not entries:
        return
    shown = ", ".join(entries[:5]) + (", …" if len(entries) > 5 else "")
    backup = " (state.json.bak may hold its state: copy it to state.json to carry it on)" \
        if tdir.backup_file.exists() else ""
    raise UsageError(
        f"the folder of ticket {tdir.ticket}, {tdir.path}, holds an earlier record "
        f"({len(entries)} entries: {shown}) but no state.json",
        f"handoff deletes nothing: move it aside (mv '{tdir.path}' '{tdir.path}.old') or pick "
        f"another id{backup}")


def _title(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return ""

