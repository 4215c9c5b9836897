"""The tests a change adds or changes: each test definition of a test file at the commit that
has a line the change added (its decorators and body included). handoff.loop.proof runs them
at the base, to show that each one fails there: a test that passes without the change proves
nothing about it.

Python files are read with `ast` (nothing of them runs): a test is a `test_*` function at the
top of the module or a method of a class, named as pytest and unittest name it. Other
languages are read with the weakened-tests check's patterns, a definition reaching to the
next one; their tests are run together, never one by one (handoff.loop.proving).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from handoff.loop import weakened
from handoff.protocol.diffs import DELETED, FileDiff


@dataclass(frozen=True)
class NewTest:
    """One test the change added or changed, where it is at the commit."""

    file: str
    #: its class, when it is a method ('' for a function at the top of a module)
    cls: str
    name: str
    line: int

    @property
    def node(self) -> str:
        """As pytest names it: tests/test_calc.py::AddTest::test_add."""
        return "::".join(part for part in (self.file, self.cls, self.name) if part)

    def fields(self) -> dict[str, object]:
        return {"file": self.file, "cls": self.cls, "name": self.name, "line": self.line}


def changed_tests(files: Sequence[FileDiff], read: Callable[[str], str | None],
                  named: Collection[str] = ()) -> list[NewTest]:
    """The tests of files (the change's -U0 diff) that have an added line, by file and line;
    read: a file's text at the commit (None: not readable there); named: the test paths the
    plan's commands name (handoff.loop.weakened.named_paths)."""
    found: list[NewTest] = []
    for diff in files:
        path = diff.new_path
        if diff.status == DELETED or diff.binary or not weakened.is_test_path(path, named):
            continue
        added = {line.number for hunk in diff.hunks for line in hunk.added}
        text = read(path) if added else None
        if text is None:
            continue
        spans = _python_tests(path, text) if path.endswith(".py") else _other_tests(path, text)
        found += [test for test, first, last in spans
                  if any(first <= n <= last for n in added)]
    return sorted(found, key=lambda t: (t.file, t.line, t.name))


def _python_tests(path: str, text: str) -> list[tuple[NewTest, int, int]]:
    """(test, first line, last line) of each test function and method; none for a file that
    does not parse (its failure is the gate's to show)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    out: list[tuple[NewTest, int, int]] = []

    def visit(body: Sequence[ast.stmt], cls: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.name.startswith("test"):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                out.append((NewTest(path, cls, node.name, node.lineno), first,
                            node.end_lineno or node.lineno))
            elif isinstance(node, ast.ClassDef):
                visit(node.body, f"{cls}::{node.name}" if cls else node.name)

    visit(tree.body, "")
    return out


def _other_tests(path: str, text: str) -> list[tuple[NewTest, int, int]]:
    lines = text.splitlines()
    starts: list[tuple[int, str]] = []
    for number, line in enumerate(lines, start=1):
        for pattern in weakened.DEFINITIONS:
            match = pattern.match(line.strip())
            if match:
                starts.append((number, match.group(match.lastindex or 1)))
                break
    ends = [n - 1 for n, _ in starts[1:]] + [len(lines)]
    return [(NewTest(path, "", name[:200], number), number, end)
            for (number, name), end in zip(starts, ends, strict=True)]
