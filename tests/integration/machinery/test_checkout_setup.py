"""handoff.machinery.checkout_setup: a checkout's shared folders and post_create, run once per
worktree, fenced and given its environment; run again until once complete; never written
through a link the commit holds; no bytecode written in a detached checkout."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from handoff.config import Share
from handoff.errors import ExternalFailure
from handoff.machinery.repo import Repo
from handoff.machinery.worktrees import TicketWorktrees
from tests.conftest import PYTHON, git

TICKET = "T-1"


def worktrees(repo: Path, shares: tuple[Share, ...] = (),
              post_create: tuple[tuple[str, ...], ...] = ()) -> TicketWorktrees:
    return TicketWorktrees(Repo.at(repo), TICKET, shares=shares, post_create=post_create)


@pytest.fixture
def base(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD")


def test_post_create_runs_in_each_new_worktree(repo: Path, base: str) -> None:
    script = ("import os, pathlib, sys; p = pathlib.Path('setup.log'); "
              "p.write_text((p.read_text() if p.exists() else '') + sys.argv[1] + ' ' + "
              "os.getcwd() + '\\n')")
    wt = worktrees(repo, post_create=((PYTHON, "-c", script, "one"),
                                      (PYTHON, "-c", script, "two")))
    for path in (wt.create_implementer(base), wt.create_detached("reviewer", base)):
        lines = (path / "setup.log").read_text(encoding="utf-8").splitlines()
        assert lines == [f"one {path}", f"two {path}"]
    assert not (repo / "setup.log").exists()


def test_post_create_not_rerun_on_resume(repo: Path, base: str) -> None:
    script = ("import pathlib; p = pathlib.Path('runs.txt'); "
              "p.write_text((p.read_text() if p.exists() else '') + 'x')")
    wt = worktrees(repo, post_create=((PYTHON, "-c", script),))
    path = wt.create_implementer(base)
    wt.create_implementer(base)
    assert (path / "runs.txt").read_text(encoding="utf-8") == "x"


def test_failing_post_create_is_a_clear_error(repo: Path, base: str) -> None:
    failing = (PYTHON, "-c", "import sys; sys.stderr.write('setup exploded\\n'); sys.exit(4)")
    wt = worktrees(repo, post_create=(failing,))
    with pytest.raises(ExternalFailure) as info:
        wt.create_implementer(base)
    message = info.value.message
    assert "post_create" in message
    assert "setup exploded" in message
    assert str(wt.path("implementer")) in message
    assert ".handoff.yaml" in info.value.hint
    assert wt.path("implementer").is_dir()


def test_setup_runs_again_after_a_failed_post_create_is_fixed(repo: Path, base: str,
                                                              tmp_path: Path) -> None:
    failing = (PYTHON, "-c", "import sys; sys.exit(3)")
    with pytest.raises(ExternalFailure):
        worktrees(repo, post_create=(failing,)).create_implementer(base)
    path = worktrees(repo).path("implementer")
    assert worktrees(repo).is_live(path) and not worktrees(repo).setup_done(path)
    fixed = (PYTHON, "-c", "import pathlib; pathlib.Path('set-up.txt').write_text('yes')")
    made = worktrees(repo, post_create=(fixed,)).ensure("implementer", base)
    assert not made.created and made.setup
    assert (path / "set-up.txt").read_text(encoding="utf-8") == "yes"
    assert worktrees(repo).setup_done(path)
    record = worktrees(repo).record_file("implementer")
    assert record.is_relative_to(repo / ".git" / "handoff") and \
        worktrees(repo).record("implementer")["setup_done"] is True
    admin = worktrees(repo).admin_dir(path)
    assert admin is not None and not (admin / "handoff-setup-done").exists(), \
        "never in the admin folder, which its peer may write"
    assert git(path, "status", "--porcelain", "--ignored") == "?? set-up.txt", \
        "the mark lives in git's own dir, not in the checkout"


def test_a_failed_setup_of_the_reviewer_runs_again_when_it_is_pointed(
        repo: Path, base: str, tmp_path: Path) -> None:
    flag = tmp_path / "fail"
    flag.write_text("x")
    script = (f"import pathlib, sys; sys.exit(3 if pathlib.Path({str(flag)!r}).exists() else 0)")
    wt = worktrees(repo, post_create=((PYTHON, "-c", script),))
    with pytest.raises(ExternalFailure):
        wt.create_detached("reviewer", base)
    rev = wt.path("reviewer")
    assert not wt.setup_done(rev)
    flag.unlink()
    assert wt.point("reviewer", base, tmp_path / "scratch.patch").setup
    assert wt.setup_done(rev)
    assert not wt.point("reviewer", base, tmp_path / "scratch.patch").setup


def test_a_gitignored_env_file_is_copied_into_each_worktree_as_its_own(repo: Path,
                                                                       base: str) -> None:
    """`share: [{path: .env, mode: copy}]`, the documented way to give every worktree the
    settings a checkout never holds."""
    (repo / ".gitignore").write_text("__pycache__/\n.env\n")
    git(repo, "commit", "-qam", ".env is ignored")
    (repo / ".env").write_text("DATABASE_URL=postgres://localhost/dev\n")
    wt = worktrees(repo, shares=(Share(".env", "copy"),))
    implementer = wt.create_implementer(git(repo, "rev-parse", "HEAD"))
    reviewer = wt.create_detached("reviewer", git(repo, "rev-parse", "HEAD"))
    for checkout in (implementer, reviewer):
        copied = checkout / ".env"
        assert copied.read_text() == "DATABASE_URL=postgres://localhost/dev\n"
        assert not copied.is_symlink(), "its own copy: a peer's edit stays in its worktree"
    (implementer / ".env").write_text("PORT=1\n")
    assert (repo / ".env").read_text() == "DATABASE_URL=postgres://localhost/dev\n"
    assert wt.dirty(implementer) == [], "the copy is the setup's, not the peer's work"


def test_a_share_is_never_written_through_a_link_the_commit_holds(repo: Path, base: str,
                                                                   tmp_path: Path) -> None:
    """A commit whose folder on a share's path is a link (to a folder outside the checkout):
    the share is not made there, and nothing lands where the link points."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / "deps").mkdir()
    (repo / "deps" / "cache").mkdir()
    (repo / "deps" / "cache" / "lib.txt").write_text("the person's dependency\n")
    (repo / ".gitignore").write_text("__pycache__/\ndeps/cache/\n")
    git(repo, "commit", "-qam", "ignore the cache")
    wt = worktrees(repo, shares=(Share("deps/cache", mode="copy"),))
    impl = wt.create_implementer(base)
    shutil.rmtree(impl / "deps")  # its own copy of the share, made with it
    (impl / "deps").symlink_to(outside, target_is_directory=True)
    git(impl, "add", "deps")
    git(impl, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "deps is a link")
    commit = git(impl, "rev-parse", "HEAD")
    reviewer = wt.create_detached("reviewer", commit)
    assert (reviewer / "deps").is_symlink()
    assert list(outside.iterdir()) == [], "nothing was copied through the link"



