"""handoff.operations.remote: handoff between machines, both ends. What a host says reaches
this terminal harmless; the words a ticket's command sends keep --repo MIRROR an option;
a host's mirror is made once, private, and a closed ticket's refs in it go. Everything over a
real sshd is tests/integration/operations/test_hosts.py's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from handoff.build import code_digest, version
from handoff.errors import UsageError
from handoff.operations import remote
from tests.conftest import commit_file, git


def test_a_mirror_is_made_once_private_with_a_head_no_push_moves(handoff_home: Path) -> None:
    folder = remote.make_mirror(handoff_home, "repo-abc123")
    assert folder == handoff_home / remote.MIRRORS / "repo-abc123"
    assert git(folder, "symbolic-ref", "HEAD") == "refs/heads/handoff-mirror"
    assert {oct(p.stat().st_mode & 0o777) for p in (folder, folder.parent)} == {"0o700"}
    (folder / "kept").write_text("x", encoding="utf-8")
    assert remote.make_mirror(handoff_home, "repo-abc123") == folder
    assert (folder / "kept").exists(), "made once: a second ask changes nothing"


def test_forgetting_a_ticket_deletes_its_refs_in_the_mirror_and_nothing_else(
        handoff_home: Path, repo: Path) -> None:
    mirror = remote.make_mirror(handoff_home, "repo-abc123")
    head = commit_file(repo, "a.txt", "a\n")
    for ref in ("handoff-base/T-1", "handoff/T-1", "handoff/T-2"):
        git(repo, "push", "-q", str(mirror), f"{head}:refs/heads/{ref}")
    remote.forget_refs(mirror, "T-1")
    assert git(mirror, "for-each-ref", "--format=%(refname)") == "refs/heads/handoff/T-2"
    with pytest.raises(UsageError, match="is not a mirror handoff made"):
        remote.forget_refs(repo, "T-2")


def test_about_here_says_what_a_host_is_and_makes_the_mirror_asked_for(
        handoff_home: Path) -> None:
    about = remote.about_here(handoff_home, "repo-abc123")
    assert (about["handoff"], about["code"]) == (version(), code_digest())
    assert about["python"] == sys.version.split()[0]
    assert (about["at_work"], about["waiting"]) == (0, 0)
    assert about["mirror"] == str(handoff_home / remote.MIRRORS / "repo-abc123")
    assert remote.about_here(handoff_home)["mirror"] == ""
