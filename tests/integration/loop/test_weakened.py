"""handoff.loop.weakened: the tests a change deleted, removed, emptied of an assertion or
skipped, read from real commits. The expected lines are counted by hand from the fixtures."""

from __future__ import annotations

from pathlib import Path

from handoff.loop.weakened import (
    weakened,
)
from handoff.machinery.repo import Repo
from handoff.protocol import ledger
from handoff.protocol.plan import parse as parse_plan
from handoff.protocol.reports import Justified, Report
from tests.conftest import git
from tests.unit.loop import test_weakened as unit_tests
from tests.unit.loop.test_weakened import PYPROJECT, SHOP, commit, rows

#: the fixtures this module's unit tests define, shared
shop = unit_tests.shop


SUM_JS = '''\
const { sum } = require("./sum");

describe("sum", () => {
  it("adds two numbers", () => {
    expect(sum(1, 2)).toBe(3);
  });

  it("adds none", () => {
    expect(sum()).toBe(0);
  });
});
'''

CALC_JAVA = '''\
import org.junit.jupiter.api.Test;

class CalcTest {
    @Test
    void adds() {
        assertEquals(3, Calc.add(1, 2));
    }

    @Test
    void subtracts() {
        assertEquals(1, Calc.sub(2, 1));
    }
}
'''

CALC_GO = '''\
package calc

import "testing"

func TestAdd(t *testing.T) {
\tif Add(1, 2) != 3 {
\t\tt.Fatal("1+2")
\t}
}

func TestSub(t *testing.T) {
\tif Sub(2, 1) != 1 {
\t\tt.Errorf("2-1")
\t}
}
'''



def test_a_deleted_test_file_is_one_entry(shop: tuple[Path, str]) -> None:
    repo, base = shop
    commit(repo, {"tests/test_shop.py": None})
    assert rows(repo, base) == [("W1", "deleted-file", "tests/test_shop.py", 0,
                                 "tests/test_shop.py")]


def test_the_persons_git_config_does_not_change_what_is_read(repo: Path) -> None:
    """diff.noprefix drops git's a/ b/ (a real folder a/ would then be read away), a textconv
    driver rewrites what a diff shows: handoff asks for neither."""
    base = commit(repo, {"a/test_total.py": SHOP}, "tests in a folder named a")
    git(repo, "config", "diff.noprefix", "true")
    git(repo, "config", "diff.upper.textconv", "tr a-z A-Z")
    (repo / ".git" / "info" / "attributes").write_text("*.py diff=upper\n", encoding="utf-8")
    commit(repo, {"a/test_total.py": SHOP.replace("    assert total([3]) == 3\n", "")})
    assert rows(repo, base) == [("W1", "removed-assertion", "a/test_total.py", 11,
                                 "assert total([3]) == 3")]


def test_a_removed_test_is_listed_once_not_with_its_assertions(shop: tuple[Path, str]) -> None:
    repo, base = shop
    commit(repo, {"tests/test_shop.py": SHOP.replace(
        "def test_one():\n    assert total([3]) == 3\n    assert total([0]) == 0\n\n\n", "")})
    assert rows(repo, base) == [("W1", "removed-test", "tests/test_shop.py", 10, "test_one")]


def test_a_dropped_assertion_of_a_kept_test(shop: tuple[Path, str]) -> None:
    repo, base = shop
    commit(repo, {"tests/test_shop.py": SHOP.replace("    assert total([1, 2, 3]) == 6\n", "")})
    assert rows(repo, base) == [("W1", "removed-assertion", "tests/test_shop.py", 17,
                                 "assert total([1, 2, 3]) == 6")]


def test_an_assertion_given_another_value_is_not_listed(shop: tuple[Path, str]) -> None:
    repo, base = shop
    commit(repo, {"tests/test_shop.py": SHOP.replace("assert total([3]) == 3",
                                                     "assert total([3, 4]) == 7")})
    assert rows(repo, base) == []