def test_post_create_runs_through_the_fence_with_the_worktrees_environment(
        repo: Path, base: str, tmp_path: Path) -> None:
    """The fence decides what runs (the sandbox's argv) for as long as its context lasts; the
    worktree's own environment (its ports) reaches the command; what it made is kept."""
    fenced: list[tuple[Path, list[str], str]] = []

    @contextlib.contextmanager
    def fence(path: Path, argv: Sequence[str]) -> Iterator[list[str]]:
        fenced.append((path, list(argv), "entered"))
        yield ["env", "FENCED=yes", *argv]
        fenced.append((path, list(argv), "left"))

    make = (PYTHON, "-c", "import os, pathlib; pathlib.Path('.venv').mkdir(); "
                          "pathlib.Path('.venv/said').write_text(os.environ['FENCED'] + ' ' + "
                          "os.environ['PORT'])")
    wt = TicketWorktrees(Repo.at(repo), TICKET, shares=(Share("deps"),), post_create=(make,),
                         setup_env=lambda name: {"PORT": f"80{len(name)}"}, setup_fence=fence)
    path = wt.create_detached("qa", base)
    assert (path / ".venv" / "said").read_text() == "yes 802"
    assert fenced == [(path, list(make), "entered"), (path, list(make), "left")]
    assert wt.record("qa")["setup_output"] == [".venv"] and wt.kept(path) == ["deps", ".venv"]
