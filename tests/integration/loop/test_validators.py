"""handoff.loop.validators: a report's claims checked against real git state."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.loop.validators import check_implementer, check_reviewer, check_tester, full_sha
from handoff.machinery.repo import Repo
from handoff.machinery.worktrees import TicketWorktrees
from handoff.protocol.reports import Report
from tests.conftest import commit_file, git


def impl(commit: str, status: str = "done") -> Report:
    return Report(role="implementer", commit=commit, status=status)


def review(commit: str, verdict: str = "pass") -> Report:
    return Report(role="reviewer", commit=commit, verdict=verdict)


@pytest.fixture
def main(repo: Path) -> Repo:
    return Repo.at(repo)


@pytest.fixture
def base(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def wt(main: Repo) -> TicketWorktrees:
    return TicketWorktrees(main, "T-7")


@pytest.fixture
def work(wt: TicketWorktrees, base: str) -> Path:
    """The implementer worktree on handoff/T-7, at base."""
    return wt.create_implementer(base)


def test_happy_path_has_no_problems(main: Repo, wt: TicketWorktrees, work: Path,
                                    base: str) -> None:
    commit = commit_file(work, "fix.txt", "fixed\n")
    assert check_implementer(impl(commit), main, wt, base) == []


def test_happy_path_with_a_short_sha(main: Repo, wt: TicketWorktrees, work: Path,
                                     base: str) -> None:
    commit = commit_file(work, "fix.txt", "fixed\n")
    assert check_implementer(impl(commit[:8]), main, wt, base) == []


def test_happy_path_in_a_later_round(main: Repo, wt: TicketWorktrees, work: Path,
                                     base: str) -> None:
    first = commit_file(work, "fix.txt", "fixed\n", "round 1")
    second = commit_file(work, "fix.txt", "fixed better\n", "round 2")
    assert check_implementer(impl(second), main, wt, first) == []


def test_nonexistent_commit(main: Repo, wt: TicketWorktrees, work: Path, base: str) -> None:
    problems = check_implementer(impl("deadbeefdeadbeef"), main, wt, base)
    assert len(problems) == 1
    assert "deadbeefdeadbeef" in problems[0]
    assert "does not exist" in problems[0]


def test_a_blob_sha_is_not_a_commit(main: Repo, wt: TicketWorktrees, work: Path,
                                    base: str) -> None:
    blob = git(work, "rev-parse", "HEAD:calc.py")
    problems = check_implementer(impl(blob), main, wt, base)
    assert len(problems) == 1
    assert "does not exist" in problems[0]


def test_commit_made_elsewhere(repo: Path, main: Repo, wt: TicketWorktrees, work: Path,
                              base: str) -> None:
    """A commit that builds on the base but is not what the implementer's worktree holds (made
    on main, or in another checkout) is not its report's: handoff puts on the ticket branch
    only the commit its worktree holds."""
    elsewhere = commit_file(repo, "main-only.txt", "main\n", "on main")
    problems = check_implementer(impl(elsewhere), main, wt, base)
    assert any("HEAD is not" in p and elsewhere[:10] in p for p in problems), problems


def test_no_new_commit(main: Repo, wt: TicketWorktrees, work: Path, base: str) -> None:
    problems = check_implementer(impl(base), main, wt, base)
    assert len(problems) == 1
    assert "nothing new" in problems[0]


def test_no_new_commit_in_a_later_round(main: Repo, wt: TicketWorktrees, work: Path,
                                        base: str) -> None:
    first = commit_file(work, "fix.txt", "fixed\n")
    problems = check_implementer(impl(first), main, wt, first)
    assert len(problems) == 1
    assert "nothing new" in problems[0]


def test_rewritten_history(main: Repo, wt: TicketWorktrees, work: Path, base: str) -> None:
    accepted = commit_file(work, "fix.txt", "round 1\n", "round 1")
    git(work, "reset", "-q", "--hard", base)
    rewritten = commit_file(work, "fix.txt", "round 1 again\n", "rewritten")
    problems = check_implementer(impl(rewritten), main, wt, accepted)
    assert len(problems) == 1
    assert "rewrite" in problems[0]
    assert accepted[:10] in problems[0]


def test_dirty_worktree(main: Repo, wt: TicketWorktrees, work: Path, base: str) -> None:
    commit = commit_file(work, "fix.txt", "fixed\n")
    (work / "forgotten.txt").write_text("not committed", encoding="utf-8")
    (work / "calc.py").write_text("edited after commit\n", encoding="utf-8")
    problems = check_implementer(impl(commit), main, wt, base)
    assert len(problems) == 1
    assert "not clean" in problems[0]
    assert "forgotten.txt" in problems[0]
    assert "calc.py" in problems[0]


def test_head_is_not_the_reported_commit(main: Repo, wt: TicketWorktrees, work: Path,
                                         base: str) -> None:
    reported = commit_file(work, "fix.txt", "fixed\n", "reported")
    commit_file(work, "more.txt", "more\n", "not reported")
    problems = check_implementer(impl(reported), main, wt, base)
    assert len(problems) == 1
    assert "HEAD" in problems[0]
    assert reported[:10] in problems[0]


def test_head_check_with_a_detached_checkout(main: Repo, wt: TicketWorktrees, work: Path,
                                             base: str) -> None:
    reported = commit_file(work, "fix.txt", "fixed\n", "reported")
    git(work, "checkout", "-q", "--detach", base)
    problems = check_implementer(impl(reported), main, wt, base)
    assert len(problems) == 1
    assert "HEAD" in problems[0]


def test_blocked_skips_the_advance_checks(main: Repo, wt: TicketWorktrees, work: Path,
                                          base: str) -> None:
    (work / "half-done.txt").write_text("wip", encoding="utf-8")
    assert check_implementer(impl(base, status="blocked"), main, wt, base) == []


def test_partial_is_checked_like_done(main: Repo, wt: TicketWorktrees, work: Path,
                                      base: str) -> None:
    problems = check_implementer(impl(base, status="partial"), main, wt, base)
    assert any("nothing new" in p for p in problems)


def test_full_sha(main: Repo, base: str) -> None:
    assert full_sha(main, base[:7]) == base
    assert full_sha(main, base) == base
    assert full_sha(main, "") == ""
    assert full_sha(main, "0123456789abcdef") == ""


def test_reviewer_full_sha_matches(main: Repo, base: str) -> None:
    assert check_reviewer(review(base), main, base) == []


def test_reviewer_short_sha_matches(main: Repo, base: str) -> None:
    assert check_reviewer(review(base[:9], verdict="fail"), main, base) == []


def test_reviewer_other_commit_is_rejected(repo: Path, main: Repo, base: str) -> None:
    other = commit_file(repo, "other.txt", "other\n")
    problems = check_reviewer(review(other), main, base)
    assert len(problems) == 1
    assert other in problems[0]
    assert base[:10] in problems[0]


def test_reviewer_unknown_commit_is_rejected(main: Repo, base: str) -> None:
    problems = check_reviewer(review("abcdef1234567"), main, base)
    assert len(problems) == 1
    assert "abcdef1234567" in problems[0]


def test_reviewer_empty_commit_is_rejected(main: Repo, base: str) -> None:
    assert len(check_reviewer(review(""), main, base)) == 1


# ---- a tester's claims --------------------------------------------------------------------------


def report_of_a_tester(commit: str, status: str = "done") -> Report:
    return Report(role="qa", commit=commit, status=status)


def only_tests(path: str) -> bool:
    return path.startswith("tests/")


@pytest.fixture
def qa(wt: TicketWorktrees, work: Path, base: str) -> tuple[Path, str]:
    """The implementer committed round 1; the tester's checkout is detached at that commit."""
    start = commit_file(work, "calc.py", "def add(a, b):\n    return a + b\n", "round 1")
    return wt.create_detached("qa", start), start