def test_new_skips_and_expected_failures(shop: tuple[Path, str]) -> None:
    repo, base = shop
    calc = (repo / "tests" / "test_calc.py").read_text(encoding="utf-8")
    commit(repo, {
        "tests/test_shop.py": SHOP.replace("def test_many():",
                                           '@pytest.mark.skip(reason="flaky")\ndef test_many():'),
        "tests/test_calc.py": calc.replace("    def test_add(self)",
                                           "    @unittest.expectedFailure\n    def test_add(self)"),
    })
    assert rows(repo, base) == [
        ("W1", "new-skip", "tests/test_calc.py", 7, "@unittest.expectedFailure"),
        ("W2", "new-skip", "tests/test_shop.py", 15, '@pytest.mark.skip(reason="flaky")'),
    ]


def test_a_skip_that_only_moved_is_not_new(repo: Path) -> None:
    before = "import pytest\n\n\n@pytest.mark.skip\ndef test_a():\n    pass\n\n\ndef test_b():\n    pass\n"
    after = "import pytest\n\n\ndef test_b():\n    pass\n\n\n@pytest.mark.skip\ndef test_a():\n    pass\n"
    base = commit(repo, {"tests/test_order.py": before})
    commit(repo, {"tests/test_order.py": after})
    assert rows(repo, base) == []


def test_a_skipped_and_a_focused_javascript_test(repo: Path) -> None:
    base = commit(repo, {"web/sum.test.js": SUM_JS})
    commit(repo, {"web/sum.test.js": SUM_JS.replace('it("adds none"', 'it.skip("adds none"')
                  .replace('it("adds two', 'it.only("adds two')})
    assert rows(repo, base) == [
        ("W1", "new-skip", "web/sum.test.js", 4,
         'it.only("adds two numbers", () => { (.only: the other tests there no longer run)'),
        ("W2", "new-skip", "web/sum.test.js", 8, 'it.skip("adds none", () => {'),
    ]


def test_a_test_moved_to_another_file_is_not_listed(shop: tuple[Path, str]) -> None:
    repo, base = shop
    moved = "def test_negative():\n    with pytest.raises(ValueError):\n        total([-1])\n"
    commit(repo, {"tests/test_shop.py": SHOP.replace("\n\n" + moved, ""),
                  "tests/test_errors.py": "import pytest\n\nfrom shop import total\n\n\n" + moved})
    assert rows(repo, base) == []


def test_a_renamed_test_file_is_not_listed(shop: tuple[Path, str]) -> None:
    repo, base = shop
    git(repo, "mv", "tests/test_shop.py", "tests/test_basket.py")
    git(repo, "commit", "-q", "-m", "rename")
    assert rows(repo, base) == []


def test_a_test_file_moved_out_of_the_tests_counts_as_deleted(shop: tuple[Path, str]) -> None:
    repo, base = shop
    (repo / "attic").mkdir()
    git(repo, "mv", "tests/test_shop.py", "attic/shop_checks.py")
    git(repo, "commit", "-q", "-m", "out of the way")
    assert rows(repo, base) == [("W1", "deleted-file", "tests/test_shop.py", 0,
                                 "renamed to attic/shop_checks.py")]


def test_changes_to_other_files_list_nothing(shop: tuple[Path, str]) -> None:
    repo, base = shop
    commit(repo, {"shop.py": "def total(xs):\n    assert xs is not None\n    return sum(xs)\n"})
    commit(repo, {"shop.py": "def total(xs):\n    return sum(xs)\n", "calc.py": None})
    assert rows(repo, base) == []


def test_other_languages(repo: Path) -> None:
    java, go = "src/test/java/CalcTest.java", "calc/calc_test.go"
    base = commit(repo, {java: CALC_JAVA, go: CALC_GO})
    commit(repo, {
        java: CALC_JAVA.replace("\n    @Test\n    void subtracts() {\n"
                                "        assertEquals(1, Calc.sub(2, 1));\n    }\n", ""),
        go: CALC_GO.replace('\t\tt.Fatal("1+2")\n', "").replace(
            "func TestSub(t *testing.T) {\n", 'func TestSub(t *testing.T) {\n\tt.Skip("later")\n'),
    })
    assert rows(repo, base) == [
        ("W1", "removed-assertion", go, 7, 't.Fatal("1+2")'),
        ("W2", "new-skip", go, 11, 't.Skip("later")'),
        ("W3", "removed-test", java, 9, "subtracts"),
    ]


