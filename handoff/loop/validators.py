"""The claims in a report, checked against git: validators are authoritative, prompts advisory."""

from __future__ import annotations

from handoff.machinery.repo import Repo, short_sha
from handoff.machinery.worktrees import TicketWorktrees, branch_name
from handoff.protocol.reports import Report


def full_sha(repo: Repo, commit: str) -> str:
    """The full sha for a (possibly short) commit, or '' when it is not a commit here."""
    if not commit or not repo.commit_exists(commit):
        return ""
    return repo.resolve(commit)


def check_implementer(report: Report, repo: Repo, worktrees: TicketWorktrees,
                      previous: str, worktree_state: bool = True) -> list[str]:
    """Problems with an implementer's claims; previous is the last accepted commit (or base).

    worktree_state: also check the worktree is clean at that commit. Only true at the moment
    of filing: what a peer does in its worktree after `handoff submit` accepted its report
    (a stray build file, the next round's first edit) is not a claim of that report.
    """
    sha = full_sha(repo, report.commit)
    if not sha:
        return [f"commit {report.commit} does not exist in the repository: commit your work "
                "and report the sha from 'git rev-parse HEAD'"]
    if report.status == "blocked":
        return []
    branch = branch_name(worktrees.ticket)
    problems = []
    if not repo.is_ancestor(sha, f"refs/heads/{branch}"):
        problems.append(f"commit {short_sha(sha)} is not on the ticket branch {branch}")
    if sha == previous:
        problems.append(f"commit {short_sha(sha)} is the same as before this round: nothing new was "
                        "committed (commit your changes, then report the new sha)")
    elif not repo.is_ancestor(previous, sha):
        problems.append(f"commit {short_sha(sha)} does not build on {short_sha(previous)}: do not rewrite "
                        "the ticket branch's history")
    if not worktree_state:
        return problems
    path = worktrees.path("implementer")
    dirty = worktrees.dirty(path)
    if dirty:
        listing = ", ".join(e[3:] for e in dirty[:5])
        problems.append(f"the worktree {path} is not clean ({listing}): commit or remove it")
    elif path.is_dir() and worktrees.head("implementer") != sha:
        problems.append(f"the worktree's HEAD is not {short_sha(sha)}: report the commit you "
                        "left checked out")
    return problems


def check_reviewer(report: Report, repo: Repo, reviewed: str) -> list[str]:
    sha = full_sha(repo, report.commit)
    if sha != reviewed:
        return [f"commit {report.commit} is not the commit under review ({short_sha(reviewed)}): "
                "review that exact commit and name it"]
    return []
