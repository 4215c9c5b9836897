"""Real tickets made in-process for the loop's unit tests: created and approved the way
`handoff start --yes` does it (handoff.operations.create and approval), with no CLI, no orchestrator and
no peer. What a test then builds on one (a TicketContext, an Orchestrator with fake rooms) acts
on a real ticket directory, repository and worktrees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from handoff.loop.context import TicketContext
from handoff.loop.workspace import Workspace
from handoff.operations.approval import approve
from handoff.operations.create import NewTicket, create
from handoff.protocol.reports import Finding, Report
from handoff.role import IMPLEMENTER
from tests.conftest import CALC, commit_file, git
from tests.harness import FIX_ADD, plan_text

#: a plan with a scripted round 1 and no test command: nothing runs at the gate or the base
PLAN = plan_text({1: {"edits": [FIX_ADD]}})
#: a second reviewer beside the default team's
SECURITY = {"provider": "scripted", "kind": "reviewer", "focus": "security"}
TESTER = {"provider": "scripted", "kind": "tester"}
#: calc.py with add() mended: round 1's change
ADD_FIXED = CALC.replace("return a - b", "return a + b")


def repo_config(repo: Path, **settings: Any) -> None:
    """The repository's .handoff.yaml, committed (a ticket starts from a clean checkout)."""
    (repo / ".handoff.yaml").write_text(yaml.safe_dump(settings, sort_keys=False),
                                        encoding="utf-8")
    git(repo, "add", ".handoff.yaml")
    git(repo, "commit", "-q", "-m", "handoff config")


def team(repo: Path, **roles: dict[str, Any]) -> None:
    """The two default roles, then these (in this order), and nothing else configured."""
    repo_config(repo, roles={IMPLEMENTER: {"provider": "scripted"},
                             "reviewer": {"provider": "scripted"}, **roles})


def new_ticket(repo: Path, home: Path, plan: str = PLAN, ticket: str = "T-1") -> Workspace:
    """A ticket approved and at its first round (implementing), as `start --yes` leaves it."""
    ws = create(home, NewTicket(ticket, repo, plan)).workspace
    approve(ws)
    return ws


def new_context(repo: Path, home: Path, plan: str = PLAN, ticket: str = "T-1") -> TicketContext:
    return TicketContext(new_ticket(repo, home, plan, ticket))


def implementer_commit(ctx: TicketContext, name: str, text: str,
                       message: str = "work") -> str:
    """A commit in the implementer's checkout (made when missing), as its peer makes one: the
    ticket branch does not move (handoff alone moves it)."""
    ctx.ws.ensure_worktree(ctx.state, IMPLEMENTER)
    return commit_file(ctx.ws.worktrees.path(IMPLEMENTER), name, text, message)


def at_round(ctx: TicketContext, commit: str, n: int | None = None) -> None:
    """Round n's commit accepted (the current round by default), as accept_work records it:
    the ticket branch moved on to it."""
    problem = ctx.ws.worktrees.advance_branch(ctx.state.last_commit(), commit)
    assert not problem, problem
    ctx.state.commits[str(ctx.state.round if n is None else n)] = commit
    ctx.save()


def events(ctx: TicketContext, kind: str) -> list[dict[str, Any]]:
    found, _ = ctx.tdir.events.read()
    return [e for e in found if e["kind"] == kind]


def phases(ctx: TicketContext) -> list[tuple[str, str]]:
    """Every phase change the ticket's log holds, (from, to)."""
    return [(e["from"], e["to"]) for e in events(ctx, "phase")]


def done(role: str, commit: str, status: str = "done", question: str = "None") -> Report:
    """An implementer's or a tester's report as the desk hands it on once accepted."""
    return Report(role=role, commit=commit, status=status,
                  sections={"open questions": question})


def verdict(role: str, commit: str, passed: bool, *must_fix: Finding) -> Report:
    """A reviewer's report as the desk hands it on once accepted."""
    return Report(role=role, commit=commit, verdict="pass" if passed else "fail",
                  must_fix=must_fix)
