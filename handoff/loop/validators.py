"""The claims in a report, checked against git: validators are authoritative, prompts advisory."""

from __future__ import annotations

from collections.abc import Callable

from handoff.machinery.repo import Repo, short_sha
from handoff.machinery.worktrees import TicketWorktrees
from handoff.protocol.reports import Report
from handoff.role import IMPLEMENTER
from handoff.verdicts import Status


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
    if report.status == Status.BLOCKED:
        return []
    # the commit need not be on the ticket branch yet: handoff puts it there once accepted
    # (no peer writes a ref); it must build on the last accepted one and be what the
    # implementer's worktree holds
    problems = []
    if sha == previous:
        problems.append(f"commit {short_sha(sha)} is the same as before this round: nothing new was "
                        "committed (commit your changes, then report the new sha)")
    elif not repo.is_ancestor(previous, sha):
        problems.append(f"commit {short_sha(sha)} does not build on {short_sha(previous)}: do not rewrite "
                        "the ticket's history")
    return problems + (holds(worktrees, IMPLEMENTER, sha) if worktree_state else [])


def holds(worktrees: TicketWorktrees, role: str, sha: str) -> list[str]:
    """What is wrong with the role's worktree as the report files it: it must be clean, at the
    commit it names."""
    path = worktrees.path(role)
    dirty = worktrees.dirty(path)
    if dirty:
        listing = ", ".join(e[3:] for e in dirty[:5])
        return [f"the worktree {path} is not clean ({listing}): commit or remove it"]
    if path.is_dir() and worktrees.head(role) != sha:
        return [f"the worktree's HEAD is not {short_sha(sha)}: report the commit you left "
                "checked out"]
    return []


def check_reviewer(report: Report, repo: Repo, reviewed: str) -> list[str]:
    sha = full_sha(repo, report.commit)
    if sha != reviewed:
        return [f"commit {report.commit} is not the commit under review ({short_sha(reviewed)}): "
                "review that exact commit and name it"]
    return []


def check_tester(report: Report, repo: Repo, worktrees: TicketWorktrees, role: str, start: str,
                 tests_only: Callable[[str], bool], worktree_state: bool = True) -> list[str]:
    """Problems with a tester's claims: its commit builds on start (the round's commit it was
    given, or is start when it found nothing to add), is what its worktree holds, and changes
    tests only (tests_only: whether a path is a test file). The branch is handoff's to move:
    the tester commits in its detached checkout."""
    sha = full_sha(repo, report.commit)
    if not sha:
        return [f"commit {report.commit} does not exist in the repository: commit your tests "
                "and report the sha from 'git rev-parse HEAD'"]
    if report.status == Status.BLOCKED:
        return []
    if not repo.is_ancestor(start, sha):
        return [f"commit {short_sha(sha)} does not build on {short_sha(start)}, the commit you "
                "were given: add your tests on top of it"]
    others = [path for path in repo.changed_paths(start, sha) if not tests_only(path)]
    problems = []
    if others:
        shown = ", ".join(others[:5]) + (" …" if len(others) > 5 else "")
        problems.append(f"your commit changes files that are not tests ({shown}): a tester "
                        "adds tests only; a fault in the code is for the implementer, and "
                        "your failing test shows it")
    return problems + (holds(worktrees, role, sha) if worktree_state else [])
