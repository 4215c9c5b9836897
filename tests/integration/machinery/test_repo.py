"""handoff.machinery.repo: finding the repository, resolving revisions, diffs and info/exclude."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.errors import ExternalFailure, UsageError
from handoff.machinery.proc import TIMEOUT_VARIABLE
from handoff.machinery.repo import Checkout, Repo, git_ok
from handoff.machinery.repo import git as repo_git
from handoff.machinery.worktrees import TicketWorktrees
from tests.conftest import commit_file, git
from tests.unit.machinery.test_gitcmd import children


@pytest.fixture
def linked(repo: Path, tmp_path: Path) -> Path:
    """A linked worktree of repo, made with plain git (outside the repo folder)."""
    path = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "--detach", str(path), "HEAD")
    return path


def test_at_top_gives_top_and_common_dir(repo: Path) -> None:
    found = Repo.at(repo)
    assert found.top == repo.resolve()
    assert found.common_dir == (repo / ".git").resolve()


def test_at_subfolder_finds_the_top(repo: Path) -> None:
    assert Repo.at(repo / "tests").top == repo.resolve()


def test_at_subfolder_is_the_same_repo(repo: Path) -> None:
    top = Repo.at(repo)
    sub = Repo.at(repo / "tests")
    assert sub.common_dir == top.common_dir
    assert sub.key == top.key


def test_at_linked_worktree_shares_common_dir(repo: Path, linked: Path) -> None:
    main = Repo.at(repo)
    other = Repo.at(linked)
    assert other.top == linked.resolve()
    assert other.common_dir == main.common_dir


def test_at_linked_worktree_has_the_same_key(repo: Path, linked: Path) -> None:
    assert Repo.at(linked).key == Repo.at(repo).key


def test_key_differs_between_repos(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other" / "repo"
    other.mkdir(parents=True)
    git(other, "init", "-q", "-b", "main")
    assert Repo.at(other).key != Repo.at(repo).key


def test_resolve_gives_full_sha(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    found = Repo.at(repo)
    assert found.resolve("HEAD") == head
    assert found.resolve("main") == head
    assert found.resolve(head[:8]) == head


def test_resolve_bad_rev_is_a_clear_usage_error(repo: Path) -> None:
    with pytest.raises(UsageError) as info:
        Repo.at(repo).resolve("no-such-branch")
    assert "'no-such-branch'" in info.value.message
    assert "--base" in info.value.hint


def test_resolve_a_tree_is_not_a_commit(repo: Path) -> None:
    tree = git(repo, "rev-parse", "HEAD^{tree}")
    with pytest.raises(UsageError):
        Repo.at(repo).resolve(tree)


def test_commit_exists(repo: Path) -> None:
    found = Repo.at(repo)
    assert found.commit_exists(git(repo, "rev-parse", "HEAD"))
    assert not found.commit_exists("0" * 40)
    assert not found.commit_exists(git(repo, "rev-parse", "HEAD:calc.py"))


def test_is_ancestor(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    first = commit_file(repo, "a.txt", "a\n", "a")
    git(repo, "checkout", "-q", "-b", "side", base)
    side = commit_file(repo, "b.txt", "b\n", "b")
    found = Repo.at(repo)
    assert found.is_ancestor(base, first)
    assert found.is_ancestor(base, side)
    assert found.is_ancestor(first, first)
    assert not found.is_ancestor(first, base)
    assert not found.is_ancestor(first, side)
    assert not found.is_ancestor(side, first)


def test_an_ancestry_found_between_full_names_is_kept_and_nothing_else_is(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    first = commit_file(repo, "a.txt", "a\n", "a")
    found = Repo.at(repo)
    assert found.is_ancestor(base, first) and not found.is_ancestor(first, base)
    objects = repo / ".git" / "objects"
    objects.rename(repo / ".git" / "objects-away")  # git can answer nothing now
    try:
        assert found.is_ancestor(base, first), "commits never change: the yes was kept"
        assert not found.is_ancestor(first, base), "a no is asked again, never kept as a yes"
        assert not found.is_ancestor(base[:12], first), "an abbreviated name is asked again"
    finally:
        (repo / ".git" / "objects-away").rename(objects)
    assert found.is_ancestor(base[:12], first)


def test_branch_head(repo: Path) -> None:
    found = Repo.at(repo)
    assert found.branch_head("main") == git(repo, "rev-parse", "HEAD")
    assert found.branch_head("handoff/nope") == ""


def test_diff_shows_changes_since_base(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    (repo / "calc.py").write_text("def add(a: int, b: int) -> int:\n    return b + a\n",
                                  encoding="utf-8")
    git(repo, "commit", "-q", "-am", "fix add")
    commit = commit_file(repo, "notes/new.txt", "hello\n", "notes")
    diff = Repo.at(repo).diff(base, commit)
    assert "diff --git a/calc.py b/calc.py" in diff
    assert "+    return b + a" in diff
    assert "-    return a - b" in diff
    assert "b/notes/new.txt" in diff
    assert "+hello" in diff
    assert Repo.at(repo).diff(commit, commit) == ""


def test_diff_is_from_the_merge_base(repo: Path) -> None:
    """Work landing on main after the branch point is not part of the ticket's diff."""
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "ticket")
    ticket = commit_file(repo, "ticket.txt", "mine\n", "ticket work")
    git(repo, "checkout", "-q", "main")
    main = commit_file(repo, "other.txt", "theirs\n", "other work")
    diff = Repo.at(repo).diff(main, ticket)
    assert "ticket.txt" in diff
    assert "other.txt" not in diff
    assert Repo.at(repo).diff(base, ticket) == diff


