"""handoff.loop.testcount: how many tests a gate's output says ran, read from the real output
of the real runners, and each expected count taken from the same runner's own
machine-readable account of the same run, never from the parser.

pytest, unittest and node's test runner run here, live. jest, vitest, mocha (from the npm
registry) and cargo ran once, in tests/fixtures/testcount/capture.py, which kept their output
and their own JSON counts (expected.json). go test, RSpec and PHPUnit are not installed here:
their lines below are written by hand in the format their source prints, and say so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from handoff.loop.gate import Kept
from handoff.loop.testcount import Count, compared, failing, fewer, read
from tests.paths import TESTS

FIXTURES = TESTS / "fixtures" / "testcount"
EXPECTED: dict[str, dict[str, object]] = json.loads(
    (FIXTURES / "expected.json").read_text(encoding="utf-8"))


def merged(argv: list[str], cwd: Path) -> str:
    """What argv printed, stdout and stderr in one pipe, as the gate reads a command."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120, check=False).stdout


def numbers(count: Count | None) -> tuple[int, int, int] | None:
    return None if count is None else (count.ran, count.failed, count.skipped)


def pytest_run(folder: Path, *args: str) -> tuple[str, ElementTree.Element]:
    """A real pytest run's output, and its junit XML's testsuite (pytest's own count)."""
    junit = folder / "junit.xml"
    out = merged([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:libtmux",
                  f"--junitxml={junit}", *args], folder)
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert suite is not None
    return out, suite


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_captured_runs_of_jest_vitest_mocha_and_cargo(name: str) -> None:
    """Their own JSON counts of the same run (colour escapes, several cargo test binaries, a
    run that stopped at the first failing binary, name filters)."""
    expected = EXPECTED[name]
    count = read((FIXTURES / f"{name}.txt").read_text(encoding="utf-8"))
    assert numbers(count) == (expected["ran"], expected["failed"], expected["skipped"])


def kept(text: str, limit: int) -> str:
    """text as the gate keeps an output: its head and tail, the middle cut and said so."""
    keep = Kept(limit)
    keep.add(text.encode("utf-8"))
    return keep.text()


def test_go_rspec_and_phpunit_lines_written_by_hand_in_their_formats() -> None:
    """Not installed here: each line follows the format string of the tool's own source
    (go's testing package `--- %s: %s (%s)` and test2json's events, RSpec's totals line,
    PHPUnit's result printer); the counts are the lines' own numbers."""
    go_verbose = ("=== RUN   TestAdd\n--- PASS: TestAdd (0.00s)\n=== RUN   TestSub\n"
                  "=== RUN   TestSub/neg\n    --- FAIL: TestSub/neg (0.00s)\n"
                  "--- FAIL: TestSub (0.00s)\n=== RUN   TestSlow\n"
                  "    calc_test.go:20: slow\n--- SKIP: TestSlow (0.00s)\nFAIL\n"
                  "FAIL\texample.com/calc\t0.002s\n")
    assert numbers(read(go_verbose)) == (3, 2, 1)
    go_json = "\n".join([
        '{"Action":"run","Package":"example.com/calc","Test":"TestAdd"}',
        '{"Action":"pass","Package":"example.com/calc","Test":"TestAdd","Elapsed":0}',
        '{"Action":"skip","Package":"example.com/calc","Test":"TestSlow","Elapsed":0}',
        '{"Action":"pass","Package":"example.com/calc","Elapsed":0.002}'])
    assert numbers(read(go_json)) == (1, 0, 1)
    assert read("ok  \texample.com/calc\t0.002s\n") is None  # without -v: no test named
    assert numbers(read("Finished in 0.01 seconds (files took 0.1 seconds to load)\n"
                        "5 examples, 1 failure, 2 pending\n")) == (3, 1, 2)
    assert numbers(read("0 examples, 0 failures, 1 error occurred outside of examples\n")) == (
        1, 1, 0)
    assert numbers(read("OK (3 tests, 5 assertions)\n")) == (3, 0, 0)
    assert numbers(read("FAILURES!\nTests: 6, Assertions: 9, Failures: 1, Errors: 1, "
                        "Skipped: 1, Incomplete: 1.\n")) == (4, 2, 2)
    assert numbers(read("No tests executed!\n")) == (0, 0, 0)


def test_an_output_with_no_summary_is_unknown() -> None:
    assert read("") is None
    assert read("make: *** No rule to make target 'test'.  Stop.\n") is None
    assert read("collected 3 items\n3 tests collected in 0.01s\n") is None


def test_the_comparison_says_how_many_fewer() -> None:
    base, now = Count(12, 0, 1, ("pytest",)), Count(9, 0, 4, ("pytest",))
    assert fewer(base, now) == 3
    assert compared(base, now) == ("12 tests ran at the base, 9 at this commit (3 fewer); "
                                   "4 skipped or left out, 1 at the base")
    assert fewer(now, base) == 0 and compared(now, base).endswith("(3 more)")
    assert compared(base, base) == "12 tests ran at the base, 12 at this commit"
    # an unknown end compares to nothing
    assert fewer(base, None) == 0 and fewer(None, now) == 0
    assert compared(base, None).startswith("tests run: 12 at the base, unknown at this commit")
    assert compared(None, None).startswith("tests run: unknown at the base and at this commit")


def test_a_count_as_the_state_keeps_it() -> None:
    count = Count(5, 2, 3, ("pytest", "jest"), cut=True)
    assert Count.from_fields(json.loads(json.dumps(count.fields()))) == count
    assert Count.from_fields(None) is None
    assert Count.from_fields({"ran": "5", "failed": 0, "skipped": 0}) is None


def test_the_failing_tests_are_named_as_each_runner_names_them() -> None:
    output = ("F.\n======\nFAIL: test_add (tests.test_calc.AddTest.test_add)\n------\n"
              "ERROR: test_twice (unittest.loader._FailedTest.test_twice)\n"
              "FAILED (failures=1, errors=1)\n"
              "FAILED tests/test_a.py::test_b - assert 1 == 2\nERROR tests/test_c.py\n"
              "FAILED tests/test_a.py::test_b - assert 1 == 2\n"
              "    --- FAIL: TestRound (0.00s)\ntest units::rounds ... FAILED\n")
    assert failing(output) == ["test_add (tests.test_calc.AddTest.test_add)",
                               "test_twice (unittest.loader._FailedTest.test_twice)",
                               "tests/test_a.py::test_b", "tests/test_c.py", "TestRound",
                               "units::rounds"]
    assert failing(output, limit=2) == failing(output)[:2]
    # a summary line, a passing run, an import that failed before any test: no names
    assert failing("FAILED (errors=3)\nOK\n3 passed in 0.1s\nSyntaxError: invalid syntax\n") == []
