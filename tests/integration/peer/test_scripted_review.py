"""handoff.peer.scripted_review, fed the real output of unittest and pytest runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from handoff.peer.scripted_review import failing_location, failure_reason, first_failure
from tests.conftest import unittest_argv
from tests.unit.peer import test_scripted_review as unit_tests

#: the fixtures this module's unit tests define, shared
worktree = unit_tests.worktree

PY = sys.executable
PYTEST = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider"]




def line_of(path: Path, needle: str) -> int:
    """The 1-based line of the source that contains needle (found in the file, not guessed)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    hits = [n for n, text in enumerate(lines, 1) if needle in text]
    assert len(hits) == 1, (needle, hits)
    return hits[0]


def run(argv: list[str], cwd: Path) -> str:
    done = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode != 0, done.stdout  # these runs are all meant to fail
    return done.stdout


def add_line(worktree: Path) -> int:
    return line_of(worktree / "tests" / "test_calc.py", "add(2, 3)")


def json_line(worktree: Path) -> int:
    """The last frame inside the worktree when parse() fails: calc.py calling the stdlib."""
    return line_of(worktree / "calc.py", "json.loads(text)")


# --- unittest-style output ---------------------------------------------------------------------

def test_unittest_first_failure_and_its_location(repo: Path) -> None:
    """conftest's repo: three failing assertions, reported in the order add, mul, neg."""
    argv = unittest_argv()
    output = run(argv, repo)
    assert "test_mul" in output and "test_neg" in output

    block = first_failure(output)

    assert "test_add" in block
    assert "test_mul" not in block and "test_neg" not in block
    expected = line_of(repo / "tests" / "test_calc.py", "add(2, 3)")
    assert failing_location(block, repo) == ("tests/test_calc.py", expected)
    reason = failure_reason(argv, block)
    assert reason.startswith(f"`{' '.join(argv)}` fails: ")
    assert "FAIL: test_add" in reason
    assert "AssertionError: -1 != 5" in reason
    assert "test_mul" not in reason


def test_unittest_location_skips_stdlib_frames_outside_the_worktree(worktree: Path) -> None:
    argv = unittest_argv("tests.test_calc.ParseTest")
    output = run(argv, worktree)
    assert "json" + "/decoder.py" in output  # the traceback ends inside the stdlib

    block = first_failure(output)

    assert failing_location(block, worktree) == ("calc.py", json_line(worktree))
    assert "ERROR: test_parse" in failure_reason(argv, block)


def test_unittest_location_is_the_last_one_in_the_output(worktree: Path) -> None:
    output = run(unittest_argv("tests.test_calc.AddTest", "tests.test_calc.OldTest"), worktree)
    warning_at = output.index("UserWarning")
    assert warning_at < output.index("Traceback")  # the warning comes first, the failure last

    assert failing_location(output, worktree) == ("tests/test_calc.py", add_line(worktree))


# --- pytest-style output -----------------------------------------------------------------------

def test_pytest_first_failure_and_its_location(worktree: Path) -> None:
    output = run(PYTEST, worktree)
    assert "test_parse" in output

    block = first_failure(output)

    assert "test_add" in block.splitlines()[0]
    assert "test_parse" not in block
    assert failing_location(block, worktree) == ("tests/test_calc.py", add_line(worktree))
    reason = failure_reason(PYTEST, block)
    assert reason.startswith(f"`{' '.join(PYTEST)}` fails: ")
    assert "AssertionError: -1 != 5" in reason


def test_pytest_failure_reason_names_the_failing_test(worktree: Path) -> None:
    output = run(PYTEST, worktree)

    assert "test_add" in failure_reason(PYTEST, first_failure(output))


def test_pytest_location_skips_stdlib_frames_outside_the_worktree(worktree: Path) -> None:
    output = run([*PYTEST, "tests/test_calc.py::ParseTest"], worktree)
    assert "json" + "/decoder.py" in output

    block = first_failure(output)

    assert "test_parse" in block.splitlines()[0]
    assert failing_location(block, worktree) == ("calc.py", json_line(worktree))