def test_diffstat_counts_lines_per_file(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    (repo / "calc.py").write_text("ADD = 'rewritten'\n", encoding="utf-8")
    (repo / "three.txt").write_text("1\n2\n3\n", encoding="utf-8")
    (repo / "blob.bin").write_bytes(bytes(range(256)) * 4)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "changes")
    rows = {path: (added, removed) for path, added, removed in
            Repo.at(repo).diffstat(base, "HEAD")}
    old_lines = len((git(repo, "show", f"{base}:calc.py") + "\n").splitlines())
    assert old_lines > 1
    assert rows["calc.py"] == (1, old_lines)
    assert rows["three.txt"] == (3, 0)
    assert rows["blob.bin"] == (0, 0)
    assert set(rows) == {"calc.py", "three.txt", "blob.bin"}


def exclude_file(repo: Path) -> Path:
    return repo / ".git" / "info" / "exclude"


def test_exclude_adds_the_pattern_once(repo: Path) -> None:
    found = Repo.at(repo)
    before = exclude_file(repo).read_text(encoding="utf-8") if exclude_file(repo).exists() else ""
    found.exclude("/scratch/")
    found.exclude("/scratch/")
    text = exclude_file(repo).read_text(encoding="utf-8")
    assert text.splitlines().count("/scratch/") == 1
    assert text.startswith(before)
    (repo / "scratch").mkdir()
    (repo / "scratch" / "junk.txt").write_text("x", encoding="utf-8")
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""


def test_exclude_from_a_linked_worktree_writes_the_file_git_reads(repo: Path,
                                                                  tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "--detach", str(linked))
    named = Path(git(linked, "rev-parse", "--path-format=absolute", "--git-path",
                     "info/exclude"))
    Repo.at(linked).exclude("/made-here/")
    assert "/made-here/" in named.read_text(encoding="utf-8").splitlines()
    for checkout in (repo, linked):
        (checkout / "made-here").mkdir()
        (checkout / "made-here" / "junk.txt").write_text("x", encoding="utf-8")
        assert git(checkout, "status", "--porcelain", "--untracked-files=all") == ""


def test_exclude_keeps_a_last_line_without_newline(repo: Path) -> None:
    exclude_file(repo).parent.mkdir(parents=True, exist_ok=True)
    exclude_file(repo).write_text("*.log", encoding="utf-8")
    Repo.at(repo).exclude("/scratch/")
    lines = exclude_file(repo).read_text(encoding="utf-8").splitlines()
    assert "*.log" in lines
    assert "/scratch/" in lines
    (repo / "debug.log").write_text("x", encoding="utf-8")
    (repo / "scratch").mkdir()
    (repo / "scratch" / "junk.txt").write_text("x", encoding="utf-8")
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""


def test_exclude_creates_a_missing_info_folder(repo: Path) -> None:
    info = repo / ".git" / "info"
    for child in info.iterdir() if info.exists() else []:
        child.unlink()
    if info.exists():
        info.rmdir()
    Repo.at(repo).exclude("/scratch/")
    assert exclude_file(repo).read_text(encoding="utf-8").splitlines() == ["/scratch/"]


