"""handoff.machinery.worktrees: a ticket's checkouts made, reset between rounds and removed,
never losing work."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from handoff.config import Share
from handoff.errors import NotFound, UsageError, WorkAtRisk
from handoff.machinery.repo import Repo
from handoff.machinery.ticket_branch import branch_name
from handoff.machinery.worktrees import TicketWorktrees
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


def test_implementer_works_detached_at_the_ticket_branch_handoff_made(repo: Path,
                                                                      base: str) -> None:
    wt = worktrees(repo)
    path = wt.create_implementer(base)
    assert path == repo.resolve() / ".worktrees" / TICKET / "implementer"
    assert is_detached(path), "no peer writes a ref: handoff moves the branch"
    assert branch_name(TICKET) == "handoff/T-1"
    assert git(repo, "rev-parse", f"refs/heads/{branch_name(TICKET)}") == base
    assert git(repo, "for-each-ref", "--format=%(symref)", f"refs/heads/{branch_name(TICKET)}") \
        == "", "a plain ref"
    assert wt.made_branch()
    assert git(path, "rev-parse", "HEAD") == base
    assert (path / "calc.py").read_text(encoding="utf-8") == (repo / "calc.py").read_text(
        encoding="utf-8")
    assert path.resolve() in registered_paths(repo)


def test_reviewer_is_detached_at_the_commit(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    impl = wt.create_implementer(base)
    commit = commit_file(impl, "feature.txt", "feature\n")
    path = wt.create_detached("reviewer", commit)
    assert path == wt.path("reviewer")
    assert is_detached(path)
    assert wt.head("reviewer") == commit
    assert (path / "feature.txt").exists()
    # no peer moves the ticket branch: a commit gets there when handoff accepts it
    assert Repo.at(repo).branch_head(branch_name(TICKET)) == base


def test_worktrees_keep_the_main_status_clean(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    impl = wt.create_implementer(base)
    wt.create_detached("reviewer", base)
    (impl / "untracked.txt").write_text("x", encoding="utf-8")
    assert main_status(repo) == ""
    assert "/.worktrees/" in (repo / ".git" / "info" / "exclude").read_text(
        encoding="utf-8").splitlines()


def test_create_twice_resumes_without_touching_work(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    impl = wt.create_implementer(base)
    commit = commit_file(impl, "feature.txt", "feature\n")
    (impl / "wip.txt").write_text("in progress", encoding="utf-8")
    rev = wt.create_detached("reviewer", commit)
    (rev / "scratch.txt").write_text("notes", encoding="utf-8")

    assert wt.create_implementer(base) == impl
    assert wt.create_detached("reviewer", base) == rev

    assert wt.head("implementer") == commit
    assert (impl / "wip.txt").read_text(encoding="utf-8") == "in progress"
    assert wt.head("reviewer") == commit
    assert (rev / "scratch.txt").read_text(encoding="utf-8") == "notes"
    excludes = (repo / ".git" / "info" / "exclude").read_text(encoding="utf-8").splitlines()
    assert excludes.count("/.worktrees/") == 1


def test_create_after_the_folder_vanished_makes_it_again(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    path = wt.create_detached("reviewer", base)
    shutil.rmtree(path)
    assert wt.create_detached("reviewer", base) == path
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


def test_point_moves_to_the_new_commit(repo: Path, base: str, tmp_path: Path) -> None:
    wt = worktrees(repo)
    impl = wt.create_implementer(base)
    rev = wt.create_detached("reviewer", base)
    commit = commit_file(impl, "feature.txt", "feature\n")
    scratch = tmp_path / "ticket" / "reviewer-scratch.patch"
    wt.point("reviewer", commit, scratch)
    assert wt.head("reviewer") == commit
    assert is_detached(rev)
    assert (rev / "feature.txt").read_text(encoding="utf-8") == "feature\n"
    assert not scratch.exists()


def test_point_saves_scratch_changes(repo: Path, base: str, tmp_path: Path) -> None:
    wt = worktrees(repo)
    impl = wt.create_implementer(base)
    rev = wt.create_detached("reviewer", base)
    commit = commit_file(impl, "feature.txt", "feature\n")
    edited = (rev / "calc.py").read_text(encoding="utf-8") + "\n# reviewer was here\n"
    (rev / "calc.py").write_text(edited, encoding="utf-8")
    (rev / "probe").mkdir()
    (rev / "probe" / "test_probe.py").write_text("assert True\n", encoding="utf-8")
    scratch = tmp_path / "ticket" / "scratch-1.patch"

    wt.point("reviewer", commit, scratch)

    assert wt.head("reviewer") == commit
    assert wt.dirty(rev) == []
    patch = scratch.read_text(encoding="utf-8")
    assert "calc.py" in patch
    assert "probe/test_probe.py" in patch
    # the saved patch brings the reviewer's work back on the commit it was made on
    git(repo, "apply", str(scratch))
    assert (repo / "calc.py").read_text(encoding="utf-8") == edited
    assert (repo / "probe" / "test_probe.py").read_text(encoding="utf-8") == "assert True\n"


def test_lay_over_sets_regular_files_to_a_commit_and_leaves_links_out(
        repo: Path, base: str, tmp_path: Path) -> None:
    wt = worktrees(repo)
    impl = wt.create_implementer(base)
    gate = wt.create_detached("gate", base)
    (impl / "tests" / "test_new.py").write_text("def test_new(): pass\n", encoding="utf-8")
    (impl / "tests" / "test_calc.py").write_text("# changed\n", encoding="utf-8")
    (impl / "tests" / "test_link.py").symlink_to("/etc/passwd")
    (impl / "calc.py").write_text("changed = True\n", encoding="utf-8")
    git(impl, "add", "-A")
    git(impl, "commit", "-qm", "tests and a link")
    commit = git(impl, "rev-parse", "HEAD")

    laid = wt.lay_over("gate", commit, ["tests/test_calc.py", "tests/test_link.py",
                                        "tests/test_new.py", "tests/not_there.py"])

    assert laid == ["tests/test_calc.py", "tests/test_new.py"]
    assert wt.head("gate") == base, "the checkout stays at the base"
    assert (gate / "tests" / "test_calc.py").read_text(encoding="utf-8") == "# changed\n"
    assert (gate / "tests" / "test_new.py").exists()
    assert not (gate / "tests" / "test_link.py").is_symlink()
    assert (gate / "calc.py").read_text(encoding="utf-8") != "changed = True\n"
    wt.point("gate", commit, None)
    assert wt.dirty(gate) == [] and wt.head("gate") == commit
    assert not list(tmp_path.rglob("*scratch*")), "None: handoff's own overlay is not kept"


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
    wt.create_detached("reviewer", commit)
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
    wt.create_detached("reviewer", base)
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
    wt.create_detached("reviewer", base)
    (wt.path("reviewer") / "left-behind.txt").write_text("x", encoding="utf-8")
    assert sorted(wt.remove_all(force=True)) == ["implementer", "reviewer"]
    assert not wt.root.exists()
    assert Repo.at(repo).branch_head(branch_name(TICKET)) == base


def test_point_resets_the_checkout_but_keeps_shares_and_setup_output(
        repo: Path, base: str, tmp_path: Path) -> None:
    (repo / "deps").mkdir()
    (repo / "deps" / "lib.txt").write_text("shared dependency\n")
    (repo / ".gitignore").write_text("__pycache__/\ndeps/\nbuild/\nvenv/\n")
    git(repo, "commit", "-qam", "ignore build output")
    runs = tmp_path / "post-create-runs"
    wt = worktrees(repo, shares=(Share("deps"),), post_create=(
        (PYTHON, "-c", f"import os; open({str(runs)!r}, 'a').write(os.getcwd() + '\\n'); "
                       "os.makedirs('venv', exist_ok=True); open('venv/lib.py', 'w').write('')"),))
    implementer = wt.create_implementer(git(repo, "rev-parse", "HEAD"))
    reviewer = wt.create_detached("reviewer", git(repo, "rev-parse", "HEAD"))
    (reviewer / "build").mkdir()
    (reviewer / "build" / "out.o").write_text("ignored build output")
    (reviewer / "probe.txt").write_text("the reviewer's untracked file")
    (reviewer / "calc.py").write_text("# the reviewer's edit\n")
    new = commit_file(implementer, "calc.py", "def add(a, b):\n    return a + b\n")

    wt.point("reviewer", new, tmp_path / "scratch.patch")

    assert git(reviewer, "rev-parse", "HEAD") == new
    assert wt.dirty(reviewer) == []
    assert git(reviewer, "status", "--porcelain", "--untracked-files=all") == "?? deps", \
        "the shared folder's link alone"
    assert (reviewer / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert not (reviewer / "probe.txt").exists()
    assert not (reviewer / "build").exists(), "what a round's run left, ignored or not, goes"
    assert (reviewer / "venv" / "lib.py").exists(), "the setup's (ignored) output stays"
    assert (reviewer / "deps" / "lib.txt").read_text() == "shared dependency\n"
    assert (repo / "deps" / "lib.txt").exists(), "the main checkout's folder is untouched"
    assert runs.read_text().splitlines().count(str(reviewer)) == 1, "post_create ran again"
    patch = (tmp_path / "scratch.patch").read_text()
    assert "probe.txt" in patch and "build/out.o" not in patch


# ---- a folder that is not a worktree (items 3 and 12) -------------------------------------

def test_remove_never_deletes_a_folder_that_is_not_a_worktree(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    mine = wt.path("implementer")
    mine.mkdir(parents=True)
    (mine / "precious.txt").write_text("mine", encoding="utf-8")
    wt.create_detached("reviewer", base)
    assert wt.remove_all() == ["reviewer"]
    assert (mine / "precious.txt").read_text(encoding="utf-8") == "mine"
    assert wt.left() == [mine]
    assert wt.remove("implementer", force=True) is False
    assert (mine / "precious.txt").read_text(encoding="utf-8") == "mine"


def test_remove_leaves_a_folder_refilled_after_its_worktree_was_deleted(
        repo: Path, base: str) -> None:
    wt = worktrees(repo)
    path = wt.create_implementer(base)
    commit = commit_file(path, "feature.txt", "feature\n")
    shutil.rmtree(path)
    path.mkdir()
    (path / "notes.txt").write_text("written after the delete", encoding="utf-8")
    assert wt.dirty(path) == [], "no git status of the repository around it"
    assert sorted(wt.remove_all()) == []
    assert (path / "notes.txt").read_text(encoding="utf-8") == "written after the delete"
    assert registered_paths(repo) == {repo.resolve()}, "git's stale record is pruned"
    assert Repo.at(repo).branch_head(branch_name(TICKET)) == commit


def test_a_deleted_worktree_is_made_again_from_the_branch(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    path = wt.create_implementer(base)
    commit = commit_file(path, "feature.txt", "feature\n")
    shutil.rmtree(path)
    path.mkdir()  # the peer, still running there, made the folder again
    made = wt.ensure("implementer", base, recreate=True)
    assert made.created and made.setup and made.displaced is None
    assert wt.is_live(path)
    assert wt.head("implementer") == commit, "its commits were kept on the branch"
    assert (path / "feature.txt").read_text(encoding="utf-8") == "feature\n"
    assert is_detached(path)


def test_a_refilled_folder_is_moved_aside_intact_when_made_again(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    impl = wt.create_implementer(base)
    commit = commit_file(impl, "feature.txt", "feature\n")
    path = wt.create_detached("reviewer", commit)
    shutil.rmtree(path)
    (path / "sub").mkdir(parents=True)
    (path / "sub" / "work.txt").write_text("a peer's work", encoding="utf-8")
    made = wt.ensure("reviewer", commit, recreate=True)
    assert made.created and made.displaced is not None
    assert made.displaced.parent == wt.root and made.displaced.name.startswith("reviewer.displaced-")
    assert (made.displaced / "sub" / "work.txt").read_text(encoding="utf-8") == "a peer's work"
    assert wt.head("reviewer") == commit and is_detached(path)
    assert made.displaced in wt.left()


def test_a_users_folder_is_refused_without_recreate(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    path = wt.path("reviewer")
    path.mkdir(parents=True)
    (path / "precious.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(UsageError):
        wt.ensure("reviewer", base)
    assert sorted(p.name for p in wt.root.iterdir()) == ["reviewer"]
    assert (path / "precious.txt").read_text(encoding="utf-8") == "mine"


@pytest.mark.parametrize("main_has_work", [True, False])
@pytest.mark.parametrize("refilled", [True, False])
def test_git_inside_a_replaced_reviewer_never_touches_the_main_checkout(
        repo: Path, base: str, tmp_path: Path, main_has_work: bool, refilled: bool) -> None:
    """Pointing a reviewer whose folder is no longer a worktree must not reset, check out or
    clean the repository around it (git, run there, would find that repository)."""
    wt = worktrees(repo)
    impl = wt.create_implementer(base)
    rev = wt.create_detached("reviewer", base)
    commit = commit_file(impl, "feature.txt", "feature\n")
    calc = (repo / "calc.py").read_text(encoding="utf-8")
    if main_has_work:
        calc = "# the user's unsaved edit\n"
        (repo / "calc.py").write_text(calc, encoding="utf-8")
        (repo / "staged.txt").write_text("the user's new file\n", encoding="utf-8")
        git(repo, "add", "staged.txt")
    shutil.rmtree(rev)
    rev.mkdir()
    if refilled:
        (rev / "left.txt").write_text("left by a test run", encoding="utf-8")

    made = wt.point("reviewer", commit, tmp_path / "scratch.patch")

    assert git(repo, "symbolic-ref", "HEAD") == "refs/heads/main"
    assert git(repo, "rev-parse", "HEAD") == base
    assert (repo / "calc.py").read_text(encoding="utf-8") == calc
    assert not (repo / "feature.txt").exists()
    assert git(repo, "diff", "--cached", "--name-only") == ("staged.txt" if main_has_work else "")
    assert made.created and wt.head("reviewer") == commit
    assert (made.displaced is not None) == refilled
    assert made.displaced is None or (made.displaced / "left.txt").exists()


def test_head_of_a_folder_that_is_not_a_worktree_is_a_clear_error(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    path = wt.create_implementer(base)
    shutil.rmtree(path)
    path.mkdir()
    with pytest.raises(NotFound) as info:
        wt.head("implementer")
    assert str(path) in info.value.message and "resume" in info.value.hint


# ---- a team's checkouts ---------------------------------------------------------------------------


def test_every_checkout_sits_detached(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    assert is_detached(wt.create_implementer(base))
    for name in ("qa", "security", "gate"):
        assert is_detached(wt.create_detached(name, base))
    assert wt.present() == ["implementer", "qa", "security", "gate"]


def test_remove_all_removes_every_checkout_of_the_ticket_saving_the_detached_ones_work(
        repo: Path, base: str, tmp_path: Path) -> None:
    wt = worktrees(repo)
    wt.create_implementer(base)
    security, gate = wt.create_detached("security", base), wt.create_detached("gate", base)
    (security / "notes.txt").write_text("a reviewer's scratch\n")
    (gate / "calc.py").write_text("changed by a test run\n")
    kept = tmp_path / "transcripts"
    removed = wt.remove_all(scratch=lambda name: kept / f"{name}-scratch-close.patch")
    assert removed == ["implementer", "security", "gate"]
    assert "a reviewer's scratch" in (kept / "security-scratch-close.patch").read_text()
    assert "changed by a test run" in (kept / "gate-scratch-close.patch").read_text()
    assert not (repo / ".worktrees").exists() and registered_paths(repo) == {repo.resolve()}


