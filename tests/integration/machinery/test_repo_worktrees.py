"""handoff.machinery.repo_worktrees: the worktrees of a repository, whoever made them: which
git knows, which are the person's own (read from git's files, never from what a ticket's admin
folder claims), and handoff's records of the ones it made."""

from __future__ import annotations

from pathlib import Path

from handoff.machinery.repo import Repo
from handoff.machinery.repo_worktrees import RECORDS, person_checkouts, records, registered
from handoff.machinery.worktrees import TicketWorktrees
from tests.conftest import git


def test_registered_are_every_worktree_git_knows(repo: Path, tmp_path: Path) -> None:
    assert registered(Repo.at(repo)) == {repo.resolve()}
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "linked"), "HEAD")
    made = TicketWorktrees(Repo.at(repo), "T-1").create_detached("qa", "HEAD")
    assert registered(Repo.at(repo)) == {repo.resolve(), (tmp_path / "linked").resolve(),
                                         made.resolve()}


def test_the_persons_checkouts_are_never_a_tickets_whatever_its_head_says(
        repo: Path, tmp_path: Path) -> None:
    git(repo, "worktree", "add", "-q", "-b", "feature", str(tmp_path / "feature"), "HEAD")
    wt = TicketWorktrees(Repo.at(repo), "T-1")
    qa = wt.create_detached("qa", git(repo, "rev-parse", "HEAD"))
    admin = wt.admin_dir(qa)
    assert admin is not None
    found = person_checkouts(Repo.at(repo))
    assert found == {"main": repo.resolve(), "feature": (tmp_path / "feature").resolve()}
    # a peer makes its checkout claim branch `other`: still not a person's checkout
    git(repo, "branch", "other")
    (admin / "HEAD").write_text("ref: refs/heads/other\n")
    assert "other" not in person_checkouts(Repo.at(repo))
    # and so is an older release's, which handoff kept no record of
    wt.drop_record("qa")
    assert "other" not in person_checkouts(Repo.at(repo))


def test_records_are_handoffs_own_beside_gits(repo: Path, tmp_path: Path) -> None:
    common = Repo.at(repo).common_dir
    assert records(common) == []
    TicketWorktrees(Repo.at(repo), "T-1", home=tmp_path / "home").create_detached("qa", "HEAD")
    (common / RECORDS / "worktrees" / "T-1" / "broken.json").write_text("{not json")
    found = records(common)
    assert [(r["ticket"], r["name"], r["home"]) for r in found] == [
        ("T-1", "qa", str((tmp_path / "home").resolve()))]
    admin = found[0]["admin"]
    assert isinstance(admin, str) and admin and (common / "worktrees" / admin).is_dir()
