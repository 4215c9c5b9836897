"""handoff.peer.scripted_review: where a failing test command failed and why, and the report the
scripted reviewer writes from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.peer.scripted_brief import Brief
from handoff.peer.scripted_review import (
    Failure,
    failing_location,
    failure_reason,
    first_failure,
    review_report,
)
from handoff.protocol.reports import parse
from handoff.role import Kind

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


# --- review_report, read back by handoff's own report parser ----------------------------------

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def brief(**fields: object) -> Brief:
    base = Brief(ticket="t", role="reviewer", kind="reviewer", round=2, worktree=Path("/w"),
                 plan=Path("/p/plan.md"), report=Path("/d/review-2.md"), submit=["true"],
                 commit=COMMIT)
    return Brief(**{**base.__dict__, **fields})


def test_a_clean_first_review_passes_and_parses() -> None:
    report, problems = parse(review_report(brief(), {}, [], ["`pytest` exit 0"]), Kind.REVIEWER)

    assert problems == []
    assert report is not None and report.verdict == "pass" and report.commit == COMMIT


def test_a_failure_still_there_answers_its_earlier_finding_not_fixed_and_others_fixed() -> None:
    earlier = ({"id": "F1", "file": "calc.py", "line": 6, "reason": "`pytest` fails: add"},
               {"id": "F2", "file": "io.py", "line": 2, "reason": "`pytest` fails: read"})
    still: Failure = {"file": "calc.py", "line": 7, "reason": "`pytest`   fails: ADD"}

    report, problems = parse(review_report(brief(earlier=earlier), {}, [still], ["x"]),
                             Kind.REVIEWER)

    assert problems == [] and report is not None
    assert {a.id: a.status for a in report.ledger} == {"F1": "not-fixed", "F2": "fixed"}
    assert report.verdict == "fail" and report.must_fix == ()


def test_a_new_failure_of_a_later_round_names_the_plans_own_criterion() -> None:
    earlier = ({"id": "F1", "file": "a.py", "line": 1, "reason": "old"},)
    new: Failure = {"file": "b.py", "line": 3, "reason": "`pytest` fails: new"}

    report, _ = parse(review_report(brief(earlier=earlier), {}, [new], []), Kind.REVIEWER)

    assert report is not None
    assert [(f.file, f.criterion) for f in report.must_fix] == [("b.py", "AC0")]


def test_the_scripts_answers_win_and_ignore_unrequested_leaves_them_unanswered() -> None:
    said = {"weakened": {"W1": "unjustified"}, "unrequested": {"U2": "unjustified"}}
    asked = {"weakened": ("W1",), "unrequested": ("U1", "U2"), "unproven": ("P1",)}
    text = review_report(brief(asked=asked), said, [], [])

    report, problems = parse(text, Kind.REVIEWER)
    assert problems == [] and report is not None and report.verdict == "fail"
    assert {a.id: a.answer for a in report.weakened} == {"W1": "unjustified"}
    assert {a.id: a.answer for a in report.unrequested} == {"U1": "justified", "U2": "unjustified"}
    assert {a.id: a.answer for a in report.unproven} == {"P1": "justified"}

    quiet = review_report(brief(asked={"unrequested": ("U1",), "unproven": ("P1",)}),
                          {"ignore_unrequested": True, "ignore_unproven": True}, [], [])
    assert "unrequested" not in quiet and "unproven" not in quiet
