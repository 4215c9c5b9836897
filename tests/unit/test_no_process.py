"""The unit layer's own rule (tests/unit/conftest.py): a test here that starts a process fails,
saying where it belongs; one that starts none runs as usual."""

from __future__ import annotations

import os
import subprocess

import pytest

from handoff.machinery import proc


def test_a_subprocess_is_refused_saying_where_the_test_belongs() -> None:
    with pytest.raises(AssertionError, match=r"starts no process \(subprocess\): move it to "
                                             r"tests/integration/<layer>/"):
        subprocess.run(["true"], check=False)


def test_handoffs_own_runner_and_a_fork_are_refused_too() -> None:
    with pytest.raises(AssertionError, match="starts no process"):
        proc.run(["git", "--version"], timeout=5)
    with pytest.raises(AssertionError, match=r"starts no process \(os.fork\)"):
        os.fork()
    with pytest.raises(AssertionError, match=r"starts no process \(os.posix_spawn\)"):
        os.posix_spawn("/bin/true", ["true"], dict(os.environ))
