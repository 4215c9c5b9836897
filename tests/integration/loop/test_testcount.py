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
import shutil
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from handoff.loop.gate import CAP
from handoff.loop.testcount import compared, fewer, read
from tests.unit.loop.test_testcount import EXPECTED, FIXTURES, kept, merged, numbers, pytest_run

MIXED_PYTEST = '''\
import pytest

def test_ok1(): assert True
def test_ok2(): assert 1 == 1
def test_fail(): assert 1 == 2
@pytest.mark.skip(reason="no")
def test_skipped(): pass
@pytest.mark.xfail
def test_xfail(): assert False
@pytest.mark.xfail(strict=False)
def test_xpass(): assert True
@pytest.fixture
def broken(): raise RuntimeError("fixture")
def test_error(broken): pass
def test_deselect_me(): pass
'''
MIXED_UNITTEST = '''\
import unittest

class T(unittest.TestCase):
    def test_ok1(self): pass
    def test_ok2(self): pass
    def test_fail(self): self.assertEqual(1, 2)
    def test_err(self): raise RuntimeError("boom")
    @unittest.skip("no")
    def test_skip(self): pass
    @unittest.expectedFailure
    def test_xfail(self): self.assertEqual(1, 2)
    @unittest.expectedFailure
    def test_xpass(self): pass
    def test_subtests(self):
        for i in range(3):
            with self.subTest(i=i):
                self.assertNotEqual(i, 1)
'''
#: unittest's own account of a run: its TestResult, the object its text is printed from
UNITTEST_RESULT = '''\
import json, sys, unittest
result = unittest.TestResult()
unittest.defaultTestLoader.loadTestsFromName(sys.argv[1]).run(result)
skipped = len(result.skipped) + len(result.expectedFailures)
print(json.dumps({"ran": result.testsRun - skipped, "skipped": skipped,
                  "failed": len(result.failures) + len(result.errors)
                            + len(result.unexpectedSuccesses)}))
'''
NODE_TESTS = '''\
import test, { describe, it } from 'node:test';
import assert from 'node:assert';
test('ok1', () => {});
test('ok2', () => {});
test('fail', () => { assert.strictEqual(1, 2); });
test('skipped', { skip: true }, () => {});
test('later', { todo: true }, () => {});
test('parent', async (t) => { await t.test('child', () => {}); await t.test('child2', () => {}); });
describe('suite', () => { it('in a suite', () => {}); });
'''
#: node's own account: a reporter counting the events its runner emits (suites aside, as its
#: own summary counts them apart)
NODE_REPORTER = '''\
export default async function* count(source) {
  const n = { ran: 0, failed: 0, skipped: 0 };
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const data = event.data;
    if (data.details && data.details.type === 'suite') continue;
    if (data.skip || data.todo) n.skipped++;
    else { n.ran++; if (event.type === 'test:fail') n.failed++; }
  }
  yield JSON.stringify(n) + "\\n";
}
'''


def junit_numbers(suite: ElementTree.Element, deselected: int = 0) -> tuple[int, int, int]:
    """(ran, failed, skipped) from pytest's junit XML, which counts an expected failure as
    skipped and leaves deselected tests out."""
    tests, skipped = int(suite.get("tests", "0")), int(suite.get("skipped", "0"))
    failed = int(suite.get("failures", "0")) + int(suite.get("errors", "0"))
    return tests - skipped, failed, skipped + deselected


@pytest.mark.parametrize("verbosity", [[], ["-q"], ["-v"]])
def test_pytest_every_outcome_at_every_verbosity(tmp_path: Path, verbosity: list[str]) -> None:
    (tmp_path / "test_mix.py").write_text(MIXED_PYTEST)
    out, suite = pytest_run(tmp_path, *verbosity)
    assert numbers(read(out)) == junit_numbers(suite)
    assert read(out) is not None and read(out).runners == ("pytest",)  # type: ignore[union-attr]


def test_pytest_deselected_tests_are_left_out_of_those_that_ran(tmp_path: Path) -> None:
    (tmp_path / "test_mix.py").write_text(MIXED_PYTEST)
    _, everything = pytest_run(tmp_path)
    out, suite = pytest_run(tmp_path, "-k", "not deselect_me")
    deselected = int(everything.get("tests", "0")) - int(suite.get("tests", "0"))
    assert deselected == 1
    assert numbers(read(out)) == junit_numbers(suite, deselected)
    before = read(merged([sys.executable, "-m", "pytest", "-p", "no:cacheprovider"], tmp_path))
    assert fewer(before, read(out)) == 1


def test_pytest_a_collection_error_and_no_tests(tmp_path: Path) -> None:
    (tmp_path / "test_bad.py").write_text("import no_such_module_here\n")
    (tmp_path / "test_good.py").write_text("def test_a(): pass\n")
    out, suite = pytest_run(tmp_path)
    assert "error during collection" in out
    assert numbers(read(out)) == junit_numbers(suite)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "test_none.py").write_text("x = 1\n")
    out, suite = pytest_run(empty)
    assert int(suite.get("tests", "-1")) == 0 and numbers(read(out)) == (0, 0, 0)


