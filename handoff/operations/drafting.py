"""A plan waiting for its person's approval, as they handle it before the loop: shown with
what its planner grounded it in, edited (their editor on a copy, checked again as a plan),
drafted again with a note (the planner's next draft), approved, or refused.

The planner never approves: every act here is the person's command (`handoff plan`), or the
board's key.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from handoff.errors import UsageError
from handoff.inputs import PLAN_LIMIT, read_text
from handoff.loop import drafts
from handoff.loop.workspace import Workspace
from handoff.next_steps import hint
from handoff.operations.approval import approval_summary, refuse
from handoff.operations.opening import ensure_idle
from handoff.operations.results import Running
from handoff.operations.resume import resume_approved, run_in_window
from handoff.operations.standing import find_ticket
from handoff.phases import Phase
from handoff.protocol.reports import sections_of
from handoff.record.store import atomic_write, file_digest

#: where a person's edit of the plan is made, in the ticket's folder: kept when it does not
#: check out, so the next `--edit` opens it again
EDITING = "plan.edit.md"


@dataclass(frozen=True)
class Draft:
    """`handoff plan T`: the plan waiting for approval, what it was grounded in and how it
    runs, and what the person may do with it."""

    ticket: str
    plan: str
    summary: tuple[str, ...]
    #: drafted by a planner (its draft number; 0: a person's own plan)
    draft: int
    notes: tuple[str, ...] = ()

    @property
    def said(self) -> list[str]:
        acts = (f"approve: handoff plan {self.ticket} --approve · edit: --edit · "
                + ("another draft: --redraft NOTE · " if self.draft else "") + "refuse: --refuse")
        return [self.plan.rstrip("\n"), "", *(f"  {line}" for line in self.summary), "", acts]


@dataclass(frozen=True)
class Edited:
    ticket: str
    plan: Path
    notes: tuple[str, ...] = ()

    @property
    def said(self) -> list[str]:
        return [f"{self.ticket}: your edit is its plan now ({self.plan}); approve it: "
                f"handoff plan {self.ticket} --approve"]


@dataclass(frozen=True)
class Refused:
    ticket: str
    message: str
    notes: tuple[str, ...] = ()

    @property
    def said(self) -> list[str]:
        return [self.message]


def waiting_plan(home: Path, ticket: str, repo: Path | None) -> Workspace:
    """The ticket whose plan waits for its person's approval, no orchestrator running it."""
    tdir = find_ticket(home, ticket, repo)
    ensure_idle(tdir)
    ws = Workspace.open(home, tdir)
    phase = ws.state().phase
    if phase != Phase.AWAITING_APPROVAL or not tdir.plan_md.is_file():
        raise UsageError(f"{ticket} is {phase}: it has no plan waiting for approval",
                         hint(phase, ticket, tdir.path, False))
    return ws


def show(ws: Workspace) -> Draft:
    state = ws.state()
    plan = ws.tdir.plan_md.read_text(encoding="utf-8")
    return Draft(state.ticket, plan, tuple(approval_summary(ws)),
                 state.round if state.roles.planned else 0)


def edit(ws: Workspace, editor: Sequence[str] | None = None) -> Edited:
    """The person's editor on a copy of the plan; what they saved becomes the plan once it
    checks out as one (the same checks as a planner's draft); else the copy is kept, and the
    problems said."""
    tdir, state = ws.tdir, ws.state()
    copy = tdir.path / EDITING
    if not copy.is_file():
        atomic_write(copy, tdir.plan_md.read_text(encoding="utf-8"))
    argv = [*(editor or your_editor()), str(copy)]
    try:
        # the person's own editor in their terminal: it ends when they quit it, however long
        # they read (their time, not a peer's), so no bound is put on it
        done = subprocess.run(argv, check=False)
    except OSError as exc:
        raise UsageError(f"your editor {argv[0]!r} could not be started: {exc.strerror}",
                         "set VISUAL or EDITOR to the editor you use, e.g. EDITOR=nano") from None
    if done.returncode != 0:
        raise UsageError(f"your editor {argv[0]!r} exited {done.returncode}: the plan is as "
                         f"it was; your copy is kept in {copy}",
                         f"handoff plan {state.ticket} --edit opens it again")
    text = read_text(copy, PLAN_LIMIT, "your edit of the plan")
    paths = ws.repo.paths_at(state.base_commit)
    problems = drafts.plan_problems(text, paths, ws.config.test) + drafts.unknown_paths(
        drafts.grounding(sections_of(text).get("grounding", "")), paths)
    if problems:
        raise UsageError(f"your edit is not a plan the gate can run: {'; '.join(problems)}",
                         f"the plan is as it was; your edit is kept in {copy}: handoff plan "
                         f"{state.ticket} --edit opens it again")
    atomic_write(tdir.plan_md, text)
    copy.unlink()
    tdir.events.append("plan-edited", round=state.round, digest=file_digest(tdir.plan_md))
    return Edited(state.ticket, tdir.plan_md)


def your_editor() -> list[str]:
    """$VISUAL, else $EDITOR, else vi: as git picks one."""
    chosen = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    return shlex.split(chosen)


def redraft(ws: Workspace, note: str) -> Running:
    """The planner's next draft, its brief carrying the person's note and the last draft
    (kept beside the record as plan-draft-N.md); the orchestrator run in its window."""
    state, tdir = ws.state(), ws.tdir
    if not state.roles.planned:
        raise UsageError(f"{state.ticket}'s plan is yours, not a planner's: there is nobody to "
                         "draft it again", f"edit it (handoff plan {state.ticket} --edit), or "
                         f"start a ticket from its text (handoff start ID --ticket \"…\")")
    if not note.strip():
        raise UsageError("say what the next draft must do differently",
                         f"handoff plan {state.ticket} --redraft \"name the test file too\"")
    last = tdir.path / f"plan-draft-{state.round}.md"
    tdir.plan_md.replace(last)
    state.round += 1
    state.approve_drafted = False
    state.feedback = {"round": state.round, "findings": [], "notes": [
        ["The person asks for another draft", note.strip()],
        ["Your last draft", f"It is in `{last}`: keep what the note does not change."]]}
    tdir.move(state, Phase.PLANNING, f"another draft asked: {' '.join(note.split())[:200]}")
    return Running(state.ticket, run_in_window(ws), tdir.path)


def approve(home: Path, ticket: str, repo: Path | None) -> Running:
    return resume_approved(home, ticket, repo)


def refused(ws: Workspace) -> Refused:
    return Refused(ws.tdir.ticket, refuse(ws, "refused by handoff plan --refuse"))
