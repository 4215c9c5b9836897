"""handoff.machinery.checkouts: which of a ticket's folders are its worktrees (read without a
link or git), what handoff recorded of each, and handoff's own git in one: pinned to the git
dirs handoff knows, with no hook, and refused when a peer changed config.worktree."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from handoff.errors import Tampered
from handoff.machinery.checkouts import LEGACY_OWNER_FILE
from handoff.machinery.repo import Repo
from handoff.machinery.worktrees import TicketWorktrees
from tests.conftest import commit_file, git

TICKET = "T-1"


def worktrees(repo: Path, home: Path | None = None) -> TicketWorktrees:
    return TicketWorktrees(Repo.at(repo), TICKET, home=home)


@pytest.fixture
def base(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD")


def test_is_live_only_for_a_worktree_of_this_repo(repo: Path, base: str, tmp_path: Path) -> None:
    wt = worktrees(repo)
    path = wt.create_implementer(base)
    assert wt.is_live(path)
    plain = wt.path("reviewer")
    plain.mkdir()
    assert not wt.is_live(plain), "an empty folder inside the repo is not a worktree"
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    commit_file(other, "x.txt", "x\n")
    git(other, "worktree", "add", "-q", "--detach", str(tmp_path / "foreign"), "HEAD")
    assert not wt.is_live(tmp_path / "foreign"), "a worktree of another repo"
    admin = wt.admin_dir(path)
    assert admin is not None and admin.parent == (repo / ".git" / "worktrees").resolve()
    gitdir = (admin / "gitdir").read_text()
    (admin / "gitdir").write_text(str(tmp_path / "elsewhere" / ".git") + "\\n")
    assert not wt.is_live(path), "git's record must point back at the folder"
    (admin / "gitdir").write_text(gitdir)
    assert wt.is_live(path)
    dot_git = (path / ".git").read_text()
    (path / ".git").unlink()
    (path / ".git").symlink_to(wt.path("elsewhere") / ".git")
    assert not wt.is_live(path), "a .git that is a link is never followed"
    (path / ".git").unlink()
    (path / ".git").write_text(dot_git)
    assert wt.is_live(path)



def test_a_config_worktree_a_peer_changed_stops_handoffs_git(repo: Path, base: str,
                                                             tmp_path: Path) -> None:
    wt = worktrees(repo)
    path = wt.create_implementer(base)
    admin = wt.admin_dir(path)
    assert admin is not None and wt.head("implementer") == base
    (admin / "config.worktree").write_text("[core]\n\thooksPath = /tmp/planted\n")
    with pytest.raises(Tampered) as info:
        wt.pinned_env(path)
    assert str(admin / "config.worktree") in info.value.message
    with pytest.raises(Tampered):
        wt.head("implementer")
    (admin / "config.worktree").unlink()
    (admin / "config.worktree").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(Tampered):
        wt.head("implementer")
    (admin / "config.worktree").unlink()
    assert wt.head("implementer") == base, "git made none: none is what is read"


def test_handoffs_git_runs_no_hook_and_follows_no_commondir(repo: Path, base: str,
                                                            tmp_path: Path) -> None:
    ran = tmp_path / "hook-ran"
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\necho \"$PWD\" >> {ran}\n")
    hook.chmod(0o755)
    wt = worktrees(repo)
    path = wt.create_implementer(base)  # `worktree add` runs post-checkout, but not here
    commit = commit_file(path, "feature.txt", "feature\n")
    wt.pinned_git(path, "checkout", "--quiet", "--detach", base)
    assert not ran.exists(), "no hook ran for handoff's git"
    git(path, "checkout", "--quiet", "--detach", commit)
    assert ran.read_text().strip() == str(path), "the same checkout by plain git runs it"
    admin = wt.admin_dir(path)
    assert admin is not None
    other = tmp_path / "other"
    git(tmp_path, "init", "-q", str(other))
    (admin / "commondir").write_text(str(other / ".git") + "\n")
    said = wt.pinned_git(path, "rev-parse", "--git-common-dir")
    assert Path(said).resolve() == Repo.at(repo).common_dir.resolve()


def test_the_owner_is_handoffs_record_or_an_older_releases_file(repo: Path, base: str,
                                                                tmp_path: Path) -> None:
    wt = worktrees(repo, home=tmp_path / "home")
    path = wt.create_detached("qa", base)
    assert wt.record_file("qa").is_relative_to(repo / ".git" / "handoff" / "worktrees" / TICKET)
    assert wt.owner(path) == {"home": str((tmp_path / "home").resolve()), "ticket": TICKET}
    admin = wt.admin_dir(path)
    assert admin is not None
    wt.drop_record("qa")
    assert not wt.record_file("qa").parent.exists(), "the ticket's last record took its folder"
    assert wt.owner(path) == {}
    (admin / LEGACY_OWNER_FILE).write_text(json.dumps({"home": "/old", "ticket": TICKET,
                                                       "setup_done": True}))
    assert wt.owner(path) == {"home": "/old", "ticket": TICKET}
    os.unlink(admin / LEGACY_OWNER_FILE)
    (admin / LEGACY_OWNER_FILE).symlink_to(tmp_path / "home")
    assert wt.owner(path) == {}, "a link in the admin folder is never followed"
