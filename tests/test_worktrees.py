"""handoff.worktrees: per-ticket implementer and reviewer worktrees, never losing work."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from handoff.config import Share
from handoff.errors import ExternalFailure, UsageError, WorkAtRisk
from handoff.repo import Repo
from handoff.worktrees import TicketWorktrees, branch_name
from tests.conftest import PYTHON, commit_file, git

TICKET = "T-1"


def worktrees(repo: Path, shares: tuple[Share, ...] = (),
              post_create: tuple[tuple[str, ...], ...] = ()) -> TicketWorktrees:
    return TicketWorktrees(Repo.at(repo), TICKET, shares=shares, post_create=post_create)



def is_detached(path: Path) -> bool:
    result = subprocess.run(["git", "-C", str(path), "symbolic-ref", "-q", "HEAD"],
                            capture_output=True, text=True, timeout=60)
    return result.returncode != 0


def registered_paths(repo: Path) -> set[Path]:
    out = git(repo, "worktree", "list", "--porcelain")
    return {Path(line[len("worktree "):]).resolve() for line in out.splitlines()
            if line.startswith("worktree ")}


def main_status(repo: Path) -> str:
    return git(repo, "status", "--porcelain", "--untracked-files=all")


@pytest.fixture
def base(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD")


def test_implementer_is_on_the_ticket_branch_at_base(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    path = wt.create_implementer(base)
    assert path == repo.resolve() / ".worktrees" / TICKET / "implementer"
    assert git(path, "symbolic-ref", "HEAD") == f"refs/heads/{branch_name(TICKET)}"
    assert branch_name(TICKET) == "handoff/T-1"
    assert git(path, "rev-parse", "HEAD") == base
    assert (path / "calc.py").read_text(encoding="utf-8") == (repo / "calc.py").read_text(
        encoding="utf-8")
    assert path.resolve() in registered_paths(repo)


def test_reviewer_is_detached_at_the_commit(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    impl = wt.create_implementer(base)
    commit = commit_file(impl, "feature.txt", "feature\n")
    path = wt.create_reviewer(commit)
    assert path == wt.path("reviewer")
    assert is_detached(path)
    assert wt.head("reviewer") == commit
    assert (path / "feature.txt").exists()
    # the reviewer does not move the ticket branch
    assert Repo.at(repo).branch_head(branch_name(TICKET)) == commit


def test_worktrees_keep_the_main_status_clean(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    impl = wt.create_implementer(base)
    wt.create_reviewer(base)
    (impl / "untracked.txt").write_text("x", encoding="utf-8")
    assert main_status(repo) == ""
    assert "/.worktrees/" in (repo / ".git" / "info" / "exclude").read_text(
        encoding="utf-8").splitlines()


def test_create_twice_resumes_without_touching_work(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    impl = wt.create_implementer(base)
    commit = commit_file(impl, "feature.txt", "feature\n")
    (impl / "wip.txt").write_text("in progress", encoding="utf-8")
    rev = wt.create_reviewer(commit)
    (rev / "scratch.txt").write_text("notes", encoding="utf-8")

    assert wt.create_implementer(base) == impl
    assert wt.create_reviewer(base) == rev

    assert wt.head("implementer") == commit
    assert (impl / "wip.txt").read_text(encoding="utf-8") == "in progress"
    assert wt.head("reviewer") == commit
    assert (rev / "scratch.txt").read_text(encoding="utf-8") == "notes"
    excludes = (repo / ".git" / "info" / "exclude").read_text(encoding="utf-8").splitlines()
    assert excludes.count("/.worktrees/") == 1


def test_create_after_the_folder_vanished_makes_it_again(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    path = wt.create_reviewer(base)
    shutil.rmtree(path)
    assert wt.create_reviewer(base) == path
    assert wt.head("reviewer") == base
    assert (path / "calc.py").exists()


def test_create_refuses_a_foreign_folder_in_the_way(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    path = wt.path("implementer")
    path.mkdir(parents=True)
    (path / "precious.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(UsageError) as info:
        wt.create_implementer(base)
    assert str(path) in info.value.message
    assert (path / "precious.txt").read_text(encoding="utf-8") == "mine"


def test_point_reviewer_moves_to_the_new_commit(repo: Path, base: str, tmp_path: Path) -> None:
    wt = worktrees(repo)
    impl = wt.create_implementer(base)
    rev = wt.create_reviewer(base)
    commit = commit_file(impl, "feature.txt", "feature\n")
    scratch = tmp_path / "ticket" / "reviewer-scratch.patch"
    wt.point_reviewer(commit, scratch)
    assert wt.head("reviewer") == commit
    assert is_detached(rev)
    assert (rev / "feature.txt").read_text(encoding="utf-8") == "feature\n"
    assert not scratch.exists()


def test_point_reviewer_saves_scratch_changes(repo: Path, base: str, tmp_path: Path) -> None:
    wt = worktrees(repo)
    impl = wt.create_implementer(base)
    rev = wt.create_reviewer(base)
    commit = commit_file(impl, "feature.txt", "feature\n")
    edited = (rev / "calc.py").read_text(encoding="utf-8") + "\n# reviewer was here\n"
    (rev / "calc.py").write_text(edited, encoding="utf-8")
    (rev / "probe").mkdir()
    (rev / "probe" / "test_probe.py").write_text("assert True\n", encoding="utf-8")
    scratch = tmp_path / "ticket" / "scratch-1.patch"

    wt.point_reviewer(commit, scratch)

    assert wt.head("reviewer") == commit
    assert wt.dirty(rev) == []
    patch = scratch.read_text(encoding="utf-8")
    assert "calc.py" in patch
    assert "probe/test_probe.py" in patch
    # the saved patch brings the reviewer's work back on the commit it was made on
    git(repo, "apply", str(scratch))
    assert (repo / "calc.py").read_text(encoding="utf-8") == edited
    assert (repo / "probe" / "test_probe.py").read_text(encoding="utf-8") == "assert True\n"


def test_dirty_sees_modified_and_untracked_files(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    path = wt.create_implementer(base)
    assert wt.dirty(path) == []
    (path / "calc.py").write_text("changed\n", encoding="utf-8")
    (path / "newdir").mkdir()
    (path / "newdir" / "new.txt").write_text("new", encoding="utf-8")
    (path / "__pycache__").mkdir()
    (path / "__pycache__" / "calc.pyc").write_bytes(b"ignored")
    names = {entry[3:] for entry in wt.dirty(path)}
    assert names == {"calc.py", "newdir/new.txt"}


def test_dirty_of_a_missing_folder_is_empty(repo: Path) -> None:
    wt = worktrees(repo)
    assert wt.dirty(wt.path("reviewer")) == []


def test_dirty_names_real_paths_for_a_staged_rename(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    path = wt.create_implementer(base)
    git(path, "mv", "calc.py", "calculator.py")
    names = [entry[3:] for entry in wt.dirty(path)]
    assert "calculator.py" in names
    in_head = set(git(path, "ls-tree", "-r", "--name-only", "HEAD").splitlines())
    for name in names:
        assert (path / name).exists() or name in in_head, f"{name!r} is not a path here"


def test_dirty_ignores_shared_folders(repo: Path, base: str) -> None:
    (repo / ".venv" / "bin").mkdir(parents=True)
    (repo / ".venv" / "bin" / "tool").write_text("#!/bin/sh\n", encoding="utf-8")
    (repo / "deps" / "pkg").mkdir(parents=True)
    (repo / "deps" / "pkg" / "lib.txt").write_text("lib", encoding="utf-8")
    shares = (Share(".venv", "symlink"), Share("deps/", "copy"), Share("absent", "symlink"))
    wt = worktrees(repo, shares=shares)
    path = wt.create_implementer(base)

    assert (path / ".venv").is_symlink()
    assert (path / ".venv").resolve() == (repo / ".venv").resolve()
    assert not (path / "deps").is_symlink()
    assert (path / "deps" / "pkg" / "lib.txt").read_text(encoding="utf-8") == "lib"
    assert not (path / "absent").exists()
    assert wt.dirty(path) == []

    (path / "real.txt").write_text("work", encoding="utf-8")
    assert [entry[3:] for entry in wt.dirty(path)] == ["real.txt"]


def test_remove_with_shares_keeps_the_main_checkouts_folder(repo: Path, base: str) -> None:
    (repo / ".venv" / "bin").mkdir(parents=True)
    (repo / ".venv" / "bin" / "tool").write_text("#!/bin/sh\n", encoding="utf-8")
    wt = worktrees(repo, shares=(Share(".venv", "symlink"),))
    path = wt.create_implementer(base)
    assert wt.remove("implementer") is True
    assert not path.exists()
    assert (repo / ".venv" / "bin" / "tool").read_text(encoding="utf-8") == "#!/bin/sh\n"


def test_remove_refuses_a_dirty_worktree(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    path = wt.create_implementer(base)
    (path / "unsaved-notes.txt").write_text("do not lose me", encoding="utf-8")
    with pytest.raises(WorkAtRisk) as info:
        wt.remove("implementer")
    assert "unsaved-notes.txt" in info.value.message
    assert "--force" in info.value.hint
    assert info.value.exit_code == 5
    assert (path / "unsaved-notes.txt").read_text(encoding="utf-8") == "do not lose me"
    assert path.resolve() in registered_paths(repo)


def test_remove_with_force_discards_and_keeps_the_branch(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    path = wt.create_implementer(base)
    commit = commit_file(path, "feature.txt", "feature\n")
    (path / "calc.py").write_text("half done\n", encoding="utf-8")
    assert wt.remove("implementer", force=True) is True
    assert not path.exists()
    assert path.resolve() not in registered_paths(repo)
    assert Repo.at(repo).branch_head(branch_name(TICKET)) == commit


def test_remove_of_a_missing_worktree_is_false(repo: Path) -> None:
    assert worktrees(repo).remove("reviewer") is False


def test_remove_all_keeps_the_branch(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    impl = wt.create_implementer(base)
    commit = commit_file(impl, "feature.txt", "feature\n")
    wt.create_reviewer(commit)
    assert sorted(wt.remove_all()) == ["implementer", "reviewer"]
    assert not (repo / ".worktrees").exists()
    assert registered_paths(repo) == {repo.resolve()}
    assert Repo.at(repo).branch_head(branch_name(TICKET)) == commit
    assert git(repo, "log", "-1", "--format=%s", branch_name(TICKET)) == "work"
    assert main_status(repo) == ""


@pytest.mark.parametrize("dirty_role", ["implementer", "reviewer"])
def test_remove_all_removes_nothing_when_one_is_dirty(repo: Path, base: str,
                                                      dirty_role: str) -> None:
    wt = worktrees(repo)
    wt.create_implementer(base)
    wt.create_reviewer(base)
    (wt.path(dirty_role) / "left-behind.txt").write_text("x", encoding="utf-8")
    with pytest.raises(WorkAtRisk) as info:
        wt.remove_all()
    assert "left-behind.txt" in info.value.message
    for role in ("implementer", "reviewer"):
        assert wt.path(role).is_dir()
        assert wt.path(role).resolve() in registered_paths(repo)


def test_remove_all_with_force_removes_dirty_worktrees(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    wt.create_implementer(base)
    wt.create_reviewer(base)
    (wt.path("reviewer") / "left-behind.txt").write_text("x", encoding="utf-8")
    assert sorted(wt.remove_all(force=True)) == ["implementer", "reviewer"]
    assert not wt.root.exists()
    assert Repo.at(repo).branch_head(branch_name(TICKET)) == base


def test_existing_branch_without_the_base_is_a_usage_error(repo: Path, base: str) -> None:
    git(repo, "branch", branch_name(TICKET), base)
    newer = commit_file(repo, "later.txt", "later\n", "main moves on")
    wt = worktrees(repo)
    with pytest.raises(UsageError) as info:
        wt.create_implementer(newer)
    assert branch_name(TICKET) in info.value.message
    assert not wt.path("implementer").exists()
    assert Repo.at(repo).branch_head(branch_name(TICKET)) == base


def test_existing_branch_with_the_base_is_reused(repo: Path, base: str) -> None:
    git(repo, "checkout", "-q", "-b", branch_name(TICKET))
    ahead = commit_file(repo, "earlier-work.txt", "earlier\n", "earlier work")
    git(repo, "checkout", "-q", "main")
    wt = worktrees(repo)
    path = wt.create_implementer(base)
    assert git(path, "symbolic-ref", "HEAD") == f"refs/heads/{branch_name(TICKET)}"
    assert wt.head("implementer") == ahead
    assert (path / "earlier-work.txt").exists()


def test_post_create_runs_in_each_new_worktree(repo: Path, base: str) -> None:
    script = ("import os, pathlib, sys; p = pathlib.Path('setup.log'); "
              "p.write_text((p.read_text() if p.exists() else '') + sys.argv[1] + ' ' + "
              "os.getcwd() + '\\n')")
    wt = worktrees(repo, post_create=((PYTHON, "-c", script, "one"),
                                      (PYTHON, "-c", script, "two")))
    for path in (wt.create_implementer(base), wt.create_reviewer(base)):
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


def test_point_reviewer_leaves_a_pristine_checkout_but_keeps_shares(
        repo: Path, base: str, tmp_path: Path) -> None:
    (repo / "deps").mkdir()
    (repo / "deps" / "lib.txt").write_text("shared dependency\n")
    (repo / ".gitignore").write_text("__pycache__/\ndeps/\nbuild/\n")
    git(repo, "commit", "-qam", "ignore build output")
    runs = tmp_path / "post-create-runs"
    wt = worktrees(repo, shares=(Share("deps"),), post_create=(
        (PYTHON, "-c", f"import os; open({str(runs)!r}, 'a').write(os.getcwd() + '\\n')"),))
    implementer = wt.create_implementer(git(repo, "rev-parse", "HEAD"))
    reviewer = wt.create_reviewer(git(repo, "rev-parse", "HEAD"))
    stale = reviewer / "__pycache__" / "calc.cpython-311.pyc"
    stale.parent.mkdir()
    stale.write_bytes(b"compiled from the previous round's calc.py")
    (reviewer / "build").mkdir()
    (reviewer / "build" / "out.o").write_text("old object")
    new = commit_file(implementer, "calc.py", "def add(a, b):\n    return a + b\n")

    wt.point_reviewer(new, tmp_path / "scratch.patch")

    assert git(reviewer, "rev-parse", "HEAD") == new
    assert not stale.exists() and not (reviewer / "build").exists(), "no stale build output"
    assert (reviewer / "deps" / "lib.txt").read_text() == "shared dependency\n"
    assert (repo / "deps" / "lib.txt").exists(), "the main checkout's folder is untouched"
    assert runs.read_text().splitlines().count(str(reviewer)) == 2, "post_create ran again"
    assert not (tmp_path / "scratch.patch").exists(), "ignored output is not scratch work"
