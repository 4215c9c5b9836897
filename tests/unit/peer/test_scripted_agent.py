"""handoff.peer.scripted_agent's helpers, fed the real output of unittest and pytest runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.peer.scripted_agent import failing_location, failure_reason, first_failure, main

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
