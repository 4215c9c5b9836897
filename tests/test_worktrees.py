"""handoff.machinery.worktrees: per-ticket implementer and reviewer worktrees, never losing work."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from handoff.config import Share
from handoff.errors import Busy, ExternalFailure, NotFound, UsageError, WorkAtRisk
from handoff.machinery.repo import Repo
from handoff.machinery.worktrees import TicketWorktrees, branch_name, registered, repo_lock
from tests.conftest import PYTHON, commit_file, git, wait_until

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


# ---- the per-repo lock (item 18) ----------------------------------------------------------

HOLD = """
import sys, time
from pathlib import Path
from handoff.machinery.worktrees import repo_lock
with repo_lock(Path(sys.argv[1])):
    Path(sys.argv[2]).write_text("held")
    while not Path(sys.argv[3]).exists():
        time.sleep(0.01)
"""

TAKE_TURNS = """
import os, sys
from pathlib import Path
from handoff.machinery.worktrees import repo_lock
for _ in range(int(sys.argv[3])):
    with repo_lock(Path(sys.argv[1])):
        with open(sys.argv[2], "a") as log:
            log.write(f"in {os.getpid()}\\n")
            log.flush()
            os.sched_yield()
            log.write(f"out {os.getpid()}\\n")
"""


def test_the_lock_lets_one_process_in_at_a_time(repo: Path, tmp_path: Path) -> None:
    log = tmp_path / "turns.log"
    common = Repo.at(repo).common_dir
    workers = [subprocess.Popen([PYTHON, "-c", TAKE_TURNS, str(common), str(log), "25"])
               for _ in range(8)]
    assert [w.wait(timeout=60) for w in workers] == [0] * 8
    lines = log.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 * 8 * 25
    for enter, leave in zip(lines[::2], lines[1::2], strict=True):
        assert enter.startswith("in ") and leave == "out " + enter[3:], (enter, leave)


def test_a_held_lock_is_waited_for_then_refused_clearly(repo: Path, tmp_path: Path) -> None:
    common = Repo.at(repo).common_dir
    held, release = tmp_path / "held", tmp_path / "release"
    holder = subprocess.Popen([PYTHON, "-c", HOLD, str(common), str(held), str(release)])
    try:
        wait_until(held.exists, what="the other process to hold the lock")
        started = time.monotonic()
        with pytest.raises(Busy) as info, repo_lock(common, timeout=0.5):
            pass
        assert 0.5 <= time.monotonic() - started < 5
        assert f"pid {holder.pid}" in info.value.message
        assert str(common) in info.value.message
        assert info.value.hint
    finally:
        release.write_text("go")
        holder.wait(timeout=30)
    with repo_lock(common, timeout=5):
        pass


def test_the_lock_dies_with_its_holder(repo: Path, tmp_path: Path) -> None:
    common = Repo.at(repo).common_dir
    held = tmp_path / "held"
    holder = subprocess.Popen([PYTHON, "-c", HOLD, str(common), str(held), str(tmp_path / "x")])
    wait_until(held.exists, what="the other process to hold the lock")
    holder.kill()
    holder.wait(timeout=30)
    with repo_lock(common, timeout=5):
        pass


def test_the_lock_is_reentrant_in_one_thread(repo: Path) -> None:
    common = Repo.at(repo).common_dir
    with repo_lock(common, timeout=1), repo_lock(common, timeout=1):
        assert registered(Repo.at(repo)) == {repo.resolve()}


HALF_ADD = """
import sys, time
from pathlib import Path
from handoff.machinery.worktrees import repo_lock
common, held, release = (Path(a) for a in sys.argv[1:4])
with repo_lock(common):
    # what another handoff's `git worktree add` leaves for an instant, in git's own order:
    # its admin dir locked, gitdir written, commondir created but not yet written
    half = common / "worktrees" / "other-ticket"
    half.mkdir(parents=True)
    (half / "locked").write_text("initializing")
    (half / "gitdir").write_text(str(common.parent / ".worktrees" / "other" / ".git") + "\\n")
    (half / "commondir").touch()
    held.write_text("held")
    while not release.exists():
        time.sleep(0.01)
    for name in ("commondir", "gitdir", "locked"):
        (half / name).unlink()
    half.rmdir()
"""


def test_worktree_operations_never_see_another_handoffs_half_done_add(
        repo: Path, base: str, tmp_path: Path) -> None:
    """While another handoff process holds the repo's lock in the middle of a worktree add,
    making a worktree waits for it instead of reading the half-written worktree (git: "failed
    to read .git/worktrees/<x>/commondir") and failing."""
    common = Repo.at(repo).common_dir
    held, release = tmp_path / "held", tmp_path / "release"
    other = subprocess.Popen([PYTHON, "-c", HALF_ADD, str(common), str(held), str(release)])
    outcome: list[object] = []

    def make() -> None:
        try:
            outcome.append(worktrees(repo).create_detached("reviewer", base))
        except Exception as exc:  # reported by the assertions below
            outcome.append(exc)

    try:
        wait_until(held.exists, what="the other process to be half-way through its add")
        adder = threading.Thread(target=make)
        adder.start()
        adder.join(timeout=1.0)
        assert adder.is_alive() and not outcome, f"it did not wait: {outcome}"
    finally:
        release.write_text("go")
    adder.join(timeout=30)
    assert other.wait(timeout=30) == 0
    assert outcome == [worktrees(repo).path("reviewer")]
    assert registered_paths(repo) == {repo.resolve(), worktrees(repo).path("reviewer").resolve()}


# ---- a folder that is not a worktree (items 3 and 12) -------------------------------------

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


# ---- setup that did not complete (item 9) -------------------------------------------------

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


# ---- a team's checkouts ---------------------------------------------------------------------------


def test_every_checkout_sits_detached(repo: Path, base: str) -> None:
    wt = worktrees(repo)
    assert is_detached(wt.create_implementer(base))
    for name in ("qa", "security", "gate"):
        assert is_detached(wt.create_detached(name, base))
    assert wt.present() == ["implementer", "qa", "security", "gate"]
    assert wt.bytecode_env("security") == wt.bytecode_env("gate") == \
        {"PYTHONDONTWRITEBYTECODE": "1"} and not wt.bytecode_env("implementer")


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
