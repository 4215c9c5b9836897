"""Every git command handoff runs goes through `BoundedGit`, a GitPython `Git` whose calls are
bounded.

Imported only where git is needed (GitPython's import costs ~50 ms and runs `git version`).

What each call carries:

* `kill_after_timeout` (HANDOFF_GIT_TIMEOUT): GitPython's watchdog kills git and the processes
  under it at the bound;
* `start_new_session`: git leads a process group of its own, and the watchdog ends that whole
  group (`_end_group_then_tree`), so a hook's child that left its parent (`(sleep 300 &)`) dies
  too instead of holding git's pipes open;
* stdin /dev/null (GitPython's own default) and no variable that points git at another
  repository (`proc.REPO_LOCATING`): GitPython builds git's environment from `os.environ`, and
  `git.Repo` reads GIT_DIR, GIT_WORK_TREE, GIT_COMMON_DIR and GIT_OBJECT_DIRECTORY from it
  while it finds a repository, so they are dropped from this process (`forget_repo_locating`)
  before either runs: handoff never wants them.

`GitRepo` is a `git.Repo` whose commands are `BoundedGit` calls, opened only as a context
manager (`opened`). Handoff reads objects through bounded commands (`rev-parse`, `cat-file -e`),
never through GitPython's object database: that keeps a `git cat-file --batch` process open
for the life of the `Repo`, and a read from it has no timeout. `BoundedGit` refuses such
unbounded processes (`as_process`), so none can be left behind or hang.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import git
import git.cmd
from git.exc import GitCommandNotFound

from handoff import trace
from handoff.errors import ExternalFailure, MissingTool, NotFound, UsageError
from handoff.machinery import groups
from handoff.machinery.proc import KILL_GRACE, REPO_LOCATING, failure_said, git_timeout

_tree_kill = git.cmd._kill_process  # what GitPython's watchdog calls with git's pid


def _end_group_then_tree(pid: int) -> bool:
    """GitPython's watchdog kill, with the process group first: GitPython kills only the
    processes it finds under git's pid, and a hook's orphan in git's group would keep git's
    pipes open (and `communicate` waiting) for as long as it lives."""
    try:
        leads_group = os.getpgid(pid) == pid  # ours: started with start_new_session, unreaped
    except ProcessLookupError:
        leads_group = False
    if leads_group:
        groups.end_group(pid, KILL_GRACE)
    return _tree_kill(pid) or leads_group


# GitPython has no hook for how its watchdog kills; this is the one name it calls (checked
# against the pinned source by
# tests/unit/machinery/test_gitcmd.py::test_gitpython_watchdog_seam_is_the_one_we_wrap).
git.cmd._kill_process = _end_group_then_tree


class BoundedGit(git.Git):
    """A GitPython `Git` whose every call is bounded and runs in a folder that exists."""

    def execute(self, command: Any, *args: Any, **kwargs: Any) -> Any:
        forget_repo_locating()
        if kwargs.get("as_process"):
            raise TypeError("handoff runs no git process without a bound: GitPython's object "
                            "database and streamed commands (as_process) are not used")
        folder = self._working_dir
        if folder is not None and not Path(folder).is_dir():
            # GitPython would run git in handoff's own folder instead, on the repository there
            raise NotFound(f"the folder {folder} does not exist (needed to run git)")
        timeout = kwargs.setdefault("kill_after_timeout", git_timeout())
        kwargs.setdefault("start_new_session", True)  # one group for the watchdog to end
        check = kwargs.pop("with_exceptions", True)
        extended = kwargs.pop("with_extended_output", False)
        started = time.monotonic()
        try:
            # with_exceptions=False: a git killed at its bound must raise even where the caller
            # reads a failure as an answer (`git_ok`), and GitPython would return its status
            status, out, err = super().execute(command, *args,
                                               with_exceptions=False, with_extended_output=True,
                                               **kwargs)
        except GitCommandNotFound:
            raise MissingTool("git is not installed or not on PATH",
                              "install git and try again") from None
        trace.command(command, status, started)
        if status != 0 and time.monotonic() - started >= timeout:
            raise ExternalFailure(
                f"{_words(command)} … did not finish within {timeout:g}s; it was stopped together "
                "with every process it started",
                "something it waits on hangs (a hook in .git/hooks or core.hooksPath); mend that "
                "and retry",
            )
        if status != 0 and check:
            raise ExternalFailure(
                f"{_words(command)} failed: {failure_said(str(err), str(out), status)}")
        return (status, out, err) if extended else out


def _words(command: Sequence[Any]) -> str:
    return " ".join(str(word) for word in list(command)[:3])


def forget_repo_locating() -> None:
    """Drop the repository-locating variables from this process's environment (once they are
    gone this is a set intersection): GitPython can add to git's environment, never remove
    from it, and `git.Repo` reads them while it finds a repository."""
    for name in REPO_LOCATING & os.environ.keys():
        del os.environ[name]


class GitRepo(git.Repo):
    """A `git.Repo` whose commands are bounded; open it with `opened`."""

    GitCommandWrapperType = BoundedGit


def opened(path: Path) -> GitRepo:
    """The repository holding path (found as git finds it, from path upwards), to be used as a
    context manager: `with opened(p) as repo: …` closes it, and any `git cat-file` it started."""
    forget_repo_locating()
    try:
        return GitRepo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise UsageError(f"{path} is not inside a git repository",
                       "run handoff inside a repo, or pass --repo PATH") from None


def checkout_at(path: Path) -> tuple[Path, Path] | None:
    """(working tree, git dir) of the checkout whose `.git` is in path itself, as GitPython
    reads them: no git process, and no looking above path. None when path holds none."""
    forget_repo_locating()
    try:
        found = GitRepo(path)  # without search_parent_directories: path itself or nothing
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, OSError):
        return None
    with found:
        top = found.working_tree_dir
        return (Path(top).resolve(), Path(found.git_dir).resolve()) if top else None


def run(cwd: Path, args: Sequence[str], *, timeout: float | None = None,
        env: Mapping[str, str] | None = None, check: bool = True) -> tuple[int, str, str]:
    """(status, stdout, stderr) of `git args` in cwd: GitPython's command API
    (`Git(cwd).worktree("add", …)`) on a `BoundedGit`."""
    extra: dict[str, Any] = {} if timeout is None else {"kill_after_timeout": timeout}
    command = getattr(BoundedGit(cwd), args[0])
    status, out, err = command(*args[1:], with_extended_output=True, with_exceptions=check,
                               env=env, strip_newline_in_stdout=False, **extra)
    return int(status), str(out), str(err)