def test_exclude_from_linked_worktree_writes_the_common_file(repo: Path, linked: Path) -> None:
    Repo.at(linked).exclude("/from-linked/")
    assert "/from-linked/" in exclude_file(repo).read_text(encoding="utf-8").splitlines()
    assert not (linked / "info").exists()
    (repo / "from-linked").mkdir()
    (repo / "from-linked" / "x.txt").write_text("x", encoding="utf-8")
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    # and again from the main checkout: still once
    Repo.at(repo).exclude("/from-linked/")
    assert exclude_file(repo).read_text(encoding="utf-8").splitlines().count("/from-linked/") == 1


@pytest.mark.parametrize("value", ["soon", "0", "-5", "nan", "inf"])
def test_a_bad_git_timeout_is_a_clear_usage_error(
        repo: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    found = Repo.at(repo)  # finding the repository runs no git
    monkeypatch.setenv(TIMEOUT_VARIABLE, value)
    with pytest.raises(UsageError) as info:
        found.resolve("HEAD")
    assert TIMEOUT_VARIABLE in info.value.message and repr(value) in info.value.message


def test_a_ceiling_stops_git_finding_the_repository_around_a_folder(repo: Path) -> None:
    plain = repo / ".worktrees" / "T-1" / "implementer"
    plain.mkdir(parents=True)
    assert repo_git(plain, "rev-parse", "--show-toplevel") == str(repo.resolve())
    with pytest.raises(ExternalFailure) as info:
        repo_git(plain, "rev-parse", "--show-toplevel", ceiling=plain.parent)
    assert "not a git repository" in info.value.message
    assert not git_ok(plain, "status", ceiling=plain.parent)


def test_git_calls_leave_no_child_behind(repo: Path, tmp_path: Path) -> None:
    """No persistent `git cat-file --batch` (GitPython's object database) nor any other git
    child outlives a ticket's git work, nor its close."""
    before = children()
    found = Repo.at(repo)
    head = found.resolve("HEAD")
    assert found.commit_exists(head) and found.is_ancestor(head, head)
    assert found.checkout().changes == 0 and found.diff(head, head) == ""
    worktrees = TicketWorktrees(found, "C-1")
    worktrees.create_implementer(head)
    worktrees.point("reviewer", head, tmp_path / "scratch.patch")
    assert worktrees.head("implementer") == head and worktrees.dirty(worktrees.path("reviewer")) == []
    # no new child: one an earlier test left exiting may end meanwhile (seen once in CI)
    assert children() - before == set()
    assert worktrees.remove_all() == ["implementer", "reviewer"]
    assert children() - before == set()


def test_checkout_counts_each_changed_path_once_and_names_head(repo: Path,
                                                               tmp_path: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    found = Repo.at(repo)
    assert found.checkout() == Checkout(head, 0)
    git(repo, "mv", "calc.py", "renamed calc.py")  # a rename: one path, one line in v2
    (repo / "tests" / "test_calc.py").write_text("changed\n", encoding="utf-8")
    (repo / "new\nline.txt").write_text("untracked, a newline in its name\n", encoding="utf-8")
    (repo / "__pycache__").mkdir(exist_ok=True)
    (repo / "__pycache__" / "x.pyc").write_text("", encoding="utf-8")  # ignored: not counted
    assert found.checkout() == Checkout(head, 3)

    empty = tmp_path / "unborn"
    empty.mkdir()
    git(empty, "init", "-q", "-b", "main")
    (empty / "a.txt").write_text("a\n", encoding="utf-8")
    assert Repo.at(empty).checkout() == Checkout("", 1)


def test_merge_drivers_names_the_files_git_does_not_merge_line_by_line(repo: Path) -> None:
    commit_file(repo, ".gitattributes", "calc.py merge=union\n*.lock merge=ours-lock\n"
                "*.png -merge\n", "attributes")
    plain = git(repo, "rev-parse", "HEAD")
    git(repo, "switch", "-q", "-c", "other")
    other = commit_file(repo, ".gitattributes", "tests/*.py merge=union\n", "union the tests")
    git(repo, "switch", "-q", "main")
    index = (repo / ".git" / "index").read_bytes()
    found = Repo.at(repo).merge_drivers(
        [plain, other], ["calc.py", "yarn.lock", "logo.png", "tests/test_calc.py", "README"])
    # union and a driver the configuration names; `-merge` (binary: it conflicts) is not one
    assert found == {"calc.py": "union", "yarn.lock": "ours-lock",
                     "tests/test_calc.py": "union"}
    assert Repo.at(repo).merge_drivers([plain], []) == {}
    assert (repo / ".git" / "index").read_bytes() == index, "the person's index is untouched"
    assert git(repo, "status", "--porcelain") == ""
