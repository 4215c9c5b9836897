"""handoff.operations.merging: the git part of `handoff finish`, on a real repository: which
branch a ticket merges into, the merge made as objects only, and the base moved to it (the
whole command: tests/integration/operations/test_finish.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.errors import HandoffError, NotMerged, UsageError, WorkAtRisk
from handoff.machinery.repo import Repo
from handoff.operations.merging import (
    Base,
    base_branch,
    ensure_clean_checkout,
    merge,
    merged_tree,
    move_base,
)
from tests.conftest import commit_file, git


def ticket_commit(repo: Path, name: str = "feature.txt", text: str = "new\n") -> str:
    """A commit on branch handoff/T-1, off main, the checkout left on main."""
    git(repo, "switch", "-q", "-c", "handoff/T-1")
    commit = commit_file(repo, name, text, "the ticket's work")
    git(repo, "switch", "-q", "main")
    return commit


def main_base(repo: Path) -> Base:
    return Base("main", git(repo, "rev-parse", "main"), repo.resolve())


@pytest.mark.parametrize(("mode", "parents"), [("merge", 2), ("squash", 1)])
def test_a_merge_is_made_as_objects_and_moves_the_base_and_its_checkout(
        repo: Path, mode: str, parents: int) -> None:
    commit = ticket_commit(repo)
    before = main_base(repo)
    new, notes = merge(Repo.at(repo), before, commit, "handoff/T-1", mode, lambda: "T-1 done")
    assert notes == [] and git(repo, "rev-parse", "main") == new
    assert len(git(repo, "rev-list", "--parents", "-n", "1", new).split()) == parents + 1
    assert git(repo, "log", "-1", "--format=%s", new) == "T-1 done"
    assert (repo / "feature.txt").read_text() == "new\n", "the person's checkout moved with it"
    assert git(repo, "status", "--porcelain") == ""


def test_a_base_that_holds_the_change_already_gets_no_commit(repo: Path) -> None:
    commit = ticket_commit(repo)
    git(repo, "merge", "-q", "--ff-only", commit)
    base = main_base(repo)
    new, notes = merge(Repo.at(repo), base, commit, "handoff/T-1", "merge", lambda: "x")
    assert new == "" and "already holds what" in notes[0]
    assert git(repo, "rev-parse", "main") == base.head


def test_a_conflict_refuses_naming_its_files_and_moves_nothing(repo: Path) -> None:
    commit = ticket_commit(repo, "calc.py", "theirs\n")
    commit_file(repo, "calc.py", "ours\n", "the base moved on")
    base = main_base(repo)
    with pytest.raises(NotMerged) as caught:
        merged_tree(Repo.at(repo), base, commit, "handoff/T-1")
    assert "conflicts in calc.py" in caught.value.message
    assert "git switch -c handoff-T-1-onto-main" in (caught.value.hint or "")
    assert git(repo, "rev-parse", "main") == base.head and (repo / "calc.py").read_text() == \
        "ours\n"


def test_the_base_is_the_branch_the_ticket_started_from(repo: Path) -> None:
    start = git(repo, "rev-parse", "main")
    base = base_branch(Repo.at(repo), "T-1", "main", start, "handoff/T-1")
    assert base == Base("main", start, repo.resolve())
    git(repo, "branch", "release")
    elsewhere = base_branch(Repo.at(repo), "T-1", "release", start, "handoff/T-1")
    assert elsewhere.branch == "release" and elsewhere.checkout is None, "checked out nowhere"
    by_commit = base_branch(Repo.at(repo), "T-1", start, start, "handoff/T-1")
    assert by_commit.branch == "main", "the branch checked out here, which holds that commit"


def test_a_base_that_cannot_be_found_is_refused_with_what_to_do(repo: Path) -> None:
    start = git(repo, "rev-parse", "main")
    git(repo, "switch", "-q", "--orphan", "other")
    commit_file(repo, "x.txt", "x\n", "unrelated")
    with pytest.raises(UsageError) as caught:
        base_branch(Repo.at(repo), "T-1", start, start, "handoff/T-1")
    assert "other, checked out in" in caught.value.message and "does not hold" in \
        caught.value.message
    git(repo, "switch", "-q", "--detach", "main")
    with pytest.raises(UsageError) as detached:
        base_branch(Repo.at(repo), "T-1", start, start, "handoff/T-1")
    assert "not a branch" in detached.value.message


def test_a_checkout_with_changes_is_refused_before_anything_moves(repo: Path) -> None:
    ensure_clean_checkout(main_base(repo))
    (repo / "notes.txt").write_text("mine\n")
    with pytest.raises(WorkAtRisk) as caught:
        ensure_clean_checkout(main_base(repo))
    assert "has uncommitted or untracked changes: notes.txt" in caught.value.message


def test_a_base_that_moved_meanwhile_is_left_as_it_is(repo: Path) -> None:
    commit = ticket_commit(repo)
    stale = main_base(repo)
    moved = commit_file(repo, "other.txt", "x\n", "someone else's commit")
    with pytest.raises(UsageError):
        move_base(Repo.at(repo), stale, commit)
    assert git(repo, "rev-parse", "main") == moved
    git(repo, "branch", "release", stale.head)
    git(repo, "update-ref", "refs/heads/release", moved)
    unchecked = Base("release", stale.head, None)
    with pytest.raises(HandoffError):  # git refuses: the ref is not where it was read
        move_base(Repo.at(repo), unchecked, commit)
    assert git(repo, "rev-parse", "release") == moved
