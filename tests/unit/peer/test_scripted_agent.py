"""handoff.peer.scripted_agent's helpers, fed the real output of unittest and pytest runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from handoff.peer.scripted_agent import failing_location, failure_reason, first_failure, main
from tests.conftest import unittest_argv

PY = sys.executable
PYTEST = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider"]

CALC = '''\
import json
import warnings


def add(a: int, b: int) -> int:
    return a - b


def parse(text: str) -> object:
    return json.loads(text)


def old(a: int) -> int:
    warnings.warn("old() is deprecated", UserWarning)
    return a
'''

TESTS = '''\
import unittest

from calc import add, old, parse


class AddTest(unittest.TestCase):
    def test_add(self) -> None:
        self.assertEqual(add(2, 3), 5)


class OldTest(unittest.TestCase):
    def test_old(self) -> None:
        self.assertEqual(old(1), 1)


class ParseTest(unittest.TestCase):
    def test_parse(self) -> None:
        self.assertEqual(parse("{not json"), {})
'''


def line_of(path: Path, needle: str) -> int:
    """The 1-based line of the source that contains needle (found in the file, not guessed)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    hits = [n for n, text in enumerate(lines, 1) if needle in text]
    assert len(hits) == 1, (needle, hits)
    return hits[0]


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    """A checkout with one failing assertion (add), one error raised in the stdlib (parse) and a
    passing test that emits a warning from inside the worktree (old)."""
    root = tmp_path / "worktree"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text(CALC, encoding="utf-8")
    (root / "tests" / "__init__.py").write_text("", encoding="utf-8")
    (root / "tests" / "test_calc.py").write_text(TESTS, encoding="utf-8")
    return root


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


# --- failing_location on its own ---------------------------------------------------------------

def test_failing_location_ignores_files_outside_the_worktree(worktree: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere" / "lib.py"
    outside.parent.mkdir()
    outside.write_text("x = 1\n" * 10, encoding="utf-8")
    output = (
        'Traceback (most recent call last):\n'
        f'  File "{worktree / "calc.py"}", line 6, in add\n'
        f'  File "{outside}", line 3, in helper\n'
        "../elsewhere/lib.py:4: in helper\n"
        f"{outside}:5: AssertionError\n"
    )

    assert failing_location(output, worktree) == ("calc.py", 6)


def test_failing_location_ignores_names_that_are_not_files_of_the_worktree(worktree: Path) -> None:
    output = "calc.py:3: in add\nghost.py:9: AssertionError\n  File \"tests\", line 2\n"

    assert failing_location(output, worktree) == ("calc.py", 3)


def test_failing_location_without_any_location_is_empty(worktree: Path, tmp_path: Path) -> None:
    outside = tmp_path / "other.py"
    outside.write_text("pass\n", encoding="utf-8")

    assert failing_location("Ran 3 tests\nFAILED (failures=1)\n", worktree) == ("", 0)
    assert failing_location(f"{outside}:1: Error\n", worktree) == ("", 0)


# --- first_failure / failure_reason on their own -----------------------------------------------

def test_first_failure_without_a_named_test_is_the_whole_output() -> None:
    output = "error: could not import calc\nexit status 2\n"

    assert first_failure(output) == output


def test_first_failure_ignores_underscore_lines_that_name_no_test() -> None:
    output = ("_ _ _ _ _ _ _ _\nnoise\n"
              "FAIL: test_one (t.T.test_one)\nAssertionError: 1 != 2\n"
              "FAIL: test_two (t.T.test_two)\nAssertionError: 3 != 4\n")

    block = first_failure(output)

    assert block.splitlines() == ["FAIL: test_one (t.T.test_one)", "AssertionError: 1 != 2"]


def test_failure_reason_falls_back_to_the_last_line() -> None:
    reason = failure_reason(["make", "check"], "building\n\nsegmentation fault (core dumped)\n\n")

    assert reason == "`make check` fails: segmentation fault (core dumped)"
    assert failure_reason(["true"], "") == "`true` fails: "


# --- main ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    [],
    ["implementer"],
    ["the boss", "Read and follow /tmp/brief-1.md"],
    ["reviewer", "Read and follow /tmp/brief-1.md", "extra"],
])
def test_main_with_bad_arguments_returns_2(argv: list[str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2

    captured = capsys.readouterr()
    assert "usage:" in captured.err
    assert captured.out == ""


def test_module_exits_2_on_bad_arguments_and_0_at_the_end_of_input(tmp_path: Path) -> None:
    bad = subprocess.run([PY, "-m", "handoff.peer.scripted_agent", "a.b", "hi"], capture_output=True,
                         text=True, timeout=60, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert bad.returncode == 2
    assert "usage:" in bad.stderr

    good = subprocess.run([PY, "-m", "handoff.peer.scripted_agent", "reviewer", "hello there"],
                          input="not a brief either\n", capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert good.returncode == 0
    assert "scripted: ignoring 'hello there'" in good.stdout
    assert "scripted: ignoring 'not a brief either'" in good.stdout
