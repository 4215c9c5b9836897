"""`handoff finish`: merge a passed ticket's branch into its base branch, locally, then close it.

Nothing is pushed. Every refusal comes before anything changes: the merge is worked out with
`git merge-tree --write-tree` (no index, no checkout), so a conflict is named without touching
the user's checkout; the commit is then made with `git commit-tree` and the base branch moved:

* base checked out in a worktree (the user's checkout, clean): `git merge --ff-only` to the new
  commit there, which moves branch and files together or refuses without changing either;
* base checked out nowhere: `git update-ref` with the old value, so a branch that moved in the
  meantime is refused, never overwritten.

The ticket is then closed as `handoff close` closes it (`lifecycle.close_ticket`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from handoff.errors import UsageError, WorkAtRisk
from handoff.loop.workspace import Workspace
from handoff.machinery.repo import Repo, git, short_sha
from handoff.machinery.worktrees import branch_name, person_checkouts
from handoff.operations import lifecycle
from handoff.operations.results import Finished
from handoff.record.ticket import State

MODES = ("merge", "squash")


@dataclass(frozen=True)
class Base:
    """The branch a ticket merges into, and where (if anywhere) it is checked out."""

    branch: str
    head: str
    checkout: Path | None


def finish_ticket(home: Path, ticket: str, repo: Path | None,
                  mode: str = "merge") -> Finished:
    """Merge (mode "merge": a merge commit; "squash": one commit) a passed ticket into its base
    branch and close it. Raises before changing anything when it cannot be done safely."""
    if mode not in MODES:
        raise UsageError(f"unknown finish mode {mode!r}", "use --merge or --squash")
    ws = lifecycle.open_ticket(home, ticket, repo)
    state = ws.state()
    _ensure_passed(ws, state)
    commit = state.last_commit()
    branch = state.branch or branch_name(state.ticket)
    tip = ws.repo.branch_head(branch)
    base = base_branch(ws.repo, state.ticket, state.base, state.base_commit, branch)
    if base.checkout is not None:
        ensure_clean_checkout(base)
    ws.worktrees.ensure_clean(("implementer",))  # what close would refuse, refused first
    notes = []
    if tip and tip != commit:
        notes.append(f"{branch} is at {short_sha(tip)}, past the commit that passed review "
                     f"({short_sha(commit)}): only the reviewed commit is merged")
    new, said = merge(ws.repo, base, commit, branch, mode,
                      lambda: message(ws, state, base.branch, branch, mode))
    notes += said
    if new:
        ws.tdir.events.append("finish", round=state.round, mode=mode, base=base.branch,
                              before=base.head, after=new, merged=commit, by="hand")
    closed = lifecycle.close_ticket(home, ticket, repo)
    return Finished(closed, mode, base.branch, base.head, new, commit,
                    notes=(*notes, *closed.notes))


def merge(repo: Repo, base: Base, commit: str, branch: str, mode: str,
          text: Callable[[], str]) -> tuple[str, list[str]]:
    """commit merged into base (a merge commit, or one squashed commit: mode), the base branch
    and its checkout moved to it: the new commit ('' when base held it all already) and notes.
    Every refusal comes before anything moves."""
    tree = "" if repo.is_ancestor(commit, base.head) else merged_tree(repo, base, commit, branch)
    if not tree or tree == git(repo.top, "rev-parse", f"{base.head}^{{tree}}"):
        # merged before (a finish whose close failed, run again): never an empty commit
        return "", [f"{base.branch} already holds what {short_sha(commit)} changes: nothing "
                    "to merge"]
    parents = [base.head, commit] if mode == "merge" else [base.head]
    new = git(repo.top, "commit-tree", tree, *(a for p in parents for a in ("-p", p)),
              "-m", text())
    move_base(repo, base, new)
    return new, []


def _ensure_passed(ws: Workspace, state: State) -> None:
    if state.phase == "passed":
        return
    hint = {"closed": f"its branch {state.branch or branch_name(state.ticket)} is kept: merge "
                      "it yourself with git merge",
            "escalated": f"read {ws.tdir.final_report}; 'handoff resume {state.ticket} "
                         "--more-rounds N' carries it on"}.get(
        state.phase, f"wait until it passes: 'handoff status {state.ticket}'")
    raise UsageError(f"{state.ticket} is {state.phase}, not passed: only a ticket that passed "
                     "review is merged", hint)


def base_branch(repo: Repo, ticket: str, started: str, base_commit: str, branch: str) -> Base:
    """The branch the ticket was started from (started: its --base): that branch when it named
    one, else the branch checked out in the main worktree when its history holds the ticket's
    base commit."""
    where = person_checkouts(repo)
    current = repo.base_of(started)
    if current and current == started.removeprefix("refs/heads/"):
        return Base(current, repo.branch_head(current), where.get(current))
    main = repo.main_checkout()
    if not current:
        raise UsageError(f"{ticket} was started from {started} "
                         f"({short_sha(base_commit)}), not a branch, and {main} has no branch "
                         "checked out to merge into",
                         f"check out the branch to merge into in {main}, then run finish again")
    head = repo.branch_head(current)
    if not repo.is_ancestor(base_commit, head):
        raise UsageError(f"{ticket} was started from {started} "
                         f"({short_sha(base_commit)}), and {current}, checked out in {main}, "
                         "does not hold that commit",
                         f"check out the branch it was started from in {main}, or merge "
                         f"{branch} yourself")
    return Base(current, head, where.get(current, main))


def ensure_clean_checkout(base: Base) -> None:
    """The user's checkout of the base moves with the merge: any change in it is refused."""
    assert base.checkout is not None
    changed = git(base.checkout, "status", "--porcelain", "--untracked-files=normal").splitlines()
    if changed:
        listing = ", ".join(line[3:] for line in changed[:5]) + (" …" if len(changed) > 5 else "")
        raise WorkAtRisk(f"{base.checkout}, where {base.branch} is checked out, has uncommitted "
                         f"or untracked changes: {listing}",
                         "commit or stash them there, then run finish again; nothing was merged")


