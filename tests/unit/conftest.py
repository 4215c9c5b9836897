"""The unit layer starts no process: no git, no tmux, no CLI, no child of any kind. What it
tests is handoff's own logic on values, files and fakes (tests/rooms.py), so the whole layer
runs in seconds. A test that needs a real process lives in tests/integration/<layer>/, beside
the unit tests of the same module; one here that starts a process fails, saying so."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from typing import NoReturn

import pytest

# GitPython runs `git version` once, when it is first imported: done here, before any test
# (a library loaded is no process of the test's), so that no test's result hangs on which
# test of its worker happened to import it first
from handoff.machinery import gitcmd  # noqa: F401

MOVE = ("a unit test starts no process ({how}): move it to tests/integration/<layer>/, "
        "where the tests that run real git, tmux and CLIs live")


def _refuse(how: str) -> Callable[..., NoReturn]:
    def refused(*_args: object, **_kwargs: object) -> NoReturn:
        raise AssertionError(MOVE.format(how=how))
    return refused


@pytest.fixture(autouse=True)
def no_process() -> Iterator[None]:
    """Every way Python starts a process, refused while the test runs (its fixtures' set-up
    included: they are set up after this one). Its own patch, undone when the test ends."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "_execute_child", _refuse("subprocess"))
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "execv",
                     "execve", "execvp", "execvpe"):
            if hasattr(os, name):
                patch.setattr(os, name, _refuse(f"os.{name}"))
        yield
