"""handoff.loop.weakened: the tests a change deleted, removed, emptied of an assertion or
skipped, read from real commits. The expected lines are counted by hand from the fixtures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from handoff.loop.testcount import Count
from handoff.loop.weakened import (
    Weakening,
    described,
    is_test_path,
    named_paths,
    weakened,
    with_fewer_tests,
)
from handoff.machinery.repo import Repo
from tests.conftest import git

SHOP = '''\
import pytest

from shop import total


def test_empty():
    assert total([]) == 0


def test_one():
    assert total([3]) == 3
    assert total([0]) == 0


def test_many():
    assert total([1, 2]) == 3
    assert total([1, 2, 3]) == 6


def test_negative():
    with pytest.raises(ValueError):
        total([-1])
'''

Row = tuple[str, str, str, int, str]


def commit(repo: Path, files: Mapping[str, str | None], message: str = "change") -> str:
    """Write (or, for None, delete) files, commit them all, return the new HEAD."""
    for name, text in files.items():
        path = repo / name
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def rows(repo: Path, base: str, commands: Sequence[Sequence[str]] = ()) -> list[Row]:
    found = weakened(Repo.at(repo), base, "HEAD", commands)
    return [(w.id, w.kind, w.file, w.line, w.text) for w in found]


@pytest.fixture
def shop(repo: Path) -> tuple[Path, str]:
    """repo with tests/test_shop.py (four pytest tests) committed: the base."""
    return repo, commit(repo, {"shop.py": "def total(xs):\n    return sum(xs)\n",
                               "tests/test_shop.py": SHOP}, "shop")


def test_the_plan_s_commands_name_test_paths() -> None:
    assert named_paths([["python", "-m", "unittest", "tests.test_calc"]]) == {
        "tests/test_calc.py", "tests/test_calc", "tests"}
    assert named_paths([["python", "-m", "pytest", "-q", "checks/calc_check.py::test_a"]]) == {
        "checks/calc_check.py"}
    assert named_paths([["pytest", "qa/"]]) == {"qa"}
    assert named_paths([["python", "-m", "unittest", "tests.test_calc.AddTest.test_add"]]) == {
        "tests/test_calc.py", "tests/test_calc", "tests"}
    assert named_paths([["python", "-m", "unittest", "discover", "-s", "checks"]]) == {
        "checks.py", "checks"}
    # the runner, options and their values, globs, paths outside the repo name nothing
    assert named_paths([["python", "-m", "pytest.main", "-k", "a.b", "--junitxml=out/r.xml"],
                        ["pytest", "tests/**/*.py", "/abs/tests", "../up/x.py", "./"],
                        ["make", "check"]]) == set()
    assert named_paths([["pytest", "-c", "pytest.ini", "calc_check.py"]]) == {
        "pytest.ini", "calc_check.py"}
    assert named_paths([["go", "test", "./pkg/..."], ["pytest", "checks/t.py::T::test_a[1-2]"]]) \
        == {"pkg", "checks/t.py"}


@pytest.mark.parametrize(("path", "test"), [
    ("tests/helpers.py", True), ("pkg/__tests__/x.js", True), ("e2e/login.ts", True),
    ("src/Tests/Util.cs", True), ("test_x.py", True), ("pkg/x_test.py", True),
    ("conftest.py", True), ("x_test.go", True), ("a/b.test.tsx", True), ("b.spec.mjs", True),
    ("CalcTest.java", True), ("CalcTests.java", True), ("CalcTest.kt", True),
    ("calc_spec.rb", True), ("calc_test.rb", True), ("test_calc.rb", True),
    ("calc.py", False), ("testing.py", False), ("contest.py", False), ("x.test.py", False),
    ("latest/x.py", False), ("Tested.java", False),
])
def test_test_paths(path: str, test: bool) -> None:
    assert is_test_path(path) is test


def test_named_files_and_folders_are_test_paths() -> None:
    named = {"qa", "checks/calc_check.py"}
    assert is_test_path("qa/deep/x.py", named)
    assert is_test_path("checks/calc_check.py", named)
    assert not is_test_path("checks/other.py", named)
    assert not is_test_path("qaz/x.py", named)


def test_how_a_weakening_is_shown_and_kept() -> None:
    removed = Weakening("W2", "tests/test_calc.py", 14, "removed-assertion",
                        "self.assertEqual(add(1, 2), 3)")
    assert removed.render() == \
        "W2 tests/test_calc.py:14: assertion removed: `self.assertEqual(add(1, 2), 3)`"
    assert removed.fields() == {"id": "W2", "file": "tests/test_calc.py", "line": 14,
                                "kind": "removed-assertion",
                                "text": "self.assertEqual(add(1, 2), 3)"}
    assert Weakening("W1", "tests/test_x.py", 0, "deleted-file", "tests/test_x.py").render() == \
        "W1 tests/test_x.py: test file deleted"
    assert Weakening("W3", "a.test.js", 3, "new-skip", "it.skip(`x`)").render() == \
        "W3 a.test.js:3: skip added: `` it.skip(`x`) ``"


# ---- the gate's count, and test configuration as weakened reads it -------------------------

PYPROJECT = '''\
[project]
name = "shop"
dependencies = ["requests"]

[tool.pytest.ini_options]
addopts = "-q"
testpaths = ["tests"]

[tool.ruff]
line-length = 100
'''


def test_a_gate_that_ran_fewer_tests_is_one_more_entry() -> None:
    found = [Weakening("W1", "pytest.ini", 1, "test-config", "new file: +[pytest]")]
    base, now = Count(12, 0, 0, ("pytest",)), Count(9, 0, 3, ("pytest",))
    listed = with_fewer_tests(found, base, now)
    assert [w.render() for w in listed[1:]] == [
        "W2 the gate: fewer tests ran: 12 tests ran at the base, 9 at this commit (3 fewer); "
        "3 skipped or left out, 0 at the base"]
    assert described(listed[1].fields()) == listed[1].describe()
    assert with_fewer_tests(found, now, base) == found  # more is no weakening
    assert with_fewer_tests(found, base, None) == found  # unknown is no guess


def test_a_drop_the_removed_or_skipped_tests_account_for_is_not_listed_again() -> None:
    from handoff.loop.testcount import Count
    from handoff.loop.weakened import DELETED_FILE, FEWER_TESTS, REMOVED_TEST, Weakening, with_fewer_tests

    removed = [Weakening("W1", "tests/test_a.py", 4, REMOVED_TEST, "test_one")]
    base, one, two = (Count.from_fields({"ran": n, "failed": 0, "skipped": 0})
                      for n in (3, 2, 1))
    assert with_fewer_tests(removed, base, one) == removed, "test_one is the one fewer"
    more = with_fewer_tests(removed, base, two)
    assert [w.kind for w in more] == [REMOVED_TEST, FEWER_TESTS] and more[1].id == "W2"
    assert "(2 fewer)" in more[1].text
    deleted = [Weakening("W1", "tests/test_b.py", 0, DELETED_FILE, "tests/test_b.py")]
    assert with_fewer_tests(deleted, base, two) == deleted, "a whole file: any number"