def test_a_testers_commit_of_tests_on_its_start_is_taken(main: Repo, wt: TicketWorktrees,
                                                          qa: tuple[Path, str]) -> None:
    checkout, start = qa
    assert check_tester(report_of_a_tester(start), main, wt, "qa", start, only_tests) == [], \
        "nothing to add: the commit it was given"
    commit = commit_file(checkout, "tests/test_more.py", "import unittest\n", "tests")
    assert check_tester(report_of_a_tester(commit), main, wt, "qa", start, only_tests) == []


def test_a_tester_that_changes_code_is_refused_naming_the_files(main: Repo, wt: TicketWorktrees,
                                                                qa: tuple[Path, str]) -> None:
    checkout, start = qa
    commit = commit_file(checkout, "calc.py", "x = 1\n", "a fix the tester should not make")
    problems = check_tester(report_of_a_tester(commit), main, wt, "qa", start, only_tests)
    assert problems == ["your commit changes files that are not tests (calc.py): a tester adds "
                        "tests only; a fault in the code is for the implementer, and your "
                        "failing test shows it"]


def test_a_testers_commit_must_build_on_the_commit_it_was_given(
        main: Repo, wt: TicketWorktrees, work: Path, base: str, qa: tuple[Path, str]) -> None:
    _, start = qa
    problems = check_tester(report_of_a_tester(base), main, wt, "qa", start, only_tests)
    assert len(problems) == 1 and "does not build on" in problems[0]


def test_a_testers_checkout_must_hold_its_commit_clean(main: Repo, wt: TicketWorktrees,
                                                       qa: tuple[Path, str]) -> None:
    checkout, start = qa
    commit = commit_file(checkout, "tests/test_more.py", "import unittest\n", "tests")
    (checkout / "tests" / "scratch.py").write_text("x\n")
    problems = check_tester(report_of_a_tester(commit), main, wt, "qa", start, only_tests)
    assert len(problems) == 1 and "is not clean (tests/scratch.py)" in problems[0]
    assert check_tester(report_of_a_tester(commit), main, wt, "qa", start, only_tests,
                        worktree_state=False) == []


def test_a_blocked_tester_is_not_held_to_a_commit(main: Repo, wt: TicketWorktrees,
                                                  qa: tuple[Path, str], base: str) -> None:
    _, start = qa
    assert check_tester(report_of_a_tester(base, "blocked"), main, wt, "qa", start, only_tests) == []