def test_pytest_with_its_summary_turned_off_is_unknown(tmp_path: Path) -> None:
    """-qq prints no count: none is made up."""
    (tmp_path / "test_mix.py").write_text(MIXED_PYTEST)
    out, _ = pytest_run(tmp_path, "-qq")
    assert "FAILED test_mix.py::test_fail" in out
    assert read(out) is None


def test_pytest_the_last_summary_counts_not_one_a_failing_test_printed(tmp_path: Path) -> None:
    """A failing test's captured output holds another run's summary (pytester, a test that
    runs pytest): it is printed before the run's own, which is the one read."""
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "test_many.py").write_text("".join(f"def test_{i}(): pass\n" for i in range(7)))
    (tmp_path / "test_outer.py").write_text(
        "import subprocess, sys\n"
        "def test_ok(): pass\n"
        "def test_runs_another(): \n"
        f"    out = subprocess.run([sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider', "
        f"{str(inner)!r}], capture_output=True, text=True).stdout\n"
        "    print(out)\n"
        "    assert False\n")
    out, suite = pytest_run(tmp_path, "test_outer.py")
    assert "7 passed" in out  # the inner run's summary is in the output
    assert numbers(read(out)) == junit_numbers(suite)


def test_unittest_every_outcome(tmp_path: Path) -> None:
    (tmp_path / "test_u.py").write_text(MIXED_UNITTEST)
    own = json.loads(merged([sys.executable, "-c", UNITTEST_RESULT, "test_u"], tmp_path))
    for verbosity in ([], ["-q"], ["-v"]):
        out = merged([sys.executable, "-m", "unittest", *verbosity, "test_u"], tmp_path)
        assert numbers(read(out)) == (own["ran"], own["failed"], own["skipped"]), out[-300:]


def test_unittest_all_passing_and_none(tmp_path: Path) -> None:
    (tmp_path / "test_ok.py").write_text(
        "import unittest\nclass U(unittest.TestCase):\n"
        "    def test_a(self): pass\n    def test_b(self): pass\n")
    own = json.loads(merged([sys.executable, "-c", UNITTEST_RESULT, "test_ok"], tmp_path))
    assert numbers(read(merged([sys.executable, "-m", "unittest", "test_ok"], tmp_path))) == (
        own["ran"], own["failed"], own["skipped"])
    (tmp_path / "none").mkdir()
    out = merged([sys.executable, "-m", "unittest", "discover", "-s", "none"], tmp_path)
    assert numbers(read(out)) == (0, 0, 0)


def test_node_test_runner(tmp_path: Path) -> None:
    # .ci/run installs node (the real CLIs need it): missing here is a failure, not a skip
    assert shutil.which("node"), "node is not installed: install nodejs (as .ci/run does)"
    (tmp_path / "a.test.mjs").write_text(NODE_TESTS)
    (tmp_path / "count.mjs").write_text(NODE_REPORTER)
    own = json.loads(merged(["node", "--test", "--test-reporter=./count.mjs", "a.test.mjs"],
                            tmp_path))
    for reporter in ("tap", "spec"):
        out = merged(["node", "--test", f"--test-reporter={reporter}", "a.test.mjs"], tmp_path)
        assert numbers(read(out)) == (own["ran"], own["failed"], own["skipped"]), out[-400:]


def test_two_runners_in_one_output_are_added_up(tmp_path: Path) -> None:
    """`make test` running pytest, then jest: both runs count."""
    (tmp_path / "test_mix.py").write_text(MIXED_PYTEST)
    out, suite = pytest_run(tmp_path)
    jest = EXPECTED["jest-mixed"]
    both = read(out + (FIXTURES / "jest-mixed.txt").read_text(encoding="utf-8"))
    ran, failed, skipped = junit_numbers(suite)
    assert numbers(both) == (ran + int(str(jest["ran"])), failed + int(str(jest["failed"])),
                             skipped + int(str(jest["skipped"])))
    assert both is not None and set(both.runners) == {"pytest", "jest"}


def test_a_cut_output_reads_its_last_summary_but_not_lines_it_adds_up(tmp_path: Path) -> None:
    (tmp_path / "test_loud.py").write_text(
        "def test_ok(): pass\n"
        "def test_loud():\n    print('x' * 200_000)\n    assert False\n")
    out, suite = pytest_run(tmp_path)
    cut = kept(out, CAP)
    assert "bytes cut by handoff" in cut
    count = read(cut)
    assert numbers(count) == junit_numbers(suite) and count is not None and count.cut
    assert "the output was cut" in compared(count, count)
    # cargo's results are added up binary by binary: one may have been in the cut middle
    cargo = (FIXTURES / "cargo-mixed.txt").read_text(encoding="utf-8")
    assert read(cargo) is not None and read(kept(cargo, 2000)) is None
