"""handoff.machinery.gitcmd: every git command bounded (a hanging hook and its orphans end at
the bound), no unbounded git process, no inherited variable steering git, git's failures as
clear errors. Real git, real hooks."""

from __future__ import annotations

import os
import time
from functools import partial
from pathlib import Path

import pytest

from handoff.errors import ExternalFailure, MissingTool, UsageError
from handoff.machinery import gitcmd
from handoff.machinery.proc import TIMEOUT_VARIABLE
from handoff.machinery.repo import Checkout, Repo, git_ok
from handoff.machinery.repo import git as repo_git
from handoff.machinery.worktrees import TicketWorktrees
from tests.conftest import commit_file, git, wait_until
from tests.unit.machinery.test_gitcmd import children, gone


def test_run_gives_status_and_output_and_fails_clearly(repo: Path) -> None:
    status, out, err = gitcmd.run(repo, ["rev-parse", "--abbrev-ref", "HEAD"])
    assert (status, out, err) == (0, "main\n", ""), "stdout as git wrote it, newline and all"
    status, out, err = gitcmd.run(repo, ["rev-parse", "--verify", "no-such"], check=False)
    assert status != 0 and out == "" and "Needed a single revision" in err
    with pytest.raises(ExternalFailure) as info:
        gitcmd.run(repo, ["rev-parse", "--verify", "no-such"])
    assert info.value.message == "git rev-parse --verify failed: fatal: Needed a single revision"
    with pytest.raises(ExternalFailure) as info:
        gitcmd.run(repo, ["fetch", "nowhere"])  # several lines of stderr: every one said
    assert info.value.message == (
        "git fetch nowhere failed: fatal: 'nowhere' does not appear to be a git repository; "
        "fatal: Could not read from remote repository.; Please make sure you have the correct "
        "access rights; and the repository exists."), "the cause, not only the last line"


def test_run_passes_the_environment_and_its_own_bound(repo: Path, tmp_path: Path) -> None:
    _, out, _ = gitcmd.run(repo, ["var", "GIT_AUTHOR_IDENT"],
                           env={"GIT_AUTHOR_NAME": "Someone Else"})
    assert out.startswith("Someone Else <")
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\nsleep 300\n", encoding="utf-8")
    hook.chmod(0o755)
    started = time.monotonic()
    with pytest.raises(ExternalFailure, match="did not finish within 1s"):
        gitcmd.run(repo, ["worktree", "add", "--detach", str(tmp_path / "wt"), "HEAD"],
                   timeout=1)
    assert time.monotonic() - started < 15


def test_opened_finds_the_repository_upwards_and_refuses_a_plain_folder(
        repo: Path, tmp_path: Path) -> None:
    with gitcmd.opened(repo / "tests") as found:
        assert Path(str(found.working_tree_dir)).resolve() == repo.resolve()
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(UsageError, match="not inside a git repository"):
        gitcmd.opened(plain)


def test_checkout_at_looks_at_the_folder_itself_only(repo: Path, tmp_path: Path) -> None:
    assert gitcmd.checkout_at(repo) == (repo.resolve(), (repo / ".git").resolve())
    assert gitcmd.checkout_at(repo / "tests") is None, "never the checkout above it"
    assert gitcmd.checkout_at(tmp_path / "gone") is None
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "--detach", str(linked), "HEAD")
    assert gitcmd.checkout_at(linked) == (linked.resolve(),
                                          (repo / ".git" / "worktrees" / "linked").resolve())


