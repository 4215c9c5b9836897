"""handoff.loop.mutants: small mutations of the lines a change added, outside its tests."""

from __future__ import annotations

from handoff.loop.mutants import Mutant, apply, mutants
from handoff.protocol import diffs


def diff(path: str, *added: tuple[int, str]) -> str:
    hunks = "".join(f"@@ -{n - 1},0 +{n} @@\n+{text}\n" for n, text in added)
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n{hunks}"


def nows(found: list[Mutant]) -> list[str]:
    return [m.now for m in found]


def test_each_operator_of_an_added_line_is_flipped_once_per_place() -> None:
    files = diffs.parse(diff("calc.py", (2, "    return a + b if a >= 0 and ok else -1")))

    assert nows(mutants(files)) == [
        "    return a + b if a > 0 and ok else -1",
        "    return a - b if a >= 0 and ok else -1",
        "    return a + b if a >= 0 or ok else -1",
        "    return a + b if a >= 1 and ok else -1",
        "    return a + b if a >= 0 and ok else -2"]


def test_strings_comments_and_test_files_are_left_alone() -> None:
    files = diffs.parse(diff("calc.py", (3, "    log('a + b == c')  # x == y"),
                             (4, "# 1 + 1"))
                        + diff("tests/test_calc.py", (5, "    assert add(1, 2) == 3")))

    assert mutants(files) == []


def test_first_mutations_of_every_line_come_before_any_second_and_the_limit_holds() -> None:
    files = diffs.parse(diff("a.py", (1, "x = 1 + 2"), (2, "y = 3 == 4")))

    found = mutants(files, limit=3)

    assert [(m.line, m.now) for m in found] == [(1, "x = 1 - 2"), (2, "y = 3 != 4"),
                                                (1, "x = 2 + 2")]


def test_a_mutant_is_applied_only_to_the_line_it_was_made_from() -> None:
    mutant = Mutant("calc.py", 2, "    return a + b", "    return a - b")

    assert apply("def add(a, b):\n    return a + b\n", mutant) == \
        "def add(a, b):\n    return a - b\n"
    assert apply("def add(a, b):\n    return a * b\n", mutant) is None
    assert apply("one line\n", Mutant("calc.py", 9, "x", "y")) is None
