"""The git part of `handoff finish`, for a local ticket (handoff.operations.finish) and one on
a host (handoff.operations.hosts): which branch a ticket merges into, that its checkout is
clean, the merge made as objects (`git merge-tree --write-tree`, `git commit-tree`: no index,
no checkout of the person's) and the base moved to it, and nothing of the ticket's loop: this
module imports none of the ticket verbs (create, resume, closing, ...), so hosts and doctor
reach it without a circle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from handoff.errors import NotMerged, UsageError, WorkAtRisk
from handoff.machinery.repo import Repo, git, short_sha
from handoff.machinery.repo_worktrees import person_checkouts

MODES = ("merge", "squash")


@dataclass(frozen=True)
class Base:
    """The branch a ticket merges into, and where (if anywhere) it is checked out."""

    branch: str
    head: str
    checkout: Path | None


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
        raise NotMerged(f"{branch} does not merge cleanly into {base.branch} "
                        f"(at {short_sha(base.head)}): conflicts in {listing}",
                        f"nothing was changed; to carry it on, merge {base.branch} into a branch "
                        f"of its own and mend it: 'git switch -c {branch.replace('/', '-')}-onto-"
                        f"{base.branch} {short_sha(commit)} && git merge {base.branch}'")
    return tree


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