def test_inherited_git_variables_do_not_redirect_handoff(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    git(elsewhere, "init", "-q", "-b", "main")
    other_head = commit_file(elsewhere, "other.txt", "other\n", "other repo")
    head = git(repo, "rev-parse", "HEAD")
    monkeypatch.setenv("GIT_DIR", str(elsewhere / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(elsewhere))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "no-such-index"))
    monkeypatch.setenv("GIT_OBJECT_DIRECTORY", str(tmp_path / "no-objects"))
    found = Repo.at(repo)
    assert found.top == repo.resolve()
    assert found.common_dir == (repo / ".git").resolve()
    assert found.resolve("HEAD") == head
    assert repo_git(repo, "ls-files").splitlines() == [".gitignore", "calc.py",
                                                       "tests/__init__.py", "tests/test_calc.py"]
    assert found.checkout() == Checkout(head, 0)
    worktrees = TicketWorktrees(found, "E-1")  # `git worktree` through GitPython's command API
    assert worktrees.create_implementer(head) == repo.resolve() / ".worktrees" / "E-1" / "implementer"
    assert worktrees.remove_all() == ["implementer"]
    # dropped from handoff's own environment, where GitPython (and git.Repo) would read them
    assert not {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"} & os.environ.keys()
    assert git(elsewhere, "rev-parse", "HEAD") == other_head
    assert git(elsewhere, "status", "--porcelain") == ""


HANGING_HOOK = """#!/bin/sh
sleep 300 &
echo $! > {pids}/background
echo $$ > {pids}/hook
sleep 300
"""


def hang_in_hook(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                 hook_text: str) -> tuple[ExternalFailure, Path]:
    """`git worktree add` with a post-checkout hook that never ends, under a 2 s bound: the
    error it ended with, and the folder where the hook wrote its processes' pids."""
    pids = tmp_path / "pids"
    pids.mkdir()
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(hook_text.format(pids=pids), encoding="utf-8")
    hook.chmod(0o755)
    monkeypatch.setenv(TIMEOUT_VARIABLE, "2")
    started = time.monotonic()
    with pytest.raises(ExternalFailure) as info:
        repo_git(repo, "worktree", "add", "--detach", str(tmp_path / "wt"), "HEAD")
    assert time.monotonic() - started < 15, "git's call waited past its bound"
    assert "did not finish within 2s" in info.value.message
    return info.value, pids


def test_a_hanging_hook_ends_within_the_git_timeout_with_its_children(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    failure, pids = hang_in_hook(repo, tmp_path, monkeypatch, HANGING_HOOK)
    assert "hook" in failure.hint
    for name in ("hook", "background"):
        pid = int((pids / name).read_text())
        wait_until(partial(gone, pid), timeout=10, what=f"the hook's {name} process to end")


ORPHAN_HOOK = """#!/bin/sh
(sleep 40 & echo $! > {pids}/orphan)
sleep 300
"""


def test_a_hanging_hook_s_orphan_is_ended_with_git_s_group(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hook's child left its parent (`(cmd &)`): not under git's pid any more, but in its
    group, holding git's stderr. Killing only git's process tree would wait for it to end."""
    _, pids = hang_in_hook(repo, tmp_path, monkeypatch, ORPHAN_HOOK)
    wait_until(partial(gone, int((pids / "orphan").read_text())), timeout=10,
               what="the hook's orphan to end")


def test_an_unbounded_git_process_is_refused(repo: Path) -> None:
    """GitPython's object database reads through a `git cat-file --batch` kept open with no
    timeout: handoff's git refuses to start one, so none is left behind."""
    before = children()
    with gitcmd.opened(repo) as found, pytest.raises(TypeError, match="without a bound"):
        found.commit("HEAD").tree  # noqa: B018 (the read is the point)
    assert children() == before


def test_git_missing_from_path_is_a_missing_tool(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = Repo.at(repo)  # GitPython is loaded (its import checks for git too): each call finds git
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(MissingTool) as info:
        found.resolve("HEAD")
    assert "git" in info.value.message and info.value.exit_code == 6


def test_a_hang_is_an_error_even_where_failure_is_an_answer(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`git_ok` reads git's failure as "no": git ended at its bound is no answer at all."""
    pids = tmp_path / "pids"
    pids.mkdir()
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(HANGING_HOOK.format(pids=pids), encoding="utf-8")
    hook.chmod(0o755)
    monkeypatch.setenv(TIMEOUT_VARIABLE, "1")
    with pytest.raises(ExternalFailure) as info:
        git_ok(repo, "worktree", "add", "--detach", str(tmp_path / "wt"), "HEAD")
    assert "did not finish within 1s" in info.value.message


