"""handoff.machinery.ticket_branch: the ticket branch is handoff's alone: made where none is
(recorded as this HANDOFF_HOME's), never taken over, never followed as a symbolic ref, moved
forward only and the implementer's checkout with it; a commit merged into a checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.errors import ExternalFailure, UsageError
from handoff.machinery.checkouts import Checkouts
from handoff.machinery.repo import Repo
from handoff.machinery.ticket_branch import TicketBranch, branch_name
from handoff.machinery.worktrees import TicketWorktrees
from tests.conftest import commit_file, git

TICKET = "T-1"


def worktrees(repo: Path) -> TicketWorktrees:
    return TicketWorktrees(Repo.at(repo), TICKET)


@pytest.fixture
def base(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD")


def test_a_branch_is_handoffs_for_the_home_that_started_it(repo: Path, base: str,
                                                           tmp_path: Path) -> None:
    checkouts = Checkouts(Repo.at(repo), TICKET)
    mine = TicketBranch(checkouts, tmp_path / "home")
    assert mine.name == branch_name(TICKET) == "handoff/T-1" and mine.tip() == ""
    assert mine.start(base) == base and mine.start(base) == base, "found the second time"
    assert git(repo, "rev-parse", f"refs/heads/{mine.name}") == base
    assert mine.made() and mine.foreign() == ""
    assert mine.record_file().is_relative_to(repo / ".git" / "handoff" / "branches")
    other = TicketBranch(checkouts, tmp_path / "another-home")
    assert not other.made() and other.foreign() == base
    with pytest.raises(UsageError, match="handoff did not make it for this ticket"):
        other.start(base)


def test_existing_branch_without_the_base_is_a_usage_error(repo: Path, base: str) -> None:
    git(repo, "branch", branch_name(TICKET), base)
    newer = commit_file(repo, "later.txt", "later\n", "main moves on")
    wt = worktrees(repo)
    with pytest.raises(UsageError) as info:
        wt.create_implementer(newer)
    assert branch_name(TICKET) in info.value.message
    assert not wt.path("implementer").exists()
    assert Repo.at(repo).branch_head(branch_name(TICKET)) == base


def test_a_branch_handoff_did_not_make_is_never_taken_over(repo: Path, base: str) -> None:
    """A branch a peer of another ticket planted (with a backdoor), or a person's: refused even
    when it holds the base, and nothing is made."""
    git(repo, "checkout", "-q", "-b", branch_name(TICKET))
    planted = commit_file(repo, "backdoor.txt", "evil\n", "planted")
    git(repo, "checkout", "-q", "main")
    wt = worktrees(repo)
    with pytest.raises(UsageError) as info:
        wt.create_implementer(base)
    assert branch_name(TICKET) in info.value.message and planted[:10] in info.value.message
    assert not wt.path("implementer").exists()
    assert git(repo, "rev-parse", branch_name(TICKET)) == planted


def test_the_branch_handoff_made_is_taken_again_on_resume(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    work = wt.create_implementer(base)
    commit = commit_file(work, "feature.txt", "feature\n")
    assert wt.advance_branch(base, commit) == ""
    assert wt.remove("implementer") is True
    path = wt.create_implementer(base)
    assert wt.head("implementer") == commit and (path / "feature.txt").exists()


def test_a_symbolic_ticket_branch_is_never_followed(repo: Path, base: str) -> None:
    """A peer that made its ticket branch a symbolic ref to main would have the branch's next
    move move main."""
    wt = worktrees(repo)
    work = wt.create_implementer(base)
    commit = commit_file(work, "feature.txt", "feature\n")
    git(repo, "symbolic-ref", f"refs/heads/{branch_name(TICKET)}", "refs/heads/main")
    problem = wt.advance_branch(base, commit)
    assert "symbolic ref to refs/heads/main" in problem and "symbolic-ref --delete" in problem
    assert git(repo, "rev-parse", "refs/heads/main") == base, "main did not move"
    with pytest.raises(UsageError):
        wt.branch_tip()


def test_the_branch_moves_to_a_testers_commit_and_the_implementers_checkout_follows(
        repo: Path, base: str) -> None:
    wt = worktrees(repo)
    work = wt.create_implementer(base)
    start = commit_file(work, "calc.py", "def add(a, b):\n    return a + b\n", "round 1")
    assert wt.advance_branch(base, start) == ""
    qa = wt.create_detached("qa", start)
    tests = commit_file(qa, "tests/test_more.py", "import unittest\n", "tests")
    assert wt.advance_branch(start, tests) == ""
    assert git(repo, "rev-parse", f"refs/heads/{branch_name('T-1')}") == tests
    assert git(work, "rev-parse", "HEAD") == tests and (work / "tests" / "test_more.py").is_file()
    assert git(work, "status", "--porcelain") == ""


def test_the_branch_is_not_moved_over_the_implementers_uncommitted_work(repo: Path,
                                                                       base: str) -> None:
    wt = worktrees(repo)
    work = wt.create_implementer(base)
    qa = wt.create_detached("qa", base)
    tests = commit_file(qa, "calc.py", "changed by the tester\n", "tests")
    (work / "calc.py").write_text("the implementer's uncommitted work\n")
    problem = wt.advance_branch(base, tests)
    assert "calc.py" in problem and "overwritten" in problem
    assert git(repo, "rev-parse", f"refs/heads/{branch_name('T-1')}") == base, "not moved"
    assert (work / "calc.py").read_text() == "the implementer's uncommitted work\n"



def test_a_commit_is_merged_into_a_checkout_as_a_merge_commit(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    work = wt.create_implementer(base)
    mine = commit_file(work, "feature.txt", "feature\n", "the ticket's work")
    theirs = commit_file(repo, "other.txt", "other\n", "main moves on")
    assert wt.merge_in("implementer", mine, theirs, "merge main") == []
    assert git(work, "log", "-1", "--format=%s %P") == f"merge main {mine} {theirs}"
    assert (work / "feature.txt").is_file() and (work / "other.txt").is_file()
    assert git(repo, "rev-parse", f"refs/heads/{branch_name(TICKET)}") == base, \
        "the branch moves only when handoff accepts the commit"


def test_a_conflicting_merge_is_left_under_way_for_the_peer(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    work = wt.create_implementer(base)
    mine = commit_file(work, "calc.py", "# the ticket's calc\n", "the ticket's work")
    theirs = commit_file(repo, "calc.py", "# main's calc\n", "main changes calc")
    assert wt.merge_in("implementer", mine, theirs, "merge main") == ["calc.py"]
    assert git(work, "rev-parse", "-q", "--verify", "MERGE_HEAD") == theirs
    assert "<<<<<<<" in (work / "calc.py").read_text()
    git(work, "merge", "--abort")
    with pytest.raises(ExternalFailure, match="git could not merge"):
        wt.merge_in("implementer", mine, "0" * 40, "merge nothing")
    assert git(work, "rev-parse", "HEAD") == mine and git(work, "status", "--porcelain") == ""