def merged_tree(repo: Repo, base: Base, commit: str, branch: str) -> str:
    """The tree of the merge, written to the object store only; conflicts refuse, naming files."""
    tree, conflicts = repo.merge(base.head, commit)
    if conflicts is not None:
        listing = ", ".join(conflicts[:8]) + (" …" if len(conflicts) > 8 else "")
        raise UsageError(f"{branch} does not merge cleanly into {base.branch} "
                         f"(at {short_sha(base.head)}): conflicts in {listing}",
                         f"nothing was changed; merge {base.branch} into {branch} and resolve "
                         "them, or merge by hand")
    return tree


def message(ws: Workspace, state: State, base: str, branch: str, mode: str) -> str:
    """The commit message: the ticket, its title, and its final report's outcome line."""
    title = _title(ws)
    report = _outcome(ws)
    if mode == "squash":
        head = f"{state.ticket}: {title}" if title else state.ticket
    else:
        head = f"Merge {branch} into {base}" + (f" ({state.ticket}: {title})" if title else "")
    body = [f"Ticket {state.ticket}, reviewed at {short_sha(state.last_commit())} on {branch}."]
    if report:
        body.append(report)
    return head + "\n\n" + "\n".join(body) + "\n"


def _title(ws: Workspace) -> str:
    """ticket.md's text after its `# TICKET` heading."""
    if not ws.tdir.ticket_md.exists():
        return ""
    lines = [ln.strip() for ln in ws.tdir.ticket_md.read_text(encoding="utf-8").splitlines()]
    return next((ln for ln in lines if ln and not ln.startswith("# ")), "")


def _outcome(ws: Workspace) -> str:
    if not ws.tdir.final_report.exists():
        return ""
    return outcome(ws.tdir.final_report.read_text(encoding="utf-8"))


def outcome(report: str) -> str:
    """A final report without its heading, for a commit message: the outcome, rounds, changes
    and checks."""
    lines = report.splitlines()
    return "\n".join(ln for ln in lines if ln and not ln.startswith("# ")).replace("**", "")


def move_base(repo: Repo, base: Base, new: str) -> None:
    """Move the base branch to new, its checkout (if any) with it; a branch that moved since it
    was read is refused by git, leaving it as it is."""
    if base.checkout is None:
        git(repo.top, "update-ref", "-m", "handoff finish", f"refs/heads/{base.branch}", new,
            base.head)
        return
    if git(base.checkout, "rev-parse", "HEAD") != base.head:
        raise UsageError(f"{base.branch} moved while the merge was being made",
                         "nothing was changed; run finish again")
    git(base.checkout, "merge", "--ff-only", "--quiet", new)
