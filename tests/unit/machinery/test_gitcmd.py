"""handoff.machinery.gitcmd: every git command bounded (a hanging hook and its orphans end at
the bound), no unbounded git process, no inherited variable steering git, git's failures as
clear errors. Real git, real hooks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from handoff.errors import NotFound
from handoff.machinery import gitcmd


def test_git_never_runs_in_a_folder_that_does_not_exist(tmp_path: Path) -> None:
    """GitPython would run it in handoff's own folder instead, on whatever repository is there."""
    with pytest.raises(NotFound, match="does not exist"):
        gitcmd.run(tmp_path / "gone", ["status"])


def test_forgetting_drops_exactly_the_repository_locating_variables(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_DIR", "/elsewhere/.git")
    monkeypatch.setenv("GIT_COMMON_DIR", "/elsewhere/.git")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "kept")
    gitcmd.forget_repo_locating()
    assert "GIT_DIR" not in os.environ and "GIT_COMMON_DIR" not in os.environ
    assert os.environ["GIT_AUTHOR_NAME"] == "kept"


def gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def test_gitpython_watchdog_seam_is_the_one_we_wrap() -> None:
    """handoff.machinery.gitcmd replaces the one function GitPython's watchdog calls to kill git: an
    upgrade that kills another way (or from a second place) must fail here."""
    import inspect

    import git.cmd

    source = inspect.getsource(git.cmd.Git.execute)
    assert source.count("_kill_process(") == 1 and "threading.Timer(" in source
    assert git.cmd._kill_process is gitcmd._end_group_then_tree


def children() -> set[int]:
    """This process's live children."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found