def test_a_folder_the_plan_names_holds_tests(repo: Path) -> None:
    check = ("from calc import add\n\n\ndef check_add():\n    assert add(2, 3) == 5\n"
             "    assert add(0, 0) == 0\n")
    base = commit(repo, {"qa/calc_check.py": check})
    commit(repo, {"qa/calc_check.py": check.replace("    assert add(0, 0) == 0\n", "")})
    assert rows(repo, base) == []
    assert rows(repo, base, [["pytest", "qa/"]]) == [
        ("W1", "removed-assertion", "qa/calc_check.py", 6, "assert add(0, 0) == 0")]


def test_a_long_line_is_clipped(shop: tuple[Path, str]) -> None:
    repo, base = shop
    long = "assert total([" + ", ".join(["1"] * 100) + "]) == 100"
    base = commit(repo, {"tests/test_shop.py": SHOP.replace("assert total([]) == 0", long)})
    commit(repo, {"tests/test_shop.py": SHOP.replace("    assert total([]) == 0\n", "")})
    (found,) = rows(repo, base)
    assert found[:4] == ("W1", "removed-assertion", "tests/test_shop.py", 7)
    assert found[4] == long[:199] + "…"


# ---- the gate's count, and test configuration as weakened reads it -------------------------



def test_what_a_test_file_adds_to_decide_its_own_tests(repo: Path) -> None:
    """A Go build constraint and pytest's `__test__ = False` leave a file's tests out (a skip);
    a load_tests function decides which of them run."""
    go = "calc/calc_test.go"
    base = commit(repo, {go: CALC_GO, "tests/test_shop.py": SHOP})
    commit(repo, {go: "//go:build never\n\n" + CALC_GO,
                  "tests/test_shop.py": "__test__ = False\n\n" + SHOP.replace(
                      "import pytest\n", "import pytest\n\n\ndef load_tests(loader, tests, "
                                         "pattern):\n    return tests\n")})
    assert rows(repo, base) == [
        ("W1", "new-skip", "calc/calc_test.go", 1,
         "//go:build never (a build constraint: the file's tests build only when it holds)"),
        ("W2", "new-skip", "tests/test_shop.py", 1, "__test__ = False"),
        ("W3", "test-config", "tests/test_shop.py", 6,
         "def load_tests(loader, tests, pattern): (decides which tests of the file run)")]


def test_every_test_configuration_entry_must_be_answered_by_a_review(
        shop: tuple[Path, str]) -> None:
    """They are weakened tests to the ledger: a review that leaves one out is refused."""
    repo, base = shop
    commit(repo, {"pytest.ini": '[pytest]\naddopts = -k "not test_one"\n',
                  "tests/test_shop.py": SHOP.replace("def test_many", "@pytest.mark.skip\n"
                                                                      "def test_many")})
    shown = [w.id for w in weakened(Repo.at(repo), base, "HEAD", [])]
    assert shown == ["W1", "W2"]
    only_the_skip = Report(role="reviewer", commit="abc1234", verdict="pass", answers={"weakened": (
        Justified("W2", "justified", "the plan drops test_many"),)})
    plan = parse_plan("# Plan\n")
    assert ledger.problems(only_the_skip, [], plan, None, {"weakened": shown}) == [
        "weakened test W1 is not answered: add {id: W1, answer: justified or unjustified, "
        "reason: …} under 'weakened:'"]
    both = Report(role="reviewer", commit="abc1234", verdict="fail", answers={"weakened": (
        Justified("W1", "unjustified", "it hides test_one"),
        Justified("W2", "justified", "the plan drops test_many"))})
    assert ledger.problems(both, [], plan, None, {"weakened": shown}) == []


def test_test_configuration_is_compared_from_where_the_ticket_branched(repo: Path) -> None:
    """The base branch moved on (its own pytest change) while the ticket changed only a
    dependency: the ticket's side, read from the merge base, changed no test configuration."""
    start = commit(repo, {"pyproject.toml": PYPROJECT})
    git(repo, "checkout", "-q", "-b", "ticket")
    commit(repo, {"pyproject.toml": PYPROJECT.replace('["requests"]', '["requests", "attrs"]')})
    git(repo, "checkout", "-q", "main")
    moved = commit(repo, {"pyproject.toml": PYPROJECT.replace('"-q"', '"-q -x"')})
    assert moved != start
    assert [w.render() for w in weakened(Repo.at(repo), "main", "ticket", [])] == []
