"""handoff.loop.newtests: which tests a change added or changed, read from its -U0 diff and the
test files at the commit (nothing of them runs)."""

from __future__ import annotations

from handoff.loop.newtests import NewTest, changed_tests
from handoff.protocol import diffs

AT_COMMIT = '''\
import unittest

from calc import add


class AddTest(unittest.TestCase):
    def test_add(self) -> None:
        self.assertEqual(add(2, 3), 5)

    @unittest.skipIf(False, "never")
    def test_add_zero(self) -> None:
        self.assertEqual(add(0, 0), 0)

    class Nested:
        def test_deep(self) -> None:
            assert True


def test_top() -> None:
    assert add(1, 1) == 2


def helper() -> int:
    return 1
'''


def diff(path: str, hunks: str, old: str | None = None) -> str:
    head = f"diff --git a/{old or path} b/{path}\n"
    if old is None:
        head += f"--- a/{path}\n+++ b/{path}\n"
    return head + hunks


def read(texts: dict[str, str]):  # type: ignore[no-untyped-def]
    return lambda path: texts.get(path)


def test_a_test_whose_lines_the_change_added_is_new_with_its_class_and_line() -> None:
    # line 10: the decorator of test_add_zero (def on 11); line 20: test_top's assertion
    files = diffs.parse(diff("tests/test_calc.py", "@@ -9,0 +10 @@\n+    @unittest.skipIf\n"
                                                   "@@ -19 +20 @@\n-    x\n+    assert\n"))

    found = changed_tests(files, read({"tests/test_calc.py": AT_COMMIT}))

    assert found == [NewTest("tests/test_calc.py", "AddTest", "test_add_zero", 11),
                     NewTest("tests/test_calc.py", "", "test_top", 19)]
    assert found[0].node == "tests/test_calc.py::AddTest::test_add_zero"
    assert found[1].node == "tests/test_calc.py::test_top"


def test_a_nested_class_is_named_as_pytest_names_it_and_helpers_are_no_tests() -> None:
    # test_deep is lines 15-16; helper's body is line 24
    files = diffs.parse(diff("tests/test_calc.py", "@@ -15 +16 @@\n- a\n+ b\n"
                                                   "@@ -23,0 +24 @@\n+    return 1\n"))

    found = changed_tests(files, read({"tests/test_calc.py": AT_COMMIT}))

    assert [t.node for t in found] == ["tests/test_calc.py::AddTest::Nested::test_deep"]


def test_only_test_files_count_and_a_deleted_or_unreadable_one_is_left_out() -> None:
    source = diff("calc.py", "@@ -1,0 +2 @@\n+def test_like(): pass\n")
    gone = "diff --git a/tests/test_old.py b/tests/test_old.py\ndeleted file mode 100644\n" \
           "--- a/tests/test_old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-def test_x(): pass\n"
    unreadable = diff("tests/test_big.py", "@@ -0,0 +1 @@\n+def test_big(): pass\n")
    texts = {"calc.py": "\ndef test_like(): pass\n", "tests/test_old.py": "def test_x(): pass\n"}

    assert changed_tests(diffs.parse(source + gone + unreadable), read(texts)) == []


def test_a_path_the_plan_names_is_a_test_file_too() -> None:
    files = diffs.parse(diff("qa/checks.py", "@@ -0,0 +1,2 @@\n+def test_q():\n+    pass\n"))
    texts = {"qa/checks.py": "def test_q():\n    pass\n"}

    assert changed_tests(files, read(texts)) == []
    assert [t.name for t in changed_tests(files, read(texts), named={"qa"})] == ["test_q"]


def test_a_python_file_that_does_not_parse_has_no_tests_and_other_languages_use_patterns(
) -> None:
    broken = diff("tests/test_broken.py", "@@ -0,0 +1 @@\n+def test_x(:\n")
    spec = diff("web/add.test.js", "@@ -4,0 +5 @@\n+  expect(add(1, 2)).toBe(3);\n")
    js = "import {add} from './add';\n\ntest('adds', () => {\n  expect(1).toBe(1);\n" \
         "  expect(add(1, 2)).toBe(3);\n});\n\ntest('subtracts', () => {});\n"

    found = changed_tests(diffs.parse(broken + spec), read({"tests/test_broken.py": "def test_x(:\n",
                                                            "web/add.test.js": js}))

    assert found == [NewTest("web/add.test.js", "", "adds", 3)]
