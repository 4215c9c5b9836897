"""`handoff resume TICKET --onto BRANCH`: carry a ticket onto the base as it is now.

A passed ticket whose merge conflicts, or whose merged result fails (handoff.operations.finish),
cannot be finished, and its reviewed commit cannot change. This gives it a round of its own:
handoff merges the branch's head into the implementer's checkout (a merge commit when git can
make it; else the merge is left under way there, its conflicts for the implementer to resolve),
the ticket's base becomes that head, and the implementer's next brief says what changed on the
base, what conflicted and how the merged result failed. The gate and fresh reviewers then run as
in any round, so the ticket passes again at a commit that merges.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from handoff.errors import UsageError
from handoff.loop import rules
from handoff.loop.context import TicketContext
from handoff.loop.workspace import Workspace
from handoff.machinery.repo import git, short_sha
from handoff.next_steps import Verb, refused
from handoff.operations.more_rounds import limits_of
from handoff.operations.opening import ensure_idle
from handoff.operations.render import words
from handoff.operations.standing import find_ticket
from handoff.phases import Phase
from handoff.record.lock import TicketLock
from handoff.role import IMPLEMENTER

#: rounds a carried ticket gets beyond where it stands, unless the person says how many: the
#: carrying round, and one to answer its review
ROUNDS = 2
#: commits of the base named in the brief
SHOWN = 20


def carry(ws: Workspace, onto: str, more: int | None = None) -> str:
    """Merge branch onto's head into the ticket's work and start its next round there; a
    note saying what was done. Refuses, changing nothing, a ticket that has not finished its
    run (passed or escalated), a branch that does not exist, a ticket already built on it and
    an implementer's checkout with uncommitted work."""
    tdir = ws.tdir
    more = ROUNDS if more is None else more
    if more < 1:
        raise UsageError(f"--more-rounds must be at least 1 (got {more})",
                         f"handoff resume {tdir.ticket} --onto {onto} --more-rounds 1")
    with TicketLock(tdir.lock_file):
        state = ws.state()
        if state.phase not in (Phase.PASSED, Phase.ESCALATED):  # the lock held: none runs
            raise refused(Verb.ONTO, state.phase, state.ticket, tdir.path, running=False)
        head = ws.repo.branch_head(onto.removeprefix("refs/heads/"))
        if not head:
            raise UsageError(f"there is no branch {onto!r} in {ws.repo.top}",
                             f"name the branch {state.ticket} should merge into, e.g. --onto main")
        last = state.last_commit()
        if ws.repo.is_ancestor(head, last):
            raise UsageError(f"{state.ticket} already builds on {onto} "
                             f"({short_sha(head)}): nothing to carry",
                             f"'handoff finish {state.ticket}' merges it")
        made = ws.ensure_worktree(state, IMPLEMENTER)
        if made:
            tdir.events.append("worktree", round=state.round, role=IMPLEMENTER, **made)
        ws.worktrees.ensure_clean((IMPLEMENTER,))
        changed = _changed(ws, state.base_commit, head)
        failed = _last_red_merge(ws)
        conflicts = ws.worktrees.merge_in(
            IMPLEMENTER, last, head,
            f"Merge {onto} into {ws.branch()}\n\n{state.ticket} carried onto {onto} at "
            f"{short_sha(head)} by handoff resume --onto.\n")
        merged = "" if conflicts else ws.worktrees.head(IMPLEMENTER)
        before = state.base_commit
        state.base, state.base_commit = onto.removeprefix("refs/heads/"), head
        after = rules.extended(limits_of(state), state.reviews, state.gate_bounces,
                               more)
        state.max_rounds, state.max_gate_bounces = after.max_rounds, after.max_gate_bounces
        tdir.save(state)
        kept = tdir.path / f"final-report.{state.phase}-{state.round}.md"
        if tdir.final_report.exists():
            tdir.final_report.replace(kept)
        tdir.events.append("onto", round=state.round, onto=onto, before=before, after=head,
                           conflicts=conflicts, merged=merged, more=more,
                           final_report=kept.name if kept.exists() else "")
        TicketContext(ws).apply(rules.next_round([(
            f"Carry your work onto {onto}", _note(onto, before, head, changed, conflicts,
                                                  merged, failed))]))
    said = (f"conflicts in {', '.join(conflicts)} are left in the implementer's checkout to "
            "resolve" if conflicts else f"merged cleanly at {short_sha(merged)}")
    return (f"{state.ticket} carried onto {onto} ({short_sha(before)} -> {short_sha(head)}): "
            f"{said}; round {state.round + 1} starts, then the gate and fresh reviewers")


def _changed(ws: Workspace, since: str, head: str) -> tuple[list[str], list[str]]:
    """The base's commits since the ticket's base (newest first, at most SHOWN) and the files
    they changed."""
    log = git(ws.repo.top, "log", "--no-decorate", "--format=%h %s", f"-{SHOWN + 1}",
              f"{since}..{head}").splitlines()
    files = git(ws.repo.top, "diff", "--name-only", "--no-renames", since, head).splitlines()
    return log, files


def _last_red_merge(ws: Workspace) -> dict[str, object] | None:
    """The last merge-check of the ticket, when it failed: what finish found."""
    events, _ = ws.tdir.events.read()
    checks = [e for e in events if e.get("kind") == "merge-check"]
    return checks[-1] if checks and checks[-1].get("result") == "failed" else None


def _note(onto: str, before: str, head: str, changed: tuple[list[str], list[str]],
          conflicts: list[str], merged: str, failed: Mapping[str, object] | None) -> str:
    log, files = changed
    lines = [f"Your work passed review, but {onto} has moved on since it started "
             f"({short_sha(before)} -> {short_sha(head)}), and your commit cannot be merged "
             "into it as it is."]
    if failed is not None:
        failing = ", ".join(words(failed.get("failing"))) or str(failed.get("last") or "")
        logs = words(failed.get("logs"))
        lines.append(f"\nMerged with {onto}, it failed the gate: {failed.get('summary')}"
                     + (f"\nFailing: {failing}" if failing else "")
                     + (f"\nLog: {logs[0]} in the ticket folder" if logs else ""))
    shown = log[:SHOWN] + (["…"] if len(log) > SHOWN else [])
    lines.append(f"\nWhat changed on {onto}:\n" + "\n".join(f"- {c}" for c in shown))
    if files:
        lines.append(f"Files it changed: {', '.join(files[:30])}"
                     + (" …" if len(files) > 30 else ""))
    if conflicts:
        lines.append(f"\nhandoff started merging {onto} into your checkout, and git left "
                     f"conflicts in: {', '.join(conflicts)}. Resolve each so that both your "
                     f"change and what {onto} changed still hold, run the tests, then conclude "
                     "the merge with `git add` and `git commit --no-edit` (a merge commit: "
                     f"{onto} must be one of its parents) and report that commit.")
    else:
        lines.append(f"\nhandoff merged {onto} into your checkout at {short_sha(merged)}. "
                     "Run the tests, mend what the merge broke in a commit on top of it, and "
                     "report the commit you leave checked out.")
    lines.append("Change only what carrying your work onto the base needs: the reviewers "
                 "see this round's diff against the new base.")
    return "\n".join(lines)


def resume_onto(home: Path, ticket: str, repo: Path | None, onto: str,
                more: int | None) -> tuple[Workspace, str]:
    """`handoff resume TICKET --onto BRANCH`: the ticket opened, carried, ready to run."""
    tdir = find_ticket(home, ticket, repo)
    ensure_idle(tdir)
    ws = Workspace.open(home, tdir)
    return ws, carry(ws, onto, more)
