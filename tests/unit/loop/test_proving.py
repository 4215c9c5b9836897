"""handoff.loop.proving: the plan's command made to run only the new tests, and what each did
at the base read from the runner's output (here in the runners' own formats, written out; the
integration layer feeds it real runs)."""

from __future__ import annotations

from handoff.loop.newtests import NewTest
from handoff.loop.proving import (
    PYTEST,
    UNITTEST,
    WHOLE,
    Outcome,
    described,
    listed,
    outcomes,
    runner,
    selected,
    uncollected,
    unproven,
    unsaid,
)

ADD = NewTest("tests/test_calc.py", "AddTest", "test_add", 7)
TOP = NewTest("tests/test_calc.py", "", "test_top", 20)
NEW = NewTest("tests/test_sub.py", "SubTest", "test_sub", 4)


def test_the_runner_is_read_from_the_command() -> None:
    assert runner(["python", "-m", "pytest", "-q"]) == PYTEST
    assert runner(["/venv/bin/pytest"]) == PYTEST
    assert runner(["python3", "-m", "unittest", "discover"]) == UNITTEST
    assert runner(["go", "test", "./..."]) == runner(["npm", "test"]) == WHOLE


def test_pytest_keeps_its_options_and_runs_the_node_ids_only() -> None:
    argv = ["python", "-m", "pytest", "-q", "tests/", "-k", "add", "-x", "-p", "no:warnings",
            "-mslow", "--tb=short", "--ignore", "tests/slow", "--deselect=tests/a.py::t",
            "-W", "error", "tests/test_more.py"]

    assert selected(argv, [ADD, TOP]) == [
        "python", "-m", "pytest", "-q", "-p", "no:warnings", "--tb=short", "-W", "error", "-rA",
        "tests/test_calc.py::AddTest::test_add", "tests/test_calc.py::test_top"]


def test_unittest_discovery_is_kept_and_each_test_chosen_by_its_dotted_name() -> None:
    assert selected(["python", "-m", "unittest", "discover", "-s", "tests"], [ADD]) == [
        "python", "-m", "unittest", "discover", "-s", "tests", "-v", "-k", "*.AddTest.test_add"]
    assert selected(["python", "-m", "unittest", "-q", "tests.test_calc.AddTest"],
                    [ADD, NEW]) == [
        "python", "-m", "unittest", "-q", "-v", "tests.test_calc.AddTest.test_add",
        "tests.test_sub.SubTest.test_sub"]


def test_another_runner_runs_whole() -> None:
    assert selected(["npm", "test"], [ADD]) == ["npm", "test"]


PYTEST_RUN = """\
FAILED tests/test_calc.py::AddTest::test_add - AssertionError: -1 != 5
=========================== short test summary info ============================
PASSED tests/test_calc.py::test_top[1-2]
PASSED tests/test_calc.py::test_top[3-4]
FAILED tests/test_calc.py::AddTest::test_add - AssertionError: -1 != 5
ERROR tests/test_sub.py - ImportError: cannot import name 'sub' from 'calc'
1 failed, 2 passed, 1 error in 0.10s
"""


def test_pytest_summary_lines_say_each_tests_outcome() -> None:
    said = outcomes(["pytest"], [ADD, TOP, NEW], PYTEST_RUN, 1, ended=False)

    assert said[ADD.node] == (Outcome.FAILS, "AssertionError: -1 != 5")
    assert said[TOP.node] == (Outcome.PASSES, ""), "each parametrised case is the test"
    assert said[NEW.node][0] == Outcome.CANNOT_RUN
    assert "ImportError" in said[NEW.node][1]
    assert uncollected(PYTEST_RUN) == {"tests/test_sub.py"}


def test_pytest_names_files_from_its_rootdir_and_a_skip_is_no_run() -> None:
    run = "SKIPPED [1] test_calc.py:7: no network\nPASSED test_calc.py::test_top\n"

    said = outcomes(["pytest"], [ADD, TOP], run, 0, ended=False)

    assert said == {TOP.node: (Outcome.PASSES, "")}, "a skip names no test id: left unsaid"


UNITTEST_RUN = """\
test_add (tests.test_calc.AddTest.test_add) ... FAIL
test_top2 (tests.test_calc.AddTest.test_top2) ... hello from the test
ok
tests.test_sub (unittest.loader._FailedTest.tests.test_sub) ... ERROR

======================================================================
ERROR: tests.test_sub (unittest.loader._FailedTest.tests.test_sub)
----------------------------------------------------------------------
ImportError: Failed to import test module: tests.test_sub

======================================================================
FAIL: test_add (tests.test_calc.AddTest.test_add)
----------------------------------------------------------------------
AssertionError: -1 != 5
"""


def test_unittest_verbose_lines_and_failure_blocks_say_each_tests_outcome() -> None:
    printing = NewTest("tests/test_calc.py", "AddTest", "test_top2", 9)

    said = outcomes(["python", "-m", "unittest"], [ADD, printing, NEW], UNITTEST_RUN, 1,
                    ended=False)

    assert said[ADD.node] == (Outcome.FAILS, "")
    assert said[printing.node] == (Outcome.PASSES, ""), "its word came on a later line"
    assert said[NEW.node] == (Outcome.CANNOT_RUN, "its module does not import at the base")


def test_unittest_before_python_3_11_names_the_class_without_the_test() -> None:
    run = "test_add (tests.test_calc.AddTest) ... ok\n"

    assert outcomes(["python", "-m", "unittest"], [ADD], run, 0, ended=False) == {
        ADD.node: (Outcome.PASSES, "")}


def test_a_whole_runner_passing_at_the_base_proves_none_and_failing_proves_them_together(
) -> None:
    passed = outcomes(["npm", "test"], [ADD, NEW], "ok", 0, ended=False)
    failed = outcomes(["npm", "test"], [ADD, NEW], "1 failing", 1, ended=False)
    cut = outcomes(["npm", "test"], [ADD], "", None, ended=True)

    assert {o for o, _ in passed.values()} == {Outcome.PASSES}
    assert {o for o, _ in failed.values()} == {Outcome.TOGETHER}
    assert cut[ADD.node][0] == Outcome.UNKNOWN
    assert unsaid(True)[0] == Outcome.UNKNOWN and unsaid(False)[0] == Outcome.CANNOT_RUN


RECORD = {"key": "k", "tests": [
    {**ADD.fields(), "outcome": "fails on base", "why": "AssertionError"},
    {**TOP.fields(), "outcome": "passes on base", "why": "", "id": "P1"},
    {**NEW.fields(), "outcome": "cannot run on base", "why": "its module does not import"},
    "not a test"]}


def test_a_rounds_record_is_read_back_as_the_briefs_and_the_report_show_it() -> None:
    tests = listed(RECORD)

    assert [t["node"] for t in tests] == [ADD.node, TOP.node, NEW.node]
    assert unproven(RECORD) == [("P1", f"`{TOP.node}` passes at the base too, without the change")]
    assert [described(t) for t in tests] == [
        f"`{ADD.node}`: fails on base, passes on the change",
        f"P1 `{TOP.node}`: passes on base",
        f"`{NEW.node}`: cannot run on base (its module does not import)"]
    assert listed(None) == [] and unproven({"tests": "junk"}) == []
